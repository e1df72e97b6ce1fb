"""`Graph.close()`: cut a graph's reference cycles so that reference counting frees it.

Why: the IR is made of reference cycles (a node and its graph, a producer and its consumers,
the links of the node list, a body and its owner node), so a graph nobody holds any more is
freed only by Python's cyclic collector, which must traverse every tracked object of the
process to find it. For a compiled 100,000-node model (about 800,000 objects) that is
0.75-1.3 s, paid in a full collection or, for the `ge` command, at interpreter shutdown,
after the command has ended (docs/performance.md). Closing cuts every reference between
the objects of the graph's hierarchy, so that its objects are freed as their last reference
goes, most during the close itself (0.2-0.25 s for that model), the rest with the caller's
last reference.

What stays is what others still hold: a closed graph object keeps its name, a closed node
its name, op type and domain (what a report, an error, a log line or a plugin needs to name
it) and the closed graph it was of. Every other use of either raises `GraphClosedError`
(GE1001, a `GraphError`), naming the graph, instead of an `AttributeError` somewhere inside:
a closed graph or node becomes an instance of `ClosedGraph` / `ClosedNode`, subclasses whose
attribute look-up refuses everything but those names. The classes are swapped in place, so
the objects keep their identity (dict keys, `is`, weak references) and live graphs pay
nothing for the check.
"""

from __future__ import annotations

from typing import Any

from ge.errors import GraphClosedError, GraphError
from ge.graph.graph import Graph
from ge.graph.journal import Journal
from ge.graph.node import Node

__all__ = ["ClosedGraph", "ClosedNode", "close_graph"]

#: What a closed graph still answers: its name, `closed`, and `close()` (a no-op).
_GRAPH_KEPT = frozenset({"name", "closed", "close", "_name", "_root_name"})
#: What a node of a closed graph still answers: its identity and the (closed) graph.
_NODE_KEPT = frozenset({"name", "type", "domain", "get_name", "get_type", "owner_graph",
                        "_name", "_type", "_domain", "_graph"})


class ClosedGraph(Graph):
    """What a `Graph` becomes when closed: its name, nothing else (module docstring)."""

    _root_name: str | None  # the root graph closed with it (None: it is the root)

    def __getattribute__(self, name: str) -> Any:
        if name in _GRAPH_KEPT or name.startswith("__"):
            return object.__getattribute__(self, name)
        raise _refused(self, name)

    # Python looks the dunders of `iter()`, `in`, `g[i]` and `reversed()` up on the class,
    # past `__getattribute__`: without these, a TypeError naming `ClosedGraph`, which no
    # user wrote ("'ClosedGraph' object is not subscriptable"), or a message naming none.
    def __iter__(self) -> Any:
        raise _refused(self, "iter")

    def __contains__(self, node: object) -> bool:
        raise _refused(self, "in")

    def __getitem__(self, key: object) -> Any:
        raise _refused(self, "indexing")

    def __reversed__(self) -> Any:
        raise _refused(self, "reversed")

    def __len__(self) -> int:
        return 0  # (its nodes were released; `bool(graph)` is False, not an error)

    @property
    def closed(self) -> bool:
        return True

    def close(self) -> None:
        """Closed already: nothing to do."""

    def __repr__(self) -> str:
        return f"<Graph {self._name!r} closed>"

    __str__ = __repr__  # (a log line's `%s` of a closed graph must not raise)


class ClosedNode(Node):
    """What a node of a closed graph becomes: its name, op type and domain, nothing else."""

    __slots__ = ()

    def __getattribute__(self, name: str) -> Any:
        if name in _NODE_KEPT or name.startswith("__"):
            return object.__getattribute__(self, name)
        node = f"node {self._name!r} ({self._type})"
        graph = self._graph
        assert isinstance(graph, ClosedGraph)
        raise GraphClosedError(
            f"{node} is a node of {_described(graph)}: only its name, type and domain are "
            f"left{_what(name, ' cannot be used')}", nodes=[self._name])

    def __repr__(self) -> str:
        return f"<Node {self._name!r} type={self._type}, closed>"


def _refused(graph: ClosedGraph, name: str) -> GraphClosedError:
    """The error of any use of the closed `graph` but its name (`name`: what was asked)."""
    return GraphClosedError(f"{_described(graph)}: it cannot be used{_what(name)}; load the "
                            "model again, or clone() a graph before closing it")


def _what(name: str, then: str = "") -> str:
    """` (validate)`: the attribute asked for, when it is a public one (ge's own reads,
    `_nodes`, `root_graph` from inside a call, would only puzzle the reader)."""
    if name.startswith("_") or name in _INTERNAL:
        return ""
    return f" ({name}{then})"


#: Public attributes ge's own code reads first when handed a graph (`ge.compile`, a
#: session's run): not what the user called.
_INTERNAL = frozenset({"root_graph", "mutation_count"})


def _described(graph: ClosedGraph) -> str:
    """`graph 'g', which is closed (Graph.close() ...)`, naming the root a body went with."""
    root = graph._root_name
    how = ("Graph.close() released its nodes" if root is None
           else f"it went with its root graph {root!r}, closed by Graph.close()")
    return f"graph {graph._name!r}, which is closed ({how})"


def close_graph(graph: Graph) -> None:
    """Close `graph`, a root graph, with every graph of its hierarchy (see `Graph.close`)."""
    if isinstance(graph, ClosedGraph):
        return  # (`Graph.close` bound before the graph was closed, as a callback is)
    root = graph.root_graph()
    if root is not graph:
        raise GraphError(
            f"graph {graph._name!r} is part of graph {root._name!r} (a body, an orphan "
            "subgraph or a body being built for it): close the root graph, which closes "
            "every graph of its hierarchy")
    if graph._journal.in_transaction:
        raise GraphError(
            f"graph {graph._name!r} cannot be closed inside one of its transactions (a "
            "rollback would need what closing releases): close it after the block")
    # Read only, so that an interrupt here leaves the graph as it was: what to close.
    hierarchy = _hierarchy(graph)
    tables = [each._nodes for each in hierarchy]
    journal = graph._journal
    try:
        _close_all(graph, hierarchy, tables, journal)
    except BaseException:
        # Interrupted midway (Ctrl-C), the graph would be half closed: some nodes released,
        # others reading them. Every step can run again, so the close is finished first.
        _close_all(graph, hierarchy, tables, journal, again=True)
        raise


def _close_all(root: Graph, hierarchy: list[Graph], tables: list[dict[Node, None]],
               journal: Journal, *, again: bool = False) -> None:
    """Close every graph of `hierarchy` (`root`'s; `tables` their nodes, `journal` their
    journal). Each graph is marked closed before any node is released, so that from the
    first change on a use of any of them is a `GraphClosedError`, never a read of a
    half-released graph. `again`: finishing an interrupted close, whose steps may have
    been done in part."""
    journal.listeners.clear()  # (a listener may hold the graph; the journal may be held)
    for each in hierarchy:
        _mark_closed(each, None if each is root else root._name)
    release = _release_node_again if again else _release_node
    for each, nodes in zip(hierarchy, tables):
        for node in nodes:
            release(node, each)


def _hierarchy(root: Graph) -> list[Graph]:
    """`root` and every graph below it: the bodies of its nodes (of theirs, ...), its orphan
    subgraphs and the bodies being built for one of them (`declare_parent`), whose nodes
    may read its values. Read from `Graph._inner`, which holds every graph placed inside
    another (and some that left: their parent graph is another now), not from the node
    order, which a graph with a cycle has none of."""
    found: dict[Graph, None] = {root: None}
    pending = [root]
    while pending:
        graph = pending.pop()
        inner = [sub for sub in graph._inner if sub.parent_graph is graph]
        inner.extend(graph._orphans)
        for sub in inner:
            if sub not in found:
                found[sub] = None
                pending.append(sub)
    return list(found)


def _mark_closed(graph: Graph, root_name: str | None) -> None:
    """Make `graph` a `ClosedGraph` holding only its name (the module docstring): its class
    first, then its tables go with its `__dict__` (its nodes are released apart)."""
    state = graph.__dict__
    state["_root_name"] = root_name
    graph.__class__ = ClosedGraph
    for key in [k for k in state if k not in ("_name", "_root_name")]:
        del state[key]


#: A node's slots that closing releases: all but `_name`, `_type`, `_domain` and `_graph`.
_RELEASED = tuple(slot for slot in Node.__slots__
                  if slot.startswith("_") and not slot.startswith("__") and slot not in _NODE_KEPT)


def _release_node(node: Node, graph: Graph) -> None:
    """Make `node` a `ClosedNode` of `graph` (closed already) and drop its edges, links,
    attributes, descs and proto: its class first, so that it is never half released."""
    node._graph = graph
    node.__class__ = ClosedNode
    del (node._inputs, node._consumers, node._ctrl_in, node._ctrl_out, node._prev,
         node._next, node._attrs, node._small_tensor, node._in_descs, node._out_descs,
         node._in_anchor_attrs, node._out_anchor_attrs, node._out_names, node._proto,
         node._clean, node._export_name, node._metadata, node._seq)


def _release_node_again(node: Node, graph: Graph) -> None:
    """`_release_node` of a node that an interrupted close may have released, in part or
    whole."""
    node._graph = graph
    node.__class__ = ClosedNode
    for slot in _RELEASED:
        try:
            delattr(node, slot)
        except AttributeError:
            pass  # (released already)
