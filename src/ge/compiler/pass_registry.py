"""The compiler's `PassRegistry`: built-in and plugin passes side by side, with their origin.

Python plugins register into `ge.passes`' registry; the compiler takes the descriptors of the
plugins it loaded, beside its built-in passes, and records where each came from (file and
line, entry point with distribution and version, or built-in) for errors and `ge passes list`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from ge.errors import DuplicatePassNameError, SourceLocation
from ge.passes.loader import LoadedPlugin, PluginOrigin
from ge.passes.registry import PassDescriptor, build_descriptor
from ge.passes.stage import PassStage

__all__ = [
    "PassOrigin",
    "PassRegistry",
    "RegisteredPass",
    "builtin_pass",
    "builtin_passes",
]

_PassT = TypeVar("_PassT", bound=type)


@dataclass(frozen=True)
class PassOrigin:
    """Where a pass came from: "builtin", a plugin file or package, or an entry point."""

    kind: str  # "builtin" | "module" | "package" | "entry_point"
    location: SourceLocation | None = None
    entry_point: str | None = None
    distribution: str | None = None
    version: str | None = None

    @classmethod
    def of_plugin(cls, plugin: PluginOrigin, location: SourceLocation) -> PassOrigin:
        return cls(plugin.kind, location, plugin.entry_point, plugin.distribution, plugin.version)

    def __str__(self) -> str:
        if self.kind == "builtin":
            return "built-in"
        if self.kind == "entry_point":
            where = f" at {self.location}" if self.location else ""
            return f"entry point {self.entry_point} ({self.distribution} {self.version}){where}"
        return str(self.location)

    def as_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "file": self.location.file if self.location else None,
            "line": self.location.line if self.location else None,
            "entry_point": self.entry_point,
            "distribution": self.distribution,
            "version": self.version,
        }


@dataclass(frozen=True)
class RegisteredPass:
    """A pass the compiler can schedule: its descriptor and its origin."""

    descriptor: PassDescriptor
    origin: PassOrigin

    @property
    def name(self) -> str:
        return self.descriptor.pass_name

    @property
    def stage(self) -> PassStage:
        return self.descriptor.stage


class PassRegistry:
    """Passes by name; built-in and plugin passes share one namespace (a clash is E13030)."""

    def __init__(self, passes: Iterable[RegisteredPass] = ()) -> None:
        self._lock = threading.Lock()
        self._passes: dict[str, RegisteredPass] = {}
        for entry in passes:
            self.add(entry)

    @classmethod
    def with_builtins(cls) -> PassRegistry:
        """A registry holding the compiler's built-in passes."""
        return cls(RegisteredPass(d, PassOrigin("builtin", d.location)) for d in builtin_passes())

    def add(self, entry: RegisteredPass) -> None:
        """Add one pass; the same descriptor again is a no-op, another of that name E13030."""
        with self._lock:
            if self._check(entry):
                self._passes[entry.name] = entry

    def add_plugin(self, plugin: LoadedPlugin) -> None:
        """Add every pass of a loaded plugin, or none of them if one name clashes."""
        entries = [
            RegisteredPass(d, PassOrigin.of_plugin(plugin.origin, d.location))
            for d in plugin.descriptors
        ]
        with self._lock:
            new = [entry for entry in entries if self._check(entry)]
            for entry in new:
                self._passes[entry.name] = entry

    def _check(self, entry: RegisteredPass) -> bool:
        """True if `entry` is new, False if it is already here; E13030 if its name is taken."""
        known = self._passes.get(entry.name)
        if known is None:
            return True
        if known.descriptor is entry.descriptor:
            return False
        raise DuplicatePassNameError(
            f"python pass name already exists: {entry.name}; "
            f"{entry.descriptor.class_name} ({entry.origin}) reuses the name of "
            f"{known.descriptor.class_name} ({known.origin})",
            previous_location=known.descriptor.location,
            pass_name=entry.name,
            stage=entry.stage.value,
            location=entry.descriptor.location,
        )

    def copy(self) -> PassRegistry:
        return PassRegistry(self.passes())

    def passes(self) -> list[RegisteredPass]:
        """Every pass, in the order they were added (built-ins first)."""
        with self._lock:
            return list(self._passes.values())

    def for_stage(self, stage: PassStage) -> list[RegisteredPass]:
        """The passes of `stage` in GE's order: lexicographic by pass name."""
        return sorted((p for p in self.passes() if p.stage is stage), key=lambda p: p.name)

    def get(self, name: str) -> RegisteredPass | None:
        with self._lock:
            return self._passes.get(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __iter__(self) -> Iterator[RegisteredPass]:
        return iter(self.passes())

    def __len__(self) -> int:
        with self._lock:
            return len(self._passes)


# --- built-in passes -----------------------------------------------------------------------

_BUILTINS: list[PassDescriptor] = []
_BUILTINS_LOCK = threading.Lock()


def builtin_pass(
    *, name: str, stage: PassStage | str, kind: str | None = None
) -> Callable[[_PassT], _PassT]:
    """Declare a built-in pass (written with the public pass API) of the compiler.

    Built-in passes are not put into `ge.passes`' plugin registry; every `PassRegistry`
    created by `PassRegistry.with_builtins()` holds them.
    """

    def decorator(cls: _PassT) -> _PassT:
        descriptor = build_descriptor(cls, name=name, stage=stage, kind=kind)
        with _BUILTINS_LOCK:
            if any(d.pass_name == descriptor.pass_name for d in _BUILTINS):
                raise DuplicatePassNameError(
                    f"python pass name already exists: {name}",
                    pass_name=name,
                    location=descriptor.location,
                )
            _BUILTINS.append(descriptor)
        return cls

    return decorator


def builtin_passes() -> list[PassDescriptor]:
    """The compiler's built-in passes (later issues add them with `@builtin_pass`)."""
    with _BUILTINS_LOCK:
        return list(_BUILTINS)
