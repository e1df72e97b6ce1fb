"""Running a pass by its kind: `run()` for a FusionBasePass, match-check-replace sweeps for
a PatternFusionPass, node-by-node replacement for a DecomposePass (spec §3, §6.3-6.5).

A pattern pass takes its patterns in order and sweeps each once over the graph (D14): the
candidates are the nodes of the pattern's first output type, from the op-type index, in
the graph's order, and nodes the sweep itself creates are appended as they appear (the
graph's change listeners), so a replacement can match again later in the same sweep;
candidates no landmark reaches are skipped (`ge.passes.candidates`). Per candidate: match,
`meet_requirements`, skip a rewrite that would make a cycle, `replacement`, rewrite (an
expression-style replacement built in place, any other copied in). A `MatchResult`
expires when its hook returns.

A `PassRun` is the state of one pass invocation inside one compilation (its context, its
counts): nothing here is process-global.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ge.errors import RewriteError
from ge.graph import DataType, Graph, Node, TensorDesc
from ge.graph.journal import ChangeKind
from ge.graph.places import ir_node_label, node_ref
from ge.passes.candidates import LandmarkFilter, candidates, named_operators
from ge.passes.context import PassContext
from ge.passes.expression import InPlace, build_in_place
from ge.passes.hooks import add_note, expression_body, note_of
from ge.passes.matcher import CompiledPattern, Match, Matcher, MatchResult
from ge.passes.pass_patterns import compiled_patterns
from ge.passes.read_only import read_only_call
from ge.passes.registry import (
    PASS_KIND_DECOMPOSE,
    PASS_KIND_FUSION_BASE,
    PASS_KIND_PATTERN_FUSION,
)
from ge.passes.rewrite import Region, apply_built_in_place, apply_replacement, would_create_cycle
from ge.passes.source import blame, mark_match
from ge.passes.status import (
    NOT_CHANGED,
    SUCCESS,
    answer_truth,
    is_bool_answer,
    note_refusal_reason,
)

if TYPE_CHECKING:
    from ge.passes.base import DecomposePass, FusionBasePass, PatternFusionPass

__all__ = [
    "RUNNERS",
    "PassRun",
    "answer_accepted",
    "note_refusal",
    "read_only_call",
    "run_pass",
    "untyped_desc",
    "untyped_values",
]

#: A sweep making more rewrites than this many per node of the graph keeps matching its
#: own replacements; it fails instead of running forever.
_REWRITES_PER_NODE_CAP = 4


@dataclass
class PassRun:
    """One invocation of one pass: its context, its op types, what it did."""

    context: PassContext
    op_types: tuple[str, ...] = ()  # a DecomposePass's, from its registration
    matches: int = 0
    rewrites: int = 0
    #: matches `meet_requirements` refused while a value they read had no type or rank (a
    #: pass at BeforeInferShape on a model declaring none), and the first such value
    untyped_refusals: int = 0
    first_untyped: str = ""
    #: whether to count them: only where the compiler can warn of them (a plugin's pass at
    #: BeforeInferShape); elsewhere listing every refused match's values is wasted work
    count_untyped: bool = False
    #: answers of `meet_requirements` that were None (a missing return?; None counts as
    #: False, as on GE)
    none_answers: int = 0
    #: answers that were neither a bool (numpy's too) nor None (`"no"`, a status, a
    #: message), read as GE reads them, `bool(answer)`, and the first of them (a warning)
    odd_answers: int = 0
    first_odd_answer: object = None
    first_odd_accepted: bool = False
    #: the last answer, and whether it was such an answer accepting its match (a failure
    #: after it says so)
    last_answer: object = None
    last_odd_accepted: bool = False
    #: matches (decompose: nodes) `meet_requirements` refused, and the reasons it gave for
    #: them with `context.set_error_message` (`note_refusal_reason`: the first few distinct
    #: messages, each with its count), for the report to carry what `ge passes explain`
    #: shows
    refusals: int = 0
    refusal_reasons: dict[str, int] = field(default_factory=dict)
    # The compiled patterns of each pass instance of one compilation (its root graph, then
    # every body and every round reuse them); None: build them for this invocation.
    patterns: dict[int, tuple[object, list[CompiledPattern]]] | None = None
    # Told of each instance whose patterns were just built, before any match (the engine
    # keeps a built-in pass's for later compilations: `ge.compiler.built_patterns`).
    patterns_built: Callable[[object, list[CompiledPattern]], None] | None = None
    # The nodes each landmark filter let through, per graph state (`LandmarkFilter.for_sweep`).
    landmarks: dict[tuple[object, ...], frozenset[Node] | None] = field(default_factory=dict)


def _run_fusion_base(instance: FusionBasePass, graph: Graph, run: PassRun) -> object:
    return instance.run(graph, run.context)


def _replacement_of(instance: PatternFusionPass, result: MatchResult, graph: Graph,
                    run: PassRun) -> Graph:
    replacement = read_only_call(instance.replacement, graph, result, run.context)
    if not isinstance(replacement, Graph):
        raise _blame_replacement(TypeError(_not_a_graph("PatternFusionPass", replacement)),
                                 instance)
    return replacement


def _blame_replacement(exc: BaseException, instance: PatternFusionPass) -> BaseException:
    """`blame` the pattern pass's replacement for what it returned (or made), with its
    class's note on how that replacement is called when its names suggest otherwise (the
    hook's adapter notes what the hook itself raises)."""
    return blame(add_note(exc, note_of(instance, "replacement")), instance.replacement)


def _not_a_graph(kind: str, returned: object) -> str:
    """Why a replacement's result is refused; None may be a missing return or an attempt to
    skip (GE has no such return: meet_requirements decides, before replacement is asked)."""
    if returned is not None:
        what = type(returned).__name__
        tensors = returned if isinstance(returned, (list, tuple)) else [returned]
        if tensors and all(type(t).__name__ == "TensorHolder" for t in tensors):
            # (trial U: the builder's outputs returned as they are)
            what = (("TensorHolder" if tensors is not returned else f"a {what} of "
                     "TensorHolders") + ", the output of a GraphBuilder: return the graph it "
                    "builds, builder.build_and_reset([output, ...])")
        return f"{kind}.replacement must return ge.graph.Graph, got {what}"
    what = "node" if kind == "DecomposePass" else "match"
    return (f"{kind}.replacement must return ge.graph.Graph, got None (a missing return?); "
            f"a replacement cannot skip its {what}: to leave a {what} alone, return False "
            "from meet_requirements, which is asked first")


def _run_pattern(instance: PatternFusionPass, graph: Graph, run: PassRun) -> int:
    changed = False
    for compiled in compiled_patterns(instance, run):
        changed |= _sweep(Matcher(compiled, graph), instance, run) > 0
    return SUCCESS if changed else NOT_CHANGED


def _sweep(matcher: Matcher, instance: PatternFusionPass, run: PassRun) -> int:
    """One greedy sweep of one pattern; returns the number of rewrites."""
    graph = matcher.graph
    op_type = matcher.root_type[0]  # (new nodes of another domain do not match the root)
    queue = deque(candidates(graph, [matcher.root_type]))
    cap = _REWRITES_PER_NODE_CAP * len(graph) + 1_000
    landmarks = LandmarkFilter.for_sweep(matcher.pattern, graph, len(queue), run.landmarks)

    def listen(kind: ChangeKind, node: Any, index: int) -> None:
        if kind is ChangeKind.NODE_ADDED and node._type == op_type and node._graph is graph:
            queue.append(node)
        if landmarks is not None and kind is not ChangeKind.NODE_REMOVED:
            landmarks.touched(node)

    rewrites = 0
    unsubscribe = graph.subscribe(listen)
    try:
        while queue:
            candidate = queue.popleft()
            if candidate._graph is not graph:
                continue  # removed by an earlier rewrite
            if landmarks is not None and not landmarks.allows(candidate):
                continue  # no node of the pattern's rarest operator close enough upstream
            if not _rewrite_first(matcher, candidate, instance, run):
                continue
            rewrites += 1
            if rewrites > cap:
                raise RewriteError(
                    f"pattern {matcher.pattern.name!r} made {rewrites} rewrites in one sweep "
                    f"of graph {graph.name!r}: its replacement keeps matching the pattern")
    finally:
        unsubscribe()
    run.rewrites += rewrites
    return rewrites


def _rewrite_first(matcher: Matcher, candidate: Node, instance: PatternFusionPass,
                   run: PassRun) -> bool:
    """Rewrite the first binding at `candidate` the pass accepts. A refused binding (by
    `meet_requirements` or a cycle) leaves the graph as it was, so the next one (another
    order of commutative inputs) is tried; whether a rewrite happened."""
    for match in matcher.matches_at(candidate):
        run.matches += 1
        if _rewrite(match, instance, run):
            return True
    return False


def _rewrite(match: Match, instance: PatternFusionPass, run: PassRun) -> bool:
    pass_name = run.context.get_pass_name()
    in_place: InPlace | None = None
    # Each hook call borrows a MatchResult of its own, expired when the hook returns (GE's
    # lifetime): one kept from meet_requirements raises in replacement, here as on GE.
    result = MatchResult(match)
    graph = match.graph
    unknown_reads = graph.root_graph()._unknown_desc_reads
    run.context.set_error_message("")  # (a reason is this match's, not an earlier one's)
    try:
        answer = read_only_call(instance.meet_requirements, graph, result, run.context)
        accepted = answer_accepted(answer, run, instance.meet_requirements)
    except Exception as err:  # (the E13028 names the match the hook failed on)
        mark_match(err, match.nodes)
        raise
    finally:
        result._invalidate()
    if not accepted:
        note_refusal(run, graph, unknown_reads)
        return False
    region = match.region()
    if would_create_cycle(region):
        return False
    result = MatchResult(match)
    try:
        expression = expression_body(instance.replacement)
        if expression is None:
            replacement = _replacement_of(instance, result, match.graph, run)
        else:  # an expression-style replacement: built where the match is
            name, body = expression
            try:
                built = build_in_place(region.graph, name, body(instance, result, run.context),
                                       region.inputs, name_scope=region.name_scope())
            except TypeError as err:  # what it returned, if not raised in the hook itself
                raise _blame_replacement(err, instance) from None
            if isinstance(built, InPlace):
                in_place = built
            else:
                replacement = built
    except Exception as err:  # (the E13028 names the match the hooks failed on)
        mark_match(err, match.nodes)
        raise
    finally:
        result._invalidate()
    try:
        if in_place is not None:
            apply_built_in_place(region, in_place.nodes, in_place.outputs, pass_name=pass_name,
                                 asked_names=in_place.asked_names)
        else:
            apply_replacement(region, replacement, pass_name=pass_name, cycle_checked=True)
    except RewriteError as err:  # it does not fit the region: the hook's fault
        mark_match(err, match.nodes)
        raise _blame_replacement(_at_match(err, match), instance) from None
    return True


def answer_accepted(answer: object, run: PassRun, hook: Callable[..., Any]) -> bool:
    """`meet_requirements`'s answer as GE reads it (`answer_truth`), counting the answers a
    pass author did not mean as one: None (a missing return) and what is not a bool
    (`"no"`, which is True: trial T's pass rewrote matches it meant to refuse). An answer
    bool() refuses is a TypeError at the `hook`'s line saying what it returned (it was
    numpy's ValueError at the pass's class line)."""
    run.last_answer, run.last_odd_accepted = answer, False
    if answer is None:
        run.none_answers += 1
        return False
    if isinstance(answer, bool):
        return answer
    try:
        accepted = answer_truth(answer)
    except TypeError as err:
        raise blame(err, hook) from None
    if not is_bool_answer(answer):
        run.odd_answers += 1
        run.last_odd_accepted = accepted
        if run.odd_answers == 1:
            run.first_odd_answer, run.first_odd_accepted = answer, accepted
    return accepted


def _at_match(err: RewriteError, match: Match) -> RewriteError:
    """`err` naming the pattern whose replacement did not fit and the node its (first)
    output matched, as the IR's checks name nodes: a pass of several patterns, on a model
    of many layers, otherwise leaves both to guess."""
    root = match.outputs[0][0] if match.outputs else match.nodes[-1]
    err.message += f" (pattern {match.pattern.name!r}, matched at {ir_node_label(root)})"
    return err


def decompose_region(node: Node) -> Region:
    """§6.5: one boundary input per distinct producer of the node's connected inputs (in
    input order), one boundary output per output anchor."""
    graph = node.owner_graph
    assert graph is not None
    inputs = list(dict.fromkeys(p for p in node._inputs if p is not None))
    outputs = [(node, i) for i in range(node.get_outputs_size())]
    return Region(graph, [node], inputs, outputs, input_note=_decompose_input_note(node, inputs),
                  decomposed=True)


def _numbered(positions: list[int]) -> str:
    """Input positions as words: `input 2`, `inputs 1 and 2`, `inputs 0, 1 and 2`."""
    if len(positions) == 1:
        return f"input {positions[0]}"
    return f"inputs {', '.join(map(str, positions[:-1]))} and {positions[-1]}"


def _decompose_input_note(node: Node, boundary: list[tuple[Node, int]]) -> str:
    """Why `node` has fewer boundary inputs than inputs, for a replacement written per input
    position: the positions that read one value, the absent ones, and where each position
    goes ("" when position i is boundary input i for every input)."""
    slot = {producer: i for i, producer in enumerate(boundary)}
    where = [None if p is None else slot[p] for p in node._inputs]
    if where == list(range(len(where))):
        return ""
    shown = ir_node_label(node)
    reasons = []
    for i, producer in enumerate(boundary):
        positions = [k for k, s in enumerate(where) if s == i]
        if len(positions) > 1:
            source, index = producer
            value = source.get_output_name(index) or f"output {index} of {node_ref(source)}"
            reasons.append(f"{_numbered(positions)} of {shown} read the same value {value!r}, "
                           "so they are one boundary input")
    absent = [k for k, s in enumerate(where) if s is None]
    if absent:
        verb = "is" if len(absent) == 1 else "are"
        reasons.append(f"{_numbered(absent)} of {shown} {verb} absent, so "
                       f"{'it has' if len(absent) == 1 else 'they have'} no boundary input")
    mapping = ", ".join(f"{k} -> {'none' if s is None else s}" for k, s in enumerate(where))
    return f"{'; '.join(reasons)} (node input -> replacement input: {mapping})"


def note_refusal(run: PassRun, graph: Graph, unknown_reads: int) -> None:
    """Count a refusal by `meet_requirements`, with the reason the pass gave for it (taken
    from the context: a reason given once does not stay for the next match); and whether it
    read a desc nothing is known of (no type, no rank): its root's `_unknown_desc_reads` grew from
    `unknown_reads` during the call."""
    run.refusals += 1
    reason = run.context.get_error_message()
    if reason:
        note_refusal_reason(run.refusal_reasons, reason)
        run.context.set_error_message("")
    root = graph.root_graph()
    if not run.count_untyped or root._unknown_desc_reads == unknown_reads:
        return
    run.untyped_refusals += 1
    if not run.first_untyped and root._last_unknown_read is not None:
        node, index, of_input = root._last_unknown_read
        run.first_untyped = f"{'input' if of_input else 'output'} {index} of {node_ref(node)}"


def untyped_values(nodes: Iterable[Node]) -> Iterator[str]:
    """The inputs and outputs of `nodes` with no type or rank, as messages name them
    ("input 0 of 'add'"), node by node, inputs first."""
    for node in nodes:
        for i in range(node.get_inputs_size()):
            producer = node.get_input_producer(i)
            if producer is not None and untyped_desc(producer[0].get_output_desc(producer[1])):
                yield f"input {i} of {node_ref(node)}"
        for k in range(node.get_outputs_size()):
            if untyped_desc(node.get_output_desc(k)):
                yield f"output {k} of {node_ref(node)}"


def untyped_desc(desc: TensorDesc) -> bool:
    """Whether a value's desc says nothing of its type or rank (not inferred, not declared)."""
    return desc.data_type == DataType.DT_UNDEFINED or desc.get_shape().is_unknown_rank()


def _run_decompose(instance: DecomposePass, graph: Graph, run: PassRun) -> int:
    """Every node of the pass's op types, in the graph's order: `meet_requirements`, then
    `replacement` and the rewrite. Each node asked about is a match (`run.matches`), whether
    `meet_requirements` accepts it or not, as a pattern pass counts its matches: the report's
    M column is the matches found, R the rewrites made."""
    changed = False
    for node in candidates(graph, named_operators(run.op_types)):
        if node._graph is not graph:
            continue
        run.matches += 1
        try:
            unknown_reads = graph.root_graph()._unknown_desc_reads
            run.context.set_error_message("")  # (a reason is this node's, not an earlier one's)
            answer = read_only_call(instance.meet_requirements, graph, node, run.context)
            if not answer_accepted(answer, run, instance.meet_requirements):
                note_refusal(run, graph, unknown_reads)
                continue
            replacement = read_only_call(instance.replacement, graph, node, run.context)
            if not isinstance(replacement, Graph):
                raise blame(TypeError(_not_a_graph("DecomposePass", replacement)),
                            instance.replacement)
            try:
                apply_replacement(decompose_region(node), replacement,
                                  pass_name=run.context.get_pass_name())
            except RewriteError as err:  # it does not fit the region: the hook's fault
                raise blame(err, instance.replacement) from None
        except Exception as err:  # (the E13028 names the node the hooks failed on)
            mark_match(err, [node])
            raise
        run.rewrites += 1
        changed = True
    return SUCCESS if changed else NOT_CHANGED


#: How each pass kind runs (read-only: a kind is a property of the pass, not a setting).
RUNNERS: Mapping[str, Callable[[Any, Graph, PassRun], object]] = MappingProxyType({
    PASS_KIND_FUSION_BASE: _run_fusion_base,
    PASS_KIND_PATTERN_FUSION: _run_pattern,
    PASS_KIND_DECOMPOSE: _run_decompose,
})


def run_pass(kind: str, instance: Any, graph: Graph, run: PassRun) -> object:
    """Run one pass instance of `kind` on `graph`; returns what D2 interprets."""
    return RUNNERS[kind](instance, graph, run)
