"""Explanations as text: the lines `ge passes explain` prints for the `PatternExplanation`s
of `ge.passes.explain` and the `DecomposeExplanation`s of `ge.passes.explain_decompose`,
kept apart from how they are found. Both read alike: a line per pattern (or per graph of a
decompose pass) with its candidates and rewrites, the rewrites, then the candidates not
rewritten, numbered, each with the reason and its warnings. A body is named with the node
and attribute holding it; the model-local functions holding what the pass looks for get a
line each, and what would make the pass see them is the caller's to say (`inline_advice`:
only a command that can inline them names how).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ge.graph.places import BodyOwner, graph_place
from ge.passes.explain import CandidateExplanation, PatternExplanation
from ge.passes.explain_decompose import DecomposeExplanation
from ge.passes.explain_functions import FunctionOps
from ge.passes.explain_reasons import op_label

__all__ = ["format_decompositions", "format_explanations", "undecided"]


def _no_candidates_line(graph: str, owner: BodyOwner | None,
                        patterns: Sequence[PatternExplanation]) -> str:
    if len(patterns) == 1:
        e = patterns[0]
        return f"pattern {e.pattern} ({graph_place(graph, owner)}): {e.note}"
    absent = sorted({op_label(e.anchor_type, e.anchor_domain) for e in patterns})
    where = f"graph {graph}" + ("" if owner is None else f" ({owner})")
    return (f"{where}: no candidate for {len(patterns)} pattern(s): it has no "
            f"{' or '.join(absent)} node (their anchors' op type): "
            f"{', '.join(e.pattern for e in patterns)}")


def _function_lines(functions: Iterable[FunctionOps], advice: str | None,
                    indent: str) -> list[str]:
    """One line per function holding what the pass looks for (each once), with `advice`."""
    tail = f"; {advice}" if advice else ""
    return [f"{indent}{line}{tail}" for line in dict.fromkeys(str(f) for f in functions)]


def format_explanations(explanations: Sequence[PatternExplanation], *, top: int = 5,
                        indent: str = "  ", inline_advice: str | None = None) -> list[str]:
    """The explanations as indented lines: per pattern the rewrites, then the `top` closest
    partial matches with their bindings and the check that failed. The patterns that have
    no candidate in a graph (its anchor's op type is absent there) share one line, where the
    first of them would be: a pass of many patterns does not bury the graphs they match in.
    Several patterns with partial matches are led by the deepest of all of them
    (`_deepest_lines`). A function holding nodes of a pattern's anchor type gets a line ending with
    `inline_advice` ("--inline-functions inlines them") when given."""
    lines = _deepest_lines(explanations, top, indent)
    # The explanations of one graph come in a run (bodies often share one name: each
    # exporter's `sub_graph`): a run's patterns without candidates share its line.
    idle: dict[int, list[PatternExplanation]] = {}  # the run's first index -> those patterns
    runs: list[int] = []
    for i, e in enumerate(explanations):
        same = i and (e.graph, e.owner) == (explanations[i - 1].graph, explanations[i - 1].owner)
        runs.append(runs[-1] if same else i)
        if e.error is None and not e.candidates and e.note and e.note.startswith(
                "no candidate: graph"):
            idle.setdefault(runs[i], []).append(e)
    summarised: set[int] = set()
    for i, e in enumerate(explanations):
        if any(p is e for p in idle.get(runs[i], ())):
            if runs[i] not in summarised:
                summarised.add(runs[i])
                patterns = idle[runs[i]]
                lines.append(_no_candidates_line(e.graph, e.owner, patterns))
                lines += _function_lines((f for p in patterns for f in p.functions),
                                         inline_advice, indent)
            continue
        where = graph_place(e.graph, e.owner)
        if e.error is not None:
            lines.append(f"pattern {e.pattern} ({where}): invalid: {e.error}")
            continue
        rewrites, closest = e.rewrites, e.closest
        lines.append(f"pattern {e.pattern} ({where}): anchor {e.anchor!r} "
                     f"({op_label(e.anchor_type, e.anchor_domain)}), {e.size} pattern node(s); "
                     f"{len(e.candidates)} candidate(s), {len(rewrites)} would be rewritten")
        if e.note:
            lines.append(f"{indent}note: {e.note}")
        lines += _function_lines(e.functions, inline_advice, indent)
        for cand in rewrites[:top]:
            lines.append(f"{indent}rewrite at {cand.candidate!r}{_role(cand)}: "
                         f"{', '.join(cand.matched_nodes)}")
            lines += [f"{indent * 2}note: {n}" for n in cand.notes]
        if len(rewrites) > top:
            lines.append(f"{indent}... and {len(rewrites) - top} more rewrite(s)")
        if closest:
            lines.append(f"{indent}closest partial matches (top {min(top, len(closest))} of "
                         f"{len(closest)}):")
        for rank, cand in enumerate(closest[:top], 1):
            lines.append(f"{indent * 2}{rank}. {cand.candidate!r}{_role(cand)}: depth "
                         f"{cand.depth}/{cand.size}: {cand.summary()}")
            bound = [str(b) for b in cand.bindings]
            if bound:
                lines.append(f"{indent * 3}bound: {', '.join(bound)}")
            lines += [f"{indent * 3}warning: {w}" for w in cand.warnings]
            lines += [f"{indent * 3}note: {n}" for n in cand.notes]
    return lines


def _deepest_lines(explanations: Sequence[PatternExplanation], top: int,
                   indent: str) -> list[str]:
    """For a pass of several patterns: the rewrites over all of them, then the `top`
    partial matches that got furthest of all patterns (bound share of the pattern, then
    depth), each with its pattern, leaving out the candidates a pattern rewrites: a pass of
    many forms (RMSNormFusion's 18) listed a screen of depth-1 misses per form before the
    one refused in meet_requirements with the pass's reason (trial S), and the first
    version led with nodes rewritten after all (trial V). Patterns are counted per graph
    (each is explained in every graph), not by name: two may share one (trial X)."""
    graphs = len({(e.graph, e.owner) for e in explanations}) or 1
    patterns = len(explanations) // graphs
    if patterns < 2:
        return []
    usable = [e for e in explanations if e.error is None]
    rewritten = {(e.graph, name) for e in usable for c in e.rewrites
                 for name in (c.candidate, *c.matched_nodes)}
    partial = [(e, c) for e in usable for c in e.closest
               if (e.graph, c.candidate) not in rewritten]
    partial.sort(key=lambda pair: (-pair[1].depth / max(pair[1].size, 1), -pair[1].depth))
    rewrites = sum(len(e.rewrites) for e in usable)
    head = f"{rewrites} rewrite(s) by the {patterns} pattern(s) (each pattern's below)"
    if not partial:
        return [head + "; no partial match of a node none rewrites"]
    lines = [f"{head}; the deepest partial matches of nodes none rewrites (top "
             f"{min(top, len(partial))} of {len(partial)}):"]
    for rank, (e, cand) in enumerate(partial[:top], 1):
        lines.append(f"{indent}{rank}. pattern {e.pattern} at {cand.candidate!r}{_role(cand)}"
                     f": depth {cand.depth}/{cand.size}: {cand.summary()}")
    return lines


def _role(cand: CandidateExplanation) -> str:
    return " (binds the node as a non-anchor)" if cand.role == "non-anchor" else ""


def format_decompositions(explanations: Sequence[DecomposeExplanation], *, top: int = 5,
                          indent: str = "  ", inline_advice: str | None = None) -> list[str]:
    """A decompose pass's explanations as indented lines, in the style of
    `format_explanations`: per graph the nodes of its op types and how many would be
    rewritten, the `top` rewrites, then the `top` refused nodes with what
    `meet_requirements` returned or raised and their warnings."""
    lines: list[str] = []
    for e in explanations:
        types = ", ".join(op_label(t) for t in e.op_types)
        head = f"op types {types} ({graph_place(e.graph, e.owner)})"
        functions = _function_lines(e.functions, inline_advice, indent)
        if not e.candidates and e.node is None:
            lines.append(f"{head}: {e.note}")
            lines += functions
            continue
        rewrites, refused = e.rewrites, e.refused
        lines.append(f"{head}: {len(e.candidates)} candidate(s), {len(rewrites)} would be "
                     "rewritten")
        if e.note:
            lines.append(f"{indent}note: {e.note}")
        lines += functions
        for cand in rewrites[:top]:
            lines.append(f"{indent}rewrite at {cand.candidate!r} "
                         f"({op_label(cand.candidate_type)})")
            lines += [f"{indent * 2}note: {n}" for n in cand.notes]
        if len(rewrites) > top:
            lines.append(f"{indent}... and {len(rewrites) - top} more rewrite(s)")
        if refused:
            lines.append(f"{indent}refused (top {min(top, len(refused))} of {len(refused)}):")
        for rank, cand in enumerate(refused[:top], 1):
            lines.append(f"{indent * 2}{rank}. {cand.candidate!r} "
                         f"({op_label(cand.candidate_type)}): {cand.summary()}")
            lines += [f"{indent * 3}warning: {w}" for w in cand.warnings]
            lines += [f"{indent * 3}note: {n}" for n in cand.notes]
    return lines


def undecided(explanations: Iterable[PatternExplanation | DecomposeExplanation]) -> list[str]:
    """One line per pattern (or graph of a decompose pass) with checks made while shape,
    type or schema information was missing; the first warning says what is missing and
    why."""
    lines = []
    for e in explanations:
        found = e.warnings
        if found:
            what = (f"pattern {e.pattern}" if isinstance(e, PatternExplanation)
                    else f"op types {', '.join(e.op_types)} (graph {e.graph})")
            lines.append(f"{what}: {len(found)} check(s) made while shape, type or schema "
                         f"information was missing (first: {found[0]})")
    return lines
