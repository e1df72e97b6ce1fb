"""Custom operators: a schema, a shape/type inference function and a way to compute them.

A pass that introduces a fused operator registers it here, in its own domain, so the builder
can create it, shape inference can type its outputs and constant evaluation (and numeric
verification) can run it: through a numpy `kernel`, or a `decomposition` into known
operators built with the ES builder. The table is process-wide and thread-safe.

A compilation looks operators up through a `CustomOpView` of its own, active in a
`contextvars.ContextVar` for the compilation's duration (`CompilationPasses` of
`ge.compiler.engine` enters it; `custom_op_view` does for a block): first the operators of
its plugins (the compiler's plugins it runs with, as they were when it started, and those of
its `pass_paths`, which live in the view only and never in the table), then the table,
without the operators of installed plugins it leaves out and of plugins loaded elsewhere
since it started. So what a compilation sees depends neither on other threads'
compilations nor on a `ge.finalize()` that unloads the plugins under it. Every lookup
(`get_custom_op`, `list_custom_ops`, `custom_domains`) goes through the active view;
without one it reads the table.

Every operator records where it was registered (`CustomOp.where`, the caller's file and
line, so that a second registration of the same name names both) and which module's import
ran the call (`CustomOp.module`). The plugin loader captures the operators a plugin
registers while it is imported (`capture_custom_ops`) and removes them when it unloads the
plugin (`remove_custom_ops`): the plugin's modules are dropped then, so its next load
executes the file again and registers them afresh.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import numpy as np

from ge._user_code import is_internal_file
from ge.errors import OpRegisterError, SourceLocation
from ge.graph.tensor_desc import TensorDesc
from ge.ops.op_declaration import declared_spec
from ge.ops.schemas import AttrSpec, OpSpec, ParamSpec, normalize_domain

__all__ = [
    "CustomOp",
    "CustomOpView",
    "InferContext",
    "active_custom_op_view",
    "capture_custom_ops",
    "custom_domains",
    "custom_op_view",
    "ensure_custom_op",
    "get_custom_op",
    "list_custom_ops",
    "process_custom_ops",
    "publish_custom_ops",
    "register_op",
    "remove_custom_ops",
    "unregister_op",
]


@dataclass
class InferContext:
    """What a custom op's inference function sees: input descs, constant inputs, attributes.

    `input_values[i]` is the numpy value of input `i` when it is a constant, else None;
    `attrs` holds every attribute with defaults filled in; the function returns one
    `TensorDesc` per output (`num_outputs` of them).
    """

    op_type: str
    domain: str
    input_descs: list[TensorDesc | None]
    input_values: list[np.ndarray | None]
    attrs: dict[str, Any]
    num_outputs: int


InferFn = Callable[[InferContext], Sequence[TensorDesc]]
KernelFn = Callable[..., Any]
DecompositionFn = Callable[..., Any]
Key = tuple[str, str]  # (domain, op type)


@dataclass(frozen=True)
class CustomOp:
    """A registered custom operator: its schema and the functions that give it meaning.

    `kernel(*inputs: np.ndarray, **attrs) -> array | tuple of arrays`;
    `decomposition(*inputs: TensorHolder, **attrs) -> TensorHolder | tuple`, written with
    `ge.es` operator functions. `location` is the user's file and line of the `register_op`
    call (None when no caller outside `ge` made it; `where` gives it as text); `module` the
    name of the module whose import ran that call (None when it was not made while a module
    was being imported), which tells the plugin loader whether the operator lives as long
    as a plugin or a library.
    """

    spec: OpSpec
    infer: InferFn
    kernel: KernelFn | None = None
    decomposition: DecompositionFn | None = None
    location: SourceLocation | None = field(default=None, compare=False)
    module: str | None = field(default=None, compare=False)

    @property
    def where(self) -> str:
        """`file:line` of the `register_op` call ("" when unknown)."""
        return "" if self.location is None else str(self.location)

    @property
    def key(self) -> tuple[str, str]:
        """(domain, op type), the operator's name in the table."""
        return self.spec.domain, self.spec.op_type


class _CustomOpTable:
    """Registered operators by (domain, op type); safe across threads.

    `capture()` collects, per thread, the operators registered inside it (the plugin loader
    wraps a plugin's import in one), as `ge.passes.registry` does for passes. Each entry
    records when it was added (a serial number) and whether a plugin's import added it
    (inside a capture), so that a view can leave out what plugins loaded after it started.
    `collecting(view)` sends this thread's registrations to `view` instead of the table.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._ops: dict[Key, CustomOp] = {}
        self._added: dict[Key, tuple[int, bool]] = {}  # (serial, added by a plugin's import)
        self._serial = 0
        self._local = threading.local()

    def serial(self) -> int:
        """The number of additions so far (a view remembers it when it is made)."""
        with self._lock:
            return self._serial

    def _collector(self) -> CustomOpView | None:
        view: CustomOpView | None = getattr(self._local, "collector", None)
        return view

    def _put(self, op: CustomOp, by_import: bool) -> None:  # (under the lock)
        self._serial += 1
        self._ops[op.key] = op
        self._added[op.key] = (self._serial, by_import)

    def add(self, op: CustomOp) -> None:
        collector = self._collector()
        captures = getattr(self._local, "captures", ())
        if collector is not None:
            collector._collect(op)
        else:
            active = active_custom_op_view()
            with self._lock:
                previous = self._ops.get(op.key)
                if previous is None and active is not None:  # a plugin of this compilation's
                    previous = active._own.get(op.key)
                if previous is not None and previous is not op:
                    raise _duplicate_error(op, previous)
                self._put(op, bool(captures))
        for captured in captures:
            captured.append(op)

    def ensure(self, op: CustomOp) -> None:
        with self._lock:
            if self._ops.get(op.key) is op:
                return
            collector = self._collector()
            if collector is not None and collector._get(op.key) is op:
                return
            self.add(op)

    def remove(self, ops: Iterable[CustomOp]) -> None:
        ops = list(ops)
        collector = self._collector()
        if collector is not None:
            collector._discard(ops)
        with self._lock:
            for op in ops:
                if self._ops.get(op.key) is op:
                    del self._ops[op.key]
                    del self._added[op.key]

    def publish(self, ops: Iterable[CustomOp]) -> None:
        """Add `ops` (a library's, imported while a view collected) where they are not yet;
        GE1301 for the first whose name another operator took meanwhile."""
        clashes = []
        with self._lock:
            for op in ops:
                previous = self._ops.get(op.key)
                if previous is None:
                    self._put(op, True)
                elif previous is not op:
                    clashes.append(_duplicate_error(op, previous))
        if clashes:
            raise clashes[0]

    def pop(self, key: Key) -> CustomOp | None:
        with self._lock:
            self._added.pop(key, None)
            return self._ops.pop(key, None)

    def get(self, key: Key) -> CustomOp | None:
        with self._lock:
            return self._ops.get(key)

    def all(self) -> list[CustomOp]:
        with self._lock:
            return [self._ops[k] for k in sorted(self._ops)]

    def visible(self, key: Key, view: CustomOpView) -> CustomOp | None:
        """The operator of `key` as `view` sees the table (see `CustomOpView`)."""
        with self._lock:
            op = self._ops.get(key)
            if op is None:
                return None
            serial, by_import = self._added[key]
        return None if view._hides(op, serial, by_import) else op

    def all_visible(self, view: CustomOpView) -> list[CustomOp]:
        with self._lock:
            entries = [(op, *self._added[key]) for key, op in self._ops.items()]
        return [op for op, serial, by_import in entries if not view._hides(op, serial, by_import)]

    @contextmanager
    def collecting(self, view: CustomOpView) -> Iterator[None]:
        previous = self._collector()
        self._local.collector = view
        try:
            yield
        finally:
            self._local.collector = previous

    @contextmanager
    def capture(self) -> Iterator[list[CustomOp]]:
        stack: list[list[CustomOp]] = self._local.__dict__.setdefault("captures", [])
        captured: list[CustomOp] = []
        stack.append(captured)
        try:
            yield captured
        finally:
            for index in range(len(stack) - 1, -1, -1):  # by identity, as the pass registry
                if stack[index] is captured:
                    del stack[index]
                    break


class CustomOpView:
    """The custom operators one compilation sees, whatever other threads load or unload.

    `own` are the operators of the compilation's plugins, looked up first: those of the
    compiler's plugins it runs with, taken when it starts (a `ge.finalize()` that
    unregisters them from the table meanwhile does not take them from it), and those its
    own plugins register while they are imported inside `importing()`, which go into the
    view only. The process-wide table comes next, without the operators of `hidden` (the
    installed plugins the compilation leaves out) and without those a plugin's import
    added after the view was made (a plugin loaded elsewhere meanwhile: a compiler started
    again after `ge.finalize()`, an installed plugin another compilation wanted). What
    code registers outside a plugin's import (the user's, a pass's hook) shows at once.

    Lookups go through the view while it is active (`custom_op_view(view)`, or
    `enter()`/`leave()`), in this context only: a thread started inside does not inherit
    it (run the thread's work in `contextvars.copy_context()` taken inside).
    """

    def __init__(self, own: Iterable[CustomOp] = (), hidden: Iterable[CustomOp] = ()) -> None:
        self._lock = threading.Lock()
        self._own: dict[Key, CustomOp] = {}
        for op in own:
            self._own.setdefault(op.key, op)
        self._hidden_ops = tuple(hidden)  # (held, so that their ids stay theirs)
        self._hidden = frozenset(id(op) for op in self._hidden_ops)
        self._since = _TABLE.serial()
        self._staged: list[CustomOp] = []

    def __repr__(self) -> str:
        names = ", ".join(f"{d}::{t}" for d, t in sorted(self._own))
        return f"<CustomOpView own=[{names}]>"

    # -- lookups ----------------------------------------------------------------------
    def get(self, op_type: str, domain: str) -> CustomOp | None:
        """The operator `domain::op_type` as the compilation sees it, or None."""
        return self._get((normalize_domain(domain), op_type))

    def _get(self, key: Key) -> CustomOp | None:
        op = self._own.get(key)
        return op if op is not None else _TABLE.visible(key, self)

    def all(self) -> list[CustomOp]:
        """Every operator the compilation sees, ordered by (domain, op type)."""
        found = {op.key: op for op in _TABLE.all_visible(self)}
        with self._lock:
            found.update(self._own)
        return [found[k] for k in sorted(found)]

    @property
    def own(self) -> list[CustomOp]:
        """The operators of the compilation's plugins, ordered by (domain, op type)."""
        with self._lock:
            return [self._own[k] for k in sorted(self._own)]

    def _hides(self, op: CustomOp, serial: int, by_import: bool) -> bool:
        return id(op) in self._hidden or (by_import and serial > self._since)

    # -- activation -------------------------------------------------------------------
    def enter(self) -> None:
        """Make lookups in this context go through the view (until `leave()`)."""
        _VIEWS.set((*_VIEWS.get(), self))

    def leave(self) -> None:
        """Undo the last `enter()` of this view in this context (a no-op if there is none)."""
        views = _VIEWS.get()
        for index in range(len(views) - 1, -1, -1):
            if views[index] is self:
                _VIEWS.set(views[:index] + views[index + 1:])
                return

    # -- the compilation's own plugins --------------------------------------------------
    @contextmanager
    def importing(self, plugin_ops: Callable[[], Iterable[CustomOp]]) -> Iterator[None]:
        """Import the compilation's own plugins inside: the view is active (a plugin's
        `get_custom_op` guard sees what the compilation sees), and what this thread
        registers goes into the view, GE1301 when the view sees another operator of the
        name (the table's, or another plugin's of this compilation; never one a concurrent
        compilation's plugin holds). At the end, whether the import succeeded or not, the
        operators registered that `plugin_ops()` (the operators of every loaded plugin)
        does not hold go to the table too: a library's, which the plugin imported for the
        first time and which lives as long as the library stays imported."""
        self.enter()
        failed = True
        try:
            with _TABLE.collecting(self):
                yield
            failed = False
        finally:
            self.leave()
            with self._lock:
                staged, self._staged = self._staged, []
            owned = {id(op) for op in plugin_ops()}
            try:
                _TABLE.publish(op for op in staged if id(op) not in owned)
            except OpRegisterError:
                if not failed:  # (else the import's own error is the one to tell)
                    raise

    def _collect(self, op: CustomOp) -> None:
        previous = self._get(op.key)
        if previous is not None and previous is not op:
            raise _duplicate_error(op, previous)
        with self._lock:
            self._own[op.key] = op
            self._staged.append(op)

    def _discard(self, ops: list[CustomOp]) -> None:
        ids = {id(op) for op in ops}
        with self._lock:
            for op in ops:
                if self._own.get(op.key) is op:
                    del self._own[op.key]
            self._staged = [op for op in self._staged if id(op) not in ids]


def _duplicate_error(new: CustomOp, old: CustomOp) -> OpRegisterError:
    """GE1301 naming both registrations of one operator, pointing at the second."""
    domain, op_type = new.key
    first = old.where or "an unknown caller"
    second = new.where or "this call"
    return OpRegisterError(
        f"custom operator {domain}::{op_type} is already registered by {first}; {second} "
        "registers it again (give one of them another op type or domain, or unregister_op "
        "the first)",
        location=new.location,
    )


_TABLE = _CustomOpTable()
#: The views active in this context, innermost last (`CustomOpView.enter`).
_VIEWS: ContextVar[tuple[CustomOpView, ...]] = ContextVar("ge_custom_op_views", default=())

def _registration_site(frame: FrameType | None) -> tuple[SourceLocation | None, str | None]:
    """(the innermost caller outside `ge`, the module whose import is running the call: the
    innermost module-body frame) walking out from `frame`."""
    where: SourceLocation | None = None
    module: str | None = None
    while frame is not None and (where is None or module is None):
        code = frame.f_code
        if where is None and not is_internal_file(code.co_filename):
            where = SourceLocation(code.co_filename, frame.f_lineno)
        if module is None and code.co_name == "<module>":
            name = frame.f_globals.get("__name__")
            module = name if isinstance(name, str) else None
        frame = frame.f_back
    return where, module


def register_op(
    op_type: str,
    *,
    domain: str,
    inputs: Sequence[str | ParamSpec],
    outputs: Sequence[str | ParamSpec],
    infer: InferFn,
    attributes: Mapping[str, AttrSpec | str | tuple[str, Any]] | None = None,
    kernel: KernelFn | None = None,
    decomposition: DecompositionFn | None = None,
    since_version: int = 1,
    doc: str = "",
) -> OpSpec:
    """Register a custom operator `domain::op_type`; returns its schema.

    Inputs/outputs are names ("x", "bias?" optional, "xs*" variadic) or `ParamSpec`s;
    attributes map names to an `AttrSpec`, a kind name ("int", "floats", ...; required) or
    `(kind name, default)`. A kernel or a decomposition is required so graphs holding the op
    can still be evaluated. Registering the same (domain, op_type) twice is an
    `OpRegisterError` naming both call sites, as is a standard ONNX domain.

    An operator a pass plugin registers while it is imported belongs to that plugin: it is
    unregistered when the plugin is unloaded (at `ge.finalize()`, when a `ge.testing` set
    closes), so the next load registers it again; one of a compilation's `pass_paths`
    plugin is the compilation's only (`CustomOpView`), never in the process-wide table.
    One registered by any other code stays until `unregister_op`.
    """
    spec = declared_spec(op_type, domain, inputs, outputs, attributes, since_version, doc)
    if not callable(infer):
        raise OpRegisterError(f"{spec.domain}::{op_type}: infer must be callable")
    for fn, what in ((kernel, "kernel"), (decomposition, "decomposition")):
        if fn is not None and not callable(fn):
            raise OpRegisterError(f"{spec.domain}::{op_type}: {what} must be callable")
    if kernel is None and decomposition is None:
        raise OpRegisterError(
            f"{spec.domain}::{op_type}: give a numpy kernel or a decomposition so the op can "
            "be evaluated"
        )
    where, module = _registration_site(sys._getframe(1))
    _TABLE.add(CustomOp(spec, infer, kernel, decomposition, location=where, module=module))
    return spec


def unregister_op(op_type: str, domain: str) -> None:
    """Remove a custom operator from the process-wide table (`OpRegisterError` when it is
    not registered there; a compilation's plugin's operator goes with the compilation)."""
    key = (normalize_domain(domain), op_type)
    if _TABLE.pop(key) is None:
        view = active_custom_op_view()
        if view is not None and key in view._own:
            raise OpRegisterError(
                f"custom operator {domain}::{op_type} is a plugin's of this compilation, "
                "which holds it for its duration: it is not in the process-wide table")
        raise OpRegisterError(f"custom operator {domain}::{op_type} is not registered")


def active_custom_op_view() -> CustomOpView | None:
    """The view lookups go through in this context (a compilation's), or None."""
    views = _VIEWS.get()
    return views[-1] if views else None


@contextmanager
def custom_op_view(view: CustomOpView) -> Iterator[CustomOpView]:
    """Look custom operators up through `view` inside the block (in this context only)."""
    view.enter()
    try:
        yield view
    finally:
        view.leave()


def get_custom_op(op_type: str, domain: str) -> CustomOp | None:
    """The registered custom operator, or None: as the running compilation sees it (its
    plugins' operators first: `CustomOpView`), else the process-wide table's."""
    key = (normalize_domain(domain), op_type)
    views = _VIEWS.get()
    return views[-1]._get(key) if views else _TABLE.get(key)


def list_custom_ops() -> list[CustomOp]:
    """Every registered custom operator (as `get_custom_op` sees them), ordered by
    (domain, op type)."""
    view = active_custom_op_view()
    return _TABLE.all() if view is None else view.all()


def process_custom_ops() -> list[CustomOp]:
    """Every operator of the process-wide table, whatever view is active (no compilation's
    plugin's operators), ordered by (domain, op type)."""
    return _TABLE.all()


def custom_domains() -> set[str]:
    """The domains of the registered custom operators (as `get_custom_op` sees them)."""
    return {op.spec.domain for op in list_custom_ops()}


def capture_custom_ops() -> AbstractContextManager[list[CustomOp]]:
    """Context manager collecting the operators this thread registers inside it.

    The plugin loader wraps each plugin's import in one: what it collects is the plugin's
    (rolled back if the import fails, removed when the plugin is unloaded).
    """
    return _TABLE.capture()


def ensure_custom_op(op: CustomOp) -> None:
    """Register `op` again if it was removed (a plugin loaded again without executing its
    module); a no-op if it is registered, GE1301 naming both if another one took its name."""
    _TABLE.ensure(op)


def remove_custom_ops(ops: Iterable[CustomOp]) -> None:
    """Unregister exactly these operators (another one registered under the same name
    since stays)."""
    _TABLE.remove(ops)


def publish_custom_ops(ops: Iterable[CustomOp]) -> None:
    """Register operators a plugin registered aside while it imported (into a view of its
    own: `CustomOpView.importing`) where this thread registers now: the view collecting
    (a compilation's own plugins), else the table, as added by a plugin's import (a view
    made before does not see them). Those registered there already stay; GE1301 for the
    first whose name another operator took (the others are added)."""
    collector = _TABLE._collector()
    if collector is None:
        _TABLE.publish(ops)
        return
    for op in ops:
        _TABLE.ensure(op)
