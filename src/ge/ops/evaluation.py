"""Constant evaluation: the outputs of a node whose inputs are all constants.

Standard operators run in onnx's reference evaluator on a one-node model (every operator
of every opset, no session to build); custom operators run their numpy kernel, or their
decomposition (built by `ge.es`, which installs the builder hook at import) in the same
evaluator.

A node of an operator version the reference evaluator does not compute as written (Softmax
before opset 13, see `ge.ops.reference_versions`) is refused with a
`ConstantEvaluationError`: its values would be those of another version. A few operators
run ge's kernels instead of the evaluator's (`ge.ops.runtime_kernels`), which compute what
onnxruntime computes where the evaluator's lose precision.

`evaluate_node` builds that evaluator for each call, with the inputs as initializers.
Building it takes most of the time of a small evaluation (~60 us of ~70), so a caller
evaluating many nodes (constant folding) uses a `NodeEvaluator`: it keeps one evaluator
per operator signature (domain, type, opsets, attributes, which inputs and outputs are
present) and feeds it the input values, which runs the same operator implementation on
the same arrays, hence gives the same results.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ge.errors import ConstantEvaluationError
from ge.graph.attributes import GRAPH_KINDS
from ge.graph.graph import Graph
from ge.graph.keys import hashable_value
from ge.graph.node import Node, is_const
from ge.graph.places import ir_node_label
from ge.graph.tensor import Tensor
from ge.graph.types import DataType, data_type_from_numpy
from ge.ops.custom_calls import call_kernel
from ge.ops.inference import is_custom_node
from ge.ops.onnx_node import (
    STRUCTURAL,
    const_value,
    input_value_name,
    node_proto,
    opset_imports_of,
    outer_inputs,
)
from ge.ops.reference_versions import version_gap
from ge.ops.registry import CustomOp, get_custom_op

if TYPE_CHECKING:
    from onnx.reference import ReferenceEvaluator

__all__ = ["NodeEvaluator", "Signature", "evaluate_node", "is_constant_foldable",
           "set_decomposition_builder"]

# (custom op, input values, attrs) -> Graph computing the op from its decomposition.
DecompositionBuilder = Callable[[CustomOp, list[Tensor], dict[str, Any]], Graph]
_decomposition_builder: DecompositionBuilder | None = None


def set_decomposition_builder(builder: DecompositionBuilder | None) -> None:
    """Install the function that turns a decomposition into a Graph (`ge.es` does this)."""
    global _decomposition_builder
    _decomposition_builder = builder


def _inputs(node: Node) -> list[Tensor | None]:
    values: list[Tensor | None] = []
    for i in range(node.get_inputs_size()):
        if node.get_input_producer(i) is None:
            values.append(None)
            continue
        value = const_value(node, i)
        if value is None:
            raise ConstantEvaluationError(
                f"{ir_node_label(node)}: input {i} is not a constant",
                nodes=[node.name])
        values.append(value)
    return values


def is_constant_foldable(node: Node) -> bool:
    """True when every connected input (and outer value of its subgraphs) is a `Const`."""
    if node.type in STRUCTURAL and not node.domain:
        return False
    for i in range(node.get_inputs_size()):
        if node.get_input_producer(i) is not None and const_value(node, i) is None:
            return False
    return all(is_const(src) for src, _ in outer_inputs(node).values())


def _check_version(node: Node) -> None:
    """Refuse a node of an operator version the reference evaluator does not compute as
    written (`ge.ops.reference_versions`): its values would be another version's."""
    gap = version_gap(node)
    if gap is not None:
        raise ConstantEvaluationError(f"{ir_node_label(node)} is not evaluated: {gap}",
                                      nodes=[node.name])


def reference_evaluator(model: onnx.ModelProto, new_ops: Sequence[type] = ()
                        ) -> ReferenceEvaluator:
    """onnx's `ReferenceEvaluator` of `model` with `new_ops` and ge's kernels
    (`ge.ops.runtime_kernels`). `onnx.reference` is imported here, when something is first
    evaluated: importing it costs ~60-90 ms, which a compilation folding nothing (a dynamo
    export, folded already) need not pay."""
    from onnx.reference import ReferenceEvaluator

    from ge.ops.runtime_kernels import RUNTIME_KERNELS

    return ReferenceEvaluator(model, new_ops=[*new_ops, *RUNTIME_KERNELS])


def _run_model(model: onnx.ModelProto, feeds: dict[str, np.ndarray], what: str) -> list[Any]:
    try:
        return list(reference_evaluator(model).run(None, feeds))
    except Exception as err:
        raise ConstantEvaluationError(f"{what}: evaluation failed: {err}") from err


def _evaluate_custom(node: Node, values: list[Tensor | None]) -> list[Tensor]:
    custom = get_custom_op(node.type, node.domain)
    what = ir_node_label(node)
    if custom is None:
        raise ConstantEvaluationError(f"{what}: the custom operator is not registered")
    attrs = {k: s.default for k, s in custom.spec.attributes.items() if s.default is not None}
    attrs.update({k: node.get_attr(k) for k in node.get_attr_names()})
    if custom.kernel is not None:
        arrays = [v.numpy() if v is not None else None for v in values]
        expected = [node.get_output_desc(i) if node.has_output_desc(i) else None
                    for i in range(node.get_outputs_size())]
        results = call_kernel(custom, arrays, attrs, what, expected, node_name=node.name)
    else:
        if _decomposition_builder is None:
            raise ConstantEvaluationError(
                f"{what}: evaluating a decomposition needs ge.es (import ge.es first)")
        graph = _decomposition_builder(custom, [v for v in values if v is not None], attrs)
        results = _run_model(graph.to_onnx(), {}, what)
    return [Tensor(np.asarray(r)) for r in results[: node.get_outputs_size()]]


def evaluate_node(node: Node) -> list[Tensor]:
    """The output values of `node`, whose connected inputs must all be `Const` nodes.

    Returns one `Tensor` per output; raises `ConstantEvaluationError` when an input is not a
    constant or the operator fails.
    """
    values = _inputs(node)
    if is_custom_node(node):
        return _evaluate_custom(node, values)
    _check_version(node)
    proto = node_proto(node)
    initializers = []
    for i, value in enumerate(values):
        if value is not None:
            initializers.append(value.to_proto(input_value_name(node, i)))
    for name, (src, _) in outer_inputs(node).items():
        if not is_const(src):
            raise ConstantEvaluationError(
                f"{ir_node_label(node)}: its subgraphs read {name!r}, "
                "which is not a constant", nodes=[node.name])
        initializers.append(src.get_attr("value").to_proto(name))
    outputs = [helper.make_empty_tensor_value_info(n) for n in node.get_output_names() if n]
    graph = helper.make_graph([proto], "evaluate", [], outputs, initializer=initializers)
    model = helper.make_model(graph, opset_imports=opset_imports_of(node))
    results = _run_model(model, {}, ir_node_label(node))
    return [Tensor(np.asarray(r)) for r in results]


#: The numpy dtypes whose arrays survive `to_array(from_array(a))` unchanged (values, dtype,
#: layout of a C-contiguous array, read-only as `frombuffer` makes them), with the data type
#: of a tensor of such an array; `to_array` of raw data of these types is `frombuffer`.
_ROUND_TRIP_DTYPES: dict[np.dtype, DataType] = {
    np.dtype(t): data_type_from_numpy(t) for t in (
        np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
        np.uint8, np.uint16, np.uint32, np.uint64, np.bool_)}
_FROMBUFFER_TYPES = frozenset(_ROUND_TRIP_DTYPES.values())


def _feed(value: Tensor) -> np.ndarray:
    """The array the reference evaluator makes of `value` as an initializer,
    `to_array(value.to_proto())` (same values, dtype and writeability), without the round
    trip where it changes nothing. `ConstantEvaluationError` for external data (which
    `evaluate_node` handles its own way)."""
    source = value._source_proto()
    if source is not None:
        if source.data_location == onnx.TensorProto.EXTERNAL:
            raise ConstantEvaluationError("an input refers to external data")
        if (value.data_type in _FROMBUFFER_TYPES and source.HasField("raw_data")
                and sys.byteorder == "little"):
            return value.numpy()  # the tensor's own `to_array` of that proto, read-only
        return numpy_helper.to_array(source)  # e.g. float_data: a writable array
    array = value.numpy()
    if _ROUND_TRIP_DTYPES.get(array.dtype) == value.data_type and array.flags.c_contiguous:
        return array
    return numpy_helper.to_array(value.to_proto())


def _attribute_key(value: Any) -> Hashable | None:
    """An exact key of an attribute value, or None for string tensors: those are not cached
    (written when their keys were numpy's object pointers; `Tensor.tobytes` now keys them
    by their strings, so this exclusion is a caution that could go)."""
    tensors = value if isinstance(value, list) else [value]
    if any(isinstance(t, Tensor) and t.data_type == DataType.DT_STRING for t in tensors):
        return None
    return ("value", hashable_value(value))


class Signature(NamedTuple):
    """What a node's evaluation depends on apart from its input values (`key`, hashable),
    and each input's slot: the index of the first input reading the same value, -1 when
    the input is absent."""

    key: Hashable
    slots: tuple[int, ...]


class NodeEvaluator:
    """`evaluate_node` with one reference evaluator per operator signature, reused.

    The signature is what the evaluator is built from apart from the input values: domain,
    op type, the model's opset imports, the attributes (compared exactly) and which inputs
    (by distinct value) and outputs the node has. Inputs are canonically renamed and fed at
    run time rather than stored as initializers; the graph declares no inputs, exactly as
    `evaluate_node`'s, so operator implementations are chosen the same way. Nodes owning
    subgraphs, custom operators, nodes without a signature and inputs with external data
    take `evaluate_node`.

    An instance belongs to one user (a pass instance of one compilation): evaluators are
    not shared between compilations, and the table grows with the distinct signatures seen.
    """

    def __init__(self) -> None:
        self._evaluators: dict[Hashable, tuple[ReferenceEvaluator, list[str]]] = {}

    def evaluate(self, node: Node, inputs: Sequence[Tensor | None] | None = None,
                 signature: Signature | None = None) -> list[Tensor]:
        """The output values of `node`, as `evaluate_node(node)` gives them. `inputs` are
        its input values and `signature` its `signature()` when the caller has them
        already (None for absent inputs)."""
        if is_custom_node(node) or node.get_subgraphs():
            return evaluate_node(node)
        _check_version(node)
        values = _inputs(node) if inputs is None else list(inputs)
        if signature is None:
            signature = self.signature(node)
            if signature is None:
                return evaluate_node(node)
        try:
            feeds = {f"x{slot}": _feed(value) for slot, value in zip(signature.slots, values)
                     if value is not None and slot >= 0}
        except ConstantEvaluationError:
            return evaluate_node(node)
        except Exception as err:
            raise ConstantEvaluationError(
                f"{ir_node_label(node)}: an input cannot be decoded: {err}",
                nodes=[node.name]) from err
        entry = self._evaluators.get(signature.key)
        if entry is None:
            entry = self._evaluators[signature.key] = _build(node, signature.slots,
                                                             ir_node_label(node))
        evaluator, outputs = entry
        try:
            results = evaluator.run(outputs, feeds)
        except Exception as err:
            raise ConstantEvaluationError(f"{ir_node_label(node)}: evaluation failed: {err}"
                                          ) from err
        return [Tensor(np.asarray(r)) for r in results]

    @staticmethod
    def signature(node: Node) -> Signature | None:
        """What `node`'s outputs depend on besides its input values, or None when that
        has no exact key (a subgraph or string tensor attribute, an input value named "")."""
        first: dict[str, int] = {}
        slots: list[int] = []
        for i in range(node.get_inputs_size()):
            name = input_value_name(node, i)
            if not name and node.get_input_producer(i) is not None:
                return None  # a value named "": `evaluate_node` feeds it as an initializer ""
            slots.append(first.setdefault(name, i) if name else -1)
        attrs = []
        for name in sorted(node.get_attr_names()):
            kind = node.get_attr_kind(name)
            if kind in GRAPH_KINDS:
                return None
            try:
                key = _attribute_key(node.get_attr(name))
            except TypeError:
                return None
            if key is None:
                return None
            attrs.append((name, kind, key))
        graph = node.owner_graph
        # `opset_imports_of(node)` is a function of these two
        imports = (tuple(graph.root_graph().model.opset_imports.items())
                   if graph is not None else None,
                   node.domain)
        outputs = tuple(bool(name) for name in node.get_output_names())
        key = (node.domain, node.type, imports, tuple(attrs), tuple(slots), outputs)
        return Signature(key, tuple(slots))


def _build(node: Node, slots: Sequence[int], what: str) -> tuple[ReferenceEvaluator, list[str]]:
    """The evaluator of `node`'s signature: its node with inputs named `x<slot>` and outputs
    `y<index>`, in a graph like `evaluate_node`'s (no inputs, untyped outputs)."""
    proto = node_proto(node)
    del proto.input[:]
    proto.input.extend(f"x{slot}" if slot >= 0 else "" for slot in slots)
    outputs = [f"y{i}" if name else "" for i, name in enumerate(node.get_output_names())]
    del proto.output[:]
    proto.output.extend(outputs)
    named = [name for name in outputs if name]
    graph = helper.make_graph([proto], "evaluate", [],
                              [helper.make_empty_tensor_value_info(n) for n in named])
    model = helper.make_model(graph, opset_imports=opset_imports_of(node))
    try:
        return reference_evaluator(model), named
    except Exception as err:
        raise ConstantEvaluationError(f"{what}: evaluation failed: {err}") from err
