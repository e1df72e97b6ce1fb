"""The compiler's lifetime: `initialize`, `finalize`, and `compile_graph` in between.

`initialize()` reads the environment once (D13): it loads the plugins of
`ASCEND_GE_PY_PASS_PATH` and the installed plugins (entry points) its options want, and its
options become the defaults of every compilation; the first compilation initialises
implicitly, without making its own options anybody's defaults. `finalize()` unloads the
plugins; the next initialisation reads the environment again.

Plugin options are options of one compilation: `ge.passes.disabled_plugins` and
`ge.passes.disable_plugin_autoload` decide which installed plugins take part in it (one
that no compilation wanted yet is imported when one does), and
`ge.passes.continue_on_plugin_error` whether a failed plugin fails it. Plugins of a
compilation's `pass_paths` are loaded for it and unloaded after it. Compilations may run
concurrently in threads: each has its own registry and pass instances, and its own view of
the custom operators (`ge.ops.registry.CustomOpView`: its plugins' operators, whatever
other compilations load and a `finalize()` unloads meanwhile). The plugins a compilation
runs with are those of one lifetime: one whose choice overlapped a `finalize()` in another
thread chooses again from the compiler running now (`PluginLoaderClosedError`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ge._text import first_and_more
from ge.compiler.arguments import described, flag, name_list
from ge.compiler.built_patterns import BuiltPatterns
from ge.compiler.dumping import GraphDumper
from ge.compiler.fusion_switch import OPTION_FUSION_SWITCH_FILE, read_fusion_switch
from ge.compiler.options import (
    OPTION_DISABLED_PLUGINS,
    CompilerOptions,
    parse_options,
    unknown_ge_options,
)
from ge.compiler.pass_registry import PassRegistry
from ge.compiler.plugin_loader import PathLease, PluginLoader, PluginLoaderClosedError
from ge.compiler.report import CompileReport, model_size
from ge.compiler.scheduler import (
    EngineStep,
    PipelineObserver,
    Scheduler,
    check_modes,
    engine_steps,
    observer_list,
)
from ge.compiler.steps import check_training_info, undefined_operators
from ge.errors import (
    CompileInputError,
    CompilerOptionError,
    CompilerStateError,
    CompileWarning,
    GeError,
)
from ge.ops.registry import CustomOp, CustomOpView
from ge.passes.bootstrap import ENV_PY_PASS_PATH, warn_failures
from ge.passes.loader import LoadedPlugin, PluginLoadReport, in_process_plugin
from ge.passes.plugin_names import (
    leave_out_hint,
    leave_out_option,
    unnameable,
    unnameable_note,
)
from ge.passes.source import warn_user

if TYPE_CHECKING:
    from ge.graph import Graph

__all__ = [
    "CompilationPasses",
    "check_pass_names",
    "compilation_passes",
    "compile_graph",
    "current_pass_registry",
    "finalize",
    "initialize",
    "is_initialized",
]


@dataclass
class _Engine:
    """One compiler lifetime: the defaults, the loader, and what every compilation shares.

    `registry` holds the built-in passes and those of `ASCEND_GE_PY_PASS_PATH`; `skipped`
    the plugins of the variable that failed at the start (continue-on-error); `custom_ops`
    the custom operators those plugins registered, which every compilation of this
    lifetime sees even after a `finalize()` unregistered them.
    """

    options: CompilerOptions
    loader: PluginLoader
    registry: PassRegistry
    skipped: list[GeError]
    custom_ops: tuple[CustomOp, ...] = ()
    # started by `initialize()`, not by a compilation finding none running
    explicit: bool = False
    # the built-in passes' patterns, built once per class and opsets
    built_patterns: BuiltPatterns = field(default_factory=BuiltPatterns)


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


def _plugin_ops(plugins: Iterable[LoadedPlugin]) -> tuple[CustomOp, ...]:
    return tuple(op for plugin in plugins for op in plugin.custom_ops)


def _registry_for(engine: _Engine, options: CompilerOptions
                  ) -> tuple[PassRegistry, list[GeError], tuple[CustomOp, ...]]:
    """The passes of a compilation with (merged) `options`, without its pass paths: the
    built-in and environment passes plus the installed plugins `options` do not disable;
    and the custom operators of those plugins.

    A plugin of the variable that failed at the start was skipped under the options of
    that start; a compilation that does not continue on plugin errors raises its error.
    """
    if engine.skipped and not options.continue_on_plugin_error:
        error = PluginLoadReport(failures=list(engine.skipped)).error()
        assert error is not None
        raise error
    _warn_stale(engine.loader.plugins)
    _warn_new(engine.loader.new_environment_plugins())
    report = engine.loader.entry_points_for(options)
    in_process = in_process_plugin()  # registered by the user's code itself: GE runs them
    if in_process is not None:
        report = PluginLoadReport([*report.plugins, in_process], list(report.failures),
                                  list(report.disabled))
    registry, skipped = _build_registry(engine.registry, report, options)
    return registry, list(engine.skipped) + skipped, engine.custom_ops + _plugin_ops(report.plugins)


def _warn_stale(plugins: Iterable[LoadedPlugin]) -> None:
    """A `CompileWarning` per plugin of the compiler whose files changed since it loaded
    them: the compilation runs the code imported then (D13: read once, until finalize;
    an installed plugin, an editable install's, stays imported for the process)."""
    for plugin in plugins:
        changed = plugin.changed_files()
        if not changed:
            continue
        if plugin.origin.kind == "entry_point":
            left_out = leave_out_hint([(plugin.origin.distribution,
                                        plugin.origin.entry_point_name or "")])
            how = ("an installed plugin stays imported for the life of the process, "
                   "ge.finalize() included: restart the process to run the edited code, or "
                   f"give the file as a pass path with the installed plugin left out ({left_out})")
        else:
            how = "ge.finalize() makes the next compilation load it afresh"
        warn_user(CompileWarning(
            f"plugin {plugin.origin} changed (or went) since the compiler loaded it "
            f"({first_and_more(changed)}): this compilation runs the code imported "
            f"then; {how}"))


def _warn_new(paths: list[Path]) -> None:
    """A `CompileWarning` for plugin files added to `ASCEND_GE_PY_PASS_PATH`'s folders since
    the compiler loaded them (trial R: a notebook's new file did nothing, without a word)."""
    if paths:
        warn_user(CompileWarning(
            f"{first_and_more([str(p) for p in paths])} appeared in "
            f"{ENV_PY_PASS_PATH}'s folders since the compiler loaded its plugins: "
            "this compilation does not load "
            f"{'it' if len(paths) == 1 else 'them'}; ge.finalize() makes the next "
            "compilation load the path afresh"))


def _start(options: CompilerOptions, *, keep: bool) -> _Engine:
    """Read the environment and load its plugins, then the entry points `options` want.

    The options become the defaults of later compilations only when they came from
    `initialize()` (`keep`). Any failure unloads what was loaded and raises.
    """
    loader = PluginLoader()
    try:
        builtins = PassRegistry.with_builtins()
        report = loader.start(options, builtins.clashes)
        registry, skipped = _build_registry(builtins, report, options)
        engine = _Engine(options if keep else CompilerOptions(), loader, registry, skipped,
                         _plugin_ops(report.plugins), explicit=keep)
        _registry_for(engine, options)  # D13: installed plugins load at initialisation
    except BaseException:
        loader.unload()
        raise
    return engine


def initialize(options: Mapping[str, str] | None = None) -> None:
    """Start the compiler: read the environment once and load the pass plugins.

    `options` become the defaults of every compilation until `finalize()` (a compilation's
    own options go on top). Calling it again is a no-op when `options` is None or
    unchanged; other options need `finalize()` first (CompilerStateError, GE1201). A
    compiler a compilation started by itself (none was running) is replaced: a service's
    `finalize(); initialize(options)` keeps its options even when a compilation in another
    thread started one in between. A plugin
    failure raises E13029/E13030 and leaves it uninitialised, unless the option
    `ge.passes.continue_on_plugin_error` is "true".
    """
    global _engine
    parsed = parse_options(options)
    with _LOCK:
        if _engine is not None:
            if options is None or (parsed == _engine.options and _engine.explicit):
                _engine.explicit = True  # the user's now: other options need finalize()
                return
            if not _engine.explicit:  # ge's convenience, not a choice of the user's
                _engine.loader.unload()
                _engine = None
                _engine = _start(parsed, keep=True)
                return
            raise CompilerStateError(
                "ge is already initialized with other options; call ge.finalize() first "
                "(or give the options to the compilation: they apply to it alone)"
            )
        _engine = _start(parsed, keep=True)


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
    """The running engine; the first compilation starts it, loading what its `options` ask
    for, without making them the defaults of later compilations."""
    global _engine
    with _LOCK:
        if _engine is None:
            _engine = _start(options, keep=False)
        return _engine


#: How many times a compilation chooses its plugins while `finalize()` calls in other
#: threads may close the compiler it chose from; the last time, they wait for it.
_ATTEMPTS = 3

_Chosen = TypeVar("_Chosen")


def _of_one_lifetime(choose: Callable[[_Engine], _Chosen],
                     undo: Callable[[_Chosen], None] | None = None,
                     options: CompilerOptions | None = None) -> _Chosen:
    """`choose(engine)` with the running engine (started with `options` if none runs),
    again with the next one while a `finalize()` in another thread closes the one it chose
    from meanwhile (`undo` gives back what a closed one's choice holds). The last attempt
    holds the compiler's lock, so that `finalize()` waits for it: a choice always ends."""
    for _ in range(_ATTEMPTS - 1):
        engine = _current(options or CompilerOptions())
        try:
            chosen = choose(engine)
        except PluginLoaderClosedError:
            continue
        if not engine.loader.closed:
            return chosen
        if undo is not None:
            undo(chosen)
    with _LOCK:
        return choose(_current(options or CompilerOptions()))


def current_pass_registry(options: Mapping[str, str] | None = None) -> PassRegistry:
    """The passes a compilation with `options` (on top of `initialize`'s) starts from,
    before its own pass paths (initialises the compiler if needed)."""
    return _of_one_lifetime(
        lambda engine: _registry_for(engine, engine.options.merged(options))[0],
        options=parse_options(options))


class CompilationPasses:
    """What one compilation runs with: its passes, its merged options, the skipped plugins,
    and the custom operators it sees (`custom_ops`, a `CustomOpView`: its plugins'
    operators first, those of its pass paths in it only).

    Inside its `with` block (and `active()`), `ge.ops.get_custom_op` and every other
    lookup of a custom operator, in this thread, go through `custom_ops`: building,
    inference, folding and verification see the compilation's operators. It holds the
    plugins of the compilation's pass paths until `close()` (or the end of its `with`
    block), which unloads them.
    """

    def __init__(self, registry: PassRegistry, options: CompilerOptions,
                 skipped: list[GeError], lease: PathLease | None = None,
                 custom_ops: CustomOpView | None = None,
                 built_patterns: BuiltPatterns | None = None,
                 plugins_off: str | None = None) -> None:
        self.registry = registry
        #: why no installed plugin takes part (autoloading off), which a pass name unknown
        #: to `registry` may be due to; None when they do
        self.plugins_off = plugins_off
        self.built_patterns = built_patterns
        self.options = options
        self.skipped = skipped
        self.custom_ops = CustomOpView() if custom_ops is None else custom_ops
        self._lease = lease

    def close(self) -> None:
        """Unload the plugins of the compilation's pass paths (idempotent)."""
        if self._lease is not None:
            self._lease.release()

    @contextmanager
    def active(self) -> Iterator[CompilationPasses]:
        """Custom operators are looked up through `custom_ops` inside the block (in this
        context: a thread started inside does not inherit it)."""
        self.custom_ops.enter()
        try:
            yield self
        finally:
            self.custom_ops.leave()

    def __enter__(self) -> CompilationPasses:
        self.custom_ops.enter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.custom_ops.leave()
        self.close()


def compilation_passes(
    options: Mapping[str, str] | None = None,
    pass_paths: Iterable[str | os.PathLike[str]] | None = None,
) -> CompilationPasses:
    """The passes of one compilation; use it in a `with` block (or `close()` it).

    The running engine's (started if needed) built-in and environment passes, the installed
    plugins the merged options do not disable, and the plugins of `pass_paths`: those are
    loaded for this compilation only and unloaded when it closes, whether it succeeded or
    failed. The custom operators it sees are those plugins' (the engine's taken now, those
    of `pass_paths` held by it alone) and those registered outside plugins
    (`CompilationPasses.custom_ops`). All of one compiler lifetime: a `finalize()` in
    another thread while they are chosen makes it choose again from the compiler running
    then. (A plain function rather than a generator, so that warnings point at the user's
    call.)
    """
    return _of_one_lifetime(lambda engine: _chosen(engine, options, pass_paths),
                            CompilationPasses.close, parse_options(options))


def _chosen(engine: _Engine, options: Mapping[str, str] | None,
            pass_paths: Iterable[str | os.PathLike[str]] | None) -> CompilationPasses:
    """`compilation_passes` from `engine` (PluginLoaderClosedError when it is finalized)."""
    merged = engine.options.merged(options)
    registry, skipped, ops = _registry_for(engine, merged)
    view = CustomOpView(ops, hidden=engine.loader.left_out_custom_ops(merged))
    plugins_off = engine.loader.autoload_off_reason(merged)
    if pass_paths is None:
        return CompilationPasses(registry, merged, skipped, custom_ops=view,
                                 built_patterns=engine.built_patterns, plugins_off=plugins_off)
    lease = engine.loader.lease_paths_into(view, pass_paths, merged, registry.clashes)
    try:
        registry, extra = _build_registry(registry, lease.report, merged)
    except BaseException:
        lease.release()
        raise
    return CompilationPasses(registry, merged, skipped + extra, lease, view,
                             engine.built_patterns, plugins_off)


def check_pass_names(registry: PassRegistry, names: Iterable[str],
                     verb: str = "disable", plugins_off: str | None = None,
                     left_out: Collection[str] = ()) -> frozenset[str]:
    """`names` as a set, each the name of a pass in `registry`; CompilerOptionError if not
    (saying what could not be done to them: `verb`; and, when installed plugins are
    present but not loaded, why: `plugins_off`, as `CompilationPasses.plugins_off`, or the
    names `ge.passes.disabled_plugins` gave, `left_out`: their passes are not known either,
    which a misspelt name is not told from)."""
    chosen = frozenset(names)
    unknown = sorted(n for n in chosen if n not in registry)
    if unknown:
        import difflib

        names = sorted(p.name for p in registry)
        installed = _entry_point_names(plugins_off)
        plugins = installed if verb == "disable" else {}
        guesses = [f"{name} ({plugins[name]})" if name in plugins
                   else f"{name} (did you mean {close[0]}?)" if close else name
                   for name in unknown
                   for close in [difflib.get_close_matches(name, names, n=1, cutoff=0.8)]]
        off = ""
        passes_asked = installed and any(n not in plugins for n in unknown)
        if plugins_off and passes_asked:
            off = (f" (installed plugins were not loaded, as {plugins_off}: a pass of one is "
                   "not known)")
        elif left_out and passes_asked:
            off = (f" (the installed plugins that {OPTION_DISABLED_PLUGINS}="
                   f"{','.join(sorted(left_out))} leaves out were not loaded: a pass of one "
                   "is not known)")
        raise CompilerOptionError(
            f"cannot {verb} unknown pass(es) {', '.join(guesses)}{off}; known passes: "
            f"{', '.join(names)}")
    return chosen


def _entry_point_names(plugins_off: str | None = None) -> dict[str, str]:
    """What to say of each name of an installed plugin (`name` and `distribution:name`)
    given where a pass name belongs: `--disable` names passes, and an entry point is left
    out with the option `ge.passes.disabled_plugins` (a user trial gave `--disable qkv`),
    unless installed plugins are not loaded at all (`plugins_off`: nothing to leave out)."""
    from ge.passes.entry_points import ENTRY_POINT_GROUP, entry_point_id, plugin_entry_points

    said: dict[str, str] = {}
    for ep in plugin_entry_points():
        for name in (ep.name, entry_point_id(ep)):
            how = (f"installed plugins are not loaded, as {plugins_off}" if plugins_off
                   else unnameable_note(ep.name, entry_point_id(ep).partition(":")[0])
                   if unnameable(ep.name) else f"leave it out with {leave_out_option([name])}")
            said.setdefault(name, (
                f"the entry point {entry_point_id(ep)} of an installed plugin (group "
                f"{ENTRY_POINT_GROUP}), not a pass: {how}"))
    return said


def passes_not_run(registry: PassRegistry, disable: Iterable[str],
                   enable: Iterable[str] = (), plugins_off: str | None = None,
                   left_out: Collection[str] = ()) -> frozenset[str]:
    """The passes a compilation leaves out: those `disable` names and the built-ins that are
    off by default unless `enable` names them (each name checked: CompilerOptionError for
    an unknown one, saying why installed plugins' passes are not known when `plugins_off`
    or `left_out` (`check_pass_names`), or one both enabled and disabled)."""
    disabled = check_pass_names(registry, disable, plugins_off=plugins_off, left_out=left_out)
    enabled = check_pass_names(registry, enable, "enable", plugins_off, left_out)
    both = sorted(disabled & enabled)
    if both:
        raise CompilerOptionError(f"pass(es) {', '.join(both)} both enabled and disabled")
    off = {entry.name for entry in registry if not entry.on_by_default} - enabled
    return disabled | off


def _switched(registry: PassRegistry, path: str
              ) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """The passes GE's fusion switch file at `path` turns on and off in `registry`, and
    those it names; names it has no pass of are ignored, with a warning (a file written
    for Ascend names Ascend's passes)."""
    switch = read_fusion_switch(path)
    builtin = [entry.name for entry in registry if entry.builtin]
    dormant = [entry.name for entry in registry if not entry.on_by_default]
    enable, disable, ignored = switch.apply(builtin, dormant, (e.name for e in registry))
    if ignored:
        warn_user(CompileWarning(
            f"fusion switch file {path} names pass(es) ge does not have, ignored: "
            f"{', '.join(ignored)}"))
    return enable, disable, switch.on | switch.off


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
    passes: CompilationPasses | None = None,
    enable: Iterable[str] = (),
) -> CompileReport:
    """Compile `graph` in place: run the pipeline with the built-in and plugin passes.

    `options` (str → str) apply to this compilation on top of those of `initialize`; passes
    read them through `PassContext.get_option_value`, and the plugin options among them
    (`ge.passes.disabled_plugins`, `ge.passes.disable_plugin_autoload`,
    `ge.passes.continue_on_plugin_error`) decide which plugins take part in it.
    `pass_paths` are extra plugin files or directories for this compilation only (an
    explicit argument, not the environment): loaded for it, unloaded after it.
    `disable` names passes (built-in or plugin) not to run; `enable` names built-in passes
    that are off by default (`ge passes list` marks them) to run; `builtin_passes=False`
    runs none of the built-in ones. A failing pass raises E13028 and leaves the graph as that
    pass found it (`on_pass_failure="skip"` rolls it back, warns and goes on); after each
    pass that changed the graph, the nodes it touched are checked (`check="full"`: the
    whole graph). Shape inference runs after `BeforeInferShape` (GE1305, stage
    "InferShape") and the result is validated last (GE1003, stage "FinalValidation").
    `steps` replaces engine steps of this compilation by name (None skips one).
    `passes` are the passes of a compilation the caller opened with `compilation_passes`
    (and closes): `ge.compile` does, so that a plugin registering a custom operator is
    loaded before the original model is run; `options` and `pass_paths` went there then.
    The arguments are checked before any plugin loads: `disable`, `enable` and `observers`
    are lists, never one str, and each argument is of its type (`CompilerOptionTypeError`,
    GE1202: see `ge.compiler.arguments`); `graph` must be a `Graph` (`CompileInputError`).
    """
    start = time.perf_counter()
    from ge.graph import Graph

    if not isinstance(graph, Graph):
        raise CompileInputError(
            f"compile_graph compiles a ge.graph.Graph in place, got {described(graph)}: load "
            "it with ge.graph.load, or call ge.compile (it takes paths and ModelProtos)")
    disable = name_list(disable, "disable")
    enable = name_list(enable, "enable")
    observers = observer_list(observers)
    engine_steps(steps)  # checked now, used by the scheduler
    flag(builtin_passes, "builtin_passes")
    check_modes(check, on_pass_failure)
    if passes is not None:
        if options is not None or pass_paths is not None:
            raise CompilerOptionError("give compile_graph either passes= or options and "
                                      "pass_paths (they choose the passes), not both")
        with passes.active():  # (a no-op inside the caller's `with passes:` block)
            return _compile_with(graph, passes, start, steps, builtin_passes, disable,
                                 enable, check, on_pass_failure, observers)
    with compilation_passes(options, pass_paths) as opened:
        return _compile_with(graph, opened, start, steps, builtin_passes, disable, enable,
                             check, on_pass_failure, observers)


def _compile_with(graph: Graph, passes: CompilationPasses, start: float,
                  steps: Mapping[str, EngineStep | None] | None, builtin_passes: bool,
                  disable: Iterable[str], enable: Iterable[str], check: str,
                  on_pass_failure: str, observers: Iterable[PipelineObserver]) -> CompileReport:
    registry = passes.registry
    for text in unknown_ge_options(passes.options.values):  # a typo of one, most likely
        warn_user(CompileWarning(text))
    check_training_info(graph)
    undefined = undefined_operators(graph)
    if undefined:  # (the session's verification would refuse it later, GE1601)
        warn_user(CompileWarning(
            f"graph {graph.root_graph().name!r} uses {', '.join(undefined)}, which nothing "
            "ge sees defines (no plugin registers it with ge.ops.register_op, no function "
            "of the model, not onnxruntime's): ge compiles around it, its outputs typed as "
            "the model types them, but cannot check its types, verify or run it (load the "
            "plugin that defines it: --pass-path, ASCEND_GE_PY_PASS_PATH, pass_paths=)"))
    # (what switches a built-in pass, said when the built-in passes are off: by its source)
    switching: list[tuple[str, Iterable[str]]] = [("disabling", disable), ("enabling", enable)]
    switch_file = passes.options.values.get(OPTION_FUSION_SWITCH_FILE)
    if switch_file:  # GE's fusion switch file: on/off by name, under what is given here
        switched_on, switched_off, named = _switched(registry, switch_file)
        switching.append((f"fusion switch file {switch_file} switching", named))
        disable = set(disable) | (switched_off - set(enable))
        enable = set(enable) | (switched_on - set(disable))
    disabled = passes_not_run(registry, disable, enable, passes.plugins_off,
                              passes.options.disabled_plugins)
    observers = list(observers)
    for observer in observers:  # a dump level naming no step nor pass would dump nothing
        if isinstance(observer, GraphDumper):
            observer.check_level_names(entry.name for entry in registry)
    for verb, names in switching:
        idle = sorted(name for name in set(names)
                      if (entry := registry.get(name)) is not None and entry.step is not None)
        if idle and not builtin_passes:
            warn_user(CompileWarning(
                f"{verb} built-in pass(es) {', '.join(idle)} does nothing: the built-in "
                "passes are off (builtin_passes=False, --no-builtin)"))
    scheduler = Scheduler(registry, passes.options.values, steps,
                          disabled=disabled,
                          builtin=builtin_passes, check=check,
                          on_pass_failure=on_pass_failure, observers=observers,
                          built_patterns=passes.built_patterns)
    counts_before, ops_before = model_size(graph)
    records = scheduler.run(graph)
    counts_after, ops_after = model_size(graph)
    return CompileReport(graph=graph, records=records, skipped_plugins=passes.skipped,
                         steps=scheduler.steps, ops_before=ops_before,
                         ops_after=ops_after, fixed_point=scheduler.fixed_point,
                         seconds=time.perf_counter() - start, counts_before=counts_before,
                         counts_after=counts_after,
                         last_changes=scheduler.last_changes,
                         undefined_operators=tuple(undefined),
                         dump_seconds=sum(o.seconds for o in observers
                                          if isinstance(o, GraphDumper)))
