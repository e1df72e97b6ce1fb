"""The reasons a pass gives for refusing matches (`context.set_error_message` in a
`meet_requirements` that returns False) reach the compilation's report (trial KK: `ge passes
explain` showed "last dim 12 is not a multiple of 8", while `ge compile` showed M/R/F 1/0/0
and its JSON report had no trace of it)."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

import ge
from ge.compiler.report import CompileReport, PassRunRecord
from ge.graph import Graph
from ge.passes.status import MAX_REFUSAL_REASON_LENGTH, MAX_REFUSAL_REASONS, RunOutcome

#: A SiLU fusion that refuses a last dim not a multiple of 8; it gives a reason only for
#: the dims in REASONED (so a refusal without one must not inherit the previous match's).
PATTERN_PASS = """
import ge.es.all as es
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass

REASONED = {reasoned}


@register_fusion_pass(name="SiluDiv8", stage=PassStage.AFTER_INFER_SHAPE)
class SiluDiv8(PatternFusionPass):
    @pattern
    def silu(self, inputs):
        return inputs[0] * es.Sigmoid(inputs[0])

    def meet_requirements(self, match_result, context):
        t = match_result.get_captured_tensor(0)
        last = list(t.node.get_output_desc(t.index).get_shape())[-1]
        if last % 8 == 0:
            return True
        if last in REASONED:
            context.set_error_message({message})
        return False

    def replacement(self, inputs):
        return es.Sigmoid(inputs[0]) * inputs[0]
"""

#: The same rule as a decompose pass of Sigmoid.
DECOMPOSE_PASS = """
import ge.es.all as es
from ge.es import GraphBuilder
from ge.passes import DecomposePass, PassStage, register_decompose_pass

REASONED = {reasoned}


@register_decompose_pass(name="SigmoidDiv8", stage=PassStage.AFTER_INFER_SHAPE,
                         op_types=["Sigmoid"])
class SigmoidDiv8(DecomposePass):
    def meet_requirements(self, node, context):
        last = list(node.get_input_desc(0).get_shape())[-1]
        if last % 8 == 0:
            return True
        if last in REASONED:
            context.set_error_message({message})
        return False

    def replacement(self, node):
        builder = GraphBuilder("sigmoid")
        (x,) = builder.create_inputs(1)
        return builder.build_and_reset([es.Reciprocal(es.Exp(es.Neg(x)) + 1.0)])
"""

DIM_MESSAGE = 'f"last dim {last} is not a multiple of 8"'


def _silu_model(path: Path, dims: list[int]) -> Path:
    """One SiLU, x_i * Sigmoid(x_i), per dim: input x_i of shape [2, dim]."""
    nodes, inputs, outputs = [], [], []
    for i, dim in enumerate(dims):
        nodes += [helper.make_node("Sigmoid", [f"x{i}"], [f"s{i}"], name=f"sig{i}"),
                  helper.make_node("Mul", [f"x{i}", f"s{i}"], [f"y{i}"], name=f"mul{i}")]
        inputs.append(helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, [2, dim]))
        outputs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [2, dim]))
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _compile(tmp_path: Path, template: str, dims: list[int], reasoned: set[int],
             message: str = DIM_MESSAGE) -> ge.CompileResult:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(template.format(reasoned=sorted(reasoned), message=message))
    return ge.compile(_silu_model(tmp_path / "m.onnx", dims), pass_paths=[plugin])


def _plugin_row(result: ge.CompileResult) -> dict:
    (row,) = [r for r in result.report.as_dict()["passes"] if r["origin"] != "built-in"]
    return row


@pytest.mark.parametrize("template", [PATTERN_PASS, DECOMPOSE_PASS],
                         ids=["pattern", "decompose"])
def test_refusal_reasons_are_counted_in_the_report(tmp_path: Path, template: str) -> None:
    result = _compile(tmp_path, template, [12, 20, 12, 16], reasoned={12})
    row = _plugin_row(result)
    # 16 is accepted and rewritten; 20 is refused without a reason: the message of the 12
    # before it must not be counted for it
    assert (row["matches"], row["rewrites"], row["refusals"]) == (4, 1, 3)
    assert row["refusal_reasons"] == [
        {"message": "last dim 12 is not a multiple of 8", "count": 2}]
    (invocation,) = [r for r in result.report.as_dict()["invocations"]
                     if r["name"] == row["name"]]
    assert invocation["refusals"] == 3
    assert invocation["refusal_reasons"] == row["refusal_reasons"]
    # the pass rewrote something: its refusals are no mystery, ge compile says nothing more
    assert result.report.refusal_notes() == []


def test_a_pass_that_rewrote_nothing_gets_a_note(tmp_path: Path) -> None:
    result = _compile(tmp_path, PATTERN_PASS, [12, 20, 12, 4], reasoned={12, 20})
    assert result.report.refusal_notes() == [
        "SiluDiv8 refused 4 match(es): last dim 12 is not a multiple of 8 (x2); "
        "last dim 20 is not a multiple of 8 (x1); 1 more with no reason listed"]
    # the record of the run, as Python gives it
    (record,) = [r for r in result.report.records if r.pass_name == "SiluDiv8"]
    assert record.refusals == 4
    assert record.refusal_reasons == (("last dim 12 is not a multiple of 8", 2),
                                      ("last dim 20 is not a multiple of 8", 1))
    (tmp_path / "decompose").mkdir()  # a decompose pass refuses nodes (trial OO)
    decomposed = _compile(tmp_path / "decompose", DECOMPOSE_PASS, [12], reasoned={12})
    (note,) = decomposed.report.refusal_notes()
    assert note.endswith(" refused 1 node(s): last dim 12 is not a multiple of 8 (x1)")


def test_refusals_without_a_reason_get_no_note(tmp_path: Path) -> None:
    result = _compile(tmp_path, PATTERN_PASS, [12, 20], reasoned=set())
    row = _plugin_row(result)
    assert (row["refusals"], row["refusal_reasons"]) == (2, [])
    assert result.report.refusal_notes() == []


def test_reasons_are_capped_and_kept_on_one_line(tmp_path: Path) -> None:
    """A pass naming each match in its message has as many reasons as matches: the first
    few are kept, every refusal is counted; a long or multi-line message is one line."""
    message = 'f"node {match_result.get_matched_nodes()[-1].name}:\\n" + "x" * 500'
    result = _compile(tmp_path, PATTERN_PASS, [4] * (MAX_REFUSAL_REASONS + 2), {4}, message)
    row = _plugin_row(result)
    assert row["refusals"] == MAX_REFUSAL_REASONS + 2
    reasons = row["refusal_reasons"]
    assert [r["message"].split(":")[0] for r in reasons] == [
        f"node mul{i}" for i in range(MAX_REFUSAL_REASONS)]
    assert all(r["count"] == 1 and len(r["message"]) == MAX_REFUSAL_REASON_LENGTH
               and r["message"].startswith(f"node mul{i}: xxx") and r["message"].endswith("...")
               for i, r in enumerate(reasons))
    (note,) = result.report.refusal_notes()
    assert note.endswith("; 2 more with no reason listed") and "\n" not in note


def test_a_reason_with_control_characters_is_printable_and_none_is_no_reason(
        tmp_path: Path) -> None:
    """Trial LL: a reason holding an escape sequence was printed raw under the table (a
    terminal obeys it); it is kept with the characters escaped. set_error_message(None)
    was the reason "None"; it gives none."""
    result = _compile(tmp_path, PATTERN_PASS, [4], {4}, '"red \\x1b[31m and \\x00 nul"')
    (reason,) = _plugin_row(result)["refusal_reasons"]
    assert reason["message"] == "red \\x1b[31m and \\x00 nul"
    (tmp_path / "none").mkdir()
    result = _compile(tmp_path / "none", PATTERN_PASS, [4], {4}, "None")
    assert _plugin_row(result)["refusal_reasons"] == []


def _if_model(path: Path) -> Path:
    """An If whose two branches each hold a SiLU of the outer x (float [2, 12])."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 12])
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])

    def branch(tag: str) -> onnx.GraphProto:
        return helper.make_graph(
            [helper.make_node("Sigmoid", ["x"], [f"s_{tag}"], name=f"sig_{tag}"),
             helper.make_node("Mul", ["x", f"s_{tag}"], [f"y_{tag}"], name=f"mul_{tag}")],
            f"body_{tag}", [],
            [helper.make_tensor_value_info(f"y_{tag}", TensorProto.FLOAT, [2, 12])])

    node = helper.make_node("If", ["cond"], ["y"], name="if1",
                            then_branch=branch("then"), else_branch=branch("else"))
    graph = helper.make_graph([node], "g", [cond, x],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 12])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_the_summary_adds_up_the_runs_on_bodies(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(PATTERN_PASS.format(reasoned=[12], message=DIM_MESSAGE))
    result = ge.compile(_if_model(tmp_path / "m.onnx"), pass_paths=[plugin])
    runs = [r for r in result.report.records if r.pass_name == "SiluDiv8"]
    assert [(r.graph_path, r.refusals) for r in runs] == [
        ("", 0), ("if1.then_branch", 1), ("if1.else_branch", 1)]
    row = _plugin_row(result)
    assert row["refusal_reasons"] == [
        {"message": "last dim 12 is not a multiple of 8", "count": 2}]
    assert result.report.refusal_notes() == [
        "SiluDiv8 refused 2 match(es): last dim 12 is not a multiple of 8 (x2)"]


def test_built_in_passes_get_no_note() -> None:
    """A built-in's refusals (LayerNormFusion gives reasons) are ge's own matter: in the
    JSON report, not in a line of `ge compile`."""
    def record(name: str, origin: str) -> PassRunRecord:
        return PassRunRecord(name, "AfterInferShape", "g", RunOutcome.NOT_CHANGED, False, 0.0,
                             matches=1, refusals=1, origin=origin,
                             refusal_reasons=(("not a layer norm", 1),))

    report = CompileReport(Graph("g"), records=[record("LayerNormFusion", "built-in"),
                                                record("Mine", "/p/mine.py:3")])
    assert report.refusal_notes() == ["Mine refused 1 match(es): not a layer norm (x1)"]
    assert [r["refusal_reasons"] for r in report.by_pass()] == [
        [{"message": "not a layer norm", "count": 1}]] * 2
