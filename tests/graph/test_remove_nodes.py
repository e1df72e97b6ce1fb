"""`Graph.remove_nodes`: a set of nodes removed as one change, the same graph as removing
them one by one, undone exactly (every consumer order included), told to listeners once."""

from __future__ import annotations

import onnx
import pytest
from builders import add_data, add_op, add_output, attach_branch

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
