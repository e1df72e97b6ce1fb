"""Operators onnxruntime defines beyond ONNX: its contrib domains, `com.microsoft` first.

Models meet them often: onnxruntime's quantizer writes `QLinearAdd` or `QGemm` in its
QOperator format, its offline optimiser and transformers optimiser write `FusedMatMul`,
`SkipLayerNormalization` or `Attention`, onnxruntime-genai writes `GroupQueryAttention`
and `MatMulNBits`. onnx has no schema for them, but onnxruntime, a dependency of ge that
runs them, has: ge takes each one's signature from onnxruntime's schema registry
(`runtime_op_spec`) and its output types from onnxruntime's own shape inference, asked
through a session of the one node (`infer_runtime_node`). Nothing about them is written by
hand, and a registered custom operator of the same name (`ge.ops.register_op`) comes first.

A one-node session costs a few milliseconds; nodes of the same signature (operator,
attributes, input types, small constant inputs) are asked once per process.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

import onnx
from onnx import helper

from ge.errors import ShapeInferenceError
from ge.graph.node import Node
from ge.graph.places import ir_node_label
from ge.graph.tensor_desc import TensorDesc
from ge.graph.value_info import desc_from_value_info
from ge.ops.onnx_node import const_value, node_proto, opset_imports_of, type_proto
from ge.ops.schemas import (
    STANDARD_DOMAINS,
    AttrSpec,
    OpSpec,
    ParamOption,
    ParamSpec,
    normalize_domain,
    spec_of,
)

__all__ = [
    "infer_runtime_node",
    "runtime_defines_in_onnx_domain",
    "runtime_domains",
    "runtime_op_spec",
    "runtime_version",
]

#: The IR version of the one-node models: one every onnxruntime ge supports reads.
_PROBE_IR_VERSION = 10

_OPTIONS = {"Single": ParamOption.SINGLE, "Optional": ParamOption.OPTIONAL,
            "Variadic": ParamOption.VARIADIC}


@functools.lru_cache(maxsize=1)
def _registry() -> Mapping[tuple[str, str], tuple[Any, ...]]:
    """onnxruntime's operator schemas by (domain, op type), each operator's versions
    oldest first (read once: they are what the installed onnxruntime is)."""
    from onnxruntime.capi import onnxruntime_pybind11_state as ort_state

    found: dict[tuple[str, str], list[Any]] = {}
    for schema in ort_state.get_all_operator_schema():
        found.setdefault((normalize_domain(schema.domain), schema.name), []).append(schema)
    return {key: tuple(sorted(versions, key=lambda s: s.since_version))
            for key, versions in found.items()}


def _versions(op_type: str, domain: str) -> tuple[Any, ...]:
    return _registry().get((normalize_domain(domain), op_type), ())


def runtime_defines_in_onnx_domain(op_type: str, domain: str, opset: int) -> bool:
    """Whether onnxruntime defines `op_type` in ONNX's own `domain` at `opset` (its
    optimiser writes such nodes, which ONNX and onnx.checker do not know)."""
    domain = normalize_domain(domain)
    return domain in STANDARD_DOMAINS and any(
        s.since_version <= opset for s in _versions(op_type, domain))


def runtime_version() -> str:
    """The version of the installed onnxruntime (for messages)."""
    import onnxruntime

    return str(onnxruntime.__version__)


@functools.lru_cache(maxsize=1)
def runtime_domains() -> frozenset[str]:
    """The operator domains onnxruntime defines beyond ONNX's (`com.microsoft`, ...); asked
    of every custom-domain node, so made once."""
    return frozenset(domain for domain, _ in _registry() if domain not in STANDARD_DOMAINS)


def _schema_at(op_type: str, domain: str, opset: int) -> Any | None:
    """onnxruntime's schema of an operator of one of its own domains at `opset`."""
    if normalize_domain(domain) in STANDARD_DOMAINS:
        return None  # (ONNX's, from onnx.defs)
    at = [s for s in _versions(op_type, domain) if s.since_version <= opset]
    return at[-1] if at else None


def _default_of(attr: Any) -> Any:
    """An attribute's default value, or None: onnxruntime's binding keeps it as the bytes
    of an AttributeProto, in a field it does not make public (read if present)."""
    raw = getattr(attr, "_default_value", None)
    if not isinstance(raw, bytes) or not raw:
        return None
    proto = onnx.AttributeProto()
    try:
        proto.ParseFromString(raw)
    except Exception:  # (another binding's format: no default then)
        return None
    return helper.get_attribute_value(proto) if proto.name else None


def _params(formals: Any) -> tuple[ParamSpec, ...]:
    return tuple(ParamSpec(p.name, _OPTIONS[p.option.name], p.typeStr) for p in formals)


@functools.lru_cache(maxsize=1024)
def runtime_op_spec(op_type: str, domain: str, opset: int) -> OpSpec | None:
    """The signature onnxruntime gives `domain::op_type` at `opset` of its domain, or None
    when onnxruntime defines no such operator (or only from a later version)."""
    schema = _schema_at(op_type, domain, opset)
    if schema is None or schema.deprecated:
        return None
    attributes = {name: AttrSpec(name, int(attr.type.value), bool(attr.required),
                                 _default_of(attr))
                  for name, attr in schema.attributes.items()}
    return spec_of(schema, _params(schema.inputs), _params(schema.outputs), attributes,
                   custom=True)


def infer_runtime_node(node: Node) -> list[TensorDesc | None]:
    """The output descs onnxruntime's shape inference gives `node`, an operator of one of
    its domains, from its input descs and small constant inputs (None for an output it
    leaves untyped). `ShapeInferenceError` when onnxruntime refuses the node."""
    probe, names, symbols = _probe_model(node)
    try:
        inferred = _inferred_outputs(probe.SerializeToString())
        unsure = [k for k, (elem, dims) in enumerate(inferred) if elem is not None and not dims]
        if unsure:  # onnxruntime lists a scalar and a value of unknown rank alike
            _ask_ranks(probe, unsure)
            inferred = _inferred_outputs(probe.SerializeToString())[: len(inferred)]
    except _RuntimeRefusal as refusal:
        raise ShapeInferenceError(
            f"{ir_node_label(node)}: onnxruntime "
            f"{runtime_version()} refuses it: {refusal}",
            nodes=[node.name]) from None
    typed = dict(zip(names, inferred))
    outputs: list[TensorDesc | None] = []
    for k in range(node.get_outputs_size()):
        elem_type, dims = typed.get(k, (None, []))
        if elem_type is None:
            outputs.append(None)
            continue
        if dims is not None:
            dims = [symbols.get(d, d) if isinstance(d, str) else d for d in dims]
        vi = helper.make_tensor_value_info("v", elem_type, dims)
        outputs.append(desc_from_value_info(vi))
    return outputs


def _probe_model(node: Node) -> tuple[onnx.ModelProto, list[int], dict[str, str]]:
    """A model of the node alone, with names of its own (so nodes of one signature make
    the same bytes, whatever their values and symbolic dims are called: an exporter's
    `batch`, onnx's `unk__12` per layer): each connected input a graph input of its type,
    or an initializer when it is a small constant; each output declared without a type.
    Also the node's output indices in the order the model declares them, and the symbolic
    dims' own names by the probe's (`d0`, `d1` ...)."""
    from ge.ops import inference as node_inference  # (which imports this module)

    proto = node_proto(node)
    proto.name = ""
    inputs: list[onnx.ValueInfoProto] = []
    initializers: list[onnx.TensorProto] = []
    renamed: dict[str, str] = {}  # a symbolic dim's name -> the probe's
    for i, value_name in enumerate(proto.input):
        if not value_name:
            continue
        name = f"in{i}"
        proto.input[i] = name
        value = const_value(node, i)
        # small constants with their values (a shape an output's may depend on), as onnx's
        # inference gets them; larger ones by type and shape only
        if value is not None and value.size <= node_inference.VALUE_ELEMENTS:
            initializers.append(value.to_proto(name))
            continue
        tp = type_proto(node.get_input_desc(i))
        vi = onnx.ValueInfoProto()
        vi.name = name
        if tp is not None:
            vi.type.CopyFrom(tp)
            for dim in vi.type.tensor_type.shape.dim:
                if dim.HasField("dim_param"):
                    own = renamed.setdefault(dim.dim_param, f"d{len(renamed)}")
                    dim.dim_param = own
        inputs.append(vi)
    outputs, names = [], []
    for k, value_name in enumerate(proto.output):
        if value_name:
            proto.output[k] = f"out{k}"
            outputs.append(helper.make_value_info(f"out{k}", onnx.TypeProto()))
            names.append(k)
    graph = helper.make_graph([proto], "probe", inputs, outputs, initializer=initializers)
    model = helper.make_model(graph, opset_imports=opset_imports_of(node),
                              ir_version=_PROBE_IR_VERSION)
    return model, names, {own: name for name, own in renamed.items()}


def _ask_ranks(probe: onnx.ModelProto, positions: list[int]) -> None:
    """Add to `probe` the `Shape` of each of these declared outputs as an output of its
    own, whose length is the rank (0 for a scalar, unknown for an unknown rank)."""
    graph = probe.graph
    for k in positions:
        name = graph.output[k].name
        graph.node.append(helper.make_node("Shape", [name], [f"{name}_rank"]))
        graph.output.append(helper.make_value_info(f"{name}_rank", onnx.TypeProto()))


def _refusal_text(text: str) -> str:
    """onnxruntime's message about a one-node model in the node's terms: without its
    "[ONNXRuntimeError] : 10 : INVALID_GRAPH : ... failed:" preamble, the probe's value
    names (`in0`) said as input and output positions."""
    text = text.strip().splitlines()[0] if text.strip() else ""
    text = re.sub(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ", "", text)
    text = text.split("failed:", 1)[-1]
    text = text.replace("This is an invalid model. ", "").replace(" in node ()", "")
    text = text.split(" , Error ", 1)[-1]  # (after its restatement of the node's signature)
    text = re.sub(r"^Node \(\) Op \(\w+\) ", "", text)
    text = re.sub(r"\bin(\d+)\b", r"input \1", text)
    return re.sub(r"\bout(\d+)\b", r"output \1", text).strip()


class _RuntimeRefusal(Exception):
    """onnxruntime would not create a session of the one-node model (its message)."""


_ORT_TYPE_PREFIX = "tensor("


@functools.lru_cache(maxsize=4096)
def _inferred_outputs(model_bytes: bytes
                      ) -> tuple[tuple[int | None, list[Any] | None], ...]:
    """(ONNX element type or None, dims) of each declared output of a one-node model, as
    onnxruntime's graph resolution types them."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    try:
        session = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
    except Exception as err:  # onnxruntime raises its own exception types
        raise _RuntimeRefusal(_refusal_text(str(err)) or type(err).__name__) from None
    found: list[tuple[int | None, list[Any] | None]] = []
    declared = session.get_outputs()
    ranks = {o.name[: -len("_rank")]: o.shape for o in declared if o.name.endswith("_rank")}
    for output in declared:
        if output.name.endswith("_rank"):
            continue
        kind = output.type or ""
        if not (kind.startswith(_ORT_TYPE_PREFIX) and kind.endswith(")")):
            found.append((None, []))  # a sequence, map or optional: left untyped
            continue
        elem_type = getattr(onnx.TensorProto, kind[len(_ORT_TYPE_PREFIX):-1].upper(), None)
        dims: list[Any] | None = [d if isinstance(d, (int, str)) else None
                                  for d in (output.shape or [])]
        rank = ranks.get(output.name)
        if not dims and rank is not None and not (rank and isinstance(rank[0], int)):
            dims = None  # its Shape has no known length: the rank is unknown
        found.append((elem_type if isinstance(elem_type, int) else None, dims))
    return tuple(found)
