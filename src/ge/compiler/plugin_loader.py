"""The compiler's plugin loader: reads the environment once and owns what it loaded.

D13 (revised): `ASCEND_GE_PY_PASS_PATH` is read when the compiler initialises; later
changes have no effect until `ge.finalize()`. Empty or unset means no path-based loading.
`GE_DISABLE_PLUGIN_AUTOLOAD` (anything but "", "0", "false", "no", "off") is read at the
same time and keeps installed plugins (entry points, group `ge.passes.plugins`) from
loading for the whole lifetime; otherwise they load whether or not the path variable is set.

Which entry points take part is decided per compilation, by its options
(`ge.passes.disabled_plugins`, `ge.passes.disable_plugin_autoload`): an entry point is
imported the first time a compilation wants it, and stays loaded until `unload()`; a
compilation that disables it simply leaves its passes out. Plugins of explicit pass paths
belong to one compilation (`lease_paths`): their passes never stay in the process-wide
`ge.passes` registry, nor their custom operators in the process-wide table
(`lease_paths_into`: they live in the compilation's `ge.ops.registry.CustomOpView`), and
releasing the lease unloads them. Built-in passes are unaffected.
D9: a plugin failure stops the load (after every plugin was tried) unless the option
`ge.passes.continue_on_plugin_error` is true, which skips the plugin with a warning.

Compilations run in threads: what is loaded is read under the loader's own short lock,
while imports run outside it (`ge.passes.loader.LOAD_LOCK`). A compilation waits only for
an import it needs itself (an installed plugin it wants, or a file of its pass paths, that
another compilation is importing now), or, to import a folder of its pass paths (which is
first on `sys.path` meanwhile), for the imports in progress. `unload()` closes the loader: a
compilation still asking it for plugins gets `PluginLoaderClosedError` and takes the
compiler running now (`ge.compiler.engine`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping
from importlib.metadata import EntryPoint
from pathlib import Path

from ge.compiler.options import OPTION_DISABLE_PLUGIN_AUTOLOAD, CompilerOptions
from ge.errors import (
    CompileWarning,
    GeError,
    PluginLoaderClosedError,
    PluginPathNotFoundError,
    PluginPathSuffixError,
)
from ge.ops.registry import CustomOp, CustomOpView, process_custom_ops
from ge.passes.bootstrap import (
    ENV_PY_PASS_PATH,
    discover_plugins,
    warn_failures,
    warn_registers_nothing,
)
from ge.passes.discovery import given_paths, normalize_path_list, plugin_sources
from ge.passes.entry_points import (
    ENTRY_POINT_GROUP,
    entry_point_id,
    entry_point_key,
    is_disabled,
    load_entry_point,
    loaded_entry_point,
    plugin_entry_points,
)
from ge.passes.loader import (
    LOAD_LOCK,
    LoadedPlugin,
    PluginLoadReport,
    loaded_plugins,
    unload_plugins,
)
from ge.passes.registry import registrations_aside
from ge.passes.source import warn_user

__all__ = [
    "ENV_DISABLE_PLUGIN_AUTOLOAD",
    "PathLease",
    "PluginLoader",
    "PluginLoaderClosedError",
    "autoload_disabled",
    "environment_disables_autoload",
]

#: Set (to anything but "", "0" or "false") to keep entry points from loading, as
#: `PYTEST_DISABLE_PLUGIN_AUTOLOAD` does for pytest.
ENV_DISABLE_PLUGIN_AUTOLOAD = "GE_DISABLE_PLUGIN_AUTOLOAD"


#: Where a bad pass path came from, as its error says (the same message otherwise).
PASS_PATH_IN_ENV = f"in {ENV_PY_PASS_PATH}"
PASS_PATH_GIVEN = "given as a pass path: --pass-path or pass_paths="


def _discover(items: list[Path], source: str,
              copies: Callable[[LoadedPlugin], bool] | None = None) -> PluginLoadReport:
    """`discover_plugins` of path items; a missing path or a non-`.py` file says where it
    came from."""
    try:
        return discover_plugins(items, entry_points=False, copies=copies,
                                reached_as="environment" if source == PASS_PATH_IN_ENV
                                else "given")
    except (PluginPathNotFoundError, PluginPathSuffixError) as err:
        err.message += f" ({source})"
        raise


#: What a failing load asks of the passes its plugins were to join: the clashes the loaded
#: plugins would have with them (`PassRegistry.clashes`).
Clashes = Callable[[list[LoadedPlugin]], list[GeError]]


def _load_error(report: PluginLoadReport, clashes: Clashes | None) -> GeError:
    """The error of a load that failed: its failures, then the clashes of the plugins that
    did load with the passes they were to join (which adding them would have found next)."""
    failures = [*report.failures, *(clashes(report.plugins) if clashes is not None else [])]
    error = PluginLoadReport(failures=failures).error()
    assert error is not None
    return error


def _environment_sources(value: str) -> list[Path]:
    """The plugin sources the items of a path variable's `value` name, in load order (an
    item that went names none: the stale-plugin warning says so)."""
    found: list[Path] = []
    for item in normalize_path_list(value):
        try:
            found += [source.path for source in plugin_sources(item)]
        except (GeError, OSError):
            continue
    return found


def environment_disables_autoload(environ: Mapping[str, str]) -> bool:
    """Whether `GE_DISABLE_PLUGIN_AUTOLOAD` in `environ` turns entry-point loading off."""
    value = environ.get(ENV_DISABLE_PLUGIN_AUTOLOAD, "").strip().lower()
    return value not in ("", "0", "false", "no", "off")


def autoload_disabled(options: CompilerOptions, environ: Mapping[str, str]) -> bool:
    """Whether entry-point loading is off, by the option or by the environment."""
    return options.disable_plugin_autoload or environment_disables_autoload(environ)


class PathLease:
    """The plugins of one compilation's explicit pass paths, held until `release()`.

    `report` is what loading them gave (plugins, failures). The lease owns the plugins it
    imported (and shares, counted, those another lease of the same loader holds): the
    last release unregisters them (passes and the custom operators their import registered)
    and drops their modules, so the next load executes the files again. Plugins that were
    loaded before by someone else (the environment's, a `ge.testing` set's) are used, never
    unloaded.
    """

    def __init__(self, loader: PluginLoader, report: PluginLoadReport,
                 owned: list[LoadedPlugin]) -> None:
        self.report = report
        self._loader = loader
        self._owned = owned
        self._released = False

    def release(self) -> None:
        """Give the plugins back; those no other compilation holds are unloaded. Idempotent."""
        if not self._released:
            self._released = True
            self._loader._release(self._owned)


class PluginLoader:
    """Loads the pass plugins of one compiler lifetime and unloads them at the end of it.

    `start()` snapshots the environment and loads the plugins of `ASCEND_GE_PY_PASS_PATH`;
    `entry_points_for(options)` gives the installed plugins a compilation with `options`
    uses, importing each one the first time it is wanted; `lease_paths()` loads a
    compilation's own pass paths; `unload()` ends the lifetime and closes the loader.
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = os.environ if environ is None else environ
        # The loader's state, held for short steps only: imports run outside it (under
        # LOAD_LOCK, taken first when both are), so reading it never waits for an import.
        self._lock = threading.RLock()
        self._closed = False
        self._plugins: list[LoadedPlugin] = []
        self.env_value: str | None = None
        self._autoload_off: bool | None = None  # GE_DISABLE_PLUGIN_AUTOLOAD, read at start
        self._entry_points: list[tuple[EntryPoint, str]] | None = None  # listed once, with ids
        self._entry_plugins: dict[str, LoadedPlugin] = {}
        self._entry_failures: dict[str, GeError] = {}
        self._warned_unknown: set[str] = set()
        self._leases: dict[int, tuple[LoadedPlugin, int]] = {}
        self._env_sources: frozenset[Path] = frozenset()  # the variable's plugins at start

    @property
    def plugins(self) -> list[LoadedPlugin]:
        """Every plugin this loader loaded and still holds (leased pass paths excluded)."""
        with self._lock:
            return list(self._plugins)

    @property
    def closed(self) -> bool:
        """Whether `unload()` ended the loader's lifetime (it loads nothing more)."""
        with self._lock:
            return self._closed

    def _check_open(self) -> None:
        with self._lock:
            if self._closed:
                raise PluginLoaderClosedError()

    # -- the environment --------------------------------------------------------------------
    def start(self, options: CompilerOptions, clashes: Clashes | None = None
              ) -> PluginLoadReport:
        """Snapshot `ASCEND_GE_PY_PASS_PATH` and `GE_DISABLE_PLUGIN_AUTOLOAD` (D13) and load
        the plugins the path variable names (`clashes`: as `_load`'s)."""
        with self._lock:
            self._check_open()
            self.env_value = value = self._environ.get(ENV_PY_PASS_PATH, "")
            self._autoload_off = environment_disables_autoload(self._environ)
        report = self._load(normalize_path_list(value), options, PASS_PATH_IN_ENV, clashes)
        self._env_sources = frozenset(_environment_sources(value))
        return report

    def new_environment_plugins(self) -> list[Path]:
        """The plugin files and packages the path variable's items name now that they did
        not at `start()` (a file added to its folder since): not loaded until `ge.finalize()`
        (D13), which a compilation says (one listing of each folder)."""
        with self._lock:
            value, known = self.env_value, self._env_sources
        if not value:
            return []
        return [path for path in _environment_sources(value) if path not in known]

    def load_from_environment(self, options: CompilerOptions) -> PluginLoadReport:
        """`start()`, then the entry points `options` want: what an initialisation loads,
        as one report (path plugins first, D12)."""
        report = self.start(options)
        entry = self.entry_points_for(options)
        combined = PluginLoadReport()
        for plugin in report.plugins + entry.plugins:
            combined.add(plugin)
        combined.failures = report.failures + entry.failures
        combined.disabled = list(entry.disabled)
        return combined

    def autoload_off_by_environment(self) -> bool:
        """Whether `GE_DISABLE_PLUGIN_AUTOLOAD` (as read at `start()`) turns entry points off."""
        with self._lock:
            if self._autoload_off is None:
                self._autoload_off = environment_disables_autoload(self._environ)
            return self._autoload_off

    def autoload_off_reason(self, options: CompilerOptions) -> str | None:
        """Why a compilation with `options` loads no installed plugin (the environment
        variable, or the option), or None when it loads them."""
        if self.autoload_off_by_environment():
            return f"{ENV_DISABLE_PLUGIN_AUTOLOAD} is set"
        if options.disable_plugin_autoload:
            return f"the option {OPTION_DISABLE_PLUGIN_AUTOLOAD} is true"
        return None

    # -- entry points -----------------------------------------------------------------------
    def entry_points_for(self, options: CompilerOptions) -> PluginLoadReport:
        """The installed plugins a compilation with `options` uses: none when autoloading is
        off (option or environment), else every entry point not disabled by name, each
        imported the first time a compilation wants it (D12: before that, a disabled one is
        never imported). A name in `disabled_plugins` that no installed entry point has is a
        `CompileWarning` (once per name and lifetime), not an error: a shared configuration
        may name a plugin this environment does not have. A failure raises (all of them
        together) unless `continue_on_plugin_error`, which warns once per failed plugin.
        Only an import of a plugin it wants makes it wait (`PluginLoaderClosedError` once
        `unload()` closed the loader).
        """
        self._check_open()
        report = PluginLoadReport()
        if options.disable_plugin_autoload or self.autoload_off_by_environment():
            return report
        with self._lock:
            self._check_open()
            if self._entry_points is None:
                self._entry_points = [(ep, entry_point_id(ep)) for ep in plugin_entry_points()]
            installed = self._entry_points
            self._warn_unknown(options.disabled_plugins, installed)
            wanted = []
            for ep, key in installed:
                if is_disabled(ep, options.disabled_plugins):
                    report.disabled.append(key)
                else:
                    wanted.append((ep, key))
            missing = [(ep, key) for ep, key in wanted
                       if key not in self._entry_plugins and key not in self._entry_failures]
        fresh = [err for ep, key in missing for err in self._load_entry_point(ep, key)]
        with self._lock:
            for _, key in wanted:
                plugin = self._entry_plugins.get(key)
                failure = self._entry_failures.get(key)
                if plugin is not None:
                    report.add(plugin)
                elif failure is not None:
                    report.failures.append(failure)
        error = report.error(options.disabled_plugins)
        if error is not None and not options.continue_on_plugin_error:
            raise error
        warn_failures(PluginLoadReport(failures=fresh))
        return report

    def _load_entry_point(self, ep: EntryPoint, key: str) -> list[GeError]:
        """Load one entry point for this lifetime (unless another compilation did meanwhile);
        its failure if it is new. One loaded already (in an earlier lifetime) is taken as it
        is; an import waits for any other one in progress."""
        try:
            plugin = loaded_entry_point(ep)
            if plugin is None:
                with LOAD_LOCK.importing(entry_point_key(ep), exclusive=False):
                    with self._lock:
                        self._check_open()
                        if key in self._entry_plugins or key in self._entry_failures:
                            return []  # (loaded, or failed, for the import waited for)
                    plugin = load_entry_point(ep)
        except GeError as err:
            with self._lock:
                if key in self._entry_plugins or key in self._entry_failures:
                    return []
                self._entry_failures[key] = err
            return [err]
        with self._lock:
            if self._closed:  # (finalized meanwhile: its passes must not outlive the loader)
                unload_plugins([plugin])
                raise PluginLoaderClosedError()
            if key in self._entry_plugins:
                return []
            self._entry_plugins[key] = plugin
            self._plugins.append(plugin)
        # (once per lifetime, as a path plugin of the environment is told)
        warn_registers_nothing(plugin, {d.cls.__ge_pass_source__
                                        for p in loaded_plugins() for d in p.descriptors})
        return []

    def _warn_unknown(self, disabled: Iterable[str],
                      installed: list[tuple[EntryPoint, str]]) -> None:
        unknown = sorted(n for n in disabled if n not in self._warned_unknown
                         and not any(is_disabled(ep, (n,)) for ep, _ in installed))
        if not unknown:
            return
        self._warned_unknown.update(unknown)
        names = ", ".join(sorted(key for _, key in installed)) or "none"
        warn_user(CompileWarning(
            f"cannot disable unknown plugin(s) {', '.join(unknown)}: no installed entry point "
            f"of group {ENTRY_POINT_GROUP} has that name (installed plugins: {names}); "
            "the name is ignored"))

    def left_out(self, options: CompilerOptions) -> list[LoadedPlugin]:
        """The installed plugins loaded in this process that a compilation with `options`
        leaves out: all of them when autoloading is off (by the option or the environment),
        else those `disabled_plugins` names."""
        off = options.disable_plugin_autoload or self.autoload_off_by_environment()
        disabled = options.disabled_plugins
        return [plugin for plugin in loaded_plugins() if plugin.origin.kind == "entry_point"
                and (off or plugin.origin.disabled_by(disabled))]

    # -- explicit pass paths ----------------------------------------------------------------
    def load_paths(
        self, paths: Iterable[str | os.PathLike[str]], options: CompilerOptions
    ) -> PluginLoadReport:
        """Load explicit pass paths for the rest of this lifetime (tools; a compilation's
        own paths go through `lease_paths`)."""
        return self._load(paths, options)

    def lease_paths(
        self, paths: Iterable[str | os.PathLike[str]], options: CompilerOptions,
        clashes: Clashes | None = None
    ) -> PathLease:
        """Load explicit pass paths for one compilation.

        Their passes never enter the process-wide `ge.passes` registry (they register aside,
        even while they import), so that concurrent compilations with other paths do not
        see them and may each hold a pass of the same name; nor do they clash with the
        installed plugins the compilation leaves out (a development copy of an installed
        pass, given with the installed one disabled or autoloading off). A failure raises
        (nothing this call loaded stays loaded) unless `continue_on_plugin_error`, which
        warns. A closed loader refuses a new lease (`PluginLoaderClosedError`); one it
        closes while the lease imports stays good (it holds its own plugins only). A file
        edited since the plugin another running compilation holds was imported from it is
        loaded beside that one, as a copy (`ge.passes.plugin_cache.cached_source`), when
        only leases hold it; else it is E13029. `clashes` as `_load`'s.
        """
        items = given_paths(paths)
        self._check_open()
        left_out = [d for plugin in self.left_out(options) for d in plugin.descriptors]
        with registrations_aside(ignoring=left_out):
            report = _discover(items, PASS_PATH_GIVEN, self._leased_only)
        owned: list[LoadedPlugin] = []
        with self._lock:
            for plugin in report.plugins:
                held = self._leases.get(id(plugin))
                if held is not None:
                    self._leases[id(plugin)] = (plugin, held[1] + 1)
                elif any(plugin is new for new in report.imported):
                    self._leases[id(plugin)] = (plugin, 1)
                else:
                    continue  # someone else's (the environment's, a test's set)
                owned.append(plugin)
        lease = PathLease(self, report, owned)
        if report.failures and not options.continue_on_plugin_error:
            lease.release()
            raise _load_error(report, clashes)
        warn_failures(report)
        return lease

    def lease_paths_into(
        self, view: CustomOpView, paths: Iterable[str | os.PathLike[str]],
        options: CompilerOptions, clashes: Clashes | None = None
    ) -> PathLease:
        """`lease_paths`, the custom operators the plugins register at import going into
        the compilation's `view` only (`CustomOpView.importing`): kept out of the
        process-wide table, as their passes are kept out of the registry, so that
        concurrent compilations do not see them and may each hold an operator of the same
        name; a clash is checked against what the compilation sees."""
        with view.importing(
                lambda: [op for plugin in loaded_plugins() for op in plugin.custom_ops]):
            return self.lease_paths(paths, options, clashes)

    def left_out_custom_ops(self, options: CompilerOptions) -> list[CustomOp]:
        """The custom operators of the installed plugins loaded so far that `options`
        leave out (`left_out`), which a compilation with them does not see
        (`CustomOpView`): those the plugins registered, and those their modules registered
        at import (which stay registered as long as the modules stay imported, as a
        library's do)."""
        left_out = self.left_out(options)
        names = tuple(p.module.__name__ for p in left_out if p.module is not None)
        return [*(op for plugin in left_out for op in plugin.custom_ops),
                *(op for op in process_custom_ops() if op.module is not None and any(
                    op.module == name or op.module.startswith(name + ".")
                    for name in names))]

    def _leased_only(self, plugin: LoadedPlugin) -> bool:
        """Whether only compilations of this loader hold `plugin` (by their leases): one
        given its file, edited since, may load a copy of it beside theirs."""
        with self._lock:
            return id(plugin) in self._leases and all(plugin is not p for p in self._plugins)

    def _release(self, plugins: list[LoadedPlugin]) -> None:
        with self._lock:
            done = []
            for plugin in plugins:
                held = self._leases.get(id(plugin))
                if held is None:
                    continue
                if held[1] > 1:
                    self._leases[id(plugin)] = (plugin, held[1] - 1)
                else:
                    del self._leases[id(plugin)]
                    done.append(plugin)
            unload_plugins(done)

    # -- shared -----------------------------------------------------------------------------
    def _load(self, paths: Iterable[str | os.PathLike[str]], options: CompilerOptions,
              source: str = PASS_PATH_GIVEN, clashes: Clashes | None = None
              ) -> PluginLoadReport:
        """Load the plugins of `paths`; a failure raises (unless `continue_on_plugin_error`)
        with the clashes `clashes` finds between the plugins that did load and the passes
        they are to join (the built-ins): every failure of the load at once."""
        items = given_paths(paths)
        self._check_open()
        report = _discover(items, source)
        failed = bool(report.failures) and not options.continue_on_plugin_error
        with self._lock:
            closed = self._closed
            if not (closed or failed):
                self._plugins.extend(
                    p for p in report.plugins if all(p is not q for q in self._plugins))
        if closed or failed:
            unload_plugins(report.imported)
            if closed:
                raise PluginLoaderClosedError()
            raise _load_error(report, clashes)
        warn_failures(report)
        return report

    def unload(self) -> None:
        """Unregister every pass this loader loaded and drop the plugin modules it owns
        (entry-point modules stay imported: they belong to installed distributions), and
        close the loader: it loads nothing more (`PluginLoaderClosedError`)."""
        with self._lock:
            self._closed = True
            unload_plugins(self._plugins)
            self._plugins.clear()
            self._entry_plugins.clear()
            self._entry_failures.clear()
            self._entry_points = None
            self.env_value = None
            self._autoload_off = None
