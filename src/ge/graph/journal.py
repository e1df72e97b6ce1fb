"""The mutation journal behind `Graph.transaction()`.

Every mutation of a graph (and of its subgraphs, which share the root's journal) records how
to undo itself while a transaction is open; when an exception escapes the transaction, the
undo steps run newest first and the graph is exactly as it was when the transaction began.
With no transaction open, recording costs one attribute test.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager
from enum import Enum
from typing import Any

__all__ = ["ChangeKind", "ChangeListener", "Journal"]

#: How to undo one mutation: a function of no arguments, or (as plain data, cheaper to make
#: and to keep: one tuple instead of a closure and its cells) a tuple `(function, *args)`.
UndoStep = Callable[[], None] | tuple[Any, ...]


class ChangeKind(Enum):
    """What happened to a node, as `Graph.subscribe` listeners are told."""

    NODE_ADDED = "node_added"
    NODE_REMOVED = "node_removed"
    INPUT_CHANGED = "input_changed"  # index: the input anchor; its producer changed
    ATTR_CHANGED = "attr_changed"
    # index: the output anchor whose desc was set; its consumers now read another type or shape
    OUTPUT_DESC_CHANGED = "output_desc_changed"


#: A change listener: `(kind, node, index)`; index is -1 unless the kind names an anchor.
ChangeListener = Callable[[ChangeKind, Any, int], None]


class Journal:
    """Undo log of one root graph; transactions nest (each is a savepoint)."""

    __slots__ = ("_marks", "_replaying", "_steps", "changing_attribute", "inner_version",
                 "listeners", "mutation_count", "removing_from", "structure_version",
                 "watcher")

    def __init__(self) -> None:
        self._steps: list[UndoStep] | None = None
        self._replaying = False
        # Keys of the steps recorded with `record_once`, one set per open transaction.
        self._marks: list[set[Hashable]] = []
        # Bumped on every mutation / every change of nodes or edges (topology caches key on it).
        self.mutation_count = 0
        self.structure_version = 0
        # Bumped on every change inside a body of the hierarchy, and whenever a body joins
        # or leaves a graph: what `NameAuthority` keeps of the names held inside a graph
        # stays valid while it does not move (a main graph's changes leave it alone).
        self.inner_version = 0
        # Change listeners of the hierarchy (`Graph.subscribe`); rollbacks notify them too.
        self.listeners: list[ChangeListener] = []
        # The name of the attribute whose change the listeners are being told of (an
        # ATTR_CHANGED, `notify_attribute`), else None: `Graph.changing_attribute`.
        self.changing_attribute: str | None = None
        # The graph the nodes listeners are being told are removed were in (a NODE_REMOVED,
        # `notify_removed`), else None: a removed node no longer points to one.
        self.removing_from: object | None = None
        # Called (no arguments) on every mutation, before its listeners are told, while a
        # hook that may only read the graph runs (`ge.passes.read_only`): it also sees the
        # changes no listener is told of (metadata, names, anchor attributes).
        self.watcher: Callable[[], None] | None = None

    def notify(self, kind: ChangeKind, node: object, index: int = -1) -> None:
        """Tell every listener about one change (a no-op without listeners)."""
        for listener in self.listeners:
            listener(kind, node, index)

    def notify_attribute(self, node: object, key: str) -> None:
        """Tell every listener that attribute `key` of `node` was set or removed
        (ATTR_CHANGED), `key` being `changing_attribute` while they are told. The callers
        ask only when there are listeners: an edit nobody listens to pays nothing."""
        self.changing_attribute = key
        try:
            for listener in self.listeners:
                listener(ChangeKind.ATTR_CHANGED, node, -1)
        finally:
            self.changing_attribute = None

    def notify_removed(self, graph: object, nodes: Iterable[object]) -> None:
        """Tell every listener that `nodes` were removed from `graph` (NODE_REMOVED each),
        `graph` being `removing_from` while they are told. Asked only when there are
        listeners."""
        self.removing_from = graph
        try:
            for node in nodes:
                for listener in self.listeners:
                    listener(ChangeKind.NODE_REMOVED, node, -1)
        finally:
            self.removing_from = None

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open (also while it rolls back)."""
        return self._steps is not None

    @property
    def recording(self) -> bool:
        return self._steps is not None and not self._replaying

    def record(self, undo: UndoStep) -> None:
        """Remember how to undo the mutation just made (no-op outside a transaction): a
        function to call, or a tuple `(function, *args)` to call as `function(*args)`."""
        if self._steps is not None and not self._replaying:
            self._steps.append(undo)

    def record_once(self, key: Hashable, make_undo: Callable[[], UndoStep]) -> None:
        """Record `make_undo()` unless a step under `key` was recorded in this transaction.

        For steps that restore an order (nodes, consumers, attributes): re-adding an item
        puts it last, so the first removal in a transaction records how to put the order back;
        that step runs after every later step has been undone, so one is enough.
        """
        if self._steps is not None and not self._replaying:
            marks = self._marks[-1]
            if key not in marks:
                marks.add(key)
                self._steps.append(make_undo())

    @contextmanager
    def transaction(self) -> Iterator[None]:
        outermost = self._steps is None
        if outermost:
            self._steps = []
        assert self._steps is not None
        savepoint = len(self._steps)
        count = self.mutation_count
        self._marks.append(set())
        try:
            yield
        except BaseException:
            self._rollback(savepoint)
            # A rolled-back graph is unchanged: "did anything change" must say so. The
            # structure version only grows, so caches made inside the transaction die.
            self.mutation_count = count
            self.structure_version += 1
            self.inner_version += 1
            raise
        finally:
            self._marks.pop()
            if outermost:
                self._steps = None

    def _rollback(self, savepoint: int) -> None:
        steps = self._steps
        assert steps is not None
        self._replaying = True
        try:
            while len(steps) > savepoint:
                step = steps.pop()
                if type(step) is tuple:
                    step[0](*step[1:])
                else:
                    step()  # type: ignore[operator]
        finally:
            self._replaying = False
