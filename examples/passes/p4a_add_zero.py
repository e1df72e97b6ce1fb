"""P4a: `x + 0` -> `x`: a pattern constant matches any constant, `meet_requirements` reads it.

Port of GE's `pattern_base_pass/4_add_zero_pass/.../python_add_zero_pass.py`
(`PythonAddZeroPass`): the pattern `inputs[0] + 0` holds an int64 scalar Const, which (without
const-value match) stands for any constant; `meet_requirements` reads the first matched
Const's "value" and accepts a single element equal to zero, and the replacement passes `x`
through. Two departures from GE, both for exact rewrites: GE accepts floats with |v| < 1e-6
(doubles 1e-15), which removes the `+ 1e-6` epsilon of a T5 layer norm (float32(1e-6) is
just below 1e-6) and changes the model's numbers, so this port accepts exact zeros only
(float, double, int32, int64; other dtypes never); and a one-element constant of higher rank
than `x` would broadcast `x` up ([3] + [[0]] is [1, 3]), so such a match is refused (and
needs `x`'s rank to be known).
"""

from ge.graph import DataType
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass

_ZERO_DTYPES = (DataType.DT_FLOAT, DataType.DT_DOUBLE, DataType.DT_INT32, DataType.DT_INT64)


def _is_zero(tensor):
    """A single-element tensor exactly equal to zero (-0.0 included)."""
    if tensor.size != 1 or tensor.data_type not in _ZERO_DTYPES:
        return False
    return tensor.numpy().reshape(-1)[0] == 0


@register_fusion_pass(name="PythonAddZeroPass", stage=PassStage.BEFORE_INFER_SHAPE)
class PythonAddZeroPass(PatternFusionPass):
    @pattern
    def add_zero(self, inputs):
        return inputs[0] + 0

    def meet_requirements(self, match_result):
        consts = [n for n in match_result.get_matched_nodes() if n.type in ("Const", "Constant")]
        if not consts:
            return True
        const = consts[0]
        if not const.has_attr("value"):
            return False  # an ONNX Constant written with value_float(s)/value_int(s)
        value = const.get_attr("value")
        if not _is_zero(value):
            return False
        if len(value.shape) > 0:
            x = match_result.get_captured_tensor(0)
            rank = x.node.get_output_desc(x.index).get_shape().get_dim_num()
            if rank < len(value.shape):  # unknown rank (-1) or a broadcast that grows x
                return False
        print(f"[PythonAddZeroPass] {match_result}: remove Add of zero")
        return True

    def replacement(self, inputs):
        return inputs[0]
