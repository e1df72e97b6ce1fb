"""A body's formal inputs and outputs against what its owner's operator takes
(`ge.graph.formals`): `validate()` and the check after a pass refuse a Loop body whose
inputs are in another order (trial C: a pass swapping the `index` of two body inputs passed
every check and only the save's onnx checker refused the model, naming no pass), an If
branch giving another type than the If declares, a Loop body whose condition is not bool;
and the check after a pass sees the Data indexes of a body it changed (a body input removed
failed only at FinalValidation, naming no pass)."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper

import ge
from ge.cli import cli
from ge.errors import GraphValidationError
from model_paths import shared_model
from plugin_fixtures import clean_plugin_state  # noqa: F401  (no plugin outlives the test)

vi = helper.make_tensor_value_info


def _loop_model(cond_out: int = TensorProto.BOOL) -> onnx.ModelProto:
    """y = Loop(n, c, x) whose body adds x to its state each trip; its condition output of
    type `cond_out` (Identity of the bool condition, or a Cast of it)."""
    keep = (helper.make_node("Identity", ["cond"], ["cond_out"], name="keep")
            if cond_out == TensorProto.BOOL
            else helper.make_node("Cast", ["cond"], ["cond_out"], name="keep", to=cond_out))
    body = helper.make_graph(
        [keep, helper.make_node("Add", ["acc", "x"], ["acc_out"], name="add")], "loop_body",
        [vi("i", TensorProto.INT64, []), vi("cond", TensorProto.BOOL, []),
         vi("acc", TensorProto.FLOAT, [2])],
        [vi("cond_out", cond_out, []), vi("acc_out", TensorProto.FLOAT, [2])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "c", "x"], ["y"], name="loop", body=body)], "g",
        [vi("n", TensorProto.INT64, []), vi("c", TensorProto.BOOL, []),
         vi("x", TensorProto.FLOAT, [2])], [vi("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _if_model(else_type: int = TensorProto.FLOAT) -> onnx.ModelProto:
    """y = If(c, Relu(x), Cast(x, else_type)) with y declared float."""
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="relu")], "then_g",
                             [], [vi("t", TensorProto.FLOAT, [2])])
    other = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["e"], name="cast", to=else_type)], "else_g", [],
        [vi("e", else_type, [2])])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], name="cond_if", then_branch=then,
                          else_branch=other)], "g",
        [vi("c", TensorProto.BOOL, []), vi("x", TensorProto.FLOAT, [2])],
        [vi("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _scan_model() -> onnx.ModelProto:
    """A running sum over the rows of x: Scan with one state and one scan input."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "row"], ["s_out"], name="add"),
         helper.make_node("Identity", ["s_out"], ["row_out"], name="copy")], "scan_body",
        [vi("s", TensorProto.FLOAT, [2]), vi("row", TensorProto.FLOAT, [2])],
        [vi("s_out", TensorProto.FLOAT, [2]), vi("row_out", TensorProto.FLOAT, [2])])
    graph = helper.make_graph(
        [helper.make_node("Scan", ["s0", "x"], ["total", "rows"], name="scan", body=body,
                          num_scan_inputs=1)], "g",
        [vi("s0", TensorProto.FLOAT, [2]), vi("x", TensorProto.FLOAT, [3, 2])],
        [vi("total", TensorProto.FLOAT, [2]), vi("rows", TensorProto.FLOAT, [3, 2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _problems(graph: ge.graph.Graph) -> list[str]:
    with pytest.raises(GraphValidationError) as caught:
        graph.validate()
    assert caught.value.code == "GE1003"
    return [str(p) for p in caught.value.problems]


@pytest.mark.parametrize("model", [_loop_model, _if_model, _scan_model])
def test_well_formed_bodies_pass(model: object) -> None:
    graph = ge.graph.load(model())  # type: ignore[operator]
    graph.validate()
    ge.ops.infer_shapes(graph)
    graph.validate()


def test_swapped_loop_body_inputs_are_refused() -> None:
    graph = ge.graph.load(_loop_model())
    ge.ops.infer_shapes(graph)
    body = graph.get_subgraph("loop_body")
    assert body is not None
    inputs = {n.name: n for n in body.get_data_nodes()}
    inputs["cond"].set_attr("index", 2)
    inputs["acc"].set_attr("index", 1)
    assert _problems(graph) == [
        "graph loop_body, body of Loop node 'loop': body: Loop node 'loop' (opset 17) does not "
        "take its body as it is: onnx's inference says: [TypeInferenceError] Inferred elem "
        "type differs from existing elem type: (bool) vs (float); the body takes ('i': "
        "tensor(int64), 'acc': tensor(float), 'cond': tensor(bool)) and gives ('cond_out': "
        "tensor(bool), 'acc_out': tensor(float)), the node is given (tensor(int64), "
        "tensor(bool), tensor(float)) and declares outputs (tensor(float)) (a pass changing "
        "a body's inputs or outputs (their order, their `index`, their types) changes them "
        "on its owner node too)"]


def test_a_loop_body_whose_condition_is_not_bool_is_refused() -> None:
    """The one rule onnx's inference leaves out (its schema says it): ge's own."""
    graph = ge.graph.load(_loop_model(cond_out=TensorProto.FLOAT))
    (problem,) = _problems(graph)
    assert ("body: Loop node 'loop' (opset 17) does not take its body as it is: its first "
            "output (the condition) is tensor(float), where Loop reads tensor(bool); ") in problem


def test_an_if_branch_of_another_type_than_the_if_declares_is_refused() -> None:
    graph = ge.graph.load(_if_model(else_type=TensorProto.INT64))
    problems = _problems(graph)
    assert len(problems) == 1
    assert problems[0].startswith(
        "graph else_g, else_branch of If node 'cond_if': body: If node 'cond_if' (opset 17) "
        "does not take its else_branch as it is: onnx's inference says: ")
    assert "the body takes () and gives ('e': tensor(int64))" in problems[0]


def test_a_dropped_scan_body_input_is_refused() -> None:
    graph = ge.graph.load(_scan_model())
    body = graph.get_subgraph("scan_body")
    assert body is not None
    (state, row) = body.get_data_nodes()
    body.replace_all_uses(row, 0, state, 0)
    body.remove_node(row)
    assert _problems(graph) == [
        "graph scan_body, body of Scan node 'scan': body: Scan node 'scan' (opset 17) gives its "
        "body 2 input(s) (one per Scan input), but the body takes 1: ('s': tensor(float)) (a "
        "pass changing a body's inputs or outputs changes them on its owner node too)"]


def test_a_data_node_added_to_a_loop_body_is_refused() -> None:
    """Trial AC: a Data added to a Loop body (its index the next one) passed validation,
    onnx's inference of the Loop took it, and onnxruntime refused the model saved ("Got 4
    inputs but subgraph has 5 inputs"). The counts are told whatever the types."""
    graph = ge.graph.load(shared_model("control_flow"))
    body = next(b for b in graph.get_all_subgraphs() if b.parent_node.type == "Loop")
    body.add_node("Data", name="extra")
    (problem,) = graph.find_problems()
    assert problem.kind == "body" and problem.place.endswith("body of Loop node '/Loop'")
    assert problem.message.startswith(
        "Loop node '/Loop' (opset 17) gives its body 4 input(s) (the iteration number, the "
        "condition and one per state), but the body takes 5: ('i.1': tensor(int64), 'cond': "
        "tensor(bool), ")
    assert problem.message.endswith("'extra': ?)")


def test_a_body_input_without_an_index_is_listed_not_raised() -> None:
    """Hypothesis found it (tests/graph/test_transactions.py): with a Data node added to a
    Loop body and another's `index` removed, `find_problems()` raised GraphError (GE1001,
    from get_data_nodes while listing the body's inputs) instead of listing the problems."""
    graph = ge.graph.load(shared_model("control_flow"))
    body = next(b for b in graph.get_all_subgraphs() if b.parent_node.type == "Loop")
    body.add_node("Data", name="extra")
    body.find_node_by_name("cond").remove_attr("index")
    problems = graph.find_problems()
    assert {p.kind for p in problems} >= {"body"}
    counted = next(p for p in problems if "but the body takes 5" in p.message)
    # (the Data without an index last)
    assert counted.message.endswith("'extra': ?, 'cond': tensor(bool))"), counted.message
    assert any("index" in p.message and "'cond'" in p.message for p in problems), problems


SWAP = """\
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="SwapBodyInputs", stage=PassStage.AFTER_INFER_SHAPE)
class SwapBodyInputs(FusionBasePass):
    def run(self, graph, context):
        if graph.name != "loop_body":
            return None
        inputs = {n.name: n for n in graph.get_data_nodes()}
        inputs["cond"].set_attr("index", 2)
        inputs["acc"].set_attr("index", 1)
        return True
"""

DROP = """\
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="DropBodyInput", stage=PassStage.AFTER_INFER_SHAPE)
class DropBodyInput(FusionBasePass):
    def run(self, graph, context):
        if graph.name != "loop_body":
            return None
        (i,) = [n for n in graph.get_data_nodes() if n.name == "i"]
        graph.remove_node(i)
        return True
"""


def _refused(tmp_path: Path, plugin: str) -> str:
    """`ge compile` of the Loop model with `plugin`: its one-line error, after checking that
    it wrote nothing and left the model as it was."""
    folder = tmp_path / "work"
    folder.mkdir()
    source = folder / "model.onnx"
    onnx.save(_loop_model(), source)
    before = source.read_bytes()
    (tmp_path / "plugin.py").write_text(plugin)
    result = CliRunner().invoke(cli, ["compile", str(source), "-o", str(folder / "out.onnx"),
                                      "--pass-path", str(tmp_path / "plugin.py"), "-q"])
    assert result.exit_code != 0
    assert sorted(p.name for p in folder.iterdir()) == ["model.onnx"]
    assert source.read_bytes() == before
    (line,) = result.stderr.strip().splitlines()
    return line


def test_a_pass_swapping_body_inputs_fails_as_that_pass(tmp_path: Path) -> None:
    line = _refused(tmp_path, SWAP)
    plugin = tmp_path / "plugin.py"
    assert line.startswith(
        "ge: [E13028] Failed to run custom fusion pass SwapBodyInputs. Return code: FAILED. "
        "Reason: the pass left the graph invalid: body: Loop node 'loop' (opset 17) does not "
        "take its body as it is: onnx's inference says: [TypeInferenceError] Inferred elem "
        "type differs from existing elem type: (bool) vs (float); the body takes ('i': "
        "tensor(int64), 'acc': tensor(float), 'cond': tensor(bool))")
    assert line.endswith(
        "(graph loop_body, body of Loop node 'loop') (in its run on graph 'loop_body', body "
        f"of Loop node 'loop'). (pass SwapBodyInputs, stage AfterInferShape, at {plugin}:11)")


def test_a_pass_dropping_a_body_input_fails_as_that_pass(tmp_path: Path) -> None:
    line = _refused(tmp_path, DROP)
    assert line.startswith(
        "ge: [E13028] Failed to run custom fusion pass DropBodyInput. Return code: FAILED. "
        "Reason: the pass left the graph invalid: structure: Data indexes are [1, 2], "
        "expected 0..1 ('cond'=1, 'acc'=2) (graph loop_body, body of Loop node 'loop')")
    assert "(pass DropBodyInput, stage AfterInferShape, at " in line
