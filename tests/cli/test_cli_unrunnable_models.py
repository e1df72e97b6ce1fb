"""Models onnx's checker passes and onnxruntime cannot load (or run: a graph without
outputs) are refused by ge before any pass, the same with and without --verify, and by
`ge.compile`; nothing is written (trial Q: each compiled with exit 0 and was written, one
with no outputs into an empty graph, while `ge run` failed GE1601)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_helpers import refused_compile
from click.testing import CliRunner
from onnx import helper as h

import ge
from ge.cli import cli
from ge.cli.output import one_line
from ge.errors import GeError
from sample_models import add_relu_neg_model

pytestmark = pytest.mark.builtin_passes  # (dead-code elimination emptied the graph)


def _calling(inputs: list[str], body: list[onnx.NodeProto], call_inputs: list[str],
             outputs: tuple[str, ...] = ("o",)) -> onnx.ModelProto:
    """The Relu replaced by a call of a local function F of `inputs` computing `body`."""
    m = add_relu_neg_model()
    m.functions.append(h.make_function("local", "F", inputs, list(outputs), body,
                                       [h.make_opsetid("", 17)]))
    m.opset_import.append(h.make_opsetid("local", 1))
    call = m.graph.node[1]
    call.op_type, call.domain = "F", "local"
    del call.input[:]
    call.input.extend(call_inputs)
    return m


def _no_outputs() -> onnx.ModelProto:
    m = add_relu_neg_model()
    del m.graph.output[:]
    return m


def _empty_graph() -> onnx.ModelProto:
    return h.make_model(h.make_graph([], "g", [], []), opset_imports=[h.make_opsetid("", 17)])


GIVEN = "ge: [GE1003] {path}: graph is invalid (1 problem(s)): graph g: "
NO_OUTPUTS = (GIVEN + "structure: graph 'g' has no outputs: there is nothing to compute (a "
              "model computes its graph's outputs; onnxruntime runs none)")
CALL = ("function: local.F node 'relu' gives {given}; function local.F declares {declared}: "
        "onnx's checker refuses the call with the function's body in its place, where "
        "onnxruntime puts it (and refuses the model): ")
CASES = {
    "opset_1": (add_relu_neg_model(opset=1), (
        "ge: [GE1601] {path}: onnxruntime cannot load graph 'g': it has no kernel for Add-1 "
        "(node 'add'), Relu-1 (node 'relu'), Neg-1 (node 'neg'): it runs ai.onnx from opset 7 "
        "on (onnx's checker passes them; convert the model to opset 7 or later: ge compile "
        "--opset, ge.compile(opset=))")),
    "func_call_too_few_inputs": (
        _calling(["i", "j"], [h.make_node("Add", ["i", "j"], ["o"])], ["a"]),
        GIVEN + CALL.format(given="1 input and 1 output",
                            declared="inputs 'i', 'j' and output 'o'")
        + "Node ()'s input 1 is marked single but has an empty string in the graph"),
    "func_call_too_many_inputs": (
        _calling(["i"], [h.make_node("Relu", ["i"], ["o"])], ["a", "a"]),
        GIVEN + CALL.format(given="2 inputs and 1 output", declared="input 'i' and output 'o'")
        + "Number of actual parameters cannot exceed number of formal parameters"),
    "func_empty_body": (
        _calling(["i"], [], ["a"]),
        GIVEN + CALL.format(given="1 input and 1 output", declared="input 'i' and output 'o'")
        + "Graph output 'y' is not an output of any node in graph"),
    "no_outputs": (_no_outputs(), NO_OUTPUTS),
    "empty_graph": (_empty_graph(), NO_OUTPUTS),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("verify", [False, True], ids=["plain", "verify"])
def test_a_model_onnxruntime_cannot_load_is_refused(name: str, verify: bool,
                                                    tmp_path: Path) -> None:
    model, expected = CASES[name]
    source, exit_code, stderr = refused_compile(model, tmp_path, verify=verify)
    assert (exit_code, stderr) == (1, expected.format(path=source) + "\n")


@pytest.mark.parametrize("name", list(CASES))
def test_ge_compile_refuses_it_alike(name: str, tmp_path: Path) -> None:
    model, expected = CASES[name]
    code = expected.split("[")[1].split("]")[0]
    for verify in (False, True):
        with pytest.raises(GeError) as caught:
            ge.compile(model, verify=verify)
        assert caught.value.code == code and caught.value.about_model
        assert one_line(caught.value.message) in expected.format(path="the model")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["func_call_too_few_inputs", "func_empty_body", "no_outputs"])
def test_ge_run_refuses_it_alike(name: str, tmp_path: Path) -> None:
    """(`ge run` of opset_1 stays onnxruntime's own GE1601: it loads the model.)"""
    model, expected = CASES[name]
    source = tmp_path / "model.onnx"
    onnx.save(model, source)
    result = CliRunner().invoke(cli, ["run", str(source)])
    assert (result.exit_code, result.stderr) == (1, expected.format(path=source) + "\n")


def test_ge_inspect_notes_the_missing_kernels(tmp_path: Path) -> None:
    source = tmp_path / "model.onnx"
    onnx.save(CASES["opset_1"][0], source)
    result = CliRunner().invoke(cli, ["inspect", str(source), "--json"])
    assert result.exit_code == 0
    assert '"code": "GE1601"' in result.stdout and "no kernel for Add-1" in result.stdout


VALID = {
    # an input left out that the body reads only where ONNX allows none (Clip's min)
    "optional_input_left_out": _calling(["i", "lo"], [h.make_node("Clip", ["i", "lo"], ["o"])],
                                        ["a"]),
    "unused_input_left_out": _calling(["i", "j"], [h.make_node("Relu", ["i"], ["o"])], ["a"]),
}


@pytest.mark.parametrize("name", list(VALID))
def test_a_call_onnxruntime_loads_compiles(name: str, tmp_path: Path) -> None:
    source, out = tmp_path / "model.onnx", tmp_path / "out.onnx"
    onnx.save(VALID[name], source)
    result = CliRunner().invoke(cli, ["compile", str(source), "-o", str(out), "-q",
                                      "--verify"])
    assert result.exit_code == 0, result.stderr
    onnx.checker.check_model(onnx.load(out), full_check=True)


def test_an_opset_1_model_converted_compiles(tmp_path: Path) -> None:
    """What the message advises: the converted model is what the check sees."""
    result = ge.compile(add_relu_neg_model(opset=1), opset=7)
    assert result.graph.opset_imports[""] == 7
    result.save(tmp_path / "out.onnx")
    ge.session.runner.ModelRunner(ge.graph.load(tmp_path / "out.onnx")).run(
        {"x": np.ones((2, 3), np.float32)})
