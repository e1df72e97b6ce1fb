"""Every command that prints a node count prints ONNX's (`NodeCounts`: the main graph's
nodes without `Constant` operators, constants and subgraph nodes apart): `ge compile` (its
summary and JSON), `ge inspect` of the model given and of the model written, `ge diff` of
the two and pyatc, each checked against the protos (`node_counting.onnx_node_counts`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_helpers import run_ge
from onnx import TensorProto, helper, numpy_helper

from ge.pyatc import main as pyatc
from model_paths import shared_model
from node_counting import onnx_node_counts

pytestmark = pytest.mark.builtin_passes


@pytest.mark.parametrize("name", ["distilbert_tiny", "control_flow"])
def test_commands_agree_with_onnx(name: str, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    source, out = shared_model(name), tmp_path / "out.onnx"
    before = onnx_node_counts(onnx.load(source))
    code, stdout, stderr = run_ge("compile", str(source), "-o", str(out), "--json")
    assert code == 0, stderr
    report = json.loads(stdout)
    after = onnx_node_counts(onnx.load(out))
    assert after[0] == len(onnx.load(out).graph.node)
    for side, counts in (("before", before), ("after", after)):
        assert (report[f"nodes_{side}"], report[f"subgraph_nodes_{side}"],
                report[f"constants_{side}"]) == counts

    code, stdout, _ = run_ge("compile", str(source), "-o", str(tmp_path / "text.onnx"))
    assert code == 0
    subgraphs = (f" and {before[1]} → {after[1]} ({after[1] - before[1]:+d}) in subgraphs"
                 if before[1] or after[1] else "")
    change = (f"nodes {before[0]} → {after[0]} ({after[0] - before[0]:+d}){subgraphs}, "
              f"constants {before[2]} → {after[2]}")
    assert f"{change}; " in stdout

    for path, counts in ((source, before), (out, after)):
        code, stdout, _ = run_ge("inspect", str(path), "--json")
        assert code == 0
        data = json.loads(stdout)
        assert (data["nodes"], data["subgraph_nodes"], data["constants"]) == counts
        assert data["graph_nodes"] == len(onnx.load(path).graph.node)

    code, stdout, _ = run_ge("diff", str(source), str(out), "--json")
    assert code == 0
    data = json.loads(stdout)
    for side, counts in (("a", before), ("b", after)):
        assert (data[f"nodes_{side}"], data[f"subgraph_nodes_{side}"],
                data[f"constants_{side}"]) == counts
    code, stdout, _ = run_ge("diff", str(source), str(out))
    assert code == 0
    assert f"{before[0]} node(s)" in stdout.splitlines()[0]

    # pyatc says what ge compile says: subgraph nodes and constants too, in its words
    assert pyatc(args=[f"--model={source}", "--framework=5",
                       f"--output={tmp_path / 'atc'}"]) == 0
    assert capsys.readouterr().out == (
        f"pyatc: run success: wrote {tmp_path / 'atc.onnx'}; {change}\n")
    assert onnx_node_counts(onnx.load(tmp_path / "atc.onnx")) == after


def test_an_input_default_is_an_input_not_a_constant(tmp_path: Path) -> None:
    """An initializer that gives a graph input its default (IR >= 4) is the input's: ge
    reads it as an input, so neither `ge inspect` nor `ge compile` counts it as a
    constant; a `Constant` operator is one, and not a node."""
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(
            np.ones(3, np.float32))),
         helper.make_node("Add", ["x", "w"], ["s"]), helper.make_node("Mul", ["s", "c"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
              helper.make_tensor_value_info("w", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [numpy_helper.from_array(np.zeros(3, np.float32), "w")])
    source = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), source)
    assert onnx_node_counts(onnx.load(source)) == (2, 0, 1)
    code, stdout, _ = run_ge("inspect", str(source), "--json")
    data = json.loads(stdout)
    assert (data["nodes"], data["constants"], data["graph_nodes"]) == (2, 1, 3)
    code, stdout, stderr = run_ge("compile", str(source), "-o", str(tmp_path / "out.onnx"),
                                  "--json")
    assert code == 0, stderr
    report = json.loads(stdout)
    assert (report["nodes_before"], report["constants_before"]) == (2, 1)
