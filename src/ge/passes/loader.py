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
short step under the lock of the cache of loaded plugins (`ge.passes.plugin_cache`), which
is all that readers and a load of a plugin loaded already take.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import sys
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from ge._signals import interrupt_behind
from ge._user_code import outermost_user_location
from ge.errors import (
    DuplicatePassNameError,
    GeError,
    PassRegisterError,
    PluginLoadError,
    SourceLocation,
)
from ge.ops.registry import (
    CustomOp,
    CustomOpView,
    active_custom_op_view,
    capture_custom_ops,
    remove_custom_ops,
)
from ge.passes.discovery import PluginSource
from ge.passes.file_stamps import FileStamp
from ge.passes.helper_modules import guard_helpers, inside
from ge.passes.import_lock import LOAD_LOCK
from ge.passes.plugin_cache import (
    CACHE,
    LoadedPlugin,
    PluginLoadReport,
    PluginOrigin,
    cached_source,
    hint_clash,
    in_process_plugin,
    loaded_plugins,
    purge_modules,
    reuse_cached,
    unload_all,
    unload_plugins,
    unregister_hint,
)
from ge.passes.plugin_names import leave_installed_out_hint
from ge.passes.registry import (
    PassDescriptor,
    capture_registrations,
    ensure_registered,
    registrations_aside,
    unregister_passes,
)
from ge.passes.source import same_file, traceback_location

__all__ = [
    "LOAD_LOCK",
    "LoadedPlugin",
    "PluginLoadReport",
    "PluginOrigin",
    "cached_source",
    "descriptors_in_module",
    "import_isolated",
    "in_process_plugin",
    "leave_installed_out_hint",
    "load_error",
    "load_source",
    "loaded_plugins",
    "publish_plugin",
    "reuse_cached",
    "source_stamps",
    "unload_all",
    "unload_plugins",
    "unregister_hint",
]


def _new_module_names(before: Collection[str]) -> list[str]:
    """The modules imported since `sys.modules` held `before` (by name, not by count: an
    unload in another thread may drop modules meanwhile)."""
    return [name for name in list(sys.modules) if name not in before]


def source_stamps(modules: Iterable[ModuleType | None]) -> tuple[FileStamp, ...]:
    """The stamp of each module's source file, each file once (`LoadedPlugin.stamps`)."""
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
    """E13029 for a plugin whose import raised `exc`, pointing at the user's file and line:
    the plugin's own line, and, when what raised is in another file (a helper module it
    imports), that line too (`raised_in`), as E13028 does."""
    if isinstance(exc, SyntaxError) and exc.filename:
        location: SourceLocation | None = SourceLocation(exc.filename, exc.lineno)
    else:
        location = traceback_location(exc.__traceback__, roots)
    own = outermost_user_location(exc.__traceback__)
    raised_in = None
    if own is not None and location is not None and not same_file(own.file, location.file):
        location, raised_in = own, location
    shown: BaseException = exc
    if isinstance(exc, GeError) and exc.location is not None and exc.location == location:
        shown = copy.copy(exc)  # its "(at file:line)" is the E13029's own: said once
        shown.location = None
    reason = f"{type(exc).__name__}: {shown}".rstrip(".")
    error = PluginLoadError(
        f"Failed to load custom fusion pass lib {target}. Reason: {reason}.",
        location=location,
        path=target,
        raised_in=raised_in,
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
    origin: PluginOrigin | None = None,
) -> Imported:
    """Run `run` (an import) so that a failure leaves no registration and no module behind.

    `run` returns the module and any already-registered descriptors it vouches for.
    The passes it registers are kept aside (`registrations_aside`): the caller publishes
    them (`publish_plugin`). The plugin owns `own_module` and the other modules it added
    from inside `roots`, and the custom operators registered meanwhile, but those of a
    library (`_plugin_ops`). A pass-name clash says how to leave one side out, knowing
    the importing plugin's `origin` (`hint_clash`).
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
            purge_modules(owned)
            remove_custom_ops(_plugin_ops(ops, new, owned))
            if isinstance(exc, DuplicatePassNameError):
                hint_clash(exc, origin)
            if (isinstance(exc, (KeyboardInterrupt, PassRegisterError, PluginLoadError))
                    or interrupt_behind(exc) is not None):  # (a signal, wrapped: not the plugin's)
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
    so their passes can be registered again after a clear. A submodule's passes a loaded
    plugin holds are that plugin's: its import made them (an entry point naming a package
    is not credited with what the entry points naming its submodules registered)."""
    prefix = module.__name__ + "."
    held = {id(d) for plugin in CACHE.plugins() for d in plugin.descriptors}
    found: list[PassDescriptor] = []
    for name, candidate in list(sys.modules.items()):
        if candidate is None or (name != module.__name__ and not name.startswith(prefix)):
            continue
        for value in list(vars(candidate).values()):
            if not isinstance(value, type) or value.__module__ != name:
                continue
            descriptor = getattr(value, "__ge_pass_descriptor__", None)
            if (isinstance(descriptor, PassDescriptor) and descriptor.cls is value
                    and (name == module.__name__ or id(descriptor) not in held)):
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


def load_source(source: PluginSource, key: str | None = None) -> LoadedPlugin:
    """Import one plugin source once (cached under `key`, by default its path); a repeated
    load re-registers what a clear removed.

    A plugin loaded already is taken as it is, without waiting for an import in progress
    in another thread (`LOAD_LOCK` is taken only to import: exclusive for a source of a
    folder or a package, which change `sys.path` or hide helpers while they import)."""
    key = str(source.path) if key is None else key
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


def publish_plugin(key: str, plugin: LoadedPlugin, target: str,
                   library_ops: Iterable[CustomOp] = ()) -> None:
    """Make a plugin `import_isolated` imported (from `target`) visible as a whole: its
    custom operators (and `library_ops`, those of the libraries it imported) and passes
    registered (where this thread registers) and its cache entry, in one step. On a clash
    (a pass or an operator of its name registered meanwhile) the import is undone: the
    E13030 error, or E13029 for an operator; on an interrupt too."""
    try:
        CACHE.publish(key, plugin, library_ops)
    except BaseException as err:  # (a Ctrl-C as well: nothing of the import stays)
        if not plugin.adopted:
            purge_modules(plugin.owned_modules)
        if not isinstance(err, GeError):
            raise
        if isinstance(err, DuplicatePassNameError):
            hint_clash(err, plugin.origin)
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
    origin = PluginOrigin(source.kind, str(source.path), reached_as=source.reached_as)
    adopted: ModuleType | None = None
    if source.kind == "package":
        adopted, clash = _package_clash(source)
        if clash is not None:
            raise clash
    else:  # imported before by the user's own code: its passes are registered already
        adopted = _imported_from(source.path)
        if adopted is not None and any(p.module is adopted for p in CACHE.plugins()):
            adopted = None  # a loaded plugin's: this is a copy of its edited file

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
    with guard_helpers(source, roots, CACHE.plugins, CACHE.lock) as guard:
        imported = import_isolated(run, target=target, roots=roots, own_module=own,
                                   origin=origin)
    try:
        files = [sys.modules.get(name) for name in imported.owned_modules]
        plugin = LoadedPlugin(origin, imported.module, imported.descriptors,
                              imported.owned_modules, imported.custom_ops,
                              source_stamps([imported.module, *files]), adopted=adopted is not None)
    except BaseException:
        # A Ctrl-C (or a signal handler's exception) while the files are digested: the
        # import is undone, or the next load would take the modules left in sys.modules
        # for the user's own, ignoring edits of the file (trial R).
        if adopted is None:
            purge_modules(imported.owned_modules)
        raise
    publish_plugin(key, plugin, target, imported.library_ops)
    return plugin
