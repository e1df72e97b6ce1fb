"""Attributes written out for onnx's whole-model inference of operators it types by their
function body.

A few ONNX operators have no inference function of their own: onnx types them by expanding
their function body, whose nodes may read the operator's attributes by reference. onnx
1.23 resolves such a reference to nothing when the node leaves the attribute at its
default, and then rejects the body (MeanVarianceNormalization without `axes`, opset 13 on:
"One and only one of the attributes 'value', 'value_*' or 'sparse_value' must be
specified for a Constant node"), a model onnxruntime runs; onnx.checker's full check
rejects it alike. The exported model inference reads gets those defaults written on such
nodes (`write_expanded_defaults`: loading and saving alone leave a model as it was), and a
compilation writes them on the nodes themselves before it infers shapes
(`explicit_expanded_defaults`), so that the model it writes passes the checker. One such
node alone (the ES builder's, a pass's) is typed through a one-node model, where onnx
expands the body (`infer_by_body`): its per-node inference gives their outputs no shape.
"""

from __future__ import annotations

from functools import lru_cache

import onnx
import onnx.defs

from ge.graph.attributes import decode_attr
from ge.graph.domains import proto_graphs
from ge.graph.graph import Graph
from ge.graph.node import Node

__all__ = ["explicit_expanded_defaults", "infer_by_body", "typed_by_body",
           "write_expanded_defaults"]


@lru_cache(maxsize=1024)
def _defaults(op_type: str, version: int) -> tuple[onnx.AttributeProto, ...]:
    """The defaulted attributes of ONNX operator `op_type` at opset `version` when onnx types
    it by its function body (`typed_by_body`), else ()."""
    try:
        schema = onnx.defs.get_schema(op_type, version, "")
    except onnx.defs.SchemaError:
        return ()
    if not typed_by_body(schema):
        return ()
    return tuple(a.default_value for a in schema.attributes.values() if a.default_value.type)


def _expanded_nodes(root: Graph) -> list[Node]:
    """The nodes of `root` and its bodies of an ONNX operator onnx types by its function
    body that has defaulted attributes (`_defaults`), through the op-type index: the
    operators the model holds are asked about, not onnx's whole schema list (listing it
    took 7 ms per process, an eighth of a small model's compile)."""
    version = root.get_opset_version("") or 1
    return [node for g in (root, *root.get_all_subgraphs()) for op in g.op_types()
            if _defaults(op, version) for node in g.nodes_of_type(op, "")]


def explicit_expanded_defaults(root: Graph) -> int:
    """Set on each node of `root` (and its bodies) that onnx types by its function body the
    attributes it leaves at their default (ONNX's domain at the model's opset); how many."""
    version = root.get_opset_version("") or 1
    count = 0
    for node in _expanded_nodes(root):
        for default in _defaults(node.type, version):
            if not node.has_attr(default.name):
                node.set_attr(default.name, decode_attr(default)[1])
                count += 1
    return count


def write_expanded_defaults(root: Graph, graph: onnx.GraphProto, version: int) -> None:
    """Write, on the nodes of exported `graph` (and its bodies) that onnx types by their
    function body, the attributes they leave at the schema's default (opset `version` of
    ONNX's domain). Found through `root`'s op-type index: a model without such nodes costs
    no walk of its nodes."""
    wanted = {node.type for node in _expanded_nodes(root)}
    if not wanted:
        return
    for body in proto_graphs(graph):
        for node in body.node:
            if node.op_type not in wanted or node.domain not in ("", "ai.onnx"):
                continue
            present = {a.name for a in node.attribute}
            node.attribute.extend(a for a in _defaults(node.op_type, version)
                                  if a.name not in present)


def typed_by_body(schema: onnx.defs.OpSchema) -> bool:
    """Whether onnx types a node of `schema` only by expanding its function body."""
    return not schema.has_type_and_shape_inference_function and (
        schema.has_function  # type: ignore[attr-defined]
        or schema.has_context_dependent_function)  # type: ignore[attr-defined]


def infer_by_body(proto: onnx.NodeProto, types: dict[str, onnx.TypeProto],
                  data: dict[str, onnx.TensorProto],
                  opset_imports: list[onnx.OperatorSetIdProto]) -> dict[str, onnx.TypeProto]:
    """What onnx infers for the outputs of node `proto` (of an operator `typed_by_body`)
    from its inputs' `types` and constant `data`, by name: the node alone in a model, its
    defaulted attributes written out, inferred strictly (a refusal raises)."""
    node = onnx.NodeProto()
    node.CopyFrom(proto)
    version = next((o.version for o in opset_imports if o.domain in ("", "ai.onnx")), 1)
    present = {a.name for a in node.attribute}
    node.attribute.extend(a for a in _defaults(node.op_type, version) if a.name not in present)
    inputs = [onnx.helper.make_value_info(name, tp) for name, tp in types.items()
              if name not in data]
    graph = onnx.helper.make_graph(
        [node], "node", inputs, [onnx.ValueInfoProto(name=o) for o in node.output if o],
        initializer=list(data.values()))
    model = onnx.helper.make_model(graph, opset_imports=opset_imports)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    return {vi.name: vi.type for vi in (*inferred.graph.value_info, *inferred.graph.output)
            if vi.type.WhichOneof("value") is not None}
