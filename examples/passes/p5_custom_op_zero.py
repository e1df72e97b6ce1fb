"""P5: custom-op patterns: `AddCustom(AddCustom(x, Identity(0)), y)` -> `AddCustom(x, y)`.

Port of GE's `pattern_base_pass/5_..._custom_op/.../python_addcustom_zero_pass.py`
(`PythonAddCustomZeroPass`). GE's AddCustom is an Ascend custom kernel with generated ES
functions; here it is registered with `ge.ops.register_op` in the domain "ge.examples"
(broadcasting shape inference, a numpy kernel for constant folding, and a decomposition into
ONNX Add documenting its meaning), and its ES function is `ge.es.custom.operator`. GE's
TensorMove maps to ONNX Identity, so its second pattern is `Identity(Identity(C))`. Every
matched constant must be exactly zero (GE checks the first element within a tolerance; here
every element, exactly) and must not broadcast `x` to a bigger shape.

onnxruntime cannot run a "ge.examples" operator without a compiled custom-op library, so the
test runs models with this op in `onnx.reference.ReferenceEvaluator` with an `OpRun` for it.
"""

import numpy as np

from ge.es.all import Identity
from ge.es.custom import operator
from ge.graph import DataType, Shape, TensorDesc
from ge.ops import register_op
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass

DOMAIN = "ge.examples"
_ZERO_DTYPES = (DataType.DT_FLOAT16, DataType.DT_FLOAT, DataType.DT_DOUBLE, DataType.DT_INT32,
                DataType.DT_INT64)


def _broadcast(a, b):
    """The broadcast of two shapes (unknown rank when either is unknown)."""
    if a.is_unknown_rank() or b.is_unknown_rank():
        return Shape.unknown_rank()
    a, b = list(a), list(b)
    rank = max(len(a), len(b))
    a = [1] * (rank - len(a)) + a
    b = [1] * (rank - len(b)) + b
    out = []
    for x, y in zip(a, b):
        out.append(y if x == 1 else x if y == 1 or x == y else -1)
    return Shape(out)


def _infer_add_custom(ctx):
    x, y = ctx.input_descs
    return [TensorDesc(_broadcast(x.get_shape(), y.get_shape()), x.get_format(),
                       x.get_data_type())]


# The op belongs to this plugin: unregistered when the plugin is unloaded (after a
# compilation of its pass path, at ge.finalize()), registered again when it loads again.
register_op(
    "AddCustom",
    domain=DOMAIN,
    inputs=["x", "y"],
    outputs=["z"],
    infer=_infer_add_custom,
    kernel=lambda x, y: np.add(x, y).astype(x.dtype),
    decomposition=lambda x, y: x + y,
    doc="z = x + y with numpy broadcasting (the Ascend AddCustom sample kernel)",
)
AddCustom = operator("AddCustom", DOMAIN)


def _is_zero(tensor):
    """Every element exactly zero (GE's samples accept |v| < 1e-6 for floats, which would
    remove an epsilon; this port rewrites only what it can rewrite exactly)."""
    return tensor.data_type in _ZERO_DTYPES and bool(np.all(tensor.numpy() == 0))


def _keeps_shape(x_shape, c_shape):
    """Whether broadcasting `x` with a constant of `c_shape` leaves `x`'s shape as it is."""
    if len(c_shape) == 0:
        return True
    if x_shape.is_unknown_rank() or len(c_shape) > len(x_shape):
        return False
    return all(c == 1 or c == x for c, x in zip(reversed(c_shape), reversed(list(x_shape))))


@register_fusion_pass(name="PythonAddCustomZeroPass", stage=PassStage.BEFORE_INFER_SHAPE)
class PythonAddCustomZeroPass(PatternFusionPass):
    @pattern
    def add_identity_zero(self, inputs):
        x, y = inputs[0], inputs[1]
        zero = x.get_owner_builder().create_const_float(0.0)
        return AddCustom(AddCustom(x, Identity(zero)), y)

    @pattern
    def add_moved_identity_zero(self, inputs):
        x, y = inputs[0], inputs[1]
        zero = x.get_owner_builder().create_const_float(0.0)
        return AddCustom(AddCustom(x, Identity(Identity(zero))), y)  # GE: TensorMove(Identity)

    def meet_requirements(self, match_result):
        x = match_result.get_captured_tensor(0)
        x_shape = x.node.get_output_desc(x.index).get_shape()
        for node in match_result.get_matched_nodes():
            if node.type not in ("Const", "Constant"):
                continue
            if not node.has_attr("value"):
                return False
            value = node.get_attr("value")
            if not _is_zero(value) or not _keeps_shape(x_shape, value.shape):
                return False
        print(f"[PythonAddCustomZeroPass] {match_result}: drop the zero AddCustom")
        return True

    def replacement(self, inputs):
        x, y = inputs[:2]
        return AddCustom(x, y)
