"""Helper modules of plugin folders: one name, one file per process.

A plugin folder is on `sys.path` while its plugins import, so a helper beside them
(`import _common`) is a real top-level module. A plugin whose import reaches a helper that a
plugin of another folder already imported from a different file fails with E13029 naming
both files, as a package whose name is taken does (D8): it never silently gets the other
folder's file. The plugins of one folder share its helper.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, ModuleType
from typing import TYPE_CHECKING

from ge.errors import PluginLoadError, SourceLocation
from ge.passes.discovery import PluginSource

if TYPE_CHECKING:
    from ge.passes.loader import LoadedPlugin

__all__ = ["HelperGuard", "guard_helpers", "inside"]


def inside(filename: str | None, roots: Iterable[Path]) -> bool:
    """Whether the file `filename` lies in one of `roots` (resolved folders or files)."""
    if not filename:
        return False
    real = os.path.realpath(filename)
    for root in roots:
        text = str(root)
        if real == text or real.startswith(text + os.sep):
            return True
    return False


@dataclass(frozen=True)
class _TakenHelper:
    """A helper module another plugin imported that this plugin's folder has its own file of."""

    name: str
    existing: str  # the file already imported under `name`
    owner: str  # the plugin that imported it
    beside: str  # this folder's file of the same name, which the import would have meant


class _HelperClash(ImportError):
    """Raised into a plugin's import of a helper whose name another plugin folder took."""


class HelperGuard(importlib.abc.MetaPathFinder):
    """While one plugin imports: the taken helpers are out of `sys.modules`, so an import of
    one of them reaches this finder (first on `sys.meta_path`), which records and refuses it."""

    def __init__(self, taken: dict[str, _TakenHelper], roots: tuple[Path, ...]) -> None:
        self.taken = taken
        self.roots = roots
        self.thread = threading.get_ident()
        self.hits: list[tuple[_TakenHelper, SourceLocation | None]] = []

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        helper = self.taken.get(fullname.partition(".")[0])
        if helper is None or threading.get_ident() != self.thread:
            return None
        self.hits.append((helper, self._import_site()))
        raise _HelperClash(
            f"module {helper.name!r} is already imported from {helper.existing}", name=fullname
        )

    def _import_site(self) -> SourceLocation | None:
        frame: FrameType | None = sys._getframe(1)
        while frame is not None:
            if inside(frame.f_code.co_filename, self.roots):
                return SourceLocation(frame.f_code.co_filename, frame.f_lineno)
            frame = frame.f_back
        return None

    def check(self, target: str, cause: BaseException | None = None) -> None:
        """Raise E13029 for the first taken helper the plugin tried to import, if any."""
        if not self.hits:
            return
        helper, location = self.hits[0]
        error = PluginLoadError(
            f"Failed to load custom fusion pass lib {target}. Reason: a module named "
            f"{helper.name} is already imported from {helper.existing} (by the plugin "
            f"{helper.owner}); {helper.beside} is not loaded: rename one of them.",
            location=location,
            path=target,
        )
        raise error from cause


def _taken_helpers(search_dir: Path, plugins: Iterable[LoadedPlugin]
                   ) -> dict[str, _TakenHelper]:
    """The modules `plugins` own whose name resolves, in `search_dir`, to another file."""
    taken: dict[str, _TakenHelper] = {}
    for plugin in plugins:
        for name in plugin.owned_modules:
            top = name.partition(".")[0]
            module = sys.modules.get(top)
            if top in taken or module is None:
                continue
            spec = importlib.machinery.PathFinder.find_spec(top, [str(search_dir)])
            if spec is None or not spec.has_location or not spec.origin:
                continue
            beside = os.path.realpath(spec.origin)
            existing = getattr(module, "__file__", None)
            if existing and os.path.realpath(existing) == beside:
                continue  # the same file (the same folder, a symlink): shared, as Python does
            where = existing or f"{list(getattr(module, '__path__', []))} (namespace)"
            taken[top] = _TakenHelper(top, where, str(plugin.origin), beside)
    return taken


@contextmanager
def guard_helpers(source: PluginSource, roots: tuple[Path, ...],
                  loaded: Callable[[], list[LoadedPlugin]],
                  lock: AbstractContextManager[object]) -> Iterator[HelperGuard]:
    """Hide the helpers the `loaded()` plugins of other folders took (and their submodules)
    while `source` imports, with a `HelperGuard` that refuses them (its `check` raises the
    E13029); afterwards, under `lock` (the one plugins are unloaded under), put back those
    whose plugin is still loaded: another thread may have unloaded it meanwhile."""
    taken = (_taken_helpers(source.search_dir, loaded()) if source.search_dir is not None
             else {})
    guard = HelperGuard(taken, roots)
    if not taken:
        yield guard
        return
    hidden = {
        name: module
        for name, module in list(sys.modules.items())
        if name.partition(".")[0] in taken
    }
    for name in hidden:
        sys.modules.pop(name, None)
    sys.meta_path.insert(0, guard)
    try:
        yield guard
    finally:
        try:
            sys.meta_path.remove(guard)
        except ValueError:  # the plugin removed it itself
            pass
        with lock:
            held = {name.partition(".")[0] for plugin in loaded()
                    for name in plugin.owned_modules}
            for name, module in hidden.items():
                if name.partition(".")[0] in held:
                    sys.modules.setdefault(name, module)
