"""The scheduler: the pipeline steps in order, and every pass of a stage run in GE's way.

Pipeline: BeforeInferShape → shape inference → AfterInferShape → built-in fusion →
AfterBuiltinFusionPass → origin-graph optimisation → AfterOriginGraphOptimize → final
validation. The engine steps between stages are functions a compilation is given
(`Scheduler(steps=...)`, `compile_graph(steps=...)`); `infer_shape` and `final_validation`
default to `ge.compiler.steps` (shape inference of the whole model; `Graph.validate()`),
built-in fusion and origin-graph optimisation are empty for now.

Within a stage passes run lexicographically by name (D14), each on the root graph, then on
every subgraph, with one fresh instance per pass per compilation, run by its kind
(`ge.passes.execution`). Each invocation runs in a
graph transaction: a pass that raises or fails (D2) leaves the graph as it found it, and the
compilation stops with E13028 naming the pass, the stage, and the user's file and line.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ge.compiler.pass_registry import PassRegistry, RegisteredPass
from ge.compiler.report import PassRunRecord
from ge.compiler.steps import final_validation, infer_shape
from ge.errors import PassRunError, SourceLocation
from ge.es.opset import opset_scope
from ge.graph.allocation import no_full_collections
from ge.ops.memo import InferenceMemo, inference_memo_scope
from ge.passes.context import PassContext
from ge.passes.execution import PassRun, run_pass
from ge.passes.source import traceback_location
from ge.passes.stage import PassStage
from ge.passes.status import RunStatus, interpret_run_result

if TYPE_CHECKING:
    from ge.graph import Graph

__all__ = [
    "DEFAULT_ENGINE_STEPS",
    "ENGINE_STEPS",
    "PIPELINE",
    "EngineStep",
    "Scheduler",
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

#: The engine steps a compilation runs unless it is given others; a step without a
#: function is skipped.
DEFAULT_ENGINE_STEPS: Mapping[str, EngineStep] = MappingProxyType({
    "infer_shape": infer_shape,
    "final_validation": final_validation,
})


def _engine_steps(steps: Mapping[str, EngineStep | None] | None) -> dict[str, EngineStep]:
    """The defaults with `steps` applied: a function replaces a step, None skips it."""
    chosen = dict(DEFAULT_ENGINE_STEPS)
    for name, step in (steps or {}).items():
        if name not in ENGINE_STEPS:
            raise ValueError(f"unknown engine step {name!r}; expected one of {ENGINE_STEPS}")
        if step is None:
            chosen.pop(name, None)
        else:
            chosen[name] = step
    return chosen


class _PassFailed(Exception):
    """Raised inside the transaction so that a failure status rolls the graph back."""

    def __init__(self, status: RunStatus) -> None:
        super().__init__(status.reason)
        self.status = status


class Scheduler:
    """Runs the pipeline on one graph for one compilation (one instance per pass)."""

    def __init__(self, registry: PassRegistry, options: Mapping[str, str],
                 steps: Mapping[str, EngineStep | None] | None = None) -> None:
        """`steps` replaces engine steps by name (None skips one); the rest are the
        defaults of `DEFAULT_ENGINE_STEPS`."""
        self._registry = registry
        self._options = dict(options)
        self._steps = _engine_steps(steps)
        self._instances: dict[str, Any] = {}
        self._memo = InferenceMemo()  # per-node inference by signature, for every pass
        self.records: list[PassRunRecord] = []

    def run(self, graph: Graph) -> list[PassRunRecord]:
        """Run every pipeline step on `graph` in place; stops at the first failure."""
        for step in PIPELINE:
            if isinstance(step, PassStage):
                self.run_stage(graph, step)
            else:
                func = self._steps.get(step)
                if func is not None:
                    func(graph, self._options)
        return self.records

    def run_stage(self, graph: Graph, stage: PassStage) -> None:
        """Every pass of `stage`, by name; each on the root graph, then on every subgraph."""
        for entry in self._registry.for_stage(stage):
            instance = self._instance(entry)
            self.records.append(self._invoke(entry, instance, graph, graph))
            # Listed after the root run (the pass may have added or removed bodies), and each
            # checked again before its run: a body an earlier run removed is dead.
            for target in _subgraphs(graph):
                if _is_live(target, graph):
                    self.records.append(self._invoke(entry, instance, target, graph))

    def _instance(self, entry: RegisteredPass) -> Any:
        instance = self._instances.get(entry.name)
        if instance is None:
            try:
                instance = entry.descriptor.cls()
            except Exception as exc:
                raise _run_error(
                    entry, "FAILED", f"could not create the pass: {_describe(exc)}", exc
                ) from exc
            self._instances[entry.name] = instance
        return instance

    def _invoke(
        self, entry: RegisteredPass, instance: Any, target: Graph, root: Graph
    ) -> PassRunRecord:
        context = PassContext(entry.name, self._options)
        run = PassRun(context, tuple(entry.descriptor.op_types))
        before = root.mutation_count
        start = time.perf_counter()
        try:
            # Replacements built in the pass use the operator signatures of this model (issue 3,
            # point 6): builders created inside take the graph's opset imports.
            with root.transaction(), opset_scope(root.opset_imports), \
                    inference_memo_scope(self._memo), no_full_collections():
                status = interpret_run_result(
                    run_pass(entry.descriptor.kind, instance, target, run))
                if status.failed:
                    raise _PassFailed(status)
        except _PassFailed as failed:
            reason = context.get_error_message() or failed.status.reason
            raise _run_error(entry, failed.status.return_code, reason) from None
        except Exception as exc:
            raise _run_error(entry, "FAILED", _describe(exc), exc) from exc
        return PassRunRecord(
            pass_name=entry.name,
            stage=entry.stage.value,
            graph_name=target.name,
            outcome=status.outcome,
            changed=root.mutation_count != before,
            seconds=time.perf_counter() - start,
            matches=run.matches,
            rewrites=run.rewrites,
            fusions=context._fusions,
        )


def _subgraphs(root: Graph) -> list[Graph]:
    # Orphan subgraphs (not owned by a node) are not part of the compiled model.
    return [sub for sub in root.get_all_subgraphs() if not sub.is_orphan()]


def _is_live(sub: Graph, root: Graph) -> bool:
    """Whether `sub` is still a body of a node inside `root`'s hierarchy."""
    graph = sub
    while graph is not root:
        owner = graph.parent_node
        if owner is None or owner.owner_graph is None:
            return False
        if graph not in owner.get_subgraphs():
            return False
        graph = owner.owner_graph
    return True


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _run_error(
    entry: RegisteredPass, return_code: str, reason: str, exc: BaseException | None = None
) -> PassRunError:
    """E13028 at the user's line: the innermost frame in the pass's own file, else its class."""
    defined_at = entry.descriptor.location
    location: SourceLocation | None = None
    if exc is not None:
        location = traceback_location(exc.__traceback__, [defined_at.file], only_within=True)
    return PassRunError(
        f"Failed to run custom fusion pass {entry.name}. Return code: {return_code}. "
        f"Reason: {reason.rstrip('.')}.",
        pass_name=entry.name,
        stage=entry.stage.value,
        location=location or defined_at,
        path=defined_at.file,
    )
