"""One naming authority: loading, add_node and copy_in name nodes and values alike."""

from __future__ import annotations

import onnx
import onnx.helper as oh
import pytest
from builders import add_data, add_op, add_output

import ge.graph
from ge.graph import DataType, Graph, TensorDesc


class Boom(Exception):
    pass


def _loaded() -> Graph:
    nodes = [oh.make_node("Relu", ["x"], ["a"]), oh.make_node("Relu", ["a"], ["y"])]
    vi = [oh.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [2]) for n in ("x", "y")]
    model = oh.make_model(oh.make_graph(nodes, "g", [vi[0]], [vi[1]]),
                          opset_imports=[oh.make_opsetid("", 17)])
    return ge.graph.load(model)


def test_loading_add_node_and_copy_in_share_one_numbering() -> None:
    graph = _loaded()
    relus = [n.name for n in graph.nodes_of_type("Relu")]
    assert relus == ["Relu", "Relu_1"]  # unnamed ONNX nodes get names from the op type
    assert graph.add_node("Relu", num_inputs=1).name == "Relu_2"
    rep = Graph("rep")
    add_output(rep, add_op(rep, "Relu", add_data(rep, 0, "d"), name="Relu"))
    made, _ = graph.copy_in(rep, [(graph.find_node_by_name("x"), 0)])
    assert made[0].name == "Relu_3"
    assert made[0].get_output_name(0) == "Relu_3:0"
    values = [v for n in graph.get_direct_nodes() for v in n.get_output_names() if v]
    assert len(values) == len(set(values))


def test_a_value_name_in_an_enclosing_graph_is_not_reused_below() -> None:
    graph = Graph("g")
    x = add_data(graph, 0, "x")
    graph.add_node("Relu", name="r", num_inputs=1, output_names=["inner:0"])
    sub = Graph("body")
    owner = graph.add_node("Custom", domain="t", name="owner")
    owner.set_attr("body", sub)
    assert sub.add_node("Neg", name="inner", num_inputs=1).get_output_name(0) == "inner:0_1"
    assert x.get_output_name(0) == "x"  # (a Data node gives the graph input of its name)


def test_a_data_node_added_gives_the_graph_input_of_its_name() -> None:
    """`add_node("Data", name="x")` wrote the graph input as `x:0` (a model loaded names
    the value of its Data node `x` as the input, `x`); a name taken is made unique, and
    output_names still decides."""
    graph = Graph("g")
    graph.add_node("Relu", name="r", num_inputs=1, output_names=["y"])
    x = graph.add_node("Data", name="x", attrs={"index": 0})
    y = graph.add_node("Data", name="y", attrs={"index": 1})
    z = graph.add_node("Data", name="z", attrs={"index": 2}, output_names=["zz"])
    assert [n.get_output_name(0) for n in (x, y, z)] == ["x", "y_1", "zz"]
    custom = graph.add_node("Data", domain="my.ops", name="d")
    assert custom.get_output_name(0) == "d:0"  # (another domain's Data: an operator)


def test_a_graph_built_by_hand_needs_no_index_nor_output_count() -> None:
    """Trial Z: a NetOutput added without `num_outputs=0` had one output and a Data without
    `index` none, which only validate() and save said. A Data takes the smallest index no
    Data has (trial AC: after a removal, one more than the last left a gap), a NetOutput no
    outputs; what is given still decides."""
    graph = Graph("g")
    x = graph.add_node("Data", name="x")
    w = graph.add_node("Data", name="w", attrs={"index": 2})
    b = graph.add_node("Data", name="b")
    c = graph.add_node("Data", name="c")
    relu = graph.add_node("Relu", num_inputs=1)
    out = graph.add_node("NetOutput", num_inputs=1)
    assert [n.get_attr("index") for n in (x, w, b, c)] == [0, 2, 1, 3]
    assert (relu.get_outputs_size(), out.get_outputs_size()) == (1, 0)
    assert graph.add_node("NetOutput", name="n2", num_outputs=2).get_outputs_size() == 2
    assert not graph.add_node("Data", domain="my.ops", name="d").has_attr("index")
    for name in ("n2", "d", "w", "b", "c", "x"):
        graph.remove_node(graph.find_node_by_name(name))
    x = graph.add_node("Data", name="x")  # (index 0: the gap the removals left)
    assert x.get_attr("index") == 0
    graph.add_data_edge(x, 0, relu, 0)
    graph.add_data_edge(relu, 0, out, 0)
    x.update_output_desc(0, TensorDesc([2], data_type=DataType.DT_FLOAT))
    graph.validate()
    assert [i.name for i in graph.to_onnx().graph.input] == ["x"]


def test_rolled_back_names_are_given_again() -> None:
    graph = _loaded()
    with pytest.raises(Boom), graph.transaction():
        graph.add_node("Relu")
        graph.add_node("Relu")
        raise Boom
    assert graph.add_node("Relu").name == "Relu_2"


def test_a_rename_is_undone_by_a_rollback() -> None:
    """`_rename_node` (a rewrite handing a replaced node's name to its successor) is one
    journal step: after a rollback the node has its name again, the old name finds it, the
    new one nothing, and the model saves byte-identical (its NodeProto clean again)."""
    graph = _loaded()
    before = graph.to_onnx().SerializeToString()
    node = graph.find_node_by_name("Relu")
    with pytest.raises(Boom), graph.transaction():
        graph._rename_node(node, "/block/Relu")
        assert graph.find_node_by_name("/block/Relu") is node
        assert graph.to_onnx().graph.node[0].name == "/block/Relu"
        raise Boom
    assert node.name == "Relu"
    assert graph.find_node_by_name("Relu") is node
    assert not graph.has_node("/block/Relu")
    assert graph.to_onnx().SerializeToString() == before


def test_a_named_constant_names_its_value_alike() -> None:
    """`add_const(name=...)`: the constant's value (its ONNX initializer) has the node's
    name, not `<name>:0`; made unique like any value name; unnamed ones keep `Const_N:0`."""
    graph = _loaded()
    assert graph.add_const([1.0], name="conv1.weight_folded").get_output_name(0) == (
        "conv1.weight_folded")
    assert graph.add_const([2.0], name="a").get_output_name(0) == "a_1"  # "a" is a value
    assert graph.add_const([3.0]).get_output_name(0) == "Const:0"


def test_a_value_rename_is_undone_by_a_rollback() -> None:
    """`_rename_value`: the value and its readers are written under the new name, and a
    rollback gives the old one back everywhere (the model saves byte-identical)."""
    graph = _loaded()
    before = graph.to_onnx().SerializeToString()
    first = graph.nodes_of_type("Relu")[0]
    with pytest.raises(Boom), graph.transaction():
        graph._rename_value(first, 0, "renamed")
        saved = graph.to_onnx()
        assert [list(n.input) for n in saved.graph.node] == [["x"], ["renamed"]]
        onnx.checker.check_model(saved, full_check=True)
        raise Boom
    assert first.get_output_name(0) == "a"
    assert graph.to_onnx().SerializeToString() == before
