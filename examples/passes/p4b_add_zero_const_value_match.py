"""P4b: `x + 0.0` -> `x` with const-value match: only a float32 scalar 0.0 constant matches.

Port of GE's `pattern_base_pass/4_add_zero_pass/.../python_add_zero_pass_const_value_match.py`
(`PythonAddZeroConstValueMatchPass`): instead of reading the constant in `meet_requirements`
(P4a), `enable_const_value_match()` makes the pattern constant match only a constant of equal
dtype, shape and bytes. A float32 scalar never changes the shape of a float32 `x`, so the
pass-through replacement is exact.
"""

from ge.passes import (
    PassStage,
    PatternFusionPass,
    PatternMatcherConfigBuilder,
    pattern,
    register_fusion_pass,
)


@register_fusion_pass(name="PythonAddZeroConstValueMatchPass",
                      stage=PassStage.BEFORE_INFER_SHAPE)
class PythonAddZeroConstValueMatchPass(PatternFusionPass):
    def __init__(self):
        super().__init__(PatternMatcherConfigBuilder().enable_const_value_match().build())

    @pattern
    def add_zero(self, inputs):
        return inputs[0] + 0.0  # a float32 scalar Const

    def replacement(self, inputs):
        return inputs[0]
