"""Custom operators: a schema, a shape/type inference function and a way to compute them.

A pass that introduces a fused operator registers it here, in its own domain, so the builder
can create it, shape inference can type its outputs and constant evaluation (and numeric
verification) can run it: through a numpy `kernel`, or a `decomposition` into known
operators built with the ES builder. The table is process-wide and thread-safe.

Every operator records where it was registered (`CustomOp.where`, the caller's file and
line, so that a second registration of the same name names both) and which module's import
ran the call (`CustomOp.module`). The plugin loader captures the operators a plugin
registers while it is imported (`capture_custom_ops`) and removes them when it unloads the
plugin (`remove_custom_ops`): the plugin's modules are dropped then, so its next load
executes the file again and registers them afresh.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import numpy as np

from ge.errors import OpRegisterError, SourceLocation
from ge.graph.tensor_desc import TensorDesc
from ge.ops.schemas import (
    STANDARD_DOMAINS,
    AttrSpec,
    OpSpec,
    ParamOption,
    ParamSpec,
    attr_kind_from_name,
    normalize_domain,
)

__all__ = [
    "CustomOp",
    "InferContext",
    "capture_custom_ops",
    "custom_domains",
    "ensure_custom_op",
    "get_custom_op",
    "list_custom_ops",
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
    wraps a plugin's import in one), as `ge.passes.registry` does for passes.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._ops: dict[tuple[str, str], CustomOp] = {}
        self._local = threading.local()

    def add(self, op: CustomOp) -> None:
        with self._lock:
            previous = self._ops.get(op.key)
            if previous is not None:
                raise _duplicate_error(op, previous)
            self._ops[op.key] = op
        for captured in getattr(self._local, "captures", ()):
            captured.append(op)

    def ensure(self, op: CustomOp) -> None:
        with self._lock:
            if self._ops.get(op.key) is not op:
                self.add(op)

    def remove(self, ops: Iterable[CustomOp]) -> None:
        with self._lock:
            for op in ops:
                if self._ops.get(op.key) is op:
                    del self._ops[op.key]

    def pop(self, key: tuple[str, str]) -> CustomOp | None:
        with self._lock:
            return self._ops.pop(key, None)

    def get(self, key: tuple[str, str]) -> CustomOp | None:
        with self._lock:
            return self._ops.get(key)

    def all(self) -> list[CustomOp]:
        with self._lock:
            return [self._ops[k] for k in sorted(self._ops)]

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

#: Frames of files under this folder are `ge`'s own, never the user's call site.
_GE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _is_internal(filename: str) -> bool:
    return filename.startswith("<") or os.path.abspath(filename).startswith(_GE_ROOT + os.sep)


def _registration_site(frame: FrameType | None) -> tuple[SourceLocation | None, str | None]:
    """(the innermost caller outside `ge`, the module whose import is running the call: the
    innermost module-body frame) walking out from `frame`."""
    where: SourceLocation | None = None
    module: str | None = None
    while frame is not None and (where is None or module is None):
        code = frame.f_code
        if where is None and not _is_internal(code.co_filename):
            where = SourceLocation(code.co_filename, frame.f_lineno)
        if module is None and code.co_name == "<module>":
            name = frame.f_globals.get("__name__")
            module = name if isinstance(name, str) else None
        frame = frame.f_back
    return where, module


def _param(item: str | ParamSpec, what: str) -> ParamSpec:
    if isinstance(item, ParamSpec):
        return item
    if not isinstance(item, str) or not item.rstrip("?*"):
        raise OpRegisterError(f"{what} must be a name (str, 'x?' optional, 'xs*' variadic)")
    if item.endswith("?"):
        return ParamSpec(item[:-1], ParamOption.OPTIONAL, "T")
    if item.endswith("*"):
        return ParamSpec(item[:-1], ParamOption.VARIADIC, "T")
    return ParamSpec(item, ParamOption.SINGLE, "T")


def _attr(name: str, item: Any) -> AttrSpec:
    if isinstance(item, AttrSpec):
        return item
    try:
        if isinstance(item, str):
            return AttrSpec(name, attr_kind_from_name(item), required=True)
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
            return AttrSpec(name, attr_kind_from_name(item[0]), required=False, default=item[1])
    except ValueError as err:
        raise OpRegisterError(f"attribute {name!r}: {err}") from None
    raise OpRegisterError(
        f"attribute {name!r} must be an AttrSpec, a kind name (e.g. 'ints') or "
        f"(kind name, default), got {item!r}"
    )


def _arity(params: tuple[ParamSpec, ...], what: str) -> tuple[int, int]:
    for i, p in enumerate(params):
        if p.variadic and i != len(params) - 1:
            raise OpRegisterError(f"only the last {what} may be variadic ({p.name!r} is not last)")
        if p.option is ParamOption.SINGLE and any(q.optional for q in params[:i]):
            raise OpRegisterError(f"required {what} {p.name!r} follows an optional one")
    required = sum(1 for p in params if p.option is ParamOption.SINGLE)
    if params and params[-1].variadic:
        return required + params[-1].min_arity, 2**31 - 1
    return required, len(params)


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
    unregistered when the plugin is unloaded (after the compilation of its `pass_paths`, at
    `ge.finalize()`, when a `ge.testing` set closes), so the next load registers it again.
    One registered by any other code stays until `unregister_op`.
    """
    if not isinstance(op_type, str) or not op_type.isidentifier():
        raise OpRegisterError(f"op_type must be an identifier str, got {op_type!r}")
    if not isinstance(domain, str) or not domain:
        raise OpRegisterError("custom operators need a non-empty domain, e.g. 'com.example'")
    domain = normalize_domain(domain)
    if domain in STANDARD_DOMAINS:
        raise OpRegisterError(
            f"cannot register {op_type} in the standard domain {domain!r}; use your own domain"
        )
    if not callable(infer):
        raise OpRegisterError(f"{domain}::{op_type}: infer must be callable")
    if kernel is None and decomposition is None:
        raise OpRegisterError(
            f"{domain}::{op_type}: give a numpy kernel or a decomposition so the op can be "
            "evaluated"
        )
    for fn, what in ((kernel, "kernel"), (decomposition, "decomposition")):
        if fn is not None and not callable(fn):
            raise OpRegisterError(f"{domain}::{op_type}: {what} must be callable")
    ins = tuple(_param(p, "an input") for p in inputs)
    outs = tuple(_param(p, "an output") for p in outputs)
    if not outs:
        raise OpRegisterError(f"{domain}::{op_type}: an operator needs at least one output")
    attrs = {name: _attr(name, a) for name, a in (attributes or {}).items()}
    min_in, max_in = _arity(ins, "input")
    min_out, max_out = _arity(outs, "output")
    spec = OpSpec(domain, op_type, int(since_version), ins, outs, attrs, min_in, max_in,
                  min_out, max_out, doc=doc, custom=True)
    where, module = _registration_site(sys._getframe(1))
    _TABLE.add(CustomOp(spec, infer, kernel, decomposition, location=where, module=module))
    return spec


def unregister_op(op_type: str, domain: str) -> None:
    """Remove a custom operator (`OpRegisterError` when it is not registered)."""
    if _TABLE.pop((normalize_domain(domain), op_type)) is None:
        raise OpRegisterError(f"custom operator {domain}::{op_type} is not registered")


def get_custom_op(op_type: str, domain: str) -> CustomOp | None:
    """The registered custom operator, or None."""
    return _TABLE.get((normalize_domain(domain), op_type))


def list_custom_ops() -> list[CustomOp]:
    """Every registered custom operator, ordered by (domain, op type)."""
    return _TABLE.all()


def custom_domains() -> set[str]:
    """The domains of the registered custom operators."""
    return {op.spec.domain for op in _TABLE.all()}


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
