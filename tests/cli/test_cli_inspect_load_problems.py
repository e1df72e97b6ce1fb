"""`ge inspect` notes what `ge compile` and `ge run` refuse a model for (trial Q: it said
nothing, exit 0, of 47 files the loader refuses with GE1101): a `note:` line with the code
and loading's message, `load_problems` in the JSON; exit status 0, as its other notes of
what ge compile refuses (a function onnx's checker refuses), and nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from click.testing import CliRunner
from onnx import helper as h

from ge.cli import cli
from sample_models import add_relu_neg_model


def _dangling() -> onnx.ModelProto:
    m = add_relu_neg_model()
    m.graph.node[1].input[0] = "zz"
    return m


def _twice() -> onnx.ModelProto:
    m = add_relu_neg_model()
    m.graph.node[2].output[0] = "y"
    m.graph.output.pop()
    return m


def _bad_attribute() -> onnx.ModelProto:
    m = add_relu_neg_model()
    m.graph.node[1].CopyFrom(h.make_node("Concat", ["a"], ["y"], name="relu", axis="zero"))
    return m


def _misspelt_operator() -> onnx.ModelProto:
    """Trial S: a Softmax misspelt `Sofmax`, which ge compile (GE1305) and ge run refuse and
    inspect said nothing of."""
    m = add_relu_neg_model()
    m.graph.node[1].op_type = "Sofmax"
    return m


CASES = {
    "dangling_input": (_dangling(), "ge compile, run and dump", "GE1101",
                       "graph 'g': input 0 of Relu node 'relu' reads 'zz', which no node, "
                       "graph input or initializer produces"),
    "dup_value": (_twice(), "ge compile, run and dump", "GE1101",
                  "graph 'g': value 'y' is defined twice (by Relu node 'relu' and Neg node "
                  "'neg')"),
    "attr_string_for_int": (_bad_attribute(), "ge compile and run", "GE1003",
                            "graph is invalid (1 problem(s)): graph g: attribute: attribute "
                            "'axis' of Concat node 'relu' is STRING; Concat (opset 17) takes "
                            "INT"),
    "misspelt_operator": (_misspelt_operator(), "ge compile and run", "GE1305",
                          "graph 'g': Sofmax node 'relu': ONNX has no operator Sofmax in "
                          f"domain 'ai.onnx' (onnx {onnx.__version__}); onnx.checker and "
                          "runtimes reject the model (a custom operator needs a domain of its "
                          "own)"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_inspect_notes_what_loading_refuses(name: str, tmp_path: Path) -> None:
    model, commands, code, message = CASES[name]
    source = tmp_path / "model.onnx"
    onnx.save(model, source)
    result = CliRunner().invoke(cli, ["inspect", str(source)], env={"COLUMNS": "1000"})
    assert result.exit_code == 0
    assert f"note: {commands} refuse the model: [{code}] {message}\n" in result.stdout
    result = CliRunner().invoke(cli, ["inspect", str(source), "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["load_problems"] == [
        {"code": code, "message": message, "refused_by": commands}]
    compiled = CliRunner().invoke(cli, ["compile", str(source), "-o", str(tmp_path / "o.onnx")])
    assert compiled.exit_code == 1 and f"[{code}]" in compiled.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def test_a_valid_model_has_no_load_problem(tmp_path: Path) -> None:
    source = tmp_path / "model.onnx"
    onnx.save(add_relu_neg_model(), source)
    result = CliRunner().invoke(cli, ["inspect", str(source), "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["load_problems"] == []
    result = CliRunner().invoke(cli, ["inspect", str(source)])
    assert "note:" not in result.stdout
