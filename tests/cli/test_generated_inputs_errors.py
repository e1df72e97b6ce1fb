"""A model the generated inputs cannot run (symbolic dims are 2: too short for an audio
model's first Conv) fails `ge compile --verify` and `ge run` with GE1601 saying the inputs
were generated, their shapes and how to give real ones; nothing is written. With real
inputs the same commands work."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from cli_helpers import listing, run_ge
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh


def _audio_front_end(folder: Path) -> tuple[Path, Path]:
    """y = Conv(Unsqueeze(x), w) with a kernel of 10 over x [batch, samples]; and real
    inputs (400 samples)."""
    rng = np.random.default_rng(0)
    graph = h.make_graph(
        [h.make_node("Unsqueeze", ["x", "one"], ["x3"]),
         h.make_node("Conv", ["x3", "w"], ["y"], strides=[5])], "g",
        [h.make_tensor_value_info("x", TP.FLOAT, ["batch", "samples"])],
        [h.make_tensor_value_info("y", TP.FLOAT, ["batch", 8, "frames"])],
        [nh.from_array(rng.standard_normal((8, 1, 10)).astype(np.float32), "w"),
         nh.from_array(np.array([1], np.int64), "one")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    path, inputs = folder / "audio.onnx", folder / "audio_inputs.npz"
    onnx.save(model, path)
    np.savez(inputs, x=rng.standard_normal((1, 400)).astype(np.float32))
    return path, inputs


NOTE = ("the inputs were generated (x [2, 2], symbolic dims set to 2): give real ones with "
        "--inputs FILE.npz (inputs=)")


def test_compile_verify_says_the_inputs_were_generated(tmp_path: Path) -> None:
    path, inputs = _audio_front_end(tmp_path)
    before = listing(tmp_path)
    code, _, err = run_ge("compile", str(path), "-o", str(tmp_path / "out.onnx"), "--verify")
    assert code != 0
    assert err.startswith("ge: [GE1601] the original model (as given, before any pass) "
                          "cannot be run for the verification")
    assert NOTE in err
    assert listing(tmp_path) == before  # nothing written
    code, _, err = run_ge("compile", str(path), "-o", str(tmp_path / "out.onnx"), "--verify",
                          "--inputs", str(inputs))
    assert code == 0, err


def test_run_says_the_inputs_were_generated(tmp_path: Path) -> None:
    path, inputs = _audio_front_end(tmp_path)
    code, _, err = run_ge("run", str(path))
    assert code != 0
    assert err.startswith("ge: [GE1601] onnxruntime failed to run graph 'g'")
    assert NOTE in err
    code, _, err = run_ge("run", str(path), "--inputs", str(inputs))
    assert code == 0, err
