"""`load_passes`: plugin files and folders loaded into a `PassSet` of their own.

The plugins are imported with the compiler's rules (GE's pass-path rules, see
docs/passes.md), but their passes go into the set's own `PassRegistry` only: they are taken
out of the process-wide `ge.passes` registry right after the import, so no compilation and
no other test sees them, and a second set may hold another pass of the same name.
`PassSet.close()` (or leaving its `with` block) unloads the plugins: their modules are
dropped, so the next load executes the files again.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ge.compiler.pass_registry import PassRegistry, RegisteredPass
from ge.errors import GeError
from ge.passes import loader as _loader
from ge.passes.bootstrap import discover_plugins
from ge.passes.registry import unregister_passes
from ge.testing.tracebacks import without_engine_frames

if TYPE_CHECKING:
    from ge.graph import Graph
    from ge.passes.found_matches import FoundMatch
    from ge.testing.running import ModelLike

__all__ = ["PassPaths", "PassSet", "load_passes"]

PassPaths = str | os.PathLike[str] | Iterable[str | os.PathLike[str]]


class PassSet:
    """The passes of some plugin files, by name, in a registry of their own.

    `passes["Name"]` is the pass class, `passes.entry("Name")` its `RegisteredPass`
    (descriptor and origin), `passes.names` every name in load order; `run`, `find_matches`
    run one of them (see `ge.testing.run_pass`).
    """

    def __init__(self, plugins: Iterable[_loader.LoadedPlugin], paths: Iterable[str] = (), *,
                 owned: Iterable[_loader.LoadedPlugin] | None = None) -> None:
        """`plugins` are loaded plugins; `owned` those of them the set unloads when it closes
        (default: all; a plugin another set or the compiler loaded first is theirs)."""
        self._plugins = list(plugins)
        self._owned = self._plugins if owned is None else list(owned)
        self.paths = list(paths)
        self.registry = PassRegistry()
        for plugin in self._plugins:
            self.registry.add_plugin(plugin)
        self._closed = False

    # -- look-ups ---------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        """The pass names, in load order."""
        return [entry.name for entry in self.registry]

    @property
    def modules(self) -> list[ModuleType]:
        """The imported plugin modules, in load order."""
        return [p.module for p in self._plugins if p.module is not None]

    def entry(self, name: str) -> RegisteredPass:
        """The registered pass `name`; KeyError listing the known names if there is none
        (the closest first: a misspelt name says which one was meant)."""
        __tracebackhide__ = True  # (pytest: the failure points at the test's line)
        entry = self.registry.get(name)
        if entry is None:
            known = ", ".join(self.names) or "none"
            close = difflib.get_close_matches(name, self.names, n=1) if isinstance(
                name, str) else []
            meant = f"; did you mean {close[0]!r}?" if close else ""
            raise KeyError(f"no pass named {name!r} in {self._where()} (passes: {known})"
                           f"{meant}")
        return entry

    def entry_of_class(self, cls: type) -> RegisteredPass | None:
        """The registration of the pass class `cls` in this set, if it has one."""
        for entry in self.registry:
            if entry.descriptor.cls is cls:
                return entry
        return None

    def get(self, name: str, default: Any = None) -> Any:
        entry = self.registry.get(name)
        return default if entry is None else entry.descriptor.cls

    def __getitem__(self, name: str) -> type:
        return self.entry(name).descriptor.cls

    def __contains__(self, name: object) -> bool:
        return name in self.registry

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.registry)

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"<PassSet{state} {self.names} from {self.paths}>"

    def _where(self) -> str:
        return "the passes loaded from " + ", ".join(self.paths) if self.paths else "this set"

    # -- running ----------------------------------------------------------------------
    def run(self, name: str, model: ModelLike, **kwargs: Any) -> Graph:
        """`ge.testing.run_pass(name, model, passes=self, **kwargs)`."""
        __tracebackhide__ = True
        from ge.testing.running import run_pass

        return run_pass(name, model, passes=self, **kwargs)

    def find_matches(self, name: str, model: ModelLike, **kwargs: Any) -> list[FoundMatch]:
        """`ge.testing.find_matches(name, model, passes=self, **kwargs)`."""
        __tracebackhide__ = True
        from ge.testing.running import find_matches

        return find_matches(name, model, passes=self, **kwargs)

    # -- lifetime ---------------------------------------------------------------------
    def close(self) -> None:
        """Unload the plugins (their modules are dropped); the classes stay usable."""
        if not self._closed:
            self._closed = True
            _loader.unload_plugins(self._owned)

    def __enter__(self) -> PassSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _path_list(path_or_paths: PassPaths) -> list[str | os.PathLike[str]]:
    if isinstance(path_or_paths, (str, os.PathLike)):
        return [path_or_paths]
    paths = list(path_or_paths)
    if not paths:
        raise ValueError("load_passes needs at least one plugin file or folder")
    return paths


def load_passes(path_or_paths: PassPaths) -> PassSet:
    """Import the plugin files and folders `path_or_paths` (GE's pass-path rules) into a new
    `PassSet`; nothing stays in the global registry a compilation uses.

    A plugin that fails to import raises its E13029 (`PluginLoadError`) or E13030 error
    (several failures together as `PluginLoadErrors`), and nothing this call loaded stays
    loaded. The error is raised from here with the plugin's frames only
    (`ge.testing.tracebacks.without_engine_frames`).
    """
    __tracebackhide__ = True
    paths = _path_list(path_or_paths)
    with _loader.LOAD_LOCK:
        known = {id(plugin) for plugin in _loader.loaded_plugins()}
        try:
            report = discover_plugins(paths, entry_points=False)
        except GeError as err:
            raise without_engine_frames(err)  # noqa: B904 (it is the error caught)
        new = [plugin for plugin in report.plugins if id(plugin) not in known]
        error = report.error()
        if error is not None:
            _loader.unload_plugins(new)
            raise without_engine_frames(error)
        for plugin in report.plugins:
            unregister_passes(plugin.descriptors)
    try:
        return PassSet(report.plugins, [os.fspath(p) for p in paths], owned=new)
    except BaseException:
        _loader.unload_plugins(new)
        raise
