"""P1: an expression-style PatternFusionPass: `MatMul(a, b) + c` becomes `Gemm(a, b, c)`.

Port of GE's `pattern_base_pass/1_.../python_fuse_matmul_add_pass.py`
(`PythonFuseMatMulAndAddPass`): `@pattern` method, `meet_requirements`, and
`replacement(self, inputs)`. GE's second pattern, `BatchMatMulV2(a, b) + c`, has no ONNX
counterpart other than MatMul itself, so it is dropped. Ascend's GEMM takes alpha and beta as
inputs; ONNX Gemm takes them as attributes. GE accepts every match; ONNX Gemm needs 2-D `a`
and `b` and a `c` that broadcasts to the product, so `meet_requirements` checks that.

Run: `ASCEND_GE_PY_PASS_PATH=examples/passes/p1_matmul_add_expression.py ge compile M -o OUT`.
"""

from ge.es.all import Gemm, MatMul
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass


def _fits_gemm(a_shape, b_shape, c_shape):
    """Whether Add(MatMul(a, b), c) equals Gemm(a, b, c): `a` and `b` 2-D, and `c`
    broadcasting to the [M, N] product without growing it (Gemm's C is unidirectional)."""
    if len(a_shape) != 2 or len(b_shape) != 2:  # the ranks (unknown rank: [-2])
        return False
    if c_shape.is_unknown_rank() or len(c_shape) > 2:
        return False
    product = [a_shape[0], b_shape[1]]
    for dim, target in zip(reversed(list(c_shape)), reversed(product)):
        if dim != 1 and dim != target:
            return False
        if isinstance(dim, int) and dim < 0:
            return False  # an unknown dim may be anything
    return True


@register_fusion_pass(name="PythonFuseMatMulAndAddPass", stage=PassStage.BEFORE_INFER_SHAPE)
class PythonFuseMatMulAndAddPass(PatternFusionPass):
    @pattern
    def matmul_add(self, inputs):
        return MatMul(inputs[0], inputs[1]) + inputs[2]

    def meet_requirements(self, match_result):
        # An expression pattern captures its inputs 0..2 (the real producers), then the Add.
        shapes = []
        for i in range(3):
            tensor = match_result.get_captured_tensor(i)
            shapes.append(tensor.node.get_output_desc(tensor.index).get_shape())
        ok = _fits_gemm(*shapes)
        print(f"[PythonFuseMatMulAndAddPass] {match_result}: "
              f"{'fuse' if ok else 'skip'} (shapes {[list(s) for s in shapes]})")
        return ok

    def replacement(self, inputs):
        a, b, c = inputs[:3]
        return Gemm(a, b, c, alpha=1.0, beta=1.0)
