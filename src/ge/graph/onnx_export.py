"""`Graph` → ONNX `ModelProto`.

`Data` nodes become graph inputs (ordered by `index`), `Const` nodes become initializers
(or the `Constant` operators they were read from), the `NetOutput` node's inputs become graph
outputs, and the other nodes are written in topological order. A node still equal to the
`NodeProto` it was read from is written as that proto; value infos are written for every
output whose desc is known. Control edges have no ONNX form and are not written (documented
in docs/graph.md); orphan subgraphs (`Graph.add_subgraph`) neither.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

import onnx
from onnx import AttributeProto

from ge.errors import GraphError
from ge.graph.attributes import GRAPH_KINDS, encode_attr
from ge.graph.graph import CONST, DATA, NET_OUTPUT, Graph
from ge.graph.node import Node
from ge.graph.tensor import Tensor
from ge.graph.tensor_desc import TensorDesc
from ge.graph.value_info import named_value_info, value_info_from_desc

__all__ = ["graph_to_model"]

A = AttributeProto


# Where `Const` tensors go while a model is written: `save` with external data writes large
# tensors straight into the data file instead of copying them into the model proto first
# (a context variable, so concurrent exports in other threads are not affected).
TensorSink = Callable[[Tensor, str], "onnx.TensorProto | None"]
_TENSOR_SINK: ContextVar[TensorSink | None] = ContextVar("ge_tensor_sink", default=None)


def graph_to_model(graph: Graph, *, tensor_sink: TensorSink | None = None) -> onnx.ModelProto:
    """The ONNX model of `graph` with the model fields of its root (opsets, producer, ...).

    `tensor_sink(tensor, name)` may return the initializer proto to write for a constant
    (e.g. one pointing into an external data file), or None to write it inline.
    """
    token = _TENSOR_SINK.set(tensor_sink)
    try:
        return _graph_to_model(graph)
    finally:
        _TENSOR_SINK.reset(token)


def _graph_to_model(graph: Graph) -> onnx.ModelProto:
    info = graph.root_graph().model
    model = onnx.ModelProto()
    model.ir_version = info.ir_version
    source = info.opset_source
    if [(op.domain, op.version) for op in source] == list(info.opset_imports.items()):
        model.opset_import.extend(source)  # as read: an untouched model saves byte-identical
    else:
        for domain, version in info.opset_imports.items():
            op = model.opset_import.add()
            if domain:
                op.domain = domain
            op.version = version
    for field in ("producer_name", "producer_version", "domain", "model_version", "doc_string"):
        value = getattr(info, field)
        if value:
            setattr(model, field, value)
    for key, value in info.metadata_props.items():
        prop = model.metadata_props.add()
        prop.key = key
        prop.value = value
    model.functions.extend(info.functions)
    if info.extras is not None:
        model.training_info.extend(info.extras.training_info)
        model.configuration.extend(info.extras.configuration)
    write_graph(graph, model.graph)
    return model


# Exported names of values whose ONNX name changes on the way out: a producer now feeding a
# graph output gets that output's original name, so the model keeps its interface.
Renames = dict[tuple[Node, int], str]


def _value_name(producer: tuple[Node, int] | None, renames: Renames) -> str:
    if producer is None:
        return ""
    if renames:
        renamed = renames.get(producer)
        if renamed is not None:
            return renamed
    return producer[0]._out_names[producer[1]]


def _output_renames(graph: Graph, net_output: Node, inherited: Renames) -> Renames:
    """Keep graph output names stable when a pass gave an output a new producer.

    Output i's producer is exported under the name output i had when the model was read,
    unless that name is still produced by another value in scope, the producer is a graph
    input (renaming it would change the inputs), or the producer already feeds another
    output under a different name.
    """
    renames = dict(inherited)
    wanted = graph._output_names
    taken = set(renames.values())
    for i, producer in enumerate(net_output._inputs):
        if producer is None or i >= len(wanted) or not wanted[i]:
            continue
        name = wanted[i]
        current = producer[0]._out_names[producer[1]]
        if (current == name or producer in renames or name in taken
                or producer[0]._type == DATA or graph.find_value(name) is not None):
            continue
        renames[producer] = name
        taken.add(name)
    return renames


def _tensor_proto(tensor: Tensor, name: str) -> onnx.TensorProto:
    source = tensor._source_proto()
    if source is not None and source.name == name:
        return source  # appended (copied) by the caller; no second copy
    return tensor.to_proto(name)


def _constant_origin(node: Node) -> bool:
    return node._proto is not None


def _touches(node: Node, renames: Renames) -> bool:
    return any(p in renames for p in node._inputs) or any(
        (node, i) in renames for i in range(len(node._out_names)))


def _node_proto(node: Node, renames: Renames) -> onnx.NodeProto:
    if node._clean and node._proto is not None and not (renames and _touches(node, renames)):
        return node._proto
    proto = onnx.NodeProto()
    source = node._proto
    if source is not None:
        # Start from the proto the node was read from, so the fields the IR does not model
        # (doc string, metadata, overload, device configurations, any later addition) come
        # along byte for byte; what the IR owns is rewritten below.
        proto.CopyFrom(source)
        for field in ("input", "output", "attribute"):
            proto.ClearField(field)
    if node._type == CONST:
        proto.op_type = "Constant"
        value = node._attr_value("value")
        proto.attribute.append(onnx.helper.make_attribute("value", value.to_proto()))
    else:
        proto.op_type = node._type
        if proto.domain != node._domain:  # unset fields stay unset (byte-identical saves)
            proto.domain = node._domain
        source_attrs = {a.name: a for a in source.attribute} if source is not None else {}
        for key, stored in node._attrs.items():
            attr = encode_attr(key, stored, lambda g: _graph_proto(g, renames))
            original = source_attrs.get(key)
            if attr.type in GRAPH_KINDS and original is not None and original.doc_string:
                # Subgraphs are always written anew; keep the doc string the attribute had.
                attr.doc_string = original.doc_string
            proto.attribute.append(attr)
    name = node._export_name if node._export_name is not None else node._name
    if proto.name != name:
        proto.name = name
    proto.input.extend([_value_name(p, renames) for p in node._inputs])
    proto.output.extend([_value_name((node, i), renames) if value else ""
                         for i, value in enumerate(node._out_names)])
    return proto


def _graph_proto(graph: Graph, renames: Renames) -> onnx.GraphProto:
    gp = onnx.GraphProto()
    write_graph(graph, gp, renames)
    return gp


def _value_info(name: str, slot: TensorDesc | onnx.ValueInfoProto | None) -> onnx.ValueInfoProto:
    if slot is None:
        vi = onnx.ValueInfoProto()
        vi.name = name
        return vi
    if isinstance(slot, onnx.ValueInfoProto):
        return named_value_info(slot, name)
    return value_info_from_desc(name, slot)


def write_graph(graph: Graph, gp: onnx.GraphProto, renames: Renames | None = None) -> None:
    """Fill `gp` with `graph` (recursing into subgraph attributes, which see `renames`)."""
    renames = dict(renames or {})
    sink = _TENSOR_SINK.get()
    net_outputs = graph.nodes_of_type(NET_OUTPUT)
    if len(net_outputs) > 1:
        raise GraphError(f"graph {graph._name!r} has more than one NetOutput node",
                         nodes=[n._name for n in net_outputs])
    if net_outputs and graph._output_names:
        renames = _output_renames(graph, net_outputs[0], renames)
    if graph._name:
        gp.name = graph._name
    order = graph.topological_order()
    extras = graph._onnx_extras
    if extras is not None:
        if extras.doc_string:
            gp.doc_string = extras.doc_string
        gp.metadata_props.extend(extras.metadata_props)
        gp.quantization_annotation.extend(extras.quantization_annotation)

    data_nodes = graph.get_data_nodes()
    gp.input.extend([_value_info(n._out_names[0], n._out_slot(0)) for n in data_nodes])

    initializers: list[onnx.TensorProto] = []
    sparse: list[onnx.SparseTensorProto] = []
    protos: list[onnx.NodeProto] = []
    value_infos: list[onnx.ValueInfoProto] = []
    net_output: Node | None = None
    for node in order:
        op_type = node._type
        if op_type == DATA:
            continue
        if op_type == NET_OUTPUT:
            net_output = node
            continue
        if op_type == CONST and not _constant_origin(node):
            name = _value_name((node, 0), renames)
            if "value" in node._attrs:
                tensor = node._attr_value("value")
                sunk = sink(tensor, name) if sink is not None else None
                initializers.append(sunk if sunk is not None else _tensor_proto(tensor, name))
            elif "sparse_value" in node._attrs:
                sparse.append(node._attr_value("sparse_value"))
            else:
                raise GraphError(f"Const node {node._name!r} has no value", nodes=[node._name])
        else:
            protos.append(_node_proto(node, renames))
        descs = node._out_descs
        if descs is None or descs.count(None) == len(descs):
            continue  # nothing known about the outputs: no value_info (the common case)
        for i, slot in enumerate(descs):
            if slot is not None and node._out_names[i]:
                value_infos.append(_value_info(_value_name((node, i), renames), slot))
    gp.initializer.extend(initializers)
    if graph._input_defaults:
        gp.initializer.extend(graph._input_defaults.values())
    gp.sparse_initializer.extend(sparse)
    gp.node.extend(protos)

    if net_output is not None:
        in_descs = net_output._in_descs
        outputs = []
        for i, producer in enumerate(net_output._inputs):
            if producer is None:
                raise GraphError(
                    f"graph {graph._name!r}: output {i} (input {i} of {net_output._name!r}) "
                    "is not connected", nodes=[net_output._name])
            name = _value_name(producer, renames)
            slot = in_descs[i] if in_descs is not None else None
            if slot is None:
                slot = producer[0]._out_slot(producer[1])
            outputs.append(_value_info(name, slot))
        gp.output.extend(outputs)
        output_names = {vi.name for vi in outputs}
        value_infos = [vi for vi in value_infos if vi.name not in output_names]
    gp.value_info.extend(value_infos)
    gp.value_info.extend(graph._stray_value_info)
