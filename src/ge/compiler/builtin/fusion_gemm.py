"""`MatMulAddFusion`: `Add(MatMul(A, B), C)` becomes `Gemm(A, B, C)`.

ONNX's Gemm computes `alpha * A' @ B' + beta * C` for 2-D `A` and `B`, with `C` broadcast
*unidirectionally* to the `[M, N]` product. A MatMul followed by an Add is exactly a Gemm
with `alpha = beta = 1` and no transposes when:

* `A` and `B` have static rank 2 (a 3-D activation, as in a transformer's `[batch, seq,
  hidden] @ [hidden, out]`, is a batched MatMul that Gemm cannot express);
* `C` broadcasts to `[M, N]` without growing it: a scalar, `[N]`, `[1, N]`, `[M, 1]`,
  `[M, N]` (each dim 1 or provably equal to the product's, symbolic dims by name);
* the element type is one Gemm takes at the model's opset (float16, float, double; bfloat16
  from opset 13; Gemm's integer types are left alone, runtimes rarely implement them);
* the MatMul's result is used by the Add only (the matcher refuses a match whose inner
  value has another consumer, a graph output included).

The Add may read the MatMul as either operand (`bias + A @ B`): the pass enables the
matcher's commutative matching. The rewrite gives the Gemm the Add's consumers, and a graph
output keeps its name.

`gemm_dtypes` is shared with the fusions folding into Gemm (`fusion_linear_affine`).
"""

from __future__ import annotations

from ge.compiler.builtin._support import broadcasts_to, dims_of, refuse
from ge.compiler.pass_registry import builtin_pass
from ge.es import TensorHolder
from ge.es.all import Gemm, MatMul
from ge.graph import DataType
from ge.ops.onnx_node import node_opset
from ge.passes import PassContext, PatternFusionPass, pattern
from ge.passes.config import PatternMatcherConfigBuilder
from ge.passes.matcher import MatchResult
from ge.passes.pattern import PatternInputs

__all__ = ["MatMulAddFusion", "gemm_dtypes"]

#: Gemm's floating-point element types by the opset that introduced them (Gemm-7 onwards).
_GEMM_FLOATS = (DataType.DT_FLOAT16, DataType.DT_FLOAT, DataType.DT_DOUBLE)
_GEMM_MIN_OPSET = 7  # Gemm-6 and earlier broadcast C only with `broadcast=1`


#: Why a match is refused (`ge passes explain` shows it, the report counts it): one text per
#: cause, whatever the match.
_UNKNOWN_AB_RANK = "the rank of MatMul's A or B is unknown: Gemm takes 2-D A and B"
_NOT_2D = ("MatMul's operands are not both 2-D (a batched or vector MatMul): Gemm takes "
           "2-D A and B")
_UNKNOWN_C_RANK = "the rank of the added C is unknown"
_C_GROWS = ("the added C does not broadcast to the [M, N] product without growing it (a "
            "higher rank, or a dim neither 1 nor provably the product's)")
_MIXED_TYPES = "A, B, C and the result are not all of one element type"
_OLD_OPSET = "the opset is before 7, where Gemm broadcasts C only with broadcast=1"
_NOT_GEMM_TYPE = ("the element type is unknown or not a floating-point one (float16, float, "
                  "double; bfloat16 from opset 13): ONNX's Gemm takes integers from opset "
                  "11, but onnxruntime has no integer Gemm kernel")


def gemm_dtypes(opset: int) -> frozenset[DataType]:
    """The floating-point element types ONNX Gemm accepts at `opset` (none before 7)."""
    if opset < _GEMM_MIN_OPSET:
        return frozenset()
    if opset < 13:
        return frozenset(_GEMM_FLOATS)
    return frozenset((*_GEMM_FLOATS, DataType.DT_BF16))


@builtin_pass(name="MatMulAddFusion", step="builtin_fusion", requires=("MatMul",),
              also_in=("origin_graph_optimize",))
class MatMulAddFusion(PatternFusionPass):
    """`MatMul(A, B) + C` (or `C + MatMul(A, B)`) → `Gemm(A, B, C)` (see the module
    docstring for when)."""

    def __init__(self) -> None:
        # Add is commutative: `bias + x @ w` matches the same pattern.
        super().__init__(PatternMatcherConfigBuilder().enable_commutative_match().build())

    @pattern
    def matmul_add(self, inputs: PatternInputs) -> TensorHolder:
        # Captures: 0..2 the producers of A, B and C, 3 the Add's output.
        return MatMul(inputs[0], inputs[1]) + inputs[2]

    def meet_requirements(self, match_result: MatchResult,
                          context: PassContext | None = None) -> bool:
        add = match_result.get_captured_tensor(3).node
        a_in, b_in = match_result.get_captured_tensor(0), match_result.get_captured_tensor(1)
        a, b = a_in.node.get_output_desc(a_in.index), b_in.node.get_output_desc(b_in.index)
        a_dims, b_dims = dims_of(a), dims_of(b)
        if a_dims is None or b_dims is None:  # a rank inference did not find: no way to tell
            return refuse(context, _UNKNOWN_AB_RANK)
        if len(a_dims) != 2 or len(b_dims) != 2:
            # batched or vector MatMul: not a Gemm (checked first: the usual no)
            return refuse(context, _NOT_2D)
        c_in = match_result.get_captured_tensor(2)
        c = c_in.node.get_output_desc(c_in.index)
        c_dims = dims_of(c)
        if c_dims is None:
            return refuse(context, _UNKNOWN_C_RANK)
        if not broadcasts_to(c_dims, [a_dims[0], b_dims[1]]):
            return refuse(context, _C_GROWS)  # C would grow the product, or its dims unknown
        allowed = gemm_dtypes(node_opset(add))
        dtypes = {a.data_type, b.data_type, c.data_type, add.get_output_desc(0).data_type}
        if len(dtypes) != 1:
            return refuse(context, _MIXED_TYPES)
        if not allowed:
            return refuse(context, _OLD_OPSET)
        if not dtypes <= allowed:
            return refuse(context, _NOT_GEMM_TYPE)
        return True

    def replacement(  # type: ignore[override]  # expression style: the engine builds the graph
            self, inputs: PatternInputs, context: PassContext | None = None) -> TensorHolder:
        a, b, c = inputs[:3]
        return Gemm(a, b, c)  # alpha = beta = 1, no transposes: MatMul + Add exactly
