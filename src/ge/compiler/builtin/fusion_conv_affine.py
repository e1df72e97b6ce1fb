"""Folding per-channel affine operators into the weights of the Conv or ConvTranspose before them.

A BatchNormalization in inference, or a Mul or Add by a constant that only varies over the
channel axis, is a per-channel affine map that folds into the weights of a Conv with
constant weights (see `ge.compiler.builtin._affine`, which also says what every fold
requires; `fusion_linear_affine` folds the same maps into a Gemm or MatMul):

* `ConvBatchNormFusion`: `BatchNormalization(Conv(X, W[, B]))` → `Conv(X, W', B')` with
  `W'[m] = W[m] * f[m]` and `B' = (B - mean) * f + bias` (B taken as 0 when absent); the
  same for `ConvTranspose`, whose weight `[C_in, C_out / group, k...]` holds output
  channel `g * C_out / group + j` at `W[i, j]` for the rows `i` of group `g`;
* `ConvAddMulFusion`: `Conv(X, W[, B]) * s` → `Conv(X, W * s, B * s)` and
  `Conv(X, W[, B]) + a` → `Conv(X, W, B + a)` (B created when absent), for constants `s`
  and `a` of shape `[C, 1, ...]`, `[1, C, 1, ...]` or one element; the same for
  `ConvTranspose` (its output channels laid out in W as above): so a BatchNormalization
  that an exporter decomposed (tf2onnx: Keras' after Conv2D and Conv2DTranspose) folds.

The module is also an example of the pattern API: `@pattern` methods with a constructor
that enables commutative matching, `meet_requirements` that computes the folded values
once, and an expression-style `replacement(self, inputs)` that builds the fused operator
around new `Const` nodes.
"""

from __future__ import annotations

import numpy as np

from ge.compiler.builtin._affine import (
    UNREPRESENTABLE,
    Fold,
    as_float64,
    batch_norm,
    bn_affine,
    cast_like,
    float_const,
    fold_names,
    matched_node,
    node_attrs,
    other_input,
    per_axis,
)
from ge.compiler.builtin._support import dims_of, input_connected, refuse
from ge.compiler.pass_registry import builtin_pass
from ge.es import TensorHolder
from ge.es.all import Conv, ConvTranspose
from ge.graph import Node, Tensor
from ge.passes import PassContext, PatternFusionPass, pattern
from ge.passes.config import PatternMatcherConfigBuilder
from ge.passes.matcher import MatchResult
from ge.passes.pattern import PatternInputs

__all__ = ["ConvAddMulFusion", "ConvBatchNormFusion"]


def _scaled_output_channels(weight: np.ndarray, factor: np.ndarray,
                            transposed_groups: int | None) -> np.ndarray:
    """`weight` with each output channel's slice scaled by `factor` (`[M]`): axis 0 of a
    Conv weight `[M, C / group, k...]`; for a ConvTranspose of `transposed_groups` groups,
    axis 1 of `[C, M / group, k...]` within each group of rows."""
    rank = weight.ndim
    if transposed_groups is None:
        return weight * factor.reshape((-1,) + (1,) * (rank - 1))
    groups = transposed_groups
    per_group = weight.reshape((groups, weight.shape[0] // groups, *weight.shape[1:]))
    scale = factor.reshape((groups, 1, weight.shape[1]) + (1,) * (rank - 2))
    return (per_group * scale).reshape(weight.shape)


def _groups(conv: Node) -> int | None:
    """A ConvTranspose's `group` attribute (default 1), or None for a Conv."""
    if conv.type != "ConvTranspose":
        return None
    return int(conv.get_attr("group")) if conv.has_attr("group") else 1


#: Why a match is refused (`ge passes explain` shows it, the report counts it), by the
#: matched operator's type: one text per cause, built once.
_CONVS, _STEPS = ("Conv", "ConvTranspose"), ("Mul", "Add")
_WEIGHT_NOT_CONSTANT = {c: f"the {c}'s weight is not a floating-point constant of rank 3 or "
                           "more" for c in _CONVS}
_BAD_GROUPS = "the ConvTranspose's group does not divide its weight's first dim"
_BIAS_NOT_CONSTANT = {c: f"the {c}'s bias is not a floating-point constant of one value per "
                         "output channel, of the weight's type" for c in _CONVS}
_OUTPUT_RANK = {c: f"the {c}'s output rank is unknown or not its weight's" for c in _CONVS}
_NOT_CONSTANT = {s: f"the {s}'s other operand is not a floating-point constant of the "
                    "weight's element type" for s in _STEPS}
_NOT_PER_CHANNEL = {s: f"the {s}'s constant varies over another axis than the channel axis, "
                       "or has a higher rank than the output" for s in _STEPS}


def _conv_weights(conv: Node) -> tuple[Tensor, Tensor | None, int] | str:
    """`(W, B or None, output channels)` of a Conv (or ConvTranspose) with constant weights
    of its shapes and an output of known rank ([N, M, spatial...], W's rank); else why not."""
    weight = float_const(conv, 1)
    if weight is None or len(weight.shape) < 3:
        return _WEIGHT_NOT_CONSTANT[conv.type]
    groups = _groups(conv)
    if groups is None:
        channels = int(weight.shape[0])
    elif groups < 1 or int(weight.shape[0]) % groups:
        return _BAD_GROUPS
    else:
        channels = int(weight.shape[1]) * groups
    bias: Tensor | None = None
    if input_connected(conv, 2):
        bias = float_const(conv, 2)
        if bias is None or tuple(bias.shape) != (channels,) or bias.data_type != weight.data_type:
            return _BIAS_NOT_CONSTANT[conv.type]
    out = dims_of(conv.get_output_desc(0))
    if out is None or len(out) != len(weight.shape):
        return _OUTPUT_RANK[conv.type]
    return weight, bias, channels


def _conv_fold(weight: Tensor, bias: Tensor | None, factor: np.ndarray | None,
               shift: np.ndarray | None, transposed_groups: int | None = None
               ) -> tuple[Tensor | None, Tensor | None] | None:
    """The Conv's (or ConvTranspose's, of `transposed_groups` groups) new `(W, B)` for
    `y = conv(x) * factor + shift` (None for "unchanged W" or "no B"); None when a folded
    value is not finite in W's element type."""
    new_weight: Tensor | None = None
    b = as_float64(bias) if bias is not None else None
    if factor is not None:
        w = _scaled_output_channels(as_float64(weight), factor, transposed_groups)
        new_weight = cast_like(w, weight, output_axis=0 if transposed_groups is None else 1)
        if new_weight is None:
            return None
        b = b * factor if b is not None else None
    if shift is not None:
        b = shift if b is None else b + shift
    if b is None:
        return new_weight, None
    new_bias = cast_like(b, weight)
    if new_bias is None:
        return None
    return new_weight, new_bias


def _build_conv(inputs: PatternInputs, fold: Fold) -> TensorHolder:
    """`Conv(x, W', B')` (or ConvTranspose): pattern inputs 0 and 1 are X and W (reused when
    W is unchanged)."""
    x = inputs[0]
    builder = x.get_owner_builder()
    names = fold.names
    weight = inputs[1] if fold.weight is None else builder.create_const(
        fold.weight, name=names.weight)
    make = ConvTranspose if fold.op == "ConvTranspose" else Conv
    if fold.bias is None:
        return make(x, weight, name=names.node, **fold.attrs)
    return make(x, weight, builder.create_const(fold.bias, name=names.bias), name=names.node,
                **fold.attrs)


@builtin_pass(name="ConvBatchNormFusion", step="builtin_fusion", requires=("BatchNormalization",),
              also_in=("origin_graph_optimize",))
class ConvBatchNormFusion(PatternFusionPass):
    """`BatchNormalization(Conv(X, W[, B]))` in inference → `Conv(X, W', B')`; the same for
    `ConvTranspose`."""

    def __init__(self) -> None:
        super().__init__()
        self._fold: Fold | None = None

    # Conv's bias is optional, and a pattern node matches a node with as many inputs as it
    # has: one pattern without the bias, one with it. Inputs: X, W[, B], scale, bias, mean,
    # var; Data wildcards here, `meet_requirements` checks which ones are constants.
    @pattern
    def conv_bn(self, inputs: PatternInputs) -> TensorHolder:
        return batch_norm(Conv(inputs[0], inputs[1]), *inputs[2:6])

    @pattern
    def conv_bias_bn(self, inputs: PatternInputs) -> TensorHolder:
        return batch_norm(Conv(inputs[0], inputs[1], inputs[2]), *inputs[3:7])

    @pattern
    def conv_transpose_bn(self, inputs: PatternInputs) -> TensorHolder:
        return batch_norm(ConvTranspose(inputs[0], inputs[1]), *inputs[2:6])

    @pattern
    def conv_transpose_bias_bn(self, inputs: PatternInputs) -> TensorHolder:
        return batch_norm(ConvTranspose(inputs[0], inputs[1], inputs[2]), *inputs[3:7])

    def meet_requirements(self, match_result: MatchResult,
                          context: PassContext | None = None) -> bool:
        self._fold = None
        conv = next(n for n in match_result.get_matched_nodes()
                    if n.type in ("Conv", "ConvTranspose"))
        bn = matched_node(match_result, "BatchNormalization")
        weights = _conv_weights(conv)
        if isinstance(weights, str):
            return refuse(context, weights)
        weight, bias, channels = weights
        affine = bn_affine(bn, channels)
        if isinstance(affine, str):
            return refuse(context, affine)
        folded = _conv_fold(weight, bias, *affine, transposed_groups=_groups(conv))
        if folded is None or folded[1] is None:  # (a BN's shift always makes a bias)
            return refuse(context, UNREPRESENTABLE)
        self._fold = Fold(folded[0], folded[1], fold_names(conv, bias_from=(bn, 2)),
                          node_attrs(conv), conv.type)
        return True

    def replacement(  # type: ignore[override]  # expression style: the engine builds the graph
            self, inputs: PatternInputs, context: PassContext | None = None) -> TensorHolder:
        assert self._fold is not None  # set by meet_requirements for this very match
        return _build_conv(inputs, self._fold)


def _per_channel(value: Tensor, rank: int, channels: int) -> np.ndarray | None:
    """A constant that varies over the channel axis (1) of a rank-`rank` value only:
    shape `[C, 1, ...]`, `[1, C, 1, ...]` or one element (see `per_axis`)."""
    return per_axis(value, rank, channels, 1)


@builtin_pass(name="ConvAddMulFusion", step="builtin_fusion", requires=("Conv", "ConvTranspose"),
              also_in=("origin_graph_optimize",))
class ConvAddMulFusion(PatternFusionPass):
    """`Conv(X, W[, B]) * s` → `Conv(X, W * s, B * s)`; `Conv(X, W[, B]) + a` →
    `Conv(X, W, B + a)`; for constants varying over the channel axis only; the same for
    `ConvTranspose`, whose output channels are W's axis 1 within each group of rows.

    The Mul patterns come first, so `Conv * s + a` (a decomposed BatchNormalization, as
    tf2onnx writes Keras' after Conv2D and Conv2DTranspose) folds entirely in one run; in
    `(Conv + a) * s` only the Add folds."""

    def __init__(self) -> None:
        # Mul and Add are commutative: `s * Conv(...)` matches too.
        super().__init__(PatternMatcherConfigBuilder().enable_commutative_match().build())
        self._fold: Fold | None = None

    @pattern
    def conv_mul(self, inputs: PatternInputs) -> TensorHolder:
        return Conv(inputs[0], inputs[1]) * inputs[2]

    @pattern
    def conv_bias_mul(self, inputs: PatternInputs) -> TensorHolder:
        return Conv(inputs[0], inputs[1], inputs[2]) * inputs[3]

    @pattern
    def conv_transpose_mul(self, inputs: PatternInputs) -> TensorHolder:
        return ConvTranspose(inputs[0], inputs[1]) * inputs[2]

    @pattern
    def conv_transpose_bias_mul(self, inputs: PatternInputs) -> TensorHolder:
        return ConvTranspose(inputs[0], inputs[1], inputs[2]) * inputs[3]

    @pattern
    def conv_add(self, inputs: PatternInputs) -> TensorHolder:
        return Conv(inputs[0], inputs[1]) + inputs[2]

    @pattern
    def conv_bias_add(self, inputs: PatternInputs) -> TensorHolder:
        return Conv(inputs[0], inputs[1], inputs[2]) + inputs[3]

    @pattern
    def conv_transpose_add(self, inputs: PatternInputs) -> TensorHolder:
        return ConvTranspose(inputs[0], inputs[1]) + inputs[2]

    @pattern
    def conv_transpose_bias_add(self, inputs: PatternInputs) -> TensorHolder:
        return ConvTranspose(inputs[0], inputs[1], inputs[2]) + inputs[3]

    def meet_requirements(self, match_result: MatchResult,
                          context: PassContext | None = None) -> bool:
        self._fold = None
        conv = next(n for n in match_result.get_matched_nodes()
                    if n.type in ("Conv", "ConvTranspose"))
        op = next(n for n in match_result.get_matched_nodes() if n.type in ("Mul", "Add"))
        weights = _conv_weights(conv)
        if isinstance(weights, str):
            return refuse(context, weights)
        weight, bias, channels = weights
        operand = float_const(op, other_input(op, conv))
        if operand is None or operand.data_type != weight.data_type:
            return refuse(context, _NOT_CONSTANT[op.type])
        vector = _per_channel(operand, len(weight.shape), channels)
        if vector is None:
            return refuse(context, _NOT_PER_CHANNEL[op.type])
        if op.type == "Mul":
            folded = _conv_fold(weight, bias, vector, None, transposed_groups=_groups(conv))
        else:
            folded = _conv_fold(weight, bias, None, vector)
        if folded is None:
            return refuse(context, UNREPRESENTABLE)
        self._fold = Fold(folded[0], folded[1],
                          fold_names(conv, bias_from=(op, other_input(op, conv))),
                          node_attrs(conv), conv.type)
        return True

    def replacement(  # type: ignore[override]  # expression style: the engine builds the graph
            self, inputs: PatternInputs, context: PassContext | None = None) -> TensorHolder:
        assert self._fold is not None  # set by meet_requirements for this very match
        return _build_conv(inputs, self._fold)

