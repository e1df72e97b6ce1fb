"""The coverage warning of verification: a plugin pass changed an If branch or a Loop body,
and the verification's inputs (given or generated) did not run it, so what it changed was
not checked. ge tells where the deciding values are constants or the root graph's
(`ge.session.body_coverage`), and a body inside a branch no run took was not run either; a
node deciding on a value computed in a body is undecided, said for generated inputs only."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ge
from ge.errors import CompileWarning
from ge.session.body_coverage import body_coverage
from model_paths import shared_model

pytestmark = pytest.mark.builtin_passes

# Relu(h) * 2 -> Relu(h * 2): right, so verification passes wherever the branch runs
RIGHT_THEN = '''\
import ge.es.all as es
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass


@register_fusion_pass(name="ScaleIntoRelu", stage=PassStage.AFTER_INFER_SHAPE)
class ScaleIntoRelu(PatternFusionPass):
    @pattern
    def relu_scale(self, inputs):
        return es.Relu(inputs[0]) * 2.0

    def replacement(self, inputs):
        return es.Relu(inputs[0] * 2.0)
'''

# Sin(h) -> Neg(Neg(Sin(h))) in the Loop's body: right too
SIN_IN_LOOP = '''\
import ge.es.all as es
from ge.es import GraphBuilder
from ge.passes import DecomposePass, PassStage, register_decompose_pass


@register_decompose_pass(name="NegatedSin", stage=PassStage.BEFORE_INFER_SHAPE,
                         op_types=["Sin"])
class NegatedSin(DecomposePass):
    def replacement(self, node):
        b = GraphBuilder("sin")
        return b.build_and_reset([es.Neg(es.Neg(es.Sin(b.create_input(0))))])
'''


def _plugin(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "plugin.py"
    path.write_text(source)
    return path


def _control_flow_inputs(total_sign: float, trips: int) -> dict[str, np.ndarray]:
    """control_flow's inputs: its If takes the then branch when sum(x) > 0, its Loop runs
    `trips` times."""
    x = np.abs(np.random.default_rng(0).standard_normal((2, 8))).astype(np.float32) + 0.1
    return {"x": x * np.float32(total_sign), "n": np.array(trips, np.int64)}


def _compile_warnings(model: object, plugin: Path, **kwargs: object) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ge.compile(model, pass_paths=[plugin], verify=True, **kwargs)  # type: ignore[arg-type]
    return [str(w.message) for w in caught if issubclass(w.category, CompileWarning)]


def test_given_inputs_that_skip_a_changed_branch_are_warned_about(tmp_path: Path) -> None:
    plugin = _plugin(tmp_path, RIGHT_THEN)
    model = shared_model("control_flow")
    assert _compile_warnings(model, plugin, inputs=_control_flow_inputs(-1, 2)) == [
        "the verification's given inputs did not run body 'sub_graph' (then_branch of If "
        "'/If') (changed by ScaleIntoRelu), so it did not check what the passes changed "
        "there: give inputs that run it (--inputs FILE.npz, inputs=)"]
    assert _compile_warnings(model, plugin, inputs=_control_flow_inputs(1, 2)) == []


def test_a_loop_body_runs_when_its_trip_count_lets_it(tmp_path: Path) -> None:
    plugin = _plugin(tmp_path, SIN_IN_LOOP)
    model = shared_model("control_flow")
    assert _compile_warnings(model, plugin, inputs=_control_flow_inputs(1, 0)) == [
        "the verification's given inputs did not run body 'sub_graph2' (body of Loop "
        "'/Loop') (changed by NegatedSin), so it did not check what the passes changed "
        "there: give inputs that run it (--inputs FILE.npz, inputs=)"]
    assert _compile_warnings(model, plugin, inputs=_control_flow_inputs(1, 3)) == []


def _nested_if(computed: bool = False) -> onnx.ModelProto:
    """y = If(c1, then: If(c2, then: Relu(x) * 2, else: -x), else: x): the inner branches
    are bodies of a body; `computed`: the inner If decides on Not(c2), computed in the outer
    then branch."""
    vi = helper.make_tensor_value_info
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    inner_then = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["r", "two"], ["t"])],
        "inner_then", [], [vi("t", TensorProto.FLOAT, [3])], [two])
    inner_else = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "inner_else", [],
                                   [vi("e", TensorProto.FLOAT, [3])])
    decide = [helper.make_node("Not", ["c2"], ["n2"])] if computed else []
    outer_then = helper.make_graph(
        [*decide, helper.make_node("If", ["n2" if computed else "c2"], ["i"], name="inner",
                                   then_branch=inner_then, else_branch=inner_else)],
        "outer_then", [], [vi("i", TensorProto.FLOAT, [3])])
    outer_else = helper.make_graph([helper.make_node("Identity", ["x"], ["o"])], "outer_else",
                                   [], [vi("o", TensorProto.FLOAT, [3])])
    graph = helper.make_graph(
        [helper.make_node("If", ["c1"], ["y"], name="outer", then_branch=outer_then,
                          else_branch=outer_else)], "nested",
        [vi("c1", TensorProto.BOOL, []), vi("c2", TensorProto.BOOL, []),
         vi("x", TensorProto.FLOAT, [3])], [vi("y", TensorProto.FLOAT, [3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _nested_inputs(c1: bool, c2: bool) -> dict[str, np.ndarray]:
    return {"c1": np.array(c1), "c2": np.array(c2), "x": np.array([1.0, -2.0, 3.0], np.float32)}


INNER_THEN_NOT_RUN = (
    "the verification's given inputs did not run body 'inner_then' (then_branch of If "
    "'inner') (changed by ScaleIntoRelu), so it did not check what the passes changed there: "
    "give inputs that run it (--inputs FILE.npz, inputs=)")


def test_a_body_of_a_body_deciding_on_root_values_is_told(tmp_path: Path) -> None:
    """The inner If decides on c2, an input of the run: told as the root graph's If is."""
    plugin = _plugin(tmp_path, RIGHT_THEN)
    assert _compile_warnings(_nested_if(), plugin, inputs=_nested_inputs(True, False)) == [
        INNER_THEN_NOT_RUN]
    assert _compile_warnings(_nested_if(), plugin, inputs=_nested_inputs(True, True)) == []


def test_a_body_inside_a_branch_not_run_was_not_run(tmp_path: Path) -> None:
    """The trial's wrong model: c2 takes the inner then branch, but c1 never enters the outer
    one, so the changed inner branch never ran; whatever the inner If decides on (here a
    value computed in the outer branch, which ge cannot read)."""
    plugin = _plugin(tmp_path, RIGHT_THEN)
    for computed in (False, True):
        assert _compile_warnings(_nested_if(computed), plugin,
                                 inputs=_nested_inputs(False, not computed)) == [
            INNER_THEN_NOT_RUN]


def test_a_body_deciding_on_a_value_of_a_body_is_undecided(tmp_path: Path) -> None:
    """Inside a branch that ran, an If deciding on a value computed there cannot be told (the
    warning says so for generated inputs only)."""
    graph = ge.graph.load(_nested_if(computed=True))
    inner = ["outer.then_branch/inner.then_branch", "outer.then_branch/inner.else_branch"]
    coverage = body_coverage(graph, inner, [_nested_inputs(True, False)])
    assert (coverage.not_run, coverage.undecided) == ([], inner)
    coverage = body_coverage(graph, inner, [_nested_inputs(False, False)])
    assert (coverage.not_run, coverage.undecided) == (inner, [])
    plugin = _plugin(tmp_path, RIGHT_THEN)
    assert _compile_warnings(_nested_if(computed=True), plugin,
                             inputs=_nested_inputs(True, False)) == []


ADD_TO_SUB_IN_BODIES = '''\
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="AddToSubInBodies", stage=PassStage.AFTER_INFER_SHAPE)
class AddToSubInBodies(FusionBasePass):
    def run(self, graph, context):
        if graph.parent_node is None:
            return None
        changed = False
        for old in list(graph.nodes_of_type("Add")):
            new = graph.add_node("Sub", name=old.name + "_sub", num_inputs=2, num_outputs=1)
            for i in range(2):
                s, k = old.get_in_data_nodes_and_port_indexes(i)
                graph.add_data_edge(s, k, new, i)
            graph.replace_all_uses(old, 0, new, 0)
            graph.remove_node(old)
            changed = True
        return True if changed else 1
'''


def _if_holding_a_loop() -> onnx.ModelProto:
    """y = If(c, then: Loop(3) {x + x}, else: -x): the trial's model."""
    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [helper.make_node("Add", ["x_in", "x_in"], ["x_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])], "lbody",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []),
         vi("x_in", TensorProto.FLOAT, [2])],
        [vi("cond_out", TensorProto.BOOL, []), vi("x_out", TensorProto.FLOAT, [2])])
    three = helper.make_tensor("three", TensorProto.INT64, [], [3])
    yes = helper.make_tensor("yes", TensorProto.BOOL, [], [True])
    then = helper.make_graph(
        [helper.make_node("Loop", ["three", "yes", "x"], ["t"], name="innerL", body=body)],
        "then", [], [vi("t", TensorProto.FLOAT, [2])], [three, yes])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                              [vi("e", TensorProto.FLOAT, [2])])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)],
        "g", [vi("c", TensorProto.BOOL, []), vi("x", TensorProto.FLOAT, [2])],
        [vi("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_loop_body_inside_a_branch_not_run_is_warned_about(tmp_path: Path) -> None:
    """The trial's case: a wrong edit (Add -> Sub) of a Loop body under the branch the
    inputs did not take said 'verification ok' with no warning."""
    plugin = _plugin(tmp_path, ADD_TO_SUB_IN_BODIES)
    x = np.array([1.0, 2.0], np.float32)
    assert _compile_warnings(_if_holding_a_loop(), plugin,
                             inputs={"c": np.array(False), "x": x}) == [
        "the verification's given inputs did not run body 'lbody' (body of Loop 'innerL') "
        "(changed by AddToSubInBodies), so it did not check what the passes changed there: "
        "give inputs that run it (--inputs FILE.npz, inputs=)"]
    with pytest.raises(ge.errors.VerificationError) as caught:
        ge.compile(_if_holding_a_loop(), pass_paths=[plugin],
                   inputs={"c": np.array(True), "x": x})
    assert caught.value.code == "GE1603"


def test_coverage_reads_constants_inputs_and_computed_values() -> None:
    """control_flow's If condition is computed (a Cast of a comparison), its Loop's trip
    count an input: one run of the graph with the condition as an extra output tells."""
    graph = ge.graph.load(shared_model("control_flow"))
    runs = [_control_flow_inputs(-1, 0), _control_flow_inputs(-1, 4)]
    bodies = ["/If.then_branch", "/If.else_branch", "/Loop.body", "nope"]
    coverage = body_coverage(graph, bodies, runs)
    assert coverage.not_run == ["/If.then_branch"]  # then: sum(x) > 0 in neither run
    assert coverage.undecided == ["nope"]
    assert coverage.described["/Loop.body"] == "body 'sub_graph2' (body of Loop '/Loop')"


def _two_ifs_of_one_body_name() -> onnx.ModelProto:
    """a = If(c, Relu(x) * 2, Neg(x)), b = If(c, Abs(x), Sigmoid(x)): every body is named
    `sub_graph`, as exporters name them."""
    vi = helper.make_tensor_value_info

    def body(op: str) -> onnx.GraphProto:
        return helper.make_graph([helper.make_node(op, ["x"], ["o"])], "sub_graph", [],
                                 [vi("o", TensorProto.FLOAT, [2])])

    relu_twice = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["r", "two"], ["o"])],
        "sub_graph", [], [vi("o", TensorProto.FLOAT, [2])],
        [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])])
    nodes = [helper.make_node("If", ["c"], ["a"], name="if1", then_branch=relu_twice,
                              else_branch=body("Neg")),
             helper.make_node("If", ["c"], ["b"], name="if2", then_branch=body("Abs"),
                              else_branch=body("Sigmoid"))]
    graph = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, [2]),
                                           vi("c", TensorProto.BOOL, [])],
                              [vi("a", TensorProto.FLOAT, [2]), vi("b", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_bodies_of_one_name_are_told_apart(tmp_path: Path) -> None:
    """The explain helper's finding: coverage looked bodies up by name, and every body here
    is `sub_graph`: the one the plugin changed (if1's then branch, a Relu) is the one named,
    by where it is."""
    plugin = _plugin(tmp_path, RIGHT_THEN)
    given = {"x": np.array([1.0, -2.0], np.float32), "c": np.array(False)}
    assert _compile_warnings(_two_ifs_of_one_body_name(), plugin, inputs=given) == [
        "the verification's given inputs did not run body 'sub_graph' (then_branch of If "
        "'if1') (changed by ScaleIntoRelu), so it did not check what the passes changed "
        "there: give inputs that run it (--inputs FILE.npz, inputs=)"]
    given["c"] = np.array(True)
    assert _compile_warnings(_two_ifs_of_one_body_name(), plugin, inputs=given) == []


# The root graph's run rebuilds if1's else branch (Neg(x) as a new Neg node), reaching it
# through the If node: a right edit, made in no run of the branch itself.
EDIT_ELSE_FROM_ROOT = '''\
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="RebuildElseFromRoot", stage=PassStage.AFTER_INFER_SHAPE)
class RebuildElseFromRoot(FusionBasePass):
    def run(self, graph, context):
        if graph.parent_node is not None:
            return None
        body = graph.find_node_by_name("if1").get_subgraphs()[1]
        (old,) = body.nodes_of_type("Neg")
        src, index = old.get_in_data_nodes_and_port_indexes(0)
        new = body.add_node("Neg", name="neg_again", num_inputs=1, num_outputs=1)
        body.add_data_edge(src, index, new, 0)
        body.replace_all_uses(old, 0, new, 0)
        body.remove_node(old)
        return True
'''


def test_a_body_changed_by_the_root_graphs_run_is_warned_about(tmp_path: Path) -> None:
    """The trial's wrong model written: a root run's edit of a branch the inputs did not
    take passed unwarned (the warning asked which graph each run was given, not which it
    changed); it is named as the branch's own run's edit is."""
    plugin = _plugin(tmp_path, EDIT_ELSE_FROM_ROOT)
    given = {"x": np.array([1.0, -2.0], np.float32), "c": np.array(True)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = ge.compile(_two_ifs_of_one_body_name(), pass_paths=[plugin], inputs=given)
    assert [str(w.message) for w in caught if issubclass(w.category, CompileWarning)] == [
        "the verification's given inputs did not run body 'sub_graph' (else_branch of If "
        "'if1') (changed by RebuildElseFromRoot), so it did not check what the passes "
        "changed there: give inputs that run it (--inputs FILE.npz, inputs=)"]
    (record,) = [r for r in result.report.records if r.pass_name == "RebuildElseFromRoot"
                 and r.changed]
    assert (record.graph_path, record.bodies_changed) == ("", ("if1.else_branch",))
    assert record.as_dict()["bodies_changed"] == ["if1.else_branch"]
    given["c"] = np.array(False)
    assert _compile_warnings(_two_ifs_of_one_body_name(), plugin, inputs=given) == []


# Where(c, a, b) of a scalar condition -> If(c) {Identity(a)} else {Identity(b)}: bodies the
# pass builds.
WHERE_TO_IF = '''\
from ge.graph import Graph
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


def _branch(graph, name, src):
    body = Graph(name)
    body.declare_parent(graph)
    ident = body.add_node("Identity", name=name + "_id", num_inputs=1, num_outputs=1)
    body.add_data_edge(src[0], src[1], ident, 0)
    out = body.add_node("NetOutput", name="NetOutput", num_inputs=1, num_outputs=0)
    body.add_data_edge(ident, 0, out, 0)
    return body


@register_fusion_pass(name="WhereToIf", stage=PassStage.AFTER_INFER_SHAPE)
class WhereToIf(FusionBasePass):
    def run(self, graph, context):
        for where in list(graph.nodes_of_type("Where")):
            c, a, b = (where.get_in_data_nodes_and_port_indexes(i) for i in range(3))
            new = graph.add_node("If", name="w_if", num_inputs=1, num_outputs=1,
                                 attrs={"then_branch": _branch(graph, "wt", a),
                                        "else_branch": _branch(graph, "we", b)})
            graph.add_data_edge(c[0], c[1], new, 0)
            graph.replace_all_uses(where, 0, new, 0)
            graph.remove_node(where)
        return True
'''


def _scalar_where() -> onnx.ModelProto:
    """y = Where(c, Relu(x), Neg(x)) of a scalar bool c."""
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["x"], ["b"]),
         helper.make_node("Where", ["c", "a", "b"], ["y"], name="where")], "g",
        [vi("c", TensorProto.BOOL, []), vi("x", TensorProto.FLOAT, [2])],
        [vi("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_body_a_pass_builds_is_warned_about_when_not_run(tmp_path: Path) -> None:
    """The trial's Where-to-If pass: the branches it built were never any run's graph, so
    no warning said the given inputs took only one of them."""
    plugin = _plugin(tmp_path, WHERE_TO_IF)
    x = np.array([1.0, -2.0], np.float32)
    assert _compile_warnings(_scalar_where(), plugin, inputs={"c": np.array(False), "x": x}) \
        == ["the verification's given inputs did not run body 'wt' (then_branch of If "
            "'w_if') (changed by WhereToIf), so it did not check what the passes changed "
            "there: give inputs that run it (--inputs FILE.npz, inputs=)"]
    assert _compile_warnings(_scalar_where(), plugin, inputs={"c": np.array(True), "x": x}) \
        == ["the verification's given inputs did not run body 'we' (else_branch of If "
            "'w_if') (changed by WhereToIf), so it did not check what the passes changed "
            "there: give inputs that run it (--inputs FILE.npz, inputs=)"]



def test_a_branch_built_inside_a_built_branch_is_warned_about(tmp_path: Path) -> None:
    """The trial's nested build: the inner If the pass built in its new then branch decides
    on c too; with c true its else branch never ran, and was not named."""
    source = WHERE_TO_IF.replace(
        '"then_branch": _branch(graph, "wt", a)', '"then_branch": _outer(graph, c, a, b)')
    source += '''

def _outer(graph, c, a, b):
    body = Graph("ot")
    body.declare_parent(graph)
    inner = body.add_node("If", name="inner_if", num_inputs=1, num_outputs=1,
                          attrs={"then_branch": _branch(body, "it", a),
                                 "else_branch": _branch(body, "ie", b)})
    body.add_data_edge(c[0], c[1], inner, 0)
    out = body.add_node("NetOutput", name="NetOutput", num_inputs=1, num_outputs=0)
    body.add_data_edge(inner, 0, out, 0)
    return body
'''
    plugin = _plugin(tmp_path, source)
    x = np.array([1.0, -2.0], np.float32)
    assert _compile_warnings(_scalar_where(), plugin, inputs={"c": np.array(True), "x": x}) \
        == ["the verification's given inputs did not run body 'ie' (else_branch of If "
            "'inner_if') (changed by WhereToIf), body 'we' (else_branch of If 'w_if') "
            "(changed by WhereToIf), so it did not check what the passes changed there: give "
            "inputs that run it (--inputs FILE.npz, inputs=)"]
