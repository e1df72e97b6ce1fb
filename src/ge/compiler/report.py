"""What one compilation did: every step and pass invocation, the op histograms, skipped plugins.

A `CompileReport` is plain data: the CLI prints it as a table and writes `as_dict()` as
JSON (`ge compile --report FILE`); tests and tools read its fields.

Node counts are ONNX's (`NodeCounts`): a graph's nodes are what ONNX lists in its
`GraphProto.node` as ge writes it, its operators. Initializers and `Constant` operators,
which the IR holds alike as `Const` nodes and ge writes as initializers, are counted apart
as constants; the nodes of If/Loop/Scan bodies apart as subgraph nodes (ONNX lists them in
the owning node's attribute, not in the graph's `node`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ge.compiler.last_changes import LastChanges
from ge.compiler.pass_registry import BUILTIN_ORIGIN
from ge.errors import GeError, SourceLocation
from ge.graph.domains import qualified_op
from ge.graph.graph import CONST, DATA, NET_OUTPUT
from ge.graph.node import overload_of
from ge.passes.registry import PASS_KIND_DECOMPOSE, PASS_KIND_PATTERN_FUSION
from ge.passes.status import RunOutcome, note_refusal_reason

if TYPE_CHECKING:
    from ge.graph import Graph
    from ge.graph.node import Node

__all__ = ["CompileReport", "FixedPointRecord", "NodeCounts", "PassRunRecord", "StepRecord",
           "constant_count", "model_size", "node_counts", "op_histogram", "op_label",
           "operator_count", "overall_outcome"]


def operator_count(graph: Graph) -> int:
    """The nodes of `graph` as ONNX counts them in the graph ge writes (`len(graph.node)`):
    its direct nodes but `Data`, `NetOutput` and `Const` (an initializer or a `Constant`
    operator, counted by `constant_count`), in O(1)."""
    return (len(graph) - graph.count_of_type(DATA) - graph.count_of_type(NET_OUTPUT)
            - constant_count(graph))


def constant_count(graph: Graph) -> int:
    """The constants of `graph` (its direct `Const` nodes: initializers and `Constant`
    operators alike; an operator a custom domain names `Const` is none), in O(1)."""
    return graph.count_of_type(CONST)


@dataclass(frozen=True)
class NodeCounts:
    """A model's size as ONNX counts it: `nodes`, the operators of its main graph
    (`len(model.graph.node)` of the model ge writes); `subgraph_nodes`, those of its
    If/Loop/Scan bodies; `constants`, its initializers and `Constant` operators, bodies
    included (ge holds both as `Const` nodes and writes both as initializers)."""

    nodes: int = 0
    subgraph_nodes: int = 0
    constants: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"nodes": self.nodes, "subgraph_nodes": self.subgraph_nodes,
                "constants": self.constants}

    def text(self) -> str:
        """`143 node(s), 12 in subgraphs, 17 constant(s)` (no subgraph part without bodies):
        how `ge diff` and the HTML page state a model's size."""
        bodies = f", {self.subgraph_nodes} in subgraphs" if self.subgraph_nodes else ""
        return f"{self.nodes} node(s){bodies}, {self.constants} constant(s)"

    def change(self, after: NodeCounts) -> str:
        """`nodes 104 → 60 (-44), constants 41 → 24`, with `and 10 → 9 (-1) in subgraphs`
        after the nodes where either model has bodies: how a compilation states what it
        made of this model, in `ge compile`'s summary line and pyatc's success line."""
        line = f"nodes {_change(self.nodes, after.nodes)}"
        if self.subgraph_nodes or after.subgraph_nodes:
            line += f" and {_change(self.subgraph_nodes, after.subgraph_nodes)} in subgraphs"
        return f"{line}, constants {self.constants} → {after.constants}"


def node_counts(root: Graph, *, as_written: bool = True) -> NodeCounts:
    """The `NodeCounts` of `root`'s model as ge writes it (bodies owned by no node are not
    part of it): with the `Identity` nodes writing it adds (`added_identities`: a body's
    output that is an outer value needs one, which a pass removing it gives back). With
    `as_written=False`, of the graphs as they are (the steps' counts: what passes ran on;
    cheaper on a large model whose outputs a pass changed)."""
    return _node_counts(root, _added(root) if as_written else {})


def model_size(root: Graph) -> tuple[NodeCounts, dict[str, int]]:
    """`node_counts` and `op_histogram` of `root`'s model as ge writes it, the export's
    outputs planned once for both (a compilation's before and after)."""
    added = _added(root)
    return _node_counts(root, added), _op_histogram(root, added)


def _added(root: Graph) -> dict[Graph, int]:
    """The `Identity` nodes writing `root`'s model adds, per graph (`added_identities`)."""
    from ge.graph.export_names import added_identities

    return added_identities(root)


def _node_counts(root: Graph, added: dict[Graph, int]) -> NodeCounts:
    bodies = [g for g in root.get_all_subgraphs() if not g.is_orphan()]
    return NodeCounts(operator_count(root) + added.get(root, 0),
                      sum(operator_count(g) + added.get(g, 0) for g in bodies),
                      constant_count(root) + sum(constant_count(g) for g in bodies))


@dataclass(slots=True)
class PassRunRecord:
    """One invocation of one pass on one graph (the root or a subgraph).

    Plain data, never changed once made: not frozen because a compilation makes one per
    pass, graph and round (a model of 4,000 If bodies makes 178,000), and a frozen
    dataclass takes three times as long to create (2.4 against 0.8 µs)."""

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
    nodes_before: int = 0  # nodes of the graph it ran on (`operator_count`: no constants)
    nodes_after: int = 0
    round: int = 0  # the fixed-point round of the origin-graph optimisation (else 0)
    rolled_back: str | None = None  # the failure skipped under on_pass_failure="skip"
    location: SourceLocation | None = None  # the pass's class statement
    constants_before: int = 0  # constants of the graph it ran on (`constant_count`)
    constants_after: int = 0
    # where the graph is in the model ("" for the root, `if1.then_branch` for a body):
    # exporters give every body one name (`ge.graph.subgraphs.body_path`)
    graph_path: str = ""
    # matches (decompose: nodes) `meet_requirements` refused, and the reasons it gave with
    # `context.set_error_message`: (message, refusals) for the first distinct messages
    # (`ge.passes.status.note_refusal_reason`), in the order given
    refusals: int = 0
    refusal_reasons: tuple[tuple[str, int], ...] = ()
    # the bodies (by `graph_path`) whose nodes the run changed, whichever graph it ran on
    # (a root run editing a branch through `node.get_subgraphs()`), bodies it made included
    bodies_changed: tuple[str, ...] = ()
    # where the pass's own code changed the graph, for an error about what it did after it
    # returned (`--verify each-pass`): a plugin FusionBasePass's line that last changed
    # each node, by name (`ge.compiler.change_sites`); a plugin pattern or decompose pass's
    # `replacement`, which built what the engine put in (`edit_location`)
    edit_lines: tuple[tuple[str, int], ...] = ()
    edit_location: SourceLocation | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.pass_name, "stage": self.stage, "graph": self.graph_name,
            "graph_path": self.graph_path,
            "kind": self.kind, "origin": self.origin, "outcome": self.outcome.value,
            "changed": self.changed, "matches": self.matches, "rewrites": self.rewrites,
            "fusions": self.fusions, "nodes_before": self.nodes_before,
            "nodes_after": self.nodes_after, "constants_before": self.constants_before,
            "constants_after": self.constants_after, "round": self.round,
            "rolled_back": self.rolled_back, "seconds": self.seconds,
            "refusals": self.refusals,
            "refusal_reasons": _reasons_as_data(self.refusal_reasons),
            "bodies_changed": list(self.bodies_changed),
        }


def _reasons_as_data(reasons: Iterable[tuple[str, int]]) -> list[dict[str, Any]]:
    """Refusal reasons as the JSON report gives them: `[{"message": ..., "count": n}]`."""
    return [{"message": message, "count": count} for message, count in reasons]


@dataclass(frozen=True)
class StepRecord:
    """One step of the pipeline (a stage or an engine step) on the whole model."""

    name: str
    seconds: float
    nodes_before: int  # the main graph's nodes (`NodeCounts.nodes`)
    nodes_after: int
    subgraph_nodes_before: int = 0  # the bodies' nodes (`NodeCounts.subgraph_nodes`)
    subgraph_nodes_after: int = 0
    constants_before: int = 0  # the model's constants (`NodeCounts.constants`)
    constants_after: int = 0

    @classmethod
    def of(cls, name: str, seconds: float, before: NodeCounts, after: NodeCounts
           ) -> StepRecord:
        """The record of a step that took the model from `before` to `after`."""
        return cls(name, seconds, before.nodes, after.nodes, before.subgraph_nodes,
                   after.subgraph_nodes, before.constants, after.constants)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "seconds": self.seconds,
                "nodes_before": self.nodes_before, "nodes_after": self.nodes_after,
                "subgraph_nodes_before": self.subgraph_nodes_before,
                "subgraph_nodes_after": self.subgraph_nodes_after,
                "constants_before": self.constants_before,
                "constants_after": self.constants_after}


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


def overall_outcome(outcomes: list[str]) -> str:
    """A pass's outcome over its invocations (graphs, rounds): failed if one failed, success
    if one succeeded, else the first (not_changed)."""
    for outcome in ("failed", "success"):
        if outcome in outcomes:
            return outcome
    return outcomes[0] if outcomes else "not_changed"


def op_label(node: Node) -> str:
    """The operator of `node` as reports, diffs and `ge inspect` name it (`qualified_op`)."""
    return qualified_op(node.type, node.domain, overload_of(node))


def op_histogram(graph: Graph) -> dict[str, int]:
    """Operator counts of the whole model (subgraphs included), most frequent first, by
    `op_label`; structural nodes (Data, NetOutput) are left out, constants counted as
    `Const` (so its sum is no node count: `NodeCounts` is)."""
    return _op_histogram(graph, _added(graph))


def _op_histogram(graph: Graph, added: dict[Graph, int]) -> dict[str, int]:
    counts = Counter(op_label(n) for n in graph.get_all_nodes()
                     if n.type not in (DATA, NET_OUTPUT))
    identities = sum(added.values())
    if identities:  # (the model written has them: `node_counts`)
        counts["Identity"] += identities
    return dict(counts.most_common())


@dataclass
class CompileReport:
    """The compiled graph (compiled in place), every pass invocation, skipped plugins."""

    graph: Graph
    records: list[PassRunRecord] = field(default_factory=list)
    skipped_plugins: list[GeError] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    #: `op_histogram` of the model as given (as `counts_before`) and as compiled.
    ops_before: dict[str, int] = field(default_factory=dict)
    ops_after: dict[str, int] = field(default_factory=dict)
    fixed_point: FixedPointRecord | None = None
    #: The whole compilation: the steps, the graph dumps (`dump_seconds`) and the counting
    #: and checking around them.
    seconds: float = 0.0
    #: The model as given to `ge.compile`, also where it converted it first (`opset`,
    #: `inline_functions`; `steps` and `records` count the converted one), and as compiled.
    counts_before: NodeCounts = field(default_factory=NodeCounts)
    counts_after: NodeCounts = field(default_factory=NodeCounts)
    #: Which pass last changed each node (`LastChanges.blame`: the pass an error about a
    #: node of the compiled model names); not part of `as_dict`.
    last_changes: LastChanges = field(default_factory=LastChanges, repr=False,
                                      compare=False)
    #: `domain::op` of the operators nothing the compilation saw defines (its warning's;
    #: the custom-operator hint's "nothing registers them"); not part of `as_dict`.
    undefined_operators: tuple[str, ...] = field(default=(), repr=False, compare=False)
    #: Of `seconds`, the time spent writing graph dumps (`dump=`, GE's `DUMP_GE_GRAPH`):
    #: no step's time includes it, so without it the steps did not add up to `seconds`.
    dump_seconds: float = 0.0

    def rewrites_by_pass(self) -> dict[str, int]:
        """Per pass that rewrote anything: engine rewrites plus `report_fuse` calls."""
        counts: dict[str, int] = {}
        for record in self.records:
            done = record.rewrites + record.fusions
            if done:
                counts[record.pass_name] = counts.get(record.pass_name, 0) + done
        return counts

    def passes_that_changed(self, *, plugins_only: bool = False) -> list[str]:
        """Names of the passes that changed the graph, each once, in run order (a run rolled
        back changed nothing); `plugins_only`: not the built-in ones (what a compilation
        without verification leaves unchecked numerically)."""
        return list(dict.fromkeys(r.pass_name for r in self.records if r.changed and not (
            plugins_only and r.origin == BUILTIN_ORIGIN)))

    def by_pass(self) -> list[dict[str, Any]]:
        """One summary per (stage, pass) in run order: invocations over graphs and rounds
        added up. `node_delta` is the change in node count (`operator_count`) summed over
        them (negative: the pass left fewer nodes, positive: more, as a decomposition does),
        `constant_delta` that of the constants (folding makes some); the counts say nothing
        of how many were removed and how many added in between. `outcome` is the pass's
        over its invocations (`overall_outcome`). `refusals` are the matches its
        `meet_requirements` refused, `refusal_reasons` the first distinct reasons it gave
        (`context.set_error_message`), each `message` with its `count` over the runs."""
        rows: dict[tuple[str, str], dict[str, Any]] = {}
        outcomes: dict[tuple[str, str], list[str]] = {}
        reasons: dict[tuple[str, str], dict[str, int]] = {}
        for r in self.records:
            row = rows.get((r.stage, r.pass_name))
            if row is None:
                row = rows[(r.stage, r.pass_name)] = {
                    "name": r.pass_name, "stage": r.stage, "kind": r.kind, "origin": r.origin,
                    "runs": 0, "changed": 0, "matches": 0, "rewrites": 0, "fusions": 0,
                    "node_delta": 0, "constant_delta": 0, "rolled_back": 0, "seconds": 0.0,
                    "refusals": 0,
                }
            outcomes.setdefault((r.stage, r.pass_name), []).append(r.outcome.value)
            given = reasons.setdefault((r.stage, r.pass_name), {})
            for message, count in r.refusal_reasons:
                note_refusal_reason(given, message, count)
            row["runs"] += 1
            row["changed"] += int(r.changed)
            row["matches"] += r.matches
            row["rewrites"] += r.rewrites
            row["fusions"] += r.fusions
            row["node_delta"] += r.nodes_after - r.nodes_before
            row["constant_delta"] += r.constants_after - r.constants_before
            row["rolled_back"] += int(r.rolled_back is not None)
            row["seconds"] += r.seconds
            row["refusals"] += r.refusals
        for key, row in rows.items():
            row["outcome"] = overall_outcome(outcomes[key])
            row["refusal_reasons"] = _reasons_as_data(reasons[key].items())
        return list(rows.values())

    def refusal_notes(self) -> list[str]:
        """One line per plugin pass that rewrote nothing while its `meet_requirements`
        refused matches giving reasons (`context.set_error_message`), as `ge compile` prints
        them after its table: `SiluDiv8 refused 3 match(es): last dim 12 is not a multiple
        of 8 (x3)`, each reason kept (`by_pass`) with its count, then how many refusals gave
        none of them (a decompose pass's: `refused 4 node(s)`). The table's M/R/F said only
        3/0/0; `ge passes explain` says it per match. Built-in passes are ge's own and left
        out."""
        notes = []
        for row in self.by_pass():
            if (row["origin"] == BUILTIN_ORIGIN or row["rewrites"] or row["fusions"]
                    or not row["refusal_reasons"]):
                continue
            given = [f"{r['message']} (x{r['count']})" for r in row["refusal_reasons"]]
            rest = row["refusals"] - sum(r["count"] for r in row["refusal_reasons"])
            if rest > 0:
                given.append(f"{rest} more with no reason listed")
            what = "node(s)" if row["kind"] == PASS_KIND_DECOMPOSE else "match(es)"
            notes.append(f"{row['name']} refused {row['refusals']} {what}: "
                         + "; ".join(given))
        return notes

    def unmatched_plugin_passes(self) -> list[str]:
        """The plugin pattern passes that found no match in any of their runs: the table's
        M/R/F says only `-` for them (a pattern that never matches, an operand order the
        author got wrong), and `ge compile` says which command tells why (trial WW)."""
        return [row["name"] for row in self.by_pass()
                if row["origin"] != BUILTIN_ORIGIN and row["kind"] == PASS_KIND_PATTERN_FUSION
                and not row["matches"]]

    def silently_refusing_plugin_passes(self) -> list[tuple[str, int, str]]:
        """(name, refusals, "match(es)" or "node(s)") of each plugin pass that rewrote
        nothing while its `meet_requirements` refused every match it was asked about giving
        no reason: the table's M/R/F said `12/0/0` and nothing pointed to `ge passes
        explain` (trial Y; a reason given is a `refusal_notes` line instead)."""
        return [(row["name"], row["refusals"],
                 "node(s)" if row["kind"] == PASS_KIND_DECOMPOSE else "match(es)")
                for row in self.by_pass()
                if row["origin"] != BUILTIN_ORIGIN and row["refusals"]
                and not (row["rewrites"] or row["fusions"] or row["refusal_reasons"])]

    def summary(self) -> str:
        """One line, as `ge compile` ends its table: `nodes 104 → 60 (-44), constants 41 →
        24; 50 pass run(s), 5 pass(es) changed the graph; origin-graph optimisation: 2
        round(s); 54.7 ms` (the counts as `NodeCounts.change` states them), with `, of which
        dumps 31.2 ms` when writing graph dumps took more than a tenth of it."""
        line = (f"{self.counts_before.change(self.counts_after)}; {len(self.records)} "
                f"pass run(s), {len(self.passes_that_changed())} pass(es) changed the graph")
        if self.fixed_point is not None:
            line += (f"; origin-graph optimisation: {self.fixed_point.rounds} round(s)"
                     + ("" if self.fixed_point.converged else ", no fixed point"))
        line += f"; {self.seconds * 1000:.1f} ms"
        if self.dump_seconds > _SIGNIFICANT_SHARE * self.seconds:
            line += f", of which dumps {self.dump_seconds * 1000:.1f} ms"
        return line

    def __repr__(self) -> str:
        return f"<CompileReport of graph {self.graph.name!r}: {self.summary()}>"

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data: the core of what `--report FILE` writes (which
        adds the paths, the verification, the hints and the warnings)."""
        return {
            "graph": self.graph.name,
            "seconds": self.seconds,
            "dump_seconds": self.dump_seconds,
            "nodes_before": self.counts_before.nodes,
            "nodes_after": self.counts_after.nodes,
            "subgraph_nodes_before": self.counts_before.subgraph_nodes,
            "subgraph_nodes_after": self.counts_after.subgraph_nodes,
            "constants_before": self.counts_before.constants,
            "constants_after": self.counts_after.constants,
            "steps": [s.as_dict() for s in self.steps],
            "passes": self.by_pass(),
            "invocations": [r.as_dict() for r in self.records if not _quiet(r)],
            "quiet_body_invocations": sum(1 for r in self.records if _quiet(r)),
            "fixed_point": self.fixed_point.as_dict() if self.fixed_point else None,
            "ops_before": self.ops_before,
            "ops_after": self.ops_after,
            "skipped_plugins": [err.details() for err in self.skipped_plugins],
        }


def _quiet(record: PassRunRecord) -> bool:
    """A run on a subgraph body that found and changed nothing: counted in a report's
    `quiet_body_invocations`, not listed (a model of 7,500 If/Loop bodies made a report of
    160 MB, 98% of it such runs: trial DD). Its pass's summary counts it still."""
    return (bool(record.graph_path) and record.outcome is RunOutcome.NOT_CHANGED
            and not record.matches and record.rolled_back is None)


#: The share of a compilation's time above which the summary line says what dumps took.
_SIGNIFICANT_SHARE = 0.1


def _change(before: int, after: int) -> str:
    """`145 → 84 (-61)`."""
    return f"{before} → {after} ({after - before:+d})"
