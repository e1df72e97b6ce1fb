"""One IR node seen as ONNX: its `NodeProto`, input value names, constant inputs (their
values, small integer ones as lists, a Slice's arguments), opsets.

Shared by per-node inference and constant evaluation, which both hand a single node to
onnx (its inference functions, its reference evaluator).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import AttributeProto, helper

from ge.errors import GeError, GraphError
from ge.graph.graph import CONST, DATA, NET_OUTPUT
from ge.graph.node import Node, overload_of
from ge.graph.places import ir_node_label
from ge.graph.tensor import Tensor
from ge.graph.tensor_desc import TensorDesc
from ge.graph.types import DataType
from ge.graph.value_info import holds_non_tensor, value_info_from_desc
from ge.ops.schemas import OpSpec, get_op_spec, latest_opset, normalize_domain

__all__ = [
    "STRUCTURAL",
    "const_ints",
    "const_value",
    "encode_attribute",
    "get_attr_or_default",
    "input_connected",
    "input_value_name",
    "node_opset",
    "node_proto",
    "node_spec",
    "outer_inputs",
    "slice_arguments",
    "type_proto",
]

STRUCTURAL = frozenset({DATA, CONST, NET_OUTPUT})
A = AttributeProto


def node_opset(node: Node) -> int:
    """The opset of the node's domain in its model (onnx's newest when the model has none)."""
    graph = node.owner_graph
    domain = normalize_domain(node.domain)
    version = graph.get_opset_version(domain) if graph is not None else None
    if version is None:
        if domain in ("", "ai.onnx.ml", "ai.onnx.preview", "ai.onnx.preview.training"):
            return latest_opset(domain)
        return 2**31 - 1  # a custom domain the model does not list: the registered schema
    return version


def node_spec(node: Node) -> OpSpec:
    """The schema of a node at its model's opset (`OpNotFoundError` if there is none)."""
    return get_op_spec(node.type, node_opset(node), node.domain)


def get_attr_or_default(node: Node, name: str) -> Any:
    """The node's attribute `name`, or when it is not set the default its operator's schema
    gives at the node's opset (`Transpose.perm` has none: reversed dims), in the form
    `get_attr` gives (a str, an int, a float, a list): what a pass reads to judge a
    match (onnxscript's `get_int(name, default)`; a ✚ extension: GE's `get_attr` has no
    default). `GraphError` when it is neither set nor defaulted (a required attribute, one
    the schema does not have, an operator ge knows no schema of)."""
    if node.has_attr(name):
        return node.get_attr(name)
    where = ir_node_label(node)
    try:
        spec = node_spec(node)
    except GeError:
        raise GraphError(f"{where} has no attribute {name!r}, and ge knows no schema of its "
                         "operator to take a default from", nodes=[node.name]) from None
    attr = spec.attributes.get(name)
    if attr is None:
        known = ", ".join(sorted(spec.attributes)) or "none"
        raise GraphError(f"{where} has no attribute {name!r}: its operator has no such "
                         f"attribute (its attributes: {known})", nodes=[node.name])
    if attr.default is None:
        why = ("the operator requires it" if attr.required else
               "the operator gives its absence a meaning of its own")
        raise GraphError(f"{where} has no attribute {name!r}, and it has no default ({why})",
                         nodes=[node.name])
    return _as_read(attr.default)


def _as_read(value: Any) -> Any:
    """A schema's default as `Node.get_attr` gives a set attribute: text as str."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return [_as_read(v) for v in value]
    return value


def input_value_name(node: Node, index: int) -> str:
    """The ONNX value name feeding input `index` ("" when the input is absent)."""
    producer = node.get_input_producer(index)
    if producer is None:
        return ""
    return producer[0].get_output_name(producer[1])


def const_value(node: Node, index: int) -> Tensor | None:
    """The value of input `index` when its producer is a `Const` node (of any enclosing
    graph; not an operator of a custom domain that happens to be called Const), else None."""
    producer = node.get_input_producer(index)
    if producer is None:
        return None
    src = producer[0]
    if src.type != CONST or src.domain or not src.has_attr("value"):
        return None
    value = src.get_attr("value")
    return value if isinstance(value, Tensor) else None


def type_proto(desc: TensorDesc | None) -> onnx.TypeProto | None:
    """The ONNX type of a desc, or None when its element type is not known; a sequence's,
    an optional's or a map's as its source says (`holds_non_tensor`)."""
    if desc is not None and holds_non_tensor(desc):
        assert desc._source is not None
        return desc._source.type
    if desc is None or desc.data_type == DataType.DT_UNDEFINED:
        return None
    return value_info_from_desc("v", desc).type


def encode_attribute(name: str, kind: int, value: Any) -> onnx.AttributeProto:
    """An ONNX attribute from a value as `Node.get_attr` returns it."""
    if kind == A.GRAPH:
        return helper.make_attribute(name, value.to_onnx().graph, attr_type=A.GRAPH)
    if kind == A.GRAPHS:
        return helper.make_attribute(name, [g.to_onnx().graph for g in value], attr_type=A.GRAPHS)
    if kind == A.TENSOR:
        return helper.make_attribute(name, value.to_proto(), attr_type=A.TENSOR)
    if kind == A.TENSORS:
        return helper.make_attribute(name, [t.to_proto() for t in value], attr_type=A.TENSORS)
    return helper.make_attribute(name, value, attr_type=kind)


def node_proto(node: Node) -> onnx.NodeProto:
    """The node as an ONNX `NodeProto` (subgraphs included, exported afresh)."""
    proto = onnx.NodeProto()
    proto.op_type = node.type
    proto.name = node.name
    if node.domain:
        proto.domain = node.domain
    proto.overload = overload_of(node)  # (which function a call calls)
    proto.input.extend(input_value_name(node, i) for i in range(node.get_inputs_size()))
    proto.output.extend(node.get_output_names())
    for key in node.get_attr_names():
        proto.attribute.append(encode_attribute(key, node.get_attr_kind(key), node.get_attr(key)))
    return proto


def outer_inputs(node: Node) -> dict[str, tuple[Node, int]]:
    """Values the node's subgraphs read from outside them, by value name, with producers."""
    return {p[0].get_output_name(p[1]): p for p in node.get_outer_inputs()}


def opset_imports_of(node: Node) -> list[onnx.OperatorSetIdProto]:
    """The opset imports of the node's model (or onnx's newest standard opset)."""
    graph = node.owner_graph
    imports = dict(graph.root_graph().model.opset_imports) if graph is not None else {}
    imports.setdefault("", latest_opset(""))
    domain = normalize_domain(node.domain)
    if domain not in imports:
        imports[domain] = node_opset(node)
    return [helper.make_opsetid(d, v) for d, v in imports.items()]


def input_connected(node: Node, index: int) -> bool:
    """Whether input `index` exists and is connected (an optional input may be neither)."""
    return node.get_inputs_size() > index and node.get_input_producer(index) is not None


def const_ints(node: Node, index: int) -> list[int] | None:
    """The values of a constant integer input of at most one dimension (a shape, axes,
    pads, repeats), or None when it is absent, not constant or not that."""
    value = const_value(node, index) if node.get_inputs_size() > index else None
    if value is None:
        return None
    array = np.asarray(value.numpy())
    if array.dtype.kind not in "iu" or array.ndim > 1:
        return None
    return [int(v) for v in array.reshape(-1)]


def slice_arguments(node: Node) -> tuple[list[int], list[int], list[int] | None,
                                          list[int]] | None:
    """(starts, ends, axes or None for all, steps) of a Slice when constant, else None."""
    if node_opset(node) < 10:
        if not (node.has_attr("starts") and node.has_attr("ends")):
            return None
        starts = [int(v) for v in node.get_attr("starts")]
        ends = [int(v) for v in node.get_attr("ends")]
        axes = [int(v) for v in node.get_attr("axes")] if node.has_attr("axes") else None
        return starts, ends, axes, [1] * len(starts)
    first, last = const_ints(node, 1), const_ints(node, 2)
    has_axes = input_connected(node, 3)
    axes = const_ints(node, 3) if has_axes else None
    steps = const_ints(node, 4) if input_connected(node, 4) else [1] * len(first or ())
    if first is None or last is None or (has_axes and axes is None) or steps is None:
        return None
    return first, last, axes, steps
