"""Bounds of the small integer values a model computes from its own dims, and the
comparisons those bounds decide.

TorchScript exports write every `x.expand(a, b, ...)` as `Expand(x, Where(Equal(S, C), A,
S))`, S a shape vector built from the model's dims (`Concat` of `Unsqueeze(Gather(Shape(t),
i))` and constants) and C a constant of -1s (PyTorch's "keep this dim"). A dim is never
negative, so `Equal(S, -1)` is False wherever S holds a dim, whatever the sizes at run time:
`comparison_value` computes such a comparison as a constant, which `ConstantFolding` puts in
its place (and `NoOpElimination` then bypasses the `Where` it decided).

`value_bounds` tells, per element of an integer value, an inclusive range `[low, high]`:
exact (`low == high`) for a constant or a static dim, `[0, +inf)` for a dim of unknown
size. It follows only what keeps each element one of its inputs' elements, so the bounds
are exact, never estimated:

- a `Const` of an integer type (at most `MAX_ELEMENTS` elements): its values;
- `Shape` (`start`/`end` applied): one element per dim, its size when static, else
  `[0, +inf)`; `Size`: `[0, +inf)`;
- `Identity`, and `Unsqueeze`, `Squeeze`, `Reshape` and `Flatten`, which keep the elements
  in their order (the output's static dims, from its desc, give the shape);
- `Concat` of 1-D values (per element: which positions are dims, which constants);
- `Gather` of a 1-D value at constant indices, `Slice` of a 1-D value with constant
  arguments and positive steps (ONNX clamps a slice with positive steps as Python does);
- `Cast` to an integer type that holds every value the elements may have (the source
  type's whole range, or each element's bounds): never a narrowing that could wrap a dim.

Arithmetic is not followed (`Add` of two dims could overflow, `Sub` may be negative):
`ge.ops.shape_values` follows it to name dims for inference, but maps a dim of unknown
size to "unknown" and follows a Cast to int32, neither of which a sign may rest on. The
walk stays in the node's graph (a constant of an enclosing one excepted) and goes back at
most `MAX_DEPTH` producers. Its callers skip values whose dims inference may get wrong
(`_support.unsound_dims`): a static size read from a wrong desc would be wrong too.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ge.compiler.builtin._support import known_dtype, shape_dims
from ge.graph import CONST, Node, Tensor
from ge.graph.types import data_type_to_numpy
from ge.ops.onnx_node import const_value, slice_arguments

__all__ = ["COMPARISONS", "MAX_DEPTH", "MAX_ELEMENTS", "Bounds", "comparison_value",
           "value_bounds"]

#: Values of more elements than this are not followed (a shape vector has a few).
MAX_ELEMENTS = 64
#: How many producers a walk goes back through (shape computations are short).
MAX_DEPTH = 12

_INF = math.inf

#: Comparison operators `comparison_value` decides.
COMPARISONS = frozenset({"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"})


class Bounds(NamedTuple):
    """An integer value's shape and, per element in row-major order, the least and the
    greatest value it may have (Python ints, or -inf / +inf where unbounded)."""

    shape: tuple[int, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]


def _exact(array: np.ndarray) -> Bounds:
    values = tuple(int(v) for v in array.reshape(-1))
    return Bounds(tuple(int(d) for d in array.shape), values, values)


def value_bounds(node: Node, index: int, depth: int = MAX_DEPTH) -> Bounds | None:
    """The bounds of the integer value input `index` of `node` reads (see the module
    docstring), or None when the walk cannot tell them."""
    producer = node.get_input_producer(index)
    if producer is None or depth <= 0:
        return None
    source, out = producer
    if source.type == CONST and not source.domain:
        return _constant(const_value(node, index))
    if source.owner_graph is not node.owner_graph or source.domain:
        return None
    follow = _FOLLOWED.get(source.type)
    return None if follow is None or out != 0 else follow(source, depth - 1)


def _constant(value: Tensor | None) -> Bounds | None:
    if value is None:
        return None
    array = np.asarray(value.numpy())
    if array.dtype.kind not in "iu" or array.size > MAX_ELEMENTS:
        return None
    return _exact(array)


def _shape(node: Node, depth: int) -> Bounds | None:
    dims = shape_dims(node)
    if dims is None or len(dims) > MAX_ELEMENTS:
        return None
    low = tuple(d if isinstance(d, int) and d >= 0 else 0 for d in dims)
    high = tuple(d if isinstance(d, int) and d >= 0 else _INF for d in dims)
    return Bounds((len(dims),), low, high)


def _size(node: Node, depth: int) -> Bounds | None:
    return Bounds((), (0,), (_INF,)) if node.get_input_producer(0) is not None else None


def _identity(node: Node, depth: int) -> Bounds | None:
    return value_bounds(node, 0, depth)


def _same_elements(node: Node, depth: int) -> Bounds | None:
    """Unsqueeze, Squeeze, Reshape, Flatten: the input's elements in their order, in the
    shape the output's desc gives (static, of as many elements)."""
    source = value_bounds(node, 0, depth)
    shape = node.get_output_desc(0).get_shape()
    if source is None or shape.is_unknown_rank() or shape.is_unknown_shape():
        return None
    dims = tuple(int(d) for d in shape)
    if math.prod(dims) != len(source.low):
        return None
    return Bounds(dims, source.low, source.high)


def _concat(node: Node, depth: int) -> Bounds | None:
    axis = int(node.get_attr("axis")) if node.has_attr("axis") else None
    if axis not in (0, -1):
        return None
    low: tuple[float, ...] = ()
    high: tuple[float, ...] = ()
    for i in range(node.get_inputs_size()):
        part = value_bounds(node, i, depth)
        if part is None or len(part.shape) != 1:
            return None
        low, high = low + part.low, high + part.high
    return Bounds((len(low),), low, high) if len(low) <= MAX_ELEMENTS else None


def _gather(node: Node, depth: int) -> Bounds | None:
    axis = int(node.get_attr("axis")) if node.has_attr("axis") else 0
    indices = const_value(node, 1)
    data = value_bounds(node, 0, depth) if axis in (0, -1) and indices is not None else None
    if data is None or indices is None or len(data.shape) != 1:
        return None
    picked = np.asarray(indices.numpy())
    if picked.dtype.kind not in "iu" or picked.size > MAX_ELEMENTS:
        return None
    size = data.shape[0]
    positions = []
    for i in picked.reshape(-1).tolist():
        if not -size <= i < size:
            return None  # (the runtime's error)
        positions.append(i % size)
    return Bounds(tuple(int(d) for d in picked.shape), tuple(data.low[k] for k in positions),
                  tuple(data.high[k] for k in positions))


def _slice(node: Node, depth: int) -> Bounds | None:
    data = value_bounds(node, 0, depth)
    arguments = slice_arguments(node)
    if data is None or arguments is None or len(data.shape) != 1:
        return None
    starts, ends, axes, steps = arguments
    if len(starts) != 1 or len(ends) != 1 or axes not in (None, [0], [-1]):
        return None
    if len(steps) != 1 or steps[0] < 1:
        return None
    kept = range(data.shape[0])[starts[0]:ends[0]:steps[0]]
    return Bounds((len(kept),), tuple(data.low[k] for k in kept),
                  tuple(data.high[k] for k in kept))


def _cast(node: Node, depth: int) -> Bounds | None:
    """A Cast between integer types that changes no element: the target holds the source
    type's whole range, or every element's bounds."""
    source = value_bounds(node, 0, depth)
    from_type, to_type = known_dtype(node.get_input_desc(0)), known_dtype(
        node.get_output_desc(0))
    if source is None or from_type is None or to_type is None:
        return None
    try:
        from_np, to_np = data_type_to_numpy(from_type), data_type_to_numpy(to_type)
    except Exception:  # a type numpy cannot hold: not an integer type followed here
        return None
    if from_np.kind not in "iu" or to_np.kind not in "iu":
        return None
    held, wide = np.iinfo(to_np), np.iinfo(from_np)
    if held.min <= wide.min and wide.max <= held.max:
        return source
    # (an unbounded element still holds a value of the source type: a dim of unknown size
    # is at most int64's largest, so an int64 Shape casts to uint64 unchanged: trial NN)
    if all(held.min <= max(lo, wide.min) and min(hi, wide.max) <= held.max
           for lo, hi in zip(source.low, source.high, strict=True)):
        return source
    return None


_FOLLOWED = {
    "Shape": _shape,
    "Size": _size,
    "Identity": _identity,
    "Unsqueeze": _same_elements,
    "Squeeze": _same_elements,
    "Reshape": _same_elements,
    "Flatten": _same_elements,
    "Concat": _concat,
    "Gather": _gather,
    "Slice": _slice,
    "Cast": _cast,
}


def _decided(op: str, a_low: float, a_high: float, b_low: float, b_high: float
             ) -> bool | None:
    """`a op b` for every a in [a_low, a_high] and b in [b_low, b_high], or None when it
    depends on the values."""
    if op in ("Greater", "GreaterOrEqual"):  # b < a, b <= a
        op = "Less" if op == "Greater" else "LessOrEqual"
        a_low, a_high, b_low, b_high = b_low, b_high, a_low, a_high
    if op == "Equal":
        if a_high < b_low or b_high < a_low:
            return False
        return True if a_low == a_high == b_low == b_high else None
    if op == "Less":
        return True if a_high < b_low else False if a_low >= b_high else None
    # LessOrEqual
    return True if a_high <= b_low else False if a_low > b_high else None


def comparison_value(node: Node) -> Tensor | None:
    """The boolean constant an `Equal`, `Less`, `LessOrEqual`, `Greater` or
    `GreaterOrEqual` of two integer values computes, when the operands' bounds decide every
    element of the broadcast result (`Equal(S, -1)` of a shape vector S: False wherever S
    holds a dim); else None. The result's shape is the operands' broadcast; the caller
    checks it against the output's desc."""
    if node.domain or node.type not in COMPARISONS or node.get_inputs_size() != 2:
        return None
    a = value_bounds(node, 0)
    b = value_bounds(node, 1) if a is not None else None
    if a is None or b is None:
        return None
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        return None  # (the runtime's error)
    if math.prod(shape) > MAX_ELEMENTS:
        return None
    at_a = np.broadcast_to(np.arange(len(a.low)).reshape(a.shape), shape).reshape(-1)
    at_b = np.broadcast_to(np.arange(len(b.low)).reshape(b.shape), shape).reshape(-1)
    decided = []
    for i, j in zip(at_a.tolist(), at_b.tolist(), strict=True):
        value = _decided(node.type, a.low[i], a.high[i], b.low[j], b.high[j])
        if value is None:
            return None
        decided.append(value)
    return Tensor(np.array(decided, dtype=np.bool_).reshape(shape))
