"""The registry of Python passes: descriptors, the registering decorators and the look-ups.

`@register_fusion_pass` / `@register_decompose_pass` validate their arguments (D11), build a
`PassDescriptor` and add it to a process-wide, thread-safe registry; the compiler takes the
descriptors from here. Every bad registration is an E13030 error naming the user's file and
line; a duplicate name names both definitions.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeVar

from ge.errors import (
    DuplicatePassNameError,
    PassRegisterError,
    PassRegisterTypeError,
    SourceLocation,
)
from ge.ops.ascend import ASCEND_OP_TYPES
from ge.passes.decorator_arguments import checked_arguments
from ge.passes.source import caller_location, definition_location, warn_user
from ge.passes.stage import PassStage

if TYPE_CHECKING:
    from ge.passes.base import FusionBasePass

__all__ = [
    "PASS_KINDS",
    "PASS_KIND_DECOMPOSE",
    "PASS_KIND_FUSION_BASE",
    "PASS_KIND_PATTERN_FUSION",
    "PassDescriptor",
    "build_descriptor",
    "capture_registrations",
    "clear_registered_passes",
    "ensure_registered",
    "get_registered_pass_by_descriptor_key",
    "get_registered_pass_by_name",
    "get_registered_pass_dicts",
    "get_registered_passes",
    "publish_registrations",
    "register_decompose_pass",
    "register_fusion_pass",
    "registrations_aside",
    "unregister_passes",
]

PASS_KIND_FUSION_BASE: Final = "fusion_base"
PASS_KIND_PATTERN_FUSION: Final = "pattern_fusion"
PASS_KIND_DECOMPOSE: Final = "decompose"
PASS_KINDS: Final = (PASS_KIND_FUSION_BASE, PASS_KIND_PATTERN_FUSION, PASS_KIND_DECOMPOSE)

_PassT = TypeVar("_PassT", bound=type)


@dataclass(frozen=True)
class PassDescriptor:
    """Everything the engine needs to create and schedule one registered pass."""

    descriptor_key: str
    pass_name: str
    module_name: str
    class_name: str
    stage: PassStage
    kind: str
    cls: type[FusionBasePass]
    op_types: list[str] = field(default_factory=list, hash=False)

    def to_bridge_dict(self) -> dict[str, object]:
        """The descriptor as plain data (no class object), as GE hands it to the engine."""
        return {
            "descriptor_key": self.descriptor_key,
            "pass_name": self.pass_name,
            "module_name": self.module_name,
            "class_name": self.class_name,
            "stage": self.stage.value,
            "kind": self.kind,
            "op_types": list(self.op_types),
        }

    @property
    def location(self) -> SourceLocation:
        """Where the pass class is defined."""
        return definition_location(self.cls)


class _Registry:
    """Descriptors indexed by key and by name, in registration order; safe across threads.

    Inside `aside()` a thread's registrations go to a table of its own (`_Aside`), checked
    against the process-wide one and those of the blocks it is nested in; `publish()` moves
    a finished import's registrations to the table of the enclosing block, or the
    process-wide one, in one step.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._by_key: dict[str, PassDescriptor] = {}
        self._by_name: dict[str, PassDescriptor] = {}
        self._local = threading.local()

    def _aside(self) -> _Aside | None:
        aside: _Aside | None = getattr(self._local, "aside", None)
        return aside

    @staticmethod
    def _blocks(aside: _Aside | None) -> Iterator[_Aside]:
        while aside is not None:
            yield aside
            aside = aside.outer

    def _lookup(self, aside: _Aside | None, by_name: bool, value: str) -> PassDescriptor | None:
        """The registration of a key (or name) this thread sees (under the lock): its
        blocks' tables innermost first, then the process-wide one but what they ignore."""
        for block in self._blocks(aside):
            found = (block.by_name if by_name else block.by_key).get(value)
            if found is not None:
                return found
        found = (self._by_name if by_name else self._by_key).get(value)
        if found is not None and aside is not None and id(found) in aside.ignoring:
            return None
        return found

    def _has(self, aside: _Aside | None, descriptor: PassDescriptor) -> bool:
        """Whether `descriptor` itself is registered where this thread looks (ignored or not)."""
        key = descriptor.descriptor_key
        return self._by_key.get(key) is descriptor or any(
            block.by_key.get(key) is descriptor for block in self._blocks(aside))

    def _check(self, aside: _Aside | None, descriptor: PassDescriptor) -> None:
        earlier = self._lookup(aside, False, descriptor.descriptor_key)
        if earlier is not None:
            raise _duplicate_key_error(descriptor, earlier)
        previous = self._lookup(aside, True, descriptor.pass_name)
        if previous is not None:
            raise _duplicate_name_error(descriptor, previous)

    def _store(self, aside: _Aside | None, descriptor: PassDescriptor) -> None:
        by_key, by_name = ((aside.by_key, aside.by_name) if aside is not None
                           else (self._by_key, self._by_name))
        by_key[descriptor.descriptor_key] = descriptor
        by_name[descriptor.pass_name] = descriptor

    def add(self, descriptor: PassDescriptor) -> None:
        aside = self._aside()
        with self._lock:
            self._check(aside, descriptor)
            self._store(aside, descriptor)
        for captured in getattr(self._local, "captures", ()):
            captured.append(descriptor)

    def ensure(self, descriptor: PassDescriptor) -> None:
        with self._lock:
            if not self._has(self._aside(), descriptor):
                self.add(descriptor)

    def publish(self, descriptors: Iterable[PassDescriptor]) -> None:
        """Register `descriptors` where this thread registers now, all or none: those
        registered there already are left as they are; the first clash raises."""
        aside = self._aside()
        with self._lock:
            new = [d for d in descriptors if not self._has(aside, d)]
            for index, descriptor in enumerate(new):
                self._check(aside, descriptor)
                for other in new[:index]:
                    if other.pass_name == descriptor.pass_name:
                        raise _duplicate_name_error(descriptor, other)
            for descriptor in new:
                self._store(aside, descriptor)

    def remove(self, descriptors: Iterable[PassDescriptor]) -> None:
        tables = [(self._by_key, self._by_name)]
        tables += [(block.by_key, block.by_name) for block in self._blocks(self._aside())]
        with self._lock:
            for descriptor in descriptors:
                for by_key, by_name in tables:
                    if by_key.get(descriptor.descriptor_key) is descriptor:
                        del by_key[descriptor.descriptor_key]
                        del by_name[descriptor.pass_name]

    @contextmanager
    def aside(self, ignoring: Iterable[PassDescriptor] = ()) -> Iterator[None]:
        """Registrations of this thread inside the block go to a table of their own (checked
        against the process-wide one, but `ignoring`, and those of the enclosing blocks;
        never added to it), dropped at the end: a plugin's while it imports, a
        compilation's own plugins, which other threads must not see. `capture()` collects
        them as usual."""
        outer = self._aside()
        self._local.aside = _Aside(outer, ignoring)
        try:
            yield
        finally:
            self._local.aside = outer

    def clear(self) -> None:
        with self._lock:
            self._by_key.clear()
            self._by_name.clear()

    def all(self) -> list[PassDescriptor]:
        with self._lock:
            return list(self._by_key.values())

    def by_key(self, key: str) -> PassDescriptor | None:
        with self._lock:
            return self._by_key.get(key)

    def by_name(self, name: str) -> PassDescriptor | None:
        with self._lock:
            return self._by_name.get(name)

    @contextmanager
    def capture(self) -> Iterator[list[PassDescriptor]]:
        stack: list[list[PassDescriptor]] = self._local.__dict__.setdefault("captures", [])
        captured: list[PassDescriptor] = []
        stack.append(captured)
        try:
            yield captured
        finally:
            # By identity: nested captures of the same registrations are equal lists.
            for index in range(len(stack) - 1, -1, -1):
                if stack[index] is captured:
                    del stack[index]
                    break


class _Aside:
    """The registrations a thread makes inside `_Registry.aside()`: `outer` is the block it
    is nested in, `ignoring` the ids of process-wide registrations it treats as absent
    (with those of the enclosing blocks)."""

    def __init__(self, outer: _Aside | None, ignoring: Iterable[PassDescriptor]) -> None:
        self.outer = outer
        self.by_key: dict[str, PassDescriptor] = {}
        self.by_name: dict[str, PassDescriptor] = {}
        self._ignored = tuple(ignoring)  # (held, so that their ids stay theirs)
        self.ignoring: frozenset[int] = frozenset(id(d) for d in self._ignored) | (
            outer.ignoring if outer is not None else frozenset())


def _duplicate_key_error(new: PassDescriptor, old: PassDescriptor) -> PassRegisterError:
    """GE's error for a key registered twice, saying where the first one is and, when a
    definition ran again (a notebook cell run again, `importlib.reload`), how to redo it."""
    key = new.descriptor_key
    if new.cls is old.cls:
        how = f"class {new.class_name} is registered under this name already"
    else:
        how = (f"first registered by the definition at {old.location}; running a definition "
               "again (a notebook cell, importlib.reload) registers it again: unregister the "
               "first before, with ge.passes.registry.unregister_passes("
               f"[ge.passes.get_registered_pass_by_descriptor_key({key!r})])")
    return PassRegisterError(
        f"python pass descriptor_key already exists: {key}; {how}",
        pass_name=new.pass_name,
        stage=new.stage.value,
        location=new.location,
    )


def _duplicate_name_error(new: PassDescriptor, old: PassDescriptor) -> DuplicatePassNameError:
    return DuplicatePassNameError(
        f"python pass name already exists: {new.pass_name}; {new.class_name} at {new.location} "
        f"reuses the name of {old.class_name} at {old.location}",
        previous_location=old.location,
        class_name=new.class_name,
        pass_name=new.pass_name,
        stage=new.stage.value,
        location=new.location,
    )


_REGISTRY = _Registry()


# --- validation ------------------------------------------------------------------------


def _check_name(api: str, name: object, where: SourceLocation | None) -> str:
    if not isinstance(name, str):
        raise PassRegisterTypeError(
            f"{api} name must be a non-empty string, got {type(name).__name__}", location=where
        )
    if not name.strip():
        raise PassRegisterError(f"{api} name must be a non-empty string", location=where)
    return name


def _check_stage(api: str, stage: object, name: str, where: SourceLocation | None) -> PassStage:
    if isinstance(stage, PassStage):
        return stage
    values = ", ".join(s.value for s in PassStage)
    if not isinstance(stage, str):
        raise PassRegisterTypeError(
            f"{api} stage must be a PassStage or one of its values ({values}), "
            f"got {type(stage).__name__}",
            pass_name=name,
            location=where,
        )
    try:
        return PassStage(stage)
    except ValueError:
        raise PassRegisterError(
            f"{api} stage must be a PassStage or one of its values ({values}), got {stage!r}",
            pass_name=name,
            location=where,
        ) from None


def _check_op_types(op_types: object, name: str, where: SourceLocation | None) -> list[str]:
    api = "register_decompose_pass"
    if isinstance(op_types, (str, bytes)) or not isinstance(op_types, Iterable):
        raise PassRegisterTypeError(
            f"{api} op_types must be an iterable of strings", pass_name=name, location=where
        )
    items = list(op_types)
    if not items:
        raise PassRegisterError(f"{api} requires at least one op type", pass_name=name,
                                location=where)
    if not all(isinstance(item, str) and item for item in items):
        raise PassRegisterTypeError(
            f"{api} op_types must contain non-empty strings", pass_name=name, location=where
        )
    for item in items:
        domain, dot, op_type = item.rpartition(".")
        if dot and not (domain and op_type):
            raise PassRegisterError(
                f"{api} op type {item!r} is neither an operator's name nor 'domain.OpType' "
                "(a domain, a dot, the operator's name)", pass_name=name, location=where)
        if not dot:
            _warn_foreign_op_type(item, name, where)
    return items


@functools.cache
def _onnx_names_by_case() -> dict[str, str]:
    """ONNX's operator names by their lower-case spelling (read once: onnx's schemas do
    not change in a process)."""
    import onnx.defs

    return {schema.name.lower(): schema.name for schema in onnx.defs.get_all_schemas()
            if schema.domain in ("", "ai.onnx")}


def _warn_foreign_op_type(op_type: str, name: str, where: SourceLocation | None) -> None:
    """A `PassDefinitionWarning` for an op type no node of a ge graph has although an ONNX
    operator of another spelling exists: an Ascend name (`Conv2D` for `Conv`) or ONNX's in
    another case (`relu`). The pass would silently never run. Any other name may be a
    custom operator's, so it is left alone."""

    import onnx.defs

    from ge.errors import PassDefinitionWarning

    if onnx.defs.has(op_type):
        return
    onnx_name = ASCEND_OP_TYPES.get(op_type)
    if onnx_name is None:
        onnx_name = _onnx_names_by_case().get(op_type.lower())
        if onnx_name is None:
            return
        why = f"ONNX's operator is spelt {onnx_name!r}"
    else:
        why = (f"that is an Ascend operator, and ge's graphs hold ONNX operators: "
               f"GE's {op_type} is ONNX's {onnx_name!r}")
    at = f" (at {where})" if where is not None else ""
    warn_user(PassDefinitionWarning(
        f"pass {name}: op_types names {op_type!r}, which no node has: {why}; write "
        f"op_types=[{onnx_name!r}]{at}"), where or SourceLocation("<unknown>", 0))


def _default_kind(cls: type) -> str:
    from ge.passes.base import DecomposePass, PatternFusionPass

    if issubclass(cls, DecomposePass):
        return PASS_KIND_DECOMPOSE
    if issubclass(cls, PatternFusionPass):
        return PASS_KIND_PATTERN_FUSION
    return PASS_KIND_FUSION_BASE


def _check_kind(api: str, kind: object, name: str, where: SourceLocation | None) -> str | None:
    if kind is None:
        return None
    if not isinstance(kind, str) or kind not in PASS_KINDS:
        raise PassRegisterError(
            f"{api} kind must be one of {', '.join(PASS_KINDS)}, got {kind!r}",
            pass_name=name,
            location=where,
        )
    return kind


def build_descriptor(
    cls: type,
    *,
    name: str,
    stage: PassStage | str,
    kind: str | None = None,
    op_types: Iterable[str] | None = None,
    api: str = "register_fusion_pass",
) -> PassDescriptor:
    """Validate a pass class and its registration arguments and describe it, without registering.

    The decorators use it; the compiler uses it for its built-in passes.
    """
    from ge.passes.base import DecomposePass, FusionBasePass, PatternFusionPass

    where = caller_location()
    name = _check_name(api, name, where)
    stage = _check_stage(api, stage, name, where)
    checked_kind = _check_kind(api, kind, name, where)
    base = DecomposePass if api == "register_decompose_pass" else FusionBasePass
    is_base = cls in (FusionBasePass, PatternFusionPass, DecomposePass)
    if not (isinstance(cls, type) and issubclass(cls, base)) or is_base:
        raise PassRegisterTypeError(
            f"{api} expects a {base.__name__} subclass", pass_name=name, location=where
        )
    where = definition_location(cls)
    actual_kind = _default_kind(cls)
    if api == "register_fusion_pass" and actual_kind == PASS_KIND_DECOMPOSE:
        raise PassRegisterTypeError(
            f"register_fusion_pass cannot register DecomposePass subclass {cls.__name__}; "
            "use register_decompose_pass",
            pass_name=name,
            location=where,
        )
    if checked_kind is not None and checked_kind != actual_kind:
        raise PassRegisterError(
            f"{api} kind {checked_kind!r} does not match {cls.__name__}, which is a "
            f"{actual_kind!r} pass",
            pass_name=name,
            location=where,
        )
    return PassDescriptor(
        descriptor_key=f"{cls.__module__}:{cls.__name__}:{name}",
        pass_name=name,
        module_name=cls.__module__,
        class_name=cls.__name__,
        stage=stage,
        kind=actual_kind,
        cls=cls,
        op_types=list(op_types or ()),
    )


# --- decorators ------------------------------------------------------------------------

@checked_arguments
def register_fusion_pass(
    *, name: str, stage: PassStage | str, kind: str | None = None
) -> Callable[[_PassT], _PassT]:
    """Register a `FusionBasePass` / `PatternFusionPass` subclass under `name` at `stage`.

    `kind` defaults to "pattern_fusion" for `PatternFusionPass` subclasses and "fusion_base"
    otherwise; an explicit kind must agree with the class.
    """
    where = caller_location()
    _check_name("register_fusion_pass", name, where)
    _check_stage("register_fusion_pass", stage, name, where)
    _check_kind("register_fusion_pass", kind, name, where)

    def decorator(cls: _PassT) -> _PassT:
        descriptor = build_descriptor(cls, name=name, stage=stage, kind=kind)
        _REGISTRY.add(descriptor)
        cls.__ge_pass_descriptor__ = descriptor  # type: ignore[attr-defined]
        return cls

    return decorator


@checked_arguments
def register_decompose_pass(
    *, name: str, stage: PassStage | str, op_types: Iterable[str]
) -> Callable[[_PassT], _PassT]:
    """Register a `DecomposePass` subclass that replaces nodes of `op_types` at `stage`."""
    api = "register_decompose_pass"
    where = caller_location()
    _check_name(api, name, where)
    _check_stage(api, stage, name, where)
    types_list = _check_op_types(op_types, name, where)

    def decorator(cls: _PassT) -> _PassT:
        descriptor = build_descriptor(cls, name=name, stage=stage, op_types=types_list, api=api)
        _REGISTRY.add(descriptor)
        # GE sets the class attribute; the engine reads the descriptor's list, so a class
        # registered twice keeps both registrations' types (the attribute: the first).
        if "op_types" not in cls.__dict__:
            cls.op_types = list(types_list)  # type: ignore[attr-defined]
        cls.__ge_pass_descriptor__ = descriptor  # type: ignore[attr-defined]
        return cls

    return decorator


# --- look-ups ----------------------------------------------------------------------------


def get_registered_passes() -> list[PassDescriptor]:
    """Every registered descriptor, in registration order."""
    return _REGISTRY.all()


def get_registered_pass_dicts() -> list[dict[str, Any]]:
    """Every registered descriptor as `to_bridge_dict()` data, in registration order."""
    return [d.to_bridge_dict() for d in _REGISTRY.all()]


def get_registered_pass_by_descriptor_key(descriptor_key: str) -> PassDescriptor | None:
    """The descriptor registered under `descriptor_key`, or None."""
    return _REGISTRY.by_key(descriptor_key)


def get_registered_pass_by_name(pass_name: str) -> PassDescriptor | None:
    """The descriptor registered under `pass_name`, or None."""
    return _REGISTRY.by_name(pass_name)


def clear_registered_passes() -> None:
    """Forget every registration (modules stay imported)."""
    _REGISTRY.clear()


def ensure_registered(descriptor: PassDescriptor) -> None:
    """Register `descriptor` again if it is missing (after a clear); a no-op if present."""
    _REGISTRY.ensure(descriptor)


def unregister_passes(descriptors: Iterable[PassDescriptor]) -> None:
    """Remove exactly these descriptors (a different one under the same key stays)."""
    _REGISTRY.remove(descriptors)


def registrations_aside(ignoring: Iterable[PassDescriptor] = ()
                        ) -> AbstractContextManager[None]:
    """Context manager keeping the passes this thread registers inside it out of the
    process-wide registry (checked against it, not added): a plugin while it imports, the
    plugins of one compilation's pass paths, which concurrent compilations and code
    registering passes of its own must not see. Registrations in `ignoring` (those of the
    installed plugins a compilation leaves out) do not clash with them. Blocks nest: an
    inner block sees the outer one's. Collect them with `capture_registrations()`."""
    return _REGISTRY.aside(ignoring)


def publish_registrations(descriptors: Iterable[PassDescriptor]) -> None:
    """Register `descriptors` (those a plugin registered aside while it imported) where
    this thread registers now: the enclosing `registrations_aside()` block, else the
    process-wide registry. All or none, in one step: another thread sees all of them or
    none; those registered there already stay; a clash raises E13030 and adds nothing."""
    _REGISTRY.publish(descriptors)


def capture_registrations() -> AbstractContextManager[list[PassDescriptor]]:
    """Context manager collecting the descriptors this thread registers inside it.

    The plugin loader uses it to roll back what a failing plugin registered.
    """
    return _REGISTRY.capture()
