"""A custom operator's declaration read into its schema: the names, parameters and
attributes `register_op` is given, checked as a schema needs them (an identifier in a domain
of its own, the variadic parameter last, no required one after an optional one)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ge.errors import OpRegisterError
from ge.ops.schemas import (
    STANDARD_DOMAINS,
    AttrSpec,
    OpSpec,
    ParamOption,
    ParamSpec,
    attr_kind_from_name,
    normalize_domain,
)

__all__ = ["declared_spec"]


def declared_spec(op_type: str, domain: str, inputs: Sequence[str | ParamSpec],
                  outputs: Sequence[str | ParamSpec],
                  attributes: Mapping[str, AttrSpec | str | tuple[str, Any]] | None,
                  since_version: int, doc: str) -> OpSpec:
    """The schema of custom operator `domain::op_type` as `register_op` declares it (its
    domain normalised); `OpRegisterError` saying what is wrong with the declaration."""
    if not isinstance(op_type, str) or not op_type.isidentifier():
        raise OpRegisterError(f"op_type must be an identifier str, got {op_type!r}")
    if not isinstance(domain, str) or not domain:
        raise OpRegisterError("custom operators need a non-empty domain, e.g. 'com.example'")
    given, domain = domain, normalize_domain(domain)
    if domain in STANDARD_DOMAINS:  # (said as written: 'ai.onnx' is '' normalised)
        raise OpRegisterError(
            f"cannot register {op_type} in domain {given!r}, a standard ONNX domain; use "
            "your own domain, e.g. 'com.example'"
        )
    ins = tuple(_param(p, "an input") for p in inputs)
    outs = tuple(_param(p, "an output") for p in outputs)
    if not outs:
        raise OpRegisterError(f"{domain}::{op_type}: an operator needs at least one output")
    attrs = {name: _attr(name, a) for name, a in (attributes or {}).items()}
    min_in, max_in = _arity(ins, "input")
    min_out, max_out = _arity(outs, "output")
    return OpSpec(domain, op_type, int(since_version), ins, outs, attrs, min_in, max_in,
                  min_out, max_out, doc=doc, custom=True)


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
