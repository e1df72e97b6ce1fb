"""Memoised per-node inference: the same operator signature is inferred by onnx once.

A compilation builds thousands of replacements from the same few operators with the same
input types (every MatMul+Add → Gemm of a Linear stack); onnx's per-node inference costs far
more than a key. An `InferenceMemo` keys a node by what decides its result: domain, op
type, attributes, each input's type and shape, the values of small integer constants
(shapes, axes: what data propagation reads) and the opset. While `inference_memo_scope(memo)`
is active (the scheduler opens one per compilation), `ge.ops.infer_node` consults it, so
the ES builder and the rewriter both profit. Float constants decide an output shape only
for the few operators `_FLOAT_VALUE_OPS` names, whose values are keyed too.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import onnx
from onnx import AttributeProto

from ge.errors import InferenceFunctionError, ShapeInferenceError
from ge.graph.attributes import GRAPH_KINDS
from ge.graph.keys import hashable_value
from ge.graph.places import ir_node_label, node_named
from ge.graph.tensor import Tensor
from ge.graph.tensor_desc import TensorDesc
from ge.graph.types import DataType

if TYPE_CHECKING:
    from ge.graph.node import Node

__all__ = ["InferenceMemo", "active_memo", "inference_memo_scope"]

#: Constants with at most this many elements key the memo by value (when they can matter).
_VALUE_LIMIT = 64
#: Operators whose output shape onnx computes from floating-point input values: Range's
#: bounds, Resize's and Upsample's scales, OneHot's depth (of any numeric type). A float
#: constant of any other operator decides no shape (keying it by value would only cost
#: hits); missing one here gave a Resize the shape of one of other scales (trial U).
_FLOAT_VALUE_OPS = frozenset({"OneHot", "Range", "Resize", "Upsample"})
_FLOAT_TYPES = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE,
                          onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16})
_FLOAT_DATA_TYPES = frozenset({DataType.DT_FLOAT, DataType.DT_DOUBLE, DataType.DT_FLOAT16,
                               DataType.DT_BF16})
_ACTIVE: ContextVar[InferenceMemo | None] = ContextVar("ge_inference_memo", default=None)

# ("unknown", None) | ("ok", descs) |
# ("failed", (node name, its `node_named`, message, onnx's reason or None)): text only, never
# an exception, whose traceback would keep the failed node's graph alive with the memo
Outcome = tuple[str, Any]


class InferenceMemo:
    """Results of per-node inference by operator signature, for one compilation."""

    __slots__ = ("_known", "_opsets", "_pure", "hits", "misses")

    def __init__(self) -> None:
        self._known: dict[Hashable, Outcome] = {}
        # What onnx infers by signature, for checks that compare without writing (`pure`).
        self._pure: dict[Hashable, Outcome] = {}
        # The opset imports last keyed: (the dict, a copy of it, its key); a compilation
        # keys one model's imports over and over, and they rarely change.
        self._opsets: tuple[dict[str, int], dict[str, int], Hashable] | None = None
        self.hits = 0
        self.misses = 0

    def _opsets_key(self, imports: dict[str, int]) -> Hashable:
        """`tuple(sorted(imports.items()))`, remembered while `imports` stays as it was."""
        cached = self._opsets
        if cached is not None and cached[0] is imports and cached[1] == imports:
            return cached[2]
        key = tuple(sorted(imports.items()))
        self._opsets = (imports, dict(imports), key)
        return key

    def infer(self, node: Node, infer: Callable[[Node], list[TensorDesc] | None],
              write: Callable[[Node, int, TensorDesc], None], *,
              quiet: bool = False, copies: bool = True) -> list[TensorDesc] | None:
        """`infer(node)`, or the result it gave for a node of the same signature. `quiet`:
        a failure gives None instead of raising (a builder that types what it can), but an
        `InferenceFunctionError` (a custom operator's own function failing) is raised.
        `copies=False`: a hit writes the descs but returns [] instead of copies of them (a
        caller that only wants the node typed)."""
        key = signature(node, self)
        if key is None:
            return infer(node)
        outcome = self._known.get(key)
        if outcome is None:
            self.misses += 1
            try:
                result = infer(node)
            except InferenceFunctionError:
                raise  # (a custom operator's own function: never quiet, never kept)
            except ShapeInferenceError as err:
                self._known[key] = ("failed", _failure(node, err))
                if quiet:
                    return None
                raise
            if result is None:
                self._known[key] = ("unknown", None)
            else:
                self._known[key] = ("ok", [d.copy() for d in result])
            return result
        self.hits += 1
        kind, value = outcome
        if kind == "unknown":
            return None
        if kind == "failed":
            if quiet:
                return None
            raise _failed_as(node, *value)
        for i, desc in enumerate(value):
            write(node, i, desc)  # (`write` stores a copy: the memo's desc stays its own)
        if not copies:
            return []
        return [node.get_output_desc(i) for i in range(node.get_outputs_size())]

    def pure(self, node: Node,
             infer: Callable[[Node], list[TensorDesc | None] | None]
             ) -> list[TensorDesc | None] | None:
        """`infer(node)` (which writes nothing), or what it gave for a node of the same
        signature; the descs handed back are the memo's own: callers only read them."""
        key = signature(node, self)
        if key is None:
            return infer(node)
        outcome = self._pure.get(key)
        if outcome is None:
            try:
                result = infer(node)
            except ShapeInferenceError as err:
                self._pure[key] = ("failed", _failure(node, err))
                raise
            self._pure[key] = ("unknown", None) if result is None else ("ok", result)
            return result
        kind, value = outcome
        if kind == "failed":
            first, _, message, reason = value
            if first == node.name:  # the same node, checked again
                error = ShapeInferenceError(message, nodes=[node.name])
                error.reason = reason
                raise error
            raise _failed_as(node, *value)
        return value if kind == "ok" else None


def _failure(node: Node, err: ShapeInferenceError) -> tuple[str, str, str, str | None]:
    """What the memo keeps of a node's failed inference: its name, label, the message and
    onnx's reason in its own words (`ShapeInferenceError.reason`, the ES builder's)."""
    return node.name, node_named(node), err.message, err.reason


def _failed_as(node: Node, first: str, label: str, message: str,
               reason: str | None) -> ShapeInferenceError:
    """The error of a node whose signature failed before, on node `first` (IR name; `label`
    names it in the message as `node_named` does: a node the model gives no name by its
    outputs), with onnx's `reason` there."""
    error = ShapeInferenceError(
        f"{ir_node_label(node)}: shape inference failed as for {label} with the same "
        f"operator and input types: {message}", nodes=[node.name])
    error.reason = reason
    return error


def active_memo() -> InferenceMemo | None:
    """The memo of the innermost `inference_memo_scope`, if any."""
    return _ACTIVE.get()


@contextmanager
def inference_memo_scope(memo: InferenceMemo) -> Iterator[InferenceMemo]:
    """Make `ge.ops.infer_node` use `memo` inside the block (this thread / task only)."""
    token = _ACTIVE.set(memo)
    try:
        yield memo
    finally:
        _ACTIVE.reset(token)


def _slot_key(source: Node, index: int) -> Hashable:
    descs = source._out_descs
    slot = descs[index] if descs is not None else None
    if slot is None:
        if source._type == "Const" and not source._domain and "value" in source._attrs:
            value = source._attr_value("value")
            if isinstance(value, Tensor):
                return ("t", int(value._data_type), tuple(value._shape))
        return None
    if isinstance(slot, TensorDesc):
        return _desc_key(slot)
    return slot.type.SerializeToString()  # a ValueInfoProto, read as loaded


def _desc_key(desc: TensorDesc) -> Hashable:
    """A desc's `(_key(), format)`: its shape, data type and format."""
    return ((tuple(desc._shape), desc._data_type), desc._format)


def _value_key(source: Node, op_type: str) -> Hashable:
    if source._type != "Const" or source._domain:  # (`is_const`, inlined: a hot path)
        return None
    stored = source._attrs.get("value")
    if stored is None:
        return None
    if isinstance(stored, AttributeProto):  # as loaded: decide from the proto, decode rarely
        proto = stored.t
        if op_type not in _FLOAT_VALUE_OPS and proto.data_type in _FLOAT_TYPES:
            return None
        size = 1
        for dim in proto.dims:
            size *= dim
        if size > _VALUE_LIMIT:
            return None
        value = source._attr_value("value")
    else:
        value = stored[1]
    if not isinstance(value, Tensor):
        return None
    if op_type not in _FLOAT_VALUE_OPS and value._data_type in _FLOAT_DATA_TYPES:
        return None  # decided from the dtype: the data is never decoded for this
    if value.size > _VALUE_LIMIT:
        return None
    return value.tobytes()


def _input_key(source: Node, index: int, op_type: str) -> Hashable:
    """`(_slot_key(source, index), _value_key(source, op_type))`, read directly for the
    usual producers (an operator's output, a constant holding a `Tensor`)."""
    descs = source._out_descs
    slot = descs[index] if descs is not None else None
    if source._type != "Const" or source._domain:
        if slot is None:
            return (None, None)
        if type(slot) is TensorDesc:
            return (_desc_key(slot), None)
        return (_slot_key(source, index), None)
    stored = source._attrs.get("value")
    value = stored[1] if type(stored) is tuple else None
    if type(value) is not Tensor:  # as loaded (a proto), or no tensor at all
        return (_slot_key(source, index), _value_key(source, op_type))
    data_type = value._data_type
    if slot is None:
        slot_key: Hashable = ("t", int(data_type), tuple(value._shape))
    elif type(slot) is TensorDesc:
        slot_key = _desc_key(slot)
    else:
        slot_key = _slot_key(source, index)
    if (op_type not in _FLOAT_VALUE_OPS and data_type in _FLOAT_DATA_TYPES) or (
            value.size > _VALUE_LIMIT):
        return (slot_key, None)
    return (slot_key, value.tobytes())


def signature(node: Node, memo: InferenceMemo | None = None) -> Hashable | None:
    """What decides `node`'s inferred outputs, or None when it cannot be memoised (a node
    owning subgraphs, input descs of its own); `memo` remembers the opset imports' key."""
    in_descs = node._in_descs
    if in_descs is not None and any(d is not None for d in in_descs):
        return None
    attrs: list[tuple[Any, ...]] = []
    for name, stored in node._attrs.items():
        if not isinstance(stored, tuple):  # an AttributeProto, as loaded
            if stored.type in GRAPH_KINDS:
                return None
            attrs.append((name, stored.SerializeToString()))
            continue
        kind, value = stored
        if kind in GRAPH_KINDS:
            return None
        try:
            attrs.append((name, kind, hashable_value(value)))
        except TypeError:
            return None
    op_type = node._type
    inputs: list[Hashable] = []
    for producer in node._inputs:
        if producer is None:
            inputs.append(None)
            continue
        inputs.append(_input_key(producer[0], producer[1], op_type))
    graph = node._graph
    if graph is None:
        opsets: Hashable = ()
    elif memo is None:  # (the model's dict, read: `Graph.opset_imports` would record it)
        opsets = tuple(sorted(graph.root_graph().model.opset_imports.items()))
    else:
        opsets = memo._opsets_key(graph.root_graph().model.opset_imports)
    return (node._domain, op_type, tuple(sorted(attrs)) if attrs else (), tuple(inputs),
            len(node._out_names), opsets)
