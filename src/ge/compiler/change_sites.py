"""Where in a pass's own code each node was last changed, for the error about a graph the
pass left invalid: the check runs after `run()` returned, so no traceback holds the line
that added the dangling node or rewired the edge, and the error pointed at the `class`
line. While a plugin's `run()` edits the graph (a FusionBasePass: pattern and decompose
passes change it through the engine, whose errors point at their hooks), a listener of the
graph's changes notes the innermost line of the pass's file on the stack, per node.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING

from ge.errors import SourceLocation, ValidationProblem

if TYPE_CHECKING:
    from ge.graph import Graph, Node

__all__ = ["ChangeSites", "change_sites"]

#: How many frames above a change are looked at for the pass's file.
_DEPTH = 40


class ChangeSites:
    """Per node, the line of the pass's file that last changed it."""

    def __init__(self, file: str) -> None:
        self._file = file
        self._lines: dict[Node, int] = {}
        self._by_name: dict[str, int] = {}  # (for a check naming nodes it had no object of)

    def record(self, kind: object, node: Node, index: object) -> None:
        """A graph change listener: note the line of the pass's file that made it."""
        frame: FrameType | None = sys._getframe(1)
        for _ in range(_DEPTH):
            if frame is None:
                return
            if frame.f_code.co_filename == self._file:
                self._lines[node] = self._by_name[node._name] = frame.f_lineno
                return
            frame = frame.f_back

    def lines(self) -> tuple[tuple[str, int], ...]:
        """(node name, line) of every node the pass changed, for its run's record."""
        return tuple(self._by_name.items())

    def location_of(self, problems: Iterable[ValidationProblem]) -> SourceLocation | None:
        """The line that last changed the first node of `problems` the pass changed: by the
        node where the problem has it (two bodies may each have a node of one name), else
        by name."""
        for problem in problems:
            found = [self._lines[n] for n in problem.subjects if n in self._lines]
            if not problem.subjects:
                found = [self._by_name[n] for n in problem.nodes if n in self._by_name]
            if found:
                return SourceLocation(self._file, found[0])
        return None


@contextmanager
def change_sites(root: Graph, file: str | None) -> Iterator[ChangeSites | None]:
    """Note the change sites of the pass defined in `file` while the block runs (None, and
    nothing noted, without a file)."""
    if file is None:
        yield None
        return
    sites = ChangeSites(file)
    unsubscribe: Callable[[], None] = root.subscribe(sites.record)
    try:
        yield sites
    finally:
        unsubscribe()
