"""One pass invocation: the pass run on one graph in a transaction, then the graph checked.

A pass that raises, fails (D2), or leaves the graph invalid (an unconnected required input,
a cycle, a value without a type once shapes are inferred) is reported as *that pass's*
E13028 error at the user's line, and the transaction gives the graph back as the pass
found it. The check after a changing pass (`ge.compiler.pass_check`) looks at the region
the pass touched (its nodes' edges, arity and types, cycles, and, once shapes are inferred,
whether onnx still infers from each node's inputs what its outputs hold) unless the
compilation asks for the full check. A run kept records itself as the last change of the
nodes it changed (`Invocation.last_changes`), from the same change set, for later errors to
name it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ge._text import first_and_more, short_repr
from ge.compiler.built_patterns import BuiltPatterns, opsets_key
from ge.compiler.change_sites import change_sites
from ge.compiler.folded_values import FoldedValueRejected, model_rejects_folded_values
from ge.compiler.graph_facts import GraphFacts
from ge.compiler.last_changes import Blame, LastChanges, PassChange
from ge.compiler.pass_check import as_written, describe_problems, is_live, problems_left
from ge.compiler.pass_failure import describe_exception, is_pass_failure, run_error
from ge.compiler.pass_registry import RegisteredPass
from ge.compiler.report import PassRunRecord
from ge.errors import PassDefinitionWarning, SourceLocation
from ge.es.opset import opset_scope
from ge.graph import Node
from ge.graph.allocation import no_full_collections
from ge.graph.node import is_const
from ge.graph.places import graph_label
from ge.ops.memo import InferenceMemo, inference_memo_scope
from ge.passes.context import PassContext
from ge.passes.dim_hints import shape_symbols, symbolic_dim_hint
from ge.passes.execution import PassRun, run_pass
from ge.passes.matcher import CompiledPattern
from ge.passes.registry import PASS_KIND_FUSION_BASE
from ge.passes.source import hook_location, returned_at, warn_user
from ge.passes.stage import PassStage
from ge.passes.status import (
    RunOutcome,
    RunStatus,
    interpret_run_result,
    odd_answer_text,
)

if TYPE_CHECKING:
    from ge.graph import Graph
    from ge.graph.changes import ChangeSet

__all__ = ["CHECK_MODES", "Invocation", "create_instance", "is_live"]

#: How much of the graph is checked after a pass that changed it.
CHECK_MODES = ("region", "full", "none")


class _PassFailed(Exception):
    """Raised inside the transaction so that a failure rolls the graph back."""

    def __init__(self, status: RunStatus, reason: str | None = None,
                 nodes: Iterable[str] = (), location: SourceLocation | None = None,
                 model_error: FoldedValueRejected | None = None) -> None:
        super().__init__(reason or status.reason)
        self.status = status
        self.reason = reason
        self.nodes = tuple(nodes)
        self.location = location  # the line of the pass that changed the first node named
        self.model_error = model_error  # the input model's own problem, raised instead


@dataclass
class Invocation:
    """What every invocation of one compilation shares: options, checks, inference memo."""

    options: Mapping[str, str]
    memo: InferenceMemo
    check: str = "region"
    typed: bool = False  # whether outputs must be typed (after shape inference)
    round: int = 0
    # Each pattern pass instance's compiled patterns, built at its first invocation.
    patterns: dict[int, tuple[object, list[CompiledPattern]]] = field(default_factory=dict)
    # Where the built-in passes' patterns are kept for later compilations (the engine's).
    built_patterns: BuiltPatterns | None = None
    # The nodes plugin passes made (their pass and stage), and how many of them each
    # built-in fusion replaced: (built-in, plugin pass, its stage) -> nodes. A plugin whose
    # decomposition a built-in fusion puts back is told (`Scheduler.run`).
    made_by_plugins: dict[Node, tuple[str, str]] = field(default_factory=dict)
    undone: dict[tuple[str, str, str], int] = field(default_factory=dict)
    # The pass that last changed each node, for an error about a node (a later engine
    # step's, onnxruntime's under verification) to name the pass behind it.
    last_changes: LastChanges = field(default_factory=LastChanges)
    # The passes told that their run() returned NOT_CHANGED after changing the graph (once
    # per pass and compilation, not once per body and round).
    warned_not_changed: set[str] = field(default_factory=set)
    # The BeforeInferShape passes told that they refused every match on untyped values.
    warned_untyped: set[str] = field(default_factory=set)
    warned_none: set[str] = field(default_factory=set)  # likewise, for None answers
    warned_odd: set[str] = field(default_factory=set)  # likewise, for answers not bools
    # What is known of each graph while the hierarchy stays as it is: a model of thousands
    # of If/Loop bodies has each visited by every pass of every round, most runs changing
    # nothing.
    facts: GraphFacts = field(default_factory=GraphFacts)

    def run(self, entry: RegisteredPass, instance: Any, target: Graph, root: Graph,
            stage: str) -> PassRunRecord:
        """Run `instance` on `target` (a graph of `root`'s hierarchy) and check the result."""
        self.facts.refresh(root)
        if entry.requires and self.facts.lacks(target, entry.requires):
            return self.idle_record(entry, target, stage)
        context = PassContext(entry.name, self.options)
        kept = self.built_patterns if entry.builtin else None
        run = PassRun(context, tuple(entry.descriptor.op_types), patterns=self.patterns,
                      patterns_built=None if kept is None else functools.partial(
                          _keep_patterns, kept, root),
                      count_untyped=(not entry.builtin
                                     and stage == PassStage.BEFORE_INFER_SHAPE.value))
        before = root.mutation_count
        contradicted = self.facts.contradicted(target) if self.typed else set()
        nodes_before, constants_before = self.facts.size(target)
        start = time.perf_counter()
        try:
            # Replacements built in the pass use the operator signatures of this model:
            # builders created inside take the graph's opset imports.
            with root.transaction(), root.track_changes() as changes, \
                    change_sites(root, _edited_by(entry)) as sites, \
                    opset_scope(root.opset_imports), inference_memo_scope(self.memo), \
                    no_full_collections():
                returned = run_pass(entry.descriptor.kind, instance, target, run)
                status = interpret_run_result(returned)
                if status.failed:
                    raise _PassFailed(status, location=(
                        returned_at(instance.run, returned)
                        if entry.descriptor.kind == PASS_KIND_FUSION_BASE else None))
                if root.mutation_count != before and self.check != "none":
                    problems = problems_left(root, target, changes, typed=self.typed,
                                             full=self.check == "full",
                                             contradicted=contradicted)
                    if problems:
                        where = sites.location_of(problems) if sites is not None else None
                        problems = as_written(problems, root, changes.removed)
                        own = (model_rejects_folded_values(entry.name, problems, changes)
                               if entry.builtin and getattr(instance, "exact_folds", False)
                               else None)
                        raise _PassFailed(RunStatus(status.outcome, "FAILED"),
                                          describe_problems(problems),
                                          [n for p in problems for n in p.nodes], where, own)
                if root.mutation_count != before:  # (under the collection hold)
                    self._note_changes(entry, changes, stage)
        except _PassFailed as failed:
            earlier = self._plugin_behind(entry, root, failed.nodes)
            if failed.model_error is not None and earlier is None:
                failed.model_error.stage = stage
                raise failed.model_error from None
            reason = failed.reason or context.get_error_message() or failed.status.reason
            reason += on_body(target, root)
            raise run_error(entry, stage, failed.status.return_code, reason,
                            nodes=failed.nodes, location=failed.location,
                            earlier=earlier) from None
        except BaseException as exc:
            if not is_pass_failure(exc):
                raise
            reason = describe_exception(exc)
            hint = symbolic_dim_hint(exc, _graph_symbols(root))
            if hint is not None:
                reason += f" ({hint})"
            # the match (or node) that failed may be one its hook meant to refuse
            if run.last_odd_accepted:
                odd = run.last_answer
                reason += (f" (before it, meet_requirements returned {type(odd).__name__} "
                           f"{short_repr(odd)}, which counts as True: return True or False)")
            reason += on_body(target, root)
            raise run_error(entry, stage, "FAILED", reason, exc,
                            unchecked=self.check == "none") from exc
        changed = root.mutation_count != before
        self.facts.refresh(root)
        nodes_after, constants_after = self.facts.size(target)
        outcome = status.outcome
        if run.untyped_refusals and not run.rewrites:
            self._warn_untyped_refusals(entry, instance, target, run)
        if run.none_answers and not run.rewrites:
            self._warn_none_answers(entry, instance, target, run)
        if run.odd_answers:
            self._warn_odd_answers(entry, instance, target, run)
        if outcome is RunOutcome.NOT_CHANGED and changed:
            # The graph says otherwise: the run changed it (and was checked as a change).
            outcome = RunOutcome.SUCCESS
            if not entry.builtin:
                self._warn_not_changed(entry, instance, target, changes, nodes_before,
                                       nodes_after)
        return PassRunRecord(
            pass_name=entry.name,
            stage=stage,
            graph_name=target.name,
            graph_path=self.facts.path(target),
            outcome=outcome,
            changed=changed,
            seconds=time.perf_counter() - start,
            matches=run.matches,
            rewrites=run.rewrites,
            fusions=context._fusions,
            kind=entry.descriptor.kind,
            origin=str(entry.origin),
            location=entry.origin.location,
            nodes_before=nodes_before,
            nodes_after=nodes_after,
            constants_before=constants_before,
            constants_after=constants_after,
            round=self.round,
            refusals=run.refusals,
            refusal_reasons=tuple(run.refusal_reasons.items()),
            bodies_changed=self._bodies_changed(changes, root) if changed else (),
            edit_lines=sites.lines() if sites is not None and changed else (),
            edit_location=(hook_location(getattr(instance, "replacement", None))
                           if changed and not entry.builtin
                           and entry.descriptor.kind != PASS_KIND_FUSION_BASE else None),
        )

    def _bodies_changed(self, changes: ChangeSet, root: Graph) -> tuple[str, ...]:
        """The paths of the bodies of `root` still in the model that `changes` were made
        in, whichever graph the run was given: what the verification's coverage warning
        must know (a root run may edit or build a branch its inputs never take)."""
        return tuple(dict.fromkeys(self.facts.path(graph) for graph in changes.changed_graphs()
                                   if graph is not root and is_live(graph, root)))

    def _warn_not_changed(self, entry: RegisteredPass, instance: Any, target: Graph,
                          changes: ChangeSet, nodes_before: int, nodes_after: int) -> None:
        """A `PassDefinitionWarning` for a `run()` that returned NOT_CHANGED after changing
        the graph, at its `def` line, once per pass and compilation: the run is recorded as
        the change it was (the report, the HTML page and per-pass verification count on
        outcomes telling the truth), and the author learns that the return value is wrong."""
        if entry.name in self.warned_not_changed:
            return
        self.warned_not_changed.add(entry.name)
        where = (hook_location(getattr(instance, "run", None))
                 or entry.descriptor.location)
        counts = (f"nodes {nodes_before} -> {nodes_after}" if nodes_before != nodes_after
                  else f"nodes {nodes_after}")
        warn_user(PassDefinitionWarning(
            f"pass {entry.name} returned NOT_CHANGED from run() but changed "
            f"{graph_label(target)} ({counts}; {_changed_nodes(changes)}): ge records the run "
            "as changed; return True, None or SUCCESS when run() changes the graph, "
            f"NOT_CHANGED only when it leaves the graph as it was (at {where})"), where)

    def _plugin_behind(self, entry: RegisteredPass, root: Graph, nodes: Iterable[str]
                       ) -> Blame | None:
        """For a built-in pass whose check failed: the plugin pass that last changed one of
        the nodes the check names, or the nearest node upstream (a stale shape a plugin
        left, which the check after the plugin did not reach), else None."""
        if not entry.builtin:
            return None
        blamed = self.last_changes.blame(root, nodes)
        return blamed if blamed is not None and not blamed.cause.builtin else None

    def _warn_untyped_refusals(self, entry: RegisteredPass, instance: Any, target: Graph,
                               run: PassRun) -> None:
        """A `PassDefinitionWarning` for a BeforeInferShape pass whose `meet_requirements`
        refused every match while values they read were untyped, once per pass and
        compilation: GE's samples read data types at that stage, where a model declaring
        none (a TorchScript export) gives DT_UNDEFINED here, so the pass silently did
        nothing (trial O); at AfterInferShape it would see them typed."""
        self._warn_hook_once(
            self.warned_untyped, entry, instance,
            f"pass {entry.name} refused all {run.matches} of its match(es) in "
            f"{graph_label(target)} at BeforeInferShape, {run.untyped_refusals} after reading a "
            f"value with no type or rank ({run.first_untyped} first): before shape inference "
            "only the types and shapes the model file declares are known, so a "
            "meet_requirements reading data types or shapes sees DT_UNDEFINED there; "
            "register the pass at AfterInferShape to see them inferred (`ge passes explain "
            f"{entry.name} MODEL` shows each refusal)")

    def _warn_none_answers(self, entry: RegisteredPass, instance: Any, target: Graph,
                           run: PassRun) -> None:
        """A `PassDefinitionWarning` for a pass that rewrote nothing while its
        `meet_requirements` returned None (GE reads None as False: a missing `return`
        refuses every match in silence), once per pass and compilation; `ge passes
        explain` says it per match."""
        self._warn_hook_once(
            self.warned_none, entry, instance,
            f"pass {entry.name} rewrote nothing in {graph_label(target)}: its "
            f"meet_requirements returned None for {run.none_answers} of {run.matches} "
            f"{'node(s)' if run.op_types else 'match(es)'}, and None counts as False (a "
            "missing return?)")

    def _warn_odd_answers(self, entry: RegisteredPass, instance: Any, target: Graph,
                          run: PassRun) -> None:
        """A `PassDefinitionWarning` for a `meet_requirements` that answered other than a
        bool (`"no"`, `0.0`, a list), which GE reads as `bool(answer)`: a string meant as a
        refusal accepts the match. Once per pass and compilation."""
        what = "node(s)" if run.op_types else "match(es)"  # (a DecomposePass is asked of nodes)
        self._warn_hook_once(
            self.warned_odd, entry, instance,
            f"pass {entry.name}: its meet_requirements returned " + odd_answer_text(
                run.first_odd_answer, run.first_odd_accepted,
                f" for {run.odd_answers} of {run.matches} {what} in {graph_label(target)}"))

    @staticmethod
    def _warn_hook_once(warned: set[str], entry: RegisteredPass, instance: Any,
                        text: str) -> None:
        """`text` as a `PassDefinitionWarning` at the pass's `meet_requirements` (else its
        definition), unless `warned` has the pass already (once per compilation)."""
        if entry.name in warned:
            return
        warned.add(entry.name)
        where = (hook_location(getattr(instance, "meet_requirements", None))
                 or entry.descriptor.location)
        warn_user(PassDefinitionWarning(f"{text} (at {where})"), where)

    def _note_changes(self, entry: RegisteredPass, changes: ChangeSet, stage: str) -> None:
        """Record the pass as the last to change the nodes it changed (`last_changes`).
        Remember the nodes a plugin pass made; count those a built-in pass rewrote into
        operators of its own (a fusion, of any kind: SliceSplitFusion turning a plugin's
        Slices back into a Split too). A built-in that only removes or folds them (dead
        code, a common subexpression, constants) is not counted: that is cleanup, not a
        rewrite the plugin's result must survive."""
        self.last_changes.record(
            PassChange(entry.name, stage, entry.origin.location, builtin=entry.builtin),
            changes.live(), changes.removed, changes.added)
        if entry.step is None:
            self.made_by_plugins.update(dict.fromkeys(changes.added, (entry.name, stage)))
        elif self.made_by_plugins and not all(map(is_const, changes.added)):
            for node in changes.removed:
                maker = self.made_by_plugins.pop(node, None)
                if maker is not None:
                    key = (entry.name, *maker)
                    self.undone[key] = self.undone.get(key, 0) + 1

    def idle_record(self, entry: RegisteredPass, target: Graph, stage: str,
                    rolled_back: str | None = None) -> PassRunRecord:
        """The record of a run that left `target` as it was: skipped because it has none of
        the op types the pass needs, or (`rolled_back`: the failure) rolled back."""
        self.facts.refresh(target)
        nodes, constants = self.facts.size(target)
        return PassRunRecord(
            pass_name=entry.name, stage=stage, graph_name=target.name,
            graph_path=self.facts.path(target),
            outcome=RunOutcome.NOT_CHANGED if rolled_back is None else RunOutcome.FAILED,
            changed=False, seconds=0.0, kind=entry.descriptor.kind, origin=str(entry.origin),
            location=entry.origin.location, nodes_before=nodes, nodes_after=nodes,
            constants_before=constants, constants_after=constants,
            round=self.round, rolled_back=rolled_back)


def _graph_symbols(root: Graph) -> set[str]:
    """The symbolic dims of the values of `root` and its bodies (as the pass found them:
    asked after the rollback), for the hint on an exception about a str dim."""
    return shape_symbols(node.get_output_desc(i).get_shape() for node in root.get_all_nodes()
                         for i in range(node.get_outputs_size()))


def _changed_nodes(changes: ChangeSet, shown: int = 3) -> str:
    """What a pass changed, by node: `removed 'relu'; changed 'sig'` (the first `shown`
    names of each kind and how many more)."""
    parts = []
    for verb, nodes in (("added", list(changes.added)), ("removed", list(changes.removed)),
                        ("changed", [n for n in changes.live() if n not in changes.added])):
        if nodes:
            parts.append(f"{verb} {first_and_more([repr(n.name) for n in nodes], shown)}")
    return "; ".join(parts) or "its nodes' metadata or descs"


def on_body(target: Graph, root: Graph) -> str:
    """Where a failed run was, when not on the root graph: every pass runs on each body
    too, and exporters name bodies alike (`graph_label` names the owner)."""
    return "" if target is root else f" (in its run on {graph_label(target)})"


def _keep_patterns(kept: BuiltPatterns, root: Graph, instance: object,
                   compiled: list[CompiledPattern]) -> None:
    """Keep a built-in pass's patterns, just built at `root`'s opsets (asked only then:
    most invocations find them built)."""
    kept.keep(instance, opsets_key(root.opset_imports), compiled)


def create_instance(entry: RegisteredPass, stage: str) -> Any:
    """A fresh instance of the pass class; E13028 when its constructor fails."""
    try:
        return entry.descriptor.cls()
    except BaseException as exc:
        if not is_pass_failure(exc):
            raise
        raise run_error(entry, stage, "FAILED",
                        f"could not create the pass: {describe_exception(exc)}", exc) from exc


def _edited_by(entry: RegisteredPass) -> str | None:
    """The file whose lines `change_sites` notes for a plugin's FusionBasePass, whose
    `run()` edits the graph itself; None for the others."""
    if entry.builtin or entry.descriptor.kind != PASS_KIND_FUSION_BASE:
        return None
    return entry.descriptor.location.file if entry.descriptor.location else None
