"""The naming authority of a graph: the one place that picks node and value names.

Every node and value name the IR makes (nodes added without a name, copies made by
`copy_in`, nodes read from ONNX without a usable name) comes from here, so names are unique
in the same way everywhere: a node name within its graph, a value name within its graph,
every graph it can read and every graph inside it. ONNX forbids a body value to shadow an
outer one in either direction of the nesting: a value made in a body must not reuse a name
of the graphs around it, nor a value made in an enclosing graph one of its bodies' names
(two sibling bodies may share names: neither reads the other). The counter is part of a
transaction's state, so a rolled-back pass leaves the names of later ones unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ge.graph.graph import Graph

__all__ = ["NameAuthority"]


class NameAuthority:
    """Unique names for the nodes and values of one graph."""

    __slots__ = ("_counter", "_graph")

    def __init__(self, graph: Graph) -> None:
        self._graph = graph
        self._counter = 0

    def node_name(self, base: str) -> str:
        """`base` if no node of the graph has it, else `base_<n>` with a fresh n."""
        taken = self._graph._by_name
        if base not in taken:
            return base
        self._keep()
        while True:
            self._counter += 1
            candidate = f"{base}_{self._counter}"
            if candidate not in taken:
                return candidate

    def onnx_node_name(self, wanted: str, op_type: str) -> str:
        """The name an ONNX node had when it is usable (non-empty, unique), else a new one."""
        if wanted and wanted not in self._graph._by_name:
            return wanted
        return self.node_name(wanted or op_type)

    def value_taken(self, name: str) -> bool:
        """Whether the graph, a graph whose values it reads, or a graph nested in it (at any
        depth) holds a value `name`: a new value of that name would shadow or be shadowed."""
        graph: Graph | None = self._graph
        while graph is not None:  # a plain loop: this runs for every node created
            if name in graph._values:
                return True
            parent = graph._parent_node
            graph = parent._graph if parent is not None else graph._declared_parent
        return _held_inside(self._graph, name)

    def value_name(self, base: str) -> str:
        """`base` if no value in scope has it, else `base_<n>` with the smallest free n."""
        if not self.value_taken(base):
            return base
        n = 1
        while self.value_taken(f"{base}_{n}"):
            n += 1
        return f"{base}_{n}"

    def copy_from(self, other: NameAuthority) -> None:
        """Continue numbering where `other` is (a clone names new nodes as its source would)."""
        self._counter = other._counter

    def _keep(self) -> None:
        """Inside a transaction, put the counter back on rollback."""
        journal = self._graph.root_graph()._journal
        if journal.recording:
            journal.record_once((id(self), "counter"), self._restorer)

    def _restorer(self) -> Callable[[], None]:
        counter = self._counter

        def restore() -> None:
            self._counter = counter

        return restore


def _held_inside(graph: Graph, name: str) -> bool:
    """Whether a graph nested in `graph` (a body of one of its nodes, or of theirs, or a
    body being built for it) holds a value `name`.

    The names held inside are collected once and kept while the journal's `inner_version`
    stays (no body changed, joined or left): a main graph of thousands of bodies asked for
    every constant a fold makes walked them all each time.
    """
    if not graph._inner:
        return False  # the common case: a graph without bodies
    journal = graph.root_graph()._journal
    kept = graph._inner_names
    if kept is None or kept[0] is not journal or kept[1] != journal.inner_version:
        names: set[str] = set()
        _collect_inside(graph, names)
        kept = graph._inner_names = (journal, journal.inner_version, frozenset(names))
    return name in kept[2]


def _collect_inside(graph: Graph, names: set[str]) -> None:
    """Add the value names of every graph nested in `graph` to `names`.

    Walks `Graph._inner`, which records every graph placed inside another; an entry no
    longer inside (its owner node was removed, or it went elsewhere) is dropped on the way.
    Whatever puts it back inside (a rollback included) records it again.
    """
    stale: list[Graph] = []
    for sub in graph._inner:
        if sub.parent_graph is not graph:
            stale.append(sub)
        else:
            names.update(sub._values)
            if sub._inner:
                _collect_inside(sub, names)
    for sub in stale:
        del graph._inner[sub]
