"""`ChangeSet`: what `Graph.track_changes()` collects (nodes added, removed, touched).

Kept apart from graph.py: it is a listener's record of changes, not part of the graph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from ge.graph.journal import ChangeKind, Journal
from ge.graph.node import Node

if TYPE_CHECKING:
    from ge.graph.graph import Graph

__all__ = ["ChangeSet"]


class ChangeSet:
    """Nodes touched while `Graph.track_changes()` was open, each once, in change order."""

    __slots__ = ("_journal", "added", "reattributed", "removed", "removed_from", "retyped",
                 "touched")

    def __init__(self, journal: Journal | None = None) -> None:
        self._journal = journal  # (the hierarchy's: where a removed node was)
        # The graphs nodes were removed from (known with the journal told of the removals).
        self.removed_from: dict[Graph, None] = {}
        self.added: dict[Node, None] = {}
        self.removed: dict[Node, None] = {}
        # Nodes still in a graph whose inputs, attributes or output descs changed (added
        # ones included).
        self.touched: dict[Node, None] = {}
        # Nodes whose output desc was set: their consumers read another type or shape.
        self.retyped: dict[Node, None] = {}
        # Nodes whose attributes were set or removed (what they hold is the change's doing).
        self.reattributed: dict[Node, None] = {}

    def _record(self, kind: ChangeKind, node: Node, index: int) -> None:
        if kind is ChangeKind.NODE_ADDED:
            if self.removed.pop(node, "absent") == "absent":  # re-added: no net change
                self.added[node] = None
            self.touched[node] = None
        elif kind is ChangeKind.NODE_REMOVED:
            if self.added.pop(node, "absent") == "absent":
                self.removed[node] = None
            self.touched.pop(node, None)
            graph = None if self._journal is None else self._journal.removing_from
            if graph is not None:
                self.removed_from[cast("Graph", graph)] = None
        elif node._graph is not None:
            self.touched[node] = None
            if kind is ChangeKind.OUTPUT_DESC_CHANGED:
                self.retyped[node] = None
            elif kind is ChangeKind.ATTR_CHANGED:
                self.reattributed[node] = None

    def live(self) -> list[Node]:
        """The touched nodes still in a graph (what a rewriter re-examines)."""
        return [n for n in self.touched if n._graph is not None]

    def attributes_set(self, node: Node) -> bool:
        """Whether the attributes `node` holds are the changes' doing: it was added, or an
        attribute of it set or removed (a node only rewired or retyped holds what it held)."""
        return node in self.added or node in self.reattributed

    def changed_graphs(self) -> list[Graph]:
        """The graphs the changes were made in: those of the touched nodes still in one and
        those nodes were removed from (a body input removed that nothing read), and every
        body held by a node added or given attributes, with the bodies inside it (a body
        built apart and put in place: its own nodes were never changed here). A graph may
        have left the model since (`removed_from`)."""
        graphs: dict[Graph, None] = {}
        for node in self.touched:
            graph = node._graph
            if graph is None:
                continue
            graphs[graph] = None
            if node in self.added or node in self.reattributed:
                for body in node.get_subgraphs():
                    graphs[body] = None
                    graphs.update(dict.fromkeys(body.get_all_subgraphs()))
        graphs.update(self.removed_from)
        return list(graphs)

    def live_with_readers(self) -> list[Node]:
        """`live()` and the consumers of every node whose output desc was set: a value whose
        type changed is checked where it is read too (a Mul now reading float16 and float)."""
        nodes = dict.fromkeys(self.live())
        for node in self.retyped:
            if node._graph is None:
                continue
            for consumers in node._consumers:
                if consumers:
                    for consumer, _ in consumers:
                        if consumer._graph is not None:
                            nodes[consumer] = None
        return list(nodes)
