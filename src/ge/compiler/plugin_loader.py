"""The compiler's plugin loader: reads `ASCEND_GE_PY_PASS_PATH` once and owns what it loaded.

D13: the variable is read when the compiler initialises; later changes have no effect until
`ge.finalize()`. Empty or unset means no Python pass loading at all (entry points included);
built-in passes are unaffected. Explicit pass paths given to one compilation load beside.
D9: a plugin failure stops the load (after every plugin was tried) unless the option
`ge.passes.continue_on_plugin_error` is true, which skips the plugin with a warning.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

from ge.compiler.options import CompilerOptions
from ge.passes.bootstrap import ENV_PY_PASS_PATH, discover_plugins, warn_failures
from ge.passes.discovery import normalize_path_list
from ge.passes.loader import LoadedPlugin, PluginLoadReport, unload_plugins

__all__ = ["PluginLoader"]


class PluginLoader:
    """Loads pass plugins for one compiler lifetime and unloads them at the end of it."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = os.environ if environ is None else environ
        self._lock = threading.RLock()
        self._plugins: list[LoadedPlugin] = []
        self.env_value: str | None = None

    @property
    def plugins(self) -> list[LoadedPlugin]:
        """Every plugin this loader loaded and still holds."""
        with self._lock:
            return list(self._plugins)

    def load_from_environment(self, options: CompilerOptions) -> PluginLoadReport:
        """Snapshot `ASCEND_GE_PY_PASS_PATH` and load what it names (nothing if empty)."""
        with self._lock:
            self.env_value = self._environ.get(ENV_PY_PASS_PATH, "")
            paths = normalize_path_list(self.env_value)
            if not paths:
                return PluginLoadReport()
            return self.load_paths(paths, options)

    def load_paths(
        self, paths: Iterable[str | os.PathLike[str]], options: CompilerOptions
    ) -> PluginLoadReport:
        """Load explicit pass paths, then the entry points (each plugin at most once)."""
        items = [Path(p) for p in paths]
        with self._lock:
            report = discover_plugins(items, entry_points=True, disabled=options.disabled_plugins)
            new = [p for p in report.plugins if all(p is not q for q in self._plugins)]
            if report.failures and not options.continue_on_plugin_error:
                unload_plugins(new)
                error = report.error()
                assert error is not None
                raise error
            warn_failures(report)
            self._plugins.extend(new)
            return report

    def unload(self) -> None:
        """Unregister every pass this loader loaded and drop the plugin modules it owns."""
        with self._lock:
            unload_plugins(self._plugins)
            self._plugins.clear()
            self.env_value = None
