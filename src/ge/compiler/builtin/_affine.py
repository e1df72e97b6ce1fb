"""What folding an affine map into the weights before it takes, for every pass that does.

The passes are in `fusion_conv_affine` (into a Conv or ConvTranspose) and
`fusion_linear_affine` (into a Gemm or MatMul); this module holds what they share, and
says once what they all require.

In inference a `BatchNormalization` is a per-channel affine map,
`y = (x - mean) * f + bias` with `f = scale / sqrt(var + epsilon)`; so is a `Mul` or an
`Add` by a constant that only varies over the channel axis. Applied to the output of a
Conv (or a Gemm) whose weights are constants, the map folds into those weights and the
operator disappears.

The folded values are computed in float64 from the constants and cast back to the weight's
element type. Every pass does nothing unless all of this holds: the weights and the
per-channel values are constants of the expected shapes (one value per output channel of
the weight), the BatchNormalization is in inference (training_mode absent or 0, no
optional outputs, `spatial` 1 where the opset has it), the element types are floating point
ones the produced operator accepts at the model's opset, the intermediate values (the Conv's
or Gemm's output, a MatMul's and its bias Add's) have no consumer besides the folded
operator (the matcher refuses those matches), and every folded value is finite after the
cast (a float16 weight may overflow), and no output has all its folded weights below the
type's normal range (a float16 weight may underflow).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ge.compiler.builtin._support import FLOAT_TYPES, const_input, input_connected
from ge.es import TensorHolder
from ge.es.all import BatchNormalization
from ge.graph import Node, Tensor
from ge.ops.onnx_node import node_opset
from ge.passes.matcher import MatchResult

__all__ = [
    "UNREPRESENTABLE",
    "Fold",
    "FoldNames",
    "as_float64",
    "batch_norm",
    "bn_affine",
    "cast_like",
    "float_const",
    "fold_names",
    "folded_name",
    "matched_node",
    "node_attrs",
    "other_input",
    "per_axis",
]

_BN_MIN_OPSET = 7  # BatchNormalization-6 and earlier: is_test / consumed_inputs semantics


@dataclass
class Fold:
    """What `meet_requirements` decided for one match, for `replacement` to build.

    `weight` / `bias` are new constant values (None: reuse the input / no bias input),
    `attrs` the attributes of the operator to build, `op` its type; `names` the names to
    give: the operator the matched Conv's (or Gemm's), the constants their sources' with
    `_folded` (so the fused model still says which module's weights they are)."""

    weight: Tensor | None
    bias: Tensor | None
    names: FoldNames
    attrs: dict[str, Any] = field(default_factory=dict)
    op: str = "Conv"
    add: str | None = None  # a MatMul's bias: the name of the Add that adds it


@dataclass
class FoldNames:
    """The names a fold gives: the fused operator's, its folded weight's and bias's."""

    node: str
    weight: str
    bias: str


_FOLDED = "_folded"


def folded_name(node: Node, index: int) -> str:
    """The name for a folded value that replaces input `index` of `node`: its value name
    with `_folded` (once: a weight folded twice keeps one suffix)."""
    producer = node.get_input_producer(index)
    assert producer is not None  # the folds read constant inputs only
    name = producer[0].get_output_name(producer[1])
    return (name.removesuffix(_FOLDED) or "weight") + _FOLDED


def fold_names(op: Node, bias_from: tuple[Node, int]) -> FoldNames:
    """Names for folding into `op` (a Conv or Gemm): its own, its weight's (input 1), and
    its bias's, from its bias input if it has one, else from `bias_from`."""
    bias_source = (op, 2) if input_connected(op, 2) else bias_from
    return FoldNames(op.name, folded_name(op, 1), folded_name(*bias_source))


def batch_norm(x: TensorHolder, *params: TensorHolder) -> TensorHolder:
    """`BatchNormalization(x, scale, bias, mean, var)` with its one required output, Y."""
    y = BatchNormalization(x, *params)
    assert isinstance(y, TensorHolder)
    return y


def matched_node(match_result: MatchResult, op_type: str) -> Node:
    """The matched node of `op_type` (each fold's patterns have one node of each type)."""
    return next(n for n in match_result.get_matched_nodes() if n.type == op_type)


def other_input(node: Node, producer: Node) -> int:
    """The input of a binary `node` that is not read from `producer`."""
    first = node.get_input_producer(0)
    return 1 if first is not None and first[0] is producer else 0


def node_attrs(node: Node) -> dict[str, Any]:
    """Every attribute `node` sets, to build an equal operator with folded inputs."""
    return {name: node.get_attr(name) for name in node.get_attr_names()}


def float_const(node: Node, index: int) -> Tensor | None:
    """The value of input `index` when it is a floating-point constant."""
    value = const_input(node, index)
    return value if value is not None and value.data_type in FLOAT_TYPES else None


def as_float64(tensor: Tensor) -> np.ndarray:
    """The values of `tensor` as a float64 array, what every fold computes in."""
    return np.asarray(tensor.numpy(), dtype=np.float64)


def cast_like(values: np.ndarray, like: Tensor, *, output_axis: int | None = None
              ) -> Tensor | None:
    """`values` in the element type of `like`, or None if a value is not finite there, or,
    for a weight (`output_axis`: its axis indexing the outputs it computes), if every weight
    of an output is rounded below the type's normal range: the fold would lose that output
    where the unfused model keeps it (float16 weights of 1e-4 scaled by 1e-4 became 0, and
    the model's outputs of 4e-6 too; trial CC). One small weight among larger ones may
    round as it likes: the output hardly depends on it."""
    with np.errstate(all="ignore"):
        cast = values.astype(like.numpy().dtype)
        wide = cast.astype(np.float64)
    if not np.all(np.isfinite(wide)):
        return None
    if output_axis is not None and cast.dtype.kind == "f" and values.ndim:
        others = tuple(a for a in range(values.ndim) if a != output_axis % values.ndim)
        largest = np.abs(values).max(axis=others) if others else np.abs(values)
        rounded = (wide != values).any(axis=others) if others else wide != values
        lost = (largest > 0) & (largest < float(np.finfo(cast.dtype).tiny)) & rounded
        if bool(lost.any()):
            return None
    return Tensor(cast, data_type=like.data_type)


#: Why a fold is refused, in the words of every pass that folds (`_support.refuse`).
UNREPRESENTABLE = ("a folded value is not finite in the weight's element type, or all the "
                   "folded weights of an output fall below its normal range (a float16 "
                   "overflow or underflow)")
_BN_OLD_OPSET = "the BatchNormalization is of an opset before 7 (is_test semantics)"
_BN_TRAINING = "the BatchNormalization is in training mode"
_BN_NOT_SPATIAL = ("the BatchNormalization has spatial=0 (statistics per element, not per "
                   "channel)")
_BN_STATISTICS_OUT = ("the BatchNormalization outputs its running or saved statistics "
                      "(training)")
_BN_NOT_CONSTANT = ("the BatchNormalization's scale, bias, mean or var is not a "
                    "floating-point constant of one value per channel")
_BN_NOT_FINITE = ("the BatchNormalization's own result is not finite (var + epsilon <= 0, "
                  "or huge values)")


def _inference_epsilon(bn: Node) -> float | str:
    """The epsilon of a BatchNormalization computing with its stored statistics, or why it
    does not (training mode, optional outputs asked for, non-spatial, an opset before 7)."""
    if node_opset(bn) < _BN_MIN_OPSET:
        return _BN_OLD_OPSET
    if bn.has_attr("training_mode") and int(bn.get_attr("training_mode")) != 0:
        return _BN_TRAINING
    if bn.has_attr("spatial") and int(bn.get_attr("spatial")) != 1:
        return _BN_NOT_SPATIAL  # opset 7-8: statistics per element, not per channel
    if any(bn.get_output_names()[1:]):
        return _BN_STATISTICS_OUT  # running mean / var outputs: training
    return float(bn.get_attr("epsilon")) if bn.has_attr("epsilon") else 1e-5


def bn_affine(bn: Node, channels: int) -> tuple[np.ndarray, np.ndarray] | str:
    """`(f, shift)` of an inference BatchNormalization over `channels` channels, with
    `y = x * f + shift`, in float64; when it cannot be folded, why (a refusal's reason)."""
    epsilon = _inference_epsilon(bn)
    if isinstance(epsilon, str):
        return epsilon
    params = [float_const(bn, i) for i in range(1, 5)]
    if any(p is None or tuple(p.shape) != (channels,) for p in params):
        return _BN_NOT_CONSTANT  # scale, bias, mean, var: constants of one value per channel
    scale, bias, mean, var = (as_float64(p) for p in params if p is not None)
    with np.errstate(all="ignore"):
        f = scale / np.sqrt(var + epsilon)
        shift = bias - mean * f
    if not (np.all(np.isfinite(f)) and np.all(np.isfinite(shift))):
        return _BN_NOT_FINITE  # var + epsilon <= 0 (or huge values)
    return f, shift


def per_axis(value: Tensor, rank: int, size: int, axis: int) -> np.ndarray | None:
    """A constant that, broadcast against a rank-`rank` value, varies over its `axis` (of
    `size` elements) only, as a float64 `[size]` vector; None for any other constant. Its
    shape, right-aligned with the value's, has 1 everywhere but at `axis` (1 or `size`)
    and no higher rank than the value (it would broadcast the output up)."""
    shape = tuple(int(d) for d in value.shape)
    if len(shape) > rank:
        return None
    padded = (1,) * (rank - len(shape)) + shape
    if any(d != 1 for i, d in enumerate(padded) if i != axis) or padded[axis] not in (1, size):
        return None
    return np.broadcast_to(as_float64(value).reshape(-1), (size,)).copy()

