"""The pass plugins loaded in this process: what each one is, where it came from, and the
cache that makes a plugin visible, and invisible again, as a whole.

A plugin enters the cache with its passes and custom operators in one step under the
cache's lock (`ge.passes.loader.publish_plugin`) and leaves it the same way
(`unload_plugins`); readers (`in_process_plugin`, `loaded_plugins`, a load of a plugin
loaded already: `reuse_cached`) take that lock alone, never `LOAD_LOCK`, so they never
wait for an import in progress. A file plugin asked for again after its files changed is
E13029: the code that runs is the code imported; when only compilations running now hold
it, the edited file is loaded beside it instead, as a copy (`cached_source`).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from types import ModuleType

from ge._retired_modules import RETIRED
from ge._text import first_and_more
from ge.errors import DuplicatePassNameError, GeError, PluginLoadError, PluginLoadErrors
from ge.ops.registry import CustomOp, ensure_custom_op, publish_custom_ops, remove_custom_ops
from ge.passes.discovery import PluginSource
from ge.passes.file_stamps import FileStamp
from ge.passes.import_lock import LOAD_LOCK
from ge.passes.plugin_names import (
    InstalledClash,
    clash_hint,
    disables,
    leave_installed_out_hint,
    leave_out_hint,
    merged_clashes,
)
from ge.passes.registry import (
    PassDescriptor,
    ensure_registered,
    get_registered_pass_by_name,
    get_registered_passes,
    publish_registrations,
    unregister_passes,
)

__all__ = [
    "CACHE",
    "LoadedPlugin",
    "PluginLoadReport",
    "PluginOrigin",
    "cached_source",
    "hint_clash",
    "in_process_plugin",
    "loaded_plugins",
    "purge_modules",
    "reuse_cached",
    "unload_all",
    "unload_plugins",
    "unregister_hint",
]


@dataclass(frozen=True)
class PluginOrigin:
    """Where a plugin came from: a file, a package, or an entry point of a distribution."""

    kind: str  # "module" | "package" | "entry_point" | "in_process"
    path: str | None = None
    entry_point: str | None = None
    distribution: str | None = None
    version: str | None = None
    #: how its pass path was given (`PluginSource.reached_as`): not part of what it is
    reached_as: str = field(default="", compare=False)

    def __str__(self) -> str:
        if self.kind == "entry_point":
            return f"entry point {self.entry_point} ({self.distribution} {self.version})"
        return str(self.path)

    @property
    def entry_point_name(self) -> str | None:
        """The entry point's name (`name` of `name = module:attr`); None for another kind."""
        if self.kind != "entry_point" or not self.entry_point:
            return None
        return self.entry_point.partition(" = ")[0]

    def disabled_by(self, disabled: Iterable[str]) -> bool:
        """Whether `ge.passes.disabled_plugins` naming `disabled` leaves this plugin out
        (`disables`); never a plugin of another kind than an entry point."""
        name = self.entry_point_name
        return name is not None and disables(disabled, name, self.distribution)


@dataclass(frozen=True)
class LoadedPlugin:
    """A plugin that imported cleanly: its module, the passes it registered, what it owns.

    `owned_modules` are the modules its import added from its own directory; unloading the
    plugin removes them so that the next load executes the files again. `custom_ops` are
    the custom operators its import registered (see `ge.passes.loader`); unloading the
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

    def error(self, disabled: Collection[str] = ()) -> GeError | None:
        """The failure to raise: the only one as is, several together as E13029 (E13030
        when each failed to register: `PluginLoadErrors.of`); the
        clashes of one pass name between installed plugins as one (`merged_clashes`, its
        hints given the `ge.passes.disabled_plugins` names `disabled`)."""
        failures = merged_clashes(self.failures, disabled)
        if not failures:
            return None
        if len(failures) == 1:
            return failures[0]
        return PluginLoadErrors.of(failures)


class _PluginCache:
    """The plugins loaded in this process by source path (or entry-point id), and the lock
    under which a plugin enters (its passes registered, its entry made: `publish`) and
    leaves (`unload_plugins`) in one step, which readers take to see a consistent whole."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._plugins: dict[str, LoadedPlugin] = {}

    def purge_modules(self, names: Iterable[str]) -> None:
        """Drop the modules `names` from `sys.modules` (those a plugin owned)."""
        with self.lock:
            for name in names:
                module = sys.modules.pop(name, None)
                if module is not None:
                    RETIRED.retire(module)  # (the `ge` process puts it back at its end)

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


CACHE = _PluginCache()


def _reached_twice(err: DuplicatePassNameError, *origins: PluginOrigin | None) -> str:
    """What to add to a clash of a file with itself, reached both as an installed plugin's
    entry point (one of `origins`) and as a pass path, each of which imports it: that it is
    so, and how to give it one way; "" for another clash."""
    new, old = err.location, err.previous_location
    installed = next((o for o in origins if o is not None and o.entry_point), None)
    if (installed is None or new is None or old is None or new.line != old.line
            or os.path.realpath(new.file) != os.path.realpath(old.file)):
        return ""
    leave_out = leave_out_hint([(installed.distribution, installed.entry_point_name or "")])
    path = next((o for o in origins if o is not None and not o.entry_point), None)
    reached, off = _REACHED.get(path.reached_as if path is not None else "", _REACHED[""])
    return (f"; that is one file, reached both as {installed} and as {reached}, and imported "
            f"for each: give it one way, taking the file off {off} or leaving the installed "
            f"plugin out: {leave_out}")


#: How a pass path was given (`PluginOrigin.reached_as`), as `_reached_twice` says it: the
#: way the file was reached, and what to take it off (trial T: ge knew which, and said
#: "ASCEND_GE_PY_PASS_PATH or --pass-path").
_REACHED = {
    "environment": ("a pass path in ASCEND_GE_PY_PASS_PATH", "ASCEND_GE_PY_PASS_PATH"),
    "given": ("a pass path given (--pass-path, pass_paths=)", "the pass paths given"),
    "": ("a pass path (ASCEND_GE_PY_PASS_PATH or --pass-path)", "the pass path"),
}


def unregister_hint(descriptor: PassDescriptor) -> str:
    """What to add to a pass-name clash with a pass registered by the user's own code (in
    process): how to take that registration out."""
    return (f"; {descriptor.class_name} is registered by code of this process: "
            "ge.passes.registry.unregister_passes([ge.passes."
            f"get_registered_pass_by_descriptor_key({descriptor.descriptor_key!r})]) takes "
            "it out")


def hint_clash(err: DuplicatePassNameError, new: PluginOrigin | None = None) -> None:
    """Add to a clash with an earlier pass how to leave one out: when the plugin whose
    import or publication clashed (`new`) and the earlier pass's are both installed, both
    named and the option that runs each; else the option for the installed one's, or the
    unregistering call for one the user's code registered."""
    previous = get_registered_pass_by_name(err.pass_name or "")
    if previous is None:
        return
    owner = next((plugin.origin for plugin in CACHE.plugins()
                  if any(d is previous for d in plugin.descriptors)), None)
    twice = _reached_twice(err, owner, new)
    both = clash_hint((err.class_name or "", new), (previous.class_name, owner))
    if twice:
        err.message += twice
    elif both:
        assert new is not None and owner is not None
        err.clash = InstalledClash(err.message, ((err.class_name or "", new),
                                                 (previous.class_name, owner)))
        err.message += both
    elif owner is not None and owner.entry_point:
        err.message += leave_installed_out_hint(owner.entry_point, owner.distribution)
    elif new is not None and new.entry_point:
        err.message += leave_installed_out_hint(new.entry_point, new.distribution)
    elif owner is None:
        err.message += unregister_hint(previous)


def in_process_plugin() -> LoadedPlugin | None:
    """The passes registered in this process by code no plugin load ran (a class decorated
    in a script, a notebook cell, a module the user imported), as one plugin of origin
    "in_process", or None: GE runs every registered pass, not only those of its plugin
    paths. Passes of a loaded plugin (the environment's, an entry point's, a
    `ge.testing.load_passes` set's) are theirs. A plugin importing now is not seen: its
    passes are aside until it is published with them (the cache's lock: no waiting)."""
    with CACHE.lock:
        owned = {id(d) for plugin in CACHE.plugins() for d in plugin.descriptors}
        found = tuple(d for d in get_registered_passes() if id(d) not in owned)
    return LoadedPlugin(PluginOrigin("in_process"), None, found) if found else None


def loaded_plugins() -> list[LoadedPlugin]:
    """The plugins loaded now (by path or entry point), in load order: what `unload_all`
    would unload. Hold `LOAD_LOCK` to compare it with a load that follows."""
    return CACHE.plugins()


def purge_modules(names: Iterable[str]) -> None:
    """Drop the modules `names` from `sys.modules` (those a plugin owned)."""
    CACHE.purge_modules(names)


def reuse_cached(key: str) -> LoadedPlugin | None:
    """The plugin cached under `key` (a source path or an entry-point id), its passes and
    custom operators registered again where a clear or an unload removed them; None when
    there is none (or its module went: it is unloaded then, to be imported afresh, if
    this thread holds `LOAD_LOCK`: else a folder's import may hide it for a moment).
    E13029 for a file plugin whose files changed since it was imported."""
    cached, changed = _reuse(key)
    if changed:
        assert cached is not None
        raise _stale_error(cached, changed)
    return cached


def _reuse(key: str) -> tuple[LoadedPlugin | None, list[str]]:
    """`reuse_cached`, a plugin whose files changed given with them (and not reused)."""
    cached = CACHE.get(key)
    if cached is None:
        return None, []
    module = cached.module
    if cached.origin.kind != "entry_point" and (
            module is None or sys.modules.get(module.__name__) is not module):
        if LOAD_LOCK.held():
            unload_plugins([cached])
        return None, []
    # (an installed plugin stays imported, edited or not: each compilation warns of an
    # edit, `stale_plugin_warning`)
    changed = cached.changed_files() if cached.origin.kind != "entry_point" else []
    if changed:
        return cached, changed
    with CACHE.lock:  # (not unloaded meanwhile: its passes would outlive it)
        if CACHE.get(key) is not cached:
            return None, []
        try:
            cached.register_again()
        except DuplicatePassNameError as err:  # (another plugin took the name meanwhile)
            hint_clash(err, cached.origin)
            raise
    return cached, []


def cached_source(source: PluginSource, copies: Callable[[LoadedPlugin], bool] | None = None
                  ) -> tuple[LoadedPlugin | None, PluginSource, str]:
    """The plugin of `source` loaded already (`reuse_cached`), or None with the source to
    import and its cache key. When the loaded one's file changed since it was imported and
    `copies(loaded)` allows it (compilations running now hold it, for their duration), the
    edited file is another plugin beside it: a copy named after its content (`_copy_of`),
    loaded already or to import. Else a change is E13029."""
    key = str(source.path)
    cached, changed = _reuse(key)
    if not changed:
        return cached, source, key
    assert cached is not None
    copy = _copy_of(source, cached, changed) if copies is not None and copies(cached) else None
    if copy is None:
        raise _stale_error(cached, changed)
    copy_source, copy_key = copy
    return reuse_cached(copy_key), copy_source, copy_key


def _copy_of(source: PluginSource, plugin: LoadedPlugin, changed: list[str]
             ) -> tuple[PluginSource, str] | None:
    """The source and cache key of a copy of the edited file of `plugin`, a module named
    after the file's content (`<its module name>_<16 hex digits of the content's digest>`),
    when one can be imported beside it: a plugin file (a package is imported under its own
    name), its file the only one changed (a copy shares the helpers it imported)."""
    if source.kind != "module" or plugin.adopted or changed != [str(source.path)]:
        return None
    stamp = FileStamp.take(str(source.path))
    if stamp is None:
        return None
    digest = stamp.digest.hex()[:16]
    return (dataclasses.replace(source, module_name=f"{source.module_name}_{digest}"),
            f"{source.path}#{digest}")


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
    with CACHE.lock:
        for plugin in plugins:
            if not plugin.adopted:  # (an adopted module's passes stay: it stays imported)
                unregister_passes(plugin.descriptors)
            remove_custom_ops(plugin.custom_ops)
            if plugin.origin.kind == "entry_point" and not forget_entry_points:
                continue
            if CACHE.holds(plugin):
                purge_modules(plugin.owned_modules)
                CACHE.forget(plugin)


def unload_all() -> None:
    """Unload and forget every plugin loaded in this process (for tests and tools)."""
    with CACHE.lock:
        unload_plugins(CACHE.plugins(), forget_entry_points=True)
