"""Importing pass plugins one at a time, in isolation, at most once per file.

A plugin that raises while being imported leaves nothing behind: the passes it registered
are unregistered and the modules it added are removed again; the failure becomes one E13029
error (or the E13030 registration error that caused it) with the user's file and line. A
file reached twice (listed twice, via a symlink) is imported and registered once.

A plugin of a folder whose import reaches a helper module (`import _common`) that another
plugin folder already imported from a different file fails with E13029 naming both files
(`ge.passes.helper_modules`).

Custom operators (`ge.ops.register_op`) a plugin registers while it is imported belong to
it like its passes: rolled back when the import fails, unregistered when the plugin is
unloaded, so that loading it again (its file executed again) registers them afresh rather
than failing with GE1301. Those a library registers at its own import (a module the plugin
imported for the first time that is not the plugin's and stays imported) belong to the
library: they stay registered as long as it stays imported.

Imports take `LOAD_LOCK` (`ge.passes.import_lock`: exclusive for the plugins of a folder,
which change `sys.path`, shared otherwise; one import per plugin at a time), and nothing
else waits for them: a plugin registers its passes and custom operators aside while it
imports (`registrations_aside`) and is published as a whole, with its cache entry, in one
short step under the cache's lock, which is all that readers (`in_process_plugin`,
`loaded_plugins`) and a load of a plugin loaded already take.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import sys
import threading
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from ge._text import first_and_more
from ge.errors import (
    DuplicatePassNameError,
    GeError,
    PassRegisterError,
    PluginLoadError,
    PluginLoadErrors,
    SourceLocation,
)
from ge.ops.registry import (
    CustomOp,
    CustomOpView,
    active_custom_op_view,
    capture_custom_ops,
    ensure_custom_op,
    publish_custom_ops,
    remove_custom_ops,
)
from ge.passes.discovery import PluginSource
from ge.passes.file_stamps import FileStamp
from ge.passes.helper_modules import guard_helpers, inside
from ge.passes.import_lock import ImportLock
from ge.passes.registry import (
    PassDescriptor,
    capture_registrations,
    ensure_registered,
    get_registered_pass_by_name,
    get_registered_passes,
    publish_registrations,
    registrations_aside,
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
    "in_process_plugin",
    "leave_installed_out_hint",
    "load_error",
    "load_source",
    "loaded_plugins",
    "publish_plugin",
    "reuse_cached",
    "unload_all",
    "unload_plugins",
    "unregister_hint",
]

#: Taken by plugin imports, for as long as one runs (see `ImportLock`): what only reads what
#: is loaded, or loads a plugin loaded already, never takes it. `with LOAD_LOCK:` holds it
#: exclusive: no plugin imports meanwhile.
LOAD_LOCK = ImportLock()


@dataclass(frozen=True)
class PluginOrigin:
    """Where a plugin came from: a file, a package, or an entry point of a distribution."""

    kind: str  # "module" | "package" | "entry_point" | "in_process"
    path: str | None = None
    entry_point: str | None = None
    distribution: str | None = None
    version: str | None = None

    def __str__(self) -> str:
        if self.kind == "entry_point":
            return f"entry point {self.entry_point} ({self.distribution} {self.version})"
        return str(self.path)

    def entry_point_names(self) -> tuple[str, ...]:
        """The names an entry point is disabled by (`name`, `distribution:name`); () for
        a plugin of another kind."""
        if self.kind != "entry_point" or not self.entry_point:
            return ()
        name = self.entry_point.partition(" = ")[0]
        return (name, f"{self.distribution}:{name}")


@dataclass(frozen=True)
class LoadedPlugin:
    """A plugin that imported cleanly: its module, the passes it registered, what it owns.

    `owned_modules` are the modules its import added from its own directory; unloading the
    plugin removes them so that the next load executes the files again. `custom_ops` are
    the custom operators its import registered (see the module docstring); unloading the
    plugin unregisters them.
    """

    origin: PluginOrigin
    module: ModuleType | None
    descriptors: tuple[PassDescriptor, ...]
    owned_modules: tuple[str, ...] = ()
    custom_ops: tuple[CustomOp, ...] = ()
    #: The source files of a file plugin as they were imported: the code that runs is
    #: theirs as they were then (`changed_files`).
    stamps: tuple[FileStamp, ...] = ()
    #: Whether the module was imported before by the user's own code (`import my_pass`),
    #: whose registrations the plugin uses: unloading it leaves them registered.
    adopted: bool = False

    def changed_files(self) -> list[str]:
        """The plugin's source files that changed (or went) since it was imported: the
        passes that run are still those of the code imported then. By content, read only
        when size or modification time differ or cannot tell (`FileStamp`)."""
        return [stamp.path for stamp in self.stamps if stamp.changed()]

    def register_again(self) -> None:
        """Register the plugin's passes and custom operators again where an unload or a
        clear removed them (its modules are still imported, so nothing else would)."""
        for descriptor in self.descriptors:
            ensure_registered(descriptor)
        for op in self.custom_ops:
            ensure_custom_op(op)


@dataclass
class PluginLoadReport:
    """The result of one discovery: loaded plugins, failures, entry points disabled by name,
    and which of the plugins it imported itself (`imported`) rather than found loaded."""

    plugins: list[LoadedPlugin] = field(default_factory=list)
    failures: list[GeError] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)
    imported: list[LoadedPlugin] = field(default_factory=list)
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


class _PluginCache:
    """The plugins loaded in this process by source path (or entry-point id), and the lock
    under which a plugin enters (its passes registered, its entry made: `publish`) and
    leaves (`unload_plugins`) in one step, which readers take to see a consistent whole."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._plugins: dict[str, LoadedPlugin] = {}

    def get(self, key: str) -> LoadedPlugin | None:
        with self.lock:
            return self._plugins.get(key)

    def plugins(self) -> list[LoadedPlugin]:
        with self.lock:
            return list(self._plugins.values())

    def holds(self, plugin: LoadedPlugin) -> bool:
        with self.lock:
            return any(cached is plugin for cached in self._plugins.values())

    def publish(self, key: str, plugin: LoadedPlugin,
                library_ops: Iterable[CustomOp] = ()) -> None:
        """Register the plugin's custom operators and passes where this thread registers
        (GE1301, E13030 on a clash, nothing kept) and cache it, in one step; with the
        operators of the libraries its import imported (kept whatever follows)."""
        with self.lock:
            publish_custom_ops(library_ops)
            try:
                publish_custom_ops(plugin.custom_ops)
                publish_registrations(plugin.descriptors)
            except BaseException:
                remove_custom_ops(plugin.custom_ops)
                raise
            self._plugins[key] = plugin

    def forget(self, plugin: LoadedPlugin) -> None:
        with self.lock:
            for key, cached in list(self._plugins.items()):
                if cached is plugin:
                    del self._plugins[key]


_CACHE = _PluginCache()


def leave_installed_out_hint(entry_point: str) -> str:
    """What to add to a pass-name clash with an installed plugin's pass (entry point
    `"name = module:attr"`): the option that leaves that plugin out, so the other runs."""
    name = entry_point.partition(" = ")[0]
    return (f"; to run the other one, leave the installed plugin out: --option "
            f"ge.passes.disabled_plugins={name} (ge.compile's "
            f"options={{'ge.passes.disabled_plugins': '{name}'}})")


def unregister_hint(descriptor: PassDescriptor) -> str:
    """What to add to a pass-name clash with a pass registered by the user's own code (in
    process): how to take that registration out."""
    return (f"; {descriptor.class_name} is registered by code of this process: "
            "ge.passes.registry.unregister_passes([ge.passes."
            f"get_registered_pass_by_descriptor_key({descriptor.descriptor_key!r})]) takes "
            "it out")


def _hint_clash(err: DuplicatePassNameError) -> None:
    """Add to a clash with an earlier pass how to leave that one out: the option for a
    loaded entry point's, the unregistering call for one the user's code registered."""
    previous = get_registered_pass_by_name(err.pass_name or "")
    for plugin in _CACHE.plugins():
        if previous is not None and any(d is previous for d in plugin.descriptors):
            if plugin.origin.kind == "entry_point" and plugin.origin.entry_point:
                err.message += leave_installed_out_hint(plugin.origin.entry_point)
            return
    if previous is not None:
        err.message += unregister_hint(previous)


def in_process_plugin() -> LoadedPlugin | None:
    """The passes registered in this process by code no plugin load ran (a class decorated
    in a script, a notebook cell, a module the user imported), as one plugin of origin
    "in_process", or None: GE runs every registered pass, not only those of its plugin
    paths. Passes of a loaded plugin (the environment's, an entry point's, a
    `ge.testing.load_passes` set's) are theirs. A plugin importing now is not seen: its
    passes are aside until it is published with them (the cache's lock: no waiting)."""
    with _CACHE.lock:
        owned = {id(d) for plugin in _CACHE.plugins() for d in plugin.descriptors}
        found = tuple(d for d in get_registered_passes() if id(d) not in owned)
    return LoadedPlugin(PluginOrigin("in_process"), None, found) if found else None


def loaded_plugins() -> list[LoadedPlugin]:
    """The plugins loaded now (by path or entry point), in load order: what `unload_all`
    would unload. Hold `LOAD_LOCK` to compare it with a load that follows."""
    return _CACHE.plugins()


def _new_module_names(before: Collection[str]) -> list[str]:
    """The modules imported since `sys.modules` held `before` (by name, not by count: an
    unload in another thread may drop modules meanwhile)."""
    return [name for name in list(sys.modules) if name not in before]


def _purge(names: Iterable[str]) -> None:
    for name in names:
        sys.modules.pop(name, None)


def _stamps(modules: Iterable[ModuleType | None]) -> tuple[FileStamp, ...]:
    """The stamp of each module's source file, each file once."""
    found: dict[str, FileStamp] = {}
    for module in modules:
        file = getattr(module, "__file__", None)
        if file and file not in found and (stamp := FileStamp.take(file)) is not None:
            found[file] = stamp
    return tuple(found.values())


def _imported_from(path: Path) -> ModuleType | None:
    """A module already imported (not by the loader) whose source is the file at `path`:
    a plugin file the user's code imported itself (`import my_pass`, to test it)."""
    wanted = str(path)
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file and file.endswith(path.name) and os.path.realpath(file) == wanted:
            return module
    return None


def load_error(target: str, exc: BaseException, roots: Iterable[Path] = ()) -> PluginLoadError:
    """E13029 for a plugin whose import raised `exc`, pointing at the user's file and line."""
    if isinstance(exc, SyntaxError) and exc.filename:
        location: SourceLocation | None = SourceLocation(exc.filename, exc.lineno)
    else:
        location = traceback_location(exc.__traceback__, roots)
    shown: BaseException = exc
    if isinstance(exc, GeError) and exc.location is not None and exc.location == location:
        shown = copy.copy(exc)  # its "(at file:line)" is the E13029's own: said once
        shown.location = None
    reason = f"{type(exc).__name__}: {shown}".rstrip(".")
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
    custom_ops: tuple[CustomOp, ...] = ()
    #: Those registered by the libraries it imported (they are not the plugin's).
    library_ops: tuple[CustomOp, ...] = ()


def import_isolated(
    run: Callable[[], tuple[ModuleType | None, list[PassDescriptor]]],
    *,
    target: str,
    roots: tuple[Path, ...] = (),
    own_module: str | None = None,
) -> Imported:
    """Run `run` (an import) so that a failure leaves no registration and no module behind.

    `run` returns the module and any already-registered descriptors it vouches for.
    The passes it registers are kept aside (`registrations_aside`): the caller publishes
    them (`publish_plugin`). The plugin owns `own_module` and the other modules it added
    from inside `roots`, and the custom operators registered meanwhile, but those of a
    library (`_plugin_ops`).
    """
    before = set(sys.modules)
    kept: list[CustomOp] = []  # (what the operators' aside keeps: published with the plugin)
    with _custom_ops_aside(lambda: kept), registrations_aside(), \
            capture_registrations() as captured, capture_custom_ops() as ops:
        try:
            module, extra = run()
            for descriptor in extra:
                ensure_registered(descriptor)
        except BaseException as exc:
            unregister_passes(captured)
            new = _new_module_names(before)
            owned = _owned_modules(new, roots, own_module)
            _purge(owned)
            remove_custom_ops(_plugin_ops(ops, new, owned))
            if isinstance(exc, DuplicatePassNameError):
                _hint_clash(exc)
            if isinstance(exc, (KeyboardInterrupt, PassRegisterError, PluginLoadError)):
                raise
            raise load_error(target, exc, roots) from exc
        descriptors = list(captured)
        descriptors += [d for d in extra if all(d is not c for c in captured)]
        new = _new_module_names(before)
        owned = _owned_modules(new, roots, own_module)
        plugin_ops = _plugin_ops(ops, new, owned)
        kept += ops
    library_ops = tuple(op for op in ops if all(op is not mine for mine in plugin_ops))
    return Imported(module, tuple(descriptors), tuple(owned), tuple(plugin_ops), library_ops)


@contextmanager
def _custom_ops_aside(kept: Callable[[], Iterable[CustomOp]]) -> Iterator[None]:
    """Outside a compilation's own import (whose view collects them already), the custom
    operators registered while a plugin imports go to a view of their own, out of the
    process-wide table until the plugin is published with them (`publish_plugin`); when
    the import fails, those of the libraries it imported (not in `kept()`) go to the table
    at the end (they stay registered as long as the libraries stay imported)."""
    if active_custom_op_view() is not None:
        yield
        return
    with CustomOpView().importing(kept):
        yield


def _owned_modules(new: list[str], roots: tuple[Path, ...], own_module: str | None) -> list[str]:
    """Of the modules an import added (`new`), those the plugin owns."""
    owned = []
    for name in new:
        if name == own_module or inside(getattr(sys.modules.get(name), "__file__", None), roots):
            owned.append(name)
    return owned


def _plugin_ops(ops: list[CustomOp], new: list[str], owned: list[str]) -> list[CustomOp]:
    """The custom operators a plugin's import registered that are the plugin's: all but
    those registered by the body of a module the import added that the plugin does not own
    and that stays imported (a library imported for the first time: importing it again
    would not register them again, so they must stay as long as it does)."""
    libraries = {name for name in new if name not in owned and name in sys.modules}
    return [op for op in ops if op.module not in libraries]


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
    """Import one plugin source once; a repeated load re-registers what a clear removed.

    A plugin loaded already is taken as it is, without waiting for an import in progress
    in another thread (`LOAD_LOCK` is taken only to import: exclusive for a source of a
    folder or a package, which change `sys.path` or hide helpers while they import)."""
    key = str(source.path)
    cached = reuse_cached(key)
    if cached is not None:
        return cached
    with LOAD_LOCK.importing(key, exclusive=changes_import_path(source)):
        cached = reuse_cached(key)  # (the import waited for may have been this one)
        return cached if cached is not None else _import_source(source, key)


def changes_import_path(source: PluginSource) -> bool:
    """Whether importing `source` changes what other imports find meanwhile: a plugin of a
    folder (the folder first on `sys.path`, helpers of other folders hidden) or a package."""
    return source.search_dir is not None or source.kind == "package"


def reuse_cached(key: str) -> LoadedPlugin | None:
    """The plugin cached under `key` (a source path or an entry-point id), its passes and
    custom operators registered again where a clear or an unload removed them; None when
    there is none (or its module went: it is unloaded then, to be imported afresh, if
    this thread holds `LOAD_LOCK`: else a folder's import may hide it for a moment).
    E13029 for a file plugin whose files changed since it was imported."""
    cached = _CACHE.get(key)
    if cached is None:
        return None
    module = cached.module
    if cached.origin.kind != "entry_point" and (
            module is None or sys.modules.get(module.__name__) is not module):
        if LOAD_LOCK.held():
            unload_plugins([cached])
        return None
    changed = cached.changed_files()
    if changed:
        raise _stale_error(cached, changed)
    with _CACHE.lock:  # (not unloaded meanwhile: its passes would outlive it)
        if _CACHE.get(key) is not cached:
            return None
        cached.register_again()
    return cached


def publish_plugin(key: str, plugin: LoadedPlugin, target: str,
                   library_ops: Iterable[CustomOp] = ()) -> None:
    """Make a plugin `import_isolated` imported (from `target`) visible as a whole: its
    custom operators (and `library_ops`, those of the libraries it imported) and passes
    registered (where this thread registers) and its cache entry, in one step. On a clash
    (a pass or an operator of its name registered meanwhile) the import is undone: the
    E13030 error, or E13029 for an operator."""
    try:
        _CACHE.publish(key, plugin, library_ops)
    except GeError as err:
        if not plugin.adopted:
            _purge(plugin.owned_modules)
        if isinstance(err, DuplicatePassNameError):
            _hint_clash(err)
        if isinstance(err, PassRegisterError):
            raise
        error = load_error(target, err)
        error.location = error.location or err.location
        raise error from err


def _import_source(source: PluginSource, key: str) -> LoadedPlugin:
    """Import `source` (under `LOAD_LOCK`) and publish it."""
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
    else:  # imported before by the user's own code: its passes are registered already
        adopted = _imported_from(source.path)

    target = str(source.path.parent if source.kind == "package" else source.path)

    def run() -> tuple[ModuleType | None, list[PassDescriptor]]:
        if adopted is not None:  # imported before by someone else, from this very file
            return adopted, descriptors_in_module(adopted)
        try:
            module = _exec_source(source)
        except Exception as exc:  # a taken helper explains it (ImportError, or later)
            guard.check(target, exc)
            raise
        guard.check(target)
        return module, []

    own = None if adopted is not None else source.module_name
    with guard_helpers(source, roots, _CACHE.plugins, _CACHE.lock) as guard:
        imported = import_isolated(run, target=target, roots=roots, own_module=own)
    files = [sys.modules.get(name) for name in imported.owned_modules]
    plugin = LoadedPlugin(origin, imported.module, imported.descriptors, imported.owned_modules,
                          imported.custom_ops, _stamps([imported.module, *files]),
                          adopted=adopted is not None)
    publish_plugin(key, plugin, target, imported.library_ops)
    return plugin


def _stale_error(plugin: LoadedPlugin, changed: list[str]) -> PluginLoadError:
    """E13029 for a plugin asked for again after its files changed while it stayed loaded:
    importing it again would register its passes twice, and using the loaded one would
    run the old code without a word."""
    where = str(plugin.origin.path or plugin.origin)
    what = "it" if changed == [where] else first_and_more(changed)
    return PluginLoadError(
        f"Failed to load custom fusion pass lib {where}. Reason: "
        f"{what} changed (or went) since it was imported, and it is still loaded: by the "
        "compiler, from ASCEND_GE_PY_PASS_PATH when it started (call ge.finalize() first), "
        "by another compilation running now that was given it as a pass path, or by an "
        "open ge.testing.load_passes block (load it again when they have ended); ge would "
        "run the old code.",
        path=where)


def unload_plugins(plugins: Iterable[LoadedPlugin], *, forget_entry_points: bool = False) -> None:
    """Unregister the plugins' passes and custom operators; forget file plugins and remove
    the modules they own.

    The next load of a file plugin executes it again. Entry points stay cached and imported
    (they belong to installed distributions): loading one again re-registers its passes and
    custom operators. One step for readers (the cache's lock), without waiting for an
    import in progress; a plugin unloaded already keeps its hands off the modules of its
    names, which may be those of a later import of the same file.
    """
    with _CACHE.lock:
        for plugin in plugins:
            if not plugin.adopted:  # (an adopted module's passes stay: it stays imported)
                unregister_passes(plugin.descriptors)
            remove_custom_ops(plugin.custom_ops)
            if plugin.origin.kind == "entry_point" and not forget_entry_points:
                continue
            if _CACHE.holds(plugin):
                _purge(plugin.owned_modules)
                _CACHE.forget(plugin)


def unload_all() -> None:
    """Unload and forget every plugin loaded in this process (for tests and tools)."""
    with _CACHE.lock:
        unload_plugins(_CACHE.plugins(), forget_entry_points=True)
