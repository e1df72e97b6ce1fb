"""P3: a PatternMatcherConfig: `MatMul(x, y) + C` -> `Gemm(x, y, C)` only for one exact `C`.

Port of GE's `pattern_base_pass/3_..._pattern_matcher_config/...` (`PythonMatmulAddFusionPass`):
`super().__init__()` with const-value and IR-attribute matching enabled, so the pattern's
constant `[[0.1, 0.1], [0.1, 0.1]]` (float32) matches only a constant of that dtype, shape and
bytes, and pattern nodes match only nodes whose attributes equal theirs (defaults filled in).
ONNX MatMul has no attributes, so GE's `transpose_x1=False, transpose_x2=False` has nothing to
map to; the BatchMatMulV2 pattern is dropped (its ONNX counterpart is MatMul). Because C is
[2, 2], Gemm is right only for 2-D x and y with a [2, 2] product: `meet_requirements` checks.
"""

from ge.es.all import Gemm, MatMul
from ge.passes import (
    PassStage,
    PatternFusionPass,
    PatternMatcherConfigBuilder,
    pattern,
    register_fusion_pass,
)

BIAS = [[0.1, 0.1], [0.1, 0.1]]


@register_fusion_pass(name="PythonMatmulAddFusionPass", stage=PassStage.BEFORE_INFER_SHAPE)
class PythonMatmulAddFusionPass(PatternFusionPass):
    def __init__(self):
        super().__init__(PatternMatcherConfigBuilder()
                         .enable_const_value_match()
                         .enable_ir_attr_match()
                         .build())

    @pattern
    def matmul_add_const(self, inputs):
        return MatMul(inputs[0], inputs[1]) + BIAS

    def meet_requirements(self, match_result):
        x, y = (match_result.get_captured_tensor(i) for i in (0, 1))
        x_shape = x.node.get_output_desc(x.index).get_shape()
        y_shape = y.node.get_output_desc(y.index).get_shape()
        # Gemm needs 2-D operands; Add would broadcast a product other than [2, 2] to a
        # different shape than Gemm's.
        return (len(x_shape) == 2 and len(y_shape) == 2
                and x_shape[0] == 2 and y_shape[1] == 2)

    def replacement(self, inputs):
        x, y = inputs[:2]
        return Gemm(x, y, BIAS, alpha=1.0, beta=1.0)
