"""What the ONNX rules forbid across a model's local functions, which checking each alone
does not see: two functions of one (domain, name, overload), and a function calling itself,
directly or through others (in its nodes or their bodies). onnx 1.23 refuses both from IR
version 8 (1.19 neither), onnxruntime 1.32 does not load either (1.19 runs the last of two
definitions and crashes on a recursive call); `Graph.validate()` passed them, `ge inspect`
said nothing, `ge compile` failed in shape inference (GE1305, onnx's words alone) or,
inlining, on Python's recursion limit (GE1203). Now each is a `function` problem naming the
functions (`ge.graph.checker_places.across_functions`, found by ge whatever onnx checks),
GE1003 before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper

import ge
import ge.graph
from ge.cli import cli
from ge.errors import GraphValidationError
from versions import onnx_at_least, runtime_at_least

F = TensorProto.FLOAT
FORBIDS = "function: ONNX forbids it: "
ONE_EACH = "a model holds one function per (domain, name, overload)"
NOT_RECURSIVE = ": model-local functions must not be recursive"
#: onnx whose check_model refuses both (1.19 refuses neither), onnxruntime that refuses
#: both (1.19 runs the last of two definitions and crashes on a recursive call).
ONNX_CHECKS, RUNTIME_CHECKS = "1.23", "1.23"


def _function(name: str, op: str, domain: str = "", overload: str = "") -> onnx.FunctionProto:
    """local.NAME(a) = OP(a), OP of `domain` (`local`: a call of another function)."""
    node = helper.make_node(op, ["a"], ["b"], domain=domain)
    node.overload = overload
    function = helper.make_function("local", name, ["a"], ["b"], [node], [
        helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
    function.overload = overload
    return function


def _model(functions: list[onnx.FunctionProto], ir_version: int = 10) -> onnx.ModelProto:
    """y = local.F(x), with `functions`."""
    graph = helper.make_graph([helper.make_node("F", ["x"], ["y"], domain="local",
                                                name="call")], "g",
                              [helper.make_tensor_value_info("x", F, [4])],
                              [helper.make_tensor_value_info("y", F, [4])])
    model = helper.make_model(graph, functions=functions, opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
    model.ir_version = ir_version
    return model


def _in_a_branch() -> onnx.FunctionProto:
    """local.F(a, c) = If c then local.F(a) else Neg(a): a call in a body of its own."""
    then = helper.make_graph([helper.make_node("F", ["a"], ["t"], domain="local")], "then",
                             [], [helper.make_tensor_value_info("t", F, None)])
    other = helper.make_graph([helper.make_node("Neg", ["a"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", F, None)])
    return helper.make_function(
        "local", "F", ["a", "c"], ["b"],
        [helper.make_node("If", ["c"], ["b"], then_branch=then, else_branch=other)],
        [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])


def _calls_overload_a() -> onnx.FunctionProto:
    """local.F(a) = local.F:a(a): a call of another function, of one name."""
    function = _function("F", "F", "local")
    function.node[0].overload = "a"
    return function


def run_ge(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _place(*names: str) -> str:
    places = [f"function {n!r} (domain 'local')" for n in names]
    return places[0] if len(places) == 1 else f"{', '.join(places[:-1])} and {places[-1]}"


CASES = {
    "twice": ([_function("F", "Relu"), _function("F", "Neg")],
              f"2 functions 'F' (domain 'local'): {FORBIDS}the model defines local::F 2 times; "
              f"{ONE_EACH}"),
    "twice-one-overload": ([_function("F", "Relu", overload="a"),
                            _function("F", "Neg", overload="a"), _function("F", "Neg")],
                           f"2 functions 'F' (domain 'local', overload 'a'): {FORBIDS}the model "
                           f"defines local::F::a 2 times; {ONE_EACH}"),
    "itself": ([_function("F", "F", "local")],
               f"{_place('F')}: {FORBIDS}local::F calls itself{NOT_RECURSIVE}"),
    "each-other": ([_function("F", "G", "local"), _function("G", "F", "local")],
                   f"{_place('F', 'G')}: {FORBIDS}local::F and local::G call each "
                   f"other{NOT_RECURSIVE}"),
    "three": ([_function("F", "G", "local"), _function("G", "H", "local"),
               _function("H", "F", "local")],
              f"{_place('F', 'G', 'H')}: {FORBIDS}local::F, local::G and local::H call each "
              f"other{NOT_RECURSIVE}"),
    "in-a-branch": ([_in_a_branch()],
                    f"{_place('F')}: {FORBIDS}local::F calls itself{NOT_RECURSIVE}"),
    "uncalled": ([_function("F", "Relu"), _function("G", "G", "local")],
                 f"{_place('G')}: {FORBIDS}local::G calls itself{NOT_RECURSIVE}"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_validate_reports_what_onnx_s_checker_refuses_across_functions(
        case: str, tmp_path: Path) -> None:
    functions, problem = CASES[case]
    model = _model(functions)
    if onnx_at_least(ONNX_CHECKS):
        with pytest.raises(onnx.checker.ValidationError):
            onnx.checker.check_model(model)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    if runtime_at_least(RUNTIME_CHECKS):  # (1.19 would crash the test on a recursive call)
        with pytest.raises(Exception,
                           match=r"Duplicate model-local function|must not be recursive"):
            ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    graph = ge.graph.load(path)
    before = graph.model.functions[0].SerializeToString()
    with pytest.raises(GraphValidationError) as caught:
        graph.validate()
    assert caught.value.code == "GE1003" and caught.value.nodes == ()
    assert caught.value.message == f"graph is invalid (1 problem(s)):\n  - {problem}"
    assert [p.kind for p in graph.find_problems()] == ["function"]
    assert graph.model.functions[0].SerializeToString() == before


@pytest.mark.parametrize("functions", [
    [_function("F", "Relu", overload="a"), _function("F", "Neg")],  # (told apart)
    [_function("F", "G", "local"), _function("G", "Neg")],  # (a call, no cycle)
    [_calls_overload_a(), _function("F", "Neg", overload="a")],
], ids=["overloads", "a-call", "a-call-of-an-overload"])
def test_functions_onnx_s_checker_passes_pass(functions: list[onnx.FunctionProto]) -> None:
    model = _model(functions)
    onnx.checker.check_model(model)
    ge.graph.load(model).validate()


def test_before_ir_8_neither_onnx_nor_ge_checks_functions() -> None:
    model = _model([_function("F", "F", "local"), _function("F", "Neg")], ir_version=7)
    onnx.checker.check_model(model)
    assert ge.graph.load(model).find_problems() == []


@pytest.mark.parametrize("case", ["twice", "itself"])
@pytest.mark.parametrize("command", [["compile"], ["compile", "--inline-functions"], ["run"]],
                         ids=["compile", "compile-inlining", "run"])
def test_commands_refuse_the_model_first_with_ge1003(case: str, command: list[str],
                                                     tmp_path: Path) -> None:
    """Before shape inference (GE1305 in onnx's words alone), the inliner (GE1203: "maximum
    recursion depth exceeded") or onnxruntime (GE1601), naming the functions."""
    functions, problem = CASES[case]
    source = tmp_path / "m.onnx"
    onnx.save(_model(functions), source)
    extra = ["-o", str(tmp_path / "out.onnx")] if command[0] == "compile" else []
    status, out, err = run_ge(command[0], str(source), *command[1:], *extra)
    assert status == 1 and out == ""
    assert err == f"ge: [GE1003] {source}: graph is invalid (1 problem(s)): {problem}\n"
    assert listing(tmp_path) == ["m.onnx"]
    with pytest.raises(GraphValidationError, match=r"ONNX forbids it"):
        ge.compile(source, inline_functions=True)


def test_inspect_notes_each(tmp_path: Path) -> None:
    source = tmp_path / "m.onnx"
    onnx.save(_model([_function("F", "F", "local"), _function("F", "Neg"),
                      _function("G", "Relu")]), source)
    status, out, _ = run_ge("inspect", str(source), "--json")
    assert status == 0
    assert json.loads(out)["function_problems"] == [
        {"function": "2 functions 'F' (domain 'local')", "node": "", "verdict": "ONNX forbids it",
         "problem": f"the model defines local::F 2 times; {ONE_EACH}"},
        {"function": "function 'F' (domain 'local')", "node": "", "verdict": "ONNX forbids it",
         "problem": f"local::F calls itself{NOT_RECURSIVE}"}]
    status, out, _ = run_ge("inspect", str(source))
    text = " ".join(out.split())
    assert status == 0
    assert ("note: 2 functions 'F' (domain 'local'): ONNX forbids it: the model defines "
            f"local::F 2 times; {ONE_EACH}; ge compile refuses the model for it (GE1003)") in text
    assert ("note: function 'F' (domain 'local'): ONNX forbids it: local::F calls itself"
            f"{NOT_RECURSIVE}; ge compile refuses the model for it (GE1003)") in text
    assert listing(tmp_path) == ["m.onnx"]
    assert len(onnx.load(source).functions) == 3
