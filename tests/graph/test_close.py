"""`Graph.close()`: a closed graph is freed by reference counting alone (no cyclic
collection), refuses every use but its name with `GraphClosedError`, and leaves the nodes
other objects still hold with their name, type and domain."""

from __future__ import annotations

import gc
import pickle
import re
import weakref
from collections.abc import Callable
from pathlib import Path

import pytest
from builders import add_data, add_op, add_output, chain, if_graph

import ge.graph
from ge.errors import GeError, GraphClosedError, GraphError
from ge.graph import Graph, Node, Tensor, closing
from model_paths import shared_model
from sample_models import cyclic_model


def _full_hierarchy() -> tuple[Graph, Graph]:
    """An If graph (two bodies reading an outer value) with a control edge, a node holding a
    constant and an output desc, an orphan subgraph, and a body being built for it that
    reads one of its values (`declare_parent`): (the graph, that body)."""
    graph = if_graph("main")
    h = graph.find_node_by_name("h")
    k = graph.add_const(Tensor([1.0, 2.0]), name="k")
    graph.add_control_edge(k, h)
    graph.add_subgraph(chain("orphan"))
    built = Graph("being_built")
    built.declare_parent(graph)
    reader = built.add_node("Neg", name="reads_h", num_inputs=1)
    built.add_data_edge(h, 0, reader, 0)
    return graph, built


def _every_object(graph: Graph, *more: Graph) -> list[weakref.ref[object]]:
    """Weak references to `graph`, its subgraphs, `more` and the nodes of all of them."""
    graphs = [graph, *graph.get_all_subgraphs(), *more]
    objects: list[object] = [*graphs, *(n for g in graphs for n in g.get_direct_nodes())]
    return [weakref.ref(o) for o in objects]


def _alive(refs: list[weakref.ref[object]]) -> int:
    return sum(ref() is not None for ref in refs)


def test_a_dropped_graph_is_held_by_its_cycles_until_collected(collector_off: None) -> None:
    """What closing is for: without it, dropping a graph frees none of it (its cycles hold
    every object) until a cyclic collection runs."""
    graph, built = _full_hierarchy()
    refs = _every_object(graph, built)
    del graph, built
    assert _alive(refs) == len(refs)
    gc.collect()
    assert _alive(refs) == 0


def test_a_closed_graph_is_freed_by_reference_counting(collector_off: None) -> None:
    graph, built = _full_hierarchy()
    refs = _every_object(graph, built)
    assert len(refs) >= 15
    graph.close()
    assert built.closed and all(g.closed for g in [graph, built])
    del graph, built
    assert _alive(refs) == 0  # no collection ran: reference counting freed everything


@pytest.mark.parametrize("name", ["control_flow", "distilbert_tiny"])
def test_a_loaded_model_closed_leaves_nothing_to_collect(collector_off: None,
                                                         name: str) -> None:
    """A loaded model (nodes holding their protos, bodies, value infos, caches made by the
    queries below) is freed by reference counting once closed."""
    graph = ge.graph.load(shared_model(name))
    graph.topological_order()
    graph.get_all_nodes()
    graph.nodes_of_type("Add")
    refs = _every_object(graph)
    graph.close()
    del graph
    assert _alive(refs) == 0


@pytest.mark.parametrize("in_body", [False, True])
def test_a_graph_with_a_cycle_can_be_closed(collector_off: None, in_body: bool) -> None:
    """Closing walks node sets, not the node order, which a graph with a cycle has none of."""
    graph = ge.graph.load(cyclic_model(in_body=in_body))
    refs = _every_object(graph)
    graph.close()
    del graph
    assert _alive(refs) == 0


def _uses() -> list[tuple[str, Callable[[Graph], object]]]:
    """(what, call on a graph) for a sample of the API: reads, edits, exports, dunders."""
    return [
        ("get_direct_nodes", lambda g: g.get_direct_nodes()),
        ("get_all_nodes", lambda g: g.get_all_nodes()),
        ("find_node_by_name", lambda g: g.find_node_by_name("h")),
        ("nodes_of_type", lambda g: g.nodes_of_type("Relu")),
        ("add_node", lambda g: g.add_node("Relu", num_inputs=1)),
        ("transaction", lambda g: g.transaction().__enter__()),
        ("validate", lambda g: g.validate()),
        ("clone", lambda g: g.clone()),
        ("to_onnx", lambda g: g.to_onnx()),
        ("save", lambda g: g.save("never_written.onnx")),
        ("root_graph", lambda g: g.root_graph()),
        ("get_all_subgraphs", lambda g: g.get_all_subgraphs()),
        ("opset_imports", lambda g: g.opset_imports),
        ("model", lambda g: g.model),
        ("in", lambda g: object() in g),
        ("iter", lambda g: iter(g)),  # (not "'ClosedGraph' object is not iterable")
        ("indexing", lambda g: g[0]),  # (not "'ClosedGraph' object is not subscriptable")
        ("reversed", lambda g: reversed(g)),  # (not "... is not reversible")
    ]


@pytest.mark.parametrize(("what", "use"), _uses(), ids=[w for w, _ in _uses()])
def test_a_closed_graph_refuses_every_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         what: str, use: Callable[[Graph], object]) -> None:
    monkeypatch.chdir(tmp_path)
    graph, _ = _full_hierarchy()
    graph.close()
    with pytest.raises(GraphClosedError) as raised:
        use(graph)
    error = raised.value
    assert isinstance(error, GraphError) and isinstance(error, GeError)
    assert error.code == "GE1001"
    assert "graph 'main', which is closed (Graph.close() released its nodes)" in str(error)
    assert list(tmp_path.iterdir()) == []


def test_a_closed_graph_answers_as_an_empty_object_and_names_only_public_calls() -> None:
    """`hasattr`, `getattr(..., default)` and `bool` answer for a closed graph (an
    AttributeError too), and a message never names ge's own reads (trial TT: `(_nodes)`,
    `(root_graph)` from inside `ge.compile`); a session refuses it when it is added."""
    from ge.session import Session

    graph, _ = _full_hierarchy()
    graph.close()
    assert len(graph) == 0 and not graph
    assert str(graph) == f"{graph}" == repr(graph) == "<Graph 'main' closed>"
    assert not hasattr(graph, "validate") and getattr(graph, "validate", None) is None
    with pytest.raises(GraphClosedError) as raised:
        graph.validate()
    assert "it cannot be used (validate); load the model again" in str(raised.value)
    with pytest.raises(GraphClosedError) as raised:
        graph._nodes  # noqa: B018  # (what ge's own code reads)
    assert "it cannot be used; load the model again" in str(raised.value)
    with pytest.raises(GraphClosedError) as raised:
        ge.compile(graph)
    assert "it cannot be used; load the model again" in str(raised.value)
    session = Session()
    with pytest.raises(GraphClosedError, match=r"graph 'main' is closed .*: a session cannot "
                                               r"compile or run it"):
        session.add_graph(1, graph)
    assert session.get_graph_ids() == []


def test_each_use_python_syntax_makes_of_a_closed_graph() -> None:
    """What each operation a Graph supports through Python's syntax (its dunders, looked up
    on the class past the attribute check) does on a closed graph: `len` and `bool` answer
    as an empty object and `str` and `repr` name it; every other one is GE1001 saying what
    was asked, never a TypeError naming `ClosedGraph`, which no user wrote."""
    import copy

    graph, _ = _full_hierarchy()
    graph.close()
    assert (len(graph), bool(graph)) == (0, False)
    assert str(graph) == repr(graph) == f"{graph}" == "<Graph 'main' closed>"
    refused: list[tuple[str, Callable[[], object]]] = [
        ("in", lambda: object() in graph), ("iter", lambda: iter(graph)),
        ("indexing", lambda: graph[0]), ("reversed", lambda: reversed(graph))]
    for what, use in refused:
        with pytest.raises(GraphClosedError) as raised:
            use()
        assert str(raised.value) == (
            f"[GE1001] graph 'main', which is closed (Graph.close() released its nodes): it "
            f"cannot be used ({what}); load the model again, or clone() a graph before "
            "closing it"), what
    for way, use in [("copy()", lambda: copy.copy(graph)),
                     ("deepcopy()", lambda: copy.deepcopy(graph))]:
        with pytest.raises(GraphError, match=re.escape(f"[GE1001] ge.graph.Graph cannot be "
                                                       f"copied with {way}; use Graph.clone()")):
            use()
    assert graph.closed


def test_a_closed_graph_keeps_its_name() -> None:
    graph, _ = _full_hierarchy()
    body = graph.get_subgraph("then")
    assert body is not None and not graph.closed and not body.closed
    graph.close()
    assert graph.name == "main" and graph.closed
    assert repr(graph) == "<Graph 'main' closed>"
    graph.close()  # closing again does nothing
    assert body.closed and body.name == "then"
    with pytest.raises(GraphClosedError, match=re.escape(
            "graph 'then', which is closed (it went with its root graph 'main'")):
        body.get_direct_nodes()


def test_close_bound_before_closing_does_nothing_after() -> None:
    """A callback (`ExitStack.callback(graph.close)`) bound before another closed the graph."""
    graph = chain()
    close = graph.close
    graph.close()
    close()
    assert graph.closed


def test_nodes_held_after_closing_keep_their_name_type_and_domain() -> None:
    graph, _ = _full_hierarchy()
    h = graph.find_node_by_name("h")
    inner = graph.get_subgraph("then").get_direct_nodes()[0]  # type: ignore[union-attr]
    custom = graph.add_node("Frob", name="frob", domain="my.domain")
    kept = {h: "h", inner: "inner", custom: "custom"}  # (usable as keys, before and after)
    graph.close()
    assert kept[h] == "h" and kept[inner] == "inner" and kept[custom] == "custom"
    assert (h.name, h.type, h.domain, h.get_name(), h.get_type()) == ("h", "Relu", "", "h",
                                                                        "Relu")
    assert (custom.type, custom.domain) == ("Frob", "my.domain")
    assert isinstance(h, Node) and h.owner_graph is graph and inner.owner_graph.closed
    assert repr(h) == "<Node 'h' type=Relu, closed>"
    for use in (lambda n: n.get_attr("x"), lambda n: n.get_in_data_nodes_and_port_indexes(0),
                lambda n: n.get_output_desc(0), lambda n: n.set_attr("alpha", 1.0),
                lambda n: n.get_subgraphs(), lambda n: n.get_out_data_nodes()):
        with pytest.raises(GraphClosedError) as raised:
            use(h)
        assert raised.value.nodes == ("h",)
        assert str(raised.value).startswith(
            "[GE1001] node 'h' (Relu) is a node of graph 'main', which is closed")
    with pytest.raises(GraphClosedError, match=re.escape(
            "node 'then_relu' (Relu) is a node of graph 'then', which is closed (it went with")):
        inner.get_inputs_size()


def test_only_a_root_graph_is_closed() -> None:
    """A body, an orphan subgraph or a body being built is part of its root: closing it alone
    would leave the root's nodes reading closed ones. Refused, nothing changed."""
    graph, built = _full_hierarchy()
    for part in (graph.get_subgraph("then"), graph.get_subgraph("orphan"), built):
        assert part is not None
        with pytest.raises(GraphError, match=r"is part of graph 'main'.*close the root graph"):
            part.close()
        assert not part.closed
    graph.validate()
    built.get_direct_nodes()[0].get_in_data_nodes_and_port_indexes(0)


def test_a_graph_is_not_closed_inside_its_transaction() -> None:
    graph = chain()
    with graph.transaction():
        graph.add_node("Relu", name="extra", num_inputs=1)
        with pytest.raises(GraphError, match="cannot be closed inside one of its transactions"):
            graph.close()
        assert not graph.closed
    assert graph.has_node("extra")
    graph.close()
    assert graph.closed


def test_a_graph_closed_while_changes_are_tracked() -> None:
    """Listeners are dropped with the graph; a `track_changes` block around the close ends
    cleanly and keeps what it recorded (closed nodes)."""
    graph = Graph("g")
    with graph.track_changes() as changes:
        x = add_data(graph, 0, "x")
        add_output(graph, add_op(graph, "Relu", x, name="r"))
        graph.close()
    assert {n.name for n in changes.added} == {"x", "r", "out"}
    assert all("closed" in repr(n) for n in changes.added)


def test_a_body_taken_out_and_not_given_back_is_closed_with_its_root(
        collector_off: None) -> None:
    """A body taken with `take_subgraph` still reads the graph's values (it may only go to
    another node of the graph): it is part of the graph until then, and closed with it."""
    graph = if_graph("main")
    taken = graph.find_node_by_name("if").take_subgraph("then_branch")
    h = graph.find_node_by_name("h")
    assert taken.get_direct_nodes()[0].get_input_producer(0) == (h, 0)
    refs = [weakref.ref(o) for o in (taken, *taken.get_direct_nodes())]
    graph.close()
    assert taken.closed
    with pytest.raises(GraphClosedError, match="it went with its root graph 'main'"):
        taken.get_direct_nodes()
    del taken, h
    assert _alive(refs) == 0


def test_a_discarded_body_is_the_callers_and_not_closed_with_the_graph() -> None:
    """A body discarded with `remove_attr`, or with its removed owner node, reads nothing of
    the graph any more: a graph of its own, which closing the graph leaves alone (whoever
    holds it closes it, or lets the collector free it)."""
    graph = if_graph("main")
    if_node = graph.find_node_by_name("if")
    else_body = if_node.get_subgraphs()[1]
    if_node.remove_attr("else_branch")
    graph.remove_node(if_node)
    (then_body,) = if_node.get_subgraphs()
    graph.close()
    for body in (then_body, else_body):
        assert not body.closed and body.root_graph() is body
        assert [n.type for n in body.get_direct_nodes()][-1] == "NetOutput"
        body.close()
        assert body.closed


def _interrupting(monkeypatch: pytest.MonkeyPatch, step: str, at: int,
                  partly: Callable[..., None] | None = None) -> None:
    """Make call `at` of `ge.graph.closing.<step>` raise KeyboardInterrupt, as Ctrl-C would
    midway through a close: after doing `partly(*args)` (half the step), or the whole step."""
    real = getattr(closing, step)
    calls = [0]

    def interrupted(*args: object) -> None:
        calls[0] += 1
        if calls[0] == at:
            (partly or real)(*args)
            raise KeyboardInterrupt
        real(*args)

    monkeypatch.setattr(closing, step, interrupted)


def _half_released(node: Node, graph: Graph) -> None:
    node.__class__ = closing.ClosedNode
    del node._inputs


@pytest.mark.parametrize(("step", "at", "partly"), [
    ("_mark_closed", 2, None),  # a body marked, the others not yet
    ("_release_node", 5, None),  # between two nodes
    ("_release_node", 3, _half_released),  # inside one node's release
], ids=["between-graphs", "between-nodes", "inside-a-node"])
def test_an_interrupted_close_finishes_before_the_interrupt_goes_on(
        collector_off: None, monkeypatch: pytest.MonkeyPatch, step: str, at: int,
        partly: Callable[..., None] | None) -> None:
    """Ctrl-C inside `close()` leaves no half-closed graph (some nodes released, others
    reading them): the close is finished, then the KeyboardInterrupt propagates."""
    graph, built = _full_hierarchy()
    h = graph.find_node_by_name("h")
    refs = _every_object(graph, built)
    _interrupting(monkeypatch, step, at, partly)
    with pytest.raises(KeyboardInterrupt) as raised:
        graph.close()
    del raised  # (its traceback holds the frames of the close)
    assert graph.closed and built.closed
    assert repr(h) == "<Node 'h' type=Relu, closed>"
    with pytest.raises(GraphClosedError, match=r"node 'h' \(Relu\) is a node of graph 'main'"):
        h.get_inputs_size()
    del graph, built, h
    assert _alive(refs) == 0  # released all the same: reference counting freed it


def test_a_close_interrupted_before_it_changed_anything_leaves_the_graph_usable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    graph, built = _full_hierarchy()
    before = graph.to_onnx().SerializeToString()

    def interrupted(root: Graph) -> list[Graph]:
        raise KeyboardInterrupt

    monkeypatch.setattr(closing, "_hierarchy", interrupted)
    with pytest.raises(KeyboardInterrupt):
        graph.close()
    assert not graph.closed and not built.closed
    graph.validate()
    assert graph.to_onnx().SerializeToString() == before
    monkeypatch.undo()
    graph.close()
    assert graph.closed and built.closed


@pytest.mark.parametrize("closed", [False, True], ids=["open", "closed"])
def test_a_graph_is_not_pickled_open_or_closed(closed: bool) -> None:
    """Pickling refuses a graph alike (a closed one pickled as its bare name before, while
    an open one failed on a node: "ge.graph.Node cannot be copied")."""
    graph, _ = _full_hierarchy()
    if closed:
        graph.close()
    with pytest.raises(GraphError, match=r"^\[GE1001\] ge\.graph\.Graph cannot be pickled; "
                                         r"save it as ONNX"):
        pickle.dumps(graph)
    assert graph.closed == closed
