"""Every command that prints a node count prints ONNX's (`NodeCounts`: the main graph's
nodes without `Constant` operators, constants and subgraph nodes apart): `ge compile` (its
summary and JSON), `ge inspect` of the model given and of the model written, `ge diff` of
the two and pyatc, each checked against the protos (`node_counting.onnx_node_counts`).
`ge compile`'s "before" is the file's count also when it converts the model first
(`--inline-functions`, `--opset`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_helpers import run_ge
from onnx import TensorProto, helper, inliner, numpy_helper, version_converter

import ge.graph
from ge.compiler.report import NodeCounts, constant_count, node_counts, operator_count
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


def _function_calls() -> onnx.ModelProto:
    """y = Mul(If(c, then: f(t), else: Neg(t)), w) with t = f(x): the model-local function
    f(X) = Sqrt(X + Constant 1) called in the main graph and in a body."""
    one = helper.make_node("Constant", [], ["one"],
                           value=numpy_helper.from_array(np.array(1.0, np.float32)))
    f = helper.make_function("local", "f", ["X"], ["Y"], [
        one, helper.make_node("Add", ["X", "one"], ["a"]),
        helper.make_node("Sqrt", ["a"], ["Y"])], [helper.make_opsetid("", 17)])
    then = helper.make_graph([helper.make_node("f", ["t"], ["y1"], domain="local")], "then",
                             [], [helper.make_tensor_value_info("y1", TensorProto.FLOAT, [2])])
    other = helper.make_graph([helper.make_node("Neg", ["t"], ["y2"])], "else", [],
                              [helper.make_tensor_value_info("y2", TensorProto.FLOAT, [2])])
    graph = helper.make_graph(
        [helper.make_node("f", ["x"], ["t"], domain="local", name="call"),
         helper.make_node("If", ["c"], ["u"], then_branch=then, else_branch=other, name="if"),
         helper.make_node("Mul", ["u", "w"], ["y"], name="scale")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [numpy_helper.from_array(np.full(2, 2.0, np.float32), "w")])
    model = helper.make_model(graph, functions=[f], opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
    onnx.checker.check_model(model, full_check=True)
    return model


def _reduce_mean_13() -> onnx.ModelProto:
    """y = x - ReduceMean(x, axes=[-1]) at opset 13, whose axes opset 18 takes as an input
    (a constant the version converter adds)."""
    graph = helper.make_graph(
        [helper.make_node("ReduceMean", ["x"], ["m"], axes=[-1]),
         helper.make_node("Sub", ["x", "m"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize(("model", "flag", "ops_in_file"), [
    (_function_calls, ["--inline-functions"],
     {"local.f": 2, "Const": 1, "If": 1, "Neg": 1, "Mul": 1}),
    (_reduce_mean_13, ["--opset", "18"], {"ReduceMean": 1, "Sub": 1}),
], ids=["inline-functions", "opset"])
def test_before_is_the_file_when_compile_converts_it_first(
        model: Callable[[], onnx.ModelProto], flag: list[str], ops_in_file: dict[str, int],
        tmp_path: Path) -> None:
    """`--inline-functions` made "before" the inlined model's count (a call is one node in
    the file, its body's nodes once inlined), `--opset` the converted one's, so `ge compile`
    and `ge inspect` disagreed about the same file. "Before" is the file as ONNX counts it
    in the summary line, the JSON, the report and the page's subtitle; the conversion is
    part of the change, the first step (Convert) going from the file to the converted model,
    which the passes got."""
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(model(), source)
    in_file = onnx_node_counts(onnx.load(source))
    converted = onnx_node_counts(
        inliner.inline_local_functions(onnx.load(source)) if flag == ["--inline-functions"]
        else version_converter.convert_version(onnx.load(source), 18))
    assert converted != in_file  # (the case: the conversion changes the counts)
    report_file, page = tmp_path / "report.json", tmp_path / "page.html"
    code, stdout, stderr = run_ge("compile", str(source), "-o", str(out), *flag, "--json",
                                  "--report", str(report_file))
    assert code == 0, stderr
    after = onnx_node_counts(onnx.load(out))
    for data in (json.loads(stdout), json.loads(report_file.read_text())):
        for side, counts in (("before", in_file), ("after", after)):
            assert (data[f"nodes_{side}"], data[f"subgraph_nodes_{side}"],
                    data[f"constants_{side}"]) == counts
        assert data["ops_before"] == ops_in_file
        convert, first = data["steps"][:2]
        assert convert["name"] == "Convert"
        assert (convert["nodes_before"], convert["subgraph_nodes_before"],
                convert["constants_before"]) == in_file
        assert (convert["nodes_after"], convert["subgraph_nodes_after"],
                convert["constants_after"]) == converted
        assert (first["nodes_before"], first["subgraph_nodes_before"],
                first["constants_before"]) == converted
    code, stdout, _ = run_ge("inspect", str(source), "--json")
    assert (json.loads(stdout)["nodes"], json.loads(stdout)["subgraph_nodes"],
            json.loads(stdout)["constants"]) == in_file

    code, stdout, stderr = run_ge("compile", str(source), "-o", str(out), *flag,
                                  "--html", str(page))
    assert code == 0, stderr
    subgraphs = (f" and {in_file[1]} → {after[1]} ({after[1] - in_file[1]:+d}) in subgraphs"
                 if in_file[1] or after[1] else "")
    change = (f"nodes {in_file[0]} → {after[0]} ({after[0] - in_file[0]:+d}){subgraphs}, "
              f"constants {in_file[2]} → {after[2]}")
    assert f"\n{change}; " in stdout
    text = page.read_text(encoding="utf-8")
    assert f"; {change}; " in text  # the subtitle
    # the drawing is of the model the passes got, sized so (docs/cli.md, --opset)
    heading = re.search(r"<h2>Before <small>\((.*?)\)</small></h2>", text)
    assert heading is not None
    assert heading.group(1) == NodeCounts(*converted).text()


def test_an_operator_a_custom_domain_names_const_is_a_node(tmp_path: Path) -> None:
    """ge's `Const` is the standard domain's: an operator `my.domain::Const` (holding a
    `value`, as a constant does) is a node to ONNX, to `ge inspect` and to the counts of
    the graph ge loads, not a constant."""
    graph = helper.make_graph(
        [helper.make_node("Const", [], ["c"], name="mine", domain="my.domain",
                          value=numpy_helper.from_array(np.ones(3, np.float32))),
         helper.make_node("Add", ["x", "c"], ["s"]), helper.make_node("Mul", ["s", "w"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [numpy_helper.from_array(np.zeros(3, np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("my.domain", 1)])
    source = tmp_path / "m.onnx"
    onnx.save(model, source)
    assert onnx_node_counts(model) == (3, 0, 1)
    loaded = ge.graph.load(source)
    assert loaded.find_node_by_name("mine").type == "Const"
    assert node_counts(loaded) == NodeCounts(3, 0, 1)
    assert (operator_count(loaded), constant_count(loaded)) == (3, 1)
    code, stdout, _ = run_ge("inspect", str(source), "--json")
    assert code == 0
    data = json.loads(stdout)
    assert (data["nodes"], data["constants"], data["graph_nodes"]) == (3, 1, 3)
    assert data["ops"] == {"my.domain.Const": 1, "Add": 1, "Mul": 1}
    code, stdout, _ = run_ge("inspect", str(source))
    assert code == 0 and "3 node(s); 1 initializer(s)" in stdout


def test_the_identity_writing_adds_back_is_counted(tmp_path: Path) -> None:
    """An If branch whose output is an outer value needs an `Identity` in the branch (ONNX:
    a body output is produced inside it). NoOpElimination removes the model's; writing the
    model adds one back. `ge compile` reported the branch one node smaller (and `Identity
    1 → 0`) than the file it wrote (trial L)."""
    then = helper.make_graph([helper.make_node("Neg", ["x"], ["a"], name="neg")], "then", [],
                             [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2])])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["b"], name="id_else")],
                              "else", [], [helper.make_tensor_value_info("b", TensorProto.FLOAT,
                                                                         [2])])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="if")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
              helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), source)
    code, stdout, stderr = run_ge("compile", str(source), "-o", str(out), "--json")
    assert code == 0, stderr
    report = json.loads(stdout)
    written = onnx.load(out)
    branches = {a.name: a.g for a in written.graph.node[0].attribute}
    assert [n.op_type for n in branches["else_branch"].node] == ["Identity"]
    counted = (report["nodes_after"], report["subgraph_nodes_after"], report["constants_after"])
    assert counted == onnx_node_counts(written) == (1, 2, 0)
    assert report["ops_after"]["Identity"] == 1
    assert "NoOpElimination" in {p["name"] for p in report["passes"] if p["changed"]}


def test_a_sparse_constant_is_a_node_to_inspect_as_to_compile(tmp_path: Path) -> None:
    """A `Constant` of a `sparse_value` was a node in `ge compile`'s report and a constant in
    `ge inspect`'s (helper C). ge keeps it as the operator it is and writes it in
    `graph.node`, so it is a node to both: compile's "before" is inspect's count of the
    file, its "after" inspect's count of the file written, `len(graph.node)` less the dense
    `Constant`s; in a body likewise."""
    from sparse_models import sparse

    dense = np.array([0, 2, 0, 5], np.float32)
    body = helper.make_graph(
        [helper.make_node("Constant", [], ["bk"], name="bk", sparse_value=sparse("bk", dense)),
         helper.make_node("Add", ["x", "bk"], ["b"], name="b_add")], "then", [],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, [4])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["o"], name="neg")], "else", [],
                              [helper.make_tensor_value_info("o", TensorProto.FLOAT, [4])])
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["k"], name="k", sparse_value=sparse("k", dense)),
         helper.make_node("Constant", [], ["d"], name="d",
                          value=numpy_helper.from_array(np.ones(4, np.float32))),
         helper.make_node("Add", ["x", "k"], ["s"], name="add"),
         helper.make_node("Mul", ["s", "d"], ["m"], name="mul"),
         helper.make_node("If", ["c"], ["t"], name="if", then_branch=body, else_branch=other),
         helper.make_node("Add", ["m", "t"], ["y"], name="out")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
              helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), source)
    code, stdout, stderr = run_ge("compile", str(source), "-o", str(out), "--json")
    assert code == 0, stderr
    report = json.loads(stdout)
    for side, path in (("before", source), ("after", out)):
        code, stdout, _ = run_ge("inspect", str(path), "--json")
        assert code == 0
        data = json.loads(stdout)
        assert (data["nodes"], data["subgraph_nodes"], data["constants"]) == (
            report[f"nodes_{side}"], report[f"subgraph_nodes_{side}"],
            report[f"constants_{side}"]) == onnx_node_counts(onnx.load(path))
    written = onnx.load(out).graph
    assert "k" in {n.name for n in written.node}  # (the sparse Constant is written a node)
    assert report["nodes_after"] == len(written.node)
    # the file given: add, mul, if, out and the sparse k; its dense d is a constant
    assert (report["nodes_before"], report["subgraph_nodes_before"],
            report["constants_before"]) == (5, 3, 1)
    code, stdout, _ = run_ge("inspect", str(source))
    assert code == 0
    assert "5 node(s) and 1 Constant node(s) (6 in graph.node), 3 in 2 subgraph(s)" in stdout
