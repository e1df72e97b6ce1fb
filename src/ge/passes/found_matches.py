"""The matches a pattern pass would rewrite, found without rewriting (`find_matches`): the
engine's sweep order, `meet_requirements` and cycle checks, its warnings about the answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ge.errors import GeError, PassDefinitionWarning
from ge.graph import Graph, Node
from ge.passes.candidates import candidates
from ge.passes.context import PassContext
from ge.passes.execution import PassRun, answer_accepted, note_refusal
from ge.passes.matcher import CompiledPattern, Matcher, MatchResult, is_constant
from ge.passes.pass_patterns import compiled_patterns
from ge.passes.pattern import NodeIo
from ge.passes.rewrite import would_create_cycle
from ge.passes.source import at_user_line, definition_location, hook_location, warn_user
from ge.passes.status import odd_answer_text

__all__ = ["FoundMatch", "find_matches"]


@dataclass(frozen=True)
class FoundMatch:
    """A match `find_matches` reports: the pattern, the matched nodes, the captures."""

    pattern_name: str
    nodes: list[Node]
    captured: list[NodeIo]


def find_matches(pass_or_class: Any, graph: Graph, context: PassContext | None = None, *,
                 bodies: bool = False) -> list[FoundMatch]:
    """The matches a `PatternFusionPass` would rewrite in `graph` (its direct nodes; with
    `bodies`, then in each of its subgraphs at any depth, as a compilation runs the pass on
    each), without rewriting: per pattern in order, candidates in the graph's order,
    `meet_requirements` and the cycle check applied, a node used by an earlier match not
    matched again. Matches that only an earlier rewrite would create are not found. The
    patterns are built once for all the graphs (building them per body made `ge compile`'s
    opset hints take 36 s for a model of 7,500 bodies: trial DD)."""
    from ge.es.opset import opset_scope
    from ge.passes.base import PatternFusionPass

    instance = pass_or_class() if isinstance(pass_or_class, type) else pass_or_class
    if not isinstance(instance, PatternFusionPass):
        raise TypeError("find_matches takes a PatternFusionPass subclass or instance, got "
                        f"{type(instance).__name__}")
    if not isinstance(graph, Graph):
        raise TypeError(f"find_matches takes a ge.graph.Graph, got {type(graph).__name__}")
    context = context or PassContext(type(instance).__name__)
    run = PassRun(context, count_untyped=True)  # (its counts: what to warn of)
    with opset_scope(graph.root_graph().opset_imports):  # patterns built as a compile would
        # (a pattern that cannot be matched blamed on its method, attributes the matcher
        # does not compare warned of, as a compilation does)
        try:
            compiled = compiled_patterns(instance, run)
        except GeError as err:
            at_user_line(err)
            raise
    found: list[FoundMatch] = []
    below = [s for s in graph.get_all_subgraphs() if not s.is_orphan()] if bodies else []
    for each in [graph, *below]:
        found += _matches_in(instance, compiled, each, run)
    told = _answers_told(type(instance).__name__, run, found=bool(found))
    where = (hook_location(instance.meet_requirements)
             or definition_location(type(instance))) if told else None
    for text in told:
        warn_user(PassDefinitionWarning(f"find_matches: {text} (at {where})"), where)
    return found


def _answers_told(name: str, run: PassRun, *, found: bool) -> list[str]:
    """What `find_matches` warns of the answers of pass `name`'s meet_requirements, as a
    compilation does: answers that are no bool, and when nothing was found, None answers
    and refusals after reading untyped values (a graph loaded, not inferred: trial U)."""
    told = []
    if run.odd_answers:
        told.append(f"the meet_requirements of {name} returned " + odd_answer_text(
            run.first_odd_answer, run.first_odd_accepted,
            f" for {run.odd_answers} of {run.matches} match(es)"))
    if not found and run.none_answers:
        told.append(f"the meet_requirements of {name} returned None for {run.none_answers} "
                    f"of {run.matches} match(es), and None counts as False (a missing "
                    "return?)")
    if not found and run.untyped_refusals:
        told.append(f"{name} refused all {run.matches} match(es), {run.untyped_refusals} "
                    "after its meet_requirements read a value with no type or rank "
                    f"({run.first_untyped} first): the graph was not shape-inferred; "
                    "ge.ops.infer_shapes(graph) types it, as a compilation does before its "
                    "AfterInferShape passes")
    return told


def _matches_in(instance: Any, compiled: list[CompiledPattern], graph: Graph,
                run: PassRun) -> list[FoundMatch]:
    """`find_matches` in one graph's direct nodes; `run` counts the matches and refusals
    (those after reading an untyped value too)."""
    context = run.context
    found: list[FoundMatch] = []
    taken: set[Node] = set()
    for pattern in compiled:
        matcher = Matcher(pattern, graph)
        for candidate in candidates(graph, [matcher.root_type]):
            if candidate in taken:
                continue
            for match in matcher.matches_at(candidate):  # as the sweep: first accepted
                nodes = {n for n in match.bindings.values() if not is_constant(n)}
                if taken.intersection(nodes):
                    continue  # shared constants aside, a node is rewritten once
                result = MatchResult(match)
                run.matches += 1
                unknown_reads = graph.root_graph()._unknown_desc_reads
                try:
                    accepted = answer_accepted(instance.meet_requirements(result, context), run,
                                               instance.meet_requirements)
                finally:
                    result._invalidate()
                if not accepted:
                    note_refusal(run, graph, unknown_reads)
                    continue
                if would_create_cycle(match.region()):
                    continue
                taken.update(nodes)
                captured = [match.captured(i) for i in range(len(match.pattern.captures))]
                found.append(FoundMatch(match.pattern.name, match.nodes, captured))
                break
    return found
