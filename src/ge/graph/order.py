"""The maintained node order of a graph: a doubly linked list of nodes with integer labels.

The direct nodes of a graph form one list. Once established (`establish`), the list is a
topological order, and every later edit keeps it one: an edge u -> v added with u after v is
repaired by a search bounded to the nodes between them, run from both ends at once, and the
smaller side found is moved (the Pearce-Kelly idea), so a rewrite costs time in the size of
the region it touches, not of the graph. Labels grow along the list, so "is u before v" is
one comparison, and they are renumbered locally when two neighbours leave no room between
them. Every move is journaled, so a rollback restores the order exactly.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from ge.graph.node import Node

if TYPE_CHECKING:
    from ge.graph.graph import Graph

__all__ = ["GAP", "append", "establish", "fix_edge", "label", "mark_unknown", "move",
           "owner_in", "reaches", "successors", "walk", "would_create_cycle"]

#: Label distance between nodes appended one after the other.
GAP = 1 << 32
#: Renumbering widens its window until neighbours are at least this far apart.
_MIN_STEP = 1 << 12


#: A node's order label, as a sort key.
label = operator.attrgetter("_seq")


# -- raw list operations (no journal) ---------------------------------------------------
def append(graph: Graph, node: Node) -> None:
    """Link `node` last."""
    tail = graph._tail
    node._prev = tail
    node._next = None
    if tail is None:
        graph._head = node
        node._seq = 0
    else:
        tail._next = node
        node._seq = tail._seq + GAP
    graph._tail = node


def unlink(graph: Graph, node: Node) -> None:
    before, after = node._prev, node._next
    if before is None:
        graph._head = after
    else:
        before._next = after
    if after is None:
        graph._tail = before
    else:
        after._prev = before
    node._prev = node._next = None


def link_after(graph: Graph, node: Node, before: Node | None, label: int) -> None:
    """Link `node` right after `before` (first when None) under `label`."""
    after = graph._head if before is None else before._next
    node._prev, node._next, node._seq = before, after, label
    if before is None:
        graph._head = node
    else:
        before._next = node
    if after is None:
        graph._tail = node
    else:
        after._prev = node


def walk(graph: Graph) -> Iterator[Node]:
    node = graph._head
    while node is not None:
        yield node
        node = node._next


def owner_in(graph: Graph, node: Node) -> Node | None:
    """The direct node of `graph` that is `node` or owns (through subgraphs) the graph of
    `node`; None when `node` is not below `graph`."""
    while node._graph is not graph:
        owner = node._graph._parent_node if node._graph is not None else None
        if owner is None:
            return None
        node = owner
    return node


# -- labels ---------------------------------------------------------------------------
def _labels_after(graph: Graph, before: Node | None, count: int) -> list[int]:
    """`count` increasing labels between `before` (None: the start) and its successor,
    renumbering neighbours first when they leave no room."""
    after = graph._head if before is None else before._next
    if after is None:
        start = 0 if before is None else before._seq
        return [start + GAP * (i + 1) for i in range(count)]
    if before is None:
        return [after._seq - GAP * (count - i) for i in range(count)]
    step = (after._seq - before._seq) // (count + 1)
    if step < 1:
        _renumber(graph, before, count)
        step = (after._seq - before._seq) // (count + 1)
    return [before._seq + step * (i + 1) for i in range(count)]


def _renumber(graph: Graph, before: Node, count: int) -> None:
    """Spread the labels of a window around `before` so `count` labels fit after it; the
    window doubles until its neighbours leave room (the whole list at worst)."""
    first, last = before, before._next
    assert last is not None
    size = 2
    while True:
        low_node, high_node = first._prev, last._next
        total = size + count
        if low_node is None and high_node is None:
            low, high = -GAP, GAP * total
        elif low_node is None:
            assert high_node is not None
            high = high_node._seq
            low = high - GAP * (total + 1)
        elif high_node is None:
            low = low_node._seq
            high = low + GAP * (total + 1)
        else:
            low, high = low_node._seq, high_node._seq
        step = (high - low) // (total + 1)
        if step >= _MIN_STEP or (low_node is None and high_node is None):
            break
        for _ in range(size):  # double the window, half on each side where possible
            if first._prev is not None:
                first = first._prev
                size += 1
            if last._next is not None:
                last = last._next
                size += 1
    old: list[tuple[Node, int]] = []
    position = 0
    node: Node | None = first
    while node is not None:
        position += 1
        old.append((node, node._seq))
        node._seq = low + step * position
        if node is before:
            position += count  # the room asked for
        if node is last:
            break
        node = node._next
    journal = graph.root_graph()._journal
    if journal.recording:
        def undo() -> None:
            for n, label in old:
                n._seq = label

        journal.record(undo)


# -- moves ----------------------------------------------------------------------------
def move(graph: Graph, nodes: Sequence[Node], anchor: Node, *, before: bool) -> None:
    """Put `nodes` (direct nodes, in the order given) right before or after `anchor`
    (journaled). The caller has checked that the result is a valid order."""
    old = sorted(((n, n._prev, n._seq) for n in nodes), key=lambda item: item[2])
    for node in nodes:
        unlink(graph, node)
    place = anchor._prev if before else anchor
    labels = _labels_after(graph, place, len(nodes))
    for node, label in zip(nodes, labels, strict=True):
        link_after(graph, node, place, label)
        place = node
    journal = graph.root_graph()._journal
    if journal.recording:
        def undo() -> None:
            for n in nodes:
                unlink(graph, n)
            for n, previous, label in old:  # ascending old labels: each `previous` is back
                link_after(graph, n, previous, label)

        journal.record(undo)


# -- dependencies ---------------------------------------------------------------------
def successors(graph: Graph, node: Node) -> Iterator[Node]:
    """Direct nodes of `graph` that must come after `node`: its consumers (the owners of
    consumers inside subgraphs) and its control successors."""
    for consumers in node._consumers:
        if consumers:
            for consumer, _ in consumers:
                if consumer._graph is graph:
                    yield consumer
                else:
                    owner = owner_in(graph, consumer)
                    if owner is not None:
                        yield owner
    if node._ctrl_out:
        yield from node._ctrl_out


def _search(graph: Graph, src: Node, dst: Node) -> tuple[bool, set[Node]] | None:
    """For a new dependency src -> dst with src after dst: None when dst reaches src (a
    cycle), else (True, the nodes reaching src after dst) or (False, the nodes dst reaches
    before src), whichever the two interleaved searches finish first."""
    low, high = dst._seq, src._seq
    forward, forward_seen = [dst], {dst}
    backward, backward_seen = [src], {src}
    dependencies = graph._dependencies
    while True:
        for succ in successors(graph, forward.pop()):
            if succ is src:
                return None
            if succ._seq < high and succ not in forward_seen:
                forward_seen.add(succ)
                forward.append(succ)
        if not forward:
            return False, forward_seen
        for dep in dependencies(backward.pop()):
            if dep is dst:
                return None
            if dep._seq > low and dep not in backward_seen:
                backward_seen.add(dep)
                backward.append(dep)
        if not backward:
            return True, backward_seen


def mark_unknown(graph: Graph) -> None:
    """The order is no longer known to be valid (the next query establishes it).

    Journaled: a rollback gives back the state in which the order was valid, so it makes the
    order known again. Otherwise a rolled-back graph would stop maintaining its order until
    the next query, and then sort it anew: later edits would give another order than in a
    graph that never ran the transaction.
    """
    if graph._order_ok:
        graph._order_ok = False
        journal = graph.root_graph()._journal
        if journal.recording:
            journal.record(lambda: setattr(graph, "_order_ok", True))


def fix_edge(graph: Graph, src: Node, dst: Node) -> None:
    """Keep the order valid after `dst` (a direct node) came to depend on `src`; a cycle
    marks the order unknown, so the next `topological_order()` reports it."""
    if not graph._order_ok or src._seq < dst._seq:
        return
    if src is dst:
        mark_unknown(graph)
        return
    found = _search(graph, src, dst)
    if found is None:
        mark_unknown(graph)
        return
    backward, nodes = found
    ordered = sorted(nodes, key=label)
    move(graph, ordered, dst if backward else src, before=backward)


def would_create_cycle(graph: Graph, src: Node, dst: Node) -> bool:
    """Whether `dst` (a direct node of `graph`) depending on `src` makes a cycle; `graph`'s
    order must be established."""
    if src is dst:
        return True
    if src._seq < dst._seq:
        return False
    return _search(graph, src, dst) is None


def reaches(graph: Graph, start: Node, target: Node) -> bool:
    """Whether `target` depends on `start` (both direct nodes of `graph`), by a plain search
    from `start`: right whatever the order holds, so what answers when a cycle broke it."""
    if start is target:
        return True
    stack, seen = [start], {start}
    while stack:
        for succ in successors(graph, stack.pop()):
            if succ is target:
                return True
            if succ not in seen:
                seen.add(succ)
                stack.append(succ)
    return False


# -- establishing the order -----------------------------------------------------------
def in_order(graph: Graph, order: Iterable[Node]) -> bool:
    """True when every node's dependencies have smaller labels (labels grow along the list)."""
    for node in order:
        seq = node._seq
        for producer in node._inputs:
            if producer is not None and producer[0]._seq >= seq and producer[0]._graph is graph:
                return False
        if node._ctrl_in and any(p._seq >= seq for p in node._ctrl_in):
            return False
        # Loaded nodes still equal to their proto own no subgraphs (those are never clean).
        if node._attrs and not node._clean:
            for dep in graph._dependencies(node):
                if dep._seq >= seq:
                    return False
    return True


def establish(graph: Graph) -> None:
    """Make the list a topological order (stable: nodes already in order keep it), once;
    a cycle raises `GraphError` naming its nodes and leaves the order as it was."""
    order = list(walk(graph))
    journal = graph.root_graph()._journal
    if not in_order(graph, order):
        sorted_order = graph._kahn(order, {node: i for i, node in enumerate(order)})
        old = [(node, node._seq) for node in order]
        _relink(graph, [(node, GAP * i) for i, node in enumerate(sorted_order)])
        if journal.recording:
            def undo() -> None:
                _relink(graph, old)
                graph._order_ok = False

            journal.record(undo)
    elif journal.recording and not graph._order_ok:
        # Known good only for the graph as it is now: a rollback may bring back an edge
        # (a body's outer read) that the order does not satisfy, so it is unknown again.
        journal.record(lambda: setattr(graph, "_order_ok", False))
    graph._order_ok = True
    graph._topo = graph._typed = None


def _relink(graph: Graph, labelled: list[tuple[Node, int]]) -> None:
    root = graph.root_graph()
    # cached lists follow the links
    graph._topo = graph._typed = root._all_nodes = root._all_subgraphs = None
    graph._head = graph._tail = None
    for node, label in labelled:
        link_after(graph, node, graph._tail, label)
