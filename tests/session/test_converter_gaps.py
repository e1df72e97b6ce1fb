"""`opset=` keeps what the model computes where onnx's version converter would not (trial Y):
Hardmax before 13 (a 2-D coercion at `axis`) and Resize-10 / Upsample (the "asymmetric"
coordinate transform Resize-11 no longer defaults to). And `verify="each-pass"` checks the
conversion before the first pass, so that a difference it makes is said to be its own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper, version_converter

import ge
import ge.session.converter_gaps as converter_gaps
from ge.errors import VerificationError

X = np.random.default_rng(0).random((2, 3, 4), dtype=np.float32)


def _model(opset: int, node: onnx.NodeProto, out_shape: list[int],
           initializers: tuple[onnx.TensorProto, ...] = ()) -> onnx.ModelProto:
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 5
    return model


def _run(model: onnx.ModelProto) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, {"x": X})[0]


def _hardmax(opset: int, axis: int | None) -> onnx.ModelProto:
    attrs = {} if axis is None else {"axis": axis}
    return _model(opset, helper.make_node("Hardmax", ["x"], ["y"], name="hm", **attrs),
                  [2, 3, 4])


def _upscale(op: str, opset: int, mode: str, scale: int = 2) -> onnx.ModelProto:
    scales = numpy_helper.from_array(np.array([1, scale, scale], np.float32), "scales")
    return _model(opset, helper.make_node(op, ["x", "scales"], ["y"], name="up", mode=mode),
                  [2, 3 * scale, 4 * scale], (scales,))


CASES = {
    "hardmax7_default_axis": _hardmax(7, None),
    "hardmax11_axis0": _hardmax(11, 0),
    "hardmax11_last_axis": _hardmax(11, 2),
    "resize10_linear": _upscale("Resize", 10, "linear"),
    "resize10_nearest": _upscale("Resize", 10, "nearest"),
    "upsample9_linear": _upscale("Upsample", 9, "linear"),
    # nearest keeps the converter's transform (trial AA: "asymmetric" picked other pixels)
    "resize10_nearest_3x": _upscale("Resize", 10, "nearest", 3),
    "upsample9_nearest_3x": _upscale("Upsample", 9, "nearest", 3),
}


@pytest.mark.parametrize("target", [13, 18])
@pytest.mark.parametrize("name", list(CASES))
def test_converting_keeps_what_the_model_computes(name: str, target: int,
                                                  tmp_path: Path) -> None:
    model = CASES[name]
    compiled = ge.compile(model, opset=target, verify=True)
    assert compiled.graph.get_opset_version("") == target
    out = tmp_path / "m.onnx"
    compiled.save(out)
    np.testing.assert_allclose(_run(onnx.load(out)), _run(model), rtol=0, atol=1e-6)


def test_onnx_alone_would_change_them() -> None:
    """The gaps this module closes are onnx's: its converter alone changes the outputs."""
    for name in ("hardmax7_default_axis", "hardmax11_axis0", "resize10_linear",
                 "upsample9_linear"):
        converted = version_converter.convert_version(CASES[name], 13)
        assert np.abs(_run(converted) - _run(CASES[name])).max() > 0.2, name


def test_each_pass_verification_names_the_conversion(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the Hardmax gap left open, the difference is the conversion's, said before any
    pass runs (it was blamed on NoOpElimination, the first pass to change the graph)."""
    monkeypatch.setattr(converter_gaps, "_flattened_hardmax", lambda node, taken: [node])
    with pytest.raises(VerificationError) as info:
        ge.compile(CASES["hardmax7_default_axis"], opset=13, verify="each-pass")
    err = info.value
    assert err.stage == "Convert" and err.pass_name is None
    assert err.message.startswith(
        "the outputs differ from the original's after the conversion to opset 13 (onnx's "
        "version converter), before any pass: ")
