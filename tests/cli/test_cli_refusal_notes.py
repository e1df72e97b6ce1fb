"""`ge compile` says why a plugin pass that rewrote nothing refused its matches (the reason
its `meet_requirements` gave with `context.set_error_message`), after the table, and the
JSON report carries the reasons (trial KK: only `ge passes explain` showed them)."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
from cli_helpers import run_ge
from onnx import TensorProto, helper

#: Passes refusing every Sigmoid-times-x match, each with its own reason.
PLUGIN_HEAD = """
import ge.es.all as es
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass
"""
PLUGIN_PASS = """

@register_fusion_pass(name="Refuses{i:02d}", stage=PassStage.AFTER_INFER_SHAPE)
class Refuses{i:02d}(PatternFusionPass):
    @pattern
    def silu(self, inputs):
        return inputs[0] * es.Sigmoid(inputs[0])

    def meet_requirements(self, match_result, context):
        t = match_result.get_captured_tensor(0)
        last = list(t.node.get_output_desc(t.index).get_shape())[-1]
        context.set_error_message(f"[pass {i}] last dim {{last}} is not a multiple of 8")
        return False

    def replacement(self, inputs):
        return es.Sigmoid(inputs[0]) * inputs[0]
"""


def _files(tmp_path: Path, passes: int) -> tuple[Path, Path]:
    """A model of three SiLUs of [B, 12], and a plugin of `passes` passes refusing them."""
    nodes, inputs, outputs = [], [], []
    for i in range(3):
        nodes += [helper.make_node("Sigmoid", [f"x{i}"], [f"s{i}"], name=f"sig{i}"),
                  helper.make_node("Mul", [f"x{i}", f"s{i}"], [f"y{i}"], name=f"mul{i}")]
        inputs.append(helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, ["B", 12]))
        outputs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, ["B", 12]))
    model = tmp_path / "m.onnx"
    onnx.save(helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                                opset_imports=[helper.make_opsetid("", 17)]), model)
    plugin = tmp_path / "refusing.py"
    plugin.write_text(PLUGIN_HEAD + "".join(PLUGIN_PASS.format(i=i) for i in range(passes)))
    return model, plugin


def test_compile_prints_why_a_pass_refused_its_matches(tmp_path: Path) -> None:
    model, plugin = _files(tmp_path, 1)
    report = tmp_path / "report.json"
    code, out, err = run_ge("compile", str(model), "-o", str(tmp_path / "o.onnx"),
                            "--pass-path", str(plugin), "--report", str(report))
    assert code == 0, err
    lines = out.splitlines()
    note = "Refuses00 refused 3 match(es): [pass 0] last dim 12 is not a multiple of 8 (x3)"
    assert note in lines  # (its brackets are not taken for rich markup)
    assert lines.index(note) < lines.index(next(x for x in lines if x.startswith("Operators")))
    (row,) = json.loads(report.read_text())["passes"]
    assert (row["matches"], row["rewrites"], row["refusals"]) == (3, 0, 3)
    assert row["refusal_reasons"] == [
        {"message": "[pass 0] last dim 12 is not a multiple of 8", "count": 3}]


def test_compile_json_carries_the_reasons(tmp_path: Path) -> None:
    model, plugin = _files(tmp_path, 1)
    code, out, err = run_ge("compile", str(model), "-o", str(tmp_path / "o.onnx"),
                            "--pass-path", str(plugin), "--json")
    assert code == 0, err
    (invocation,) = json.loads(out)["invocations"]
    assert invocation["refusal_reasons"] == [
        {"message": "[pass 0] last dim 12 is not a multiple of 8", "count": 3}]


def test_the_notes_are_bounded(tmp_path: Path) -> None:
    model, plugin = _files(tmp_path, 12)
    code, out, err = run_ge("compile", str(model), "-o", str(tmp_path / "o.onnx"),
                            "--pass-path", str(plugin))
    assert code == 0, err
    notes = [line for line in out.splitlines() if " refused 3 match(es): " in line]
    assert [n.split()[0] for n in notes] == [f"Refuses{i:02d}" for i in range(10)]
    assert ("and 2 more pass(es) refused matches with a reason (the JSON report, --report "
            "FILE, has each pass's)") in out.splitlines()


def test_a_plugin_pattern_pass_that_matched_nothing_gets_the_explain_command(
        tmp_path: Path) -> None:
    """Trial WW: a pattern with the operands of a Mul in the wrong order matched nothing and
    `ge compile` said only `-` in the table; now it names the command that says why, with
    the options that load and convert the model as the compilation did."""
    model, plugin = _files(tmp_path, 1)
    plugin.write_text(plugin.read_text().replace(  # x * Sigmoid(x) read as Sigmoid(x) * x
        "return inputs[0] * es.Sigmoid(inputs[0])", "return es.Sigmoid(inputs[0]) * inputs[0]"))
    code, out, err = run_ge("compile", str(model), "-o", str(tmp_path / "o.onnx"),
                            "--pass-path", str(plugin), "--opset", "18", "-q")
    assert code == 0, err
    command = (f"ge passes explain Refuses00 {model} --pass-path {plugin} --opset 18")
    assert f"Refuses00 matched nothing: {command} shows where its patterns stop" in " ".join(
        out.split())
    code, explained, err = run_ge(*command.split()[1:])
    assert code == 0, err
    assert "0 would be rewritten" in explained and "wants Sigmoid" in explained

    code, out, err = run_ge("compile", str(model), "-o", str(tmp_path / "o.onnx"),
                            "--pass-path", str(_files(tmp_path, 1)[1]))  # matches: no note
    assert code == 0, err
    assert "matched nothing" not in out
