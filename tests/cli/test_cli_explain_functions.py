"""`ge passes explain` on models whose operators sit in model-local functions: the pass sees
a call as one node, so "no Mul node" alone sent the trial's author looking for a bug in the
pass. Explain names the functions holding the op (text and JSON: `functions`), and advises
`--inline-functions` where the command has it to give.
"""

from __future__ import annotations

import json
from pathlib import Path

import onnx
from cli_helpers import run_ge
from onnx import TensorProto, helper

from function_models import LOCAL, SILU_PASS, silu_model

SIGMOID = """
from ge.passes import DecomposePass, PassStage, register_decompose_pass

@register_decompose_pass(name="EverySigmoid", stage=PassStage.AFTER_INFER_SHAPE,
                         op_types=["Sigmoid"])
class EverySigmoid(DecomposePass):
    def meet_requirements(self, node):
        return True

    def replacement(self, node):
        raise NotImplementedError
"""

ADVICE = "--inline-functions inlines them"


def _save(model: onnx.ModelProto, path: Path) -> str:
    onnx.save(model, path)
    return str(path)


def test_an_op_only_in_a_function_body_names_the_function(write, tmp_path: Path) -> None:
    plugin = str(write("p/silu.py", SILU_PASS))
    model = _save(silu_model(), tmp_path / "f.onnx")
    code, out, err = run_ge("passes", "explain", "FastSiLU", model, "--pass-path", plugin)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[2] == ("pattern FastSiLU_silu_pattern (graph g): no candidate: graph 'g' has "
                        "no Mul node (the op type of the pattern's anchor 'Mul')")
    assert lines[3] == ("  function local.F (called by node 'call') has 1 Mul node: the pass "
                        f"does not see function bodies; {ADVICE}")
    code, out, err = run_ge("passes", "explain", "FastSiLU", model, "--pass-path", plugin,
                            "--json")
    assert code == 0, err
    payload = json.loads(out)
    assert payload["inline_functions"] is False and payload["opset"] is None
    (pattern,) = payload["patterns"]
    assert pattern["candidates"] == 0 and pattern["owner"] is None
    assert pattern["functions"] == [{
        "function": "local.F", "domain": LOCAL, "name": "F", "overload": "",
        "counts": {"Mul": 1}, "called_by": ["call"], "called_by_functions": []}]


def test_no_advice_where_inlining_was_asked_and_onnx_left_the_call(
        write, tmp_path: Path) -> None:
    """A function importing another ONNX opset than the model: onnx's inliner leaves its
    calls (a warning says why), and the function's line does not advise the flag given."""
    plugin = str(write("p/silu.py", SILU_PASS))
    silu = silu_model()
    for opset in silu.opset_import:
        if opset.domain == "":
            opset.version = 18
    model = _save(silu, tmp_path / "f.onnx")
    code, out, err = run_ge("passes", "explain", "FastSiLU", model, "--pass-path", plugin,
                            "--inline-functions")
    assert code == 0, err
    assert ("  function local.F (called by node 'call') has 1 Mul node: the pass does not see "
            "function bodies") in out.splitlines()
    assert ADVICE not in out
    assert "inline_functions (--inline-functions) left calls of local functions" in err


def _overloads_and_bodies() -> onnx.ModelProto:
    """y = Sigmoid(local.F:b(x)); F:b(x) = If(cond, then: Sigmoid(x), else: local.G(x)),
    G(x) = Sigmoid(Sigmoid(x)); F:a (never called) = Sigmoid(x)."""
    vi = helper.make_tensor_value_info
    then_g = helper.make_graph([helper.make_node("Sigmoid", ["X"], ["T"])], "then_g", [],
                               [vi("T", TensorProto.FLOAT, [2])])
    else_g = helper.make_graph([helper.make_node("G", ["X"], ["E"], domain=LOCAL)], "else_g",
                               [], [vi("E", TensorProto.FLOAT, [2])])
    imports = [helper.make_opsetid("", 17), helper.make_opsetid(LOCAL, 1)]
    f_b = helper.make_function(
        LOCAL, "F", ["X"], ["Y"],
        [helper.make_node("ReduceMax", ["X"], ["M"], keepdims=0),
         helper.make_node("Constant", [], ["Z"], value_float=0.0),
         helper.make_node("Greater", ["M", "Z"], ["C"]),
         helper.make_node("If", ["C"], ["Y"], then_branch=then_g, else_branch=else_g)],
        imports, overload="b")
    f_a = helper.make_function(LOCAL, "F", ["X"], ["Y"],
                               [helper.make_node("Sigmoid", ["X"], ["Y"])], imports,
                               overload="a")
    g = helper.make_function(LOCAL, "G", ["X"], ["Y"],
                             [helper.make_node("Sigmoid", ["X"], ["S"]),
                              helper.make_node("Sigmoid", ["S"], ["Y"])], imports)
    call = helper.make_node("F", ["x"], ["h"], domain=LOCAL, name="call_b")
    call.overload = "b"
    graph = helper.make_graph(
        [call, helper.make_node("Sigmoid", ["h"], ["y"], name="top")], "main",
        [vi("x", TensorProto.FLOAT, [2])], [vi("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, functions=[f_a, f_b, g], opset_imports=imports)
    model.ir_version = 10
    return model


def test_a_decompose_pass_counts_bodies_in_functions_by_overload(write, tmp_path: Path) -> None:
    """The overload called is counted (its If's branch and the function it calls through
    it too); the overload no node calls is not."""
    plugin = str(write("p/sigmoid.py", SIGMOID))
    model = _save(_overloads_and_bodies(), tmp_path / "o.onnx")
    code, out, err = run_ge("passes", "explain", "EverySigmoid", model, "--pass-path", plugin)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[2] == "op types Sigmoid (graph main): 1 candidate(s), 1 would be rewritten"
    assert lines[3:5] == [
        "  function local.F:b (called by node 'call_b') has 1 Sigmoid node: the pass does not "
        f"see function bodies; {ADVICE}",
        "  function local.G (called by function local.F:b) has 2 Sigmoid nodes: the pass does "
        f"not see function bodies; {ADVICE}"]
    assert "local.F:a" not in out
    code, out, err = run_ge("passes", "explain", "EverySigmoid", model, "--pass-path", plugin,
                            "--json")
    (main,) = json.loads(out)["graphs"]
    assert [(f["function"], f["overload"], f["counts"], f["called_by"],
             f["called_by_functions"]) for f in main["functions"]] == [
        ("local.F:b", "b", {"Sigmoid": 1}, ["call_b"], []),
        ("local.G", "", {"Sigmoid": 2}, [], ["local.F:b"])]
