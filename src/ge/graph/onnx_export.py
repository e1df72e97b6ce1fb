"""`Graph` → ONNX `ModelProto`.

`Data` nodes become graph inputs (ordered by `index`), `Const` nodes become initializers
(or the `Constant` operators they were read from), the `NetOutput` node's inputs become graph
outputs, and the other nodes are written in topological order. A node still equal to the
`NodeProto` it was read from is written as that proto; value infos are written for every
output whose desc is known. Control edges have no ONNX form and are not written (documented
in docs/graph.md); orphan subgraphs (`Graph.add_subgraph`) neither. Graphs read from ONNX
keep their output names whatever produces the outputs now (`ge.graph.export_names`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from contextvars import ContextVar
from typing import Any

import onnx
from onnx import AttributeProto

from ge.errors import GraphError
from ge.graph.allocation import no_gc_pauses
from ge.graph.annotations import merge_annotations
from ge.graph.attributes import GRAPH_KINDS, encode_attr
from ge.graph.domains import ONNX_DOMAINS, defined_value_names, normalize_domain
from ge.graph.export_names import (
    OutputNames,
    Renames,
    as_initializer,
    value_name,
    written_name,
)
from ge.graph.graph import CONST, DATA, NET_OUTPUT, Graph
from ge.graph.node import Node, is_const
from ge.graph.payloads import PayloadStore
from ge.graph.tensor import Tensor
from ge.graph.tensor_desc import TensorDesc
from ge.graph.types import data_type_to_onnx
from ge.graph.value_info import named_value_info, value_info_from_desc

__all__ = ["UNNAMED_PREFIX", "graph_to_model", "initializers_as_inputs"]

A = AttributeProto


# Where `Const` tensors go while a model is written: `save` with external data writes large
# tensors straight into the data file instead of copying them into the model proto first
# (a context variable, so concurrent exports in other threads are not affected).
TensorSink = Callable[[Tensor, str], "onnx.TensorProto | None"]
_TENSOR_SINK: ContextVar[TensorSink | None] = ContextVar("ge_tensor_sink", default=None)
# Where the large tensors `_TENSOR_SINK` leaves inline go while `save` writes a model: into a
# `PayloadStore`, the model proto getting placeholders (`graph_to_model(payloads=...)`).
_PAYLOADS: ContextVar[PayloadStore | None] = ContextVar("ge_payloads", default=None)
# Whether intermediate values get a value_info (`graph_to_model(value_info=...)`).
_VALUE_INFO: ContextVar[bool] = ContextVar("ge_value_info", default=True)
# Whether `Constant` operators read from ONNX are written as initializers
# (`graph_to_model(lift_constants=...)`).
_LIFT_CONSTANTS: ContextVar[bool] = ContextVar("ge_lift_constants", default=False)
# Whether nodes read without a name are written under their IR name, after
# `UNNAMED_PREFIX` (`graph_to_model(name_every_node=...)`).
_NAME_EVERY_NODE: ContextVar[bool] = ContextVar("ge_name_every_node", default=False)
#: What `name_every_node` puts before the IR name of a node the model has no name for: its
#: IR name alone may be a name another node has in the model ("Sqrt"), and an error naming
#: it would then name the wrong one (trial FF).
UNNAMED_PREFIX = "ge:"


def initializers_as_inputs(gp: onnx.GraphProto, names: Collection[str]) -> None:
    """Turn the initializers `names` of `gp` into typed graph inputs, their type and shape
    without their data (onnx's checker and shape inference need no weight's values, and a
    copy of every weight would cost more than either); one already listed as an input (IR
    version < 4) keeps that listing. The rest keep their order."""
    if not names:
        return
    listed = {vi.name for vi in gp.input}
    typed = [onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
             for t in gp.initializer if t.name in names and t.name not in listed]
    kept = [t for t in gp.initializer if t.name not in names]
    del gp.initializer[:]
    gp.initializer.extend(kept)
    gp.input.extend(typed)


def graph_to_model(graph: Graph, *, tensor_sink: TensorSink | None = None,
                   value_names: dict[tuple[Node, int], str] | None = None,
                   value_info: bool = True, lift_constants: bool = False,
                   payloads: PayloadStore | None = None,
                   name_every_node: bool = False) -> onnx.ModelProto:
    """The ONNX model of `graph` with the model fields of its root (opsets, producer, ...).

    `tensor_sink(tensor, name)` may return the initializer proto to write for a constant
    (e.g. one pointing into an external data file), or None to write it inline.
    `value_names`, when given, is filled with (node, output index) -> exported name for every
    value written under a name other than its IR name (see `OutputNames`), so a caller
    reading the model back (shape inference) can find the IR's values in it.
    `value_info=False` writes no value_info for intermediate values (inputs and outputs
    keep their types), in every graph of the model, except the outputs of calls of the
    model's own functions in custom domains (`_function_calls`). `lift_constants=True` writes the
    `Constant` operators of the model as read as initializers (of the graph they are in),
    as constants made in the IR are; a model with ir_version < 4 writes every new constant
    as a `Constant` operator (its initializers would have to be graph inputs), and the
    constants it read from initializers listed as inputs back as inputs and initializers.
    `payloads`, when given, gets the large `raw_data` tensors the sink leaves inline
    (initializers, `Constant` values, input defaults): the model holds placeholders for
    them, and only `payloads.layout` and `payloads.write` make the real file of it.
    `name_every_node=True` writes a node read without a name under its IR name after
    `UNNAMED_PREFIX` (a model handed to onnx, whose errors then say which node they are
    about).
    """
    token = _TENSOR_SINK.set(tensor_sink)
    naming = _NAME_EVERY_NODE.set(name_every_node)
    store = _PAYLOADS.set(payloads)
    typed = _VALUE_INFO.set(value_info)
    lift = _LIFT_CONSTANTS.set(lift_constants and graph.root_graph().model.ir_version >= 4)
    try:
        with no_gc_pauses():  # a proto per node, and the output-name tables: nothing freed
            names = OutputNames(graph)
            model = _graph_to_model(graph, names)
    finally:
        _NAME_EVERY_NODE.reset(naming)
        _LIFT_CONSTANTS.reset(lift)
        _VALUE_INFO.reset(typed)
        _PAYLOADS.reset(store)
        _TENSOR_SINK.reset(token)
    if value_names is not None:
        value_names.update(names.renames)
    return model


def _graph_to_model(graph: Graph, names: OutputNames) -> onnx.ModelProto:
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
    write_graph(graph, model.graph, names)
    return model


def _tensor_proto(tensor: Tensor, name: str) -> onnx.TensorProto:
    source = tensor._source_proto()
    if source is not None and source.name == name:
        return source  # appended (copied) by the caller; no second copy
    return tensor.to_proto(name)


def _write_metadata(props: Any, metadata: dict[str, str]) -> None:
    """Set `metadata` in a repeated StringStringEntryProto field, keeping other entries."""
    if not len(props):  # the common case: nothing to keep or to overwrite
        for key, value in metadata.items():
            props.add(key=key, value=value)
        return
    at = {entry.key: entry for entry in props}
    for key, value in metadata.items():
        entry = at.get(key)
        if entry is None:
            entry = props.add()
            entry.key = key
        entry.value = value


def _with_metadata(tensor: onnx.TensorProto, metadata: dict[str, str]) -> onnx.TensorProto:
    copy = onnx.TensorProto()
    copy.CopyFrom(tensor)
    _write_metadata(copy.metadata_props, metadata)
    return copy


def _input_info(read: onnx.ValueInfoProto, name: str, tensor: Tensor) -> onnx.ValueInfoProto:
    """The graph input of a constant that a model of ir_version < 4 listed as an input:
    its value info as read (renamed with the value) while it still fits the value, else
    one made from the value."""
    tt = read.type.tensor_type
    dims = list(tensor.shape)
    elem = data_type_to_onnx(tensor.data_type)
    if (read.type.HasField("tensor_type") and tt.elem_type == elem
            and tt.HasField("shape")
            and [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim] == dims):
        return read if read.name == name else named_value_info(read, name)
    return onnx.helper.make_tensor_value_info(name, elem, dims)


def _merged_inputs(inputs: list[onnx.ValueInfoProto],
                   constants: list[tuple[int, int, onnx.ValueInfoProto]]
                   ) -> list[onnx.ValueInfoProto]:
    """The real inputs with the constants' inputs (ir_version < 4) back among them, in
    their order as read (`(real inputs before it, position, info)`), each after as many
    real inputs as preceded it."""
    if not constants:
        return inputs
    merged: list[onnx.ValueInfoProto] = []
    taken = 0
    for before, _, info in sorted(constants, key=lambda item: item[1]):
        merged.extend(inputs[taken:before])
        taken = max(taken, before)
        merged.append(info)
    merged.extend(inputs[taken:])
    return merged


def _untyped(vi: onnx.ValueInfoProto) -> bool:
    """Whether a value info declares no type (or a tensor of undefined element type)."""
    which = vi.type.WhichOneof("value")
    return which is None or (which == "tensor_type" and vi.type.tensor_type.elem_type == 0)


def _typed_like_initializer(vi: onnx.ValueInfoProto, node: Node) -> onnx.ValueInfoProto:
    """`vi` (an untyped graph output) with the type of the initializer `node` writes.

    ONNX infers no type for a graph output that is an initializer of its graph, and the
    full checker then rejects an untyped one in a body ("If: Mismatched type"): a body read
    with an untyped output produced by a node (which inference types) gets that when a pass
    folds the node into a constant. The constant's type is exact, so the output says it;
    the rest of the declaration (doc string, metadata) is kept.
    """
    if "value" in node._attrs:
        typed = value_info_from_desc(vi.name, node._stored_tensor("value").get_tensor_desc())
    else:
        sparse = node._attr_value("sparse_value")
        typed = onnx.helper.make_tensor_value_info(vi.name, sparse.values.data_type,
                                                   list(sparse.dims))
    out = onnx.ValueInfoProto()
    out.CopyFrom(vi)
    out.type.CopyFrom(typed.type)
    return out


def _touches(node: Node, renames: Renames) -> bool:
    return any(p in renames for p in node._inputs) or any(
        (node, i) in renames for i in range(len(node._out_names)))


def _node_proto(node: Node, names: OutputNames) -> onnx.NodeProto:
    renames = names.renames
    if node._clean and node._proto is not None and not (renames and _touches(node, renames)):
        if node._proto.name or not _NAME_EVERY_NODE.get():
            return node._proto
        named = onnx.NodeProto()  # (the node's own proto stays as read)
        named.CopyFrom(node._proto)
        named.name = UNNAMED_PREFIX + node._name
        return named
    proto = onnx.NodeProto()
    source = node._proto
    if renames:
        inputs = [value_name(p, renames) for p in node._inputs]
        outputs = [value_name((node, i), renames) if value else ""
                   for i, value in enumerate(node._out_names)]
    else:  # the common case, inlined: saving after many touched nodes is this loop
        inputs = ["" if p is None else p[0]._out_names[p[1]] for p in node._inputs]
        outputs = node._out_names
    constant = is_const(node)  # (an operator a custom domain names Const is written as read)
    if source is not None and not constant:
        # Start from the proto the node was read from, so the fields the IR does not model
        # (doc string, metadata, overload, device configurations, any later addition) come
        # along byte for byte; of what the IR owns (an operator keeps its op type and
        # domain), only what differs is rewritten: a node touched in one respect, its
        # metadata or one input, keeps the rest as read.
        proto.CopyFrom(source)
        if inputs != source.input:
            proto.ClearField("input")
            proto.input.extend(inputs)
        if outputs != source.output:
            proto.ClearField("output")
            proto.output.extend(outputs)
        if not _attrs_as_read(node, source):
            proto.ClearField("attribute")
            _write_attrs(proto, node, source, names)
    else:
        if source is not None:  # a Constant operator read from the model
            proto.CopyFrom(source)
            for field in ("input", "output", "attribute"):
                proto.ClearField(field)
        if constant:
            proto.op_type = "Constant"
            value = node._stored_tensor("value")
            proto.attribute.append(onnx.helper.make_attribute("value", value.to_proto()))
        else:  # a node made in memory
            proto.op_type = node._type
            if node._domain:  # unset fields stay unset (byte-identical saves)
                proto.domain = node._domain
            _write_attrs(proto, node, None, names)
        proto.input.extend(inputs)
        proto.output.extend(outputs)
    name = written_name(node) or (UNNAMED_PREFIX + node._name if _NAME_EVERY_NODE.get()
                                   else "")
    if proto.name != name:
        proto.name = name
    if node._metadata:
        _write_metadata(proto.metadata_props, node._metadata)
    return proto


def _attrs_as_read(node: Node, source: onnx.NodeProto) -> bool:
    """Whether the node's attributes are still the ones of its proto, unchanged: each is
    stored as read (a set or decoded-and-changed one is stored as a value) and none was
    removed, so they are the proto's, in its order."""
    attrs = node._attrs
    return len(attrs) == len(source.attribute) and all(
        type(stored) is AttributeProto for stored in attrs.values())


def _write_attrs(proto: onnx.NodeProto, node: Node, source: onnx.NodeProto | None,
                 names: OutputNames) -> None:
    """Append the node's attributes (bodies written anew) to `proto`, in the node's order."""
    source_attrs = {a.name: a for a in source.attribute} if source is not None else {}
    for key, stored in node._attrs.items():
        attr = encode_attr(key, stored, lambda g: _graph_proto(g, names))
        original = source_attrs.get(key)
        if attr.type in GRAPH_KINDS and original is not None and original.doc_string:
            # Subgraphs are always written anew; keep the doc string the attribute had.
            attr.doc_string = original.doc_string
        proto.attribute.append(attr)


def _function_calls(graph: Graph) -> frozenset[tuple[str, str]]:
    """(domain, name) of the model-local functions of `graph`'s model in domains other
    than ONNX's: their calls' outputs are declared even without value_info for the rest.
    onnx types a call only by inferring the function's body, with its own schemas: one
    using a custom operator leaves the call's outputs untyped to onnx's checker (which
    then fails the standard node reading them) and to runtimes, unless the file says."""
    functions = graph.root_graph().model.functions
    return frozenset((normalize_domain(f.domain), f.name) for f in functions
                     if normalize_domain(f.domain) not in ONNX_DOMAINS)


def _graph_proto(graph: Graph, names: OutputNames) -> onnx.GraphProto:
    gp = onnx.GraphProto()
    write_graph(graph, gp, names)
    return gp


def _annotated(vi: onnx.ValueInfoProto, notes: dict[str, onnx.ValueInfoProto]
               ) -> onnx.ValueInfoProto:
    """`vi` with what the file's declaration of its value said beside the type (metadata,
    doc string), which a desc inference made afresh no longer carries: a copy for a
    declared value (a desc's source proto is never changed), else `vi` itself."""
    note = notes.get(vi.name)
    if note is None:
        return vi
    copy = onnx.ValueInfoProto()
    copy.CopyFrom(vi)
    merge_annotations(note, copy)
    return copy


def _value_info(name: str, slot: TensorDesc | onnx.ValueInfoProto | None) -> onnx.ValueInfoProto:
    if slot is None:
        vi = onnx.ValueInfoProto()
        vi.name = name
        return vi
    if isinstance(slot, onnx.ValueInfoProto):
        return named_value_info(slot, name)
    return value_info_from_desc(name, slot)


def write_graph(graph: Graph, gp: onnx.GraphProto, names: OutputNames | None = None) -> None:
    """Fill `gp` with `graph`, recursing into subgraph attributes; `names` holds the output
    names and renames of the whole export (None: `graph` is the model's graph)."""
    if names is None:
        names = OutputNames(graph)
    renames = names.renames  # filled further by the subgraphs' plans, for their own values
    sink = _TENSOR_SINK.get()
    store = _PAYLOADS.get()
    typed = _VALUE_INFO.get()
    lift = _LIFT_CONSTANTS.get()
    old_ir = graph.root_graph().model.ir_version < 4
    calls = _function_calls(graph) if not typed else frozenset()
    net_outputs = graph.nodes_of_type(NET_OUTPUT)
    if len(net_outputs) > 1:
        raise GraphError(f"graph {graph._name!r} has more than one NetOutput node",
                         nodes=[n._name for n in net_outputs])
    output_names: list[str] = []
    identities: list[onnx.NodeProto] = []
    if net_outputs:
        net_output = net_outputs[0]
        for i, producer in enumerate(net_output._inputs):
            if producer is None:
                raise GraphError(
                    f"graph {graph._name!r}: output {i} (input {i} of {net_output._name!r}) "
                    "is not connected", nodes=[net_output._name])
        output_names, identities = names.plan(graph, net_output)
    if graph._name:
        gp.name = graph._name
    order = graph.topological_order()
    extras = graph._onnx_extras
    if extras is not None:
        if extras.doc_string:
            gp.doc_string = extras.doc_string
        gp.metadata_props.extend(extras.metadata_props)

    data_nodes = graph.get_data_nodes()
    inputs = [_value_info(n._out_names[0], n._out_slot(0)) for n in data_nodes]
    constant_inputs = graph._initializer_inputs if old_ir else {}
    kept_inputs: list[tuple[int, int, onnx.ValueInfoProto]] = []

    initializers: list[onnx.TensorProto] = []
    sparse: list[onnx.SparseTensorProto] = []
    protos: list[onnx.NodeProto] = []
    value_infos: list[onnx.ValueInfoProto] = []
    for node in order:
        op_type = node._type
        if op_type in (DATA, NET_OUTPUT):
            continue
        constant = op_type == CONST and not node._domain  # (`is_const`, inlined)
        as_input = constant and constant_inputs.get(node._out_names[0])
        if constant and (as_input or as_initializer(node, lift, old_ir)):
            name = value_name((node, 0), renames)
            if as_input and "value" in node._attrs:
                before, position, read = as_input
                kept_inputs.append((before, position,
                                    _input_info(read, name, node._stored_tensor("value"))))
            if "value" in node._attrs:
                tensor = node._stored_tensor("value")
                sunk = sink(tensor, name) if sink is not None else None
                if sunk is None and store is not None and store.takes(tensor):
                    sunk = store.initializer(tensor, name)
                initializer = sunk if sunk is not None else _tensor_proto(tensor, name)
                if node._metadata:
                    initializer = _with_metadata(initializer, node._metadata)
                initializers.append(initializer)
            elif "sparse_value" in node._attrs:
                sparse.append(node._attr_value("sparse_value"))
            else:
                raise GraphError(f"Const node {node._name!r} has no value", nodes=[node._name])
        elif constant and store is not None:
            protos.append(store.constant(_node_proto(node, names), node))
        else:
            protos.append(_node_proto(node, names))
        descs = node._out_descs
        if descs is None or descs.count(None) == len(descs) or not (
                typed or (calls and (node._domain, op_type) in calls)):
            continue  # nothing known about the outputs: no value_info (the common case)
        for i, slot in enumerate(descs):
            if slot is not None and node._out_names[i]:
                value_infos.append(_value_info(value_name((node, i), renames), slot))
    gp.input.extend(_merged_inputs(inputs, kept_inputs))
    if graph._input_defaults:
        defaults = [t for t in graph._input_defaults.values()
                    if isinstance(t, onnx.TensorProto)]
        initializers += defaults if store is None else [store.default(t) for t in defaults]
        if graph._initializer_order is not None:
            file_order = graph._initializer_order  # (new constants after, as they come)
            initializers.sort(key=lambda t: file_order.get(t.name, len(file_order)))
        sparse += [t for t in graph._input_defaults.values()
                   if isinstance(t, onnx.SparseTensorProto)]
        if graph._sparse_order is not None:
            sparse_order = graph._sparse_order
            sparse.sort(key=lambda t: sparse_order.get(t.values.name, len(sparse_order)))
    gp.initializer.extend(initializers)
    gp.sparse_initializer.extend(sparse)
    gp.node.extend(protos)
    gp.node.extend(identities)

    if net_outputs:
        net_output = net_outputs[0]
        in_descs = net_output._in_descs
        outputs = []
        for i, producer in enumerate(net_output._inputs):
            assert producer is not None  # checked before planning
            node = producer[0]
            slot = in_descs[i] if in_descs is not None else None
            if slot is None:
                slot = node._out_slot(producer[1])
            output = _value_info(output_names[i], slot)
            if (_untyped(output) and node._graph is graph and is_const(node)
                    and output_names[i] == names.name(producer)
                    and as_initializer(node, lift, old_ir)):
                output = _typed_like_initializer(output, node)
            outputs.append(output)
        gp.output.extend(outputs)
        written = set(output_names)
        value_infos = [vi for vi in value_infos if vi.name not in written]
    if typed:
        value_infos += graph._stray_value_info
    as_read = graph._value_info_order
    if as_read is not None:  # as the file read had them (new values after, in node order)
        value_infos.sort(key=lambda vi: as_read.get(vi.name, len(as_read)))
    if extras is not None and len(extras.value_info):
        notes = {note.name: note for note in extras.value_info}
        value_infos = [_annotated(vi, notes) for vi in value_infos]
        for vi in (*gp.input, *gp.output):  # (the graph's own copies)
            if vi.name in notes:
                merge_annotations(notes[vi.name], vi)
    gp.value_info.extend(value_infos)
    if extras is not None and len(extras.quantization_annotation):
        _annotate(gp, extras, graph, renames)


def _annotate(gp: onnx.GraphProto, extras: onnx.GraphProto, graph: Graph,
              renames: Renames) -> None:
    """Write the graph's quantization annotations, but for those of values it defined when
    read and no longer defines: a quantization tool would read a removed value's
    parameters (trial Y). A value still there but written under another name (a graph
    output's, after a pass bypassed the Identity that gave it: trial II) takes its
    annotation along, unless that name has one of its own."""
    annotated = graph._annotated_values
    defined = defined_value_names(gp) if annotated else set()
    own = {a.tensor_name for a in extras.quantization_annotation}
    for annotation in extras.quantization_annotation:
        name = annotation.tensor_name
        if name in annotated and name not in defined:
            value = graph._values.get(name)
            written = renames.get(value) if value is not None else None
            if written is None or written in own or written not in defined:
                continue
            moved = onnx.TensorAnnotation()
            moved.CopyFrom(annotation)
            moved.tensor_name = written
            annotation = moved
        gp.quantization_annotation.append(annotation)
