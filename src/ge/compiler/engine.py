"""The compiler's lifetime: `initialize`, `finalize`, and `compile_graph` in between.

`initialize()` loads the Python pass plugins once (the environment is read then, D13) and
builds the `PassRegistry` every compilation starts from; the first compilation initialises
implicitly. `finalize()` unloads the plugins; the next initialisation reads the environment
again. Compilations may run concurrently in threads: each has its own pass instances.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ge.compiler.options import CompilerOptions, parse_options
from ge.compiler.pass_registry import PassRegistry
from ge.compiler.plugin_loader import PluginLoader
from ge.compiler.report import CompileReport, op_histogram
from ge.compiler.scheduler import EngineStep, PipelineObserver, Scheduler
from ge.errors import CompilerOptionError, CompilerStateError, GeError
from ge.passes.bootstrap import warn_failures
from ge.passes.loader import PluginLoadReport

if TYPE_CHECKING:
    from ge.graph import Graph

__all__ = [
    "check_pass_names",
    "compilation_registry",
    "compile_graph",
    "current_pass_registry",
    "finalize",
    "initialize",
    "is_initialized",
]


@dataclass
class _Engine:
    options: CompilerOptions
    loader: PluginLoader
    registry: PassRegistry
    skipped: list[GeError]


_LOCK = threading.RLock()
_engine: _Engine | None = None


def _build_registry(
    base: PassRegistry, report: PluginLoadReport, options: CompilerOptions
) -> tuple[PassRegistry, list[GeError]]:
    """`base` plus the report's plugins; a clash fails, or skips the plugin (continue option)."""
    registry = base.copy()
    skipped = list(report.failures)
    for plugin in report.plugins:
        try:
            registry.add_plugin(plugin)
        except GeError as err:
            if not options.continue_on_plugin_error:
                raise
            skipped.append(err)
            warn_failures(PluginLoadReport(failures=[err]))
    return registry, skipped


def _start(options: CompilerOptions, *, keep: bool = True) -> _Engine:
    """Load the environment's plugins with `options`; keep the options for later
    compilations only when they came from `initialize()`."""
    loader = PluginLoader()
    report = loader.load_from_environment(options)
    try:
        registry, skipped = _build_registry(PassRegistry.with_builtins(), report, options)
    except GeError:
        loader.unload()
        raise
    return _Engine(options if keep else CompilerOptions(), loader, registry, skipped)


def initialize(options: Mapping[str, str] | None = None) -> None:
    """Start the compiler: read `ASCEND_GE_PY_PASS_PATH` once and load the pass plugins.

    Calling it again is a no-op when `options` is None or unchanged; other options need
    `finalize()` first. A plugin failure raises E13029/E13030 and leaves it uninitialised,
    unless the option `ge.passes.continue_on_plugin_error` is "true".
    """
    global _engine
    parsed = parse_options(options)
    with _LOCK:
        if _engine is not None:
            if options is None or parsed == _engine.options:
                return
            raise CompilerStateError(
                "ge is already initialized with other options; call ge.finalize() first"
            )
        _engine = _start(parsed)


def finalize() -> None:
    """Stop the compiler: unload the pass plugins; the next start reads the environment again."""
    global _engine
    with _LOCK:
        if _engine is not None:
            _engine.loader.unload()
            _engine = None


def is_initialized() -> bool:
    """Whether `initialize()` (or a first compilation) ran and `finalize()` did not since."""
    with _LOCK:
        return _engine is not None


def _current(options: CompilerOptions) -> _Engine:
    """The running engine; the first compilation starts it with its own options for
    loading, without making them the options of later compilations."""
    global _engine
    with _LOCK:
        if _engine is None:
            _engine = _start(options, keep=False)
        return _engine


def current_pass_registry() -> PassRegistry:
    """The passes compilations start from (initialises the compiler if needed)."""
    return _current(CompilerOptions()).registry.copy()


def compilation_registry(
    options: Mapping[str, str] | None = None,
    pass_paths: Iterable[str | os.PathLike[str]] | None = None,
) -> tuple[PassRegistry, CompilerOptions, list[GeError]]:
    """The passes, merged options and skipped plugins of one compilation: the running
    engine's (started if needed) plus the plugins of `pass_paths`."""
    engine = _current(parse_options(options))
    merged = engine.options.merged(options)
    registry = engine.registry
    skipped = list(engine.skipped)
    if pass_paths is not None:
        report = engine.loader.load_paths(pass_paths, merged)
        registry, extra_skipped = _build_registry(registry, report, merged)
        skipped += extra_skipped
    return registry, merged, skipped


def check_pass_names(registry: PassRegistry, names: Iterable[str]) -> frozenset[str]:
    """`names` as a set, each the name of a pass in `registry`; CompilerOptionError if not."""
    chosen = frozenset(names)
    unknown = sorted(n for n in chosen if n not in registry)
    if unknown:
        known = ", ".join(sorted(p.name for p in registry))
        raise CompilerOptionError(
            f"cannot disable unknown pass(es) {', '.join(unknown)}; known passes: {known}")
    return chosen


def compile_graph(
    graph: Graph,
    *,
    options: Mapping[str, str] | None = None,
    pass_paths: Iterable[str | os.PathLike[str]] | None = None,
    steps: Mapping[str, EngineStep | None] | None = None,
    builtin_passes: bool = True,
    disable: Iterable[str] = (),
    check: str = "region",
    on_pass_failure: str = "stop",
    observers: Iterable[PipelineObserver] = (),
) -> CompileReport:
    """Compile `graph` in place: run the pipeline with the built-in and plugin passes.

    `options` (str → str) apply to this compilation on top of those of `initialize`; passes
    read them through `PassContext.get_option_value`. `pass_paths` are extra plugin files
    or directories for this compilation only (an explicit argument, not the environment).
    `disable` names passes (built-in or plugin) not to run; `builtin_passes=False` runs
    none of the built-in ones. A failing pass raises E13028 and leaves the graph as that
    pass found it (`on_pass_failure="skip"` rolls it back, warns and goes on); after each
    pass that changed the graph, the nodes it touched are checked (`check="full"`: the
    whole graph). Shape inference runs after `BeforeInferShape` (GE1305, stage
    "InferShape") and the result is validated last (GE1003, stage "FinalValidation").
    `steps` replaces engine steps of this compilation by name (None skips one).
    """
    start = time.perf_counter()
    registry, merged, skipped = compilation_registry(options, pass_paths)
    scheduler = Scheduler(registry, merged.values, steps,
                          disabled=check_pass_names(registry, disable), builtin=builtin_passes,
                          check=check, on_pass_failure=on_pass_failure, observers=observers)
    ops_before = op_histogram(graph)
    records = scheduler.run(graph)
    return CompileReport(graph=graph, records=records, skipped_plugins=skipped,
                         steps=scheduler.steps, ops_before=ops_before,
                         ops_after=op_histogram(graph), fixed_point=scheduler.fixed_point,
                         seconds=time.perf_counter() - start)
