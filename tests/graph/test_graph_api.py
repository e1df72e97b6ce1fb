"""The Graph and Node API of spec §5.1–5.2: behaviour, errors and the IR's index invariants."""

from __future__ import annotations

import copy
import pickle
import re
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from builders import F32, add_data, add_op, add_output, attach_branch, chain, diamond, if_graph

import ge.graph
from ge.errors import GraphError, GraphTypeError, GraphValidationError
from ge.graph import DataType, DumpFormat, Format, Graph, Node, Tensor, TensorDesc
from ge.graph.onnx_import import model_to_graph
from model_paths import shared_model
from sample_models import two_ifs_with_bodies_named_alike


def _consumers(node: Node, index: int = 0) -> list[tuple[str, int]]:
    return [(n.name, i) for n, i in node.get_out_data_nodes_and_port_indexes(index)]


def _names(nodes: list[Node]) -> list[str]:
    return [n.name for n in nodes]


# -- Graph: construction, nodes, look-ups ------------------------------------------------------


def test_graph_name() -> None:
    """Graph(name) defaults to "graph" (also for None); a non-str name is a TypeError."""
    assert Graph().name == "graph" and Graph(None).name == "graph" and Graph("g").name == "g"
    with pytest.raises(TypeError):
        Graph(3)


def test_all_nodes_include_subgraphs_direct_nodes_do_not() -> None:
    """get_all_nodes lists subgraph nodes right after their owner; get_direct_nodes doesn't."""
    graph = if_graph()
    assert _names(graph.get_direct_nodes()) == ["x", "cond", "h", "if", "out"]
    assert _names(graph.get_all_nodes()) == [
        "x", "cond", "h", "if", "then_relu", "then_out", "else_neg", "else_out", "out"]
    then = graph.get_subgraph("then")
    assert _names(then.get_all_nodes()) == _names(then.get_direct_nodes())


def test_all_nodes_follow_every_change_of_the_hierarchy() -> None:
    """A root keeps its get_all_nodes() and get_all_subgraphs() lists between changes (the
    compiler counts nodes after every step and lists subgraphs before every pass); every
    kind of change, in the root or a body, shows in the next call, a rollback included,
    and the caller gets its own list."""
    graph = if_graph()
    first = graph.get_all_nodes()
    first.clear()  # the caller's copy: the graph's list is untouched
    assert _names(graph.get_all_nodes())[-1] == "out"
    then = graph.get_subgraph("then")
    extra = add_op(then, "Abs", then.find_node_by_name("then_relu"), name="then_abs")
    assert "then_abs" in _names(graph.get_all_nodes())
    then.remove_node(extra)
    assert "then_abs" not in _names(graph.get_all_nodes())
    if_node = graph.find_node_by_name("if")
    assert [g.name for g in graph.get_all_subgraphs()] == ["then", "else"]
    else_body = if_node.take_subgraph("else_branch")  # an attribute change, not structural
    assert "else_neg" not in _names(graph.get_all_nodes())
    assert [g.name for g in graph.get_all_subgraphs()] == ["then"]
    if_node.set_attr("else_branch", else_body)
    assert "else_neg" in _names(graph.get_all_nodes())
    assert [g.name for g in graph.get_all_subgraphs()] == ["then", "else"]
    orphan = Graph("orphan")
    graph.add_subgraph(orphan)
    assert [g.name for g in graph.get_all_subgraphs()] == ["then", "else", "orphan"]
    graph.remove_subgraph("orphan")
    assert [g.name for g in graph.get_all_subgraphs()] == ["then", "else"]
    before = _names(graph.get_all_nodes())
    with pytest.raises(RuntimeError), graph.transaction():
        graph.remove_node(graph.find_node_by_name("h"))
        assert "h" not in _names(graph.get_all_nodes())
        raise RuntimeError("rolled back")
    assert _names(graph.get_all_nodes()) == before


def test_all_nodes_list_does_not_keep_removed_nodes_alive() -> None:
    """The kept list is dropped at the change that makes it stale, so a removed node is
    freed by its reference count (as for the order's cached list)."""
    import weakref

    from ge.graph.allocation import no_gc_pauses

    graph = chain()
    assert len(graph.get_all_nodes()) == 5  # kept now
    node = graph.find_node_by_name("n1")
    gone = weakref.ref(node)
    with no_gc_pauses():
        for consumer, index in node.get_out_data_nodes_and_port_indexes(0):
            graph.remove_edge(node, 0, consumer, index)
        graph.remove_node(node)
        del node
        assert gone() is None


def test_all_nodes_after_the_order_is_established() -> None:
    """Making a loaded graph's order topological relinks its nodes: the kept list follows."""
    proto = onnx.helper.make_model(onnx.helper.make_graph(
        [onnx.helper.make_node("Neg", ["r"], ["y"], name="neg"),  # consumer first in the file
         onnx.helper.make_node("Relu", ["x"], ["r"], name="relu")],
        "unsorted", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])]))
    from ge.graph.onnx_import import model_to_graph

    graph = model_to_graph(proto)
    assert [n for n in _names(graph.get_all_nodes()) if n in ("neg", "relu")] == ["neg", "relu"]
    graph.topological_order()
    assert [n for n in _names(graph.get_all_nodes()) if n in ("neg", "relu")] == ["relu", "neg"]


def test_find_node_by_name() -> None:
    """find_node_by_name finds direct nodes; a missing name is a RuntimeError naming it."""
    graph = if_graph()
    assert graph.find_node_by_name("h").type == "Relu"
    with pytest.raises(RuntimeError, match="nope"):
        graph.find_node_by_name("nope")
    with pytest.raises(GraphError):  # subgraph nodes are not direct nodes of the root
        graph.find_node_by_name("then_relu")
    assert graph.get_subgraph("then").find_node_by_name("then_relu").type == "Relu"
    with pytest.raises(TypeError):
        graph.find_node_by_name(1)


def test_add_node_names_and_errors() -> None:
    """add_node picks unique names; a taken explicit name is a RuntimeError; bad types TypeError."""
    graph = Graph()
    first, second = graph.add_node("Relu", num_inputs=1), graph.add_node("Relu", num_inputs=1)
    assert first.name != second.name and {first.type, second.type} == {"Relu"}
    assert graph.has_node(first.name) and len(graph) == 2 and first in graph
    assert first.get_output_names() != second.get_output_names()
    with pytest.raises(RuntimeError, match=first.name):
        graph.add_node("Relu", name=first.name)
    with pytest.raises(TypeError):
        graph.add_node(7)
    with pytest.raises(TypeError):
        graph.add_node("Relu", num_inputs="1")
    with pytest.raises(TypeError):
        graph.add_node("Relu", domain=None)
    with pytest.raises(RuntimeError):
        graph.add_node("Split", num_outputs=2, output_names=["only_one"])
    with pytest.raises(RuntimeError):  # a value name is produced once per scope
        graph.add_node("Relu", output_names=[first.get_output_name(0)])
    node = graph.add_node("Custom", domain="my.domain", num_inputs=2, num_outputs=3)
    assert (node.domain, node.get_inputs_size(), node.get_outputs_size()) == ("my.domain", 2, 3)
    assert len(graph) == 3  # the failed calls added nothing


def test_node_is_not_constructible_nor_copyable() -> None:
    """Node() and copy/deepcopy/pickle of a node are RuntimeErrors; nodes compare by identity."""
    with pytest.raises(RuntimeError):
        Node()
    node = chain().find_node_by_name("n0")
    for attempt in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(RuntimeError):
            attempt(node)
    again = node.owner_graph.find_node_by_name("n0")
    assert again is node and again == node and {node: 1}[again] == 1
    assert node != node.owner_graph.find_node_by_name("n1")


def test_graph_copy_is_refused_and_clone_is_deep() -> None:
    """copy.copy/deepcopy(Graph) are RuntimeErrors; clone() gives an independent deep copy."""
    graph = if_graph()
    graph.set_attr("note", "kept")
    h = graph.find_node_by_name("h")
    h.set_metadata("note", "copied")
    h.set_input_attr("tag", 0, "in")
    graph.add_subgraph(chain("orphan"))
    with pytest.raises(RuntimeError):
        copy.copy(graph)
    with pytest.raises(RuntimeError):
        copy.deepcopy(graph)

    twin = graph.clone()
    assert twin is not graph and str(twin) == str(graph)
    assert twin.to_onnx().SerializeToString() == graph.to_onnx().SerializeToString()
    assert [g.name for g in twin.get_all_subgraphs()] == ["then", "else", "orphan"]
    assert twin.get_attr("note") == "kept"
    twin_h = twin.find_node_by_name("h")
    assert twin_h is not h and twin_h.get_metadata()["note"] == "copied"
    assert twin_h.get_input_attr("tag", 0) == "in"
    # The clone's subgraph nodes read the clone's outer node, not the original's.
    twin_then = twin.get_subgraph("then")
    assert twin_then is not graph.get_subgraph("then")
    assert twin_then.parent_node is twin.find_node_by_name("if")
    producer = twin_then.find_node_by_name("then_relu").get_in_data_nodes_and_port_indexes(0)
    assert producer == (twin_h, 0)

    before = str(graph)
    twin.remove_node(twin_h)
    twin.find_node_by_name("x").update_output_desc(0, TensorDesc([9]))
    twin_then.remove_node(twin_then.find_node_by_name("then_out"))
    twin.set_attr("note", "changed")
    twin.find_node_by_name("if").set_attr("else_branch", Graph("new_else"))
    assert str(graph) == before and graph.get_attr("note") == "kept"
    assert _consumers(h) == [("then_relu", 0), ("else_neg", 0)]
    graph.validate()


def test_clone_does_not_share_tensors() -> None:
    """A Const's value in a clone is not the original's object: changing it changes one graph."""
    graph = diamond()
    twin = graph.clone("twin")
    assert twin.name == "twin"
    value = twin.find_node_by_name("k").get_attr("value")
    value.set_format(Format.FORMAT_NCHW).set_data_type(DataType.DT_INT32)
    original = graph.find_node_by_name("k").get_attr("value")
    assert original.format is Format.FORMAT_ND and original.data_type is DataType.DT_FLOAT


def test_clone_of_a_subgraph_reading_outer_values_is_refused() -> None:
    """A subgraph that reads values of its enclosing graph can't be cloned alone."""
    graph = if_graph()
    with pytest.raises(RuntimeError, match="then_relu"):
        graph.get_subgraph("then").clone()


def test_air_files_are_refused() -> None:
    """save_to_air/load_from_air exist for parity and raise RuntimeError (ONNX only, D16)."""
    graph = chain()
    with pytest.raises(RuntimeError):
        graph.save_to_air("g.air")
    with pytest.raises(RuntimeError):
        graph.load_from_air("g.air")


# -- edges -------------------------------------------------------------------------------------


def test_data_edges_both_directions() -> None:
    """get_in_data_nodes_and_port_indexes / get_out_data_nodes_and_port_indexes mirror edges."""
    graph = Graph()
    x = add_data(graph, 0)
    split = add_op(graph, "Split", x, num_outputs=2, name="split")
    add = add_op(graph, "Add", (split, 1), (split, 0), name="add")
    relu = add_op(graph, "Relu", (split, 1), name="relu")
    assert add.get_in_data_nodes_and_port_indexes(0) == (split, 1)
    assert add.get_in_data_nodes_and_port_indexes(1) == (split, 0)
    assert _consumers(split, 0) == [("add", 1)]
    assert _consumers(split, 1) == [("add", 0), ("relu", 0)]  # in edge order
    assert (split.get_inputs_size(), split.get_outputs_size()) == (1, 2)
    assert _names(split.get_out_data_nodes()) == ["add", "relu"]
    assert _names(add.get_in_data_nodes()) == ["split", "split"]
    assert relu.get_out_data_nodes_and_port_indexes(0) == []


def test_edge_errors() -> None:
    """Occupied inputs, missing ports, foreign nodes are RuntimeErrors; bad types TypeErrors."""
    graph = chain()
    x, n0, n1 = (graph.find_node_by_name(n) for n in ("x", "n0", "n1"))
    with pytest.raises(RuntimeError, match="already connected"):
        graph.add_data_edge(x, 0, n1, 0)
    graph.remove_edge(n0, 0, n1, 0)  # n1's input is free for the checks below
    with pytest.raises(RuntimeError, match="no output 1"):
        graph.add_data_edge(x, 1, n1, 0)
    with pytest.raises(RuntimeError, match="no input 5"):
        graph.add_data_edge(x, 0, n1, 5)
    other = chain("other")
    with pytest.raises(RuntimeError, match="not a node of graph"):
        graph.add_data_edge(other.find_node_by_name("x"), 0, n1, 0)
    with pytest.raises(RuntimeError):
        graph.add_data_edge(x, 0, other.find_node_by_name("n1"), 0)
    for args in [("x", 0, n1, 0), (x, "0", n1, 0), (x, 0, n1, 0.0), (x, True, n1, 0),
                 (x, 0, None, 0)]:
        with pytest.raises(TypeError):
            graph.add_data_edge(*args)
    with pytest.raises(RuntimeError, match="no data edge"):
        graph.remove_edge(x, 0, n1, 0)
    with pytest.raises(TypeError):
        graph.remove_edge(x, 0, "n0", 0)
    with pytest.raises(RuntimeError, match="no input 3"):
        n0.get_in_data_nodes_and_port_indexes(3)
    graph.remove_edge(x, 0, n0, 0)
    with pytest.raises(RuntimeError, match="not connected"):
        n0.get_in_data_nodes_and_port_indexes(0)
    assert n0.get_input_producer(0) is None
    with pytest.raises(TypeError):
        n0.get_out_data_nodes_and_port_indexes("0")
    with pytest.raises(RuntimeError):
        n0.get_out_data_nodes_and_port_indexes(1)


def test_add_and_remove_data_edge() -> None:
    """remove_edge takes the edge off both ends; add_data_edge puts it back."""
    graph = chain()
    x, n0 = graph.find_node_by_name("x"), graph.find_node_by_name("n0")
    graph.remove_edge(x, 0, n0, 0)
    assert n0.get_input_producer(0) is None and _consumers(x) == []
    graph.add_data_edge(x, 0, n0, 0)
    assert n0.get_in_data_nodes_and_port_indexes(0) == (x, 0) and _consumers(x) == [("n0", 0)]
    graph.validate()


def test_control_edges() -> None:
    """add_control_edge links both ends once; remove_edge with ports -1 removes it."""
    graph = diamond()
    a, b, d = (graph.find_node_by_name(n) for n in "abd")
    graph.add_control_edge(a, b)
    graph.add_control_edge(a, b)  # already there: no second edge
    graph.add_control_edge(a, d)
    assert _names(b.get_in_control_nodes()) == ["a"] and _names(a.get_out_control_nodes()) == [
        "b", "d"]
    assert a.get_in_control_nodes() == [] and b.get_out_control_nodes() == []
    graph.remove_edge(a, -1, b, -1)
    assert b.get_in_control_nodes() == [] and _names(a.get_out_control_nodes()) == ["d"]
    with pytest.raises(RuntimeError, match="no control edge"):
        graph.remove_edge(a, -1, b, -1)
    with pytest.raises(RuntimeError):
        graph.add_control_edge(a, a)
    with pytest.raises(RuntimeError):
        graph.add_control_edge(a, chain().find_node_by_name("n0"))
    with pytest.raises(TypeError):
        graph.add_control_edge(a, "b")
    graph.validate()


def test_control_edges_order_the_topology() -> None:
    """A control edge makes its destination come after its source."""
    graph = diamond()
    a, b = graph.find_node_by_name("a"), graph.find_node_by_name("b")
    order = _names(graph.topological_order())
    assert order.index("a") < order.index("b")
    graph.add_control_edge(b, a)
    order = _names(graph.topological_order())
    assert order.index("b") < order.index("a")
    assert "after b" in str(graph)
    graph.remove_edge(b, -1, a, -1)  # a freed constraint moves nothing back
    assert _names(graph.topological_order()) == order
    graph.add_control_edge(a, b)
    order = _names(graph.topological_order())
    assert order.index("a") < order.index("b")


def test_remove_node_leaves_no_edge_behind() -> None:
    """remove_node drops data and control edges on both sides, frees the name and the index."""
    graph = diamond()
    a, b, c, k, d = (graph.find_node_by_name(n) for n in "abckd")
    graph.add_control_edge(a, c)
    graph.add_control_edge(c, k)
    graph.remove_node(c)
    assert c.owner_graph is None and c not in graph and not graph.has_node("c")
    assert _consumers(a) == [] and _consumers(b) == []
    assert d.get_input_producer(0) is None and d.get_input_producer(1) == (k, 0)
    assert a.get_out_control_nodes() == [] and k.get_in_control_nodes() == []
    assert "c" not in _names(graph.nodes_of_type("Add"))
    for node in graph.get_direct_nodes():  # nothing anywhere refers to c
        assert c not in node.get_in_data_nodes() + node.get_out_data_nodes()
        assert c not in node.get_in_control_nodes() + node.get_out_control_nodes()
    with pytest.raises(RuntimeError):
        graph.remove_node(c)
    with pytest.raises(RuntimeError, match="removed"):
        c.set_attr("x", 1)
    with pytest.raises(TypeError):
        graph.remove_node("a")
    assert graph.add_node("Add", name="c", num_inputs=2).name == "c"  # the name is free again
    problems = {p.kind for p in graph.find_problems()}
    assert "dangling-edge" not in problems


def test_remove_node_with_a_subgraph_drops_its_outer_reads() -> None:
    """Removing a node that owns subgraphs disconnects their reads of outer values."""
    graph = if_graph()
    h = graph.find_node_by_name("h")
    graph.remove_node(graph.find_node_by_name("if"))
    assert _consumers(h) == []
    assert all(g.name not in ("then", "else") for g in graph.get_all_subgraphs())


def test_remove_outer_producer_disconnects_subgraph_readers() -> None:
    """Removing an outer node read by a subgraph leaves the subgraph's input unconnected."""
    graph = if_graph()
    graph.remove_node(graph.find_node_by_name("h"))
    then_relu = graph.get_subgraph("then").find_node_by_name("then_relu")
    assert then_relu.get_input_producer(0) is None


def test_replace_all_uses_and_set_inputs_size() -> None:
    """replace_all_uses moves every consumer; set_inputs_size grows/shrinks free anchors."""
    graph = diamond()
    x, c = graph.find_node_by_name("x"), graph.find_node_by_name("c")
    y = add_data(graph, 1, "y")
    graph.replace_all_uses(x, 0, y, 0)
    assert _consumers(x) == [] and _consumers(y) == [("a", 0), ("b", 0)]
    assert graph.find_node_by_name("b").get_in_data_nodes_and_port_indexes(0) == (y, 0)
    concat = graph.add_node("Concat", num_inputs=1, attrs={"axis": 0})
    graph.set_inputs_size(concat, 3)
    assert concat.get_inputs_size() == 3
    graph.add_data_edge(c, 0, concat, 2)
    with pytest.raises(RuntimeError, match="connected"):
        graph.set_inputs_size(concat, 2)
    graph.remove_edge(c, 0, concat, 2)
    graph.set_inputs_size(concat, 1)
    assert concat.get_inputs_size() == 1
    with pytest.raises(TypeError):
        graph.set_inputs_size(concat, "2")
    with pytest.raises(TypeError):
        graph.replace_all_uses("x", 0, y, 0)


def test_replace_all_uses_refuses_a_value_out_of_scope() -> None:
    """Consumers can't be moved to a value they can't see (an inner one); nothing changes."""
    graph = if_graph()
    x, then = graph.find_node_by_name("x"), graph.get_subgraph("then")
    inner = then.find_node_by_name("then_relu")
    before = str(graph)
    with pytest.raises(RuntimeError, match="scope"):
        then.replace_all_uses(x, 0, inner, 0)  # h (root) would read a value of `then`
    assert str(graph) == before and _consumers(x) == [("h", 0)]
    with pytest.raises(RuntimeError):  # `old` must be in scope of the graph asked
        graph.replace_all_uses(inner, 0, x, 0)


def test_set_inputs_size_rejects_negative_sizes() -> None:
    """A negative input count is an error, not a silent shrink from the end."""
    graph = Graph()
    node = graph.add_node("Concat", num_inputs=2)
    with pytest.raises(RuntimeError):
        graph.set_inputs_size(node, -1)
    assert node.get_inputs_size() == 2


def test_bad_argument_types_are_type_errors() -> None:
    """Graph and Node methods refuse arguments of the wrong type (TypeError), changing nothing."""
    graph = if_graph()
    h, out = graph.find_node_by_name("h"), graph.find_node_by_name("out")
    calls = [
        lambda: graph.find_node_by_name(None),
        lambda: graph.get_attr(1),
        lambda: graph.set_attr(None, 1),
        lambda: graph.remove_node(h.name),
        lambda: graph.add_data_edge(h, 0, "out", 0),
        lambda: graph.add_data_edge(h, None, out, 0),
        lambda: graph.remove_edge(h, 0, out, "0"),
        lambda: graph.add_control_edge(h.name, out),
        lambda: graph.get_subgraph(3),
        lambda: graph.add_subgraph(h),
        lambda: graph.remove_subgraph(3),
        lambda: graph.add_node("Relu", name=5),
        lambda: graph.add_node("Relu", num_outputs=1.0),
        lambda: graph.add_const(object()),
        lambda: graph.set_inputs_size(h, 1.5),
        lambda: h.has_attr(1),
        lambda: h.get_attr(b"alpha"),
        lambda: h.set_attr(1, 1),
        lambda: h.set_attr("a", {1: 2}),
        lambda: h.get_input_desc("0"),
        lambda: h.get_output_desc(None),
        lambda: h.update_input_desc(0, "float"),
        lambda: h.update_output_desc(0, 1),
        lambda: h.get_in_data_nodes_and_port_indexes(0.0),
        lambda: h.get_out_data_nodes_and_port_indexes(True),
        lambda: h.get_input_attr(1, 0),
        lambda: h.set_input_attr("a", "0", 1),
        lambda: h.get_output_attr("a", 0.0),
        lambda: h.set_output_attr(None, 0, 1),
    ]
    before = str(graph)
    for i, call in enumerate(calls):
        with pytest.raises(TypeError):
            call()
            pytest.fail(f"call {i} did not raise")
    assert str(graph) == before


# -- attributes --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected", "kind"),
    [
        ("relu", "relu", onnx.AttributeProto.STRING),
        (0.25, 0.25, onnx.AttributeProto.FLOAT),
        (True, True, onnx.AttributeProto.INT),
        (False, False, onnx.AttributeProto.INT),
        (3, 3, onnx.AttributeProto.INT),
        (-(2**40), -(2**40), onnx.AttributeProto.INT),
        ([1.0, 2.5], [1.0, 2.5], onnx.AttributeProto.FLOATS),
        ([True, False], [True, False], onnx.AttributeProto.INTS),
        ([1, 2, 3], [1, 2, 3], onnx.AttributeProto.INTS),
        (["a", "b"], ["a", "b"], onnx.AttributeProto.STRINGS),
        ([1, 2.5], [1.0, 2.5], onnx.AttributeProto.FLOATS),  # ints widen to floats
    ],
)
def test_set_attr_each_value_type_reads_back(value, expected, kind) -> None:
    """Every attribute value type of §5.2 reads back equal, with the ONNX kind it maps to."""
    node = chain().find_node_by_name("n0")
    node.set_attr("attr", value)
    assert node.has_attr("attr")
    got = node.get_attr("attr")
    assert got == expected and type(got) is type(expected)
    if isinstance(expected, list):
        assert [type(v) for v in got] == [type(v) for v in expected]
    assert node.get_attr_kind("attr") == kind


def test_data_type_attr_is_stored_as_the_onnx_element_type() -> None:
    """A DataType attribute is stored as its ONNX element type (so Cast's `to` exports right)."""
    node = chain().find_node_by_name("n0")
    node.set_attr("to", DataType.DT_INT64)
    assert node.get_attr("to") == onnx.TensorProto.INT64
    node.set_attr("types", [DataType.DT_FLOAT, DataType.DT_BOOL])
    assert node.get_attr("types") == [onnx.TensorProto.FLOAT, onnx.TensorProto.BOOL]


def test_an_element_type_attribute_refuses_to_compare_with_ge_numbering() -> None:
    """Cast's `to` holds ONNX's numbering, DataType GE's: ONNX FLOAT (1) is GE's DT_FLOAT16
    (1), so `to == DataType.DT_FLOAT16` would hold for a float32 Cast. The comparison
    raises (either side, inside `in`), ONNX's constants and conversion work."""
    from ge.graph import OnnxElementType, data_type_from_onnx, data_type_to_onnx

    graph = Graph("g")
    cast = graph.add_node("Cast", num_inputs=1, attrs={"to": onnx.TensorProto.FLOAT})
    to = cast.get_attr("to")
    assert type(to) is OnnxElementType and to == onnx.TensorProto.FLOAT and int(to) == 1
    assert data_type_from_onnx(to) == DataType.DT_FLOAT and str(to) == "1"
    assert data_type_to_onnx(DataType.DT_FLOAT16) == onnx.TensorProto.FLOAT16
    for compare in (lambda: to == DataType.DT_FLOAT16, lambda: DataType.DT_FLOAT16.__ne__(to),
                    lambda: to in (DataType.DT_FLOAT16, DataType.DT_BF16)):
        with pytest.raises(GraphTypeError) as caught:
            compare()
        assert caught.value.code == "GE1002"
        assert str(caught.value) == (
            "[GE1002] an attribute holding the ONNX element type 1 (FLOAT) was compared "
            "with DataType.DT_FLOAT16 (GE's numbering, 1); compare it with "
            "onnx.TensorProto.FLOAT16 or convert it: ge.graph.data_type_from_onnx(value) "
            "== DataType.DT_FLOAT16")
    # Other int attributes, and attributes of custom domains, stay plain ints.
    other = graph.add_node("Cast", domain="my.domain", num_inputs=1, attrs={"to": 1})
    assert type(other.get_attr("to")) is int
    assert type(graph.add_node("Softmax", attrs={"axis": 1}).get_attr("axis")) is int


def test_tensor_attr_reads_back_as_tensor() -> None:
    """A Tensor attribute (and a Const's value) reads back as an equal Tensor."""
    graph = diamond()
    node = graph.find_node_by_name("a")
    tensor = Tensor(np.arange(4, dtype=np.int32).reshape(2, 2))
    node.set_attr("t", tensor)
    got = node.get_attr("t")
    assert isinstance(got, Tensor) and got.equals(tensor)
    node.set_attr("ts", [tensor, Tensor([1.0])])
    assert [t.data for t in node.get_attr("ts")] == [[[0, 1], [2, 3]], [1.0]]
    value = graph.find_node_by_name("k").get_attr("value")
    assert isinstance(value, Tensor) and value.data == [1.0, 2.0, 3.0]


def test_a_numpy_vector_sets_a_list_attribute() -> None:
    """`set_attr("is", np.array([...]))` on a list attribute sets the list it holds, as ES
    reads it (it was GE1002: the array would have made the attribute a TENSOR); a new
    attribute given an array is a TENSOR, and a matrix never becomes a list."""
    node = diamond().find_node_by_name("a")
    node.set_attr("is", [1, 2])
    node.set_attr("fs", [0.5])
    node.set_attr("is", np.array([3, 4], dtype=np.int32))
    node.set_attr("fs", np.arange(2, dtype=np.float32))
    assert node.get_attr("is") == [3, 4] and type(node.get_attr("is")[0]) is int
    assert node.get_attr("fs") == [0.0, 1.0]
    assert node.get_attr_kind("is") == onnx.AttributeProto.INTS
    node.set_attr("t", np.array([1, 2]))
    assert node.get_attr_kind("t") == onnx.AttributeProto.TENSOR
    with pytest.raises(GraphTypeError) as info:
        node.set_attr("is", np.array([[1, 2]]))
    assert info.value.code == "GE1002" and str(info.value).endswith(
        "attribute 'is' is INTS; array([[1, 2]]) would make it TENSOR (remove_attr first "
        "to give it another kind)")
    assert node.get_attr("is") == [3, 4]


def test_attributes_export_with_their_onnx_kinds() -> None:
    """Attributes set through the API are written to ONNX with the kinds they read back as."""
    graph = diamond()
    node = graph.find_node_by_name("a")
    values = {"s": "x", "f": 0.5, "b": True, "i": 3, "dt": DataType.DT_INT64,
              "t": Tensor([1, 2], data_type=DataType.DT_INT32), "fs": [0.5, 1.0],
              "is": [1, 2], "ss": ["p", "q"], "bs": [True, False]}
    for key, value in values.items():
        node.set_attr(key, value)
    proto = next(n for n in graph.to_onnx().graph.node if n.name == "a")
    exported = {a.name: onnx.helper.get_attribute_value(a) for a in proto.attribute}
    assert exported["s"] == b"x" and exported["f"] == 0.5 and exported["b"] == 1
    assert exported["i"] == 3 and exported["dt"] == onnx.TensorProto.INT64
    assert onnx.numpy_helper.to_array(exported["t"]).tolist() == [1, 2]
    assert exported["t"].data_type == onnx.TensorProto.INT32
    assert exported["fs"] == [0.5, 1.0] and exported["is"] == [1, 2]
    assert exported["ss"] == [b"p", b"q"] and exported["bs"] == [1, 0]
    kinds = {a.name: a.type for a in proto.attribute}
    assert all(kinds[key] == node.get_attr_kind(key) for key in values)


def test_const_value_of_a_loaded_model_is_a_tensor() -> None:
    """Initializers and Constant operators of a loaded model are Consts whose value is a Tensor."""
    graph = ge.graph.load(shared_model("control_flow"))
    weight = graph.find_node_by_name("lin.weight")
    assert weight.type == "Const" and isinstance(weight.get_attr("value"), Tensor)
    assert weight.get_attr("value").shape == [8, 8]
    constant = graph.find_node_by_name("/Constant")
    assert constant.type == "Const" and constant.get_attr("value").data is True


@pytest.mark.parametrize(("value", "data_type", "shape"), [
    ([0, 0, 12], DataType.DT_INT64, [3]),
    (3, DataType.DT_INT64, []),
    (2.5, DataType.DT_FLOAT, []),
    ([1, 2.5], DataType.DT_FLOAT, [2]),  # ints among floats are floats
    (True, DataType.DT_BOOL, []),
    ([[True], [False]], DataType.DT_BOOL, [2, 1]),
    ("abc", DataType.DT_STRING, []),  # as np.array("abc")
    (["a", "bc"], DataType.DT_STRING, [2]),
])
def test_add_const_types_python_values_as_ge_es_does(value: object, data_type: DataType,
                                                      shape: list[int]) -> None:
    """Python ints are int64 and floats float32 (ge.es's scalars, numpy's ints), so an int
    list is a valid Reshape target (trial YY: it was float32 and passed validate())."""
    graph = Graph("g")
    const = graph.add_const(value, name="c")
    tensor = const.get_attr("value")
    assert (tensor.data_type, tensor.shape) == (data_type, shape)
    assert const.get_output_desc(0).data_type is data_type
    assert tensor.data == value


def test_an_int_list_from_add_const_is_a_reshape_target_onnx_accepts(tmp_path: Path) -> None:
    graph = Graph("g")
    x = add_data(graph, 0, "x", TensorDesc([2, 3, 4], data_type=DataType.DT_FLOAT))
    reshape = add_op(graph, "Reshape", x, graph.add_const([0, 12], name="target"), name="r")
    reshape.update_output_desc(0, TensorDesc([2, 12], data_type=DataType.DT_FLOAT))
    add_output(graph, reshape)
    graph.save(tmp_path / "m.onnx", full_check=True)
    saved = onnx.load(tmp_path / "m.onnx")
    assert saved.graph.initializer[0].data_type == onnx.TensorProto.INT64


@pytest.mark.parametrize(("value", "error", "message"), [
    (object(), GraphTypeError, "holds bool, int, float or str (or nested lists of one of "
                               "them), got object"),
    (b"abc", GraphTypeError, "got bytes"),
    ([1, True], GraphTypeError, "mixes bool and int"),
    (["a", 1.0], GraphTypeError, "mixes float and str"),
    ([[1, 2], [3]], GraphError, "cannot be made an array of int64"),
    (2**70, GraphError, "does not fit int64"),
])
def test_add_const_refuses_a_python_value_it_cannot_type(value: object, error: type,
                                                        message: str) -> None:
    graph = chain()
    nodes, mutations = len(graph), graph.mutation_count
    with pytest.raises(error, match=re.escape(message)) as info:
        graph.add_const(value)
    assert info.value.code == ("GE1002" if error is GraphTypeError else "GE1001")
    assert (len(graph), graph.mutation_count) == (nodes, mutations)


@pytest.mark.parametrize(("query", "message"), [
    (lambda g: g.nodes_of_type(5), "op_type must be a str, got int"),
    (lambda g: g.nodes_of_type(b"Relu"), "op_type must be a str, got bytes"),
    (lambda g: g.nodes_of_type(["Relu"]), "op_type must be a str, got list"),
    (lambda g: g.nodes_of_type("Relu", 5), "domain must be a str or None, got int"),
    (lambda g: g.nodes_of_type("Abs", b""), "domain must be a str or None, got bytes"),
    (lambda g: g.count_of_type(5), "op_type must be a str, got int"),
    (lambda g: g.count_of_type("Relu", 0), "domain must be a str or None, got int"),
    (lambda g: g.count_of_type("Abs", ["x"]), "domain must be a str or None, got list"),
    (lambda g: g.has_node(123), "name must be a str, got int"),
    (lambda g: g.find_value(b"x:0"), "value_name must be a str, got bytes"),
    (lambda g: g.get_opset_version(17), "domain must be a str, got int"),
])
def test_graph_queries_refuse_arguments_of_the_wrong_type(query: Any, message: str) -> None:
    """As find_node_by_name(123) does: GE1002, not an empty answer (trial YY:
    nodes_of_type(5) was [] and count_of_type(5) was 0)."""
    graph = chain()
    mutations = graph.mutation_count
    with pytest.raises(GraphTypeError, match=re.escape(message)) as info:
        query(graph)
    assert info.value.code == "GE1002"
    assert graph.mutation_count == mutations


def test_graph_queries_take_str_subclasses_and_answer_misses() -> None:
    class Name(str):
        pass

    graph = chain()
    assert _names(graph.nodes_of_type(Name("Relu"), Name("ai.onnx"))) == ["n0", "n1", "n2"]
    assert graph.nodes_of_type(Name("Abs")) == [] and graph.count_of_type(Name("Abs")) == 0
    assert graph.count_of_type("Relu", Name("")) == 3 and graph.count_of_type("Relu", "x") == 0
    assert graph.has_node(Name("n0")) and not graph.has_node("missing")
    assert graph.find_value("missing") is None


def test_attribute_values_are_owned_by_the_node() -> None:
    """Changing a value given to set_attr, or one read back, does not change the node."""
    node = chain().find_node_by_name("n0")
    ints = [1, 2]
    node.set_attr("ints", ints)
    ints.append(3)
    node.get_attr("ints").append(4)
    assert node.get_attr("ints") == [1, 2]
    tensor = Tensor([1.0, 2.0])
    node.set_attr("t", tensor)
    tensor.set_format(Format.FORMAT_NCHW)
    node.get_attr("t").set_data_type(DataType.DT_INT8).to_device()
    stored = node.get_attr("t")
    assert stored.format is Format.FORMAT_ND and stored.data_type is DataType.DT_FLOAT
    assert stored.placement == 0


def test_attr_errors() -> None:
    """Missing attribute → RuntimeError naming it; bad key or value types → TypeError."""
    node = chain().find_node_by_name("n0")
    with pytest.raises(RuntimeError, match="'missing'"):
        node.get_attr("missing")
    assert not node.has_attr("missing")
    with pytest.raises(TypeError):
        node.get_attr(1)
    with pytest.raises(TypeError):
        node.set_attr(1, 1)
    with pytest.raises(TypeError):
        node.set_attr("", 1)
    for bad in (object(), {"a": 1}, None, [1, "a"], [object()], 1.5j):
        with pytest.raises(TypeError):
            node.set_attr("bad", bad)
    assert not node.has_attr("bad")
    with pytest.raises(RuntimeError):
        node.remove_attr("missing")


def test_attr_overwrite_keeps_kind_and_remove() -> None:
    """Setting an int on a FLOAT attribute keeps it FLOAT; remove_attr deletes it."""
    node = chain().find_node_by_name("n0")
    node.set_attr("alpha", 0.5)
    node.set_attr("alpha", 2)
    assert node.get_attr("alpha") == 2.0 and isinstance(node.get_attr("alpha"), float)
    # another kind would write a model runtimes reject (Gemm's transB as 1.7, a body as 5)
    with pytest.raises(GraphTypeError) as caught:
        node.set_attr("alpha", "now a string")
    assert str(caught.value) == ("[GE1002] attribute 'alpha' is FLOAT; 'now a string' would "
                                 "make it STRING (remove_attr first to give it another kind)")
    assert node.get_attr("alpha") == 2.0 and node.get_attr_names() == ["alpha"]
    node.remove_attr("alpha")
    assert not node.has_attr("alpha") and node.get_attr_names() == []
    node.set_attr("alpha", "now a string")  # removed first: a new attribute of its own kind
    assert node.get_attr("alpha") == "now a string"


def test_graph_attrs() -> None:
    """Graph.set_attr/get_attr keep any value; a missing key is a RuntimeError."""
    graph = chain()
    graph.set_attr("tag", {"any": "value"})
    assert graph.get_attr("tag") == {"any": "value"}
    with pytest.raises(RuntimeError, match="nothing"):
        graph.get_attr("nothing")
    with pytest.raises(TypeError):
        graph.set_attr(1, "x")


def test_anchor_attrs() -> None:
    """set/get_input_attr and set/get_output_attr per anchor; missing → RuntimeError."""
    graph = diamond()
    c = graph.find_node_by_name("c")
    c.set_input_attr("layout", 1, "NCHW")
    c.set_output_attr("reuse", 0, True)
    assert c.get_input_attr("layout", 1) == "NCHW" and c.get_output_attr("reuse", 0) is True
    with pytest.raises(RuntimeError):
        c.get_input_attr("layout", 0)
    with pytest.raises(RuntimeError):
        c.get_output_attr("missing", 0)
    with pytest.raises(RuntimeError):
        c.set_input_attr("layout", 2, "x")  # Add has inputs 0 and 1
    with pytest.raises(RuntimeError):
        c.get_output_attr("reuse", 1)
    with pytest.raises(TypeError):
        c.set_input_attr(0, 0, "x")
    with pytest.raises(TypeError):
        c.get_output_attr("reuse", "0")


# -- descs -------------------------------------------------------------------------------------


def test_descs_are_copies_and_update_writes_them() -> None:
    """get_*_desc return copies; update_*_desc stores a copy of what it is given."""
    graph = chain()
    x, n0 = graph.find_node_by_name("x"), graph.find_node_by_name("n0")
    desc = x.get_output_desc(0)
    assert desc == F32
    desc.set_shape([7])
    assert x.get_output_desc(0).shape == [2, 3]
    # An input without its own desc shows the producer's output desc.
    assert n0.get_input_desc(0) == F32 and not n0.has_input_desc(0)
    mine = TensorDesc([2, 3], Format.FORMAT_NCHW, DataType.DT_FLOAT16)
    n0.update_input_desc(0, mine)
    assert n0.has_input_desc(0)
    mine.set_shape([1])
    assert n0.get_input_desc(0).format is Format.FORMAT_NCHW
    assert n0.get_input_desc(0).shape == [2, 3]
    n0.update_output_desc(0, TensorDesc([6], data_type=DataType.DT_INT64))
    assert n0.get_output_desc(0).data_type is DataType.DT_INT64 and n0.has_output_desc(0)
    assert x.get_output_desc(0) == F32  # the producer's desc did not change


def test_desc_defaults_and_errors() -> None:
    """Unknown descs are unknown-rank/undefined; a Const's desc is its value's; bad args fail."""
    graph = diamond()
    a, k = graph.find_node_by_name("a"), graph.find_node_by_name("k")
    unknown = a.get_output_desc(0)
    assert unknown.shape.is_unknown_rank() and unknown.data_type is DataType.DT_UNDEFINED
    assert not a.has_output_desc(0)
    assert k.get_output_desc(0).shape == [3]
    assert k.get_output_desc(0).data_type is DataType.DT_FLOAT
    with pytest.raises(TypeError):
        a.update_output_desc(0, [2, 3])
    with pytest.raises(TypeError):
        a.update_input_desc("0", TensorDesc())
    with pytest.raises(RuntimeError):
        a.update_output_desc(1, TensorDesc())
    with pytest.raises(RuntimeError):
        a.get_input_desc(1)
    with pytest.raises(RuntimeError):
        a.has_input_desc(1)


# -- subgraphs ---------------------------------------------------------------------------------


def test_subgraph_attached_through_set_attr() -> None:
    """node.set_attr(key, Graph) makes the graph a subgraph owned by the node."""
    graph = if_graph()
    if_node, h = graph.find_node_by_name("if"), graph.find_node_by_name("h")
    then = graph.get_subgraph("then")
    assert then.parent_node is if_node and then.parent_graph is graph
    assert then.root_graph() is graph
    assert if_node.get_subgraphs() == [then, graph.get_subgraph("else")]
    assert if_node.get_attr("then_branch") is then
    assert if_node.get_attr_kind("then_branch") == onnx.AttributeProto.GRAPH
    # The subgraph reads h of the enclosing graph: an edge seen from both ends.
    then_relu = then.find_node_by_name("then_relu")
    assert then_relu.get_in_data_nodes_and_port_indexes(0) == (h, 0)
    assert _consumers(h) == [("then_relu", 0), ("else_neg", 0)]
    assert then.find_value(h.get_output_name(0)) == (h, 0)
    graph.validate()
    model = graph.to_onnx()
    branch = next(a for a in model.graph.node[-1].attribute if a.name == "then_branch")
    assert [n.input[0] for n in branch.g.node] == [h.get_output_name(0)]


def test_if_bodies_are_listed_then_first_and_saved_in_the_files_order(tmp_path: Path) -> None:
    """GE declares If as `.GRAPH(then_branch).GRAPH(else_branch)`: index 0 is then, even when
    the file stores else first (onnx.helper sorts attributes by name); saving keeps the file."""
    then_body = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["x"], ["t"])], "then_body", [],
        [onnx.helper.make_tensor_value_info("t", onnx.TensorProto.FLOAT, [2])])
    else_body = onnx.helper.make_graph(
        [onnx.helper.make_node("Neg", ["x"], ["e"])], "else_body", [],
        [onnx.helper.make_tensor_value_info("e", onnx.TensorProto.FLOAT, [2])])
    if_node = onnx.helper.make_node("If", ["c"], ["y"], then_branch=then_body,
                                    else_branch=else_body)
    assert [a.name for a in if_node.attribute] == ["else_branch", "then_branch"]
    model = onnx.helper.make_model(onnx.helper.make_graph(
        [if_node], "g",
        [onnx.helper.make_tensor_value_info("c", onnx.TensorProto.BOOL, []),
         onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])]),
        opset_imports=[onnx.helper.make_opsetid("", 17)])
    source = tmp_path / "if.onnx"
    onnx.save(model, source)
    graph = ge.graph.load(str(source))
    (node,) = graph.nodes_of_type("If")
    assert [g.name for g in node.get_subgraphs()] == ["then_body", "else_body"]
    assert [g.name for g in graph.get_all_subgraphs()] == ["then_body", "else_body"]
    node.get_subgraphs()[0].get_all_nodes()  # reading does not reorder what is saved
    target = tmp_path / "out.onnx"
    graph.save(str(target))
    saved = onnx.load(str(target))
    assert [a.name for a in saved.graph.node[0].attribute] == ["else_branch", "then_branch"]


def test_subgraph_list_attr_and_nesting() -> None:
    """A list of graphs is a GRAPHS attribute; subgraphs nest and get_all_subgraphs finds all."""
    graph = chain()
    n1 = graph.find_node_by_name("n1")
    owner = graph.add_node("Custom", domain="test", name="owner")
    first, second = Graph("first"), Graph("second")
    owner.set_attr("bodies", [first, second])
    inner_owner = second.add_node("Custom", domain="test", name="inner_owner")
    deep = attach_branch(inner_owner, "body", "Relu", n1, "deep")
    assert owner.get_attr_kind("bodies") == onnx.AttributeProto.GRAPHS
    assert [g.name for g in graph.get_all_subgraphs()] == ["first", "second", "deep"]
    assert deep.root_graph() is graph and deep.parent_graph is second
    assert graph.get_subgraph("deep") is deep and graph.get_subgraph("absent") is None
    assert _consumers(n1) == [("n2", 0), ("deep_relu", 0)]


def test_attaching_an_owned_or_enclosing_graph_is_refused() -> None:
    """A graph already owned by a node, or an enclosing graph, can't become a subgraph."""
    graph = if_graph()
    h = graph.find_node_by_name("h")
    with pytest.raises(RuntimeError, match="already belongs"):
        h.set_attr("body", graph.get_subgraph("then"))
    then = graph.get_subgraph("then")
    with pytest.raises(RuntimeError, match="itself"):
        then.find_node_by_name("then_relu").set_attr("body", graph)
    assert not h.has_attr("body")


def test_orphan_subgraphs() -> None:
    """add_subgraph registers an unowned subgraph; remove_subgraph unregisters it."""
    graph = if_graph()
    orphan = Graph("orphan")
    graph.add_subgraph(orphan)
    assert graph.get_subgraph("orphan") is orphan and orphan.parent_node is None
    assert [g.name for g in graph.get_all_subgraphs()] == ["then", "else", "orphan"]
    with pytest.raises(RuntimeError):
        graph.add_subgraph(orphan)
    with pytest.raises(RuntimeError):
        graph.add_subgraph(graph)
    with pytest.raises(RuntimeError):
        graph.add_subgraph(graph.get_subgraph("then"))
    with pytest.raises(TypeError):
        graph.add_subgraph("orphan")
    with pytest.raises(RuntimeError, match="owned by a node"):
        graph.remove_subgraph("then")
    with pytest.raises(RuntimeError, match="absent"):
        graph.remove_subgraph("absent")
    graph.remove_subgraph("orphan")
    assert graph.get_subgraph("orphan") is None
    # An orphan set as a node's attribute stops being an orphan.
    graph.add_subgraph(orphan)
    graph.find_node_by_name("h").set_attr("body", orphan)
    assert orphan.parent_node is graph.find_node_by_name("h")
    assert [g.name for g in graph.get_all_subgraphs()] == ["orphan", "then", "else"]


def test_detaching_a_subgraph_drops_its_outer_reads() -> None:
    """remove_attr or overwriting a graph attribute detaches the subgraph and its outer edges."""
    graph = if_graph()
    h, if_node = graph.find_node_by_name("h"), graph.find_node_by_name("if")
    then, other = graph.get_subgraph("then"), graph.get_subgraph("else")
    if_node.remove_attr("then_branch")
    assert then.parent_node is None
    assert then.find_node_by_name("then_relu").get_input_producer(0) is None
    if_node.set_attr("else_branch", Graph("replacement"))
    assert other.parent_node is None
    assert other.find_node_by_name("else_neg").get_input_producer(0) is None
    assert _consumers(h) == []
    problems = graph.find_problems()  # no dangling edge; the If lacks its then_branch
    assert {p.kind for p in problems} <= {"arity", "attribute", "structure"}
    assert any(p.kind == "attribute" and "'then_branch'" in p.message for p in problems)


# -- op-type index -----------------------------------------------------------------------------


def test_nodes_of_type_index_follows_changes() -> None:
    """nodes_of_type (direct nodes, insertion order) stays right as nodes come and go."""
    graph = diamond()
    assert _names(graph.nodes_of_type("Relu")) == ["a", "b"]
    assert _names(graph.nodes_of_type("Add")) == ["c", "d"]
    assert graph.nodes_of_type("Conv") == []
    extra = graph.add_node("Relu", name="e", num_inputs=1)
    assert _names(graph.nodes_of_type("Relu")) == ["a", "b", "e"]
    graph.remove_node(graph.find_node_by_name("a"))
    graph.remove_node(extra)
    assert _names(graph.nodes_of_type("Relu")) == ["b"]
    graph.remove_node(graph.find_node_by_name("b"))
    assert graph.nodes_of_type("Relu") == [] and "Relu" not in graph.op_types()
    assert sorted(graph.op_types()) == ["Add", "Const", "Data", "NetOutput"]
    assert _names(graph.get_data_nodes()) == ["x"] and graph.get_net_output().name == "out"
    # Subgraph nodes are indexed in their own graph.
    cf = if_graph()
    assert _names(cf.nodes_of_type("Relu")) == ["h"]
    assert _names(cf.get_subgraph("then").nodes_of_type("Relu")) == ["then_relu"]



def test_nodes_of_type_is_kept_between_changes_and_follows_order_and_rollback() -> None:
    """Asked again without a change, the answer is a new list (callers may change theirs)
    with the same nodes; a node moved by an edge, a rolled-back removal and a loaded graph
    whose order is established later each give the order as it is then."""
    graph = Graph()
    out = graph.add_node("NetOutput", name="out", num_inputs=1, num_outputs=0)
    late = graph.add_node("Relu", name="late", num_inputs=1)
    early = graph.add_node("Relu", name="early", num_inputs=1)
    x = add_data(graph, 0, "x")
    first = graph.nodes_of_type("Relu")
    assert _names(first) == ["late", "early"]
    first.clear()
    assert _names(graph.nodes_of_type("Relu")) == ["late", "early"]
    graph.add_data_edge(x, 0, early, 0)
    graph.add_data_edge(early, 0, late, 0)  # late now reads early: it moves after it
    graph.add_data_edge(late, 0, out, 0)
    assert _names(graph.nodes_of_type("Relu")) == ["early", "late"]
    try:
        with graph.transaction():
            graph.remove_node(early)
            assert _names(graph.nodes_of_type("Relu")) == ["late"]
            raise RuntimeError("roll back")
    except RuntimeError:
        pass
    assert _names(graph.nodes_of_type("Relu")) == ["early", "late"]
    # a loaded graph lists nodes as the file does until its order is established
    proto = onnx.helper.make_model(onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["a"], ["b"], name="second"),
         onnx.helper.make_node("Relu", ["x"], ["a"], name="first")], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
        [onnx.helper.make_tensor_value_info("b", onnx.TensorProto.FLOAT, [1])]))
    loaded = model_to_graph(proto)
    assert _names(loaded.nodes_of_type("Relu")) == ["second", "first"]
    loaded.topological_order()
    assert _names(loaded.nodes_of_type("Relu")) == ["first", "second"]

# -- topological order -------------------------------------------------------------------------


def test_topological_order_producers_first_insertion_order_where_free() -> None:
    """Producers come first; an edge added out of order moves only the smaller side of
    the region between its ends (here the one node), the others keep insertion order."""
    graph = Graph()
    out = graph.add_node("NetOutput", name="out", num_inputs=1, num_outputs=0)
    late = graph.add_node("Relu", name="late", num_inputs=1)
    graph.add_node("Custom", domain="t", name="free1", num_inputs=0)
    x = add_data(graph, 0, "x")
    free2 = graph.add_node("Custom", domain="t", name="free2", num_inputs=0)
    graph.add_data_edge(late, 0, out, 0)
    graph.add_data_edge(x, 0, late, 0)
    order = _names(graph.topological_order())
    assert order == ["x", "late", "out", "free1", "free2"]
    assert free2 in graph.get_direct_nodes()
    # Without constraints the order is the insertion order.
    assert _names(chain().topological_order()) == ["x", "n0", "n1", "n2", "out"]


def test_topological_order_owner_after_values_its_subgraphs_read() -> None:
    """A node owning a subgraph comes after the outer values the subgraph reads."""
    graph = Graph()
    x = add_data(graph, 0)
    owner = graph.add_node("Custom", domain="t", name="owner")
    late = add_op(graph, "Relu", x, name="late")
    attach_branch(owner, "body", "Relu", late, "body")
    order = _names(graph.topological_order())
    assert order.index("late") < order.index("owner")


def test_topological_order_is_cached_until_the_graph_changes(monkeypatch) -> None:
    """A second call reuses the cached order; a structural change recomputes it."""
    graph = diamond()
    calls = []
    real = Graph._dependencies

    def counting(self, node):
        calls.append(node.name)
        return real(self, node)

    monkeypatch.setattr(Graph, "_dependencies", counting)
    first = graph.topological_order()
    calls.clear()
    second = graph.topological_order()
    assert second == first and second is not first and calls == []
    second.reverse()  # the result is the caller's list: the cache is not affected
    assert graph.topological_order() == first
    graph.find_node_by_name("a").set_attr("alpha", 1.0)  # not structural
    graph.topological_order()
    assert calls == []
    graph.add_control_edge(graph.find_node_by_name("k"), graph.find_node_by_name("a"))
    third = _names(graph.topological_order())
    assert third.index("k") < third.index("a") and third != _names(first)


def test_topological_cache_of_a_subgraph_built_apart() -> None:
    """A subgraph's order, cached before it was attached, is recomputed after changes."""
    sub = Graph("body")
    nodes = [sub.add_node("Custom", domain="t", name=f"s{i}") for i in range(40)]
    assert _names(sub.topological_order()) == [f"s{i}" for i in range(40)]
    version = sub.journal.structure_version
    graph = chain()
    assert graph.journal.structure_version < version - 3
    owner = graph.add_node("Custom", domain="t", name="owner")
    owner.set_attr("body", sub)
    # Bring the root's change counter to where the subgraph's cache was taken, then change it.
    while graph.journal.structure_version < version - 1:
        graph.add_node("Custom", domain="t")
    assert graph.journal.structure_version == version - 1
    sub.remove_node(nodes[0])
    assert _names(sub.topological_order()) == [f"s{i}" for i in range(1, 40)]


def test_cycle_makes_topological_order_fail() -> None:
    """A cycle (allowed by add_data_edge) makes topological_order raise naming its nodes."""
    graph = chain()
    x, n0, n2 = (graph.find_node_by_name(n) for n in ("x", "n0", "n2"))
    graph.remove_edge(x, 0, n0, 0)
    graph.add_data_edge(n2, 0, n0, 0)
    with pytest.raises(RuntimeError, match="cycle") as info:
        graph.topological_order()
    assert {"n0", "n1", "n2"} <= set(info.value.nodes)


# -- dumps -------------------------------------------------------------------------------------


def test_readable_dump_has_one_line_per_node() -> None:
    """str(graph): a header, then one line per node with outputs, descs, op, attrs, inputs."""
    graph = diamond()
    graph.find_node_by_name("c").set_attr("note", "sum")
    graph.find_node_by_name("c").update_output_desc(0, TensorDesc([2, 3], Format.FORMAT_NCHW))
    text = str(graph)
    assert text == graph.dump_to_stream() == graph.dump_to_stream(DumpFormat.kReadable)
    lines = text.rstrip("\n").splitlines()
    assert lines[0].startswith("graph diamond")
    body = lines[1:]
    assert len(body) == len(graph.get_direct_nodes())
    by_node = {line.rsplit("# ", 1)[1]: line for line in body}
    assert set(by_node) == {"x", "a", "b", "c", "k", "d", "out"}
    x_out, a_out = (graph.find_node_by_name(n).get_output_name(0) for n in "xa")
    b_out = graph.find_node_by_name("b").get_output_name(0)
    c_line = by_node["c"]
    assert "Add" in c_line and "note='sum'" in c_line and "NCHW" in c_line
    assert f"%{a_out}, %{b_out}" in c_line
    assert "[2,3]" in by_node["x"] and "index=0" in by_node["x"] and "Data" in by_node["x"]
    assert f"Relu(%{x_out})" in by_node["a"]
    assert "value=Tensor(" in by_node["k"] and "[3]" in by_node["k"]
    assert "NetOutput(" in by_node["out"]


def test_readable_dump_shows_subgraphs() -> None:
    """Subgraphs are dumped under their owner, with the outer values they read."""
    graph = if_graph()
    text = str(graph)
    h_out = graph.find_node_by_name("h").get_output_name(0)
    assert "then_branch:" in text and "graph then" in text and "graph else" in text
    assert f"Relu(%{h_out})" in text.split("graph then")[1]
    assert sum(line.rstrip().endswith(("# then_relu", "# else_neg")) for line in
               text.splitlines()) == 2


def test_readable_dump_of_a_broken_graph_does_not_raise() -> None:
    """str() of a graph with a cycle still lists every node (a dump is for debugging)."""
    graph = chain()
    x, n0, n2 = (graph.find_node_by_name(n) for n in ("x", "n0", "n2"))
    graph.remove_edge(x, 0, n0, 0)
    graph.add_data_edge(n2, 0, n0, 0)
    text = str(graph)
    assert all(f"# {name}" in text for name in ("x", "n0", "n1", "n2", "out"))


def test_onnx_and_text_dumps() -> None:
    """kOnnx gives ONNX's text form, kTxt the protobuf text of the model."""
    graph = chain()
    assert "Relu" in graph.dump_to_stream(DumpFormat.kOnnx)
    assert 'op_type: "Relu"' in graph.dump_to_stream(DumpFormat.kTxt)


def test_dump_to_file_writes_into_dump_graph_path(tmp_path, monkeypatch) -> None:
    """dump_to_file writes into DUMP_GRAPH_PATH: readable text, or an ONNX model."""
    folder = tmp_path / "dumps"
    monkeypatch.setenv("DUMP_GRAPH_PATH", str(folder))
    graph = diamond()
    path = graph.dump_to_file()
    assert path.startswith(str(folder)) and Path(path).read_text() == str(graph)
    with_suffix = graph.dump_to_file(suffix="after_pass")
    assert "after_pass" in with_suffix and with_suffix != path
    onnx_path = graph.dump_to_file(DumpFormat.kOnnx)
    assert onnx_path.endswith(".onnx")
    assert len(ge.graph.load(onnx_path).get_direct_nodes()) == len(graph.get_direct_nodes())
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        p.rsplit("/", 1)[1] for p in (path, with_suffix, onnx_path))


# -- scopes, counters, helpers -----------------------------------------------------------------


def test_mutation_count_grows_with_every_change() -> None:
    """mutation_count grows with each mutation, of the root or of a subgraph."""
    graph = if_graph()
    counts = [graph.mutation_count]
    graph.find_node_by_name("h").set_attr("alpha", 1.0)
    counts.append(graph.mutation_count)
    graph.get_subgraph("then").find_node_by_name("then_relu").set_input_attr("k", 0, 1)
    counts.append(graph.mutation_count)
    graph.add_node("Relu")
    counts.append(graph.mutation_count)
    assert counts == sorted(set(counts))
    assert graph.get_subgraph("then").mutation_count == graph.mutation_count
    graph.topological_order()
    str(graph)
    assert graph.mutation_count == counts[-1]  # reading changes nothing


def test_outer_value_edges_and_scope_rules() -> None:
    """A subgraph may read a value of an enclosing graph, never of a sibling or inner graph."""
    graph = if_graph()
    then, other = graph.get_subgraph("then"), graph.get_subgraph("else")
    x = graph.find_node_by_name("x")
    reader = then.add_node("Add", name="reader", num_inputs=2)
    then.add_data_edge(x, 0, reader, 0)  # outer: fine
    assert reader.get_in_data_nodes_and_port_indexes(0) == (x, 0)
    with pytest.raises(RuntimeError, match="not a node of graph"):  # a sibling's value
        then.add_data_edge(other.find_node_by_name("else_neg"), 0, reader, 1)
    free = graph.add_node("Relu", name="free", num_inputs=1)
    with pytest.raises(RuntimeError, match="not a node of graph"):  # an inner value
        graph.add_data_edge(reader, 0, free, 0)
    with pytest.raises(RuntimeError, match="not a node of graph"):
        graph.add_data_edge(x, 0, reader, 1)  # edges belong to the destination's graph
    then.remove_edge(x, 0, reader, 0)
    assert reader.get_input_producer(0) is None and ("reader", 0) not in _consumers(x)


def test_builders_graphs_validate_and_export() -> None:
    """The helper graphs are valid and export to ONNX with their structure."""
    for graph in (chain(), diamond(), if_graph()):
        graph.validate()
        model = graph.to_onnx()
        assert len(model.graph.input) == len(graph.get_data_nodes())
        assert len(model.graph.output) == 1
    model = diamond().to_onnx()
    assert [n.op_type for n in model.graph.node] == ["Relu", "Relu", "Add", "Add"]
    assert [t.name for t in model.graph.initializer] == ["k"]  # a named constant's value


def test_add_output_helper_wires_in_order() -> None:
    """NetOutput inputs are the graph outputs, in order."""
    graph = Graph()
    x = add_data(graph, 0)
    split = add_op(graph, "Split", x, num_outputs=2, name="split", axis=0)
    out = add_output(graph, (split, 1), (split, 0))
    assert [out.get_in_data_nodes_and_port_indexes(i) for i in range(2)] == [(split, 1),
                                                                            (split, 0)]
    assert [o.name for o in graph.to_onnx().graph.output] == [split.get_output_name(1),
                                                              split.get_output_name(0)]


def test_remove_attr_checks_the_name_type() -> None:
    graph = chain()
    node = graph.get_direct_nodes()[1]
    with pytest.raises(TypeError, match="attribute name must be a str"):
        node.remove_attr(1)  # type: ignore[arg-type]


def test_a_data_node_without_an_int_index_is_named_on_export() -> None:
    """Inputs are ordered by `index`; a bad one is a GraphError naming the node, not a raw
    TypeError from sorting."""
    graph = chain()
    data = graph.get_data_nodes()[0]
    data.remove_attr("index")
    data.set_attr("index", "first")
    with pytest.raises(GraphError, match=f"Data node '{data.name}'.*no int 'index'") as info:
        graph.to_onnx()
    assert info.value.nodes == (data.name,)


def test_a_subgraph_name_several_bodies_share_is_refused_and_a_path_names_one() -> None:
    """GE names bodies uniquely; exporters may not. get_subgraph of a shared name raises
    GraphError naming every body's path (rather than handing back the first, silently),
    and a body path picks one; nothing is changed."""
    graph = model_to_graph(two_ifs_with_bodies_named_alike())
    before = graph.mutation_count
    with pytest.raises(GraphError) as caught:
        graph.get_subgraph("sub_graph")
    message = str(caught.value)
    assert "graph 'main' has 4 subgraphs named 'sub_graph'" in message
    for path in ("if1.then_branch", "if1.else_branch", "if2.then_branch", "if2.else_branch"):
        assert repr(path) in message
    assert "get_subgraph('if1.then_branch')" in message
    if2 = graph.find_node_by_name("if2")
    assert graph.get_subgraph("if2.else_branch") is if2.get_subgraphs()[1]
    assert graph.get_subgraph("if2.else_branch").get_direct_nodes()[0].type != "Relu"
    assert graph.get_subgraph("if3.then_branch") is None
    with pytest.raises(GraphError, match="owned by a node"):
        graph.remove_subgraph("sub_graph")
    assert graph.mutation_count == before  # asking changes nothing
    # nested: a path from the root, or from the body asked
    inner_if = if2.get_subgraphs()[1].add_node("If", name="inner", num_inputs=1, num_outputs=0)
    inner = Graph("sub_graph")
    inner_if.set_attr("then_branch", inner)
    else_of_if2 = graph.get_subgraph("if2.else_branch")
    assert graph.get_subgraph("if2.else_branch/inner.then_branch") is inner
    assert else_of_if2.get_subgraph("inner.then_branch") is inner
    assert graph.get_subgraph("inner.then_branch") is None  # not a path from the root


def test_a_string_tensor_holds_utf8_text_only() -> None:
    """Trial D: a string tensor of bytes that are not UTF-8 made a model ge's loading refuses
    (GE1101, loading's own check) and runtimes fail on: a Tensor refuses them (GE1002), so
    add_const and set_attr do too, and the graph is left as it was."""
    graph = diamond()
    before = len(graph.get_all_nodes())
    for value in (np.array([b"ok", b"\xc3"]), np.array([b"\xff\xfe"], dtype=object)):
        with pytest.raises(GraphTypeError) as info:
            graph.add_const(value, name="s")
        assert info.value.code == "GE1002"
        assert info.value.message.startswith(
            "a string tensor holds a string that is not UTF-8 text (element ")
    with pytest.raises(GraphTypeError, match=r"\(element 0: b'\\xc3'\); ONNX strings"):
        graph.find_node_by_name("a").set_attr("t", np.array([b"\xc3"]))
    assert len(graph.get_all_nodes()) == before and not graph.find_node_by_name("a").has_attr("t")
    assert Tensor(np.array(["é", "é".encode()], dtype=object)).data == ["é", "é".encode()]


def test_a_new_attribute_the_schema_declares_is_read_as_its_kind() -> None:
    """Trial D: `set_attr("perm", np.array([2, 1, 0]))` on a Transpose without perm stored a
    TENSOR, which onnx's checker and onnxruntime refused at the save; a new attribute the
    operator's schema declares is read as ES reads it (a 1-D array as the list, an int as a
    float, bools as ints); a value of another kind keeps its own, which validate() names."""
    graph = Graph("g")
    graph.model.opset_imports = {"": 17}
    x = add_data(graph, 0, "x", TensorDesc([1, 2, 3], data_type=DataType.DT_FLOAT))
    tr = add_op(graph, "Transpose", x, name="tr")
    lr = add_op(graph, "LeakyRelu", tr, name="lr")
    add_output(graph, lr)
    tr.set_attr("perm", np.array([2, 1, 0]))
    lr.set_attr("alpha", 1)
    assert tr.get_attr_kind("perm") == onnx.AttributeProto.INTS and tr.get_attr("perm") == [
        2, 1, 0]
    assert lr.get_attr_kind("alpha") == onnx.AttributeProto.FLOAT and lr.get_attr("alpha") == 1.0
    graph.validate()
    written = {n.name: n.attribute[0] for n in graph.to_onnx().graph.node}
    assert written["tr"].ints == [2, 1, 0] and written["lr"].f == 1.0
    tr.remove_attr("perm")
    tr.set_attr("perm", np.array([True, False, True]))  # (as ES takes bools for INTS)
    assert tr.get_attr("perm") == [1, 0, 1]
    tr.remove_attr("perm")
    tr.set_attr("perm", "201")  # another kind: kept, and validate() says what it takes
    with pytest.raises(GraphValidationError, match=r"attribute 'perm' of Transpose "
                       r"node 'tr' is STRING; Transpose \(opset 17\) takes INTS"):
        graph.validate()
    tr.remove_attr("perm")
    tr.set_attr("t", np.array([1, 2]))  # (not declared: a TENSOR, as before)
    assert tr.get_attr_kind("t") == onnx.AttributeProto.TENSOR


def test_set_attr_refuses_ints_beyond_int64() -> None:
    """Trial D: set_attr took `np.array([2**64 - 1, 0, 1], np.uint64)` and a list of Python
    ints past int64, and to_onnx() failed later with onnx's bare ValueError: GE1002 at the
    call, naming the attribute, the attribute left as it was."""
    node = diamond().find_node_by_name("a")
    node.set_attr("is", [1, 2])
    for key, value in (("is", np.array([2**64 - 1, 0], np.uint64)), ("new", [2**63]),
                       ("i", np.uint64(2**64 - 1)), ("i", -2**63 - 1)):
        with pytest.raises(GraphTypeError) as info:
            node.set_attr(key, value)
        shown = int(value[0]) if isinstance(value, (list, np.ndarray)) else int(value)
        assert info.value.code == "GE1002" and info.value.message == (
            f"attribute {key!r} holds {shown}, beyond int64: ONNX attribute ints are int64")
    assert node.get_attr("is") == [1, 2] and not node.has_attr("new") and not node.has_attr("i")
    node.set_attr("i", 2**63 - 1)
    assert node.get_attr("i") == 2**63 - 1
