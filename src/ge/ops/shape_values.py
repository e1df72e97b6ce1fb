"""The values of shape computations, as dims: what one node's inference cannot see.

Exports compute shapes at run time: `Reshape(x, Concat(Shape(x)[:-1], [64]))`. Whole-model
inference follows such chains (onnx's data propagation) and names the result's dims
(`[batch, seq, 64]`), but one node's inference sees only a non-constant int64 input and
gives `[-1, -1, -1]`; a pass that builds such a Reshape then leaves later passes without
the dims they match on. `shape_value` evaluates the small integer tensor an input reads as
a list of dims (a size, a symbol, or None where it is not known) by walking back through
`Shape`, `Gather`, `Slice`, `Concat`, `Unsqueeze`, `Squeeze`, `Cast`, `Identity` and the
arithmetic of `Mul`, `Add`, `Sub` and `Div` (on sizes; a symbol only times 1 or plus 0) to
constants and the descs of shaped values; `refine_from_shape_values` uses it to fill the
unknown output dims of a `Reshape`, `Expand` or `ConstantOfShape` (`ge.ops.inference`
calls it after each inference of one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ge.graph.node import Node
from ge.graph.tensor import Tensor
from ge.graph.tensor_desc import Shape, TensorDesc
from ge.graph.types import DataType
from ge.ops.onnx_node import const_ints, const_value, slice_arguments
from ge.ops.reshape import Dim, allow_zero, reshaped_dims

__all__ = ["SHAPED_BY_VALUE", "fill_unknown_dims", "refine_from_shape_values", "shape_value",
           "unfilled_desc"]

#: How many producers a walk goes back through: shape computations are short, and a walk
#: that finds nothing must stay cheap (it runs on every inference of these operators).
_MAX_DEPTH = 12
#: Values of more elements than this are not followed (a shape has few).
_MAX_ELEMENTS = 64


class _Value:
    """A small integer tensor as dims: `dims` its elements, `scalar` whether it is 0-D."""

    __slots__ = ("dims", "scalar")

    def __init__(self, dims: list[Dim], scalar: bool = False) -> None:
        self.dims, self.scalar = dims, scalar


def shape_value(node: Node, index: int) -> list[Dim] | None:
    """The elements of the 1-D integer tensor input `index` of `node` reads, each a size, a
    symbol or None, when they can be followed back to constants and shapes; else None."""
    value = _input_value(node, index, _MAX_DEPTH)
    return None if value is None or value.scalar else value.dims


def _input_value(node: Node, index: int, depth: int) -> _Value | None:
    producer = node.get_input_producer(index)
    if producer is None or depth <= 0:
        return None
    return _output_value(producer[0], producer[1], depth - 1)


def _small_ints(tensor: object) -> _Value | None:
    """A constant's value when it is a small 0-D or 1-D integer tensor, else None."""
    if not isinstance(tensor, Tensor):
        return None
    array: np.ndarray = tensor.numpy()
    if array.dtype.kind not in "iu" or array.ndim > 1 or array.size > _MAX_ELEMENTS:
        return None
    return _Value([int(v) for v in array.reshape(-1)], scalar=array.ndim == 0)


def _attr(node: Node, name: str, default: Any = None) -> Any:
    """An attribute of `node`, or `default` when it has none."""
    return node.get_attr(name) if node.has_attr(name) else default


def _output_value(node: Node, out: int, depth: int) -> _Value | None:
    """The value of output `out` of `node` (see `shape_value`)."""
    op = node.type if not node.domain else ""
    if node.type == "Const" and not node.domain:
        return _small_ints(node.get_attr("value") if node.has_attr("value") else None)
    if op == "Shape":
        return _shape_of(node)
    if op in ("Identity", "Cast"):
        if op == "Cast" and _attr(node, "to") not in (6, 7):  # int32, int64
            return None
        return _input_value(node, 0, depth)
    if op == "Concat":
        if _attr(node, "axis") not in (0, -1):
            return None
        dims: list[Dim] = []
        for i in range(node.get_inputs_size()):
            part = _input_value(node, i, depth)
            if part is None or part.scalar:
                return None
            dims += part.dims
        return _Value(dims)
    if op in _ARITHMETIC:
        return _arithmetic(node, op, depth)
    if op == "Gather":
        return _gather(node, depth)
    if op == "Slice":
        return _slice(node, depth)
    if op in ("Unsqueeze", "Squeeze"):
        source = _input_value(node, 0, depth)
        if source is None:
            return None
        axes = const_ints(node, 1) if node.get_inputs_size() > 1 else _attr(node, "axes")
        if op == "Unsqueeze":  # a scalar made [v]: the usual step before a Concat
            return _Value(list(source.dims)) if source.scalar and list(axes or ()) in (
                [0], [-1]) else None
        if not source.scalar and len(source.dims) == 1 and list(axes or [0]) in ([0], [-1]):
            return _Value(list(source.dims), scalar=True)
        return None
    return None


def _shape_of(node: Node) -> _Value | None:
    """`Shape(x)`: x's dims (a size, a symbol; None for an unknown one), `start`/`end`
    applied as Python slices are."""
    dims = _input_dims(node, 0)
    if dims is None:
        return None
    start, end = _attr(node, "start", 0), _attr(node, "end", None)
    return _Value(dims[start:end])


def _gather(node: Node, depth: int) -> _Value | None:
    if _attr(node, "axis", 0) not in (0, -1):
        return None
    data = _input_value(node, 0, depth)
    indices = const_value(node, 1)
    if data is None or data.scalar:
        return None
    index = _small_ints(indices)
    if index is None:
        return None
    size = len(data.dims)
    picked: list[Dim] = []
    for i in index.dims:
        k = int(i) + size if int(i) < 0 else int(i)  # type: ignore[arg-type]
        if not 0 <= k < size:
            return None
        picked.append(data.dims[k])
    return _Value(picked, scalar=index.scalar)


def _int_div(a: int, b: int) -> int | None:
    """ONNX's Div of integers: the quotient truncated toward zero (None dividing by 0)."""
    if b == 0:
        return None
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b > 0) else -quotient


def _combined(op: str, a: Dim, b: Dim) -> Dim:
    """One element of `a op b`: sizes computed; a symbol kept only where the other
    operand leaves it as it is (times or over 1, plus or minus 0); else None."""
    if isinstance(a, int) and isinstance(b, int):
        if op == "Div":
            return _int_div(a, b)
        return a * b if op == "Mul" else a + b if op == "Add" else a - b
    keeps_a = (b == 1 and op in ("Mul", "Div")) or (b == 0 and op in ("Add", "Sub"))
    if isinstance(a, str) and keeps_a:
        return a
    keeps_b = (a == 1 and op == "Mul") or (a == 0 and op == "Add")
    if isinstance(b, str) and keeps_b:
        return b
    return None


def _arithmetic(node: Node, op: str, depth: int) -> _Value | None:
    """`Mul`, `Add`, `Sub` or `Div` of two shape values (one of them a scalar or one
    element, broadcast): a head count's `hidden / 8` where the hidden size is static."""
    a, b = _input_value(node, 0, depth), _input_value(node, 1, depth)
    if a is None or b is None:
        return None
    if len(a.dims) != len(b.dims):
        if len(a.dims) == 1:
            a = _Value(a.dims * len(b.dims), a.scalar)
        elif len(b.dims) == 1:
            b = _Value(b.dims * len(a.dims), b.scalar)
        else:
            return None
    return _Value([_combined(op, x, y) for x, y in zip(a.dims, b.dims, strict=True)],
                  scalar=a.scalar and b.scalar)


_ARITHMETIC = frozenset({"Mul", "Add", "Sub", "Div"})


def _slice(node: Node, depth: int) -> _Value | None:
    data = _input_value(node, 0, depth)
    arguments = slice_arguments(node)
    if data is None or data.scalar or arguments is None:
        return None
    starts, ends, axes, steps = arguments
    if len(starts) != 1 or len(ends) != 1 or (axes or [0]) not in ([0], [-1]):
        return None
    if len(steps) != 1 or steps[0] == 0:
        return None
    size = len(data.dims)
    start, stop, step = slice(starts[0], ends[0], steps[0]).indices(size)
    return _Value(data.dims[start:stop:step])


# -- using them -------------------------------------------------------------------------------


def refine_from_shape_values(node: Node) -> bool:
    """Fill the unknown output dims (and rank) of a `Reshape`, `Expand` or
    `ConstantOfShape` from the value of its shape input (`shape_value`), where inference
    left them unknown and the rank agrees; a known dim is never changed. Returns whether
    something was filled."""
    if node.domain or node.type not in _REFINED or node.get_outputs_size() != 1:
        return False
    if unfilled_desc(node, 0) is None:
        return False  # (the usual case: nothing left to fill; no walk)
    computed = _REFINED[node.type](node)
    return computed is not None and fill_unknown_dims(node, 0, computed)


def unfilled_desc(node: Node, index: int) -> TensorDesc | None:
    """The desc output `index` of `node` holds when it is typed with a dim (or its rank)
    unknown, else None (nothing to fill)."""
    held = node._held_output_desc(index)
    if held is None or held._data_type == DataType.DT_UNDEFINED:
        return None
    return held if any(isinstance(d, int) and d < 0 for d in held._shape) else None


def fill_unknown_dims(node: Node, index: int, dims: Sequence[Dim]) -> bool:
    """Fill the unknown dims of output `index` of `node` (or its unknown rank) from `dims`
    (None: not known there either); a known dim never changes, nor a desc of another rank.
    Returns whether something was filled. Shared by the shape values here and by the
    rewriter, which fills a replacement's output from the value it replaces."""
    held = unfilled_desc(node, index)
    if held is None:
        return False
    shape = held._shape
    if shape.is_unknown_rank():  # `dims` gives the rank
        filled: list[int | str] = [-1 if d is None else d for d in dims]
    elif len(dims) != len(shape):
        return False
    else:
        filled = [now if not (isinstance(now, int) and now < 0) or new is None else new
                  for now, new in zip(shape, dims, strict=True)]
    if filled == list(shape):
        return False
    desc = held.copy()
    desc.shape = desc.origin_shape = Shape(filled)
    node.update_output_desc(index, desc)
    return True


def _input_dims(node: Node, index: int) -> list[Dim] | None:
    producer = node.get_input_producer(index)
    if producer is None:
        return None
    shape = producer[0].get_output_desc(producer[1]).get_shape()
    if shape.is_unknown_rank():
        return None
    return [d if isinstance(d, str) or d >= 0 else None for d in shape]


def _reshaped(node: Node) -> list[Dim] | None:
    """Reshape's output dims, from its input's and the value of its shape input."""
    target = shape_value(node, 1)
    if target is None:
        return None
    return reshaped_dims(_input_dims(node, 0), target, allow_zero(node))


def _expanded(node: Node) -> list[Dim] | None:
    """Expand's output dims: the input's and the shape's broadcast, where a dim of 1 takes
    the other and equal dims stay; None where a symbol meets another dim."""
    target = shape_value(node, 1)
    dims = _input_dims(node, 0)
    if target is None or dims is None:
        return None
    rank = max(len(target), len(dims))
    a = [1] * (rank - len(dims)) + list(dims)
    b = [1] * (rank - len(target)) + list(target)
    out: list[Dim] = []
    for x, y in zip(a, b, strict=True):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        elif isinstance(x, int) and x is not None:  # y must be 1 or x: the result is x
            out.append(x)
        elif isinstance(y, int):  # x must be 1 or y
            out.append(y)
        else:  # two symbols (or an unknown): which one is 1 is not known
            out.append(None)
    return out


def _filled(node: Node) -> list[Dim] | None:
    """ConstantOfShape's output dims: the value of its input."""
    return shape_value(node, 0)


_REFINED = {"Reshape": _reshaped, "Expand": _expanded, "ConstantOfShape": _filled}
#: The operators whose output dims `refine_from_shape_values` fills.
SHAPED_BY_VALUE = frozenset(_REFINED)
