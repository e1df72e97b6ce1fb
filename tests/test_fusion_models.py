"""The fusion example models (`examples/models/make_fusion_models.py`) and the fusion table
(`tools/fusion_table.py`).

Every built model is checker-valid, runs in onnxruntime and compiles with the default
pipeline, verified, without growing. Which fusion fires is not asserted: the built-in
fusion catalog decides that. The table tool runs for real on a temporary README."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import ge
from ge.session import generate_inputs
from plugin_fixtures import clean_plugin_state  # noqa: F401
from scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "models" / "make_fusion_models.py"
TOOL = ROOT / "tools" / "fusion_table.py"


fusion_models = load_script(SCRIPT, "make_fusion_models")
fusion_table = load_script(TOOL, "_ge_fusion_table")
UNAVAILABLE = fusion_models.unavailable()


@pytest.mark.builtin_passes
@pytest.mark.parametrize("name", list(fusion_models.MODELS))
def test_a_built_model_is_valid_runs_and_compiles_without_growing(name: str) -> None:
    if name in UNAVAILABLE:
        pytest.skip(UNAVAILABLE[name])
    model = fusion_models.build_model(name)
    onnx.checker.check_model(model, full_check=True)
    opset = {o.domain: o.version for o in model.opset_import}[""]
    assert opset == fusion_models.OPSETS[name]
    inputs = generate_inputs(model)
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, inputs)
    assert np.isfinite(expected).all()

    result = ge.compile(model, verify=True, inputs=inputs)
    assert result.verification is not None and result.verification.ok
    report = result.report
    assert sum(report.ops_after.values()) <= sum(report.ops_before.values())
    compiled = result.to_onnx()
    onnx.checker.check_model(compiled, full_check=True)
    assert [o.name for o in compiled.graph.output] == ["output"]
    (actual,) = ort.InferenceSession(compiled.SerializeToString(),
                                     providers=["CPUExecutionProvider"]).run(None, inputs)
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)


def test_the_models_hold_the_patterns_they_are_named_for() -> None:
    ops = {name: [n.op_type for n in model.graph.node]
           for name, model in fusion_models.build_all().items()}
    assert ops["linear_matmul_add"].count("MatMul") == 2 and ops["linear_matmul_add"].count(
        "Add") == 2
    assert ops["conv_bn"].count("BatchNormalization") == 2
    assert ops["gemm_bn"].count("Gemm") == 2 and "BatchNormalization" in ops["gemm_bn"]
    assert {"Pad", "ConvTranspose", "MatMul"} <= set(ops["keras_bn_pad"])
    assert ops["keras_bn_pad"].count("Mul") == 3 and "BatchNormalization" not in ops[
        "keras_bn_pad"]
    assert "LayerNormalization" not in ops["attention_layernorm"]
    assert ops["attention_layernorm"].count("ReduceMean") == 4
    assert {"Erf", "Tanh"} <= set(ops["gelu_erf_tanh"]) and "Gelu" not in ops["gelu_erf_tanh"]
    assert {"Transpose", "Reshape", "Cast", "Squeeze", "Unsqueeze"} <= set(
        ops["layout_chains"])
    if "rmsnorm" not in UNAVAILABLE:
        assert "RMSNormalization" not in ops["rmsnorm"] and "Sqrt" in ops["rmsnorm"]


def test_the_script_writes_every_model(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    written = sorted(p.stem for p in (tmp_path / "out").glob("*.onnx"))
    assert written == sorted(set(fusion_models.MODELS) - set(UNAVAILABLE))
    for name, reason in UNAVAILABLE.items():
        assert f"skipped {name}: {reason}" in done.stdout
    for path in (tmp_path / "out").glob("*.onnx"):
        onnx.checker.check_model(onnx.load(path), full_check=True)


def test_sidecar_inputs_follow_the_notes() -> None:
    models = ROOT / "tests" / "models"
    bert = fusion_table.sidecar_inputs(json.loads((models / "distilbert_tiny.json").read_text()))
    assert bert["input_ids"].shape == (1, 12) and bert["input_ids"].dtype == np.int64
    assert bert["input_ids"].min() >= 0 and bert["input_ids"].max() < 500
    assert bert["input_ids"].max() > 3  # drawn from the range, not ge's 0..3
    assert (bert["attention_mask"] == 1).all()
    loop = fusion_table.sidecar_inputs(json.loads((models / "control_flow.json").read_text()))
    assert loop["n"].shape == () and int(loop["n"]) == 3 and loop["x"].dtype == np.float32
    assert fusion_table.sidecar_inputs({"inputs": []}) is None


README = """# A project

Some text.

<!-- fusion-table:start -->
stale table
<!-- fusion-table:end -->

More text.
"""

_ROW = re.compile(r"^\| `(?P<model>[^`]+)` \| (?P<before>\d+) → (?P<after>\d+) \| "
                  r"(?P<constants>\d+) → (?P<constants_after>\d+) \| "
                  r"(?P<fired>[^|]+) \| (?P<diff>[0-9.e+-]+) \|$")


def _run_tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


@pytest.mark.slow
def test_fusion_table_writes_rows_between_the_markers(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(README)
    models = ["mobilenet_like_bn", "conv_bn"]
    for _ in range(2):  # a second run replaces the table, it does not add one
        done = _run_tool("--models", *models, "--write", str(readme))
        assert done.returncode == 0, done.stdout + done.stderr
    text = readme.read_text()
    before, rest = text.split("<!-- fusion-table:start -->\n")
    table, after = rest.split("<!-- fusion-table:end -->\n")
    assert before == "# A project\n\nSome text.\n\n" and after == "\nMore text.\n"
    assert "stale table" not in text
    lines = table.splitlines()
    assert lines[0] == ("| model | nodes before → after | constants | what fired | max abs "
                        "diff (onnxruntime) |")
    rows = [m.groupdict() for m in map(_ROW.match, lines[2:]) if m]
    assert [r["model"] for r in rows] == models
    for row in rows:
        assert int(row["after"]) <= int(row["before"])
        assert float(row["diff"]) <= 1e-4
    bn = onnx.load(ROOT / "tests" / "models" / "mobilenet_like_bn.onnx")
    constant_ops = sum(n.op_type == "Constant" for n in bn.graph.node)
    # ONNX's count, Constant operators counted with the initializers as constants
    assert int(rows[0]["before"]) == len(bn.graph.node) - constant_ops
    assert int(rows[0]["constants"]) == len(bn.graph.initializer) + constant_ops


@pytest.mark.slow
def test_fusion_table_prints_and_refuses_a_file_without_markers(tmp_path: Path) -> None:
    done = _run_tool("--models", "gemm_bn")
    assert done.returncode == 0, done.stderr
    assert _ROW.match(done.stdout.splitlines()[2])
    plain = tmp_path / "plain.md"
    plain.write_text("# no markers\n")
    refused = _run_tool("--models", "gemm_bn", "--write", str(plain))
    assert refused.returncode != 0
    assert "must hold one line <!-- fusion-table:start -->" in refused.stderr
    assert plain.read_text() == "# no markers\n"
    unknown = _run_tool("--models", "no_such_model")
    assert unknown.returncode != 0 and "unknown model(s) no_such_model" in unknown.stderr
