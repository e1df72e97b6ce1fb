"""Problems onnx's checker finds inside a model-local function or a body, named by place.

User trial TT F4: an unknown operator, a bad attribute or an undefined input name in a
model-local function, and a problem only onnx's checker sees in an If/Loop body, passed
`ge.graph.load` and `Graph.validate()` and surfaced only when saving, as "graph g:
onnx-checker: ..." naming neither the function nor the branch, onnx's text sometimes cut
("input 'zz' of node: "). Now `validate()` checks the functions (held as the protos read)
with onnx's checker, and a save's refusal names the function or body and the node, with
onnx's whole text. `ge.graph.checker_places` finds the place by running onnx's checker on
the parts, in the context the model gives them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import ge.graph
from ge.errors import GraphValidationError
from ge.graph.checker_places import function_failures, model_failure
from ge.graph.validation import find_problems

F = TensorProto.FLOAT
FUNCTION = "function 'MyFn' (domain 'custom')"


def _vi(name: str, elem: int = F, shape: list[int] | None = None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, [2] if shape is None else shape)


def _calling(body: list[onnx.NodeProto], inputs: tuple[str, ...] = ("x",),
             opset: int = 18) -> onnx.ModelProto:
    """y = custom.MyFn(x) (or of `inputs`; `c` a bool), MyFn's nodes `body`."""
    f = helper.make_function("custom", "MyFn", list(inputs), ["y"], body,
                             [helper.make_opsetid("", opset)])
    graph = helper.make_graph(
        [helper.make_node("MyFn", list(inputs), ["y"], domain="custom", name="call")], "g",
        [_vi(n, TensorProto.BOOL, []) if n == "c" else _vi(n) for n in inputs], [_vi("y")])
    return helper.make_model(graph, functions=[f], opset_imports=[
        helper.make_opsetid("", opset), helper.make_opsetid("custom", 1)])


def _if_model(then_nodes: list[onnx.NodeProto]) -> onnx.ModelProto:
    """y = If c (then_branch: `then_nodes` computing t from the outer x) else x."""
    then = helper.make_graph(then_nodes, "then_body", [], [_vi("t")])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], name="same")],
                              "else_body", [], [_vi("e")])
    node = helper.make_node("If", ["c"], ["y"], name="cond_if", then_branch=then,
                            else_branch=other)
    graph = helper.make_graph([node], "g", [_vi("c", TensorProto.BOOL, []), _vi("x")],
                              [_vi("y")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _twice(node: onnx.NodeProto, name: str, value: float) -> onnx.NodeProto:
    """`node` with attribute `name` written a second time (the checker refuses it; ge's IR,
    a dict of attributes, cannot hold it, so only the node's proto shows it)."""
    node.attribute.append(helper.make_attribute(name, value))
    return node


FUNCTION_CASES = {
    "unknown-op": (helper.make_node("Frobnicate", ["x"], ["y"]),
                   "unnamed Frobnicate node (index 0 in the node list, computing 'y'): "
                   "onnx.checker refuses it: No Op registered for Frobnicate with "
                   "domain_version of 18"),
    "attribute": (helper.make_node("Relu", ["x"], ["y"], name="r", alpha=1.0),
                  "Relu node 'r': onnx.checker refuses it: Unrecognized attribute: alpha "
                  "for operator Relu"),
    "undefined-input": (helper.make_node("Add", ["x", "zz"], ["y"], name="add"),
                        "Add node 'add': onnx.checker refuses it: Nodes in a function must be "
                        "topologically sorted, however input 'zz' of node: Name: add OpType: "
                        "Add is neither output of any previous nodes nor input of the "
                        "function."),
}


@pytest.mark.parametrize("case", FUNCTION_CASES)
def test_validate_names_the_function_and_node_onnx_checker_refuses(case: str,
                                                                   tmp_path: Path) -> None:
    node, message = FUNCTION_CASES[case]
    model = _calling([node])
    with pytest.raises(onnx.checker.ValidationError):  # (what it is: an invalid model)
        onnx.checker.check_model(model)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    with pytest.raises(Exception, match=r"(?i)invalid model"):  # onnxruntime refuses it too
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    graph = ge.graph.load(path)  # (held as read: a function is a proto to ge)
    with pytest.raises(GraphValidationError) as caught:
        graph.validate()
    err = caught.value
    assert err.code == "GE1003"
    [problem] = err.problems
    assert (problem.kind, problem.place, problem.message) == ("function", FUNCTION, message)
    assert problem.nodes == ((node.name,) if node.name else ())
    assert str(problem) == f"{FUNCTION}: function: {message}"


def test_a_function_node_named_in_a_body_inside_the_function() -> None:
    """A problem in a branch of an If inside a function: the branch, its owner, the
    function and the node; the branch reads the function's input (in scope: no problem)."""
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], alpha=2.0)], "fthen",
                             [], [_vi("t")])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "felse", [],
                              [_vi("e")])
    model = _calling([helper.make_node("If", ["c"], ["y"], name="fif", then_branch=then,
                                       else_branch=other)], inputs=("c", "x"))
    [problem] = ge.graph.load(model).find_problems()
    assert problem.place == f"graph fthen, then_branch of If node 'fif' in {FUNCTION}"
    assert problem.message == ("unnamed Relu node (index 0 in the node list, computing "
                               "'t'): onnx.checker refuses it: Unrecognized attribute: alpha "
                               "for operator Relu")


def test_valid_functions_pass_and_a_pass_check_leaves_functions_alone() -> None:
    """A function whose branches read its inputs, and one taking an attribute of its call
    (`ref_attr_name`), are valid: no problem. A pass's checks (`attributes_of`) do not
    look at functions: a pass changes none, and the input's are the final validation's."""
    branch = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "b", [], [_vi("t")])
    alpha = helper.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT)
    leaky = helper.make_node("LeakyRelu", ["x"], ["y"], name="leaky")
    leaky.attribute.append(alpha)
    model = _calling([helper.make_node("If", ["c"], ["y"], then_branch=branch,
                                       else_branch=branch)], inputs=("c", "x"))
    other = helper.make_function("custom", "Leaky", ["x"], ["y"], [leaky],
                                 [helper.make_opsetid("", 18)], attributes=["alpha"])
    model.functions.append(other)
    onnx.checker.check_model(model, full_check=True)
    assert ge.graph.load(model).find_problems() == []
    invalid = ge.graph.load(_calling([FUNCTION_CASES["unknown-op"][0]]))
    assert [p.kind for p in invalid.find_problems()] == ["function"]
    assert find_problems(invalid, attributes_of=lambda node: True) == []


def test_function_opsets_are_checked_against_the_model_s() -> None:
    """As `check_model` checks them: a function importing another opset of a domain than
    the model is refused, the node named."""
    model = _calling([helper.make_node("Relu", ["x"], ["y"], name="r")], opset=13)
    model.opset_import[0].version = 18
    [failure] = function_failures(model.functions, model.ir_version,
                                  {o.domain: o.version for o in model.opset_import})
    assert (failure.place, failure.node) == (FUNCTION, "Relu node 'r'")
    assert "FunctionOp imports version 13 whereas model imports version 18" in failure.message
    with pytest.raises(onnx.checker.ValidationError, match="not compatible"):
        onnx.checker.check_model(model)


@pytest.mark.parametrize("node, said", [
    (_twice(helper.make_node("LeakyRelu", ["x"], ["t"], name="leaky", alpha=0.1), "alpha",
            0.2), "LeakyRelu node 'leaky': Attribute 'alpha' appeared multiple times."),
    (helper.make_node("Constant", [], ["t"], name="k", value=TensorProto(name="v", dims=[2])),
     "Constant node 'k': Field 'data_type' of 'tensor' is required but missing."),
], ids=["repeated-attribute", "tensor-without-type"])
def test_save_names_the_branch_and_node_the_checker_refuses(node: onnx.NodeProto, said: str,
                                                            tmp_path: Path) -> None:
    """What only onnx's checker sees (ge's IR holds the attributes as a dict, and the
    tensor is decoded when read): the save's refusal named the main graph only ("graph g")
    and onnx's first line; the checker's own text names only the If holding the branch."""
    model = _if_model([node])
    with pytest.raises(onnx.checker.ValidationError, match="Name: cond_if OpType: If"):
        onnx.checker.check_model(model)
    graph = ge.graph.load(model)
    target = tmp_path / "out.onnx"
    with pytest.raises(GraphValidationError) as caught:
        graph.save(target, full_check=True)
    [problem] = caught.value.problems
    assert problem.kind == "onnx-checker"
    assert problem.place == "graph then_body, then_branch of If node 'cond_if'"
    assert problem.graph == "then_body" and problem.nodes == (node.name,)
    assert problem.message == (f"onnx.checker rejects the model, nothing was written to "
                               f"{target}: {said}")
    assert str(problem).startswith("graph then_body, then_branch of If node 'cond_if': "
                                   "onnx-checker: ")
    assert list(tmp_path.iterdir()) == []


def test_save_names_a_function_problem_with_onnx_s_whole_text(tmp_path: Path) -> None:
    """onnx spreads this message over three lines; the save gave its first alone:
    "... however input 'zz' of node: " (trial TT F4)."""
    node, _ = FUNCTION_CASES["undefined-input"]
    target = tmp_path / "out.onnx"
    with pytest.raises(GraphValidationError) as caught:
        ge.graph.load(_calling([node])).save(target, full_check=True)
    [problem] = caught.value.problems
    assert (problem.kind, problem.place, problem.nodes) == ("onnx-checker", FUNCTION,
                                                            ("add",))
    assert problem.message.endswith(
        ": Add node 'add': Nodes in a function must be topologically sorted, however input "
        "'zz' of node: Name: add OpType: Add is neither output of any previous nodes nor "
        "input of the function.")
    assert list(tmp_path.iterdir()) == []


def test_a_node_deep_in_nested_bodies_is_found() -> None:
    """Loop body → unnamed If → then_branch → the node: each owner named, an unnamed one
    by its index and outputs; the values in scope at each level (the Loop's state `li`,
    the outer `x`) are no problem, and a valid sibling body is passed over."""
    bad = _twice(helper.make_node("LeakyRelu", ["t1"], ["t"], name="leaky", alpha=0.1),
                 "alpha", 0.2)
    then = helper.make_graph([helper.make_node("Add", ["x", "li"], ["t1"]), bad], "then",
                             [], [_vi("t")])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [],
                              [_vi("e")])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("If", ["cond_in"], ["r"], then_branch=then, else_branch=other)],
        "body", [_vi("i", TensorProto.INT64, []), _vi("cond_in", TensorProto.BOOL, []),
                 _vi("li")], [_vi("cond_out", TensorProto.BOOL, []), _vi("r")])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "c", "x"], ["y"], body=body, name="loop")], "g",
        [_vi("n", TensorProto.INT64, []), _vi("c", TensorProto.BOOL, []), _vi("x")],
        [_vi("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    failure = model_failure(model)
    assert failure is not None
    assert failure.where == (
        "LeakyRelu node 'leaky' in graph then, then_branch of unnamed If node (index 1 in "
        "the node list, computing 'r') in the body of Loop node 'loop'")
    assert failure.message == "Attribute 'alpha' appeared multiple times."
    # the same model, the node fixed: nothing found, as the checker finds nothing
    loop_body = model.graph.node[0].attribute[0].g
    fixed = next(a.g for a in loop_body.node[1].attribute if a.name == "then_branch")
    del fixed.node[1].attribute[1]
    onnx.checker.check_model(model)
    assert model_failure(model) is None


def test_a_main_graph_problem_after_a_body_reading_outer_values() -> None:
    """A body reading the main graph's values passes on its own; the node after it that
    the checker refuses is named, and a graph output nothing computes is the graph's."""
    branch = helper.make_graph([helper.make_node("Add", ["x", "x"], ["t"])], "b", [],
                               [_vi("t")])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y0"], name="iff", then_branch=branch,
                          else_branch=branch),
         helper.make_node("Relu", ["y0"], ["y"], name="bad", alpha=1.0)], "g",
        [_vi("c", TensorProto.BOOL, []), _vi("x")], [_vi("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    failure = model_failure(model)
    assert failure is not None and (failure.place, failure.node, failure.name) == (
        "", "Relu node 'bad'", "bad")
    del model.graph.node[1].attribute[:]
    model.graph.output[0].name = "nothing"
    failure = model_failure(model)
    assert failure is not None and (failure.place, failure.node, failure.message) == (
        "", "", "Graph output 'nothing' is not an output of any node in graph.")


def test_the_function_check_runs_no_model_through_onnx_again(tmp_path: Path) -> None:
    """`validate()` checks functions from the protos held (no export of the graph): the
    check of a valid model with functions leaves the graph untouched and saves it byte
    for byte as read."""
    model = _calling([helper.make_node("Relu", ["x"], ["y"], name="r")])
    source = tmp_path / "m.onnx"
    onnx.save(model, source)
    graph = ge.graph.load(source)
    graph.validate()
    graph.save(tmp_path / "out.onnx")
    assert (tmp_path / "out.onnx").read_bytes() == source.read_bytes()
    x = np.array([-1.0, 2.0], np.float32)
    session = ort.InferenceSession(str(tmp_path / "out.onnx"),
                                   providers=["CPUExecutionProvider"])
    assert session.run(None, {"x": x})[0].tolist() == [0.0, 2.0]
