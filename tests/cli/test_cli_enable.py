"""`ge compile --enable NAME`: runs a built-in pass that is off by default (SwishFusion);
a bad name is GE1202 on one line, nothing written; `ge passes list` marks such passes."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from cli_helpers import listing, run_ge
from onnx import TensorProto, helper

from versions import needs_opset

pytestmark = pytest.mark.builtin_passes


def _silu_model(path: Path) -> Path:
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])],
        "silu", [vi("x", TensorProto.FLOAT, [2, 3])], [vi("y", TensorProto.FLOAT, [2, 3])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)]), path)
    return path


def _ops(path: Path) -> list[str]:
    return [node.op_type for node in onnx.load(path).graph.node]


@needs_opset(24, "Swish; the compilation verifies")
def test_swish_is_fused_only_when_enabled(tmp_path: Path) -> None:
    model = _silu_model(tmp_path / "silu.onnx")
    code, _, err = run_ge("compile", str(model), "-o", str(tmp_path / "plain.onnx"))
    assert code == 0, err
    assert _ops(tmp_path / "plain.onnx") == ["Sigmoid", "Mul"]
    code, _, err = run_ge("compile", str(model), "-o", str(tmp_path / "fused.onnx"),
                            "--enable", "SwishFusion", "--verify")
    assert code == 0, err
    assert _ops(tmp_path / "fused.onnx") == ["Swish"]


def test_an_unknown_pass_to_enable_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    model = _silu_model(tmp_path / "silu.onnx")
    code, out, err = run_ge("compile", str(model), "-o", str(tmp_path / "out.onnx"),
                            "--enable", "Swish")
    assert code != 0 and out == ""
    [line] = err.strip().splitlines()
    assert line.startswith("ge: [GE1202] cannot enable unknown pass(es) Swish; known passes: ")
    assert listing(tmp_path) == ["silu.onnx"]


def test_passes_list_marks_what_is_off_by_default() -> None:
    code, out, _ = run_ge("passes", "list", "--json")
    assert code == 0
    by_name = {p["name"]: p for p in json.loads(out)["passes"]}
    assert by_name["SwishFusion"]["on_by_default"] is False
    assert by_name["GeluFusion"]["on_by_default"] is True
    code, out, _ = run_ge("passes", "list")
    assert "yes (off)" in next(line for line in out.splitlines() if "SwishFusion" in line)
    assert "(off): a built-in pass off by default; `ge compile --enable NAME` runs it" in out
