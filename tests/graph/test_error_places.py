"""Errors about a model say where in it the problem is, so that its reader can find it.

Exporters (torch) name both branches of every If `body`: an error located as `graph 'body'`
said nothing of which body. A body is named by the node and attribute holding it, outwards
(`then_branch of If node 'inner_if' in the body of Loop node 'loop'`). A node the model
gives no name read `Constant node ''`: it is named by its operator, its index in its
graph's or function's node list and the values it computes (`ge.graph.places`)."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh

import ge
import ge.graph
from ge.errors import GraphValidationError, ModelLoadError, ShapeInferenceError
from ge.graph.payload_checks import check_model_payloads
from ge.graph.places import node_label

#: 8 bytes of raw_data for 4 floats
_SHORT = onnx.TensorProto(name="w", data_type=TP.FLOAT, dims=[4], raw_data=b"\0" * 8)
_NEEDS = "holds 8 bytes of raw_data, but its dims [4] of FLOAT need 16"
_IN_LOOP = "then_branch of If node 'inner_if' in the body of Loop node 'loop'"


def _vi(name: str, elem_type: int = TP.FLOAT, dims: list[int] | None = (4,)
        ) -> onnx.ValueInfoProto:
    return oh.make_tensor_value_info(name, elem_type, None if dims is None else list(dims))


def _body(nodes: list[onnx.NodeProto], output: str,
          initializers: list[onnx.TensorProto] = ()) -> onnx.GraphProto:
    """A branch named `body`, as torch names both branches of every If."""
    return oh.make_graph(nodes, "body", [], [_vi(output)], initializer=list(initializers))


def _if_in_a_loop(then: onnx.GraphProto, *, if_name: str = "inner_if") -> onnx.ModelProto:
    """A Loop (`loop`) whose body (named `body`) holds an If (`if_name`) of branches `then`
    and a Neg; every graph below the root is named `body`."""
    other = _body([oh.make_node("Neg", ["x"], ["e"], name="else_neg")], "e")
    inner = oh.make_node("If", ["c"], ["r"], name=if_name, then_branch=then, else_branch=other)
    loop_body = oh.make_graph(
        [inner, oh.make_node("Identity", ["cond_in"], ["cond_out"], name="cond")], "body",
        [_vi("i", TP.INT64, []), _vi("cond_in", TP.BOOL, [])],
        [_vi("cond_out", TP.BOOL, []), _vi("r")])
    graph = oh.make_graph([oh.make_node("Loop", ["n", ""], ["ys"], name="loop", body=loop_body)],
                          "g", [_vi("x"), _vi("c", TP.BOOL, []), _vi("n", TP.INT64, [])],
                          [_vi("ys", dims=None)])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def _refused_alike(model: onnx.ModelProto, tmp_path: Path) -> ModelLoadError:
    """Loading the file, `ge.compile` and `ge inspect`'s check give one GE1101 message; the
    folder is left as it was. Returns the loading error."""
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    before = sorted(tmp_path.iterdir())
    with pytest.raises(ModelLoadError) as loaded:
        ge.graph.load(path)
    with pytest.raises(ModelLoadError) as compiled:
        ge.compile(path)
    with pytest.raises(ModelLoadError) as inspected:
        check_model_payloads(model)
    err = loaded.value
    assert err.code == "GE1101" and err.message.startswith(f"{path}: ")
    assert compiled.value.message == err.message
    assert inspected.value.message == err.message[len(f"{path}: "):]
    assert sorted(tmp_path.iterdir()) == before
    return err


# -- bodies named by their owners -------------------------------------------------------------

def test_a_bad_initializer_in_an_if_in_a_loop_names_the_branch(tmp_path: Path) -> None:
    then = _body([oh.make_node("Add", ["x", "w"], ["t"], name="then_add")], "t", [_SHORT])
    err = _refused_alike(_if_in_a_loop(then), tmp_path)
    assert f"graph 'body', {_IN_LOOP}: initializer 'w' {_NEEDS}" in err.message


def test_a_bad_constant_in_the_else_branch_is_told_from_the_then_branch(tmp_path: Path) -> None:
    """Both branches are `body`: the message says which one."""
    then = _body([oh.make_node("Neg", ["x"], ["t"], name="then_neg")], "t")
    bad = _body([oh.make_node("Constant", [], ["k"], name="k", value=_SHORT),
                 oh.make_node("Add", ["x", "k"], ["e"], name="else_add")], "e")
    node = oh.make_node("If", ["c"], ["y"], name="cond_if", then_branch=then, else_branch=bad)
    model = oh.make_model(oh.make_graph([node], "g", [_vi("x"), _vi("c", TP.BOOL, [])],
                                        [_vi("y")]), opset_imports=[oh.make_opsetid("", 17)])
    err = _refused_alike(model, tmp_path)
    assert (f"graph 'body', else_branch of If node 'cond_if': Constant node 'k': attribute "
            f"'value' {_NEEDS}") in err.message
    assert err.nodes == ("k",)


def test_a_bad_tensor_in_a_body_of_a_function_names_the_function(tmp_path: Path) -> None:
    then = _body([oh.make_node("Constant", [], ["k"], name="k", value=_SHORT),
                  oh.make_node("Add", ["a", "k"], ["t"])], "t")
    other = _body([oh.make_node("Neg", ["a"], ["e"])], "e")
    function = oh.make_function(
        "mydomain", "f", ["a", "c"], ["b"],
        [oh.make_node("If", ["c"], ["b"], name="fn_if", then_branch=then, else_branch=other)],
        [oh.make_opsetid("", 17)])
    graph = oh.make_graph([oh.make_node("f", ["x", "c"], ["y"], domain="mydomain", name="call")],
                          "g", [_vi("x"), _vi("c", TP.BOOL, [])], [_vi("y")])
    model = oh.make_model(graph, functions=[function], opset_imports=[
        oh.make_opsetid("", 17), oh.make_opsetid("mydomain", 1)])
    err = _refused_alike(model, tmp_path)
    assert ("graph 'body', then_branch of If node 'fn_if' in function 'f' (domain "
            f"'mydomain'): Constant node 'k': attribute 'value' {_NEEDS}") in err.message


def test_a_value_nothing_produces_in_a_nested_body(tmp_path: Path) -> None:
    then = _body([oh.make_node("Add", ["x", "nowhere"], ["t"], name="then_add")], "t")
    path = tmp_path / "model.onnx"
    onnx.save(_if_in_a_loop(then), path)
    with pytest.raises(ModelLoadError) as caught:
        ge.graph.load(path)
    assert caught.value.message == (
        f"{path}: graph 'body', {_IN_LOOP}: input 1 of Add node 'then_add' reads 'nowhere', "
        "which no node, graph input or initializer produces")
    assert caught.value.nodes == ("then_add",)


def test_a_validation_problem_in_a_nested_body(tmp_path: Path) -> None:
    """`Graph.validate()` and a compilation's final validation (GE1003) say which body."""
    then = _body([oh.make_node("Relu", ["x"], ["t"], name="then_relu", foo=3)], "t")
    model = _if_in_a_loop(then)
    with pytest.raises(GraphValidationError) as caught:
        ge.graph.load(model).validate()
    (problem,) = caught.value.problems
    assert (problem.graph, problem.place) == ("body", f"graph body, {_IN_LOOP}")
    assert (f"  - graph body, {_IN_LOOP}: attribute: Relu node 'then_relu' has attribute "
            "'foo'") in caught.value.message
    source = tmp_path / "model.onnx"
    onnx.save(model, source)
    with pytest.raises(GraphValidationError) as compiled:
        ge.compile(source)
    assert compiled.value.code == "GE1003"
    assert f"graph body, {_IN_LOOP}: attribute: Relu node 'then_relu'" in compiled.value.message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def test_an_unknown_operator_in_a_nested_body() -> None:
    then = _body([oh.make_node("Frobnicate", ["x"], ["t"], name="then_op")], "t")
    with pytest.raises(ShapeInferenceError) as caught:
        ge.compile(_if_in_a_loop(then))
    assert caught.value.code == "GE1305"
    assert caught.value.message.startswith(
        f"graph 'body', {_IN_LOOP}: Frobnicate node 'then_op': ONNX has no operator Frobnicate")


# -- nodes of no name -------------------------------------------------------------------------

def _unnamed_constant_function(position: int) -> onnx.FunctionProto:
    """mydomain::f, whose node `position` is an unnamed Constant of 8 bytes for 4 floats."""
    nodes = [oh.make_node("Identity", ["a"], ["a0"])]
    nodes += [oh.make_node("Neg", [f"a{i}"], [f"a{i + 1}"]) for i in range(position - 1)]
    nodes += [oh.make_node("Constant", [], ["k"], value=_SHORT),
              oh.make_node("Add", [f"a{position - 1}", "k"], ["b"])]
    return oh.make_function("mydomain", "f", ["a"], ["b"], nodes, [oh.make_opsetid("", 17)])


def test_an_unnamed_constant_in_a_function(tmp_path: Path) -> None:
    """The trial's model: read `Constant node ''`."""
    graph = oh.make_graph([oh.make_node("f", ["x"], ["y"], domain="mydomain", name="call")],
                          "g", [_vi("x")], [_vi("y")])
    model = oh.make_model(graph, functions=[_unnamed_constant_function(3)], opset_imports=[
        oh.make_opsetid("", 17), oh.make_opsetid("mydomain", 1)])
    err = _refused_alike(model, tmp_path)
    assert ("function 'f' (domain 'mydomain'): unnamed Constant node (index 3 in the node "
            f"list, computing 'k'): attribute 'value' {_NEEDS}") in err.message
    assert "node ''" not in err.message and err.nodes == ()


@pytest.mark.parametrize("in_body", [False, True], ids=["main graph", "body"])
def test_an_unnamed_constant_in_a_graph(in_body: bool, tmp_path: Path) -> None:
    nodes = [oh.make_node("Relu", ["x"], ["r"]), oh.make_node("Constant", [], ["k"], value=_SHORT),
             oh.make_node("Add", ["r", "k"], ["t" if in_body else "y"])]
    if in_body:  # (the If has no name either)
        other = _body([oh.make_node("Neg", ["x"], ["e"])], "e")
        model = oh.make_model(oh.make_graph(
            [oh.make_node("If", ["c"], ["y"], then_branch=_body(nodes, "t"), else_branch=other)],
            "g", [_vi("x"), _vi("c", TP.BOOL, [])], [_vi("y")]),
            opset_imports=[oh.make_opsetid("", 17)])
        place = ("graph 'body', then_branch of unnamed If node (index 0 in the node list, "
                 "computing 'y')")
    else:
        model = oh.make_model(oh.make_graph(nodes, "g", [_vi("x")], [_vi("y")]),
                              opset_imports=[oh.make_opsetid("", 17)])
        place = "graph 'g'"
    err = _refused_alike(model, tmp_path)
    assert (f"{place}: unnamed Constant node (index 1 in the node list, computing 'k'): "
            f"attribute 'value' {_NEEDS}") in err.message


def test_an_unnamed_node_reading_a_value_nothing_produces() -> None:
    """Said by the node list it is in (a body's), not by ge's name for it (`Add`)."""
    then = _body([oh.make_node("Neg", ["x"], ["n"]), oh.make_node("Add", ["n", "nowhere"], ["t"])],
                 "t")
    with pytest.raises(ModelLoadError) as caught:
        ge.graph.load(_if_in_a_loop(then))
    assert (f"graph 'body', {_IN_LOOP}: input 1 of unnamed Add node (index 1 in the node list, "
            "computing 't') reads 'nowhere'") in caught.value.message


def test_node_label() -> None:
    assert node_label("Relu", "r") == "Relu node 'r'"
    assert node_label("Gelu", "g", domain="com.microsoft") == "com.microsoft.Gelu node 'g'"
    assert node_label("Add", "", index=2, outputs=["a", ""]) == (
        "unnamed Add node (index 2 in the node list, computing 'a')")
    assert node_label("Split", "", outputs=["a", "b"]) == (
        "unnamed Split node (computing 'a', 'b')")


def test_a_validation_problem_of_unnamed_nodes() -> None:
    """ge's names for them (`If`, `Relu`) are in no file: the problem names them as loading
    does, by what they compute (not by their index in the node list as read, which a pass
    removing nodes makes wrong); their IR names stay what `err.nodes` lists and dumps
    show."""
    then = _body([oh.make_node("Relu", ["x"], ["t"], foo=3)], "t")
    other = _body([oh.make_node("Neg", ["x"], ["e"])], "e")
    model = oh.make_model(oh.make_graph(
        [oh.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)], "g",
        [_vi("x"), _vi("c", TP.BOOL, [])], [_vi("y")]), opset_imports=[oh.make_opsetid("", 17)])
    with pytest.raises(GraphValidationError) as caught:
        ge.compile(model)
    assert caught.value.code == "GE1003" and caught.value.nodes == ("Relu",)
    assert ("graph body, then_branch of unnamed If node (computing 'y'): attribute: unnamed "
            "Relu node (computing 't') has attribute 'foo', which Relu (opset 17) does not "
            "define; ONNX runtimes reject it") in caught.value.message


def test_a_body_whose_owner_was_removed_is_validated_as_a_graph_of_its_own() -> None:
    """A branch kept after its If was removed still points at the removed node; its problems
    are listed without a place (it has none), not an AssertionError (trial TT)."""
    then = _body([oh.make_node("Neg", ["x"], ["t"], name="then_neg")], "t")
    other = _body([oh.make_node("Relu", ["x"], ["e"], name="else_relu")], "e")
    g = oh.make_graph([oh.make_node("If", ["c"], ["y"], name="cond_if", then_branch=then,
                                    else_branch=other)], "g",
                      [_vi("x"), _vi("c", TP.BOOL, [])], [_vi("y")])
    graph = ge.graph.load(oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)]))
    (if_node,) = graph.nodes_of_type("If")
    then_body = if_node.get_subgraphs()[0]
    graph.replace_all_uses(if_node, 0, graph.get_data_nodes()[0], 0)
    graph.remove_node(if_node)
    (problem,) = then_body.find_problems()
    assert problem.kind == "arity" and problem.place == ""
    assert problem.message == "required input 0 (X) of Neg node 'then_neg' is not connected"


def _unnamed_owners_model(cycle: bool) -> onnx.ModelProto:
    """A Loop whose body holds an If, neither named; the then branch has a cycle if asked."""
    if cycle:
        then = _body([oh.make_node("Add", ["x", "u"], ["t"]),
                      oh.make_node("Relu", ["t"], ["u"])], "t")
    else:
        then = _body([oh.make_node("Neg", ["x"], ["t"])], "t")
    other = _body([oh.make_node("Neg", ["x"], ["e"])], "e")
    loop_body = oh.make_graph(
        [oh.make_node("If", ["c"], ["r"], then_branch=then, else_branch=other),
         oh.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [_vi("i", TP.INT64, []), _vi("cond_in", TP.BOOL, [])],
        [_vi("cond_out", TP.BOOL, []), _vi("r")])
    g = oh.make_graph([oh.make_node("Loop", ["n", ""], ["ys"], body=loop_body)], "g",
                      [_vi("x"), _vi("c", TP.BOOL, []), _vi("n", TP.INT64, [])],
                      [_vi("ys", TP.FLOAT, ["n", 4])])
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])


def test_unnamed_owners_and_nodes_on_a_cycle_are_named_by_what_they_compute() -> None:
    """ge's names for unnamed nodes ('If', 'Loop', 'Add') are in no file (trial TT): after
    loading too, a body's unnamed owner is named by the values it computes, and so is an
    unnamed node on a cycle."""
    from ge.graph.places import body_owner, graph_label, model_node_label

    graph = ge.graph.load(_unnamed_owners_model(cycle=False))
    (loop,) = graph.nodes_of_type("Loop")
    (if_node,) = loop.get_subgraphs()[0].nodes_of_type("If")
    assert graph_label(if_node.get_subgraphs()[0]) == (
        "graph 'body', then_branch of unnamed If node (computing 'r') in the body of "
        "unnamed Loop node (computing 'ys')")
    with pytest.raises(GraphValidationError) as caught:
        ge.compile(_unnamed_owners_model(cycle=True))  # (loading keeps it: validation says)
    assert caught.value.code == "GE1003"
    assert ("then_branch of unnamed If node (computing 'r') in the body of unnamed Loop node "
            "(computing 'ys'): cycle: graph 'body' has a cycle through nodes: unnamed Add node "
            "(computing 't'), unnamed Relu node (computing 'u')"
            ) in caught.value.message
    # one wording, loading's (`model_node_label`), for an unnamed node wherever it is listed
    cyclic = ge.graph.load(_unnamed_owners_model(cycle=True))
    (loop,) = cyclic.nodes_of_type("Loop")
    (if_node,) = loop.get_subgraphs()[0].nodes_of_type("If")
    add, relu = (n for n in if_node.get_subgraphs()[0].get_direct_nodes()
                 if n.type in ("Add", "Relu"))
    assert [model_node_label(add), model_node_label(relu)] == [
        "unnamed Add node (computing 't')", "unnamed Relu node (computing 'u')"]
    # and in JSON (`ge passes explain --json`), with what finds it: index and outputs
    owner = body_owner(if_node.get_subgraphs()[0], loading=True)
    assert owner is not None and owner.as_dict() == {
        "node": "", "type": "If", "domain": "", "attribute": "then_branch", "graph": "body",
        "index": 0, "outputs": ["r"],
        "within": {"node": "", "type": "Loop", "domain": "", "attribute": "body",
                   "graph": "g", "index": 0, "outputs": ["ys"], "within": None}}


def test_every_check_of_the_ir_names_an_unnamed_node_as_loading_does_without_the_index(
        ) -> None:
    """The checks of the IR (arity, attributes, types, edges) name a node the model gives no
    name in loading's words (`node_label`), never by ge's name for it ('Relu', in no file),
    and by what it computes alone: after a node before it was removed, loading's index (1:
    'Neg' came first) would name another node of the model."""
    model = oh.make_model(oh.make_graph(
        [oh.make_node("Neg", ["x"], ["n"]), oh.make_node("Relu", ["n"], ["t"], foo=3),
         oh.make_node("Sqrt", ["t"], ["y"])], "g", [_vi("x")], [_vi("y")]),
        opset_imports=[oh.make_opsetid("", 17)])
    graph = ge.graph.load(model)
    neg, relu = (graph.nodes_of_type(op)[0] for op in ("Neg", "Relu"))
    source, index = neg.get_in_data_nodes_and_port_indexes(0)
    graph.replace_all_uses(neg, 0, source, index)
    graph.remove_node(neg)
    relu._consumers[0] = []  # (an edge half removed: what only a broken pass leaves)
    before = model.SerializeToString()
    problems = [str(p) for p in graph.find_problems()]
    assert problems == [
        "graph g: attribute: unnamed Relu node (computing 't') has attribute 'foo', which Relu "
        "(opset 17) does not define; ONNX runtimes reject it (keep private data in node "
        "metadata: Node.set_metadata)",
        "graph g: dangling-edge: edge unnamed Relu node (computing 't'):0 -> unnamed Sqrt node "
        "(computing 'y'):0 is missing on the producer side"]
    assert {n for p in graph.find_problems() for n in p.nodes} == {"Relu", "Sqrt"}  # ge's
    assert relu.name == "Relu" and model.SerializeToString() == before
