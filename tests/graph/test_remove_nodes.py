"""`Graph.remove_nodes`: a set of nodes removed as one change, the same graph as removing
them one by one, undone exactly (every consumer order included), told to listeners once."""

from __future__ import annotations

import contextlib
import gc
import weakref

import onnx
import pytest
from builders import add_data, add_op, add_output, attach_branch, if_graph

import ge.graph
from ge.errors import GraphError, GraphTypeError
from ge.graph import Graph, Node


class Boom(Exception):
    pass


def _fan() -> Graph:
    """x feeds a, c and e (in that order); a -> b -> output 0, c -> output 1, e -> output 2."""
    graph = Graph("fan")
    graph.model.opset_imports = {"": 17}
    x = add_data(graph, 0, "x")
    a = add_op(graph, "Relu", x, name="a")
    b = add_op(graph, "Neg", a, name="b")
    c = add_op(graph, "Abs", x, name="c")
    e = add_op(graph, "Exp", x, name="e")
    add_output(graph, b, c, e)
    return graph


def _node(graph: Graph, name: str) -> Node:
    return graph.find_node_by_name(name)


def _edges(graph: Graph) -> list[tuple[str, list, list]]:
    """Every node's producers and consumers, in their orders."""
    return [(n.name, [None if p is None else (p[0].name, p[1])
                      for p in (n.get_input_producer(i) for i in range(n.get_inputs_size()))],
             [[(c.name, j) for c, j in n.get_out_data_nodes_and_port_indexes(k)]
              for k in range(n.get_outputs_size())])
            for n in graph.get_direct_nodes()]


def test_removing_a_set_is_removing_them_one_by_one() -> None:
    together, apart = _fan(), _fan()
    a, b = _node(together, "a"), _node(together, "b")
    together.remove_nodes([a, b, a])  # a repeat is ignored
    for name in ("b", "a"):
        apart.remove_node(_node(apart, name))
    assert _edges(together) == _edges(apart)
    assert a.owner_graph is None and b.owner_graph is None
    # The removed nodes keep no edges, the edge between them included.
    assert a.get_input_producer(0) is None and b.get_input_producer(0) is None
    assert a.get_out_data_nodes() == [] and b.get_out_data_nodes() == []
    x = _node(together, "x")
    assert [c.name for c, _ in x.get_out_data_nodes_and_port_indexes(0)] == ["c", "e"]
    assert _node(together, "out").get_input_producer(0) is None  # the cut input
    assert not together.nodes_of_type("Relu")
    assert "a" not in [n.name for n in together.get_direct_nodes()]


def test_rollback_restores_the_graph_and_every_order() -> None:
    graph = _fan()
    before = graph.to_onnx().SerializeToString()
    edges, names = _edges(graph), [n.name for n in graph.get_direct_nodes()]
    count = graph.mutation_count
    events: list[tuple[str, str, int]] = []
    unsubscribe = graph.subscribe(lambda kind, node, index: events.append(
        (kind.value, node.name, index)))
    with pytest.raises(Boom), graph.transaction():
        graph.remove_nodes([_node(graph, "a"), _node(graph, "b")])  # x's first consumer goes
        assert events == [("input_changed", "out", 0), ("node_removed", "a", -1),
                          ("node_removed", "b", -1)]  # not the removed nodes' own inputs
        raise Boom
    unsubscribe()
    assert ("node_added", "a", -1) in events and ("node_added", "b", -1) in events
    assert ("input_changed", "out", 0) in events[3:]  # the listeners saw it come back
    assert graph.to_onnx().SerializeToString() == before
    assert _edges(graph) == edges and [n.name for n in graph.get_direct_nodes()] == names
    assert graph.mutation_count == count


def test_a_loaded_model_saves_byte_identical_after_a_rolled_back_removal(tmp_path) -> None:
    source = tmp_path / "fan.onnx"
    onnx.save(_fan().to_onnx(), source)
    graph = ge.graph.load(source)
    with pytest.raises(Boom), graph.transaction():
        graph.remove_nodes([_node(graph, "b"), _node(graph, "c")])
        raise Boom
    # Still the NodeProtos they were read from (saved as read, not rebuilt).
    assert _node(graph, "b")._clean and _node(graph, "c")._clean
    graph.save(tmp_path / "again.onnx")
    assert (tmp_path / "again.onnx").read_bytes() == source.read_bytes()


def test_bad_arguments_change_nothing() -> None:
    graph, other = _fan(), _fan()
    before = graph.to_onnx().SerializeToString()
    count = graph.mutation_count
    with pytest.raises(GraphError, match=r"node 'a' is not a node of graph 'fan'") as caught:
        graph.remove_nodes([_node(graph, "b"), _node(other, "a")])
    assert caught.value.code == "GE1001"
    with pytest.raises(GraphTypeError, match=r"node must be a ge\.graph\.Node, got str") as bad:
        graph.remove_nodes([_node(graph, "b"), "a"])  # type: ignore[list-item]
    assert bad.value.code == "GE1002"
    assert graph.mutation_count == count
    assert graph.to_onnx().SerializeToString() == before
    graph.remove_nodes([])  # nothing to do
    assert graph.mutation_count == count


def test_a_body_reading_a_removed_value_is_cut_and_restored() -> None:
    """An If whose branches read `a` from the outer graph: removing `a` cuts those reads
    (restored by the rollback); removing the If drops its bodies' outer reads first."""
    graph = _fan()
    a = _node(graph, "a")
    cond = add_op(graph, "Cast", _node(graph, "x"), name="cond", to=onnx.TensorProto.BOOL)
    when = add_op(graph, "If", cond, name="when")
    then = attach_branch(when, "then_branch", "Relu", a, "then")
    attach_branch(when, "else_branch", "Neg", a, "else")
    then_relu = then.find_node_by_name("then_relu")
    before = _edges(graph)
    with pytest.raises(Boom), graph.transaction():
        graph.remove_nodes([a, _node(graph, "b")])
        assert then_relu.get_input_producer(0) is None
        raise Boom
    assert then_relu.get_input_producer(0) == (a, 0) and _edges(graph) == before
    graph.remove_nodes([when, cond])
    assert [c.name for c, _ in a.get_out_data_nodes_and_port_indexes(0)] == ["b"]


def test_rollback_keeps_a_consumer_removed_while_it_was_last() -> None:
    """x read by a, b, c, d: removing d then b in one `remove_nodes` takes d out while it
    is last (no order restorer recorded), then b, whose restorer was made from a table
    already without d, and on rollback dropped d's edge again (the producer side of x -> d
    was missing; found by the random-rewrite property test)."""
    graph = Graph("g")
    x = add_data(graph, 0, "x")
    readers = [add_op(graph, "Neg", x, name=name) for name in ("a", "b", "c", "d")]
    add_output(graph, *readers)
    before = graph.to_onnx().SerializeToString()
    edges = _edges(graph)
    with pytest.raises(Boom), graph.transaction():
        graph.remove_nodes([readers[3], readers[1]])
        raise Boom
    graph.validate()
    assert [(c.name, i) for c, i in x.get_out_data_nodes_and_port_indexes(0)] == [
        ("a", 0), ("b", 0), ("c", 0), ("d", 0)]
    assert _edges(graph) == edges
    assert graph.to_onnx().SerializeToString() == before


@pytest.mark.parametrize("in_transaction", [False, True])
def test_removed_nodes_are_freed_by_reference_counting(collector_off: None,
                                                       in_transaction: bool) -> None:
    """A removed region keeps no edge, no link and no graph: nothing of it is left for the
    cyclic collector once nobody holds its nodes (a committed transaction lets go of them)."""
    graph = _fan()
    removed = [_node(graph, "a"), _node(graph, "b")]  # the edge a -> b goes with them
    refs = [weakref.ref(node) for node in removed]
    with graph.transaction() if in_transaction else contextlib.nullcontext():
        graph.remove_nodes(removed)
    del removed
    assert [ref() for ref in refs] == [None, None]  # no collection ran
    assert _node(graph, "out").get_input_producer(0) is None  # (what read b is cut)


def test_the_bodies_of_a_removed_node_are_not_held_by_its_graph() -> None:
    """A removed If (and a body discarded with `remove_attr`) is a hierarchy of its own:
    the graph it left keeps no reference to it, so dropping it frees it (its bodies' own
    cycles leave that to a collection) instead of it living as long as the graph."""
    graph = if_graph("main")
    if_node = _node(graph, "if")
    bodies = if_node.get_subgraphs()
    refs = [weakref.ref(o) for o in (if_node, *bodies, *bodies[0].get_direct_nodes())]
    graph.remove_node(if_node)
    del if_node, bodies
    gc.collect()
    assert [ref() for ref in refs] == [None] * len(refs)
    other = if_graph("other")
    else_body = weakref.ref(_node(other, "if").get_subgraphs()[1])
    _node(other, "if").remove_attr("else_branch")
    gc.collect()
    assert else_body() is None
    assert [n.name for n in other.get_all_nodes()] == [
        "x", "cond", "h", "if", "then_relu", "then_out", "out"]


def test_a_rolled_back_removal_puts_the_bodies_back_in_the_hierarchy() -> None:
    """Undone, the If's bodies are the graph's again: saved as before and closed with it."""
    graph = if_graph("main")
    if_node = _node(graph, "if")
    then_body, else_body = if_node.get_subgraphs()
    before = graph.to_onnx().SerializeToString()
    with pytest.raises(Boom), graph.transaction():
        graph.remove_nodes([if_node, _node(graph, "h")])
        raise Boom
    assert graph.to_onnx().SerializeToString() == before
    graph.close()
    assert then_body.closed and else_body.closed
