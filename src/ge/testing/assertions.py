"""Assertions for pass tests, with failure messages that show the graph concerned.

`assert_matches` / `assert_rewrites` count what a pass finds or rewrites and, when the
count is not the expected one, fail with the matches (or the nodes the pass made) and a
readable dump of that region of the graph: the nodes concerned marked `*` with their
neighbours, or the whole graph when it is small. `assert_numerically_equal` runs two models
on the same inputs (`ge.session.verify`) and lists every output that differs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ge.compiler.invocation import create_instance
from ge.compiler.pass_failure import describe_exception
from ge.graph import Graph, Node
from ge.graph.subgraphs import body_path
from ge.passes.candidates import Operator, is_of, named_operators
from ge.passes.found_matches import FoundMatch
from ge.passes.matcher import Matcher, compile_pattern
from ge.passes.pass_patterns import collect_patterns
from ge.passes.registry import PASS_KIND_DECOMPOSE, PASS_KIND_PATTERN_FUSION
from ge.passes.rewrite import ORIGIN_PASS
from ge.testing.regions import describe_region
from ge.testing.running import (
    ModelLike,
    PassLike,
    _apply,
    _prepare,
    as_graph,
    checked_options,
    matches_in,
    resolve_pass,
)

if TYPE_CHECKING:
    from ge.compiler.pass_registry import RegisteredPass
    from ge.passes.base import FusionBasePass
    from ge.session.verification import OutputComparison, VerificationReport
    from ge.testing.passes import PassSet

__all__ = ["assert_matches", "assert_numerically_equal", "assert_rewrites", "describe_matches"]


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 'es' if word.endswith('ch') else 's'}"


def _node_text(node: Node) -> str:
    return f"{node.name} ({node.type})"


#: At most this many matches are listed one by one in a failure message (a 50k-node BERT's
#: 918 made it 1,085 lines: trial DD); the rest are counted.
MAX_LISTED_MATCHES = 20


def describe_matches(matches: list[FoundMatch]) -> list[str]:
    """One line per match (the first `MAX_LISTED_MATCHES`): its pattern and its nodes (and
    in which graph); a last line counts the others."""
    lines = []
    for number, match in enumerate(matches[:MAX_LISTED_MATCHES], 1):
        owner = match.nodes[0].owner_graph if match.nodes else None
        where = f" in graph {owner.name}" if owner is not None else ""
        nodes = ", ".join(_node_text(n) for n in match.nodes)
        lines.append(f"  match {number}: pattern {match.pattern_name!r}{where}: {nodes}")
    if len(matches) > MAX_LISTED_MATCHES:
        lines.append(f"  ... and {len(matches) - MAX_LISTED_MATCHES} more match(es)")
    return lines


def _why_not(entry: RegisteredPass, instance: FusionBasePass | None, graph: Graph,
             options: Mapping[str, str], bodies: bool) -> list[str]:
    """What `ge passes explain` says of the pass on `graph` (nothing changed): the closest
    partial matches and the check each failed (a pattern node, an outside consumer,
    `meet_requirements` and its line), or for a decompose pass the nodes refused. For a
    count below the expected one; nothing when every candidate was a match (no other
    place came close); best effort (a line saying why there is none)."""
    from ge.passes.context import PassContext
    from ge.passes.explain import explain
    from ge.passes.explain_decompose import explain_decompose
    from ge.passes.explain_text import format_decompositions, format_explanations

    stage = entry.stage_label
    try:
        pass_instance: Any = instance or create_instance(entry, stage)
        context = PassContext(entry.name, options)
        if entry.descriptor.kind == PASS_KIND_DECOMPOSE:
            decompositions = explain_decompose(
                pass_instance, graph, context=context, subgraphs=bodies,
                op_types=list(entry.descriptor.op_types))
            if not any(d.refused for d in decompositions):
                return _stage_note(entry)
            lines = format_decompositions(decompositions, top=3)
        else:
            explanations = explain(pass_instance, graph, context=context, subgraphs=bodies,
                                   stage=stage)
            if not any(e.closest or e.error for e in explanations):
                return _stage_note(entry)
            lines = format_explanations(explanations, top=3)
    except Exception as exc:  # the hooks fail on another look: say so
        return [f"  (explaining it failed: {describe_exception(exc)})"]
    return ["why not (as `ge passes explain` says):", *(f"  {line}" for line in lines),
            *_stage_note(entry)]


def _stage_note(entry: RegisteredPass) -> list[str]:
    """For a pass whose stage comes after built-in passes changed the graph: that the model
    given is not what the pass sees in a compilation (trial AK: a rotary pattern wanting
    the Split SliceSplitFusion makes was tested on the exported Slices)."""
    from ge.passes.explain_stage import DUMP_BEFORE

    step = DUMP_BEFORE.get(entry.stage_label)
    if step is None:
        return []
    return [f"  ({entry.name} runs at {entry.stage_label}, after the built-in passes changed "
            "the graph; the model given is not what it sees in a compilation: `ge compile "
            f"MODEL -o OUT --dump DIR` writes that graph, DIR/ge_*_{step}.onnx, to test on)"]


def _candidates(entry: RegisteredPass, instance: FusionBasePass | None, graph: Graph
                ) -> list[Node]:
    """Where the pass would look: nodes of its patterns' first output types, or of a
    decompose pass's op types (best effort: nothing if the patterns cannot be built)."""
    types: list[Operator] = []
    if entry.descriptor.kind == PASS_KIND_DECOMPOSE:
        types = named_operators(entry.descriptor.op_types)
    elif entry.descriptor.kind == PASS_KIND_PATTERN_FUSION:
        try:
            from ge.es.opset import opset_scope

            pass_instance: Any = instance or entry.descriptor.cls()
            config = pass_instance.matcher_config
            if config is None:
                from ge.passes.config import PatternMatcherConfig

                config = PatternMatcherConfig()
            with opset_scope(graph.opset_imports):
                for pattern in collect_patterns(pass_instance):
                    types.append(Matcher(compile_pattern(pattern, config), graph).root_type)
        except Exception:
            types = []
    return [n for n in graph.get_all_nodes() if is_of(n, types)]


def assert_matches(pass_: PassLike, model: ModelLike, count: int, *,
                   passes: PassSet | None = None, options: Mapping[str, str] | None = None,
                   bodies: bool = True, infer: bool | None = None) -> list[FoundMatch]:
    """Assert that the pattern pass finds exactly `count` matches in `model` (as
    `find_matches`: `meet_requirements` and the cycle check applied, nothing rewritten);
    returns the matches. The failure lists the matches and dumps the region they are in
    (with no match: where the pass looked)."""
    __tracebackhide__ = True
    entry, instance = resolve_pass(pass_, passes)
    opts = checked_options(options)
    graph, _ = _prepare(entry, model, opts, infer, in_place=False)
    found = matches_in(entry, instance, graph, opts, bodies)
    if len(found) == count:
        return found
    marked = [n for m in found for n in m.nodes] or _candidates(entry, instance, graph)
    title = "the candidates" if not found and marked else "the matches"
    lines = [f"{entry.name}: expected {_plural(count, 'match')}, found {len(found)} in "
             f"graph {graph.name!r}", *describe_matches(found)]
    if len(found) < count:
        lines += _why_not(entry, instance, graph, opts, bodies)
    lines += [f"{title} in the graph the pass sees:", describe_region(graph, marked)]
    raise AssertionError("\n".join(lines))


def _made_by(graph: Graph, name: str) -> list[Node]:
    return [n for n in graph.get_all_nodes() if n.get_metadata().get(ORIGIN_PASS) == name]


def assert_rewrites(pass_: PassLike, model: ModelLike, count: int, *,
                    passes: PassSet | None = None, options: Mapping[str, str] | None = None,
                    bodies: bool = True, infer: bool | None = None,
                    check: str = "region") -> Graph:
    """Run the pass as `run_pass` does and assert that it made exactly `count` rewrites
    (pattern and decompose passes; fusions reported through the context for a
    `FusionBasePass`); returns the resulting graph. The failure shows the matches in the
    graph before the pass and the nodes the pass made after it, each with its region."""
    __tracebackhide__ = True
    entry, instance = resolve_pass(pass_, passes)
    opts = checked_options(options)
    graph, typed = _prepare(entry, model, opts, infer, in_place=False)
    before = graph.clone()
    result = _apply(entry, instance, graph, opts, typed=typed, bodies=bodies, check=check)
    made = result.rewrite_count
    if made == count:
        return result.graph
    what = "fusion" if entry.descriptor.kind == "fusion_base" else "rewrite"
    lines = [f"{entry.name}: expected {_plural(count, what)}, made {made}"
             + (f" ({_plural(result.matches, 'match')} found)"
                if entry.descriptor.kind != "fusion_base" else "")]
    marked: list[Node] = []
    if entry.descriptor.kind == PASS_KIND_PATTERN_FUSION:
        try:
            found = matches_in(entry, None, before, opts, bodies)
        except Exception as exc:  # the hooks failed on a second look: say so, go on
            found = []
            lines.append(f"  (finding the matches again failed: {exc})")
        lines += describe_matches(found)
        marked = [n for m in found for n in m.nodes] or _candidates(entry, instance, before)
    elif entry.descriptor.kind == PASS_KIND_DECOMPOSE:
        marked = _candidates(entry, instance, before)
    if made < count and entry.descriptor.kind != "fusion_base":
        lines += _why_not(entry, instance, before, opts, bodies)
    if entry.descriptor.kind == "fusion_base":  # it edits by hand: show what it edited
        removed, added, rewired = _edits(before, result.graph)
        lines += [f"before the pass ({len(removed)} node(s) it removed, {len(rewired)} it "
                  "rewired):",
                  describe_region(before, [*removed, *(old for old, _ in rewired)]),
                  f"after the pass ({len(added)} node(s) it added, {len(rewired)} it "
                  "rewired):",
                  describe_region(result.graph, [*added, *(new for _, new in rewired)])]
        raise AssertionError("\n".join(lines))
    lines += ["before the pass:", describe_region(before, marked)]
    new = _made_by(result.graph, entry.name)
    if new:
        lines += [f"after the pass ({len(new)} node(s) made by {entry.name}):",
                  describe_region(result.graph, new)]
    else:  # (the graph's first lines, weights mostly, would say nothing: trial II)
        lines.append(f"after the pass: no node made by {entry.name}")
    raise AssertionError("\n".join(lines))


def _edits(before: Graph, after: Graph
           ) -> tuple[list[Node], list[Node], list[tuple[Node, Node]]]:
    """What a pass changed, by node name in each graph of the model: the nodes of `before`
    gone from `after`, those of `after` new, and the (before, after) pairs whose inputs
    read other values."""

    def keyed(graph: Graph) -> dict[tuple[str, str], Node]:
        return {(body_path(n.owner_graph), n.name): n for n in graph.get_all_nodes()
                if n.owner_graph is not None}

    def reads(node: Node) -> list[tuple[str, int] | None]:
        return [None if p is None else (p[0].name, p[1])
                for p in map(node.get_input_producer, range(node.get_inputs_size()))]

    old, new = keyed(before), keyed(after)
    removed = [n for k, n in old.items() if k not in new]
    added = [n for k, n in new.items() if k not in old]
    rewired = [(n, new[k]) for k, n in old.items() if k in new and reads(n) != reads(new[k])]
    return removed, added, rewired


# -- numerics ---------------------------------------------------------------------------------


def _model(model: ModelLike) -> Any:
    import onnx

    if isinstance(model, (Graph, onnx.ModelProto)):
        return model
    return as_graph(model)


def _difference(out: OutputComparison) -> str:
    return "  " + out.describe(relative=True, sep=";")


def _input_text(feeds: Mapping[str, Any]) -> str:
    from ge.session.values import is_nested, value_label

    parts = []
    for name, value in feeds.items():
        if is_nested(value):  # a sequence, map or optional: its type and length
            count = f" of {len(value)}" if value is not None else ""
            parts.append(f"{name} {value_label(value)}{count}")
            continue
        array = np.asarray(value)
        parts.append(f"{name} {array.dtype}{list(array.shape)}")
    return ", ".join(parts) or "none"


def assert_numerically_equal(expected: ModelLike, actual: ModelLike,
                             inputs: Mapping[str, Any] | None = None, rtol: float = 1e-4,
                             atol: float = 1e-5, *, seed: int = 0,
                             dims: Mapping[str, int] | None = None) -> VerificationReport:
    """Assert that two models (paths, ModelProtos or Graphs) compute the same outputs on
    the same inputs (generated from `expected`'s input types unless given, and then tried at
    other sizes of its symbolic dims too, as `ge.session.verify` does): every element
    within `atol + rtol * |expected|` (float16 outputs: at least their precision), NaN equal
    to NaN; outputs of random operators are not compared. A sequence, map or optional
    output must have the same structure (lengths, keys, None), its tensors and map values
    compared likewise (`ge.session.comparison`). Returns the `VerificationReport`;
    the failure lists each differing output with its largest absolute and relative
    difference and where it is."""
    __tracebackhide__ = True
    from ge.session import generate_inputs, verify
    from ge.session.comparison import sizes_text

    reference, candidate = _model(expected), _model(actual)
    report = verify(reference, candidate, inputs=inputs, rtol=rtol, atol=atol, seed=seed,
                    dims=dims, names=("expected", "actual"))
    if report.ok:
        return report
    # the inputs of the failing run: generated again, the same for a seed and sizes
    feeds = (generate_inputs(reference, seed=seed, dims=report.sizes or dims)
             if inputs is None else dict(inputs))
    source = "given" if inputs is not None else f"generated with seed {seed}" + (
        f" at {sizes_text(report.sizes, report.given_dims)}" if report.sizes else "")
    first = _first_differing_value(reference, candidate, feeds, rtol, atol)
    lines = [f"models differ: {len(report.failures)} of {len(report.outputs)} output(s) beyond "
             f"tolerance ({report.tolerance()})",
             *[_difference(out) for out in report.failures],
             *([first] if first else []),
             f"inputs ({source}): {_input_text(feeds)}"]
    raise AssertionError("\n".join(lines))


def _first_differing_value(expected: Any, actual: Any, feeds: Mapping[str, Any],
                           rtol: float, atol: float) -> str:
    """Where the models part: the first value of `actual` (in its order) that `expected`
    also computes, by name, and that differs there (`ge.session.first_difference`), so
    that a test of a pass on a large model points at the rewrite that went wrong; "" when
    no value has the same name in both, or the models are too large to be run again from
    memory."""
    import onnx

    from ge.graph.model_io import constants_nbytes
    from ge.session.first_difference import Wording, first_difference
    from ge.session.runner import FILE_RUN_BYTES

    graph = actual if isinstance(actual, Graph) else as_graph(actual, copy=False)
    if constants_nbytes(graph) > FILE_RUN_BYTES:
        return ""
    before = expected if isinstance(expected, onnx.ModelProto) else expected.to_onnx()
    names = [node.name for node in graph.topological_order()]
    wording = Wording(values="of the actual model", theirs="the expected model's",
                      owner="the expected model")
    found = first_difference(before, graph, names, feeds, rtol, atol, wording=wording)
    return "  " + found.text.removeprefix("; ") if found.text else ""
