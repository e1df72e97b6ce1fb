"""`Graph.remove_nodes`: remove a set of nodes with all their edges, as one change.

Removing nodes one at a time cuts every edge on its own: each cut is journaled, told to the
listeners and may keep a consumer-order restorer, also for the edges between two nodes that
are both going (a fused LayerNorm's nine nodes have eighteen). Here the nodes go together:
the edges among them are dropped with the nodes, each edge to a node that stays is cut once,
and the whole removal is one undo step holding plain data (each node's edges as they were,
the entries taken out of the consumer tables of the producers that stay, the inputs cut),
so a rollback restores the graph byte for byte, every order included.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ge.errors import GraphError
from ge.graph import order
from ge.graph.edges import _check_node_arg, _keep_order
from ge.graph.journal import ChangeKind
from ge.graph.node import Node

if TYPE_CHECKING:
    from ge.graph.graph import Graph

__all__ = ["remove_nodes"]

Producer = tuple[Node, int]
#: A removed node as it was: its input and consumer lists (the lists themselves: the node
#: is given new, empty ones), its clean flag, and its place in the order (the node before
#: it when it was unlinked, its label).
_Saved = tuple[Node, list, list, bool, "Node | None", int]


def remove_nodes(graph: Graph, nodes: Iterable[Node]) -> None:
    """Remove `nodes` (direct nodes of `graph`; repeats ignored) with all their edges; see
    `Graph.remove_nodes`. Nothing changes when one of them is not a node of `graph`."""
    gone: dict[Node, None] = {}
    for node in nodes:
        _check_node_arg(node)
        if node._graph is not graph:
            raise GraphError(f"node {node._name!r} is not a node of graph {graph._name!r}")
        gone[node] = None
    if not gone:
        return
    # Control edges and the outer reads of bodies are rare: cut one by one (journaled).
    for node in gone:
        if node._ctrl_in:
            for pred in list(node._ctrl_in):
                graph._ctrl_unlink(pred, node)
        if node._ctrl_out:
            for succ in list(node._ctrl_out):
                graph._ctrl_unlink(node, succ)
        if node._attrs and not node._clean:  # (a node as read owns no bodies)
            for sub in node.get_subgraphs():
                sub._drop_outer_edges()

    journal = graph._changed(True)
    recording = journal.recording
    saved: list[_Saved] = []
    # Edges from producers that stay: their consumer table and the entry taken out of it.
    # (A table's order is restored as every edge removal restores it: `_keep_order`, once
    # per transaction, so a producer read by thousands is not copied for each removal.)
    dropped: list[tuple[dict, tuple[Node, int]]] = []
    cut: list[tuple[Node, int, Producer]] = []  # inputs of nodes that stay, now unconnected
    for node in gone:
        inputs = node._inputs
        for i, producer in enumerate(inputs):
            if producer is not None and producer[0] not in gone:
                table = producer[0]._consumers[producer[1]]
                assert table is not None  # it lists this edge
                key = (node, i)
                if recording:
                    _keep_order(journal, table, key)
                    dropped.append((table, key))
                del table[key]
        outputs = node._consumers
        read = False  # whether any output has consumers
        for k, table in enumerate(outputs):
            if table:
                read = True
                for consumer, j in table:
                    if consumer not in gone:
                        consumer._proto_dirty()  # journals itself, before this step
                        consumer._inputs[j] = None
                        cut.append((consumer, j, (node, k)))
        before, label = graph._unindex(node)
        if recording:  # its edge lists themselves: the node gets new, empty ones
            saved.append((node, inputs, outputs, node._clean, before, label))
        if inputs:
            node._inputs = [None] * len(inputs)
        if read:
            node._consumers = [None] * len(outputs)
        node._clean = False  # it no longer matches the NodeProto it was read from
    if journal.listeners:
        for consumer, j, _ in cut:
            journal.notify(ChangeKind.INPUT_CHANGED, consumer, j)
        journal.notify_removed(graph, gone)
    if recording:
        journal.record((_undo, graph, saved, dropped, cut))


def _undo(graph: Graph, saved: list[_Saved], dropped: list[tuple[dict, tuple[Node, int]]],
          cut: list[tuple[Node, int, Producer]]) -> None:
    """Put the removed nodes back where they were, with every edge (in its old order, once
    the order restorers `_keep_order` recorded before this step have run too)."""
    for node, inputs, outputs, clean, before, label in reversed(saved):
        graph._insert(node)
        order.unlink(graph, node)  # back at its place in the order
        order.link_after(graph, node, before, label)
        node._inputs = inputs
        node._consumers = outputs
        node._clean = clean
    for table, key in reversed(dropped):
        table[key] = None
    journal = graph._changed(True)
    for consumer, j, producer in cut:
        consumer._inputs[j] = producer
        if journal.listeners:
            journal.notify(ChangeKind.INPUT_CHANGED, consumer, j)
