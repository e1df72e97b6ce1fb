"""The scheduler: the pipeline steps in order, and every pass of a step run in GE's way.

Pipeline: BeforeInferShape → shape inference → AfterInferShape → built-in fusion →
AfterBuiltinFusionPass → origin-graph optimisation → AfterOriginGraphOptimize → final
validation. `infer_shape` and `final_validation` are functions (`ge.compiler.steps`; a
compilation may be given others, `Scheduler(steps=...)`); built-in fusion runs the built-in
passes of that step once each; origin-graph optimisation runs its built-in passes in rounds
until a round changes nothing (a fixed point), at most `ge.optimize.max_rounds` rounds.

Within a plugin stage passes run lexicographically by name (D14), each on the root graph,
then on every live subgraph, with one fresh instance per pass per compilation, run by its
kind (`ge.passes.execution`) in a transaction (`ge.compiler.invocation`). The first failure
stops the compilation, unless `on_pass_failure="skip"`: then the failing invocation is
rolled back, a `CompileWarning` says so, and the compilation goes on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ge.compiler.arguments import described, item_list, mapping, text
from ge.compiler.built_patterns import BuiltPatterns, opsets_key
from ge.compiler.folded_values import FoldedValueRejected
from ge.compiler.invocation import CHECK_MODES, Invocation, create_instance, is_live, on_body
from ge.compiler.last_changes import LastChanges
from ge.compiler.opset_imports import drop_emptied_opset_imports, unused_opset_imports
from ge.compiler.options import OPTION_MAX_ROUNDS
from ge.compiler.pass_registry import BUILTIN_STEPS, PassRegistry, RegisteredPass
from ge.compiler.report import FixedPointRecord, PassRunRecord, StepRecord, node_counts
from ge.compiler.steps import (
    FINAL_VALIDATION_STAGE,
    INFER_SHAPE_STAGE,
    final_validation,
    infer_shape,
    warn_contradicted_outputs,
)
from ge.errors import (
    CompilerOptionError,
    CompilerOptionTypeError,
    CompileWarning,
    GeError,
    PassRunError,
)
from ge.graph.validation import check_acyclic
from ge.ops.memo import InferenceMemo
from ge.passes.source import warn_user
from ge.passes.stage import PassStage

if TYPE_CHECKING:
    from ge.graph import Graph

__all__ = [
    "DEFAULT_ENGINE_STEPS",
    "ENGINE_STEPS",
    "OPTION_MAX_ROUNDS",
    "PIPELINE",
    "EngineStep",
    "PipelineObserver",
    "Scheduler",
    "check_modes",
    "engine_steps",
    "observer_list",
    "step_label",
]

#: An engine step between stages: gets the root graph and the compilation's options.
EngineStep = Callable[["Graph", Mapping[str, str]], None]

ENGINE_STEPS = ("infer_shape", "builtin_fusion", "origin_graph_optimize", "final_validation")
PIPELINE: tuple[PassStage | str, ...] = (
    PassStage.BEFORE_INFER_SHAPE,
    "infer_shape",
    PassStage.AFTER_INFER_SHAPE,
    "builtin_fusion",
    PassStage.AFTER_BUILTIN_FUSION_PASS,
    "origin_graph_optimize",
    PassStage.AFTER_ORIGIN_GRAPH_OPTIMIZE,
    "final_validation",
)

#: The function steps a compilation runs unless it is given others (a step given None is
#: skipped). The two built-in pass steps run the registry's passes of that step.
DEFAULT_ENGINE_STEPS: Mapping[str, EngineStep] = MappingProxyType({
    "infer_shape": infer_shape,
    "final_validation": final_validation,
})

_DEFAULT_MAX_ROUNDS = 8  # rounds unless OPTION_MAX_ROUNDS says otherwise

_STEP_LABELS = {"infer_shape": INFER_SHAPE_STAGE, "final_validation": FINAL_VALIDATION_STAGE,
                **BUILTIN_STEPS}


def step_label(step: PassStage | str) -> str:
    """The name reports, dumps and errors give a pipeline step ("AfterInferShape", "InferShape")."""
    return step.value if isinstance(step, PassStage) else _STEP_LABELS[step]


class PipelineObserver:
    """Told about the compilation as it goes (dumps, per-pass verification, progress).

    Methods run outside any transaction and must not change the graph; an exception they
    raise stops the compilation.
    """

    def compilation_started(self, last_changes: LastChanges) -> None:
        """The compilation begins; `last_changes` will say which pass last changed each
        node (what an observer's own error about a pass names the nodes from)."""

    def step_started(self, index: int, label: str, graph: Graph) -> None:
        """Step `index` of `PIPELINE` (named `label`) is about to run."""

    def step_finished(self, index: int, label: str, graph: Graph) -> None:
        """Step `index` of `PIPELINE` ran; `graph` is the root graph after it."""

    def pass_finished(self, record: PassRunRecord, graph: Graph) -> None:
        """One pass invocation ended (committed, or rolled back under skip)."""

    def pass_done(self, records: Sequence[PassRunRecord], graph: Graph) -> None:
        """One pass ran on the root graph and on every body (`records`, one per graph, in
        order): what looks at the whole model after a pass (verification, the HTML page's
        changes) does it here, once, not once per body."""

    def compilation_failed(self, error: BaseException, graph: Graph) -> None:
        """A step or pass failed with `error`; `graph` is as the failure left it (a failing
        pass's run rolled back, the passes before it kept), before the compilation undoes
        them: the last moment to look at it."""


def check_modes(check: object, on_pass_failure: object) -> None:
    """Refuse a `check` or `on_pass_failure` the scheduler does not have: of another type
    than str (`CompilerOptionTypeError`, naming it) or another value (`CompilerOptionError`)."""
    if text(check, "check", f"one of {CHECK_MODES}") not in CHECK_MODES:
        raise CompilerOptionError(f"check must be one of {CHECK_MODES}, got {check!r}")
    if text(on_pass_failure, "on_pass_failure", "'stop' or 'skip'") not in ("stop", "skip"):
        raise CompilerOptionError(
            f"on_pass_failure must be 'stop' or 'skip', got {on_pass_failure!r}")


def observer_list(observers: object) -> list[PipelineObserver]:
    """`observers` as a list of `PipelineObserver`s (`CompilerOptionTypeError` for one alone,
    or anything else: see `ge.compiler.arguments.item_list`)."""
    return item_list(observers, "observers", PipelineObserver, "PipelineObserver objects")


def engine_steps(steps: Mapping[str, EngineStep | None] | None) -> dict[str, EngineStep | None]:
    """The defaults with `steps` applied: a function replaces a step, None skips it.
    `CompilerOptionError` (GE1202) for an unknown step name; `CompilerOptionTypeError` for
    `steps` not a mapping, or a step neither a function nor None."""
    chosen: dict[str, EngineStep | None] = dict(DEFAULT_ENGINE_STEPS)
    if steps is None:
        return chosen
    for name, step in mapping(steps, "steps", "engine step names to functions").items():
        if name not in ENGINE_STEPS:
            raise CompilerOptionError(
                f"unknown engine step {name!r}; expected one of {ENGINE_STEPS}")
        if step is not None and not callable(step):
            raise CompilerOptionTypeError(
                f"steps[{name!r}] must be a function (graph, options) or None, got "
                f"{described(step)}")
        chosen[str(name)] = step
    return chosen


def _max_rounds(options: Mapping[str, str]) -> int:
    raw = options.get(OPTION_MAX_ROUNDS)
    if raw is None:
        return _DEFAULT_MAX_ROUNDS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise CompilerOptionError(f"option {OPTION_MAX_ROUNDS} must be a positive integer, "
                                  f"got {raw!r}")
    return value


class Scheduler:
    """Runs the pipeline on one graph for one compilation (one instance per pass)."""

    def __init__(self, registry: PassRegistry, options: Mapping[str, str],
                 steps: Mapping[str, EngineStep | None] | None = None, *,
                 disabled: Iterable[str] = (), builtin: bool = True, check: str = "region",
                 on_pass_failure: str = "stop",
                 observers: Iterable[PipelineObserver] = (),
                 built_patterns: BuiltPatterns | None = None) -> None:
        """`steps` replaces engine steps by name (None skips one). `disabled` names passes
        not to run; `builtin=False` runs no built-in pass. `check` is "region" (the nodes a
        pass touched), "full" or "none"; `on_pass_failure` is "stop" or "skip".
        `built_patterns` (the engine's) gives built-in pattern passes the patterns an
        earlier compilation built and keeps those this one builds."""
        check_modes(check, on_pass_failure)
        self._registry = registry
        self._options = dict(options)
        self._steps = engine_steps(steps)
        self._disabled = frozenset(disabled)
        self._builtin = builtin
        self._skip_failures = on_pass_failure == "skip"
        self._observers = list(observers)
        self._max_rounds = _max_rounds(self._options)
        self._instances: dict[str, Any] = {}
        self._skips_said: set[tuple[str, str]] = set()  # (pass, failure) warned of
        self._invocation = Invocation(self._options, InferenceMemo(), check=check,
                                      built_patterns=built_patterns)
        self.records: list[PassRunRecord] = []
        self.steps: list[StepRecord] = []
        self.fixed_point: FixedPointRecord | None = None

    @property
    def last_changes(self) -> LastChanges:
        """Which pass last changed each node of the graph run (`CompileReport.last_changes`)."""
        return self._invocation.last_changes

    def run(self, graph: Graph) -> list[PassRunRecord]:
        """Run every pipeline step on `graph` in place; stops at the first failure. A graph
        with a cycle (root or body) is refused first, GE1003 naming its nodes
        (`check_acyclic`): no pass nor step can take it, and a pass would be blamed for it.
        Before final validation, the opset imports of the domains the passes emptied are
        dropped (`ge.compiler.opset_imports`)."""
        check_acyclic(graph.root_graph())
        for observer in self._observers:
            observer.compilation_started(self.last_changes)
        try:
            return self._run(graph)
        except BaseException as err:
            for observer in self._observers:
                observer.compilation_failed(err, graph)
            raise

    def _run(self, graph: Graph) -> list[PassRunRecord]:
        unused = unused_opset_imports(graph)  # the input's own: kept
        for index, step in enumerate(PIPELINE):
            if step == "final_validation":
                drop_emptied_opset_imports(graph, unused)
            label = step_label(step)
            for observer in self._observers:
                observer.step_started(index, label, graph)
            counts_before = node_counts(graph, as_written=False)  # (the graphs passes get)
            start = time.perf_counter()
            if isinstance(step, PassStage):
                self.run_stage(graph, step)
            elif step in BUILTIN_STEPS:
                self._run_builtin_step(graph, step)
            else:
                func = self._steps.get(step)
                if func is None:
                    continue
                try:
                    func(graph, self._options)
                except GeError as err:  # about nodes: the pass that last changed one
                    blamed = self.last_changes.blame(graph, err.nodes)
                    if blamed is not None:
                        blamed.add_to(err)
                    raise
                if step == "infer_shape":
                    self._invocation.typed = True  # from now on, every value has a type
                    warn_contradicted_outputs(graph.root_graph(), self.last_changes)
            self.steps.append(StepRecord.of(label, time.perf_counter() - start, counts_before,
                                            node_counts(graph, as_written=False)))
            for observer in self._observers:
                observer.step_finished(index, label, graph)
        self._warn_undone()
        return self.records

    def _warn_undone(self) -> None:
        """Tell a plugin whose nodes a built-in fusion replaced (a decomposition re-fused)."""
        for (builtin, plugin, stage), count in self._invocation.undone.items():
            warn_user(CompileWarning(
                f"built-in {builtin} replaced {count} node(s) that pass {plugin} made at "
                f"{stage}: its work was undone. A pass whose result must stay (a "
                "decomposition for a backend lacking an operator) belongs at "
                f"AfterOriginGraphOptimize, after the built-in passes; or disable {builtin} "
                f"(--disable {builtin})"))

    def run_stage(self, graph: Graph, stage: PassStage) -> None:
        """Every enabled pass of `stage`, by name; each on the root graph, then every subgraph."""
        for entry in self._registry.for_stage(stage):
            if entry.name not in self._disabled:
                self._run_everywhere(entry, graph)

    def _run_builtin_step(self, graph: Graph, step: str) -> None:
        if not self._builtin:
            return
        entries = [e for e in self._registry.for_step(step) if e.name not in self._disabled]
        if step != "origin_graph_optimize":
            for entry in entries:
                self._run_everywhere(entry, graph)
            return
        if not entries:
            return
        label = step_label(step)
        changing: list[str] = []
        for round_ in range(1, self._max_rounds + 1):
            self._invocation.round = round_
            changing = [e.name for e in entries if self._run_everywhere(e, graph, label)]
            if not changing:
                self.fixed_point = FixedPointRecord(round_, True)
                break
        else:
            self.fixed_point = FixedPointRecord(self._max_rounds, False, tuple(changing))
            warn_user(CompileWarning(
                f"origin-graph optimisation did not reach a fixed point in {self._max_rounds} "
                f"rounds ({OPTION_MAX_ROUNDS}); still changing the graph: "
                f"{', '.join(changing)}; the model is correct but may be less optimised "
                f"than it could be (--option {OPTION_MAX_ROUNDS}=N allows more rounds)"))
        self._invocation.round = 0

    def _kept_instance(self, entry: RegisteredPass, graph: Graph) -> Any:
        """A built-in pass instance with the patterns an earlier compilation built at this
        model's opsets (`ge.compiler.built_patterns`), or None."""
        kept = self._invocation.built_patterns
        found = None if kept is None else kept.instance(
            entry.descriptor.cls, opsets_key(graph.root_graph().opset_imports))
        if found is None:
            return None
        instance, compiled = found
        self._instances[entry.name] = instance
        self._invocation.patterns[id(instance)] = (instance, compiled)
        return instance

    def _run_everywhere(self, entry: RegisteredPass, graph: Graph,
                        stage: str | None = None) -> bool:
        """Run one pass on the root graph, then on every live subgraph (reported under
        `stage`, by default the pass's own); whether it changed anything."""
        stage = stage or entry.stage_label
        first = len(self.records)
        instance = self._instances.get(entry.name)
        if instance is None and entry.builtin:
            instance = self._kept_instance(entry, graph)
        if instance is None:
            try:
                instance = self._instances[entry.name] = create_instance(entry, stage)
            except PassRunError as err:
                self._skip_or_raise(err, entry, graph, graph)
                return False
        changed = self._invoke(entry, instance, graph, graph, stage)
        # Listed after the root run (the pass may have added or removed bodies), and each
        # checked again before its run: a body an earlier run removed is dead.
        listed = graph.mutation_count
        for target in _subgraphs(graph):
            if graph.mutation_count == listed or is_live(target, graph):
                changed = self._invoke(entry, instance, target, graph, stage) or changed
        records = self.records[first:]
        for observer in self._observers:
            observer.pass_done(records, graph)
        return changed

    def _invoke(self, entry: RegisteredPass, instance: Any, target: Graph, root: Graph,
                stage: str) -> bool:
        try:
            record = self._invocation.run(entry, instance, target, root, stage)
        except (PassRunError, FoldedValueRejected) as err:
            self._skip_or_raise(err, entry, target, root, stage)
            return False
        self._record(record, root)
        return record.changed

    def _skip_or_raise(self, err: PassRunError | FoldedValueRejected, entry: RegisteredPass,
                       target: Graph,
                       root: Graph, stage: str | None = None) -> None:
        if not self._skip_failures:
            raise err
        # Once per pass and failure: a pass failing alike in every body (they are run on
        # each) is said once, where it failed first.
        said = str(err).replace(on_body(target, root), "") if target is not root else str(err)
        if (entry.name, said) not in self._skips_said:
            self._skips_said.add((entry.name, said))
            warn_user(CompileWarning(f"pass {entry.name} rolled back and skipped "
                                     f"(on_pass_failure=skip): {err}"),
                      about=getattr(err, "location", None))  # (the report's `location`)
        self._record(self._invocation.idle_record(entry, target, stage or entry.stage_label,
                                                  rolled_back=err.message), root)

    def _record(self, record: PassRunRecord, root: Graph) -> None:
        self.records.append(record)
        for observer in self._observers:
            observer.pass_finished(record, root)


def _subgraphs(root: Graph) -> list[Graph]:
    # Orphan subgraphs (not owned by a node) are not part of the compiled model.
    return [sub for sub in root.get_all_subgraphs() if not sub.is_orphan()]
