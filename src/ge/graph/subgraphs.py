"""Subgraphs of a `Graph`: listing the hierarchy below it, orphan subgraphs, placing a body
under its owner node and cutting a body's reads from a scope it leaves.

A mixin of `Graph` (see graph.py), kept apart because it walks the hierarchy of graphs
rather than the nodes and edges of one graph.
"""

# mypy: disable-error-code="misc"
# (mixin methods take `self: Graph`, a subclass of the mixin: mypy flags that as [misc])

from __future__ import annotations

from typing import TYPE_CHECKING

from ge.errors import GraphError, GraphTypeError

if TYPE_CHECKING:
    from ge.graph.graph import Graph
    from ge.graph.node import Node

__all__ = ["GraphSubgraphs", "body_attribute", "body_path", "labelled_bodies"]


class GraphSubgraphs:
    """The subgraph operations of `Graph` (a mixin; its methods run on a `Graph`)."""

    # -- subgraphs ----------------------------------------------------------------------
    def get_all_subgraphs(self: Graph) -> list[Graph]:
        """Every subgraph below this graph (depth first, owner order), then orphan subgraphs:
        a new list. A root graph keeps the list until its hierarchy changes (the compiler
        asks before every pass)."""
        return self._kept_list("_all_subgraphs", self._collect_subgraphs)

    def _collect_subgraphs(self: Graph) -> list[Graph]:
        out: list[Graph] = []
        for node in self._listed():
            if node._attrs and not node._clean:  # a clean node owns no subgraph
                for sub in node.get_subgraphs():
                    out.append(sub)
                    out.extend(sub._collect_subgraphs())
        if self._parent_node is None:
            for orphan in self._orphans:
                out.append(orphan)
                out.extend(orphan._collect_subgraphs())
        return out

    def get_subgraph(self: Graph, name: str) -> Graph | None:
        """The subgraph below this graph named `name`, or None. GE names bodies uniquely;
        exporters may not, so a name several bodies share raises GraphError naming where
        each is. ✚ A body path as `body_path` writes it (`if1.then_branch`,
        `loop.body/if1.else_branch`), from the root or from this graph, names one body
        whatever the names."""
        if not isinstance(name, str):
            raise GraphTypeError(f"name must be a str, got {type(name).__name__}")
        subgraphs = self.get_all_subgraphs()
        named = [g for g in subgraphs if g._name == name]
        if len(named) > 1:
            places = ", ".join(repr(body_path(g)) if g._parent_node is not None else "an orphan"
                               for g in named)
            raise GraphError(
                f"graph {self._name!r} has {len(named)} subgraphs named {name!r} ({places}); "
                f"ask for one by its path, e.g. get_subgraph({body_path(named[0]) or name!r}), "
                f"or take it from its node (node.get_subgraphs())")
        if named:
            return named[0]
        here = body_path(self)  # a path from this graph, or from the root
        paths = {name, f"{here}/{name}"} if here else {name}
        return next((g for g in subgraphs if g._parent_node is not None
                     and body_path(g) in paths), None)

    def add_subgraph(self: Graph, subgraph: Graph) -> None:
        """Register a subgraph not (yet) owned by a node (GE's orphan subgraph; not exported)."""
        from ge.graph.graph import Graph

        if not isinstance(subgraph, Graph):
            raise GraphTypeError(
                f"subgraph must be a ge.graph.Graph, got {type(subgraph).__name__}"
            )
        root = self.root_graph()
        if subgraph is root or subgraph._parent_node is not None or subgraph in root._orphans:
            raise GraphError(f"graph {subgraph._name!r} is already part of a graph")
        root._orphans.append(subgraph)
        subgraph._orphan_of = root
        journal = self._changed(True)
        if journal.recording:

            def undo() -> None:
                root._orphans.remove(subgraph)
                subgraph._orphan_of = None

            journal.record(undo)

    def _remove_orphan(self: Graph, subgraph: Graph) -> None:
        index = self._orphans.index(subgraph)
        journal = self._changed(True)  # the orphan's journal is this root's until it leaves
        del self._orphans[index]
        subgraph._orphan_of = None
        if journal.recording:

            def undo() -> None:
                self._orphans.insert(index, subgraph)
                subgraph._orphan_of = self

            journal.record(undo)

    def remove_subgraph(self: Graph, name: str) -> None:
        """Unregister an orphan subgraph; a subgraph owned by a node goes with its attribute."""
        if not isinstance(name, str):
            raise GraphTypeError(f"name must be a str, got {type(name).__name__}")
        root = self.root_graph()
        for orphan in root._orphans:
            if orphan._name == name:
                root._remove_orphan(orphan)
                return
        if any(g._name == name for g in self.get_all_subgraphs()):
            raise GraphError(
                f"subgraph {name!r} is owned by a node; remove the node or its attribute instead"
            )
        raise GraphError(f"graph {self._name!r} has no subgraph named {name!r}")

    # -- bodies in the hierarchy --------------------------------------------------------
    def _enclose(self: Graph, sub: Graph, owner: Node) -> None:
        """Make `sub` a body of `owner`, a node of this graph (see `_inner`)."""
        sub._parent_node = owner
        self._inner[sub] = None
        self.root_graph()._journal.inner_version += 1

    def _drop_outer_edges(self: Graph) -> None:
        """Disconnect inputs of this hierarchy whose producers live outside it."""
        inside = {id(g) for g in [self, *self.get_all_subgraphs()]}
        for node in self.get_all_nodes():
            for i, producer in enumerate(node._inputs):
                if producer is not None and id(producer[0]._graph) not in inside:
                    node._graph._disconnect(node, i)  # type: ignore[union-attr]


def body_path(graph: Graph) -> str:
    """Where `graph` is in its model, unique where body names are not (exporters name every
    body `sub_graph`): "" for the root, `if1.then_branch` for a body of node `if1`, and
    `loop.body/if1.else_branch` for a body inside one (node names are unique per graph)."""
    parts: list[str] = []
    while graph._parent_node is not None:
        owner = graph._parent_node
        parts.append(f"{owner._name}.{body_attribute(graph) or '?'}")
        parent = owner._graph
        if parent is None:
            break
        graph = parent
    return "/".join(reversed(parts))


def labelled_bodies(node: Node) -> list[tuple[str, Graph]]:
    """The graphs `node` holds, each with the attribute holding it ("then_branch", "body",
    "branches[1]" for one of a GRAPHS list), in attribute order: how dumps, region
    listings and messages label a body."""
    from ge.graph.attributes import GRAPH_KINDS, decode_attr

    bodies: list[tuple[str, Graph]] = []
    for key, stored in node._attrs.items():
        kind, value = decode_attr(stored)
        if kind in GRAPH_KINDS:
            if isinstance(value, list):
                bodies.extend((f"{key}[{i}]", sub) for i, sub in enumerate(value))
            else:
                bodies.append((key, value))
    return bodies


def body_attribute(graph: Graph) -> str | None:
    """The attribute of its owner node that holds `graph` (`labelled_bodies`), or None for
    a root graph or an orphan: what names a body where its name alone ("sub_graph1", as
    exporters write it) does not."""
    owner = graph._parent_node
    if owner is None:
        return None
    return next((label for label, sub in labelled_bodies(owner) if sub is graph), None)
