"""`Graph.clone()`: a deep copy of a graph hierarchy with every edge and desc mapped."""

from __future__ import annotations

import copy
from typing import Any

from ge.errors import GraphError
from ge.graph import order
from ge.graph.attributes import GRAPH_KINDS
from ge.graph.graph import Graph, ModelInfo
from ge.graph.node import DescSlot, Node
from ge.graph.tensor_desc import TensorDesc

__all__ = ["clone_graph", "copy_desc_slot"]


def _copy_model_info(info: ModelInfo) -> ModelInfo:
    out = ModelInfo()
    for field in ModelInfo.__slots__:
        value = getattr(info, field)
        setattr(out, field, copy.copy(value) if isinstance(value, (dict, list)) else value)
    return out


def copy_desc_slot(slot: DescSlot) -> DescSlot:
    return slot.copy() if isinstance(slot, TensorDesc) else slot  # protos are never mutated


def _clone_graph_nodes(graph: Graph, name: str, mapping: dict[Node, Node]) -> Graph:
    new = Graph(name)
    new._attrs = dict(graph._attrs)
    new._onnx_extras = graph._onnx_extras
    new._annotated_values = graph._annotated_values
    new._input_defaults = dict(graph._input_defaults)
    new._initializer_inputs = dict(graph._initializer_inputs)
    new._stray_value_info = list(graph._stray_value_info)
    new._value_info_order = graph._value_info_order
    new._initializer_order = graph._initializer_order
    new._sparse_order = graph._sparse_order
    new._output_names = list(graph._output_names)
    for node in order.walk(graph):
        attrs: dict[str, Any] = {}
        for key, stored in node._attrs.items():
            if isinstance(stored, tuple) and stored[0] in GRAPH_KINDS:
                value = stored[1]
                if isinstance(value, list):
                    attrs[key] = (stored[0], [_clone_graph_nodes(g, g.name, mapping)
                                              for g in value])
                else:
                    attrs[key] = (stored[0], _clone_graph_nodes(value, value.name, mapping))
            else:
                attrs[key] = stored
        twin = new._new_node(node._type, node._name, node._domain, len(node._inputs),
                             list(node._out_names), attrs, node._proto)
        twin._clean = node._clean
        twin._export_name = node._export_name
        twin._metadata = node._metadata
        if node._out_descs is not None:
            twin._out_descs = [copy_desc_slot(d) for d in node._out_descs]
        if node._in_descs is not None:
            twin._in_descs = [copy_desc_slot(d) for d in node._in_descs]
        if node._in_anchor_attrs:
            twin._in_anchor_attrs = {k: dict(v) for k, v in node._in_anchor_attrs.items()}
        if node._out_anchor_attrs:
            twin._out_anchor_attrs = {k: dict(v) for k, v in node._out_anchor_attrs.items()}
        mapping[node] = twin
        # Insert without journaling: the clone is a fresh graph nobody observes yet.
        twin._graph = new
        order.link_after(new, twin, new._tail, node._seq)
        new._nodes[twin] = None
        new._by_name[twin._name] = twin
        new._by_type.setdefault(twin._type, {})[twin] = None
        if twin._domain:
            new._count_custom(twin, 1)
        for i, value in enumerate(twin._out_names):
            if value:
                new._values[value] = (twin, i)
        for sub in twin.get_subgraphs():
            new._enclose(sub, twin)
    new._order_ok = graph._order_ok
    new._naming.copy_from(graph._naming)
    return new


def clone_graph(graph: Graph, name: str | None = None) -> Graph:
    """Copy `graph` and its subgraphs; reads of values outside the hierarchy are refused."""
    mapping: dict[Node, Node] = {}
    new = _clone_graph_nodes(graph, name or graph.name, mapping)
    if graph._parent_node is None:  # a root's orphan subgraphs are its subgraphs too
        new._orphans = [_clone_graph_nodes(g, g.name, mapping) for g in graph._orphans]
        for orphan in new._orphans:
            orphan._orphan_of = new
    new.model = _copy_model_info(graph.root_graph().model)
    for old, twin in mapping.items():
        for producer in old._inputs:
            if producer is not None and producer[0] not in mapping:
                raise GraphError(
                    f"cannot clone graph {graph.name!r}: node {old._name!r} reads "
                    f"{producer[0]._name!r} from an enclosing graph", nodes=[old._name])
        # Walk consumer sets so every output keeps its consumers in the original order.
        for k, consumers in enumerate(old._consumers):
            if consumers:
                twin._consumers[k] = {(mapping[c], j): None for c, j in consumers}
                for c, j in consumers:
                    mapping[c]._inputs[j] = (twin, k)
        if old._ctrl_in:
            twin._ctrl_in = {mapping[p]: None for p in old._ctrl_in}
        if old._ctrl_out:
            twin._ctrl_out = {mapping[s]: None for s in old._ctrl_out}
    return new
