"""The mutation journal behind `Graph.transaction()`.

Every mutation of a graph (and of its subgraphs, which share the root's journal) records how
to undo itself while a transaction is open; when an exception escapes the transaction, the
undo steps run newest first and the graph is exactly as it was when the transaction began.
With no transaction open, recording costs one attribute test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["Journal"]

UndoStep = Callable[[], None]


class Journal:
    """Undo log of one root graph; transactions nest (each is a savepoint)."""

    __slots__ = ("_replaying", "_steps", "mutation_count", "structure_version")

    def __init__(self) -> None:
        self._steps: list[UndoStep] | None = None
        self._replaying = False
        # Bumped on every mutation / every change of nodes or edges (topology caches key on it).
        self.mutation_count = 0
        self.structure_version = 0

    @property
    def recording(self) -> bool:
        return self._steps is not None and not self._replaying

    def record(self, undo: UndoStep) -> None:
        """Remember how to undo the mutation just made (no-op outside a transaction)."""
        if self._steps is not None and not self._replaying:
            self._steps.append(undo)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        outermost = self._steps is None
        if outermost:
            self._steps = []
        assert self._steps is not None
        savepoint = len(self._steps)
        try:
            yield
        except BaseException:
            self._rollback(savepoint)
            raise
        finally:
            if outermost:
                self._steps = None

    def _rollback(self, savepoint: int) -> None:
        steps = self._steps
        assert steps is not None
        self._replaying = True
        try:
            while len(steps) > savepoint:
                steps.pop()()
        finally:
            self._replaying = False
