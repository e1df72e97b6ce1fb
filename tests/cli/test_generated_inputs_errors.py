"""A model the generated inputs cannot run (symbolic dims are 2: too short for an audio
model's first Conv) fails `ge compile --verify` and `ge run` with GE1601 saying the inputs
were generated, their shapes and how to give real ones or size them; nothing is written.
With real inputs, or `--dims samples=400`, the same commands work; bad `--dims` are usage
errors (no `=`, no int) or GE1602 (no such symbolic dim), before anything is written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from cli_helpers import listing, run_ge

from sample_models import audio_front_end


def _audio_front_end(folder: Path) -> tuple[Path, Path]:
    """The audio front end of `sample_models`, saved, and real inputs (400 samples)."""
    path, inputs = folder / "audio.onnx", folder / "audio_inputs.npz"
    onnx.save(audio_front_end(), path)
    np.savez(inputs, x=np.random.default_rng(0).standard_normal((1, 400)).astype(np.float32))
    return path, inputs


NOTE = ("the inputs were generated (x [2, 2]; symbolic dims batch=2, samples=2, each sized "
        "alone): give real ones with --inputs FILE.npz (inputs=), or sizes with --dims "
        "NAME=SIZE (dims=)")


def test_compile_verify_says_the_inputs_were_generated(tmp_path: Path) -> None:
    path, inputs = _audio_front_end(tmp_path)
    before = listing(tmp_path)
    code, _, err = run_ge("compile", str(path), "-o", str(tmp_path / "out.onnx"), "--verify")
    assert code != 0
    assert err.startswith(f"ge: [GE1601] {path}: the original model (as given, before any "
                          "pass) cannot be run for the verification")
    assert NOTE in err
    assert listing(tmp_path) == before  # nothing written
    code, _, err = run_ge("compile", str(path), "-o", str(tmp_path / "out.onnx"), "--verify",
                          "--inputs", str(inputs))
    assert code == 0, err


def test_run_says_the_inputs_were_generated(tmp_path: Path) -> None:
    path, inputs = _audio_front_end(tmp_path)
    code, _, err = run_ge("run", str(path))
    assert code != 0
    assert err.startswith(f"ge: [GE1601] {path}: onnxruntime failed to run graph 'g'")
    assert NOTE in err
    code, _, err = run_ge("run", str(path), "--inputs", str(inputs))
    assert code == 0, err


def test_dims_size_the_generated_inputs(tmp_path: Path) -> None:
    path, _ = _audio_front_end(tmp_path)
    out = tmp_path / "out.onnx"
    code, stdout, err = run_ge("compile", str(path), "-o", str(out), "--dims", "samples=400")
    assert code == 0, err  # --dims implies --verify
    assert "verification ok" in stdout
    code, stdout, err = run_ge("run", str(path), "--dims", "samples=400", "--dims", "batch=3",
                               "--json")
    assert code == 0, err
    import json
    assert json.loads(stdout)["inputs"]["x"]["shape"] == [3, 400]


def test_bad_dims_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    path, inputs = _audio_front_end(tmp_path)
    out = tmp_path / "out.onnx"
    before = listing(tmp_path)
    for bad in ("samples", "samples=x", "samples=-3"):
        code, _, err = run_ge("compile", str(path), "-o", str(out), "--dims", bad)
        assert code == 2 and "--dims" in err, (bad, err)
    code, _, err = run_ge("compile", str(path), "-o", str(out), "--dims", "samples=4",
                          "--inputs", str(inputs))
    assert code == 2 and "not with --inputs" in err
    code, _, err = run_ge("run", str(path), "--dims", "samples=4", "--inputs", str(inputs))
    assert code == 2 and "not with --inputs" in err
    code, _, err = run_ge("compile", str(path), "-o", str(out), "--dims", "sample=400")
    assert code != 0
    # (the flag's mistake, not the model's: the model file is not named as its cause)
    assert err.startswith("ge: [GE1602] dims 'sample': each must name a symbolic dim "
                          "of graph 'g' (batch, samples)")
    code, _, err = run_ge("run", str(path), "--dims", "sample=400")
    assert code != 0 and "[GE1602] dims 'sample'" in err
    assert listing(tmp_path) == before


def test_dims_of_unnamed_dynamic_dims_say_only_inputs_set_them(tmp_path: Path) -> None:
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [None, None, 4])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [None, None, 4])
    graph = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["y"])],
                                   "unknown_dims", [x], [y])
    path = tmp_path / "unknown_dims.onnx"
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]),
              path)
    before = listing(tmp_path)
    error = ("dims 'B': graph 'unknown_dims' has no named (symbolic) dim to size; the dynamic "
             "dims of its input 'x' (float32 [?, ?, 4]) are unnamed ('?'): they are generated "
             "as 2 and can only be set by giving the inputs (--inputs FILE.npz, inputs=)")
    code, _, err = run_ge("compile", str(path), "-o", str(tmp_path / "out.onnx"),
                          "--dims", "B=3")
    assert code == 1 and err == f"ge: [GE1602] {error}\n"  # (the flag's, not the model's)
    code, _, err = run_ge("run", str(path), "--dims", "B=3", "--output",
                          str(tmp_path / "out.npz"))
    assert code == 1 and err == f"ge: [GE1602] {error}\n"
    assert listing(tmp_path) == before
