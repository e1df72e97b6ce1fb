"""`ge compile` of models calling a model-local function whose body uses a custom operator
(the `--pass-path` plugin's) or one of onnxruntime's: they compile, verify and write a model
onnx's checker accepts; an operator nothing defines stops at InferShape, writing nothing.
(The Python API's cases: tests/compiler/test_compile_function_bodies.py.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from cli_helpers import run_ge

from function_models import bias_gelu_model, feeds, unregistered_model, widen_model, write_plugin


def _run(path: Path, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, inputs)


def test_runtime_operator_in_a_body(tmp_path: Path) -> None:
    model = bias_gelu_model()
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    code, stdout, stderr = run_ge("compile", str(source), "-o", str(out), "--verify")
    assert code == 0, stderr
    assert "verification ok" in stdout
    onnx.checker.check_model(onnx.load(out), full_check=True)
    inputs = feeds(model)
    np.testing.assert_array_equal(_run(out, inputs)[0], _run(source, inputs)[0])


def test_plugin_operator_in_a_body(tmp_path: Path) -> None:
    plugin = write_plugin(tmp_path)
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(widen_model(), source)
    code, stdout, stderr = run_ge("compile", str(source), "-o", str(out), "--verify",
                                  "--pass-path", str(plugin))
    assert code == 0, stderr
    assert "verification ok" in stdout
    written = onnx.load(out)
    onnx.checker.check_model(written, full_check=True)
    declared = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
                for vi in written.graph.value_info}
    assert declared == {"c": [2, 6]}


def test_unregistered_operator_in_a_body_writes_nothing(tmp_path: Path) -> None:
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(unregistered_model(), source)
    code, stdout, stderr = run_ge("compile", str(source), "-o", str(out))
    assert code == 1 and stdout == ""
    assert stderr.startswith(f"ge: [GE1305] {source}: node 'call' calls model-local function "
                             "local.F, "
                             "whose body cannot be typed: unnamed com.nowhere.Nope node "
                             "(computing 'c'): custom operator "
                             "com.nowhere::Nope is not registered")
    assert stderr.rstrip().endswith("(stage InferShape)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]
