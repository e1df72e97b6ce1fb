"""P2: a legacy-style PatternFusionPass: `patterns()` with captured tensors, MatMul+Add -> Gemm.

Port of GE's `pattern_base_pass/2_..._capture_tensor/.../python_fuse_matmul_add_pass.py`
(`PythonFuseMatMulAndAddCaptureTensorPass`): a "pattern0" builder, `capture_tensor` of the
MatMul (capture 0) and the Add (capture 1), checks on the captured Add's input descs, and a
"replacement" builder handed back with `create_replacement`. Dropped: the BatchMatMulV2
pattern ("pattern1", no ONNX counterpart but MatMul), the `transpose_x1/x2` attributes (ONNX
MatMul has none, so Gemm's transA/transB stay 0) and the two `create_scalar_float(1.0)`
inputs (ONNX Gemm's alpha and beta are attributes).

The pass runs before shape inference, as GE's does: the model must declare the type of the
MatMul's output (value_info) for `meet_requirements` to see it is DT_FLOAT.
"""

from ge.es import GraphBuilder
from ge.es.all import Gemm, MatMul
from ge.graph import DataType
from ge.passes import (
    PassStage,
    PatternFusionPass,
    create_pattern,
    create_replacement,
    register_fusion_pass,
)


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
            return False
    return True


@register_fusion_pass(name="PythonFuseMatMulAndAddCaptureTensorPass",
                      stage=PassStage.BEFORE_INFER_SHAPE)
class PythonFuseMatMulAndAddCaptureTensorPass(PatternFusionPass):
    def patterns(self):
        builder = GraphBuilder("pattern0")
        a, b, c = builder.create_inputs(3)
        matmul = MatMul(a, b)
        add = matmul + c
        pattern = create_pattern(builder.build_and_reset([add]))
        pattern.capture_tensor(matmul).capture_tensor(add)  # captures 0 and 1
        return [pattern]

    def meet_requirements(self, match_result):
        matmul = match_result.get_captured_tensor(0).node
        add = match_result.get_captured_tensor(1).node
        for i in (0, 1):
            if add.get_input_desc(i).get_data_type() != DataType.DT_FLOAT:
                print(f"[{type(self).__name__}] skip {add.name}: input {i} is not DT_FLOAT")
                return False
        shapes = [matmul.get_input_desc(0).get_shape(), matmul.get_input_desc(1).get_shape(),
                  add.get_input_desc(1).get_shape()]
        if not _fits_gemm(*shapes):
            print(f"[{type(self).__name__}] skip {add.name}: not Gemm-shaped "
                  f"{[list(s) for s in shapes]}")
            return False
        return True

    def replacement(self, match_result):
        builder = GraphBuilder("replacement")
        a, b, c = builder.create_inputs(3)
        gemm = Gemm(a, b, c, alpha=1.0, beta=1.0)
        return create_replacement(builder.build_and_reset([gemm]))
