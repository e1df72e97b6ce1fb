"""The bundled example (what `make demo` runs) keeps working: lossless round trip, then a
compilation with the example pass plugin that fuses MatMul+Add into Gemm."""

from __future__ import annotations

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
    assert "FuseMatMulAdd" in result.stdout and "close: True" in result.stdout
    compiled = onnx.load(EXAMPLES / "out" / "demo_mlp.compiled.onnx")
    op_types = [n.op_type for n in compiled.graph.node]
    assert op_types.count("Gemm") == 2 and "MatMul" not in op_types
    assert [o.name for o in compiled.graph.output] == ["probs"]
