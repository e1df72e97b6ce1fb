"""Calling a hook that may only read the graph (`meet_requirements`, a `replacement`
building a graph of its own), and, when it changed the graph anyway, saying what it changed
first: the node, the kind of change, and the line of the user's code that made it. A change
listener keeps only the first change; a call that changes nothing (every call but a
mistaken one, once per match) pays a subscription and a counter comparison.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ge.errors import RewriteError
from ge.graph.journal import ChangeKind
from ge.graph.places import ir_node_label
from ge.passes.source import blame, caller_location

if TYPE_CHECKING:
    from ge.graph import Graph

__all__ = ["read_only_call"]

def read_only_call(hook: Callable[..., Any], graph: Graph, *args: Any) -> Any:
    """Call a hook that is asked about the graph and may only read it: a change it makes
    would be neither checked as a rewrite nor counted in the pass's outcome, so it fails
    the pass at the hook's line, saying what the first change was (`ge passes explain` asks
    hooks through it too, to say the same)."""
    before = graph.mutation_count
    first = _FirstChange(graph)
    unsubscribe = graph.subscribe(first)
    journal = graph.root_graph()._journal
    watching, journal.watcher = journal.watcher, first.mutated
    try:
        value = hook(*args)
    finally:
        journal.watcher = watching
        unsubscribe()
    if graph.mutation_count != before:
        name = getattr(hook, "__name__", "the hook")
        raise blame(RewriteError(
            f"{name} changed graph {graph.name!r}{first.described}; it may only read the "
            f"graph (the engine makes the change from what replacement returns)"), hook)
    return value


class _FirstChange:
    """A change listener of `graph` keeping the first change it is told of, as words, with
    the line of the user's code on the stack when it was made; and the journal's watcher
    while the hook runs (`mutated`), which also sees the changes no listener is told of
    (metadata, names, anchor attributes: `set_metadata` said neither what nor where)."""

    __slots__ = ("described", "graph", "mutations")

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        #: ": first, it set attribute 'axis' of Softmax node 's', at p.py:12", or "" before
        self.described = ""
        self.mutations = 0  # (told by the watcher; a listener is told after it)

    def mutated(self) -> None:
        """The journal's watcher: the first change, if no listener is told of it, is said
        by the line that made it."""
        self.mutations += 1
        if self.mutations == 1:
            where = caller_location()
            self.described = (f": first, it made a change (of metadata, a name or an "
                              f"anchor's attribute) at {where}" if where is not None else "")

    def __call__(self, kind: ChangeKind, node: Any, index: int) -> None:
        if self.mutations > 1:
            return  # (a later change than the first)
        self.mutations += 1  # (told once: the watcher's count of the same change ends here)
        label = ir_node_label(node)
        if kind is ChangeKind.ATTR_CHANGED:
            what = self._attribute_change(node, label)
        else:
            what = {
                ChangeKind.NODE_ADDED: f"added {label}",
                ChangeKind.NODE_REMOVED: f"removed {label}",
                ChangeKind.INPUT_CHANGED: f"rewired input {index} of {label}",
                ChangeKind.OUTPUT_DESC_CHANGED: f"set the desc of output {index} of {label}",
            }.get(kind, f"changed {label}")
        where = caller_location()  # (the user's line on the stack that made the change)
        at = f", at {where}" if where is not None else ""
        self.described = f": first, it {what}{at}"

    def _attribute_change(self, node: Any, label: str) -> str:
        """What an ATTR_CHANGED did: set or removed which attribute (the graph names it
        while its listeners are told)."""
        key = self.graph.changing_attribute
        if key is None:
            return f"set an attribute of {label}"
        verb = "set" if node.has_attr(key) else "removed"
        return f"{verb} attribute {key!r} of {label}"
