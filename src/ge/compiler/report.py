"""What one compilation did: each pass invocation with its outcome, and skipped plugins."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ge.errors import GeError
from ge.passes.status import RunOutcome

if TYPE_CHECKING:
    from ge.graph import Graph

__all__ = ["CompileReport", "PassRunRecord"]


@dataclass(frozen=True)
class PassRunRecord:
    """One invocation of one pass on one graph (the root or a subgraph)."""

    pass_name: str
    stage: str
    graph_name: str
    outcome: RunOutcome
    changed: bool
    seconds: float


@dataclass
class CompileReport:
    """The compiled graph (compiled in place), every pass invocation, skipped plugins."""

    graph: Graph
    records: list[PassRunRecord] = field(default_factory=list)
    skipped_plugins: list[GeError] = field(default_factory=list)

    def passes_that_changed(self) -> list[str]:
        """Names of the passes that changed the graph, each once, in run order."""
        return list(dict.fromkeys(r.pass_name for r in self.records if r.changed))
