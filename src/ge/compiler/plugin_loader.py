"""The compiler's plugin loader: reads `ASCEND_GE_PY_PASS_PATH` once and owns what it loaded.

D13 (revised): the variable is read when the compiler initialises; later changes have no
effect until `ge.finalize()`. Empty or unset means no path-based loading. Installed plugins
(entry points, group `ge.passes.plugins`) load at every initialisation whether or not the
variable is set, unless `GE_DISABLE_PLUGIN_AUTOLOAD` is set (to anything but "0"/"false")
or the option `ge.passes.disable_plugin_autoload` is true. Built-in passes are unaffected.
Explicit pass paths given to one compilation load beside.
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

__all__ = ["ENV_DISABLE_PLUGIN_AUTOLOAD", "PluginLoader", "autoload_disabled"]

#: Set (to anything but "", "0" or "false") to keep entry points from loading, as
#: `PYTEST_DISABLE_PLUGIN_AUTOLOAD` does for pytest.
ENV_DISABLE_PLUGIN_AUTOLOAD = "GE_DISABLE_PLUGIN_AUTOLOAD"


def autoload_disabled(options: CompilerOptions, environ: Mapping[str, str]) -> bool:
    """Whether entry-point loading is off, by the option or by the environment."""
    value = environ.get(ENV_DISABLE_PLUGIN_AUTOLOAD, "").strip().lower()
    return options.disable_plugin_autoload or value not in ("", "0", "false", "no", "off")


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
        """Snapshot `ASCEND_GE_PY_PASS_PATH`, load what it names, then the entry points
        (unless autoloading is disabled)."""
        with self._lock:
            self.env_value = self._environ.get(ENV_PY_PASS_PATH, "")
            paths = normalize_path_list(self.env_value)
            entry_points = not autoload_disabled(options, self._environ)
            return self._load(paths, options, entry_points=entry_points)

    def load_paths(
        self, paths: Iterable[str | os.PathLike[str]], options: CompilerOptions
    ) -> PluginLoadReport:
        """Load explicit pass paths (each plugin at most once; entry points loaded at start)."""
        return self._load(paths, options, entry_points=False)

    def _load(self, paths: Iterable[str | os.PathLike[str]], options: CompilerOptions, *,
              entry_points: bool) -> PluginLoadReport:
        items = [Path(p) for p in paths]
        with self._lock:
            report = discover_plugins(items, entry_points=entry_points,
                                      disabled=options.disabled_plugins)
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
