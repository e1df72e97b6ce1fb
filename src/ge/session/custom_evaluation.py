"""Custom operators where ge runs a model itself: which operators of a model onnxruntime
does not run, the registered custom operators (`ge.ops.register_op`) a model needs, and
their kernels or decompositions as operators of onnx's `ReferenceEvaluator`, whose values
are checked against the types the model declares (`KernelError`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from onnx import AttributeProto

from ge._text import error_text
from ge.errors import MissingOperatorError
from ge.graph.attributes import decode_attr
from ge.graph.domains import ONNX_DOMAINS, proto_graphs
from ge.graph.graph import Graph
from ge.graph.node import Node
from ge.graph.places import node_label
from ge.graph.tensor import Tensor
from ge.graph.tensor_desc import TensorDesc
from ge.graph.value_info import desc_from_value_info, is_known_type
from ge.ops.custom_calls import call_kernel
from ge.ops.evaluation import evaluate_node
from ge.ops.registry import CustomOp, get_custom_op
from ge.ops.runtime_ops import runtime_domains

if TYPE_CHECKING:
    from onnx.reference.op_run import OpRun

__all__ = ["custom_ops_of", "custom_output_descs", "declared_types", "foreign_nodes",
           "op_run_class", "runs_in_onnxruntime"]


def runs_in_onnxruntime(domain: str) -> bool:
    """Whether onnxruntime runs the operators of `domain` itself (ONNX's own domains and
    onnxruntime's, `com.microsoft` ...): a node of any other domain needs a custom operator
    registered with a kernel or a decomposition."""
    return domain in ONNX_DOMAINS or domain in runtime_domains()


def _all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == AttributeProto.GRAPH:
                yield from _all_nodes(attr.g)
            elif attr.type == AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    yield from _all_nodes(sub)


def custom_ops_of(model: onnx.ModelProto) -> list[CustomOp]:
    """The registered custom operators `model` uses (subgraphs and functions included);
    `MissingOperatorError` when it uses an operator of another domain that neither
    onnxruntime, a function of the model nor a registered custom operator defines."""
    found: dict[tuple[str, str], CustomOp] = {}
    defined = {(f.domain, f.name) for f in model.functions}
    missing: set[str] = set()
    nodes = [*_all_nodes(model.graph), *(n for f in model.functions for n in f.node)]
    for node in nodes:
        key = (node.domain, node.op_type)
        if key not in found and key not in defined and not runs_in_onnxruntime(node.domain):
            custom = get_custom_op(node.op_type, node.domain)
            if custom is not None:
                found[key] = custom
            else:
                missing.add(f"{node.domain}::{node.op_type}")
    if missing:
        raise MissingOperatorError(
            f"graph {model.graph.name!r} uses {', '.join(sorted(missing))}, which no loaded "
            "plugin registers (ge.ops.register_op with a kernel or a decomposition) and no "
            "function of the model defines: load the plugin that registers it (--pass-path "
            "or ASCEND_GE_PY_PASS_PATH; in Python, pass_paths= or ge.testing.load_passes)")
    return list(found.values())


def _decomposed(custom: CustomOp, inputs: tuple[Any, ...], attrs: dict[str, Any],
                num_outputs: int) -> list[np.ndarray]:
    """A decomposition-only operator computed by `ge.ops.evaluate_node` on constant inputs."""
    graph = Graph("decomposition")
    node = graph.add_node(custom.spec.op_type, domain=custom.spec.domain,
                          num_inputs=len(inputs), num_outputs=num_outputs, attrs=attrs)
    for i, value in enumerate(inputs):
        if value is not None:
            graph.add_data_edge(graph.add_const(Tensor(np.asarray(value))), 0, node, i)
    return [t.numpy() for t in evaluate_node(node)]


def op_run_class(custom: CustomOp, declared: Mapping[str, TensorDesc]) -> type[OpRun]:
    """An `OpRun` subclass the reference evaluator calls for the operator's nodes.

    Attributes reach the kernel as keyword arguments, decoded the way `Node.get_attr` does,
    with the schema's defaults filled in (as in constant evaluation). Its values are checked
    against the output types the model declares (`declared`, by value name): `KernelError`.
    """
    from onnx.reference.op_run import OpRun  # (imported when first evaluated: see evaluation)

    spec = custom.spec
    defaults = {k: a.default for k, a in spec.attributes.items() if a.default is not None}

    def _run(self: OpRun, *inputs: Any, **_decoded_by_onnx: Any) -> tuple[Any, ...]:
        node = self.onnx_node
        attrs = dict(defaults)
        attrs.update((a.name, decode_attr(a)[1]) for a in node.attribute)
        count = len(node.output)
        if custom.kernel is not None:
            label = node_label(node.op_type, node.name, domain=node.domain,
                               outputs=node.output)
            expected = [declared.get(name) if name else None for name in node.output]
            results = call_kernel(custom, inputs, attrs, label, expected, node_name=node.name)
            return tuple(np.asarray(r) for r in results)
        try:
            results = _decomposed(custom, inputs, attrs, count)
        except Exception as err:
            # Not a TypeError: OpRun.run would replace the message with a generic one.
            raise RuntimeError(f"custom operator {spec.domain}::{spec.op_type} (node "
                               f"{node.name!r}) failed: {error_text(err)}") from err
        return tuple(np.asarray(r) for r in results[:count])

    return type(spec.op_type, (OpRun,), {"op_domain": spec.domain, "_run": _run})


def foreign_nodes(graph: Graph) -> Iterator[Node]:
    """The nodes of `graph` and its subgraphs of a domain onnxruntime does not run itself
    (a custom operator's, a call of a model-local function), found through the op-type
    index: a model without them costs no scan of its nodes."""
    for g in (graph, *graph.get_all_subgraphs()):
        for op_type in g.op_types():
            if g.count_of_type(op_type, None) == g.count_of_type(op_type):
                continue  # ONNX's operator only
            for node in g.nodes_of_type(op_type, None):
                if node.domain and not runs_in_onnxruntime(node.domain):
                    yield node


def custom_output_descs(graph: Graph) -> dict[str, TensorDesc]:
    """The known output descs of `graph`'s custom-domain nodes by value name (subgraphs
    included): what their kernels' values must fit when the model runs exported without
    value_info."""
    found: dict[str, TensorDesc] = {}
    for node in foreign_nodes(graph.root_graph()):
        for i, name in enumerate(node.get_output_names()):
            if name and node.has_output_desc(i):
                found[name] = node.get_output_desc(i)
    return found


def declared_types(model: onnx.ModelProto, customs: Iterable[CustomOp]) -> dict[str, TensorDesc]:
    """The descs the model declares (value_info, graph outputs) for the outputs of the nodes
    of `customs`' operators, by value name: what their kernels' values must fit."""
    keys = {c.key for c in customs}
    wanted = {name for node in _all_nodes(model.graph) if (node.domain, node.op_type) in keys
              for name in node.output if name}
    found: dict[str, TensorDesc] = {}
    for graph in proto_graphs(model.graph):
        for vi in (*graph.value_info, *graph.output):
            if vi.name in wanted and is_known_type(vi.type):
                found[vi.name] = desc_from_value_info(vi)
    return found
