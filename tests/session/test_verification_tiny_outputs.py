"""Verification of outputs smaller than atol: a randomly initialised classifier's logits are
about 1e-14, so `|actual - expected| <= atol + rtol * |expected|` held for any values of
that size and a plugin scaling them by 1.5 "verified ok" (trial F, efficientnet_b0). The
compilation now warns (`CompileWarning`, naming the output, its largest magnitude and
atol, suggesting a smaller atol) without failing; outputs of ordinary size, all-zero ones
and integer or bool ones say nothing."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest

import ge
from ge.errors import CompileWarning, VerificationError
from ge.session import generate_inputs, run_model
from ge.session.comparison import tiny_outputs
from sample_models import SCALE_MATMUL_BUG, tiny_outputs_model


def _largest_tiny(model: onnx.ModelProto) -> float:
    """The largest magnitude of `tiny` on the generated inputs."""
    return float(np.abs(run_model(model, generate_inputs(model))["tiny"]).max())


def test_an_output_below_atol_is_named_with_a_warning_and_still_verifies(
        tmp_path: Path) -> None:
    plugin = tmp_path / "scale.py"
    plugin.write_text(SCALE_MATMUL_BUG)
    model = tiny_outputs_model()
    largest = _largest_tiny(model)
    assert 0 < largest < 1e-5
    with pytest.warns(CompileWarning) as caught:
        result = ge.compile(model, pass_paths=[plugin], verify=True)
    (warning,) = [str(w.message) for w in caught if "checks nothing" in str(w.message)]
    assert warning == (
        f"verification checks nothing of output 'tiny' (largest magnitude {largest:.3g}): "
        "every value of it in the original's run is below atol=1e-05, which alone accepts "
        "any values that small (the output scaled by 1.5, or zeros, would pass); give a "
        f"smaller --atol (atol=), such as {largest * 1e-4:.1g} (rtol times the largest "
        "magnitude)")
    assert result.verification is not None and result.verification.ok  # not a failure
    assert result.report.passes_that_changed()  # the wrong plugin did run
    with pytest.raises(VerificationError, match="output 'tiny'"):  # the suggested atol
        ge.compile(model, pass_paths=[plugin], verify=True, atol=largest * 1e-4)


def test_ordinary_zero_integer_and_bool_outputs_say_nothing() -> None:
    model = tiny_outputs_model(scale=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        result = ge.compile(model, verify=True)
    assert result.verification is not None and result.verification.ok
    expected = run_model(model, generate_inputs(model))
    assert not np.any(expected["zeros"]) and np.any(expected["ints"])  # as meant
    assert tiny_outputs(expected, 1e-5, {}) == {}
    tiny = run_model(tiny_outputs_model(), generate_inputs(model))
    assert list(tiny_outputs(tiny, 1e-5, {})) == ["tiny"]
    assert tiny_outputs(tiny, 1e-10, {}) == {}  # an atol below them checks them
    assert tiny_outputs(tiny, 1e-5, {"tiny": "not compared: random"}) == {}


def test_verify_says_so_too() -> None:
    """`ge.session.verify` (two models compared without compiling) warns alike."""
    from ge.session import verify

    model = tiny_outputs_model()
    with pytest.warns(CompileWarning, match=r"verification checks nothing of output 'tiny'"):
        report = verify(model, model)
    assert report.ok


def test_an_rtol_of_one_or_more_is_warned_of_and_no_larger_atol_suggested() -> None:
    """Trial AH: `--rtol 1e6 --atol 0` verified a flipped sign in silence, and with atol
    1e308 the warning suggested "a smaller atol, such as 1e+308" (rtol times the size)."""
    from ge.session import verify

    model = tiny_outputs_model(scale=1.0)
    with pytest.warns(CompileWarning) as caught:
        assert verify(model, model, rtol=1e308, atol=1e308).ok
    texts = [str(w.message) for w in caught]
    assert ("verification with rtol=1e+308 checks next to nothing: from rtol=1 it accepts "
            "zeros for every output, from 2 the sign flipped; give an rtol below 1 (--rtol, "
            "rtol=), such as the default 1e-4") in texts
    (tiny,) = [t for t in texts if "checks nothing of output" in t]
    suggested = float(tiny.split("such as ")[1].split(" ")[0])
    assert 0 < suggested < 1e-3 and tiny.endswith("(1e-4 times the smallest largest magnitude)")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        assert verify(model, model, rtol=0.5).ok  # (below 1: said nothing)


def test_outputs_all_empty_are_warned_of() -> None:
    """Trial AH: `ge verify a b --dims N=0` said "ok" against a wrong model: every output
    had no element, so nothing was compared."""
    from onnx import TensorProto, helper

    from ge.session import verify

    def model(op: str) -> onnx.ModelProto:
        graph = helper.make_graph(
            [helper.make_node(op, ["x"], ["y"])], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    with pytest.warns(CompileWarning, match=r"^verification compares no value: every output "
                                            r"compared is empty on these inputs"):
        assert verify(model("Relu"), model("Neg"), dims={"N": 0}).ok
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        assert not verify(model("Relu"), model("Neg"), dims={"N": 1}).ok


def test_the_suggested_atol_is_rounded_down() -> None:
    """Trial AJ: largest magnitude 0.96, rtol 0.99: 0.95 was written "such as 1", beside
    an atol of 0.97 (rounded to one digit, up)."""
    from onnx import TensorProto, helper, numpy_helper

    from ge.session import verify

    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "c"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [numpy_helper.from_array(np.array([0.96, 0.5, 0.1], np.float32), "c")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.warns(CompileWarning) as caught:
        verify(model, model, inputs={"x": np.ones(3, np.float32)}, rtol=0.99, atol=0.97)
    (text,) = [str(w.message) for w in caught if "checks nothing of output" in str(w.message)]
    assert "such as 0.9 (rtol times the largest magnitude)" in text, text
