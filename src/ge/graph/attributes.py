"""Node attributes: Python values in the API, typed ONNX attributes underneath.

An attribute read from ONNX stays an `AttributeProto` until it is read or replaced, so an
untouched node saves byte-identical attributes (doc strings and all). A value set through the
API is kept as `(kind, value)`; the kind follows the value's Python type, or the kind the
attribute already had (setting `1` on a FLOAT attribute keeps it a FLOAT).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import AttributeProto, helper

from ge.errors import GraphTypeError
from ge.graph.tensor import Tensor
from ge.graph.types import DataType, data_type_to_onnx

__all__ = ["AttrKind", "StoredAttr", "decode_attr", "encode_attr", "int64_problem", "kind_name",
           "to_stored"]

AttrKind = int  # onnx.AttributeProto.AttributeType
A = AttributeProto

# ("kind", python value); for graph kinds the value is a `Graph` or a list of them.
StoredAttr = AttributeProto | tuple[int, Any]

_LIST_OF = {A.FLOAT: A.FLOATS, A.INT: A.INTS, A.STRING: A.STRINGS, A.TENSOR: A.TENSORS,
            A.GRAPH: A.GRAPHS, A.SPARSE_TENSOR: A.SPARSE_TENSORS, A.TYPE_PROTO: A.TYPE_PROTOS}
GRAPH_KINDS = (A.GRAPH, A.GRAPHS)


def kind_name(kind: int) -> str:
    return A.AttributeType.Name(kind)


def _decode_str(raw: bytes) -> str | bytes:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def decode_attr(stored: StoredAttr) -> tuple[int, Any]:
    """The `(kind, python value)` of a stored attribute (graph kinds are never protos here)."""
    if not isinstance(stored, AttributeProto):
        return stored
    kind = stored.type
    if kind == A.INT:
        return kind, stored.i
    if kind == A.FLOAT:
        return kind, stored.f
    if kind == A.STRING:
        return kind, _decode_str(stored.s)
    if kind == A.INTS:
        return kind, list(stored.ints)
    if kind == A.FLOATS:
        return kind, list(stored.floats)
    if kind == A.STRINGS:
        return kind, [_decode_str(s) for s in stored.strings]
    if kind == A.TENSOR:
        return kind, Tensor.from_proto(stored.t)
    if kind == A.TENSORS:
        return kind, [Tensor.from_proto(t) for t in stored.tensors]
    if kind == A.SPARSE_TENSOR:
        return kind, stored.sparse_tensor
    if kind == A.SPARSE_TENSORS:
        return kind, list(stored.sparse_tensors)
    if kind == A.TYPE_PROTO:
        return kind, stored.tp
    if kind == A.TYPE_PROTOS:
        return kind, list(stored.type_protos)
    raise GraphTypeError(f"attribute {stored.name!r} has unsupported kind {kind_name(kind)}")


def _scalar_kind(value: Any) -> int | None:
    from ge.graph.graph import Graph  # the IR's graph class; imported late to avoid a cycle

    if isinstance(value, (bool, np.bool_, DataType, int, np.integer)):
        return A.INT
    if isinstance(value, (float, np.floating)):
        return A.FLOAT
    if isinstance(value, (str, bytes)):
        return A.STRING
    if isinstance(value, (Tensor, np.ndarray)):
        return A.TENSOR
    if isinstance(value, Graph):
        return A.GRAPH
    if isinstance(value, onnx.SparseTensorProto):
        return A.SPARSE_TENSOR
    if isinstance(value, onnx.TypeProto):
        return A.TYPE_PROTO
    return None


def _normalise(kind: int, value: Any) -> Any:
    if kind == A.INT:
        if isinstance(value, DataType):
            return data_type_to_onnx(value)
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        if isinstance(value, (float, np.floating)) and not float(value).is_integer():
            raise GraphTypeError(f"cannot store {value!r} in an INT attribute")
        return int(value)
    if kind == A.FLOAT:
        return float(value)
    if kind == A.TENSOR:
        # The node keeps a tensor of its own: the caller's can change format or type later.
        return Tensor(value) if isinstance(value, np.ndarray) else value.copy()
    return value


def to_stored(key: str, value: Any, previous_kind: int | None,
              declared_kind: int | None = None) -> tuple[int, Any]:
    """Turn an API value into `(kind, value)`, raising `GraphTypeError` for what ONNX can't hold.

    An `onnx.AttributeProto` (not of a graph kind) is taken with its own kind: the way to set
    a typed value such as an empty FLOATS list, which Python values alone cannot say. A new
    attribute the operator's schema declares (`declared_kind`) is read as ES reads it: a 1-D
    array as a list, ints as floats where it takes floats; a value of another kind keeps its
    own, which validation refuses (and blames the pass for).
    """
    if isinstance(value, AttributeProto):
        return decode_attr(value)
    if previous_kind is None and declared_kind is not None:
        return _as_declared(key, value, declared_kind)
    if (isinstance(value, np.ndarray) and value.ndim == 1
            and previous_kind in (A.INTS, A.FLOATS, A.STRINGS)):
        value = value.tolist()  # (`perm=np.array(...)`: the list it holds, as ES reads it)
    if isinstance(value, (list, tuple)):
        items = list(value)
        kinds = {_scalar_kind(v) for v in items}
        if None in kinds:
            bad = next(v for v in items if _scalar_kind(v) is None)
            raise GraphTypeError(
                f"attribute {key!r}: list items of type {type(bad).__name__} are not supported"
            )
        if kinds == {A.INT, A.FLOAT}:
            kinds = {A.FLOAT}
        if len(kinds) > 1:
            raise GraphTypeError(f"attribute {key!r}: a list must hold values of one type")
        kind: int
        if kinds:
            kind = _LIST_OF[kinds.pop()]  # type: ignore[index]  # None was refused above
            if previous_kind == A.FLOATS and kind == A.INTS:
                kind = A.FLOATS
        elif previous_kind is not None and previous_kind in _LIST_OF.values():
            kind = int(previous_kind)
        else:
            kind = A.INTS
        _keeps_kind(key, value, kind, previous_kind)
        scalar = next(k for k, v in _LIST_OF.items() if v == kind)
        return kind, _in_int64(key, kind, [_normalise(scalar, v) for v in items])
    single = _scalar_kind(value)
    if single is None:
        raise GraphTypeError(
            f"attribute {key!r}: values of type {type(value).__name__} are not supported"
        )
    if single == A.INT and previous_kind == A.FLOAT and not isinstance(value, DataType):
        single = A.FLOAT
    _keeps_kind(key, value, single, previous_kind)
    return single, _in_int64(key, single, _normalise(single, value))


def _as_declared(key: str, value: Any, declared: int) -> tuple[int, Any]:
    """`to_stored` of a new attribute its schema declares of kind `declared`: converted to it
    where the value reads so, stored with its own kind otherwise."""
    try:
        return to_stored(key, value, declared)
    except GraphTypeError:
        return to_stored(key, value, None)  # (another kind: validation says which it takes)


#: The ints an INT or INTS attribute holds (int64).
INT64_RANGE = range(-2**63, 2**63)


def int64_problem(values: Any) -> str | None:
    """What is wrong with ints an INT or INTS attribute is given, None if each fits int64
    (`np.uint64(2**64 - 1)`, a Python int beyond: onnx's make_attribute raised a bare
    ValueError, a Node's later at to_onnx): the one check of set_attr and ES."""
    for value in values if isinstance(values, list) else [values]:
        if isinstance(value, int) and value not in INT64_RANGE:
            return f"holds {value}, beyond int64: ONNX attribute ints are int64"
    return None


def _in_int64(key: str, kind: int, value: Any) -> Any:
    """`value`, an attribute's normalised value, if its ints fit int64 (GraphTypeError)."""
    if kind in (A.INT, A.INTS):
        problem = int64_problem(value)
        if problem is not None:
            raise GraphTypeError(f"attribute {key!r} {problem}")
    return value


def _keeps_kind(key: str, value: Any, kind: int, previous_kind: int | None) -> None:
    """An attribute keeps its ONNX kind: a value of another (a float for Gemm's INT transB,
    an int for If's GRAPH then_branch) would be written as a model runtimes reject."""
    if previous_kind is not None and kind != previous_kind:
        shown = repr(value) if len(repr(value)) <= 40 else f"a {type(value).__name__}"
        raise GraphTypeError(
            f"attribute {key!r} is {kind_name(previous_kind)}; {shown} would make it "
            f"{kind_name(kind)} (remove_attr first to give it another kind)")


def encode_attr(
    key: str, stored: StoredAttr, encode_graph: Callable[[Any], onnx.GraphProto]
) -> AttributeProto:
    """The ONNX attribute of a stored value; graphs are encoded by `encode_graph`."""
    if isinstance(stored, AttributeProto):
        return stored
    kind, value = stored
    if kind == A.GRAPH:
        return helper.make_attribute(key, encode_graph(value), attr_type=A.GRAPH)
    if kind == A.GRAPHS:
        return helper.make_attribute(key, [encode_graph(g) for g in value], attr_type=A.GRAPHS)
    if kind == A.TENSOR:
        return helper.make_attribute(key, value.to_proto(), attr_type=A.TENSOR)
    if kind == A.TENSORS:
        return helper.make_attribute(key, [t.to_proto() for t in value], attr_type=A.TENSORS)
    if kind == A.INT:
        return helper.make_attribute(key, int(value), attr_type=A.INT)
    if kind == A.INTS:
        return helper.make_attribute(key, [int(v) for v in value], attr_type=A.INTS)
    return helper.make_attribute(key, value, attr_type=kind)
