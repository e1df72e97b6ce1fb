"""Folding per-feature affine operators into the weights of the Gemm or MatMul before them.

A BatchNormalization in inference, or a Mul or Add by a constant that only varies over the
feature axis, is an affine map that folds into the weights of a linear layer with constant
weights (see `ge.compiler.builtin._affine`, which also says what every fold requires;
`fusion_conv_affine` folds the same maps into a Conv or ConvTranspose):

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

Both passes build their patterns in `patterns()` (the legacy style), because the patterns
depend on the model's opset (Gemm's C is optional from opset 11 only); otherwise they are
written as the Conv folds are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ge.compiler.builtin._affine import (
    UNREPRESENTABLE,
    Fold,
    FoldNames,
    as_float64,
    batch_norm,
    bn_affine,
    cast_like,
    float_const,
    fold_names,
    folded_name,
    matched_node,
    node_attrs,
    other_input,
    per_axis,
)
from ge.compiler.builtin._support import dims_of, input_connected, refuse, value_desc
from ge.compiler.builtin.fusion_gemm import gemm_dtypes
from ge.compiler.pass_registry import builtin_pass
from ge.es import GraphBuilder, TensorHolder, current_opset_imports
from ge.es.all import Add, Gemm, MatMul
from ge.graph import Node, Tensor
from ge.graph.node import is_const
from ge.ops.onnx_node import node_opset
from ge.passes import PassContext, PatternFusionPass
from ge.passes.config import PatternMatcherConfigBuilder
from ge.passes.matcher import MatchResult
from ge.passes.pattern import Pattern, PatternInputs, create_pattern

__all__ = ["GemmAddMulFusion", "GemmBatchNormFusion"]


#: Why a match is refused (`ge passes explain` shows it, the report counts it), by the
#: matched operator's type where the text names it: one text per cause, built once.
_PRODUCTS, _STEPS = ("MatMul", "Gemm"), ("Mul", "Add")
_BN_NOT_2D = ("the BatchNormalization's input is not known to be 2-D: it is folded over the "
              "features of an [N, C] value only")
_A_NOT_2D = "MatMul's A is not 2-D (a batched or vector MatMul): Gemm takes a 2-D A"
_B_NOT_CONSTANT = {p: f"the {p}'s B is not a 2-D floating-point constant" for p in _PRODUCTS}
_NOT_GEMM_TYPE = ("the element type is not one Gemm takes at the model's opset, or the "
                  "product is not of B's type")
_C_NOT_CONSTANT = "the Gemm's C is not a floating-point constant of B's element type"
_SCALAR_PRODUCT = "the MatMul's result is a scalar (a vector product): it has no feature axis"
_STEP_NOT_CONSTANT = {s: f"the {s}'s constant is not of the weight's floating-point element "
                         "type" for s in _STEPS}
_NOT_PER_FEATURE = {s: f"the {s}'s constant varies over another axis than the last (feature) "
                       "axis, or has a higher rank than the result" for s in _STEPS}
_BIAS_NOT_PER_FEATURE = ("the MatMul's bias is not a floating-point constant of the weight's "
                         "type varying over the last (feature) axis only")


# -- BatchNormalization ---------------------------------------------------------------------


def _gemm_bn_pattern(name: str, producer: str) -> Pattern:
    """`BatchNormalization(<producer>(A, B[, C]), scale, bias, mean, var)`."""
    builder = GraphBuilder(name)
    count = {"Gemm": 3, "Gemm_no_c": 2, "MatMul": 2}[producer]
    inputs = builder.create_inputs(count + 4)
    if producer == "MatMul":
        product = MatMul(inputs[0], inputs[1])
    else:
        product = Gemm(*inputs[:count])
    bn = batch_norm(product, *inputs[count:])
    return create_pattern(builder.build_and_reset([bn]))


@builtin_pass(name="GemmBatchNormFusion", step="builtin_fusion", requires=("BatchNormalization",),
              also_in=("origin_graph_optimize",))
class GemmBatchNormFusion(PatternFusionPass):
    """`BatchNormalization(Gemm(A, B[, C]))` or `BatchNormalization(MatMul(A, B))` on a
    2-D value, in inference → `Gemm(A, B', C')`."""

    def __init__(self) -> None:
        super().__init__()
        self._fold: Fold | None = None

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
        bn = matched_node(match_result, "BatchNormalization")
        producer = bn.get_input_producer(0)
        assert producer is not None
        product = producer[0]
        out = dims_of(product.get_output_desc(0))
        if out is None or len(out) != 2:
            return refuse(context, _BN_NOT_2D)  # BN over the features of a [N, C] value only
        if product.type == "MatMul":
            a = dims_of(value_desc(product, 0))
            if a is None or len(a) != 2:
                return refuse(context, _A_NOT_2D)  # a batched (or vector) MatMul: no Gemm
        weight = float_const(product, 1)
        if weight is None or len(weight.shape) != 2:
            return refuse(context, _B_NOT_CONSTANT[product.type])
        dtype = weight.data_type
        if dtype not in gemm_dtypes(node_opset(bn)) or (
                product.get_output_desc(0).data_type != dtype):
            return refuse(context, _NOT_GEMM_TYPE)
        attrs = node_attrs(product) if product.type == "Gemm" else {}
        trans_b = int(attrs.get("transB", 0))
        channels = int(weight.shape[0 if trans_b else 1])
        affine = bn_affine(bn, channels)
        if isinstance(affine, str):
            return refuse(context, affine)
        factor, shift = affine
        c: np.ndarray | None = None
        if input_connected(product, 2):
            c_value = float_const(product, 2)
            if c_value is None or c_value.data_type != dtype:
                return refuse(context, _C_NOT_CONSTANT)
            c = as_float64(c_value) * float(attrs.get("beta", 1.0))
        axis = 0 if trans_b else 1  # the axis of B that indexes output features
        scaled = as_float64(weight) * (factor[:, None] if axis == 0 else factor[None, :])
        new_weight = cast_like(scaled, weight, output_axis=axis)
        # y = (alpha * A'B' + beta * C) * f + shift: scale B's feature axis by f, C by f too.
        new_c = cast_like(shift if c is None else c * factor + shift, weight)
        if new_weight is None or new_c is None:
            return refuse(context, UNREPRESENTABLE)
        attrs["beta"] = 1.0
        self._fold = Fold(new_weight, new_c, fold_names(product, bias_from=(bn, 2)), attrs)
        return True

    def replacement(  # type: ignore[override]  # expression style: the engine builds the graph
            self, inputs: PatternInputs, context: PassContext | None = None) -> TensorHolder:
        fold = self._fold
        assert fold is not None and fold.weight is not None and fold.bias is not None
        builder = inputs[0].get_owner_builder()
        return Gemm(inputs[0], builder.create_const(fold.weight, name=fold.names.weight),
                    builder.create_const(fold.bias, name=fold.names.bias), name=fold.names.node,
                    **fold.attrs)


# -- Mul / Add ------------------------------------------------------------------------------


def _linear_pattern(name: str, producer: str, *, bias: bool, outer: str) -> Pattern:
    """`<outer>(<producer>(A, B[, C]) [+ bias], k)`: `producer` is "MatMul" (A, B),
    "Gemm" (A, B, C) or "Gemm_no_c" (A, B); `bias` an Add of a pattern input between
    them (after a MatMul); `outer` "Mul" or "Add". Inputs in that order; k is a pattern
    constant (any constant: its values are checked in `meet_requirements`), so the matcher
    refuses the residual `(x @ W + b) + x` of every transformer block itself, which
    `meet_requirements` was asked about: 2,740 matches per round at 100k nodes."""
    builder = GraphBuilder(name)
    operands = {"Gemm": 3, "Gemm_no_c": 2, "MatMul": 2}[producer]
    inputs = builder.create_inputs(operands + int(bias))
    value = MatMul(*inputs[:2]) if producer == "MatMul" else Gemm(*inputs[:operands])
    if bias:
        value = value + inputs[operands]
    last = builder.create_const(np.zeros((), np.float32))
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
        nodes = [n for n in match_result.get_matched_nodes() if not is_const(n)]  # (not k)
        product = next(n for n in nodes if n.type in ("MatMul", "Gemm"))
        # the product's one reader: the matcher refuses a match whose inner value has others
        ((first, _),) = product.get_out_data_nodes_and_port_indexes(0)
        if len(nodes) == 2:
            return cls(product, None, first)
        outer = next(n for n in nodes if n is not product and n is not first)
        return cls(product, first, outer)


def _linear_features(product: Node) -> tuple[Tensor, int, int] | str:
    """`(W, output features, rank)` of a MatMul (any rank of A) or Gemm whose B is a 2-D
    floating-point constant (for a Gemm, of an element type Gemm accepts at the model's
    opset). `rank` is what the per-feature constants are checked against: the output's
    rank; 2 for a Gemm; 1 for a MatMul whose output rank inference did not find (after a
    Keras Flatten exported at opset 13 or below, onnx's inference gives the Reshape to a
    computed shape no rank): its output has at least one axis, the features last, so a
    constant of rank 1 or 0 varies over them only. Else why not (a refusal's reason)."""
    weight = float_const(product, 1)
    if weight is None or len(weight.shape) != 2:
        return _B_NOT_CONSTANT[product.type]
    out = dims_of(product.get_output_desc(0))
    if product.type == "MatMul":
        return _SCALAR_PRODUCT if out == [] else (weight, int(weight.shape[1]),
                                                  1 if out is None else len(out))
    dtype = weight.data_type
    if dtype not in gemm_dtypes(node_opset(product)) or (
            product.get_output_desc(0).data_type != dtype):
        return _NOT_GEMM_TYPE
    trans_b = product.has_attr("transB") and int(product.get_attr("transB")) != 0
    return weight, int(weight.shape[0 if trans_b else 1]), 2


def _per_feature_input(node: Node, index: int, like: Tensor, rank: int,
                       features: int) -> np.ndarray | str:
    """Input `index` of `node` (a Mul or Add) as a float64 `[features]` vector, when it is a
    constant of `like`'s element type that varies over the last axis of the rank-`rank`
    result only; else why not (a refusal's reason)."""
    value = float_const(node, index)
    if value is None or value.data_type != like.data_type:
        return _STEP_NOT_CONSTANT[node.type]
    vector = per_axis(value, rank, features, rank - 1)
    return _NOT_PER_FEATURE[node.type] if vector is None else vector


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
        self._fold: Fold | None = None

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
        if isinstance(found, str):
            return refuse(context, found)
        weight, features, rank = found
        inner = chain.bias_add or product
        k_index = other_input(outer, inner)
        k = _per_feature_input(outer, k_index, weight, rank, features)
        if isinstance(k, str):
            return refuse(context, k)
        if product.type == "Gemm":
            fold = self._gemm_fold(product, weight, k, outer)
        else:
            fold = self._matmul_fold(chain, weight, features, rank, k)
        if isinstance(fold, str):
            return refuse(context, fold)
        self._fold = fold
        return True

    @staticmethod
    def _matmul_fold(chain: _Linear, weight: Tensor, features: int, rank: int,
                     k: np.ndarray) -> Fold | str:
        """The fold of a MatMul [+ bias] match, or why there is none (a refusal's reason)."""
        product, add = chain.product, chain.bias_add
        b: np.ndarray | None = None
        names = FoldNames(product.name, folded_name(product, 1), "")
        if add is not None:
            b_index = other_input(add, product)
            bias = _per_feature_input(add, b_index, weight, rank, features)
            if isinstance(bias, str):
                return _BIAS_NOT_PER_FEATURE
            b = bias
            names.bias = folded_name(add, b_index)
        new_weight: Tensor | None = None
        if chain.outer.type == "Mul":
            new_weight = cast_like(as_float64(weight) * k[None, :], weight, output_axis=1)
            if new_weight is None:
                return UNREPRESENTABLE
            b = None if b is None else b * k
        elif b is not None:
            b = b + k
        new_bias = None if b is None else cast_like(b, weight)
        if b is not None and new_bias is None:
            return UNREPRESENTABLE
        return Fold(new_weight, new_bias, names, op="MatMul",
                     add=None if add is None else add.name)

    @staticmethod
    def _gemm_fold(gemm: Node, weight: Tensor, k: np.ndarray, outer: Node) -> Fold | str:
        """The fold of a Gemm match, or why there is none (a refusal's reason)."""
        attrs = node_attrs(gemm)
        c: np.ndarray | None = None
        if input_connected(gemm, 2):
            c_value = float_const(gemm, 2)
            if c_value is None or c_value.data_type != weight.data_type:
                return _C_NOT_CONSTANT
            c = as_float64(c_value) * float(attrs.get("beta", 1.0))
            attrs["beta"] = 1.0
        new_weight: Tensor | None = None
        if outer.type == "Mul":
            axis = 0 if int(attrs.get("transB", 0)) else 1  # B's axis of output features
            scale = k[:, None] if axis == 0 else k[None, :]
            new_weight = cast_like(as_float64(weight) * scale, weight)
            if new_weight is None:
                return UNREPRESENTABLE
            c = None if c is None else c * k
        else:
            c = k if c is None else c + k
            attrs["beta"] = 1.0  # (a beta without C meant nothing; with the new C it would)
        new_c = None if c is None else cast_like(c, weight)
        if c is not None and new_c is None:
            return UNREPRESENTABLE
        bias_from = (gemm, 2) if input_connected(gemm, 2) else (
            outer, other_input(outer, gemm))
        names = FoldNames(gemm.name, folded_name(gemm, 1), folded_name(*bias_from))
        return Fold(new_weight, new_c, names, attrs, "Gemm")

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
