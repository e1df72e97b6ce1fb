"""Pass plugins of installed distributions: the entry-point group `ge.passes.plugins` (D12).

An entry point names a module (importing it registers its passes) or a callable (called
once; it may register passes itself or return registered pass classes). Entry points load
in the order of (distribution name, entry-point name), each isolated like a file, and any
of them can be disabled by name (`name` or `distribution:name`) before it is imported.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import sys
from collections.abc import Collection
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType

from ge.errors import PassRegisterTypeError, SourceLocation
from ge.passes.loader import (
    LOAD_LOCK,
    LoadedPlugin,
    PluginOrigin,
    descriptors_in_module,
    import_isolated,
    publish_plugin,
    reuse_cached,
    source_stamps,
)
from ge.passes.plugin_names import disables
from ge.passes.registry import PassDescriptor
from ge.passes.source import definition_location, hook_location

__all__ = [
    "ENTRY_POINT_GROUP",
    "entry_point_id",
    "entry_point_key",
    "is_disabled",
    "load_entry_point",
    "loaded_entry_point",
    "plugin_entry_points",
]

ENTRY_POINT_GROUP = "ge.passes.plugins"


def _distribution(ep: EntryPoint) -> tuple[str, str]:
    """The name and version of `ep`'s distribution, as its metadata reads now: when the
    metadata it was listed with went (an upgrade in the running process replaced it), the
    distribution installed now that has this entry point."""
    dist = getattr(ep, "dist", None)
    if dist is not None and dist.metadata["Name"] is None:
        dist = next((found.dist for found in entry_points(group=ENTRY_POINT_GROUP, name=ep.name)
                     if found.value == ep.value and found.dist is not None
                     and found.dist.metadata["Name"] is not None), None)
    if dist is None:
        return "<unknown>", "<unknown>"
    return str(dist.metadata["Name"]), str(dist.version)


def entry_point_id(ep: EntryPoint) -> str:
    """`distribution:name`, the unambiguous name of an entry point."""
    return f"{_distribution(ep)[0]}:{ep.name}"


def plugin_entry_points() -> list[EntryPoint]:
    """The installed entry points of the group, sorted by distribution, then entry name."""
    found = entry_points(group=ENTRY_POINT_GROUP)
    return sorted(found, key=lambda ep: (_distribution(ep)[0].lower(), ep.name))


def is_disabled(ep: EntryPoint, disabled: Collection[str]) -> bool:
    """Whether `ep` is disabled by its name or by `distribution:name` (the distribution in
    any spelling that normalises alike: `teamc_fusions:name` for `teamc-fusions`)."""
    return bool(disabled) and disables(disabled, ep.name, _distribution(ep)[0])


def _label(ep: EntryPoint) -> str:
    """`name = value (distribution version)`: how errors name an entry point."""
    return f"{ep.name} = {ep.value} ({' '.join(_distribution(ep))})"


def _registered(cls: type, ep: EntryPoint) -> PassDescriptor:
    descriptor = getattr(cls, "__ge_pass_descriptor__", None)
    if not isinstance(descriptor, PassDescriptor) or descriptor.cls is not cls:
        raise PassRegisterTypeError(
            f"entry point {_label(ep)} provides class {cls.__name__}, which is not a registered "
            "pass; decorate it with @register_fusion_pass or @register_decompose_pass",
            location=definition_location(cls),  # its class statement: where to decorate it
        )
    return descriptor


def _module_file(module: ModuleType | None) -> SourceLocation | None:
    """The file of the entry point's module (no line: the attribute has none), if any."""
    filename = getattr(module, "__file__", None)
    return SourceLocation(filename) if isinstance(filename, str) else None


def _callable_location(target: object, module: ModuleType | None) -> SourceLocation | None:
    """Where the callable `target` of an entry point is defined: its `def` line (its first
    decorator's; through `functools.wraps` wrappers and `functools.partial`), a callable
    object's `__call__`, else its module's file."""
    func = inspect.unwrap(target)  # type: ignore[arg-type]
    while isinstance(func, functools.partial):
        func = inspect.unwrap(func.func)
    location = hook_location(func)
    if location is None and not isinstance(func, type):
        location = hook_location(type(func).__call__)
    return location or _module_file(module)


def _resolve(ep: EntryPoint) -> tuple[ModuleType | None, list[PassDescriptor]]:
    """Import the entry point and apply it; returns its module and the passes it vouches for.

    What is not a pass is E13030 at the user's definition: a callable's `def` line for what
    it returned (`_callable_location`), an unregistered class's `class` line, the module's
    file for an attribute that is not callable."""
    from ge.passes.base import FusionBasePass

    target = ep.load()
    if isinstance(target, ModuleType):
        return target, descriptors_in_module(target)
    module = sys.modules.get(ep.module)
    if isinstance(target, type) and issubclass(target, FusionBasePass):
        return module, [_registered(target, ep)]
    if not callable(target):
        raise PassRegisterTypeError(
            f"entry point {_label(ep)} names neither a module nor a callable",
            location=_module_file(module),
        )
    result = target()
    if result is None:
        return module, []
    where = _callable_location(target, module)
    if isinstance(result, (str, bytes)) or not hasattr(result, "__iter__"):
        raise PassRegisterTypeError(
            f"entry point {_label(ep)} returned {type(result).__name__}; expected None or an "
            "iterable of registered pass classes",
            location=where,
        )
    descriptors = []
    for item in result:
        if not (isinstance(item, type) and issubclass(item, FusionBasePass)):
            raise PassRegisterTypeError(
                f"entry point {_label(ep)} returned {item!r}; expected registered pass classes",
                location=where,
            )
        descriptors.append(_registered(item, ep))
    return module, descriptors


def entry_point_key(ep: EntryPoint) -> str:
    """The key `ep` is cached and imported under (`LOAD_LOCK.importing`)."""
    return f"entry_point:{entry_point_id(ep)}:{ep.value}"


def loaded_entry_point(ep: EntryPoint) -> LoadedPlugin | None:
    """The plugin of `ep` if it is loaded already (its passes registered again where a
    clear removed them), else None; never waits for an import."""
    return reuse_cached(entry_point_key(ep))


def load_entry_point(ep: EntryPoint) -> LoadedPlugin:
    """Load one entry point in isolation; loading it again re-registers what a clear removed.

    One loaded already is taken without waiting for an import in progress elsewhere; a
    new one is imported holding `LOAD_LOCK` shared (several entry points may import at
    once, one of them never twice at once) and published with its passes in one step."""
    key = entry_point_key(ep)
    cached = reuse_cached(key)
    if cached is not None:
        return cached
    dist_name, version = _distribution(ep)
    with LOAD_LOCK.importing(key, exclusive=False):
        cached = reuse_cached(key)  # (the import waited for may have been this one)
        if cached is not None:
            return cached
        origin = PluginOrigin("entry_point", entry_point=f"{ep.name} = {ep.value}",
                              distribution=dist_name, version=version)
        return _import_and_publish(ep, key, f"entry point {origin.entry_point} "
                                   f"({dist_name} {version})", origin)


def _import_and_publish(ep: EntryPoint, key: str, target: str,
                        origin: PluginOrigin) -> LoadedPlugin:
    """Import entry point `ep` in isolation and publish it (under `LOAD_LOCK`)."""
    imported = import_isolated(lambda: _resolve(ep), target=target, origin=origin)
    origin = dataclasses.replace(origin, path=getattr(imported.module, "__file__", None))
    # (its passes' files as imported: an editable install's edit is told, not run)
    files = [sys.modules.get(d.cls.__module__) for d in imported.descriptors]
    plugin = LoadedPlugin(origin, imported.module, imported.descriptors,
                          custom_ops=imported.custom_ops,
                          stamps=source_stamps([imported.module, *files]))
    publish_plugin(key, plugin, target, imported.library_ops)
    return plugin
