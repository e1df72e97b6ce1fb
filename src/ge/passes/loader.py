"""Importing pass plugins one at a time, in isolation, at most once per file.

A plugin that raises while being imported leaves nothing behind: the passes it registered
are unregistered and the modules it added are removed again; the failure becomes one E13029
error (or the E13030 registration error that caused it) with the user's file and line. A
file reached twice (listed twice, via a symlink) is imported and registered once.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from types import ModuleType

from ge.errors import GeError, PassRegisterError, PluginLoadError, PluginLoadErrors, SourceLocation
from ge.passes.discovery import PluginSource
from ge.passes.registry import (
    PassDescriptor,
    capture_registrations,
    ensure_registered,
    unregister_passes,
)
from ge.passes.source import traceback_location

__all__ = [
    "LOAD_LOCK",
    "LoadedPlugin",
    "PluginLoadReport",
    "PluginOrigin",
    "descriptors_in_module",
    "import_isolated",
    "load_error",
    "load_source",
    "loaded_plugins",
    "unload_all",
    "unload_plugins",
]

#: Serialises plugin loading and the module cache (imports mutate process-wide state).
LOAD_LOCK = threading.RLock()


@dataclass(frozen=True)
class PluginOrigin:
    """Where a plugin came from: a file, a package, or an entry point of a distribution."""

    kind: str  # "module" | "package" | "entry_point"
    path: str | None = None
    entry_point: str | None = None
    distribution: str | None = None
    version: str | None = None

    def __str__(self) -> str:
        if self.kind == "entry_point":
            return f"entry point {self.entry_point} ({self.distribution} {self.version})"
        return str(self.path)


@dataclass(frozen=True)
class LoadedPlugin:
    """A plugin that imported cleanly: its module, the passes it registered, what it owns.

    `owned_modules` are the modules its import added from its own directory; unloading the
    plugin removes them so that the next load executes the files again.
    """

    origin: PluginOrigin
    module: ModuleType | None
    descriptors: tuple[PassDescriptor, ...]
    owned_modules: tuple[str, ...] = ()


@dataclass
class PluginLoadReport:
    """The result of one discovery: loaded plugins, failures, entry points disabled by name."""

    plugins: list[LoadedPlugin] = field(default_factory=list)
    failures: list[GeError] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)
    _seen: set[int] = field(default_factory=set, repr=False, compare=False)

    def add(self, plugin: LoadedPlugin) -> None:
        """Record a loaded plugin once (a file reached twice is the same plugin)."""
        if id(plugin) not in self._seen:
            self._seen.add(id(plugin))
            self.plugins.append(plugin)

    def modules(self) -> list[ModuleType]:
        """The imported modules, each once, in load order."""
        seen: set[str] = set()
        modules: list[ModuleType] = []
        for plugin in self.plugins:
            if plugin.module is not None and plugin.module.__name__ not in seen:
                seen.add(plugin.module.__name__)
                modules.append(plugin.module)
        return modules

    def descriptors(self) -> list[PassDescriptor]:
        """Every descriptor the loaded plugins registered, in load order."""
        return [d for plugin in self.plugins for d in plugin.descriptors]

    def error(self) -> GeError | None:
        """The failure to raise: the only one as is, several together as E13029."""
        if not self.failures:
            return None
        if len(self.failures) == 1:
            return self.failures[0]
        return PluginLoadErrors(self.failures)


# source path (or entry-point id) -> the plugin loaded from it
_CACHE: dict[str, LoadedPlugin] = {}


def loaded_plugins() -> list[LoadedPlugin]:
    """The plugins loaded now (by path or entry point), in load order: what `unload_all`
    would unload. Take `LOAD_LOCK` to compare it with a load that follows."""
    return list(_CACHE.values())


def _inside(filename: str | None, roots: Iterable[Path]) -> bool:
    if not filename:
        return False
    real = os.path.realpath(filename)
    for root in roots:
        text = str(root)
        if real == text or real.startswith(text + os.sep):
            return True
    return False


def _new_module_names(count_before: int) -> list[str]:
    # sys.modules keeps insertion order, so the modules an import added are the last ones.
    added = len(sys.modules) - count_before
    return list(islice(reversed(sys.modules), added)) if added > 0 else []


def _purge(names: Iterable[str]) -> None:
    for name in names:
        sys.modules.pop(name, None)


def load_error(target: str, exc: BaseException, roots: Iterable[Path] = ()) -> PluginLoadError:
    """E13029 for a plugin whose import raised `exc`, pointing at the user's file and line."""
    if isinstance(exc, SyntaxError) and exc.filename:
        location: SourceLocation | None = SourceLocation(exc.filename, exc.lineno)
    else:
        location = traceback_location(exc.__traceback__, roots)
    reason = f"{type(exc).__name__}: {exc}".rstrip(".")
    error = PluginLoadError(
        f"Failed to load custom fusion pass lib {target}. Reason: {reason}.",
        location=location,
        path=target,
    )
    error.__cause__ = exc
    return error


@dataclass(frozen=True)
class Imported:
    """What an isolated import produced."""

    module: ModuleType | None
    descriptors: tuple[PassDescriptor, ...]
    owned_modules: tuple[str, ...]


def import_isolated(
    run: Callable[[], tuple[ModuleType | None, list[PassDescriptor]]],
    *,
    target: str,
    roots: tuple[Path, ...] = (),
    own_module: str | None = None,
) -> Imported:
    """Run `run` (an import) so that a failure leaves no registration and no module behind.

    `run` returns the module and any already-registered descriptors it vouches for.
    The plugin owns `own_module` and the other modules it added from inside `roots`.
    """
    count_before = len(sys.modules)
    with capture_registrations() as captured:
        try:
            module, extra = run()
            for descriptor in extra:
                ensure_registered(descriptor)
        except BaseException as exc:
            unregister_passes(captured)
            _purge(_owned_new_modules(count_before, roots, own_module))
            if isinstance(exc, (KeyboardInterrupt, PassRegisterError, PluginLoadError)):
                raise
            raise load_error(target, exc, roots) from exc
    descriptors = list(captured)
    descriptors += [d for d in extra if all(d is not c for c in captured)]
    owned = _owned_new_modules(count_before, roots, own_module)
    return Imported(module, tuple(descriptors), tuple(owned))


def _owned_new_modules(
    count_before: int, roots: tuple[Path, ...], own_module: str | None
) -> list[str]:
    owned = []
    for name in _new_module_names(count_before):
        if name == own_module or _inside(getattr(sys.modules.get(name), "__file__", None), roots):
            owned.append(name)
    return owned


def descriptors_in_module(module: ModuleType) -> list[PassDescriptor]:
    """Descriptors of the registered pass classes defined in `module` or its submodules.

    Used for modules imported before the loader saw them (their decorators ran earlier),
    so their passes can be registered again after a clear.
    """
    prefix = module.__name__ + "."
    found: list[PassDescriptor] = []
    for name, candidate in list(sys.modules.items()):
        if candidate is None or (name != module.__name__ and not name.startswith(prefix)):
            continue
        for value in list(vars(candidate).values()):
            if not isinstance(value, type) or value.__module__ != name:
                continue
            descriptor = getattr(value, "__ge_pass_descriptor__", None)
            if isinstance(descriptor, PassDescriptor) and descriptor.cls is value:
                found.append(descriptor)
    return found


def _exec_source(source: PluginSource) -> ModuleType:
    locations = [str(source.path.parent)] if source.kind == "package" else None
    spec = importlib.util.spec_from_file_location(
        source.module_name, source.path, submodule_search_locations=locations
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load python pass file: {source.path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[source.module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(source.module_name, None)
        raise
    return module


def _package_clash(source: PluginSource) -> tuple[ModuleType | None, PluginLoadError | None]:
    """(the package if it is already imported from this very file, the clash error if not)."""
    name = source.module_name
    target = str(source.path.parent)
    if not name.isidentifier():
        return None, PluginLoadError(
            f"Failed to load custom fusion pass lib {target}. "
            f"Reason: package name {name!r} is not a valid Python identifier.",
            path=target,
        )
    existing = sys.modules.get(name)
    if existing is None:
        return None, None
    existing_file = getattr(existing, "__file__", None)
    if existing_file and os.path.realpath(existing_file) == str(source.path):
        return existing, None
    where = existing_file or f"{list(getattr(existing, '__path__', []))} (built in or namespace)"
    return None, PluginLoadError(
        f"Failed to load custom fusion pass lib {target}. Reason: a module named {name} is "
        f"already imported from {where}; the package at {target} would be shadowed by it.",
        path=target,
    )


def load_source(source: PluginSource) -> LoadedPlugin:
    """Import one plugin source once; a repeated load re-registers what a clear removed."""
    key = str(source.path)
    with LOAD_LOCK:
        cached = _CACHE.get(key)
        if cached is not None:
            if sys.modules.get(source.module_name) is cached.module:
                for descriptor in cached.descriptors:
                    ensure_registered(descriptor)
                return cached
            unload_plugins([cached])
        roots: tuple[Path, ...] = (source.path,)
        if source.kind == "package":
            roots = (source.path.parent,)
        if source.search_dir is not None:
            roots += (source.search_dir,)
        origin = PluginOrigin(source.kind, str(source.path))
        adopted: ModuleType | None = None
        if source.kind == "package":
            adopted, clash = _package_clash(source)
            if clash is not None:
                raise clash

        def run() -> tuple[ModuleType | None, list[PassDescriptor]]:
            if adopted is not None:  # imported before by someone else, from this very file
                return adopted, descriptors_in_module(adopted)
            return _exec_source(source), []

        target = str(source.path.parent if source.kind == "package" else source.path)
        own = None if adopted is not None else source.module_name
        imported = import_isolated(run, target=target, roots=roots, own_module=own)
        plugin = LoadedPlugin(origin, imported.module, imported.descriptors, imported.owned_modules)
        _CACHE[key] = plugin
        return plugin


def cached_plugin(key: str) -> LoadedPlugin | None:
    """The plugin cached under `key` (a source path or an entry-point id)."""
    with LOAD_LOCK:
        return _CACHE.get(key)


def remember_plugin(key: str, plugin: LoadedPlugin) -> None:
    """Cache `plugin` under `key` so that the next load of the same key reuses it."""
    with LOAD_LOCK:
        _CACHE[key] = plugin


def unload_plugins(plugins: Iterable[LoadedPlugin], *, forget_entry_points: bool = False) -> None:
    """Unregister the plugins' passes; forget file plugins and remove the modules they own.

    The next load of a file plugin executes it again. Entry points stay cached and imported
    (they belong to installed distributions): loading one again re-registers its passes.
    """
    with LOAD_LOCK:
        for plugin in plugins:
            unregister_passes(plugin.descriptors)
            if plugin.origin.kind == "entry_point" and not forget_entry_points:
                continue
            _purge(plugin.owned_modules)
            for key, cached in list(_CACHE.items()):
                if cached is plugin:
                    del _CACHE[key]


def unload_all() -> None:
    """Unload and forget every plugin loaded in this process (for tests and tools)."""
    with LOAD_LOCK:
        unload_plugins(list(_CACHE.values()), forget_entry_points=True)
