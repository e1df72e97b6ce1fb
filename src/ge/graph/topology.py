"""Topology of a `Graph`: its order of nodes, cycle checks, and moving nodes in the order.

A mixin of `Graph` (see graph.py); the linked list that holds the order is `order.py`, this
is the graph's API over it (and the stable sort that establishes an unknown order).
"""

# mypy: disable-error-code="misc"
# (mixin methods take `self: Graph`, a subclass of the mixin: mypy flags that as [misc])

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from ge.errors import GraphError
from ge.graph import order
from ge.graph.edges import _check_node_arg
from ge.graph.node import Node

if TYPE_CHECKING:
    from ge.graph.graph import Graph

__all__ = ["GraphTopology"]


class GraphTopology:
    """The topology operations of `Graph` (a mixin; its methods run on a `Graph`)."""

    # -- topology -----------------------------------------------------------------------
    def _dependencies(self: Graph, node: Node) -> Iterator[Node]:
        """Direct nodes of this graph that `node` must come after."""
        for producer in node._inputs:
            if producer is not None and producer[0]._graph is self:
                yield producer[0]
        if node._ctrl_in:
            yield from node._ctrl_in
        if node._attrs and not node._clean:
            for producer in node.get_outer_inputs():
                if producer[0]._graph is self:
                    yield producer[0]

    def topological_order(self: Graph) -> list[Node]:
        """Direct nodes, producers before consumers: the graph's maintained order, made
        valid here first when it is unknown (a loaded graph: a stable sort that keeps the
        file's order where it is free). A cycle is a `GraphError` naming its nodes."""
        if not self._order_ok:
            order.establish(self)
        return list(self._listed())

    def would_create_cycle(self: Graph, src_node: Node, dst_node: Node) -> bool:
        """Would an edge from an output of `src_node` to an input of `dst_node` make a cycle
        (extension)? `dst_node` may be in a subgraph of src's graph (its owner then depends
        on `src_node`). Answered by a search bounded to the nodes between the two in the
        maintained order, so the common case visits a handful of nodes. On a graph whose
        order a cycle broke (an edit closed one), a plain search from `dst_node` answers."""
        _check_node_arg(src_node, "src_node")
        _check_node_arg(dst_node, "dst_node")
        self._check_member(src_node, "src_node", allow_outer=True)
        graph = src_node._graph
        assert graph is not None
        owner = order.owner_in(graph, dst_node)
        if owner is None:
            raise GraphError(f"node {dst_node._name!r} cannot read {src_node._name!r}: it is "
                             f"not in the scope of graph {graph._name!r}")
        if not graph._order_ok:
            try:
                order.establish(graph)
            except GraphError:  # a cycle already: no order bounds the search
                return order.reaches(graph, owner, src_node)
        return order.would_create_cycle(graph, src_node, owner)

    def insert_before(self: Graph, anchor: Node, nodes: Node | Sequence[Node]) -> None:
        """Move direct `nodes` (in the order given) to just before `anchor` (extension, as
        onnx-ir's `insert_before`); `GraphError` if that would put a node before a producer
        or after a consumer, and then nothing moves."""
        self._insert_at(anchor, nodes, before=True)

    def insert_after(self: Graph, anchor: Node, nodes: Node | Sequence[Node]) -> None:
        """Move direct `nodes` (in the order given) to just after `anchor` (extension)."""
        self._insert_at(anchor, nodes, before=False)

    def _insert_at(self: Graph, anchor: Node, nodes: Node | Sequence[Node], *,
                   before: bool) -> None:
        _check_node_arg(anchor, "anchor")
        self._check_member(anchor, "anchor")
        group = [nodes] if isinstance(nodes, Node) else list(nodes)
        for node in group:
            _check_node_arg(node)
            self._check_member(node, "node")
        if anchor in group:
            raise GraphError(f"node {anchor._name!r} cannot be placed next to itself")
        if len(set(group)) != len(group):
            raise GraphError("a node is given twice")
        if not group:
            return
        if not self._order_ok:
            order.establish(self)
        # Checked on labels, O(edges of the group): the other nodes keep their places, so
        # one outside the group comes before the group iff it comes before the anchor
        # (the anchor itself included when placing after it).
        where = {n: i for i, n in enumerate(group)}
        edge = anchor._seq if before else anchor._seq + 1

        def comes_first(other: Node, node: Node) -> bool:
            if other in where:
                return where[other] < where[node]
            return other._seq < edge

        for node in group:
            for dep in self._dependencies(node):
                if not comes_first(dep, node):
                    raise GraphError(
                        f"node {node._name!r} cannot be placed "
                        f"{'before' if before else 'after'} {anchor._name!r}: it reads "
                        f"{dep._name!r}, which would come after it", nodes=[node._name])
            for succ in order.successors(self, node):
                if comes_first(succ, node):
                    raise GraphError(
                        f"node {node._name!r} cannot be placed "
                        f"{'before' if before else 'after'} {anchor._name!r}: "
                        f"{succ._name!r} reads it and would come before it",
                        nodes=[node._name])
        self._changed(True)
        order.move(self, group, anchor, before=before)

    def _on_cycles(self: Graph, nodes: list[Node], successors: dict[Node, list[Node]],
                   indegree: dict[Node, int]) -> set[Node]:
        """The nodes a failed sort left (on a cycle or after one), less those that lead to
        no cycle: what is named is the cycles (and paths between them), not everything
        downstream of them."""
        left = {n for n in nodes if indegree[n] > 0}
        outdegree = {n: sum(1 for s in successors[n] if s in left) for n in left}
        ends = [n for n, d in outdegree.items() if d == 0]
        while ends:
            node = ends.pop()
            left.discard(node)
            for dep in self._dependencies(node):
                if dep in left:
                    outdegree[dep] -= 1
                    if outdegree[dep] == 0:
                        ends.append(dep)
        return left

    def _kahn(self: Graph, nodes: list[Node], seq: dict[Node, int]) -> list[Node]:
        """Stable topological sort: the ready node first in `seq` goes first."""
        successors: dict[Node, list[Node]] = {n: [] for n in nodes}
        indegree = dict.fromkeys(nodes, 0)
        for node in nodes:
            for dep in self._dependencies(node):
                successors[dep].append(node)
                indegree[node] += 1
        ready = [(seq[n], id(n)) for n in nodes if indegree[n] == 0]
        by_id = {id(n): n for n in nodes}
        heapq.heapify(ready)
        out: list[Node] = []
        while ready:
            node = by_id[heapq.heappop(ready)[1]]
            out.append(node)
            for succ in successors[node]:
                indegree[succ] -= 1
                if indegree[succ] == 0:
                    heapq.heappush(ready, (seq[succ], id(succ)))
        if len(out) != len(nodes):
            from ge.graph.places import listed_node

            cycled = sorted(self._on_cycles(nodes, successors, indegree), key=lambda n: n._name)
            listed = ", ".join(listed_node(n) for n in cycled[:20])
            raise GraphError(f"graph {self._name!r} has a cycle through nodes: {listed}",
                             nodes=[n._name for n in cycled])
        return out
