"""Operator schemas: what inputs, outputs and attributes an operator has at an opset.

Standard operators are read from `onnx.defs` (nothing is copied by hand) and cached per
(domain, op type, opset); custom operators registered with `ge.ops.register_op` are looked up
in the same call, so callers see one vocabulary.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import onnx
from onnx import AttributeProto, defs, helper

from ge.errors import OpNotFoundError
from ge.graph.domains import normalize_domain
from ge.graph.validation import first_opset

__all__ = [
    "STANDARD_DOMAINS",
    "AttrSpec",
    "OpSpec",
    "ParamOption",
    "ParamSpec",
    "attr_kind_from_name",
    "get_op_spec",
    "latest_opset",
    "normalize_domain",
    "standard_op_types",
]

STANDARD_DOMAINS = ("", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview", "ai.onnx.preview.training")

_KIND_NAMES = {
    "int": AttributeProto.INT,
    "float": AttributeProto.FLOAT,
    "string": AttributeProto.STRING,
    "tensor": AttributeProto.TENSOR,
    "graph": AttributeProto.GRAPH,
    "ints": AttributeProto.INTS,
    "floats": AttributeProto.FLOATS,
    "strings": AttributeProto.STRINGS,
    "tensors": AttributeProto.TENSORS,
    "graphs": AttributeProto.GRAPHS,
    "sparse_tensor": AttributeProto.SPARSE_TENSOR,
    "type_proto": AttributeProto.TYPE_PROTO,
}


def attr_kind_from_name(name: str) -> int:
    """The ONNX attribute kind of a lower-case name such as "ints" (`ValueError` if unknown)."""
    try:
        return _KIND_NAMES[name.lower()]
    except KeyError:
        raise ValueError(
            f"unknown attribute kind {name!r}; expected one of {sorted(_KIND_NAMES)}"
        ) from None


class ParamOption(Enum):
    """How many values a formal input or output takes."""

    SINGLE = "single"
    OPTIONAL = "optional"
    VARIADIC = "variadic"


@dataclass(frozen=True)
class ParamSpec:
    """One formal input or output: its name, option and type variable (e.g. "T")."""

    name: str
    option: ParamOption = ParamOption.SINGLE
    type_str: str = ""
    min_arity: int = 1

    @property
    def optional(self) -> bool:
        return self.option is ParamOption.OPTIONAL

    @property
    def variadic(self) -> bool:
        return self.option is ParamOption.VARIADIC


@dataclass(frozen=True)
class AttrSpec:
    """One attribute: name, ONNX kind (`AttributeProto.AttributeType`), required, default."""

    name: str
    kind: int
    required: bool = False
    default: Any = None

    @property
    def kind_name(self) -> str:
        return AttributeProto.AttributeType.Name(self.kind)


@dataclass(frozen=True)
class OpSpec:
    """The signature of an operator at one opset, standard or custom."""

    domain: str
    op_type: str
    since_version: int
    inputs: tuple[ParamSpec, ...]
    outputs: tuple[ParamSpec, ...]
    attributes: Mapping[str, AttrSpec]
    min_input: int
    max_input: int
    min_output: int
    max_output: int
    doc: str = ""
    custom: bool = False
    schema: onnx.defs.OpSchema | None = field(default=None, compare=False, repr=False)

    @property
    def variadic_input(self) -> bool:
        return bool(self.inputs) and self.inputs[-1].variadic

    @property
    def variadic_output(self) -> bool:
        return bool(self.outputs) and self.outputs[-1].variadic

    def summary(self) -> str:
        """A one-line signature for messages, e.g. `Split(input, split?) -> outputs*`."""
        marks = {ParamOption.SINGLE: "", ParamOption.OPTIONAL: "?", ParamOption.VARIADIC: "*"}
        ins = ", ".join(p.name + marks[p.option] for p in self.inputs)
        outs = ", ".join(p.name + marks[p.option] for p in self.outputs)
        return f"{self.op_type}({ins}) -> {outs}"


def latest_opset(domain: str = "") -> int:
    """The newest opset version onnx knows for a standard domain."""
    domain = normalize_domain(domain)
    if domain == "":
        return defs.onnx_opset_version()
    return max(
        (s.since_version for s in defs.get_all_schemas_with_history() if s.domain == domain),
        default=1,
    )


_OPTIONS = {
    defs.OpSchema.FormalParameterOption.Single: ParamOption.SINGLE,
    defs.OpSchema.FormalParameterOption.Optional: ParamOption.OPTIONAL,
    defs.OpSchema.FormalParameterOption.Variadic: ParamOption.VARIADIC,
}


def _default_of(attr: defs.OpSchema.Attribute) -> Any:
    proto = attr.default_value
    if proto is None or not proto.name:
        return None
    return helper.get_attribute_value(proto)


def _spec_from_schema(schema: defs.OpSchema) -> OpSpec:
    def params(formals: Any) -> tuple[ParamSpec, ...]:
        return tuple(
            ParamSpec(p.name, _OPTIONS[p.option], p.type_str, p.min_arity) for p in formals
        )

    attributes = {
        name: AttrSpec(name, int(a.type), bool(a.required), _default_of(a))  # type: ignore[call-overload]
        for name, a in schema.attributes.items()
    }
    return spec_of(schema, params(schema.inputs), params(schema.outputs), attributes,
                   schema=schema)


def spec_of(source: Any, inputs: tuple[ParamSpec, ...], outputs: tuple[ParamSpec, ...],
            attributes: Mapping[str, AttrSpec], *, schema: defs.OpSchema | None = None,
            custom: bool = False) -> OpSpec:
    """An `OpSpec` of a schema object, onnx's or onnxruntime's (which names the fields of
    its formal parameters otherwise: the caller reads those), for its name, domain,
    version, arities and doc; `schema` is kept when it is onnx's (its inference runs it)."""
    return OpSpec(
        domain=normalize_domain(source.domain),
        op_type=source.name,
        since_version=source.since_version,
        inputs=inputs,
        outputs=outputs,
        attributes=attributes,
        min_input=source.min_input,
        max_input=source.max_input,
        min_output=source.min_output,
        max_output=source.max_output,
        doc=(source.doc or "").strip(),
        custom=custom,
        schema=schema,
    )


@functools.lru_cache(maxsize=4096)
def _standard_spec(op_type: str, opset: int, domain: str) -> OpSpec:
    try:
        schema = defs.get_schema(op_type, opset, domain)
    except defs.SchemaError:
        where = f"domain {domain!r}" if domain else "the ONNX domain"
        first = first_opset(op_type, domain)
        if first is not None:
            raise OpNotFoundError(
                f"operator {op_type} of {where} is not defined at opset {opset}; "
                f"it first appears at opset {first}"
            ) from None
        raise OpNotFoundError(f"operator {op_type} is not defined in {where}") from None
    if schema.deprecated:
        raise OpNotFoundError(
            f"operator {op_type} is deprecated at opset {opset} "
            f"(deprecated since opset {schema.since_version})"
        )
    return _spec_from_schema(schema)


def get_op_spec(op_type: str, opset: int, domain: str = "") -> OpSpec:
    """The schema of `op_type` at `opset` of `domain`: ONNX's, a registered custom one's, or
    onnxruntime's for the operators of its own domains (`ge.ops.runtime_ops`).

    Raises `OpNotFoundError` when the operator does not exist at that opset.
    """
    domain = normalize_domain(domain)
    if domain not in STANDARD_DOMAINS:
        from ge.ops.registry import get_custom_op

        custom = get_custom_op(op_type, domain)
        if custom is None:
            from ge.ops.runtime_ops import runtime_op_spec

            runtime = runtime_op_spec(op_type, domain, opset)
            if runtime is not None:
                return runtime  # an operator onnxruntime defines beyond ONNX
            raise OpNotFoundError(
                f"operator {op_type} of domain {domain!r} is not registered "
                "(register it with ge.ops.register_op)"
            )
        if opset < custom.spec.since_version:
            raise OpNotFoundError(
                f"custom operator {domain}::{op_type} is defined from opset "
                f"{custom.spec.since_version}, not at {opset}"
            )
        return custom.spec
    return _standard_spec(op_type, int(opset), domain)


@functools.lru_cache(maxsize=8)
def standard_op_types(domain: str = "") -> tuple[str, ...]:
    """Every operator onnx defines in `domain` (at any opset), sorted by name."""
    domain = normalize_domain(domain)
    return tuple(sorted({s.name for s in defs.get_all_schemas_with_history()
                         if s.domain == domain}))
