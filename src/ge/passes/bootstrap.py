"""Loading pass plugins: the paths of `ASCEND_GE_PY_PASS_PATH`, then installed entry points.

`load_pass_plugins()` is GE's entry: it reads the variable, imports every plugin, and
returns the modules; decorators inside them fill the registry. `discover_plugins()` is the
same discovery returning a `PluginLoadReport` (loaded plugins with their origin, failures,
disabled entry points) for the compiler and `ge passes list`.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from ge.errors import (
    CompileWarning,
    GeError,
    PassPathWarning,
    PluginLoadWarning,
    SourceLocation,
)
from ge.passes.discovery import (
    DEFAULT_MODULE_PREFIX,
    DEFAULT_PLUGIN_KIND,
    PluginSource,
    empty_folder_note,
    given_paths,
    normalize_path_list,
    plugin_sources,
)
from ge.passes.entry_points import (
    ENTRY_POINT_GROUP,
    entry_point_id,
    is_disabled,
    load_entry_point,
    plugin_entry_points,
)
from ge.passes.loader import (
    LOAD_LOCK,
    LoadedPlugin,
    PluginLoadReport,
    cached_source,
    load_source,
    loaded_plugins,
    unload_plugins,
)
from ge.passes.source import warn_user

__all__ = [
    "ENTRY_POINT_GROUP",
    "ENV_PY_PASS_PATH",
    "discover_plugins",
    "get_registered_passes",
    "load_pass_plugins",
    "normalize_path_list",
    "scan_modules_from_path",
    "warn_failures",
    "warn_registers_nothing",
]

ENV_PY_PASS_PATH = "ASCEND_GE_PY_PASS_PATH"


@contextmanager
def _on_sys_path(directory: Path | None) -> Iterator[None]:
    """Put a scanned directory first on `sys.path` while its plugins import (GE's rule)."""
    entry = str(directory) if directory is not None else None
    if entry is None or entry in sys.path:
        yield
        return
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        try:
            sys.path.remove(entry)
        except ValueError:  # the plugin removed it itself
            pass


def _load_sources(report: PluginLoadReport, item: Path, sources: list[PluginSource],
                  copies: Callable[[LoadedPlugin], bool] | None) -> None:
    """Load the plugins of one item: those loaded already as they are, the others imported
    (`LOAD_LOCK`; alone when the item is a folder, which is first on `sys.path` while its
    plugins import). `copies` tells whether an edited file a plugin loaded already comes
    from may be loaded again beside it (`cached_source`)."""
    folder = item.is_dir()
    for source in sources:
        try:
            plugin, wanted, key = cached_source(source, copies)
            if plugin is None:
                with LOAD_LOCK.importing(key, exclusive=folder), \
                        _on_sys_path(item if folder else None):
                    plugin, wanted, key = cached_source(source, copies)  # (imported meanwhile?)
                    if plugin is None:
                        plugin = load_source(wanted, key)
                        report.imported.append(plugin)
            report.add(plugin)
        except GeError as err:
            report.failures.append(err)


def _warn_unregistered(module: ModuleType, registered: Collection[SourceLocation],
                       plugin: str) -> bool:
    """A `PassDefinitionWarning` at the class statement of each complete pass class a
    plugin that registers no pass defines (a pattern pass with its patterns and
    `replacement`, a decompose pass with `replacement`, a fusion pass with `run`), none of
    whose subclasses is registered: without `@register_fusion_pass` or
    `@register_decompose_pass` ge never runs it, and the plugin loaded in silence (trial EE).
    A base class a plugin's other passes build on has no complete hooks, or subclasses; a
    class registered from another plugin (the same class statement) is registered.
    `plugin` is how the warning names the plugin; True if it warned."""
    from ge.errors import PassDefinitionWarning
    from ge.passes.base import DecomposePass, FusionBasePass, PatternFusionPass

    warned = False
    for value in list(vars(module).values()):
        if (not isinstance(value, type) or value.__module__ != module.__name__
                or not issubclass(value, FusionBasePass)
                or "__ge_pass_descriptor__" in value.__dict__ or value.__subclasses__()
                or value.__ge_pass_source__ in registered):
            continue
        if issubclass(value, PatternFusionPass):
            own = value.patterns is not PatternFusionPass.patterns
            complete = own and value.replacement is not PatternFusionPass.replacement
            decorator = "@register_fusion_pass"
        elif issubclass(value, DecomposePass):
            complete = value.replacement is not DecomposePass.replacement
            decorator = "@register_decompose_pass"
        else:
            complete = value.run is not FusionBasePass.run
            decorator = "@register_fusion_pass"
        if not complete:
            continue
        where = value.__ge_pass_source__
        warn_user(PassDefinitionWarning(
            f"{value.__name__} in {module.__file__} is never run: {plugin} registers no "
            f"pass, and {value.__name__} has no {decorator}(name=..., stage=...) (at {where})"),
            where)
        warned = True
    return warned


def _registers_operators(plugin: LoadedPlugin, module: ModuleType) -> bool:
    """Whether a plugin registered custom operators (`ge.ops.register_op`), which may be
    all it is for: its own, or those its module's body registered (kept as a library's),
    a submodule's too unless another loaded plugin holds them (its import made them)."""
    from ge.ops.registry import process_custom_ops

    name = module.__name__
    held = {id(op) for other in loaded_plugins() if other is not plugin
            for op in other.custom_ops}
    return bool(plugin.custom_ops) or any(
        op.module is not None and (op.module == name or (
            op.module.startswith(name + ".") and id(op) not in held))
        for op in process_custom_ops())


def warn_registers_nothing(plugin: LoadedPlugin, registered: Collection[SourceLocation]
                           ) -> None:
    """Warn of a plugin that registered no pass: at each complete pass class it defines
    without a decorator (`_warn_unregistered`); and, for an entry point, which names a
    plugin on purpose, also when it defines none and registered no custom operator either
    (a package whose `__init__` registers nothing, a callable returning None without
    registering): a `CompileWarning` naming the entry point and its distribution, as ge
    runs nothing of it (trial B: silent). A file of a pass path may be any module of a
    folder: it is not told."""
    module = plugin.module
    if plugin.descriptors or module is None:
        return
    installed = plugin.origin.kind == "entry_point"
    name = f"the plugin ({plugin.origin})" if installed else "the plugin"
    if (_warn_unregistered(module, registered, name) or not installed
            or _registers_operators(plugin, module)):
        return
    file = getattr(module, "__file__", None)
    warn_user(CompileWarning(
        f"{plugin.origin} registers no pass: importing module {module.__name__}"
        f"{f' ({file})' if file else ''} registered none, so ge runs nothing of it; an "
        f"entry point of group {ENTRY_POINT_GROUP} names the module whose import registers "
        "passes (@register_fusion_pass, @register_decompose_pass), or a callable that "
        "registers or returns them (or registers custom operators)"),
        SourceLocation(file) if file else None)


def discover_plugins(
    paths: Iterable[str | os.PathLike[str]] = (),
    *,
    entry_points: bool = True,
    disabled: Collection[str] = (),
    module_prefix: str = DEFAULT_MODULE_PREFIX,
    plugin_kind: str = DEFAULT_PLUGIN_KIND,
    copies: Callable[[LoadedPlugin], bool] | None = None,
    reached_as: str = "",
) -> PluginLoadReport:
    """Load the plugins of `paths` (in order), then the entry points; collect every failure.
    `reached_as` says how `paths` were given (`PluginSource.reached_as`), for messages.

    A missing path or a non-`.py` file is a configuration error raised before anything is
    imported (E13029 that is also FileNotFoundError / ValueError). Plugins that fail to
    import are rolled back and listed in `report.failures`; the others stay loaded. Each
    plugin is imported and published on its own: plugins loaded already are taken without
    waiting for another thread's import. A plugin file edited since a loaded plugin came
    from it is E13029, unless `copies(that plugin)` lets it load beside it.
    """
    items = [item.resolve() for item in given_paths(paths)]
    planned = [
        (item, [dataclasses.replace(source, reached_as=reached_as) for source in
                plugin_sources(item, module_prefix=module_prefix, plugin_kind=plugin_kind)])
        for item in items
    ]
    for item, sources in planned:
        if not sources and item.is_dir():  # GE loads nothing from it, and says nothing
            note = empty_folder_note(item)
            warn_user(PassPathWarning(
                f"{plugin_kind} path {item} names no plugin: only its *.py files and its "
                f"sub-folders with an __init__.py are loaded{f' ({note})' if note else ''}"),
                SourceLocation(str(item)))
    report = PluginLoadReport()
    importlib.invalidate_caches()  # (files written since the last import are found)
    try:
        for item, sources in planned:
            _load_sources(report, item, sources, copies)
        if entry_points:
            for ep in plugin_entry_points():
                if is_disabled(ep, disabled):
                    report.disabled.append(entry_point_id(ep))
                    continue
                try:
                    report.add(load_entry_point(ep))
                except GeError as err:
                    report.failures.append(err)
    except BaseException:
        # A Ctrl-C (or a signal handler's exception) between two plugins: the caller gets
        # no report to unload them by, so those imported so far are unloaded here, as after
        # a failed compilation (else a later load takes their modules for the user's own and
        # ignores an edit of the file: trial R).
        unload_plugins(report.imported)
        raise
    # after all of them: another plugin may register the class, or a copy of it (a plugin
    # importing another's file by name gets its own module of it)
    registered = {d.cls.__ge_pass_source__ for p in report.plugins for d in p.descriptors}
    for plugin in report.plugins:
        warn_registers_nothing(plugin, registered)
    return report


def warn_failures(report: PluginLoadReport) -> None:
    """One `PluginLoadWarning` per failed plugin (the continue-on-error path)."""
    for failure in report.failures:
        warn_user(PluginLoadWarning(f"python pass plugin skipped: {failure}"))


def load_pass_plugins(
    value: str | None = None,
    *,
    entry_points: bool = True,
    disabled: Collection[str] = (),
    continue_on_error: bool = False,
) -> list[ModuleType]:
    """Import the plugins named by `value` (default: `ASCEND_GE_PY_PASS_PATH`) and entry points.

    Empty or unset → nothing is loaded, entry points included (GE's rule). Failures are
    raised together after every plugin was tried, unless `continue_on_error`, which warns
    once per failed plugin instead.
    """
    if value is None:
        value = os.environ.get(ENV_PY_PASS_PATH, "")
    items = normalize_path_list(value)
    if not items:
        return []
    report = discover_plugins(items, entry_points=entry_points, disabled=disabled)
    error = report.error(disabled)
    if error is not None:
        if not continue_on_error:
            raise error
        warn_failures(report)
    return report.modules()


def scan_modules_from_path(
    item: str | os.PathLike[str],
    *,
    module_prefix: str = DEFAULT_MODULE_PREFIX,
    plugin_kind: str = DEFAULT_PLUGIN_KIND,
) -> list[ModuleType]:
    """Import the plugins of one pass-path item (a `.py` file or a directory) and return them."""
    report = discover_plugins(
        [item], entry_points=False, module_prefix=module_prefix, plugin_kind=plugin_kind
    )
    error = report.error()
    if error is not None:
        raise error
    return report.modules()


def get_registered_passes() -> list[dict[str, object]]:
    """The registered passes as plain dicts, as GE's bootstrap hands them to the engine
    (`ge.passes.get_registered_passes` gives the descriptors; spec §11.14)."""
    from ge.passes.registry import get_registered_pass_dicts

    return get_registered_pass_dicts()
