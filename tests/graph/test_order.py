"""The maintained topological order: insert_before/after, would_create_cycle, local repair."""

from __future__ import annotations

import onnx
import onnx.helper as oh
import pytest
from builders import add_data, add_op, add_output, attach_branch, chain

import ge.graph
from ge.errors import GraphError
from ge.graph import Graph, Node
from ge.graph.order import walk


class Boom(Exception):
    pass


def _names(nodes: list[Node]) -> list[str]:
    return [n.name for n in nodes]


def _valid(graph: Graph) -> bool:
    """Every dependency of every node comes before it in the maintained list."""
    position = {n: i for i, n in enumerate(walk(graph))}
    labels = [n._seq for n in walk(graph)]
    if labels != sorted(set(labels)):
        return False
    return all(position[d] < position[n] for n in position for d in graph._dependencies(n))


def _long_chain(length: int) -> tuple[Graph, list[Node]]:
    graph = Graph("long")
    x = add_data(graph, 0, "x")
    nodes = [x]
    for i in range(length):
        nodes.append(add_op(graph, "Relu", nodes[-1], name=f"r{i}"))
    add_output(graph, nodes[-1])
    return graph, nodes


def test_insert_before_and_after_move_nodes_and_keep_the_order_valid() -> None:
    graph = chain(ops=("Relu", "Neg", "Abs"))
    free = graph.add_node("Custom", domain="t", name="free")
    n0, n2 = graph.find_node_by_name("n0"), graph.find_node_by_name("n2")
    graph.insert_before(n0, free)
    assert _names(graph.get_direct_nodes()) == ["x", "free", "n0", "n1", "n2", "out"]
    graph.insert_after(n2, free)
    assert _names(graph.get_direct_nodes()) == ["x", "n0", "n1", "n2", "free", "out"]
    graph.insert_before(graph.find_node_by_name("x"), [free])
    assert _names(graph.topological_order())[0] == "free"
    assert _valid(graph)


def test_insert_refuses_a_place_before_a_producer_or_after_a_consumer() -> None:
    graph = chain(ops=("Relu", "Neg", "Abs"))
    before = _names(graph.get_direct_nodes())
    mutations = graph.mutation_count
    n0, n1, n2 = (graph.find_node_by_name(f"n{i}") for i in range(3))
    with pytest.raises(GraphError, match="'n2' cannot be placed before 'n1': it reads 'n1'"):
        graph.insert_before(n1, n2)
    with pytest.raises(GraphError, match="'n0' cannot be placed after 'n1': 'n1' reads it"):
        graph.insert_after(n1, n0)
    with pytest.raises(GraphError, match="next to itself"):
        graph.insert_after(n1, [n1])
    with pytest.raises(GraphError, match="given twice"):
        graph.insert_after(n2, [n0, n0])
    with pytest.raises(GraphError, match="is not a node of graph"):
        graph.insert_after(n2, Graph("other").add_node("Relu"))
    assert _names(graph.get_direct_nodes()) == before
    assert graph.mutation_count == mutations


def test_insert_moves_a_group_in_the_order_given() -> None:
    graph = chain(ops=("Relu",))
    a = graph.add_node("Custom", domain="t", name="a")
    b = add_op(graph, "Relu", a, name="b")
    graph.insert_before(graph.find_node_by_name("n0"), [a, b])
    assert _names(graph.get_direct_nodes()) == ["x", "a", "b", "n0", "out"]
    with pytest.raises(GraphError, match="'b' cannot be placed"):
        graph.insert_before(graph.find_node_by_name("x"), [b, a])


def test_would_create_cycle_answers_without_changing_the_graph() -> None:
    graph = chain(ops=("Relu", "Neg", "Abs"))
    x, n0, n2 = (graph.find_node_by_name(n) for n in ("x", "n0", "n2"))
    version = graph.journal.structure_version
    assert graph.would_create_cycle(n2, n0)  # n0 -> n1 -> n2 -> n0
    assert graph.would_create_cycle(n0, n0)
    assert not graph.would_create_cycle(n0, n2)
    side = graph.add_node("Relu", name="side", num_inputs=1)  # appended last
    assert not graph.would_create_cycle(side, n0)  # side reads nothing yet
    graph.add_data_edge(n2, 0, side, 0)
    assert graph.would_create_cycle(side, n0)
    assert not graph.would_create_cycle(x, side)
    assert graph.journal.structure_version == version + 2  # only add_node and the edge


def test_would_create_cycle_through_a_subgraph_owner() -> None:
    graph = Graph("g")
    x = add_data(graph, 0, "x")
    owner = graph.add_node("Custom", domain="t", name="owner", num_inputs=1)
    graph.add_data_edge(x, 0, owner, 0)
    body = attach_branch(owner, "body", "Relu", x, "body")
    inner = body.find_node_by_name("body_relu")
    after = add_op(graph, "Relu", owner, name="after")
    add_output(graph, after)
    # A body node reading `after` would make owner depend on its own consumer.
    assert graph.would_create_cycle(after, inner)
    assert not graph.would_create_cycle(x, inner)
    with pytest.raises(GraphError, match="not in the scope"):
        body.would_create_cycle(inner, after)


def test_an_out_of_order_edge_moves_only_the_touched_region() -> None:
    """The rewrite pattern of the matcher: a node appended last, then read by a node near
    the start. The repair visits a few nodes, not the chain."""
    graph, nodes = _long_chain(2000)
    graph.topological_order()
    early = nodes[10]
    new = graph.add_node("Neg", name="new", num_inputs=1)
    graph.add_data_edge(nodes[9], 0, new, 0)
    calls: list[Node] = []
    real = Graph._dependencies

    def counting(self: Graph, node: Node):  # type: ignore[no-untyped-def]
        calls.append(node)
        return real(self, node)

    Graph._dependencies = counting  # type: ignore[method-assign]
    try:
        graph.replace_all_uses(nodes[9], 0, new, 0)
    finally:
        Graph._dependencies = real  # type: ignore[method-assign]
    assert len(calls) < 10
    order = graph.topological_order()
    assert order.index(new) == order.index(early) - 1
    assert _valid(graph)


def test_many_inserts_at_one_place_renumber_locally_and_stay_ordered() -> None:
    graph, nodes = _long_chain(50)
    graph.topological_order()
    anchor = nodes[25]
    for i in range(200):  # halves the same gap each time: renumbering must kick in
        free = graph.add_node("Custom", domain="t", name=f"f{i}")
        graph.insert_before(anchor, free)
    order = _names(graph.topological_order())
    assert order[order.index("r24") - 200:order.index("r24")] == [f"f{i}" for i in range(200)]
    assert _valid(graph)


def test_rollback_restores_the_order_exactly() -> None:
    graph, nodes = _long_chain(300)
    graph.topological_order()
    before = [(n.name, n._seq) for n in walk(graph)]
    saved = graph.to_onnx().SerializeToString()
    with pytest.raises(Boom), graph.transaction():
        for i in range(0, 290, 7):
            new = graph.add_node("Neg", name=f"new{i}", num_inputs=1)
            graph.add_data_edge(nodes[i], 0, new, 0)
            graph.replace_all_uses(nodes[i], 0, new, 0)
        for _ in range(100):
            graph.insert_after(nodes[150], graph.add_node("Custom", domain="t"))
        graph.remove_node(nodes[200])
        assert _valid(graph)
        raise Boom
    assert [(n.name, n._seq) for n in walk(graph)] == before
    assert graph.to_onnx().SerializeToString() == saved


def test_replace_all_uses_refuses_a_longer_cycle_and_changes_nothing() -> None:
    graph = Graph("g")
    x = add_data(graph, 0, "x")
    a = add_op(graph, "Relu", x, name="a")
    b = add_op(graph, "Neg", a, name="b")
    c = add_op(graph, "Add", x, b, name="c")  # a -> b -> c: x's uses moved to c would loop
    add_output(graph, c)
    mutations = graph.mutation_count
    with pytest.raises(GraphError, match="would make a cycle: 'c' depends on its "
                                         "consumer-to-be 'a'"):
        graph.replace_all_uses(x, 0, c, 0)
    assert graph.mutation_count == mutations
    assert a.get_in_data_nodes_and_port_indexes(0) == (x, 0)


def test_a_cycle_made_by_edges_is_reported_by_topological_order() -> None:
    graph, nodes = _long_chain(5)
    graph.topological_order()
    loop = graph.add_node("Add", name="loop", num_inputs=2)
    graph.add_data_edge(nodes[4], 0, loop, 0)
    graph.remove_edge(nodes[1], 0, nodes[2], 0)
    graph.add_data_edge(loop, 0, nodes[2], 0)  # loop -> r1 -> r2 -> r3 -> loop; r4, out wait
    # Named: the cycle, not what waits downstream of it.
    with pytest.raises(GraphError, match=r"has a cycle through nodes: loop, r1, r2, r3$"):
        graph.topological_order()


def test_would_create_cycle_answers_on_a_graph_an_edit_left_with_a_cycle() -> None:
    """An edge closing a cycle is accepted (a pass may pass through one while rewiring);
    the list stays as it was, topological_order() reports the cycle, and the question
    would_create_cycle() still gets its answer, by a plain search, changing nothing."""
    graph, nodes = _long_chain(5)  # x -> r0 -> ... -> r4 -> out
    x, r0, r1, r2, r3, r4 = nodes
    side = add_op(graph, "Neg", x, name="side")  # reads x, read by nobody
    graph.topological_order()
    listed = _names(graph.get_direct_nodes())
    graph.remove_edge(r1, 0, r2, 0)
    graph.add_data_edge(r4, 0, r2, 0)  # r2 -> r3 -> r4 -> r2
    assert _names(graph.get_direct_nodes()) == listed  # not re-sorted, not refused
    version, mutations = graph.journal.structure_version, graph.mutation_count
    assert graph.would_create_cycle(r4, r3)  # r3 -> r4 already
    assert graph.would_create_cycle(r3, r0) is False  # r0 does not lead to r3 any more
    assert graph.would_create_cycle(side, r0) is False
    assert graph.would_create_cycle(r0, side) is False  # side reads x only
    assert graph.would_create_cycle(side, x)  # x -> side
    assert graph.would_create_cycle(r2, r2)
    assert (graph.journal.structure_version, graph.mutation_count) == (version, mutations)
    assert _names(graph.get_direct_nodes()) == listed
    with pytest.raises(GraphError, match=r"has a cycle through nodes: r2, r3, r4$"):
        graph.topological_order()
    graph.remove_edge(r4, 0, r2, 0)  # the cycle is gone: the order is established again
    graph.add_data_edge(r1, 0, r2, 0)
    assert _names(graph.topological_order()) == listed
    assert graph.would_create_cycle(r4, r2) and not graph.would_create_cycle(r2, r4)
    assert _valid(graph)


def test_a_model_listed_out_of_order_is_sorted_stably_on_first_use(tmp_path) -> None:
    nodes = [oh.make_node("Neg", ["b"], ["y"], name="last"),
             oh.make_node("Relu", ["x"], ["a"], name="first"),
             oh.make_node("Abs", ["a"], ["b"], name="middle"),
             oh.make_node("Sigmoid", ["x"], ["s"], name="free")]
    vi = [oh.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [2]) for n in ("x", "y", "s")]
    model = oh.make_model(oh.make_graph(nodes, "g", [vi[0]], [vi[1], vi[2]]),
                          opset_imports=[oh.make_opsetid("", 17)])
    path = tmp_path / "unsorted.onnx"
    onnx.save(model, path)
    graph = ge.graph.load(path)
    assert _names(graph.get_direct_nodes())[1:5] == ["last", "first", "middle", "free"]
    order = _names(graph.topological_order())
    assert order[1:5] == ["first", "middle", "last", "free"]
    assert _names(graph.get_direct_nodes()) == order
    assert _valid(graph)


def test_direct_nodes_may_be_changed_while_iterating() -> None:
    graph, _ = _long_chain(20)
    for node in graph.get_direct_nodes():
        if node.type == "Relu" and int(node.name[1:]) % 2:
            graph.replace_all_uses(node, 0, node.get_in_data_nodes_and_port_indexes(0)[0], 0)
            graph.remove_node(node)
    assert len(graph.nodes_of_type("Relu")) == 10
    assert _names(graph.nodes_of_type("Relu")) == [f"r{i}" for i in range(0, 20, 2)]
    assert _valid(graph)
    graph.validate()


def _saved(tmp_path, nodes, outputs=("y",)):
    vi = [oh.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [2]) for n in ("x", *outputs)]
    model = oh.make_model(oh.make_graph(nodes, "g", [vi[0]], vi[1:]),
                          opset_imports=[oh.make_opsetid("", 17)])
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    return path


def test_a_model_listed_in_order_is_known_in_order_from_loading(tmp_path) -> None:
    """Loading sees every edge go forward, so the first order query sorts nothing."""
    path = _saved(tmp_path, [oh.make_node("Relu", ["x"], ["a"], name="first"),
                             oh.make_node("Neg", ["a"], ["y"], name="second")])
    graph = ge.graph.load(path)
    assert graph._order_ok
    assert _names(graph.topological_order())[1:3] == ["first", "second"]


def test_a_cycle_in_a_file_is_reported_on_first_use(tmp_path) -> None:
    path = _saved(tmp_path, [oh.make_node("Add", ["x", "b"], ["a"], name="p"),
                             oh.make_node("Neg", ["a"], ["b"], name="q"),
                             oh.make_node("Relu", ["a"], ["y"], name="r")])
    graph = ge.graph.load(path)
    assert not graph._order_ok
    with pytest.raises(GraphError, match=r"has a cycle through nodes: p, q$"):  # not r
        graph.topological_order()


def test_a_body_reading_a_later_value_puts_its_owner_after_it(tmp_path) -> None:
    """An If listed before the node whose value its branch reads: in order edge by edge,
    but not as a whole (the owner depends on what its bodies read), so it is sorted."""
    branch = oh.make_graph([oh.make_node("Identity", ["late"], ["t"], name="inner")], "then",
                           [], [oh.make_tensor_value_info("t", onnx.TensorProto.FLOAT, [2])])
    nodes = [oh.make_node("Cast", ["x"], ["c"], name="cond", to=onnx.TensorProto.BOOL),
             oh.make_node("If", ["c"], ["y"], name="when", then_branch=branch,
                          else_branch=branch),
             oh.make_node("Relu", ["x"], ["late"], name="late")]
    graph = ge.graph.load(_saved(tmp_path, nodes))
    assert not graph._order_ok
    order = _names(graph.topological_order())
    assert order.index("late") < order.index("when")


def test_a_node_reading_its_own_output_is_a_cycle(tmp_path) -> None:
    path = _saved(tmp_path, [oh.make_node("Add", ["x", "a"], ["a"], name="self_loop"),
                             oh.make_node("Relu", ["a"], ["y"], name="r")])
    graph = ge.graph.load(path)
    with pytest.raises(GraphError, match=r"has a cycle through nodes: self_loop$"):
        graph.topological_order()
