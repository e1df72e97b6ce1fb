"""Why a pattern does (or does not) match: the matcher's search, told as it went.

`explain(pass_or_class, graph)` runs a `PatternFusionPass`'s patterns the way the engine does
(built at the graph's opset, swept over the candidates of each pattern's anchor, the
producer of its first output, in the graph's order) without rewriting anything, and tells
for every candidate how far the match got: the number of pattern nodes bound (pattern
inputs included) and the *first* check that failed among those made with the most bindings,
stated concretely (the op types, the input counts, the outside consumer, the constant
values, the attribute, the two producers of one pattern input), or, for a full match, what
the engine does next: `meet_requirements` (False, or the exception it raised), the cycle
check, and the rewrite. A check that may have been decided on missing information (an
unknown desc where `meet_requirements` looked, an attribute default without a schema)
carries a warning.

Like `find_matches`, a node used by an earlier accepted match (of this pattern or an
earlier one) is not matched again, and matches that only an earlier rewrite would create
are not seen. The graph is explained as given and left as it was (a hook that changes it
is rolled back); `ge.passes.explain_stage.prepare_graph` brings a loaded model into the
state the pass's stage sees (inferred, unless the stage is `BeforeInferShape`), as
`ge passes explain` does. A decompose pass is explained by `ge.passes.explain_decompose`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ge.errors import GeError, PatternError
from ge.graph import DATA, Graph, Node
from ge.graph.places import BodyOwner, body_owner, node_named
from ge.ops.schemas import normalize_domain
from ge.passes.candidates import candidates
from ge.passes.context import PassContext
from ge.passes.explain_functions import FunctionOps, function_ops
from ge.passes.explain_hooks import (
    ask,
    describe_desc,
    missing_descs_warning,
    odd_answer_note,
    refusal,
    runs_before_inference,
    value_symbols,
)
from ge.passes.explain_reasons import Reason, node_label, op_label, rejection_reason
from ge.passes.matcher import (
    _DATA,
    CompiledPattern,
    Match,
    MatchResult,
    PatternNode,
    compile_pattern,
    is_constant,
)
from ge.passes.pass_patterns import collect_patterns, matcher_config
from ge.passes.rewrite import Region
from ge.passes.source import at_user_line
from ge.passes.stage import PassStage
from ge.passes.tracing import TracingMatcher

__all__ = [
    "Binding",
    "CandidateExplanation",
    "PatternExplanation",
    "Reason",
    "explain",
    "infer_shapes_for_explain",
]

@dataclass(frozen=True)
class Binding:
    """One pattern node and what it is bound to: a target node, or for a pattern input
    (`Data`) the producer output it stands for (`target`, `output`)."""

    pattern_node: str
    pattern_type: str
    target: str
    output: int | None = None  # the producer's output, for a pattern input

    def __str__(self) -> str:
        where = f"{self.target}:{self.output}" if self.output is not None else self.target
        return f"{self.pattern_node}={where}"

    def as_dict(self) -> dict[str, Any]:
        return {"pattern_node": self.pattern_node, "pattern_type": self.pattern_type,
                "target": self.target, "output": self.output}


@dataclass
class CandidateExplanation:
    """One candidate of a pattern (a target node of the anchor's op type): how far the match
    got (`depth` of `size` pattern nodes bound, and which), and why it is not rewritten
    (`reason`), or `reason` None: a match the engine would rewrite."""

    graph: str
    candidate: str
    candidate_type: str
    depth: int
    size: int
    bindings: list[Binding]
    reason: Reason | None
    warnings: list[str] = field(default_factory=list)
    matched_nodes: list[str] = field(default_factory=list)  # of a full match
    role: str = "anchor"  # with `node=`: "anchor", or "non-anchor" when it binds the node
    #: what the compilation warns of about the hook's answer (one that is no bool)
    notes: list[str] = field(default_factory=list)

    @property
    def rewritten(self) -> bool:
        """Whether the engine would rewrite this match."""
        return self.reason is None

    @property
    def matched(self) -> bool:
        """Whether the matcher found the whole pattern here (rewritten or not)."""
        return self.depth == self.size

    def summary(self) -> str:
        if self.reason is None:
            return f"full match, would be rewritten: {', '.join(self.matched_nodes)}"
        return self.reason.message

    def as_dict(self) -> dict[str, Any]:
        return {"graph": self.graph, "candidate": self.candidate, "type": self.candidate_type,
                "role": self.role, "depth": self.depth, "size": self.size,
                "matched": self.matched, "rewritten": self.rewritten,
                "reason": None if self.reason is None else self.reason.as_dict(),
                "bindings": [b.as_dict() for b in self.bindings],
                "matched_nodes": list(self.matched_nodes), "warnings": list(self.warnings),
                "notes": list(self.notes)}


@dataclass
class PatternExplanation:
    """What one pattern of the pass does on one graph: its anchor, every candidate explained
    (in the graph's order), and notes (no candidate, the pattern is invalid); for a body,
    the node owning it (`owner`); for the root graph, the model-local functions whose
    bodies hold nodes of the anchor's op type, which the pass does not see (`functions`)."""

    pattern: str
    graph: str
    anchor: str  # the pattern node producing the first output
    anchor_type: str
    anchor_domain: str = ""
    candidates: list[CandidateExplanation] = field(default_factory=list)
    size: int = 0
    note: str | None = None
    error: str | None = None  # the PatternError of an invalid pattern
    node: str | None = None  # the target node asked about (`explain(..., node=)`)
    owner: BodyOwner | None = None
    functions: list[FunctionOps] = field(default_factory=list)

    @property
    def rewrites(self) -> list[CandidateExplanation]:
        """The matches the engine would rewrite, in the graph's order."""
        return [c for c in self.candidates if c.rewritten]

    @property
    def closest(self) -> list[CandidateExplanation]:
        """The candidates not rewritten, deepest first; among equals, one whose operands the
        pattern may hold in the other order first (the author's intent, more likely than a
        node that merely shares the operator), then the graph's order."""
        return sorted((c for c in self.candidates if not c.rewritten),
                      key=lambda c: (-c.depth, not (c.reason is not None
                                                    and c.reason.details.get("other_order"))))

    @property
    def warnings(self) -> list[str]:
        return [w for c in self.candidates for w in c.warnings]

    def as_dict(self, top: int | None = None) -> dict[str, Any]:
        closest = self.closest
        shown = closest if top is None else closest[:top]
        rewrites = self.rewrites
        return {
            "pattern": self.pattern, "graph": self.graph,
            "anchor": {"node": self.anchor, "type": self.anchor_type,
                       "domain": self.anchor_domain},
            "size": self.size, "node": self.node, "candidates": len(self.candidates),
            "rewrites": [c.as_dict() for c in (rewrites if top is None else rewrites[:top])],
            "rewrite_count": len(rewrites),
            "closest": [c.as_dict() for c in shown], "not_rewritten": len(closest),
            "note": self.note, "error": self.error,
            "owner": None if self.owner is None else self.owner.as_dict(),
            "functions": [f.as_dict() for f in self.functions],
        }


# -- entry points ---------------------------------------------------------------------------
def infer_shapes_for_explain(graph: Graph) -> str | None:
    """Infer the model's shapes as the compiler does before `AfterInferShape` passes (strict,
    in a transaction); None when it worked, else why not (the graph is left as it was)."""
    from ge.compiler.steps import infer_shape

    try:
        infer_shape(graph.root_graph(), {})
    except GeError as err:
        return f"[{err.code}] {err.message}"
    return None


def explain(pass_or_class: Any, graph: Graph, node: str | Node | None = None, *,
            context: PassContext | None = None, subgraphs: bool = True,
            stage: PassStage | str | None = None) -> list[PatternExplanation]:
    """Explain what a `PatternFusionPass` matches in `graph` (and, with `subgraphs`, in its
    live subgraphs, where the engine runs it too): one `PatternExplanation` per pattern and
    graph, in the engine's order.

    With `node` (a name or a node), only its graph is explained, and each pattern's
    candidates are those anchored at the node and those whose closest partial match (or
    match) binds it to another pattern node (`role` "non-anchor"); a note says when the node
    is not of the anchor's op type. `GraphError` when no such node exists.

    The graph is explained as given: a pass registered after `BeforeInferShape` sees it
    typed in a compilation (`explain_stage.prepare_graph` infers it as the CLI does); a
    refusal made on untyped values carries a warning, which for a `BeforeInferShape` pass
    says that a compilation gives it those values untyped too. `stage` is the pass's stage
    (default: the one its class is registered at).
    """
    from ge.passes.base import DecomposePass, PatternFusionPass

    instance = pass_or_class() if isinstance(pass_or_class, type) else pass_or_class
    if not isinstance(instance, PatternFusionPass):
        hint = (" (explain a DecomposePass with ge.passes.explain_decompose."
                "explain_decompose)" if isinstance(instance, DecomposePass) else "")
        raise TypeError("explain takes a PatternFusionPass subclass or instance, got "
                        f"{type(instance).__name__}{hint}")
    if not isinstance(graph, Graph):
        raise TypeError(f"explain takes a ge.graph.Graph, got {type(graph).__name__}")
    focus, graphs = explained_graphs(graph, node, subgraphs)
    context = context or PassContext(type(instance).__name__)
    found: list[PatternExplanation] = []
    before_inference = runs_before_inference(type(instance), stage)
    with changes_undone(graph):
        for target in graphs:
            explained = _Explainer(instance, target, context, before_inference).run()
            if focus is None and target is graph.root_graph():
                for e in explained:
                    if e.error is None:
                        e.functions = function_ops(graph, [(e.anchor_type, e.anchor_domain)])
            found += explained
    if focus is not None:
        found = [_focused(e, focus) for e in found]
    return found


def explained_graphs(graph: Graph, node: str | Node | None, subgraphs: bool
                     ) -> tuple[Node | None, list[Graph]]:
    """The node asked about (None when none is) and the graphs to explain: its graph, or
    `graph` and, with `subgraphs`, its live bodies, as the engine runs a pass on them."""
    focus = _find_node(graph, node, subgraphs) if node is not None else None
    if focus is not None:
        owner = focus.owner_graph
        assert owner is not None
        return focus, [owner]
    if subgraphs:
        return None, [graph, *(g for g in graph.get_all_subgraphs() if not g.is_orphan())]
    return None, [graph]


class _Rollback(Exception):
    """Leaves the transaction so that a hook that changed the graph is undone."""


@contextmanager
def changes_undone(graph: Graph) -> Iterator[None]:
    """Run the body (an explanation asking a pass's hooks) at the model's opsets, inside a
    transaction of the root graph that is rolled back when the body changed the graph: a
    hook may write to it, which the explanation reports and does not keep."""
    from ge.es.opset import opset_scope

    root = graph.root_graph()
    before = root.mutation_count
    try:
        with root.transaction(), opset_scope(root.opset_imports):
            yield
            if root.mutation_count != before:
                raise _Rollback
    except _Rollback:
        pass


def _find_node(graph: Graph, node: str | Node, subgraphs: bool) -> Node:
    from ge.errors import GraphError

    graphs = [graph, *(g for g in graph.get_all_subgraphs() if not g.is_orphan())] if (
        subgraphs) else [graph]
    if isinstance(node, Node):
        if node.owner_graph in graphs:
            return node
        raise GraphError(f"{node_named(node)} is not a node of graph {graph.name!r}",
                         nodes=[node.name])
    for g in graphs:
        if g.has_node(node):
            found = g.find_node_by_name(node)
            if found.type == DATA:  # the graph input, or an operator the model names so?
                return _written_as(graphs, node) or found
            return found
    written = _written_as(graphs, node)
    if written is not None:
        return written
    raise GraphError(f"graph {graph.name!r} has no node named {node!r}", nodes=[node])


def _written_as(graphs: list[Graph], name: str) -> Node | None:
    """The one operator the model writes as `name` where ge named it otherwise (a node named
    like a graph input is `x_1` in ge and `x` in the file, and in ge's error messages)."""
    from ge.graph.export_names import written_name

    found = [n for g in graphs for n in g.get_direct_nodes()
             if n.name != name and n.type != DATA and written_name(n) == name]
    return found[0] if len(found) == 1 else None


def _focused(explanation: PatternExplanation, focus: Node) -> PatternExplanation:
    kept = []
    for cand in explanation.candidates:
        if cand.candidate == focus.name:
            kept.append(cand)
        elif any(b.output is None and b.target == focus.name for b in cand.bindings):
            cand.role = "non-anchor"
            kept.append(cand)
    explanation.candidates = kept
    explanation.node = focus.name
    if explanation.error is None and (focus.type != explanation.anchor_type or normalize_domain(
            focus.domain) != explanation.anchor_domain):
        anchor = op_label(explanation.anchor_type, explanation.anchor_domain)
        note = (f"{node_label(focus)} is not a candidate: the "
                f"pattern's anchor {explanation.anchor!r} is of op type {anchor}")
        if kept:
            note += f"; {len(kept)} candidate(s) bind it to another pattern node"
        else:
            note += "; no candidate's closest match binds it"
        explanation.note = note
    return explanation


# -- the sweep ------------------------------------------------------------------------------
class _Explainer:
    """One pass on one graph: every pattern, every candidate."""

    def __init__(self, instance: Any, graph: Graph, context: PassContext,
                 before_inference: bool) -> None:
        self.instance = instance
        self.graph = graph
        self.context = context
        self.before_inference = before_inference
        self.taken: dict[Node, tuple[str, str]] = {}  # node -> (pattern, candidate) taking it

    def run(self) -> list[PatternExplanation]:
        config = matcher_config(self.instance)
        found = []
        try:
            patterns = collect_patterns(self.instance)
        except GeError as err:  # (a pattern the es call refused: trial AK had no line)
            at_user_line(err)
            raise
        for pattern in patterns:
            try:
                compiled = compile_pattern(pattern, config)
            except PatternError as err:
                found.append(PatternExplanation(pattern.name, self.graph.name, "-", "-",
                                                error=err.message,
                                                owner=body_owner(self.graph)))
                continue
            found.append(self._pattern(compiled))
        return found

    def _pattern(self, compiled: CompiledPattern) -> PatternExplanation:
        matcher = TracingMatcher(compiled, self.graph)
        root = compiled.root
        explanation = PatternExplanation(compiled.name, self.graph.name, root.node.name,
                                         root.type, root.domain, size=len(compiled.nodes),
                                         owner=body_owner(self.graph))
        found = candidates(self.graph, [(root.type, root.domain)])
        if not found:
            explanation.note = (f"no candidate: graph {self.graph.name!r} has no "
                                f"{op_label(root.type, root.domain)} node (the op type of the "
                                f"pattern's anchor {root.node.name!r})")
        for candidate in found:
            explanation.candidates.append(self._candidate(matcher, candidate))
        return explanation

    def _candidate(self, matcher: TracingMatcher, candidate: Node) -> CandidateExplanation:
        compiled = matcher.pattern
        size = len(compiled.nodes)
        explained = CandidateExplanation(self.graph.name, candidate.name, candidate.type, 0,
                                         size, [], None)
        # As the engine: the first full binding the pass accepts; if none, the first refused.
        matcher.deepest = None
        match: Match | None = None
        reason: Reason | None = None
        for found in matcher.matches_at(candidate):
            found_reason = self._accept(found, explained.warnings, explained.notes)
            if match is None or found_reason is None:
                match, reason = found, found_reason
            if found_reason is None:
                break
        if match is None:
            rejection = matcher.deepest
            assert rejection is not None  # a failed search failed at some check
            explained.depth = rejection.depth
            explained.bindings = _bindings(compiled, rejection.bound, rejection.data)
            explained.reason = rejection_reason(matcher, rejection, explained.warnings)
            if candidate in self.taken:  # the engine never gets here: the node is gone
                explained.reason = self._overlap(candidate)
            return explained
        explained.depth = size
        explained.bindings = _bindings(compiled, match.bindings,
                                       {p: match.inputs[p.index] for p in compiled.inputs})
        explained.matched_nodes = [n.name for n in match.nodes]
        explained.reason = reason
        if explained.reason is None:
            for n in match.nodes:
                if not is_constant(n):
                    self.taken[n] = (compiled.name, candidate.name)
        return explained

    def _overlap(self, node: Node) -> Reason:
        pattern, candidate = self.taken[node]
        return Reason("overlap", f"{node_label(node)} is already part of the match of pattern "
                      f"{pattern} at {candidate!r}, which is rewritten first", None, node.name,
                      (node.name, candidate), {"pattern": pattern, "candidate": candidate})

    def _accept(self, match: Match, warnings: list[str], notes: list[str]) -> Reason | None:
        """After a full match, what the engine checks before rewriting (as `find_matches`)."""
        anchor = match.outputs[0][0]
        nodes = [n for n in match.bindings.values() if not is_constant(n)]
        overlap = next((n for n in nodes if n in self.taken), None)
        if overlap is not None:
            return self._overlap(overlap)
        result = MatchResult(match)
        self.context.set_error_message("")
        try:
            answer = ask(self.instance.meet_requirements, (result, self.context),
                         type(self.instance), match.graph)
        finally:
            result._invalidate()
        odd = odd_answer_note(answer)
        if odd is not None:
            notes.append(odd)
        if not answer.accepted:
            warning = missing_descs_warning(
                (n for n in match.nodes if not is_constant(n)), answer,
                before_inference=self.before_inference)
            if warning is not None:
                warnings.append(warning)
            return refusal(answer, "match", _boundary(match), self.context.get_error_message(),
                           symbols=value_symbols(match.inputs), anchor=anchor.name)
        cycle = _cycle(match.region())
        if cycle is not None:
            producer, consumer = cycle
            reader = node_label(consumer)
            via = (f"{reader} both reads the match and feeds it" if consumer is producer
                   else f"{reader} reads the match and leads to {node_label(producer)}, which "
                   "feeds it")
            return Reason(
                "cycle", f"the rewrite is skipped: it would create a cycle, as {via}",
                None, anchor.name, (consumer.name, producer.name),
                {"consumer": consumer.name, "producer": producer.name})
        return None


def _boundary(match: Match) -> dict[str, str]:
    """Each pattern input with the type and shape of the value bound to it (what a
    `meet_requirements` usually looks at)."""
    found = {}
    for pnode in match.pattern.inputs:
        node, out = match.inputs[pnode.index]
        found[pnode.node.name] = describe_desc(node.get_output_desc(out))
    return found


def _cycle(region: Region) -> tuple[Node, Node] | None:
    """The (outside producer, outside consumer) pair that makes the region's rewrite a cycle
    (`ge.passes.rewrite.would_create_cycle`, with its witnesses)."""
    graph = region.graph
    producers = [p for p in region.outside_producers() if p._graph is graph]
    for consumer in region.outside_consumers() if producers else ():
        for producer in producers:
            if graph.would_create_cycle(producer, consumer):
                return producer, consumer
    return None


def _bindings(compiled: CompiledPattern, bound: dict[PatternNode, Node],
              data: dict[PatternNode, tuple[Node, int]]) -> list[Binding]:
    order = {n: i for i, n in enumerate(compiled.pattern.get_graph().topological_order())}
    found = []
    for pnode in sorted(compiled.nodes.values(), key=lambda p: order.get(p.node, 0)):
        if pnode.kind == _DATA:
            producer = data.get(pnode)
            if producer is not None:
                found.append(Binding(pnode.node.name, pnode.type, producer[0].name,
                                     producer[1]))
        elif pnode in bound:
            found.append(Binding(pnode.node.name, pnode.type, bound[pnode].name))
    return found
