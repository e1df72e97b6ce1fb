"""`ge inspect` and `ge compile` on a model whose local function onnx's checker refuses
(user trial TT F4): inspect said nothing, and compile refused the model only at its save,
as "graph g: onnx-checker: ..." naming neither the function nor the node, onnx's text cut
("input 'zz' of node: "). Now inspect notes it and compile names both, before any pass (the
check of the model as given: it is the input model's problem)."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
from cli_helpers import listing, run_ge
from onnx import TensorProto, helper


def _undefined_input(path: Path) -> None:
    """y = custom.MyFn(x), MyFn's Add reading 'zz', which nothing computes."""
    f = helper.make_function("custom", "MyFn", ["x"], ["y"],
                             [helper.make_node("Add", ["x", "zz"], ["y"])],
                             [helper.make_opsetid("", 18)])
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("x", "y")]
    graph = helper.make_graph(
        [helper.make_node("MyFn", ["x"], ["y"], domain="custom", name="call")], "g",
        vi[:1], vi[1:])
    onnx.save(helper.make_model(graph, functions=[f], opset_imports=[
        helper.make_opsetid("", 18), helper.make_opsetid("custom", 1)]), path)


NODE = "unnamed Add node (index 0 in the node list, computing 'y')"
PROBLEM = ("Nodes in a function must be topologically sorted, however input 'zz' of node: "
           "Name: OpType: Add is neither output of any previous nodes nor input of the "
           "function.")


def test_inspect_notes_a_function_the_checker_refuses(tmp_path: Path) -> None:
    source = tmp_path / "m.onnx"
    _undefined_input(source)
    code, stdout, _ = run_ge("inspect", str(source), "--json")
    assert code == 0
    assert json.loads(stdout)["function_problems"] == [{
        "function": "function 'MyFn' (domain 'custom')", "node": NODE, "problem": PROBLEM,
        "verdict": "onnx.checker refuses it"}]
    code, stdout, _ = run_ge("inspect", str(source))
    assert code == 0
    assert (f"note: function 'MyFn' (domain 'custom'): {NODE}: onnx.checker refuses it: "
            f"{PROBLEM.rstrip('.')}; ge compile refuses the model for it (GE1003)"
            ) in " ".join(stdout.split())


def test_compile_names_the_function_and_node(tmp_path: Path) -> None:
    source, target = tmp_path / "m.onnx", tmp_path / "out.onnx"
    _undefined_input(source)
    before = listing(tmp_path)
    code, stdout, _ = run_ge("compile", str(source), "-o", str(target), "--json")
    assert code == 1
    error = json.loads(stdout)
    assert (error["code"], error["stage"]) == ("GE1003", None)
    assert error["message"] == (
        f"{source}: graph is invalid (1 problem(s)):\n  - function 'MyFn' (domain 'custom'): "
        f"function: {NODE}: onnx.checker refuses it: {PROBLEM}")
    assert listing(tmp_path) == before  # nothing written
