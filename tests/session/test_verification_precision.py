"""Verification of what two correct models may legitimately differ in: float16 outputs held
to their type's precision, outputs of random operators left out, and the element a failure
message points at (one that fails, not merely the largest difference)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import ge
from ge.cli import cli
from ge.errors import CompileWarning, VerificationError
from ge.session import compare_outputs, verify
from ge.session.verification import random_output_reasons

F16 = TensorProto.FLOAT16


def _conv_bn_fp16(channels: int = 32) -> onnx.ModelProto:
    """One float16 Conv followed by an inference BatchNormalization with varied statistics:
    ConvBatchNormFusion folds it, rounding the folded weights to float16 once."""
    rng = np.random.default_rng(0)
    f16 = np.float16

    def init(name: str, array: np.ndarray) -> onnx.TensorProto:
        return numpy_helper.from_array(array.astype(f16), name)

    inits = [init("w", rng.standard_normal((channels, 16, 3, 3)) * 0.2),
             init("scale", rng.uniform(0.5, 2.0, channels)),
             init("bias", rng.standard_normal(channels)),
             init("mean", rng.standard_normal(channels) * 0.1),
             init("var", rng.uniform(0.5, 2.0, channels))]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"],
                              ["y"])]
    graph = helper.make_graph(nodes, "conv_bn_fp16",
                              [helper.make_tensor_value_info("x", F16, [1, 16, 16, 16])],
                              [helper.make_tensor_value_info("y", F16, [1, channels, 16, 16])],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_float16_outputs_are_held_to_their_precision_not_float32s() -> None:
    expected = {"y": np.array([9.8828125, 0.0012, -3.5], np.float16)}
    one_ulp = {"y": np.array([9.890625, 0.0012, -3.5], np.float16)}  # 1 ulp at 9.88
    report = compare_outputs(expected, one_ulp)
    out = report.outputs[0]
    assert report.ok and out.rtol == 2.0 ** -10
    assert out.atol == pytest.approx(2.0 ** -10 * 9.8828125)
    # the same numbers in float32 are held to the tolerance given
    as_f32 = compare_outputs({"y": expected["y"].astype(np.float32)},
                             {"y": one_ulp["y"].astype(np.float32)})
    assert not as_f32.ok and (as_f32.outputs[0].rtol, as_f32.outputs[0].atol) == (1e-4, 1e-5)
    # a real error is still one: 1% off
    wrong = compare_outputs(expected, {"y": np.array([9.98, 0.0012, -3.5], np.float16)})
    assert not wrong.ok and wrong.outputs[0].worst_index == (0,)
    assert "(float16: held to rtol=0.000977, atol=0.00965)" in wrong.summary()
    # a wider tolerance given stays
    loose = compare_outputs(expected, one_ulp, rtol=0.1, atol=0.5).outputs[0]
    assert (loose.rtol, loose.atol) == (0.1, 0.5)


def test_a_folded_float16_batchnorm_verifies(tmp_path: Path) -> None:
    """The trial's case: the fold rounds once where onnxruntime rounds twice; 1 ulp apart."""
    model = _conv_bn_fp16()
    result = ge.compile(model, verify=True)
    assert result.report.rewrites_by_pass() == {"ConvBatchNormFusion": 1}
    assert result.verification is not None and result.verification.ok
    assert result.verification.outputs[0].max_abs_diff > 1e-5  # beyond float32's tolerance
    source, target = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    run = CliRunner().invoke(cli, ["compile", str(source), "-o", str(target), "--verify"])
    assert run.exit_code == 0, run.output
    assert "yes (rtol=0.000977, atol=" in run.output and target.exists()


def test_the_failure_names_an_element_beyond_tolerance_not_the_largest_difference() -> None:
    expected = {"y": np.array([10.0, 0.001], np.float32)}
    actual = {"y": np.array([10.0078, 0.002], np.float32)}
    report = compare_outputs(expected, actual, rtol=1e-2, atol=1e-4)
    out = report.outputs[0]
    assert not report.ok and out.mismatches == 1
    assert out.worst_index == (1,) and out.max_abs_diff == pytest.approx(0.0078, rel=1e-3)
    assert "worst at index [1] (expected 0.001, got 0.002)" in report.summary()
    ok = compare_outputs(expected, actual, rtol=1.5).outputs[0]  # nothing fails: the largest
    assert ok.ok and ok.worst_index == (0,) and "largest at index [0]" in ok.describe()


def _dropout_model(training: bool, *, in_body: bool = False) -> onnx.ModelProto:
    """x -> Dropout(ratio 0.5, training_mode) -> noisy; x -> Relu -> clean. With `in_body`
    the random operator is a RandomUniformLike inside an If's then branch."""
    vi = helper.make_tensor_value_info
    inits = [numpy_helper.from_array(np.array(0.5, np.float32), "ratio"),
             numpy_helper.from_array(np.array(training), "mode"),
             numpy_helper.from_array(np.array(True), "cond")]
    if in_body:
        then_body = helper.make_graph(
            [helper.make_node("RandomUniformLike", ["x"], ["r"], name="noise"),
             helper.make_node("Add", ["x", "r"], ["t"])], "then", [],
            [vi("t", TensorProto.FLOAT, [2, 8])])
        else_body = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else",
                                      [], [vi("e", TensorProto.FLOAT, [2, 8])])
        noisy = helper.make_node("If", ["cond"], ["noisy"], name="branch",
                                 then_branch=then_body, else_branch=else_body)
    else:
        noisy = helper.make_node("Dropout", ["x", "ratio", "mode"], ["noisy"], name="drop")
    graph = helper.make_graph(
        [noisy, helper.make_node("Relu", ["x"], ["clean"], name="relu")], "g",
        [vi("x", TensorProto.FLOAT, [2, 8])],
        [vi("noisy", TensorProto.FLOAT, [2, 8]), vi("clean", TensorProto.FLOAT, [2, 8])],
        inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_outputs_of_random_operators_are_not_compared_and_the_user_is_told(
        tmp_path: Path) -> None:
    """A model exported in train(): its Dropout's output differs between two runs of the same
    model. Verification leaves that output out (warning, naming the operator) and compares
    the others; before, it failed blaming the compilation."""
    model = _dropout_model(training=True)
    assert random_output_reasons(model) == {
        "noisy": "not compared: depends on the random operator Dropout 'drop' in training mode"}
    with pytest.warns(CompileWarning, match=r"does not compare output\(s\) 'noisy': they "
                      r"depend on the random operator Dropout 'drop' in training mode"):
        result = ge.compile(model, verify="each-pass", builtin_passes=False)
    report = result.verification
    assert report is not None and report.ok
    assert [o.name for o in report.not_compared] == ["noisy"]
    assert [o.compared for o in report.outputs] == [False, True]
    assert "1 output(s) match" in report.summary() and "1 not compared" in report.summary()
    assert report.as_dict()["outputs"][0]["compared"] is False
    # verify() (and so ge.testing's assertions) leaves it out too
    assert verify(model, model).ok


def test_a_random_operator_in_a_body_makes_its_owners_outputs_random() -> None:
    model = _dropout_model(training=True, in_body=True)
    assert random_output_reasons(model) == {
        "noisy": "not compared: depends on the random operator RandomUniformLike 'noise' in "
                 "a body of 'branch'"}


def _random_function_calls() -> onnx.ModelProto:
    """y = Noise(x) - Noise(x), Noise a model-local function whose body is random (through a
    nested call): the two calls differ, so y is not 0."""
    inner = helper.make_function("loc", "Draw", ["X"], ["Y"],
                                 [helper.make_node("RandomUniformLike", ["X"], ["Y"])],
                                 [helper.make_opsetid("", 17)])
    noise = helper.make_function("loc", "Noise", ["X"], ["Y"],
                                 [helper.make_node("Draw", ["X"], ["Y"], domain="loc")],
                                 [helper.make_opsetid("", 17), helper.make_opsetid("loc", 1)])
    graph = helper.make_graph(
        [helper.make_node("Noise", ["x"], ["u1"], domain="loc", name="n1"),
         helper.make_node("Noise", ["x"], ["u2"], domain="loc", name="n2"),
         helper.make_node("Sub", ["u1", "u2"], ["y"], name="sub")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64])])
    return helper.make_model(graph, functions=[inner, noise], opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("loc", 1)])


def test_calls_of_a_random_function_stay_apart_and_are_not_compared(tmp_path: Path) -> None:
    """Trial M: CSE merged the two calls (y = u1 - u1 = 0 in the model written, exit 0),
    and verification compared y, failing a right compilation with GE1603: a random operator
    in a called function's body (at any depth of calls) makes the call random."""
    model = _random_function_calls()
    assert random_output_reasons(model) == {
        "y": "not compared: depends on the random operator RandomUniformLike in function "
             "loc.Noise, which 'n1' calls"}
    for inline in (False, True):
        with pytest.warns(CompileWarning, match="does not compare output"):
            result = ge.compile(model, verify=True, inline_functions=inline)
        out = tmp_path / f"out_{inline}.onnx"
        result.save(out)
        y = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(
            None, {"x": np.zeros(64, np.float32)})[0]
        assert np.abs(y).max() > 0  # two draws, not one drawn twice
        assert result.verification is not None and result.verification.ok


def test_inference_dropout_is_compared_and_a_real_difference_still_fails() -> None:
    model = _dropout_model(training=False)
    assert random_output_reasons(model) == {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        result = ge.compile(model, verify=True)
    assert result.verification is not None and not result.verification.not_compared
    # a wrong deterministic output next to a random one still fails the comparison
    random = random_output_reasons(_dropout_model(training=True))
    x = np.ones((2, 8), np.float32)
    report = compare_outputs({"noisy": x, "clean": x}, {"noisy": 0 * x, "clean": 2 * x},
                             not_compared=random)
    assert not report.ok and [o.name for o in report.failures] == ["clean"]
    with pytest.raises(VerificationError, match="output 'clean'"):
        report.raise_if_failed("differs")


def test_an_original_that_cannot_run_is_named_as_the_original(tmp_path: Path) -> None:
    """Both models share the graph name: the error said "onnxruntime failed to run graph
    'main_graph'" and a trial user could not tell ge was not at fault. Nothing written."""
    from ge.errors import SessionError

    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])], "main_graph",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, None])],
        [helper.make_tensor("shape", TensorProto.INT64, [2], [3, -1])])  # 2x4 is not 3x?
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(SessionError) as caught:
        ge.compile(model, verify=True)
    assert caught.value.code == "GE1601"
    assert caught.value.message.startswith(
        "the original model (as given, before any pass) cannot be run for the verification: "
        "onnxruntime failed to run graph 'main_graph': ")
    source, target = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    run = CliRunner().invoke(cli, ["compile", str(source), "-o", str(target), "--verify"])
    assert run.exit_code == 1 and "the original model (as given" in run.stderr
    assert not target.exists()


def _fp16_inside(channels: int = 32) -> onnx.ModelProto:
    """`_conv_bn_fp16` between Casts: float32 in and out, computed in float16 (a model
    converted with keep_io_types=True), beside a float32 output that never is."""
    inner = _conv_bn_fp16(channels)
    nodes = [helper.make_node("Cast", ["x32"], ["x"], to=F16), *inner.graph.node,
             helper.make_node("Cast", ["y"], ["y32"], to=TensorProto.FLOAT),
             helper.make_node("Relu", ["x32"], ["plain"])]
    graph = helper.make_graph(
        nodes, "fp16_inside",
        [helper.make_tensor_value_info("x32", TensorProto.FLOAT, [1, 16, 16, 16])],
        [helper.make_tensor_value_info("y32", TensorProto.FLOAT, [1, channels, 16, 16]),
         helper.make_tensor_value_info("plain", TensorProto.FLOAT, [1, 16, 16, 16])],
        list(inner.graph.initializer))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_float32_output_computed_in_float16_is_held_to_float16s_precision() -> None:
    """Trial Q: a float16 model with float32 inputs and outputs failed verification (GE1603)
    by one float16 rounding its float32 output carries, held to float32's 1e-5."""
    from ge.session.verification import narrow_float_outputs

    model = _fp16_inside()
    assert narrow_float_outputs(model) == {"y32": "float16"}
    result = ge.compile(model, verify=True)
    assert result.report.rewrites_by_pass() == {"ConvBatchNormFusion": 1}
    report = result.verification
    assert report is not None and report.ok
    y32, plain = report.outputs
    assert y32.max_abs_diff > 1e-5 and (y32.computed_in, y32.rtol) == ("float16", 2.0 ** -10)
    assert (plain.computed_in, plain.rtol, plain.atol) == (None, 1e-4, 1e-5)
    assert report.summary().endswith("(rtol=0.0001, atol=1e-05; float16 at its precision)")
    # a real error in such an output still fails, and says what it was held to
    wrong = compare_outputs({"y": np.array([9.88, 1.0], np.float32)},
                            {"y": np.array([9.98, 1.0], np.float32)},
                            computed_in={"y": "float16"})
    assert not wrong.ok
    assert "(computed in float16: held to rtol=0.000977, atol=0.00965)" in wrong.summary()
