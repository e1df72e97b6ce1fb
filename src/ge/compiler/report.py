"""What one compilation did: every step and pass invocation, the op histograms, skipped plugins.

A `CompileReport` is plain data: the CLI prints it as a table and writes `as_dict()` as
JSON (`ge compile --report FILE`); tests and tools read its fields.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ge.errors import GeError, SourceLocation
from ge.graph.graph import DATA, NET_OUTPUT
from ge.passes.status import RunOutcome

if TYPE_CHECKING:
    from ge.graph import Graph
    from ge.graph.node import Node

__all__ = ["CompileReport", "FixedPointRecord", "PassRunRecord", "StepRecord", "op_histogram",
           "op_label", "operator_count", "qualified_op"]


def operator_count(graph: Graph) -> int:
    """The direct nodes of `graph` but its `Data` and `NetOutput` nodes: what the reports
    count as nodes (constants included), in O(1)."""
    return len(graph) - graph.count_of_type(DATA) - graph.count_of_type(NET_OUTPUT)


@dataclass(frozen=True)
class PassRunRecord:
    """One invocation of one pass on one graph (the root or a subgraph)."""

    pass_name: str
    stage: str  # a plugin stage, or the engine step of a built-in pass ("OriginGraphOptimize")
    graph_name: str
    outcome: RunOutcome
    changed: bool
    seconds: float
    matches: int = 0  # pattern matches found / nodes a decomposition looked at
    rewrites: int = 0  # replacements the engine applied for the pass
    fusions: int = 0  # report_fuse calls (GE's fusion statistics)
    kind: str = ""  # "fusion_base" | "pattern" | "decompose"
    origin: str = ""  # where the pass came from ("built-in", file:line, entry point)
    nodes_before: int = 0  # operators of the graph it ran on (`operator_count`)
    nodes_after: int = 0
    round: int = 0  # the fixed-point round of the origin-graph optimisation (else 0)
    rolled_back: str | None = None  # the failure skipped under on_pass_failure="skip"
    location: SourceLocation | None = None  # the pass's class statement

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.pass_name, "stage": self.stage, "graph": self.graph_name,
            "kind": self.kind, "origin": self.origin, "outcome": self.outcome.value,
            "changed": self.changed, "matches": self.matches, "rewrites": self.rewrites,
            "fusions": self.fusions, "nodes_before": self.nodes_before,
            "nodes_after": self.nodes_after, "round": self.round,
            "rolled_back": self.rolled_back, "seconds": self.seconds,
        }


@dataclass(frozen=True)
class StepRecord:
    """One step of the pipeline (a stage or an engine step) on the whole model."""

    name: str
    seconds: float
    nodes_before: int  # the model's operators, subgraphs included (`operator_count`)
    nodes_after: int

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "seconds": self.seconds,
                "nodes_before": self.nodes_before, "nodes_after": self.nodes_after}


@dataclass(frozen=True)
class FixedPointRecord:
    """How the origin-graph optimisation ended: rounds run, and the passes still changing
    the graph in the last round when the cap was hit."""

    rounds: int
    converged: bool
    still_changing: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "converged": self.converged,
                "still_changing": list(self.still_changing)}


def op_label(node: Node) -> str:
    """The operator of `node` as reports, diffs and `ge inspect` name it (`qualified_op`)."""
    return qualified_op(node.type, node.domain)


def qualified_op(op_type: str, domain: str) -> str:
    """An op type, prefixed by its domain outside ONNX's own: `com.microsoft.Gelu` is not
    ONNX's `Gelu`."""
    return op_type if domain in ("", "ai.onnx") else f"{domain}.{op_type}"


def op_histogram(graph: Graph) -> dict[str, int]:
    """Operator counts of the whole model (subgraphs included), most frequent first, by
    `op_label`; structural nodes (Data, NetOutput) are left out, constants counted as
    `Const`."""
    counts = Counter(op_label(n) for n in graph.get_all_nodes()
                     if n.type not in (DATA, NET_OUTPUT))
    return dict(counts.most_common())


@dataclass
class CompileReport:
    """The compiled graph (compiled in place), every pass invocation, skipped plugins."""

    graph: Graph
    records: list[PassRunRecord] = field(default_factory=list)
    skipped_plugins: list[GeError] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    ops_before: dict[str, int] = field(default_factory=dict)
    ops_after: dict[str, int] = field(default_factory=dict)
    fixed_point: FixedPointRecord | None = None
    seconds: float = 0.0

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

    def by_pass(self) -> list[dict[str, Any]]:
        """One summary per (stage, pass) in run order: invocations over graphs and rounds
        added up. `node_delta` is the change in direct node count summed over them
        (negative: the pass left fewer nodes, positive: more, as a decomposition does); the
        counts say nothing of how many nodes were removed and how many added in between."""
        rows: dict[tuple[str, str], dict[str, Any]] = {}
        for r in self.records:
            row = rows.get((r.stage, r.pass_name))
            if row is None:
                row = rows[(r.stage, r.pass_name)] = {
                    "name": r.pass_name, "stage": r.stage, "kind": r.kind, "origin": r.origin,
                    "runs": 0, "changed": 0, "matches": 0, "rewrites": 0, "fusions": 0,
                    "node_delta": 0, "rolled_back": 0, "seconds": 0.0,
                }
            row["runs"] += 1
            row["changed"] += int(r.changed)
            row["matches"] += r.matches
            row["rewrites"] += r.rewrites
            row["fusions"] += r.fusions
            row["node_delta"] += r.nodes_after - r.nodes_before
            row["rolled_back"] += int(r.rolled_back is not None)
            row["seconds"] += r.seconds
        return list(rows.values())

    def summary(self) -> str:
        """One line, as `ge compile` ends its table: `nodes 145 → 84 (-61); 50 pass run(s),
        5 pass(es) changed the graph; origin-graph optimisation: 2 round(s); 54.7 ms`."""
        before, after = sum(self.ops_before.values()), sum(self.ops_after.values())
        line = (f"nodes {before} → {after} ({after - before:+d}); {len(self.records)} pass "
                f"run(s), {len(self.passes_that_changed())} pass(es) changed the graph")
        if self.fixed_point is not None:
            line += (f"; origin-graph optimisation: {self.fixed_point.rounds} round(s)"
                     + ("" if self.fixed_point.converged else ", no fixed point"))
        return f"{line}; {self.seconds * 1000:.1f} ms"

    def __repr__(self) -> str:
        return f"<CompileReport of graph {self.graph.name!r}: {self.summary()}>"

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data: the core of what `--report FILE` writes (which
        adds the paths, the verification, the hints and the warnings)."""
        return {
            "graph": self.graph.name,
            "seconds": self.seconds,
            "nodes_before": sum(self.ops_before.values()),
            "nodes_after": sum(self.ops_after.values()),
            "steps": [s.as_dict() for s in self.steps],
            "passes": self.by_pass(),
            "invocations": [r.as_dict() for r in self.records],
            "fixed_point": self.fixed_point.as_dict() if self.fixed_point else None,
            "ops_before": self.ops_before,
            "ops_after": self.ops_after,
            "skipped_plugins": [err.details() for err in self.skipped_plugins],
        }
