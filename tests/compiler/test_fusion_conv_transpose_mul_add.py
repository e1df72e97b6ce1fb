"""`ConvAddMulFusion` after a `ConvTranspose`: Keras' Conv2DTranspose + BatchNormalization,
which tf2onnx writes as ConvTranspose → Mul(per-channel constant) → Add(per-channel
constant), folds into the ConvTranspose. Its weight is `[C_in, C_out / group, k...]`: the
scale multiplies axis 1 within each group of rows, and the bias becomes `B · s + t`. The
fold fires on models built for it and on no near miss; the rewritten model passes onnx's
full checker, keeps its output names and computes what the original computes in
onnxruntime (rtol = atol = 1e-5)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
import pytest
from builtin_helpers import (
    F,
    affine_steps,
    assert_fused,
    histogram,
    init,
    load,
    model,
    run_pass,
    vi,
)
from onnx import helper, numpy_helper

import ge
from ge.compiler.builtin.fusion_conv_affine import ConvAddMulFusion

pytestmark = [
    pytest.mark.builtin_passes,  # these tests are about a built-in pass
    pytest.mark.usefixtures("matching"),  # by the search and by match plans
]

node = helper.make_node
RNG = np.random.default_rng(0)
TOL = 1e-5
CIN, SIZE = 4, 5


def deconv_then(ops: Sequence[tuple[str, Sequence[int] | None, bool]], *, group: int = 1,
                cout: int = 6, bias: bool = False, operand_input: bool = False,
                weight_input: bool = False, outputs: Sequence[onnx.ValueInfoProto] = (),
                y_shape: Sequence[int] | None = None) -> onnx.ModelProto:
    """ConvTranspose(x [2, 4, 5, 5], w [4, cout / group, 2, 2], strides 2) then each (op,
    constant shape, constant first) in turn; the last result is y (of `y_shape`, by default
    [2, cout, 10, 10]). A
    None shape is the per-channel `[cout, 1, 1]` one (tf2onnx's)."""
    inputs = [vi("x", F, [2, CIN, SIZE, SIZE])]
    inits = []
    w_shape = [CIN, cout // group, 2, 2]
    if weight_input:
        inputs.append(vi("w", F, w_shape))
    else:
        inits.append(init("w", RNG.standard_normal(w_shape)))
    conv_in = ["x", "w"]
    if bias:
        inits.append(init("cb", RNG.standard_normal(cout)))
        conv_in.append("cb")
    nodes = [node("ConvTranspose", conv_in, ["t0"], name="deconv", group=group,
                  strides=[2, 2], kernel_shape=[2, 2])]
    nodes += affine_steps(ops, default_shape=[cout, 1, 1], inputs=inputs, inits=inits,
                          operand_input=operand_input, rng=RNG)
    y_shape = [2, cout, 2 * SIZE, 2 * SIZE] if y_shape is None else list(y_shape)
    return model(nodes, inputs, [vi("y", F, y_shape), *outputs], inits)


def assert_folded(source: onnx.ModelProto, tmp_path: Path) -> onnx.ModelProto:
    graph = load(source)
    assert run_pass(ConvAddMulFusion, graph)
    assert {k: v for k, v in histogram(graph).items() if k != "Const"} == {
        "Data": 1, "ConvTranspose": 1, "NetOutput": 1}
    saved = assert_fused(graph, source, tmp_path, tol=TOL)
    before = graph.mutation_count
    assert not run_pass(ConvAddMulFusion, graph)  # a second run changes nothing
    assert graph.mutation_count == before
    return saved


def assert_untouched(source: onnx.ModelProto, tmp_path: Path) -> None:
    graph = load(source)
    before = histogram(graph)
    assert not run_pass(ConvAddMulFusion, graph)
    assert histogram(graph) == before
    assert_fused(graph, source, tmp_path, tol=TOL)


# -- what folds -----------------------------------------------------------------------------


@pytest.mark.parametrize(("group", "cout"), [(1, 6), (2, 6), (4, 4), (4, 8)],
                         ids=["plain", "grouped", "depthwise", "depthwise-x2"])
@pytest.mark.parametrize("bias", [False, True], ids=["no-bias", "bias"])
def test_a_keras_batch_norm_after_conv_transpose_folds(group: int, cout: int, bias: bool,
                                                       tmp_path: Path) -> None:
    source = deconv_then([("Mul", None, False), ("Add", None, False)], group=group,
                         cout=cout, bias=bias)
    saved = assert_folded(source, tmp_path)
    (deconv,) = saved.graph.node
    assert deconv.name == "deconv" and list(deconv.output) == ["y"]
    assert len(deconv.input) == 3  # the Add made a bias
    attrs = {a.name: helper.get_attribute_value(a) for a in deconv.attribute}
    assert attrs["group"] == group and attrs["strides"] == [2, 2]


@pytest.mark.parametrize("shape", [[6, 1, 1], [1, 6, 1, 1], [], [1], [1, 1, 1, 1]], ids=str)
@pytest.mark.parametrize("op", ["Mul", "Add"])
def test_mul_or_add_by_a_channel_constant_folds(op: str, shape: list[int],
                                                tmp_path: Path) -> None:
    saved = assert_folded(deconv_then([(op, shape, False)]), tmp_path)
    (deconv,) = saved.graph.node
    assert len(deconv.input) == (3 if op == "Add" else 2)  # a Mul makes no bias


def test_constant_first_operands_match_too(tmp_path: Path) -> None:
    assert_folded(deconv_then([("Mul", [1, 6, 1, 1], True), ("Add", [6, 1, 1], True)],
                              bias=True), tmp_path)


def test_a_grouped_weight_is_scaled_along_its_output_channels() -> None:
    """group 2, 4 inputs, 6 outputs: W is [4, 3, 2, 2]; rows 0-1 hold output channels 0-2,
    rows 2-3 channels 3-5, so W[i, j] is scaled by s[(i // 2) * 3 + j]."""
    source = deconv_then([("Mul", None, False)], group=2, cout=6, bias=True)
    inits = {i.name: numpy_helper.to_array(i) for i in source.graph.initializer}
    w, b, s = inits["w"], inits["cb"], inits["k0"].reshape(-1)
    graph = load(source)
    assert run_pass(ConvAddMulFusion, graph)
    (deconv,) = graph.nodes_of_type("ConvTranspose")
    folded_w, folded_b = (deconv.get_input_producer(i)[0].get_attr("value").numpy()
                          for i in (1, 2))
    expected = w.copy()
    for i in range(4):
        for j in range(3):
            expected[i, j] *= s[(i // 2) * 3 + j]
    np.testing.assert_allclose(folded_w, expected, rtol=1e-6)
    np.testing.assert_allclose(folded_b, b * s, rtol=1e-6)


def test_float16_folds_in_its_own_type(tmp_path: Path) -> None:
    source = deconv_then([("Mul", None, False), ("Add", None, False)])
    for tensor in source.graph.initializer:
        tensor.CopyFrom(init(tensor.name, numpy_helper.to_array(tensor), np.float16))
    for value in [*source.graph.input, *source.graph.output]:
        value.type.tensor_type.elem_type = onnx.TensorProto.FLOAT16
    onnx.checker.check_model(source, full_check=True)
    graph = load(source)
    assert run_pass(ConvAddMulFusion, graph)
    saved = assert_fused(graph, source, tmp_path, tol=5e-2)
    assert {i.data_type for i in saved.graph.initializer} == {onnx.TensorProto.FLOAT16}


# -- near misses ----------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [[10], [1, 1, 10, 10], [6, 10, 10], [1, 6, 1, 10],
                                   [2, 1, 1, 1], [1, 1, 6, 1, 1]], ids=str)
@pytest.mark.parametrize("op", ["Mul", "Add"])
def test_not_for_a_constant_that_varies_over_other_axes(op: str, shape: list[int],
                                                        tmp_path: Path) -> None:
    # A rank-5 constant broadcasts the output up to rank 5.
    y_shape = [1, 2, 6, 10, 10] if len(shape) > 4 else None
    assert_untouched(deconv_then([(op, shape, False)], y_shape=y_shape), tmp_path)


def test_not_for_a_non_constant_scale_or_weight(tmp_path: Path) -> None:
    assert_untouched(deconv_then([("Mul", None, False)], operand_input=True), tmp_path)
    assert_untouched(deconv_then([("Mul", None, False)], weight_input=True), tmp_path)


def test_not_when_the_conv_transpose_output_is_used_elsewhere(tmp_path: Path) -> None:
    source = deconv_then([("Mul", None, False)], outputs=[vi("t0", F, [2, 6, 10, 10])])
    assert_untouched(source, tmp_path)


# -- in the compiler ------------------------------------------------------------------------


def test_the_compiler_folds_conv2d_transpose_batch_norm_leaky_relu() -> None:
    """The block of the trial's keras_cnn2: ConvTranspose, Mul, Add, LeakyRelu."""
    source = deconv_then([("Mul", None, False), ("Add", None, False)], bias=True)
    source.graph.node[-1].output[0] = "bn"
    source.graph.node.append(node("LeakyRelu", ["bn"], ["y"], alpha=0.1))
    onnx.checker.check_model(source, full_check=True)
    result = ge.compile(source, verify=True, rtol=TOL, atol=TOL)
    assert result.verification is not None and result.verification.ok
    assert set(result.report.ops_after) - {"Const"} == {"ConvTranspose", "LeakyRelu"}
    assert result.report.rewrites_by_pass().get("ConvAddMulFusion") == 2
