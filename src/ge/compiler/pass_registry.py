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

from ge.errors import DuplicatePassNameError, GeError, SourceLocation
from ge.passes.loader import (
    LoadedPlugin,
    PluginOrigin,
    leave_installed_out_hint,
    unregister_hint,
)
from ge.passes.plugin_names import clash_hint
from ge.passes.registry import PassDescriptor, build_descriptor
from ge.passes.stage import PassStage

__all__ = [
    "BUILTIN_ORIGIN",
    "BUILTIN_STEPS",
    "BuiltinSpec",
    "PassOrigin",
    "PassRegistry",
    "RegisteredPass",
    "builtin_entries",
    "builtin_pass",
    "builtin_passes",
]

_PassT = TypeVar("_PassT", bound=type)


#: How a built-in pass's origin reads (`str(PassOrigin)`, `PassRunRecord.origin`).
BUILTIN_ORIGIN = "built-in"


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

    def of_plugin_origin(self) -> PluginOrigin:
        """The plugin origin this pass origin was made from (`of_plugin`)."""
        return PluginOrigin(self.kind, self.location.file if self.location else None,
                            self.entry_point, self.distribution, self.version)

    def __str__(self) -> str:
        if self.kind == "builtin":
            return BUILTIN_ORIGIN
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
    step: str | None = None  # the engine step of a built-in pass that runs in one
    # A built-in pass with nothing to do unless the graph has a node of one of these types:
    # skipped (not changed) on a graph without, before its patterns are even built.
    requires: frozenset[str] = frozenset()
    also_in: frozenset[str] = frozenset()  # further engine steps that run it (see builtin_pass)
    # False: a built-in pass that runs only when a compilation enables it (`enable=`)
    on_by_default: bool = True

    @property
    def name(self) -> str:
        return self.descriptor.pass_name

    @property
    def builtin(self) -> bool:
        """A pass of the compiler's own, not a plugin's (most run in an engine step, `step`;
        one may run at a plugin stage, its `step` None, as plugins do)."""
        return self.origin.kind == "builtin"

    @property
    def stage(self) -> PassStage:
        return self.descriptor.stage

    @property
    def stage_label(self) -> str:
        """Where the pass runs, as reports and errors name it (a stage or an engine step)."""
        return BUILTIN_STEPS[self.step] if self.step else self.descriptor.stage.value


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
        return cls(builtin_entries())

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

    def clashes(self, plugins: Iterable[LoadedPlugin]) -> list[GeError]:
        """The E13030 errors adding `plugins` in order would raise, one per plugin that
        clashes (nothing is added): what a failing load says beside its own failures, so
        that a plugin taking a built-in's name is told with the others (trial V: three
        plugins named ConstantFolding were "2 failed to register", the second and third
        against the first, not the first against the built-in)."""
        trial = self.copy()
        found = []
        for plugin in plugins:
            try:
                trial.add_plugin(plugin)
            except GeError as err:
                found.append(err)
        return found

    def _check(self, entry: RegisteredPass) -> bool:
        """True if `entry` is new, False if it is already here; E13030 if its name is taken."""
        known = self._passes.get(entry.name)
        if known is None:
            return True
        if known.descriptor is entry.descriptor:
            return False
        installed = next((e.origin for e in (known, entry) if e.origin.kind == "entry_point"),
                         None)
        in_process = next((e for e in (known, entry) if e.origin.kind == "in_process"), None)
        if known.builtin or entry.builtin:
            # A pass's name is how --disable, --enable, the fusion switch file, dump levels
            # and reports name it: a plugin pass may not take a built-in's, even where the
            # built-in is off (--no-builtin, --disable), nor can disabled_plugins help.
            hint = ("; a plugin pass may not take the name of a built-in pass (names are how "
                    "--disable, --enable, the fusion switch file and reports tell passes "
                    "apart), with the built-in turned off too: rename your pass")
            if installed is not None and installed.entry_point:  # (not the user's to rename)
                hint += leave_installed_out_hint(installed.entry_point, installed.distribution)
        else:
            hint = (clash_hint((entry.descriptor.class_name, entry.origin.of_plugin_origin()),
                               (known.descriptor.class_name, known.origin.of_plugin_origin()))
                    or (leave_installed_out_hint(installed.entry_point, installed.distribution)
                        if installed is not None and installed.entry_point
                        else unregister_hint(in_process.descriptor) if in_process is not None
                        else ""))
        raise DuplicatePassNameError(
            f"python pass name already exists: {entry.name}; "
            f"{entry.descriptor.class_name} ({entry.origin}) reuses the name of "
            f"{known.descriptor.class_name} ({known.origin}){hint}",
            previous_location=known.descriptor.location,
            class_name=entry.descriptor.class_name,
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
        return sorted((p for p in self.passes() if p.step is None and p.stage is stage),
                      key=lambda p: p.name)

    def for_step(self, step: str) -> list[RegisteredPass]:
        """The built-in passes of an engine step (their own, or one they also run in), in
        their declared order."""
        return [p for p in self.passes() if p.step == step or step in p.also_in]

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

#: The engine steps built-in passes can belong to, with the stage label reports show.
BUILTIN_STEPS: dict[str, str] = {
    "builtin_fusion": "BuiltinFusion",
    "origin_graph_optimize": "OriginGraphOptimize",
}
#: The plugin stage each engine step is followed by (the stage built-in descriptors carry).
_STAGE_AFTER_STEP = {
    "builtin_fusion": PassStage.AFTER_BUILTIN_FUSION_PASS,
    "origin_graph_optimize": PassStage.AFTER_ORIGIN_GRAPH_OPTIMIZE,
}


@dataclass(frozen=True)
class BuiltinSpec:
    """How a built-in pass class is scheduled: its name, its step and its kind."""

    name: str
    step: str  # a key of BUILTIN_STEPS, or a PassStage value
    kind: str | None = None
    requires: tuple[str, ...] = ()  # op types (default domain), see RegisteredPass.requires
    also_in: tuple[str, ...] = ()  # further engine steps, see RegisteredPass.also_in
    on_by_default: bool = True  # see RegisteredPass.on_by_default


def builtin_pass(
    *, name: str, step: str, kind: str | None = None, requires: Iterable[str] = (),
    also_in: Iterable[str] = (), on_by_default: bool = True
) -> Callable[[_PassT], _PassT]:
    """Mark a class (written with the public pass API) as a built-in pass of the compiler.

    `step` is an engine step (`"builtin_fusion"`, `"origin_graph_optimize"`) or a plugin
    stage. Marking registers nothing: `ge.compiler.builtin.BUILTIN_PASSES` lists the
    built-in classes in run order, and every `PassRegistry.with_builtins()` holds them.
    `requires` names op types one of which every match contains (a fusion of `Conv` nodes:
    `("Conv",)`): on a graph with none of them the pass is not run at all. `also_in` names
    further engine steps that run it too, at its place in `BUILTIN_PASSES` (the fusions
    also run in the origin-graph rounds); its records there carry that step's label.
    `on_by_default=False` makes a pass that runs only when a compilation enables it by name
    (a fusion into an operator onnxruntime has no kernel for makes models slower there).
    """
    if step not in BUILTIN_STEPS and step not in {s.value for s in PassStage}:
        raise ValueError(f"unknown step {step!r} for built-in pass {name!r}")
    further = tuple(also_in)
    unknown = [s for s in further if s not in BUILTIN_STEPS]
    if unknown:
        raise ValueError(f"unknown engine step(s) {unknown} for built-in pass {name!r}")

    def decorator(cls: _PassT) -> _PassT:
        cls.__ge_builtin__ = BuiltinSpec(  # type: ignore[attr-defined]
            name, step, kind, tuple(requires), further, on_by_default)
        return cls

    return decorator


def builtin_entries(classes: Iterable[type] | None = None) -> list[RegisteredPass]:
    """Registry entries for built-in pass classes (default: `BUILTIN_PASSES`, in order)."""
    if classes is None:
        from ge.compiler.builtin import BUILTIN_PASSES

        classes = BUILTIN_PASSES
    entries = []
    for cls in classes:
        spec: BuiltinSpec = cls.__ge_builtin__  # type: ignore[attr-defined]
        stage = _STAGE_AFTER_STEP.get(spec.step) or PassStage(spec.step)
        api = "register_fusion_pass"
        if spec.kind == "decompose":
            api = "register_decompose_pass"
        descriptor = build_descriptor(cls, name=spec.name, stage=stage, kind=spec.kind, api=api)
        step = spec.step if spec.step in BUILTIN_STEPS else None
        entries.append(RegisteredPass(descriptor, PassOrigin("builtin", descriptor.location),
                                      step=step, requires=frozenset(spec.requires),
                                      also_in=frozenset(spec.also_in),
                                      on_by_default=spec.on_by_default))
    return entries


def builtin_passes() -> list[PassDescriptor]:
    """The descriptors of the compiler's built-in passes, in run order."""
    return [entry.descriptor for entry in builtin_entries()]
