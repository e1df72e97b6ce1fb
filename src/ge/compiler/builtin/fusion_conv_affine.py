"""Folding per-channel affine operators into the weights of the Conv, Gemm or MatMul before them.

In inference a `BatchNormalization` is a per-channel affine map,
`y = (x - mean) * f + bias` with `f = scale / sqrt(var + epsilon)`; so is a `Mul` or an
`Add` by a constant that only varies over the channel axis. Applied to the output of a
Conv (or a Gemm) whose weights are constants, the map folds into those weights and the
operator disappears:

* `ConvBatchNormFusion`: `BatchNormalization(Conv(X, W[, B]))` → `Conv(X, W', B')` with
  `W'[m] = W[m] * f[m]` and `B' = (B - mean) * f + bias` (B taken as 0 when absent); the
  same for `ConvTranspose`, whose weight `[C_in, C_out / group, k...]` holds output
  channel `g * C_out / group + j` at `W[i, j]` for the rows `i` of group `g`;
* `ConvAddMulFusion`: `Conv(X, W[, B]) * s` → `Conv(X, W * s, B * s)` and
  `Conv(X, W[, B]) + a` → `Conv(X, W, B + a)` (B created when absent), for constants `s`
  and `a` of shape `[C, 1, ...]`, `[1, C, 1, ...]` or one element; the same for
  `ConvTranspose` (its output channels laid out in W as above): so a BatchNormalization
  that an exporter decomposed (tf2onnx: Keras' after Conv2D and Conv2DTranspose) folds;
* `GemmBatchNormFusion`: `BatchNormalization(Gemm(A, B[, C]))` or
  `BatchNormalization(MatMul(A, B))` on a 2-D `[N, C]` value → `Gemm(A, B', C')`, B's
  output columns (rows with `transB=1`) scaled by f and `C' = (beta * C - mean) * f + bias`
  (so `beta` becomes 1; `alpha` and the transposes are kept);
* `GemmAddMulFusion`: the decomposed form after a linear layer (tf2onnx's Keras Dense +
  BatchNormalization), by constants `s`, `t` that vary over the last (feature) axis only:
  `MatMul(A, W) * s` → `MatMul(A, W * s)`, `(MatMul(A, W) + B) * s` →
  `MatMul(A, W * s) + B * s`, `(MatMul(A, W) + B) + t` → `MatMul(A, W) + (B + t)` for an A
  of any rank; `Gemm(A, W[, C]) * s` → `Gemm(A, W', C * s)` and `Gemm(A, W[, C]) + t` →
  `Gemm(A, W, C + t)` (`beta` becomes 1). It runs before `MatMulAddFusion`, which makes a
  Gemm of what is left of a 2-D MatMul + Add.

The folded values are computed in float64 from the constants and cast back to the weight's
element type. Every pass does nothing unless all of this holds: the weights and the
per-channel values are constants of the expected shapes (one value per output channel of
the weight), the BatchNormalization is in inference (training_mode absent or 0, no
optional outputs, `spatial` 1 where the opset has it), the element types are floating point
ones the produced operator accepts at the model's opset, the intermediate values (the Conv's
or Gemm's output, a MatMul's and its bias Add's) have no consumer besides the folded
operator (the matcher refuses those matches), and every folded value is finite after the
cast (a float16 weight may overflow).

The module is also an example of the pattern API: `@pattern` methods with a constructor
that enables commutative matching, `patterns()` for patterns that depend on the model's
opset, `meet_requirements` that computes the folded values once, and an expression-style
`replacement(self, inputs)` that builds the fused operator around new `Const` nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ge.compiler.builtin._support import FLOAT_TYPES, const_input, input_connected
from ge.compiler.builtin.fusion_gemm import dims_of, gemm_dtypes, value_desc
from ge.compiler.pass_registry import builtin_pass
from ge.es import GraphBuilder, TensorHolder, current_opset_imports
from ge.es.all import Add, BatchNormalization, Conv, ConvTranspose, Gemm, MatMul
from ge.graph import Node, Tensor
from ge.ops.onnx_node import node_opset
from ge.passes import PassContext, PatternFusionPass, pattern
from ge.passes.config import PatternMatcherConfigBuilder
from ge.passes.matcher import MatchResult
from ge.passes.pattern import Pattern, PatternInputs, create_pattern

__all__ = ["ConvAddMulFusion", "ConvBatchNormFusion", "GemmAddMulFusion",
           "GemmBatchNormFusion"]

_BN_MIN_OPSET = 7  # BatchNormalization-6 and earlier: is_test / consumed_inputs semantics


# -- what the passes share ------------------------------------------------------------------


@dataclass
class _Fold:
    """What `meet_requirements` decided for one match, for `replacement` to build.

    `weight` / `bias` are new constant values (None: reuse the input / no bias input),
    `attrs` the attributes of the operator to build, `op` its type; `names` the names to
    give: the operator the matched Conv's (or Gemm's), the constants their sources' with
    `_folded` (so the fused model still says which module's weights they are)."""

    weight: Tensor | None
    bias: Tensor | None
    names: _Names
    attrs: dict[str, Any] = field(default_factory=dict)
    op: str = "Conv"
    add: str | None = None  # a MatMul's bias: the name of the Add that adds it


@dataclass
class _Names:
    node: str
    weight: str
    bias: str


_FOLDED = "_folded"


def _folded_name(node: Node, index: int) -> str:
    """The name for a folded value that replaces input `index` of `node`: its value name
    with `_folded` (once: a weight folded twice keeps one suffix)."""
    producer = node.get_input_producer(index)
    assert producer is not None  # the folds read constant inputs only
    name = producer[0].get_output_name(producer[1])
    return (name.removesuffix(_FOLDED) or "weight") + _FOLDED


def _names(op: Node, bias_from: tuple[Node, int]) -> _Names:
    """Names for folding into `op` (a Conv or Gemm): its own, its weight's (input 1), and
    its bias's, from its bias input if it has one, else from `bias_from`."""
    bias_source = (op, 2) if input_connected(op, 2) else bias_from
    return _Names(op.name, _folded_name(op, 1), _folded_name(*bias_source))


def _bn(x: TensorHolder, *params: TensorHolder) -> TensorHolder:
    """`BatchNormalization(x, scale, bias, mean, var)` with its one required output, Y."""
    y = BatchNormalization(x, *params)
    assert isinstance(y, TensorHolder)
    return y


def _find(match_result: MatchResult, op_type: str) -> Node:
    """The matched node of `op_type` (each pattern here has one node of each type)."""
    return next(n for n in match_result.get_matched_nodes() if n.type == op_type)


def _other_input(node: Node, producer: Node) -> int:
    """The input of a binary `node` that is not read from `producer`."""
    first = node.get_input_producer(0)
    return 1 if first is not None and first[0] is producer else 0


def _attrs(node: Node) -> dict[str, Any]:
    """Every attribute `node` sets, to build an equal operator with folded inputs."""
    return {name: node.get_attr(name) for name in node.get_attr_names()}


def _float_const(node: Node, index: int) -> Tensor | None:
    """The value of input `index` when it is a floating-point constant."""
    value = const_input(node, index)
    return value if value is not None and value.data_type in FLOAT_TYPES else None


def _as_float64(tensor: Tensor) -> np.ndarray:
    return np.asarray(tensor.numpy(), dtype=np.float64)


def _cast_like(values: np.ndarray, like: Tensor) -> Tensor | None:
    """`values` in the element type of `like`, or None if a value is not finite there."""
    with np.errstate(all="ignore"):
        cast = values.astype(like.numpy().dtype)
    if not np.all(np.isfinite(cast.astype(np.float64))):
        return None
    return Tensor(cast, data_type=like.data_type)


def _inference_epsilon(bn: Node) -> float | None:
    """The epsilon of a BatchNormalization computing with its stored statistics, or None
    (training mode, optional outputs asked for, non-spatial, or an opset before 7)."""
    if node_opset(bn) < _BN_MIN_OPSET:
        return None
    if bn.has_attr("training_mode") and int(bn.get_attr("training_mode")) != 0:
        return None
    if bn.has_attr("spatial") and int(bn.get_attr("spatial")) != 1:
        return None  # opset 7-8: statistics per element, not per channel
    if any(bn.get_output_names()[1:]):
        return None  # running mean / var outputs: training
    return float(bn.get_attr("epsilon")) if bn.has_attr("epsilon") else 1e-5


def _bn_affine(bn: Node, channels: int) -> tuple[np.ndarray, np.ndarray] | None:
    """`(f, shift)` of an inference BatchNormalization over `channels` channels, with
    `y = x * f + shift`, in float64; None when it cannot be folded."""
    epsilon = _inference_epsilon(bn)
    if epsilon is None:
        return None
    params = [_float_const(bn, i) for i in range(1, 5)]
    if any(p is None or tuple(p.shape) != (channels,) for p in params):
        return None  # scale, bias, mean, var: constants of one value per channel
    scale, bias, mean, var = (_as_float64(p) for p in params if p is not None)
    with np.errstate(all="ignore"):
        f = scale / np.sqrt(var + epsilon)
        shift = bias - mean * f
    if not (np.all(np.isfinite(f)) and np.all(np.isfinite(shift))):
        return None  # var + epsilon <= 0 (or huge values): BN's own result is not finite
    return f, shift


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


# -- Conv -----------------------------------------------------------------------------------


def _groups(conv: Node) -> int | None:
    """A ConvTranspose's `group` attribute (default 1), or None for a Conv."""
    if conv.type != "ConvTranspose":
        return None
    return int(conv.get_attr("group")) if conv.has_attr("group") else 1


def _conv_weights(conv: Node) -> tuple[Tensor, Tensor | None, int] | None:
    """`(W, B or None, output channels)` of a Conv (or ConvTranspose) with constant weights
    of its shapes and an output of known rank ([N, M, spatial...], W's rank)."""
    weight = _float_const(conv, 1)
    if weight is None or len(weight.shape) < 3:
        return None
    groups = _groups(conv)
    if groups is None:
        channels = int(weight.shape[0])
    elif groups < 1 or int(weight.shape[0]) % groups:
        return None
    else:
        channels = int(weight.shape[1]) * groups
    bias: Tensor | None = None
    if input_connected(conv, 2):
        bias = _float_const(conv, 2)
        if bias is None or tuple(bias.shape) != (channels,) or bias.data_type != weight.data_type:
            return None
    out = dims_of(conv.get_output_desc(0))
    if out is None or len(out) != len(weight.shape):
        return None
    return weight, bias, channels


def _conv_fold(weight: Tensor, bias: Tensor | None, factor: np.ndarray | None,
               shift: np.ndarray | None, transposed_groups: int | None = None
               ) -> tuple[Tensor | None, Tensor | None] | None:
    """The Conv's (or ConvTranspose's, of `transposed_groups` groups) new `(W, B)` for
    `y = conv(x) * factor + shift` (None for "unchanged W" or "no B"); None when a folded
    value is not finite in W's element type."""
    new_weight: Tensor | None = None
    b = _as_float64(bias) if bias is not None else None
    if factor is not None:
        w = _scaled_output_channels(_as_float64(weight), factor, transposed_groups)
        new_weight = _cast_like(w, weight)
        if new_weight is None:
            return None
        b = b * factor if b is not None else None
    if shift is not None:
        b = shift if b is None else b + shift
    if b is None:
        return new_weight, None
    new_bias = _cast_like(b, weight)
    if new_bias is None:
        return None
    return new_weight, new_bias


def _build_conv(inputs: PatternInputs, fold: _Fold) -> TensorHolder:
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
        self._fold: _Fold | None = None

    # Conv's bias is optional, and a pattern node matches a node with as many inputs as it
    # has: one pattern without the bias, one with it. Inputs: X, W[, B], scale, bias, mean,
    # var; Data wildcards here, `meet_requirements` checks which ones are constants.
    @pattern
    def conv_bn(self, inputs: PatternInputs) -> TensorHolder:
        return _bn(Conv(inputs[0], inputs[1]), *inputs[2:6])

    @pattern
    def conv_bias_bn(self, inputs: PatternInputs) -> TensorHolder:
        return _bn(Conv(inputs[0], inputs[1], inputs[2]), *inputs[3:7])

    @pattern
    def conv_transpose_bn(self, inputs: PatternInputs) -> TensorHolder:
        return _bn(ConvTranspose(inputs[0], inputs[1]), *inputs[2:6])

    @pattern
    def conv_transpose_bias_bn(self, inputs: PatternInputs) -> TensorHolder:
        return _bn(ConvTranspose(inputs[0], inputs[1], inputs[2]), *inputs[3:7])

    def meet_requirements(self, match_result: MatchResult,
                          context: PassContext | None = None) -> bool:
        self._fold = None
        conv = next(n for n in match_result.get_matched_nodes()
                    if n.type in ("Conv", "ConvTranspose"))
        bn = _find(match_result, "BatchNormalization")
        weights = _conv_weights(conv)
        if weights is None:
            return False
        weight, bias, channels = weights
        affine = _bn_affine(bn, channels)
        if affine is None:
            return False
        folded = _conv_fold(weight, bias, *affine, transposed_groups=_groups(conv))
        if folded is None or folded[1] is None:
            return False
        self._fold = _Fold(folded[0], folded[1], _names(conv, bias_from=(bn, 2)),
                           _attrs(conv), conv.type)
        return True

    def replacement(  # type: ignore[override]  # expression style: the engine builds the graph
            self, inputs: PatternInputs, context: PassContext | None = None) -> TensorHolder:
        assert self._fold is not None  # set by meet_requirements for this very match
        return _build_conv(inputs, self._fold)


def _per_axis(value: Tensor, rank: int, size: int, axis: int) -> np.ndarray | None:
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
    return np.broadcast_to(_as_float64(value).reshape(-1), (size,)).copy()


def _per_channel(value: Tensor, rank: int, channels: int) -> np.ndarray | None:
    """A constant that varies over the channel axis (1) of a rank-`rank` value only:
    shape `[C, 1, ...]`, `[1, C, 1, ...]` or one element (see `_per_axis`)."""
    return _per_axis(value, rank, channels, 1)


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
        self._fold: _Fold | None = None

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
        if weights is None:
            return False
        weight, bias, channels = weights
        operand = _float_const(op, _other_input(op, conv))
        if operand is None or operand.data_type != weight.data_type:
            return False
        vector = _per_channel(operand, len(weight.shape), channels)
        if vector is None:
            return False
        if op.type == "Mul":
            folded = _conv_fold(weight, bias, vector, None, transposed_groups=_groups(conv))
        else:
            folded = _conv_fold(weight, bias, None, vector)
        if folded is None:
            return False
        self._fold = _Fold(folded[0], folded[1],
                           _names(conv, bias_from=(op, _other_input(op, conv))), _attrs(conv),
                           conv.type)
        return True

    def replacement(  # type: ignore[override]  # expression style: the engine builds the graph
            self, inputs: PatternInputs, context: PassContext | None = None) -> TensorHolder:
        assert self._fold is not None  # set by meet_requirements for this very match
        return _build_conv(inputs, self._fold)


# -- Gemm -----------------------------------------------------------------------------------


def _gemm_bn_pattern(name: str, producer: str) -> Pattern:
    """`BatchNormalization(<producer>(A, B[, C]), scale, bias, mean, var)`."""
    builder = GraphBuilder(name)
    count = {"Gemm": 3, "Gemm_no_c": 2, "MatMul": 2}[producer]
    inputs = builder.create_inputs(count + 4)
    if producer == "MatMul":
        product = MatMul(inputs[0], inputs[1])
    else:
        product = Gemm(*inputs[:count])
    bn = _bn(product, *inputs[count:])
    return create_pattern(builder.build_and_reset([bn]))


@builtin_pass(name="GemmBatchNormFusion", step="builtin_fusion", requires=("BatchNormalization",),
              also_in=("origin_graph_optimize",))
class GemmBatchNormFusion(PatternFusionPass):
    """`BatchNormalization(Gemm(A, B[, C]))` or `BatchNormalization(MatMul(A, B))` on a
    2-D value, in inference → `Gemm(A, B', C')`."""

    def __init__(self) -> None:
        super().__init__()
        self._fold: _Fold | None = None

    def patterns(self) -> list[Pattern]:
        # Legacy style, because the patterns depend on the opset the pass builds at (the
        # model's): Gemm's C is optional from opset 11 only.
        opset = current_opset_imports().get("", 0)
        found = [_gemm_bn_pattern("gemm_bn", "Gemm"), _gemm_bn_pattern("matmul_bn", "MatMul")]
        if opset >= 11:
            found.insert(1, _gemm_bn_pattern("gemm_no_c_bn", "Gemm_no_c"))
        return found

    def meet_requirements(self, match_result: MatchResult,
                          context: PassContext | None = None) -> bool:
        self._fold = None
        bn = _find(match_result, "BatchNormalization")
        producer = bn.get_input_producer(0)
        assert producer is not None
        product = producer[0]
        out = dims_of(product.get_output_desc(0))
        if out is None or len(out) != 2:
            return False  # BN over the features of a [N, C] value only
        if product.type == "MatMul":
            a = dims_of(value_desc(product, 0))
            if a is None or len(a) != 2:
                return False  # a batched (or vector) MatMul is not a Gemm
        weight = _float_const(product, 1)
        if weight is None or len(weight.shape) != 2:
            return False
        dtype = weight.data_type
        if dtype not in gemm_dtypes(node_opset(bn)) or (
                product.get_output_desc(0).data_type != dtype):
            return False
        attrs = _attrs(product) if product.type == "Gemm" else {}
        trans_b = int(attrs.get("transB", 0))
        channels = int(weight.shape[0 if trans_b else 1])
        affine = _bn_affine(bn, channels)
        if affine is None:
            return False
        factor, shift = affine
        c: np.ndarray | None = None
        if input_connected(product, 2):
            c_value = _float_const(product, 2)
            if c_value is None or c_value.data_type != dtype:
                return False
            c = _as_float64(c_value) * float(attrs.get("beta", 1.0))
        axis = 0 if trans_b else 1  # the axis of B that indexes output features
        scaled = _as_float64(weight) * (factor[:, None] if axis == 0 else factor[None, :])
        new_weight = _cast_like(scaled, weight)
        # y = (alpha * A'B' + beta * C) * f + shift: scale B's feature axis by f, C by f too.
        new_c = _cast_like(shift if c is None else c * factor + shift, weight)
        if new_weight is None or new_c is None:
            return False
        attrs["beta"] = 1.0
        self._fold = _Fold(new_weight, new_c, _names(product, bias_from=(bn, 2)), attrs)
        return True

    def replacement(  # type: ignore[override]  # expression style: the engine builds the graph
            self, inputs: PatternInputs, context: PassContext | None = None) -> TensorHolder:
        fold = self._fold
        assert fold is not None and fold.weight is not None and fold.bias is not None
        builder = inputs[0].get_owner_builder()
        return Gemm(inputs[0], builder.create_const(fold.weight, name=fold.names.weight),
                    builder.create_const(fold.bias, name=fold.names.bias), name=fold.names.node,
                    **fold.attrs)


# -- Gemm and MatMul: Mul / Add -------------------------------------------------------------


def _linear_pattern(name: str, producer: str, *, bias: bool, outer: str) -> Pattern:
    """`<outer>(<producer>(A, B[, C]) [+ bias], k)`: `producer` is "MatMul" (A, B),
    "Gemm" (A, B, C) or "Gemm_no_c" (A, B); `bias` an Add of a pattern input between
    them (after a MatMul); `outer` "Mul" or "Add". Inputs in that order, k last."""
    builder = GraphBuilder(name)
    operands = {"Gemm": 3, "Gemm_no_c": 2, "MatMul": 2}[producer]
    inputs = builder.create_inputs(operands + int(bias) + 1)
    value = MatMul(*inputs[:2]) if producer == "MatMul" else Gemm(*inputs[:operands])
    if bias:
        value = value + inputs[operands]
    last = inputs[-1]
    return create_pattern(builder.build_and_reset([value * last if outer == "Mul"
                                                   else value + last]))


@dataclass
class _Linear:
    """The matched chain of a `GemmAddMulFusion` match: the product (MatMul or Gemm), the
    Add of a MatMul's bias (or None) and the Mul or Add folded."""

    product: Node
    bias_add: Node | None
    outer: Node

    @classmethod
    def of(cls, match_result: MatchResult) -> _Linear:
        nodes = match_result.get_matched_nodes()
        product = next(n for n in nodes if n.type in ("MatMul", "Gemm"))
        # the product's one reader: the matcher refuses a match whose inner value has others
        ((first, _),) = product.get_out_data_nodes_and_port_indexes(0)
        if len(nodes) == 2:
            return cls(product, None, first)
        outer = next(n for n in nodes if n is not product and n is not first)
        return cls(product, first, outer)


def _linear_features(product: Node) -> tuple[Tensor, int, int] | None:
    """`(W, output features, rank)` of a MatMul (any rank of A) or Gemm whose B is a 2-D
    floating-point constant (for a Gemm, of an element type Gemm accepts at the model's
    opset). `rank` is what the per-feature constants are checked against: the output's
    rank; 2 for a Gemm; 1 for a MatMul whose output rank inference did not find (after a
    Keras Flatten exported at opset 13 or below, onnx's inference gives the Reshape to a
    computed shape no rank): its output has at least one axis, the features last, so a
    constant of rank 1 or 0 varies over them only."""
    weight = _float_const(product, 1)
    if weight is None or len(weight.shape) != 2:
        return None
    out = dims_of(product.get_output_desc(0))
    if product.type == "MatMul":
        return None if out == [] else (weight, int(weight.shape[1]), 1 if out is None
                                       else len(out))
    dtype = weight.data_type
    if dtype not in gemm_dtypes(node_opset(product)) or (
            product.get_output_desc(0).data_type != dtype):
        return None
    trans_b = product.has_attr("transB") and int(product.get_attr("transB")) != 0
    return weight, int(weight.shape[0 if trans_b else 1]), 2


def _per_feature_input(node: Node, index: int, like: Tensor, rank: int,
                       features: int) -> np.ndarray | None:
    """Input `index` of `node` as a float64 `[features]` vector, when it is a constant of
    `like`'s element type that varies over the last axis of the rank-`rank` result only."""
    value = _float_const(node, index)
    if value is None or value.data_type != like.data_type:
        return None
    return _per_axis(value, rank, features, rank - 1)


@builtin_pass(name="GemmAddMulFusion", step="builtin_fusion", requires=("MatMul", "Gemm"),
              also_in=("origin_graph_optimize",))
class GemmAddMulFusion(PatternFusionPass):
    """A linear layer's output scaled or shifted by per-feature constants, folded into its
    weights: `MatMul(A, W) * s` → `MatMul(A, W · s)`; `(MatMul(A, W) + B) * s` →
    `MatMul(A, W · s) + B · s`; `(MatMul(A, W) + B) + t` → `MatMul(A, W) + (B + t)` (A of
    any rank); `Gemm(A, W[, C]) * s` → `Gemm(A, W', C · s)` and `Gemm(A, W[, C]) + t` →
    `Gemm(A, W, C + t)`, W' the columns of W (its rows with `transB=1`) scaled. So a
    Keras Dense followed by BatchNormalization, which tf2onnx writes as MatMul [+ Add]
    followed by Mul and Add, becomes one linear layer.

    It runs before `MatMulAddFusion`, so what remains of a 2-D MatMul + Add becomes a Gemm
    in the same run. The Mul patterns sweep first, so `(... ) * s + t` folds in one run."""

    def __init__(self) -> None:
        # Mul and Add are commutative: `s * MatMul(...)` and `B + MatMul(...)` match too.
        super().__init__(PatternMatcherConfigBuilder().enable_commutative_match().build())
        self._fold: _Fold | None = None

    def patterns(self) -> list[Pattern]:
        # Legacy style, because the patterns depend on the opset the pass builds at (the
        # model's): Gemm's C is optional from opset 11 only.
        gemms = ["Gemm", "Gemm_no_c"] if current_opset_imports().get("", 0) >= 11 else ["Gemm"]
        found = [_linear_pattern("matmul_mul", "MatMul", bias=False, outer="Mul"),
                 _linear_pattern("matmul_bias_mul", "MatMul", bias=True, outer="Mul")]
        found += [_linear_pattern(f"{g.lower()}_mul", g, bias=False, outer="Mul") for g in gemms]
        found.append(_linear_pattern("matmul_bias_add", "MatMul", bias=True, outer="Add"))
        found += [_linear_pattern(f"{g.lower()}_add", g, bias=False, outer="Add") for g in gemms]
        return found

    def meet_requirements(self, match_result: MatchResult,
                          context: PassContext | None = None) -> bool:
        self._fold = None
        chain = _Linear.of(match_result)
        product, outer = chain.product, chain.outer
        found = _linear_features(product)
        if found is None:
            return False
        weight, features, rank = found
        inner = chain.bias_add or product
        k_index = _other_input(outer, inner)
        k = _per_feature_input(outer, k_index, weight, rank, features)
        if k is None:
            return False
        if product.type == "Gemm":
            fold = self._gemm_fold(product, weight, k, outer)
        else:
            fold = self._matmul_fold(chain, weight, features, rank, k)
        self._fold = fold
        return fold is not None

    @staticmethod
    def _matmul_fold(chain: _Linear, weight: Tensor, features: int, rank: int,
                     k: np.ndarray) -> _Fold | None:
        product, add = chain.product, chain.bias_add
        b: np.ndarray | None = None
        names = _Names(product.name, _folded_name(product, 1), "")
        if add is not None:
            b_index = _other_input(add, product)
            b = _per_feature_input(add, b_index, weight, rank, features)
            if b is None:
                return None
            names.bias = _folded_name(add, b_index)
        new_weight: Tensor | None = None
        if chain.outer.type == "Mul":
            new_weight = _cast_like(_as_float64(weight) * k[None, :], weight)
            if new_weight is None:
                return None
            b = None if b is None else b * k
        elif b is not None:
            b = b + k
        new_bias = None if b is None else _cast_like(b, weight)
        if b is not None and new_bias is None:
            return None
        return _Fold(new_weight, new_bias, names, op="MatMul",
                     add=None if add is None else add.name)

    @staticmethod
    def _gemm_fold(gemm: Node, weight: Tensor, k: np.ndarray, outer: Node) -> _Fold | None:
        attrs = _attrs(gemm)
        c: np.ndarray | None = None
        if input_connected(gemm, 2):
            c_value = _float_const(gemm, 2)
            if c_value is None or c_value.data_type != weight.data_type:
                return None
            c = _as_float64(c_value) * float(attrs.get("beta", 1.0))
            attrs["beta"] = 1.0
        new_weight: Tensor | None = None
        if outer.type == "Mul":
            axis = 0 if int(attrs.get("transB", 0)) else 1  # B's axis of output features
            scale = k[:, None] if axis == 0 else k[None, :]
            new_weight = _cast_like(_as_float64(weight) * scale, weight)
            if new_weight is None:
                return None
            c = None if c is None else c * k
        else:
            c = k if c is None else c + k
            attrs["beta"] = 1.0  # (a beta without C meant nothing; with the new C it would)
        new_c = None if c is None else _cast_like(c, weight)
        if c is not None and new_c is None:
            return None
        bias_from = (gemm, 2) if input_connected(gemm, 2) else (
            outer, _other_input(outer, gemm))
        names = _Names(gemm.name, _folded_name(gemm, 1), _folded_name(*bias_from))
        return _Fold(new_weight, new_c, names, attrs, "Gemm")

    def replacement(  # type: ignore[override]  # expression style: the engine builds the graph
            self, inputs: PatternInputs, context: PassContext | None = None) -> TensorHolder:
        fold = self._fold
        assert fold is not None  # set by meet_requirements for this very match
        builder = inputs[0].get_owner_builder()
        names = fold.names
        weight = inputs[1] if fold.weight is None else builder.create_const(
            fold.weight, name=names.weight)
        bias = None if fold.bias is None else builder.create_const(fold.bias, name=names.bias)
        if fold.op == "Gemm":
            operands = [inputs[0], weight] if bias is None else [inputs[0], weight, bias]
            return Gemm(*operands, name=names.node, **fold.attrs)
        product = MatMul(inputs[0], weight, name=names.node)
        if bias is None:
            return product
        return Add(product, bias, name=fold.add)
