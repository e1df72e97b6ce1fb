"""Custom operators: a schema, a shape/type inference function and a way to compute them.

A pass that introduces a fused operator registers it here, in its own domain, so the builder
can create it, shape inference can type its outputs and constant evaluation (and numeric
verification) can run it: through a numpy `kernel`, or a `decomposition` into known
operators built with the ES builder. The table is process-wide and thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ge.errors import OpRegisterError
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
    "custom_domains",
    "get_custom_op",
    "list_custom_ops",
    "register_op",
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
    `ge.es` operator functions.
    """

    spec: OpSpec
    infer: InferFn
    kernel: KernelFn | None = None
    decomposition: DecompositionFn | None = None
    where: str = field(default="", compare=False)


_LOCK = threading.RLock()
_TABLE: dict[tuple[str, str], CustomOp] = {}


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
    `OpRegisterError`, as is a standard ONNX domain.
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
    op = CustomOp(spec, infer, kernel, decomposition, where=getattr(infer, "__module__", ""))
    with _LOCK:
        key = (domain, op_type)
        if key in _TABLE:
            raise OpRegisterError(
                f"custom operator {domain}::{op_type} is already registered "
                f"(by {_TABLE[key].where or 'unknown module'})"
            )
        _TABLE[key] = op
    return spec


def unregister_op(op_type: str, domain: str) -> None:
    """Remove a custom operator (`OpRegisterError` when it is not registered)."""
    with _LOCK:
        try:
            del _TABLE[(normalize_domain(domain), op_type)]
        except KeyError:
            raise OpRegisterError(
                f"custom operator {domain}::{op_type} is not registered"
            ) from None


def get_custom_op(op_type: str, domain: str) -> CustomOp | None:
    """The registered custom operator, or None."""
    with _LOCK:
        return _TABLE.get((normalize_domain(domain), op_type))


def list_custom_ops() -> list[CustomOp]:
    """Every registered custom operator, ordered by (domain, op type)."""
    with _LOCK:
        return [_TABLE[k] for k in sorted(_TABLE)]


def custom_domains() -> set[str]:
    with _LOCK:
        return {d for d, _ in _TABLE}
