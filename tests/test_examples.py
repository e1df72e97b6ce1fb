"""The bundled example (what `make demo` runs) keeps working: lossless round trip, then
`ge compile --verify` with the example pass plugin on the MLP (MatMul+Add fused into Gemm)
and on the vendored DistilBERT (built-in passes shrink it), both verified."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import onnx

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_the_demo_round_trips_and_compiles_with_the_example_pass() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ASCEND_GE_PY_PASS_PATH"}
    env["COLUMNS"] = "200"  # rich tables wide enough for the phrases checked below
    result = subprocess.run([sys.executable, str(EXAMPLES / "demo.py")], capture_output=True,
                            text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "outputs identical: True; files byte-identical: True" in result.stdout
    assert "FuseMatMulAddByHand" in result.stdout
    assert result.stdout.count("verification ok: 1 output(s) match") == 2
    compiled = onnx.load(EXAMPLES / "out" / "demo_mlp.compiled.onnx")
    op_types = [n.op_type for n in compiled.graph.node]
    assert op_types.count("Gemm") == 2 and "MatMul" not in op_types
    assert [o.name for o in compiled.graph.output] == ["probs"]
    bert = onnx.load(EXAMPLES / "out" / "distilbert_tiny.compiled.onnx")
    onnx.checker.check_model(bert, full_check=True)
    original = onnx.load(EXAMPLES.parent / "tests" / "models" / "distilbert_tiny.onnx")
    assert len(bert.graph.node) < len(original.graph.node)
    assert "Identity" not in [n.op_type for n in bert.graph.node]
    report = json.loads((EXAMPLES / "out" / "distilbert_tiny.report.json").read_text())
    assert report["verification"]["ok"] is True
