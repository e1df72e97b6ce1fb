"""`ge passes explain` names the node and attribute holding each If/Loop body: exporters
name bodies `sub_graph`, `sub_graph1`, ..., and "graph sub_graph1" alone did not say which
If it was (text and JSON)."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
from cli_helpers import RELU_NEG, run_ge
from onnx import TensorProto, helper

EVERY_NEG = """
from ge.passes import DecomposePass, PassStage, register_decompose_pass

@register_decompose_pass(name="EveryNeg", stage=PassStage.AFTER_INFER_SHAPE, op_types=["Neg"])
class EveryNeg(DecomposePass):
    def meet_requirements(self, node):
        return True

    def replacement(self, node):
        raise NotImplementedError
"""


def _bodies_model(path: Path) -> str:
    """y = If 'cond_if'(c, then: Relu(Neg(x)), else: Neg(x)) + Loop 'loop'(2) whose body
    holds If 'inner_if'; every body is named `sub_graph` as the exporter wrote it."""
    vi = helper.make_tensor_value_info
    f32, boolean = TensorProto.FLOAT, TensorProto.BOOL

    def body(nodes: list[onnx.NodeProto], out: str) -> onnx.GraphProto:
        return helper.make_graph(nodes, "sub_graph", [], [vi(out, f32, [2])])

    then_g = body([helper.make_node("Neg", ["x"], ["n"], name="then_neg"),
                   helper.make_node("Relu", ["n"], ["t"], name="then_relu")], "t")
    else_g = body([helper.make_node("Neg", ["x"], ["e"], name="else_neg")], "e")
    inner_if = helper.make_node(
        "If", ["c"], ["v"], name="inner_if",
        then_branch=body([helper.make_node("Neg", ["x"], ["w"], name="inner_neg")], "w"),
        else_branch=body([helper.make_node("Identity", ["x"], ["u"], name="same")], "u"))
    loop_body = helper.make_graph(
        [inner_if, helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep")],
        "sub_graph", [vi("i", TensorProto.INT64, []), vi("cond_in", boolean, [])],
        [vi("cond_out", boolean, []), vi("v", f32, [2])])
    nodes = [
        helper.make_node("If", ["c"], ["a"], name="cond_if", then_branch=then_g,
                         else_branch=else_g),
        helper.make_node("Constant", [], ["trips"], name="trips",
                         value=helper.make_tensor("trips", TensorProto.INT64, [], [2])),
        helper.make_node("Loop", ["trips", "c"], ["scan"], name="loop", body=loop_body),
        helper.make_node("ReduceSum", ["scan", "axes"], ["b"], name="sum", keepdims=0),
        helper.make_node("Add", ["a", "b"], ["y"], name="add")]
    graph = helper.make_graph(
        nodes, "main", [vi("x", f32, [2]), vi("c", boolean, [])], [vi("y", f32, [2])],
        initializer=[helper.make_tensor("axes", TensorProto.INT64, [1], [0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)
    return str(path)


def test_each_body_is_named_with_its_owner_and_attribute(write, tmp_path: Path) -> None:
    plugin = str(write("p/relu_neg.py", RELU_NEG))
    model = _bodies_model(tmp_path / "bodies.onnx")
    code, out, err = run_ge("passes", "explain", "ReluNeg", model, "--pass-path", plugin)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[2].startswith("pattern ReluNeg_relu_neg_pattern (graph main): no candidate")
    assert lines[3] == ("pattern ReluNeg_relu_neg_pattern (graph sub_graph, then_branch of If "
                        "node 'cond_if'): anchor 'Relu' (Relu), 3 pattern node(s); "
                        "1 candidate(s), 1 would be rewritten")
    # one line per body, though all share a name (the patterns a body has no candidate for
    # share a line per body, not per name)
    places = [line.split("(", 1)[1].split("):")[0] for line in lines
              if line.startswith("pattern ")]
    assert places[2:] == [
        "graph sub_graph, else_branch of If node 'cond_if'",
        "graph sub_graph, body of Loop node 'loop'",
        "graph sub_graph, then_branch of If node 'inner_if' in the body of Loop node 'loop'",
        "graph sub_graph, else_branch of If node 'inner_if' in the body of Loop node 'loop'"]
    code, out, err = run_ge("passes", "explain", "ReluNeg", model, "--pass-path", plugin,
                            "--json")
    assert code == 0, err
    owners = [(p["graph"], p["owner"]) for p in json.loads(out)["patterns"]]
    named = {"index": None, "outputs": []}  # (what finds a node the model gives no name)
    loop = {"node": "loop", "type": "Loop", "domain": "", "attribute": "body",
            "graph": "main", "within": None, **named}
    assert owners[:2] == [("main", None), ("sub_graph", {
        "node": "cond_if", "type": "If", "domain": "", "attribute": "then_branch",
        "graph": "main", "within": None, **named})]
    assert owners[3:5] == [("sub_graph", loop), ("sub_graph", {
        "node": "inner_if", "type": "If", "domain": "", "attribute": "then_branch",
        "graph": "sub_graph", "within": loop, **named})]


def test_a_decompose_pass_names_them_too(write, tmp_path: Path) -> None:
    plugin = str(write("p/every_neg.py", EVERY_NEG))
    model = _bodies_model(tmp_path / "bodies.onnx")
    code, out, err = run_ge("passes", "explain", "EveryNeg", model, "--pass-path", plugin)
    assert code == 0, err
    assert ("op types Neg (graph sub_graph, else_branch of If node 'cond_if'): 1 candidate(s), "
            "1 would be rewritten") in out.splitlines()
    assert ("op types Neg (graph sub_graph, else_branch of If node 'inner_if' in the body of "
            "Loop node 'loop'): no candidate: graph 'sub_graph' has no Neg node (the pass's op "
            "types)") in out.splitlines()
    code, out, err = run_ge("passes", "explain", "EveryNeg", model, "--pass-path", plugin,
                            "--json")
    graphs = json.loads(out)["graphs"]
    assert graphs[0]["owner"] is None
    assert graphs[3]["owner"] == {"node": "loop", "type": "Loop", "domain": "",
                                  "attribute": "body", "graph": "main", "within": None,
                                  "index": None, "outputs": []}
