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
    matches: int = 0  # pattern matches found / nodes a decomposition looked at
    rewrites: int = 0  # replacements the engine applied for the pass
    fusions: int = 0  # report_fuse calls (GE's fusion statistics)


@dataclass
class CompileReport:
    """The compiled graph (compiled in place), every pass invocation, skipped plugins."""

    graph: Graph
    records: list[PassRunRecord] = field(default_factory=list)
    skipped_plugins: list[GeError] = field(default_factory=list)

    def rewrites_by_pass(self) -> dict[str, int]:
        """Per pass that rewrote anything: engine rewrites plus `report_fuse` calls."""
        counts: dict[str, int] = {}
        for record in self.records:
            done = record.rewrites + record.fusions
            if done:
                counts[record.pass_name] = counts.get(record.pass_name, 0) + done
        return counts

    def passes_that_changed(self) -> list[str]:
        """Names of the passes that changed the graph, each once, in run order."""
        return list(dict.fromkeys(r.pass_name for r in self.records if r.changed))
