"""Thread-local builder scopes: attributes and control dependencies for nodes created inside.

`attr_scope` merges nested attribute maps (inner wins) onto every operator node created in
the block; `control_dependency_scope` makes every such node run after the given tensors;
`with builder:` makes `builder` the one that builds operators whose inputs alone cannot say
(a body's operators reading only outer values).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ge.errors import BuilderTypeError

if TYPE_CHECKING:
    from ge.es.graph_builder import GraphBuilder
    from ge.es.tensor_holder import TensorHolder

__all__ = [
    "active_builder",
    "attr_scope",
    "builder_scope",
    "building_patterns",
    "control_dependency_scope",
    "pattern_scope",
    "scoped_attrs",
    "scoped_control_deps",
]


class _State(threading.local):
    def __init__(self) -> None:
        self.attrs: list[dict[str, Any]] = []
        self.deps: list[list[TensorHolder]] = []
        self.builders: list[GraphBuilder] = []
        self.patterns = 0  # how many `pattern_scope`s are open


_STATE = _State()


@contextmanager
def attr_scope(attr_maps: Mapping[str, Any]) -> Iterator[None]:
    """Set these attributes on every operator node created inside the block (this thread)."""
    if not isinstance(attr_maps, Mapping):
        raise BuilderTypeError(f"attr_maps must be a dict, got {type(attr_maps).__name__}")
    _STATE.attrs.append(dict(attr_maps))
    try:
        yield
    finally:
        _STATE.attrs.pop()


@contextmanager
def control_dependency_scope(tensors: Sequence[TensorHolder]) -> Iterator[None]:
    """Make every operator node created inside the block depend on these tensors' nodes."""
    from ge.es.tensor_holder import TensorHolder

    items = list(tensors) if isinstance(tensors, (list, tuple)) else None
    if items is None or not all(isinstance(t, TensorHolder) for t in items):
        raise BuilderTypeError("control_dependency_scope takes a list of TensorHolder")
    _STATE.deps.append(items)
    try:
        yield
    finally:
        _STATE.deps.pop()


def scoped_attrs() -> dict[str, Any]:
    """The merged attributes of the enclosing `attr_scope`s (inner wins)."""
    merged: dict[str, Any] = {}
    for layer in _STATE.attrs:
        merged.update(layer)
    return merged


def scoped_control_deps() -> list[TensorHolder]:
    """The tensors of every enclosing `control_dependency_scope`."""
    return [t for layer in _STATE.deps for t in layer]


@contextmanager
def builder_scope(builder: GraphBuilder) -> Iterator[GraphBuilder]:
    """Operators built inside the block belong to `builder` unless given `builder=`."""
    _STATE.builders.append(builder)
    try:
        yield builder
    finally:
        _STATE.builders.pop()


def active_builder() -> GraphBuilder | None:
    """The builder of the innermost `with builder:` block of this thread, if any."""
    return _STATE.builders[-1] if _STATE.builders else None


@contextmanager
def pattern_scope() -> Iterator[None]:
    """Operators built inside the block are a pattern's (a `PatternFusionPass`'s
    `patterns()` and `@pattern` methods run inside one): a pattern need not be well typed
    (GE's `inputs[0] + 0` adds an int64 to a float), so an operator inference rejects keeps
    unknown descs instead of raising `BuilderInferenceError`."""
    _STATE.patterns += 1
    try:
        yield
    finally:
        _STATE.patterns -= 1


def building_patterns() -> bool:
    """Whether this thread is inside a `pattern_scope`."""
    return _STATE.patterns > 0
