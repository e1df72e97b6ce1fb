"""What a matched written-out normalisation must be to be fused, and the plan of its fused
node: the captures read by role, the reduced axes, epsilon, the scale and bias as the fused
operator takes them. `LayerNormFusion` and `RMSNormFusion` (`fusion_norm`) share these
checks; a failed one raises `Refused`, whose text `ge passes explain` shows."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ge.compiler.builtin._support import const_input, known_dtype, same_known_dims
from ge.es import GraphBuilder, TensorHolder
from ge.graph import CONST, DataType, Node, Tensor
from ge.passes.matcher import MatchResult
from ge.passes.pattern import NodeIo

__all__ = ["FUSIBLE_TYPES", "Affine", "Captures", "Plan", "Refused", "affine", "check_restored",
           "common_checks", "constant_scalar", "param_index", "parameter",
           "reduced_axes", "trailing_axes"]

#: Element types the fused operators compute exactly as the primitives do (in float32).
FUSIBLE_TYPES = frozenset({DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_BF16})


class Captures:
    """The captured tensors of one match, by role."""

    def __init__(self, match_result: MatchResult, roles: dict[str, int]) -> None:
        self._result = match_result
        self._roles = roles

    def __contains__(self, role: str) -> bool:
        return role in self._roles

    def io(self, role: str) -> NodeIo:
        return self._result.get_captured_tensor(self._roles[role])

    def node(self, role: str) -> Node:
        return self.io(role).node

    def out_desc(self, role: str) -> tuple[list[int | str] | None, DataType | None]:
        """(dims or None for an unknown rank, element type or None) of a captured value."""
        io = self.io(role)
        desc = io.node.get_output_desc(io.index)
        shape = desc.get_shape()
        dims = None if shape.is_unknown_rank() else list(shape)
        return dims, known_dtype(desc)


def constant_scalar(node: Node) -> float | None:
    """The value of a one-element numeric `Const` node, or None."""
    if node.type != CONST or node.domain or not node.has_attr("value"):
        return None
    value = node.get_attr("value")
    if not isinstance(value, Tensor) or value.size != 1:
        return None
    array = np.asarray(value.numpy())
    if array.dtype.kind not in "fiu":
        return None
    number = float(array.reshape(-1)[0])
    return number if math.isfinite(number) else None


def reduced_axes(node: Node, keepdims: bool = True) -> list[int] | None:
    """The axes a ReduceMean reduces (as written), or None; with `keepdims`, only when it
    keeps them (keepdims=1)."""
    if keepdims and node.has_attr("keepdims") and int(node.get_attr("keepdims")) != 1:
        return None
    if node.has_attr("axes"):  # before opset 18 (the form decides, not the opset: see
        return [int(a) for a in node.get_attr("axes")]  # reduce_mean_opset)
    if node.get_inputs_size() < 2:
        return None
    value = const_input(node, 1)
    if value is None:
        return None
    return [int(a) for a in np.asarray(value.numpy()).reshape(-1)]


def trailing_axes(axes: list[int], rank: int) -> int | None:
    """k when `axes` are exactly the k >= 1 last axes of a rank-`rank` tensor, else None."""
    if not axes or rank < 1:
        return None
    normalized = sorted(a + rank if a < 0 else a for a in axes)
    k = len(normalized)
    if len(set(normalized)) != k or normalized != list(range(rank - k, rank)):
        return None
    return k


@dataclass(frozen=True)
class Affine:
    """How a scale or bias goes into the fused operator: the matched value as it is
    (`value` None), or a constant broadcast to the normalised shape."""

    value: np.ndarray | None = None


def affine(node: Node, index: int, param: NodeIo, x_dims: list[int | str],
            x_type: DataType, k: int) -> Affine:
    """The scale/bias read by input `index` of `node` (a Mul, Div or Add of the match), when it
    has X's type and broadcasts over the k normalised axes only; else Refused."""
    what = f"the {'scale' if node.type in ('Mul', 'Div') else 'bias'} of {node.name!r}"
    desc = param.node.get_output_desc(param.index)
    if known_dtype(desc) != x_type:
        raise Refused(f"{what} is not of X's type")
    shape = desc.get_shape()
    if shape.is_unknown_rank() or shape.is_unknown_shape():
        raise Refused(f"{what} has an unknown shape")
    dims = [int(d) for d in shape]
    norm_dims = x_dims[len(x_dims) - k:]
    if not all(isinstance(d, int) and d > 0 for d in norm_dims):
        # the normalised dims must be known to compare (and to broadcast)
        raise Refused(f"the normalised dims {norm_dims} of X are not all known")
    rank = len(x_dims)
    padded = [1] * (rank - len(dims)) + dims
    trailing = padded[rank - k:]
    if len(dims) > rank or any(d != 1 for d in padded[:rank - k]) or any(
            d not in (1, n) for d, n in zip(trailing, norm_dims)):
        raise Refused(f"{what} has shape {dims}: it must broadcast over the normalised "
                       f"dims {norm_dims} only")
    if dims == norm_dims:
        return Affine()
    value = const_input(node, index)
    if value is None:  # a non-constant that needs broadcasting: left alone
        raise Refused(f"{what} is not a constant and would need broadcasting")
    array = np.asarray(value.numpy()).reshape(trailing)
    return Affine(np.ascontiguousarray(np.broadcast_to(array, [int(n) for n in norm_dims])))


def param_index(node: Node, param: NodeIo) -> int:
    """Which input of `node` reads `param` (commutative matching may have swapped them)."""
    for i in range(node.get_inputs_size()):
        producer = node.get_input_producer(i)
        if producer is not None and producer == (param.node, param.index):
            return i
    raise AssertionError(f"{node.name} does not read {param.node.name}:{param.index}")


def _epsilon(c: Captures) -> float | None:
    eps = constant_scalar(c.node("eps"))
    return eps if eps is not None and eps >= 0 else None


class Refused(Exception):
    """Why a full match is not fused: `meet_requirements` says it through the context, so
    `ge passes explain` shows it ("the pass says: ...")."""


def common_checks(c: Captures, reduces: tuple[str, ...], dropping: str | None = None
            ) -> tuple[list[int | str], DataType, int, float]:
    """The checks both fusions make (the ReduceMeans of roles `reduces`, of which `dropping`
    may have keepdims=0): X's dims and type, the result's, the axes, the constants;
    (X's dims, X's type, k, epsilon), else Refused."""
    x_dims, x_type = c.out_desc("x")
    if x_dims is None:
        raise Refused("X's rank is unknown")
    if x_type not in FUSIBLE_TYPES:
        raise Refused(f"X is {x_type.name if x_type is not None else 'of an unknown type'}, "
                       "not float16, bfloat16, float32 or float64")
    out_dims, out_type = c.out_desc("out")
    if out_dims is None or not same_known_dims(out_dims, x_dims) or out_type != x_type:
        raise Refused(f"the result is {out_dims} where X is {x_dims} (or another type): "
                       "a broadcast or a cast inside the match")
    rank = len(x_dims)
    ks = []
    for role in reduces:
        if role not in c:
            continue  # this variant has no such ReduceMean
        if c.node(role).type == "GlobalAveragePool":
            if rank != 3:  # (it averages every axis after axis 1)
                raise Refused(f"GlobalAveragePool {c.node(role).name!r} averages a rank-"
                               f"{rank} X: taken for a rank-3 X only, where it averages the "
                               "last axis")
            ks.append(1)
            continue
        axes = reduced_axes(c.node(role), keepdims=role != dropping)
        if axes is None:
            raise Refused(f"ReduceMean {c.node(role).name!r} has no constant axes (or "
                           "keepdims=0)")
        k = trailing_axes(axes, rank)
        if k is None:
            raise Refused(f"ReduceMean {c.node(role).name!r} reduces axes {axes} of a rank-"
                           f"{rank} X: the fused operator normalises the last axes only (a "
                           "channels-first norm needs a Transpose around it)")
        ks.append(k)
    if any(k != ks[0] for k in ks):
        raise Refused("the ReduceMeans reduce different axes")
    if "exponent" in c:  # (a square written Mul(d, d) has none)
        exponent = constant_scalar(c.node("exponent"))
        if exponent != 2.0:
            raise Refused(f"the power is {exponent}, not 2")
    if "one" in c and constant_scalar(c.node("one")) != 1.0:
        raise Refused("the numerator is not 1")
    eps = _epsilon(c)
    if eps is None:
        raise Refused("epsilon is not a constant >= 0")
    return x_dims, x_type, ks[0], eps


def check_restored(c: Captures, x_dims: list[int | str], k: int) -> None:
    """The Reshape after the variance's ReduceMean gives it the shape keepdims=1 would: X's
    leading dims (known, or the same symbols), then k ones; else Refused."""
    restored, _ = c.out_desc("var_reshaped")
    kept = [*x_dims[:len(x_dims) - k], *[1] * k]
    if restored != kept or any(isinstance(d, int) and d < 0 for d in kept):
        raise Refused(f"the variance is reshaped to {restored}, not to the kept shape {kept}")


@dataclass(frozen=True)
class Plan:
    """What replaces one match: the fused operator's attributes and parameters."""

    axis: int
    epsilon: float
    scale: Affine
    bias: Affine | None = None


def parameter(builder: GraphBuilder, given: TensorHolder, affine: Affine) -> TensorHolder:
    return given if affine.value is None else builder.create_const(affine.value)
