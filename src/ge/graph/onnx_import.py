"""ONNX `ModelProto` → `Graph`.

Graph inputs become `Data` nodes, initializers and `Constant` operators become `Const` nodes,
graph outputs feed one `NetOutput` node; every value name is resolved to an edge (looking
into enclosing graphs for subgraphs' outer-scope reads). Nodes keep the `NodeProto` they were
read from, so an untouched node is written back as it came; attributes and value infos are
decoded only when asked for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import onnx
from onnx import AttributeProto

from ge.errors import ModelLoadError
from ge.graph.attributes import GRAPH_KINDS
from ge.graph.declared_types import ATTRIBUTE_KINDS, attribute_kind_error, check_declared_types
from ge.graph.domains import defined_value_names, proto_value_names
from ge.graph.graph import CONST, DATA, NET_OUTPUT, Graph, ModelInfo
from ge.graph.model_text import check_graph_text, check_model_fields
from ge.graph.model_text import text as _text
from ge.graph.node import Node
from ge.graph.payload_checks import (
    TENSOR_KINDS,
    MeasuredRaw,
    attribute_problem,
    function_problems,
    node_attribute,
    payload_problem,
    refuse,
    sparse_problem,
)
from ge.graph.places import graph_label, model_node_label, node_label
from ge.graph.sparse_order import sort_sparse_constant, sorted_sparse
from ge.graph.tensor import Tensor, string_problem

__all__ = ["CONSTANT_VALUE_ATTRIBUTES", "constant_attribute_value", "model_to_graph",
           "read_as_constant"]

A = AttributeProto
_CONSTANT_DOMAINS = ("", "ai.onnx")
#: The attributes a standard `Constant` operator may give its value in for loading to read
#: it as a constant (a `Const` node, written as an initializer); one with `sparse_value`
#: (or with more than one attribute) stays an operator, in `graph.node` as ge writes it.
CONSTANT_VALUE_ATTRIBUTES = frozenset({"value", "value_float", "value_floats", "value_int",
                                       "value_ints", "value_string", "value_strings"})


def read_as_constant(proto: onnx.NodeProto) -> bool:
    """Whether loading reads the node `proto` as a constant (`CONSTANT_VALUE_ATTRIBUTES`):
    what `ge inspect` counts as one, as `ge compile` does."""
    return (proto.op_type == "Constant" and proto.domain in _CONSTANT_DOMAINS
            and len(proto.attribute) == 1
            and proto.attribute[0].name in CONSTANT_VALUE_ATTRIBUTES)


def model_to_graph(model: onnx.ModelProto, *, check_payloads: bool = True,
                   measured: MeasuredRaw | None = None) -> Graph:
    """Build the IR of a model whose external data has already been read in.

    With `check_payloads`, a tensor whose stored data disagrees with its dims and element
    type is refused (`ge.graph.payload_checks`: its size against theirs, no value decoded;
    `measured`, the raw_data lengths loading learnt without copying them); a model ge made
    itself (a conversion of one it loaded) is not checked again."""
    if not model.HasField("graph"):
        raise ModelLoadError("the model has no graph: it is not an ONNX model or it is truncated")
    if model.ir_version > onnx.IR_VERSION:
        raise ModelLoadError(
            f"the model's IR version is {model.ir_version}; onnx {onnx.__version__} reads up "
            f"to {onnx.IR_VERSION} (a newer exporter wrote it, or the file is damaged): "
            "nothing can check it, and runtimes refuse it")
    check_model_fields(model)
    graph = Graph(model.graph.name or "graph")
    graph.model = _model_info(model)
    known = (measured or {}) if check_payloads else None
    graph.model.typed_values = _read_graph(graph, model.graph, known,
                                           constant_inputs=model.ir_version < 4)
    if known is not None:  # (and their sparse Constants sorted, as the graphs')
        for what, problem, nodes in function_problems(model, known, sort_sparse=True):
            raise refuse(what, problem, nodes)
    return graph


def _model_info(model: onnx.ModelProto) -> ModelInfo:
    info = ModelInfo()
    info.ir_version = model.ir_version
    info.opset_imports = {op.domain: op.version for op in model.opset_import}
    info.opset_source = list(model.opset_import)
    info.producer_name = model.producer_name
    info.producer_version = model.producer_version
    info.domain = model.domain
    info.model_version = model.model_version
    info.doc_string = model.doc_string
    info.metadata_props = {p.key: p.value for p in model.metadata_props}
    info.functions = list(model.functions)
    if model.training_info or model.configuration:
        extras = onnx.ModelProto()
        extras.training_info.extend(model.training_info)
        extras.configuration.extend(model.configuration)
        info.extras = extras
    return info


def _check_strings(strings: Iterable[bytes], what: str) -> None:
    """ONNX strings are UTF-8 text (TensorProto.string_data); bytes that are not would fail
    later in whatever decodes them (folding, running, diffing), far from the cause."""
    problem = string_problem(strings)
    if problem is not None:
        raise ModelLoadError(f"{what} {problem}")


#: The op types the IR gives its graph inputs and outputs: an operator of that name (a
#: custom domain's) cannot be held as an operator, and would be dropped when written.
_STRUCTURAL_TYPES = frozenset({DATA, NET_OUTPUT})


def _refuse_structural(proto: onnx.NodeProto, index: int, graph: Graph) -> None:
    """A `ModelLoadError` for an operator named like the IR's graph inputs or outputs."""
    raise ModelLoadError(
        f"{_place(graph)}: {_named(proto, index)} is an operator {proto.op_type!r} of "
        f"domain {proto.domain!r}; ge names its graph inputs {DATA!r} and its graph outputs "
        f"{NET_OUTPUT!r} and cannot hold an operator of either name (it would be lost when "
        "the model is written): rename the operator (op_type) in the model and where its "
        "domain defines it", nodes=[proto.name] if proto.name else ())


def _place(graph: Graph) -> str:
    """Where a graph is, as loading errors say it (`graph_label`: a body by its owner)."""
    return graph_label(graph, loading=True)


def _node(node: Node) -> str:
    """A node read, as loading errors name it (`model_node_label`)."""
    return model_node_label(node, loading=True)


def _named(proto: onnx.NodeProto, index: int) -> str:
    """"node 'n'", or for a node of no name what finds it (`node_label`)."""
    return f"node {proto.name!r}" if proto.name else _proto_label(proto, index)


def _proto_label(proto: onnx.NodeProto, index: int) -> str:
    """`node_label` of the node `proto`, at `index` in its graph's node list."""
    return node_label(proto.op_type, proto.name, domain=proto.domain, index=index,
                      outputs=proto.output)


def _constant_tensor(proto: onnx.NodeProto, graph: Graph, index: int) -> Tensor | None:
    """The value of a standard `Constant` operator (at `index` in the node list of `graph`),
    or None for one `read_as_constant` does not read so (a sparse one: kept as an op)."""
    if len(proto.attribute) != 1 or proto.attribute[0].name not in CONSTANT_VALUE_ATTRIBUTES:
        return None
    attr = proto.attribute[0]
    strings = ([attr.s] if attr.name == "value_string" else attr.strings
               if attr.name == "value_strings" else attr.t.string_data
               if attr.name == "value" and attr.t.data_type == onnx.TensorProto.STRING else None)
    if strings is not None:
        _check_strings(strings, f"{_place(graph)}: {_proto_label(proto, index)}")
    return constant_attribute_value(attr)


def constant_attribute_value(attr: AttributeProto) -> Tensor | None:
    """The tensor a `Constant` operator's value attribute stands for (`value_floats` a float32
    vector, `value_int` an int64 scalar, ...), None for another attribute."""
    name = attr.name
    if name == "value":
        return Tensor.from_proto(attr.t)
    if name == "value_float":
        return Tensor(np.array(attr.f, dtype=np.float32))
    if name == "value_floats":
        return Tensor(np.array(list(attr.floats), dtype=np.float32))
    if name == "value_int":
        return Tensor(np.array(attr.i, dtype=np.int64))
    if name == "value_ints":
        return Tensor(np.array(list(attr.ints), dtype=np.int64))
    if name == "value_string":
        return Tensor(np.array(attr.s, dtype=object))
    if name == "value_strings":
        return Tensor(np.array(list(attr.strings), dtype=object))
    return None


def _add(graph: Graph, node: Node) -> None:
    """Index a node read from ONNX, refusing a value name defined twice (SSA) and names that
    are not text."""
    if type(node._name) is not str or type(node._type) is not str or (
            type(node._domain) is not str):
        where = f"{_place(graph)}: a node's"
        _text(node._name, f"{where} name")
        _text(node._type, f"{where} op type")
        _text(node._domain, f"{where} domain")
    values = graph._values
    for value in node._out_names:
        if type(value) is not str:
            _text(value, f"{_place(graph)}: an output name of {_node(node)}")
        if value and value in values:
            raise ModelLoadError(
                f"{_place(graph)}: value {value!r} is defined twice "
                f"(by {_node(values[value][0])} and {_node(node)})"
            )
    graph._index_node(node)


def _order_kept(names: list[str], defaults: Mapping[str, object]) -> dict[str, int] | None:
    """{name: position} of an initializer list read (dense or sparse) whose inputs'
    defaults were not all last, as saving writes them; None when they were."""
    count = sum(name in defaults for name in names)
    if not any(name in defaults for name in names[:len(names) - count]):
        return None
    return {name: i for i, name in enumerate(names)}


def _read_graph(graph: Graph, gp: onnx.GraphProto, measured: MeasuredRaw | None, *,
                constant_inputs: bool = False) -> bool:
    """Read `gp` into `graph`; whether it or one of its subgraphs declares the type of an
    intermediate value (a value_info). Its tensors' payloads are checked against their
    declarations (`ge.graph.payload_checks`) unless `measured` is None.

    `constant_inputs` (the graph of a model of ir_version < 4, where every initializer must
    also be a graph input): an input that an initializer gives a value is that constant,
    as onnxruntime reads it (it neither lists nor accepts such an input), not an input to
    feed; it becomes a `Const` node, and saving writes it back as input and initializer
    (`Graph._initializer_inputs`). From ir_version 4 such an input is an input whose
    initializer is only its default (`Graph._input_defaults`)."""
    new_node = graph._new_node
    naming = graph._naming
    # Nodes are listed in file order. ONNX requires a topological one, but files do not
    # always comply: whether this one does is seen while wiring (every edge goes forward in
    # the list) where that settles it, else on the first `topological_order()`.
    graph._order_ok = False
    # What the values' declarations say beside their types (an exporter's metadata, a doc
    # string): kept apart from the descs, which inference replaces (`write_graph`).
    notes = [vi for vi in (*gp.input, *gp.output, *gp.value_info)
             if vi.doc_string or len(vi.metadata_props)]
    if gp.doc_string or len(gp.metadata_props) or len(gp.quantization_annotation) or notes:
        check_graph_text(gp, _place(graph))  # (the text copied below)
        extras = onnx.GraphProto()
        extras.doc_string = gp.doc_string
        extras.metadata_props.extend(gp.metadata_props)
        extras.quantization_annotation.extend(gp.quantization_annotation)
        if len(gp.quantization_annotation):
            defined = defined_value_names(gp)
            graph._annotated_values = frozenset(
                a.tensor_name for a in gp.quantization_annotation if a.tensor_name in defined)
        for vi in notes:
            note = extras.value_info.add()
            note.name = vi.name
            if vi.doc_string:
                note.doc_string = vi.doc_string
            note.metadata_props.extend(vi.metadata_props)
        graph._onnx_extras = extras

    defaults: dict[str, onnx.TensorProto | onnx.SparseTensorProto] = {}
    initialized = {t.name for t in gp.initializer} if constant_inputs else set()
    index = 0
    for kind, values in (("input", gp.input), ("output", gp.output)):
        for position, vi in enumerate(values):  # (said as `ge inspect` says it)
            if type(vi.name) is not str:
                _text(vi.name, f"{_place(graph)}: the name of {kind} {position}")
    check_declared_types(gp, _place(graph))
    for position, vi in enumerate(gp.input):
        if vi.name in initialized:  # a constant (ir_version < 4): made with the initializers
            graph._initializer_inputs[vi.name] = (index, position, vi)
            continue
        node = new_node(DATA, naming.onnx_node_name(vi.name, DATA), "", 0, [vi.name],
                        {"index": (A.INT, index)}, None)
        index += 1
        node._out_slots()[0] = vi
        if node._name != vi.name:
            node._export_name = vi.name
        _add(graph, node)
    for position, tensor in enumerate(gp.initializer):
        if type(tensor.name) is not str:
            _text(tensor.name, f"{_place(graph)}: the name of initializer {position}")
        if tensor.data_type == onnx.TensorProto.STRING:
            _check_strings(tensor.string_data,
                           f"{_place(graph)}: initializer {tensor.name!r}")
        dims = None
        if measured is not None:
            dims = tensor.dims[:]  # (kept by the Tensor: saving and inference read them)
            problem = payload_problem(tensor, measured, dims)
            if problem is not None:
                raise refuse(f"{_place(graph)}: initializer {tensor.name!r}", problem)
        if tensor.name in graph._values:  # an input with a default value (IR >= 4)
            defaults[tensor.name] = tensor
            continue
        node = new_node(CONST, naming.onnx_node_name(tensor.name, CONST), "", 0, [tensor.name],
                        {"value": (A.TENSOR, Tensor.from_proto(tensor, dims))}, None)
        if len(tensor.metadata_props):  # e.g. ge.origin_pass of a constant a pass made
            node._metadata = {p.key: p.value for p in tensor.metadata_props}
        _add(graph, node)
    for sparse in gp.sparse_initializer:
        name = sparse.values.name
        if measured is not None:
            problem = sparse_problem(sparse, measured)
            if problem is not None:
                raise refuse(f"{_place(graph)}: sparse initializer {name!r}", problem)
        ordered = sorted_sparse(sparse)  # (for onnx's checker: the same dense tensor)
        if name in graph._values:  # an input with a sparse default value (IR >= 4)
            defaults[name] = ordered or sparse
            continue
        node = new_node(CONST, naming.onnx_node_name(name, CONST), "", 0, [name],
                        {"sparse_value": (A.SPARSE_TENSOR, ordered or sparse)}, None)
        _add(graph, node)
    graph._input_defaults = defaults
    if defaults:
        # (saving writes the defaults last: where the file had one among the others, keep
        # the file's order, so that an untouched model saves byte-identical)
        graph._initializer_order = _order_kept([t.name for t in gp.initializer], defaults)
        graph._sparse_order = _order_kept([t.values.name for t in gp.sparse_initializer],
                                          defaults)

    # The hot loop of loading: one pass creating the operator nodes, a second wiring their
    # inputs once every value of the graph is known.
    pending: list[Node] = []
    with_subgraphs: list[tuple[Node, onnx.NodeProto]] = []
    by_name = graph._by_name
    for position, proto in enumerate(gp.node):
        op_type = proto.op_type
        name = proto.name
        if op_type == "Constant" and proto.domain in _CONSTANT_DOMAINS:
            for attr in proto.attribute:
                if attr.type not in ATTRIBUTE_KINDS:
                    raise attribute_kind_error(node_attribute(_place(graph), proto, position),
                                               attr)
            if measured is not None:
                _check_attributes(graph, proto, position, measured)
            tensor = _constant_tensor(proto, graph, position)
            if tensor is not None:
                node = new_node(CONST, naming.onnx_node_name(name, CONST), "", 0,
                                list(proto.output), {"value": (A.TENSOR, tensor)}, proto)
                if node._name != name:
                    node._export_name = name
                _add(graph, node)
                continue
            sort_sparse_constant(proto)  # (a sparse one: indices sorted, as a sparse initializer's)
        if op_type in _STRUCTURAL_TYPES:
            _refuse_structural(proto, position, graph)
        attrs: dict = {}
        has_graph = False
        for attr in proto.attribute:
            key = attr.name
            if type(key) is not str:
                _text(key, f"{_place(graph)}: an attribute name of "
                           f"{_proto_label(proto, position)}")
            kind = attr.type
            if kind not in ATTRIBUTE_KINDS:
                raise attribute_kind_error(node_attribute(_place(graph), proto, position), attr)
            if kind in GRAPH_KINDS:
                has_graph = True
                attrs[key] = None  # decoded once the outer values are known
            else:
                attrs[key] = attr
                if kind in TENSOR_KINDS and measured is not None:
                    problem = attribute_problem(attr, measured)
                    if problem is not None:
                        raise _refused_attribute(graph, proto, position, problem)
        outputs = list(proto.output)
        unique = name if name and name not in by_name else naming.onnx_node_name(name, op_type)
        node = new_node(op_type, unique, proto.domain, len(proto.input), outputs, attrs, proto)
        if unique != name:
            node._export_name = name
        _add(graph, node)
        pending.append(node)
        if has_graph:
            with_subgraphs.append((node, proto))

    forward = True  # every edge wired so far goes forward in the list
    for node in pending:
        forward &= _wire(graph, node, node._proto.input)  # type: ignore[union-attr]  # (ops)
    typed = len(gp.value_info) > 0
    for node, proto in with_subgraphs:
        node._clean = False  # its subgraphs are written anew
        # Each body is in its attribute before it is read: what it says of its own values
        # names it by its owner and attribute (`graph_label`).
        bodies: list[tuple[Graph, onnx.GraphProto]] = []
        for attr in proto.attribute:
            if attr.type == A.GRAPH:
                bodies.append(_subgraph(node, attr.g))
                node._attrs[attr.name] = (A.GRAPH, bodies[-1][0])
            elif attr.type == A.GRAPHS:
                listed = [_subgraph(node, g) for g in attr.graphs]
                node._attrs[attr.name] = (A.GRAPHS, [sub for sub, _ in listed])
                bodies += listed
        for sub, sub_proto in bodies:
            typed |= _read_graph(sub, sub_proto, measured)

    out_node = new_node(NET_OUTPUT, naming.onnx_node_name(NET_OUTPUT, NET_OUTPUT), "",
                        len(gp.output), [], {}, None)
    _add(graph, out_node)
    forward &= _wire(graph, out_node, [vi.name for vi in gp.output])
    # Known in order when it is: unless a node owns bodies, whose outer reads are
    # dependencies of their owner too (left to `topological_order()`).
    graph._order_ok = forward and not with_subgraphs
    out_node._in_descs = list(gp.output)
    graph._output_names = [vi.name for vi in gp.output]

    stray: list[onnx.ValueInfoProto] = []
    values = graph._values
    output_names = {vi.name for vi in gp.output}
    in_order, last = True, (0, 0, 0)
    for vi in gp.value_info:
        found = values.get(vi.name)
        # A value info naming a graph input or output is kept as written: the input or output
        # declares its own type, which a value info must neither replace nor be merged into.
        if found is None:
            _text(vi.name, f"{_place(graph)}: the name of value_info {len(stray)}")
        if found is None or found[0]._type == DATA or vi.name in output_names:
            stray.append(vi)
            key = (1, len(stray), 0)
        else:
            found[0]._out_slots()[found[1]] = vi
            key = (0, found[0]._seq, found[1])
        in_order = in_order and key > last
        last = key
    graph._stray_value_info = stray
    if not in_order:  # saving keeps the file's order (see Graph._value_info_order)
        graph._value_info_order = {vi.name: i for i, vi in enumerate(gp.value_info)}
    return typed


def _check_attributes(graph: Graph, proto: onnx.NodeProto, index: int,
                      measured: MeasuredRaw) -> None:
    """Refuse a node (at `index` in the node list) whose tensor attributes hold payloads
    that disagree with their declarations (a `Constant`'s value, a `ConstantOfShape`'s)."""
    for attr in proto.attribute:
        if attr.type in TENSOR_KINDS:
            problem = attribute_problem(attr, measured)
            if problem is not None:
                raise _refused_attribute(graph, proto, index, problem)


def _refused_attribute(graph: Graph, proto: onnx.NodeProto, index: int, problem: str
                       ) -> ModelLoadError:
    return refuse(node_attribute(_place(graph), proto, index), problem,
                  [proto.name] if proto.name else ())


def _subgraph(owner: Node, gp: onnx.GraphProto) -> tuple[Graph, onnx.GraphProto]:
    """A new, empty body of `owner`, and the proto to read into it (`_unshadowed`)."""
    outer = owner._graph
    assert outer is not None  # (the owner is indexed)
    sub = Graph(_text(gp.name, f"{_place(outer)}: the name of a subgraph of "
                               f"{_node(owner)}"))
    gp = _unshadowed(outer, gp)
    outer._enclose(sub, owner)
    return sub, gp


def _unshadowed(outer: Graph, gp: onnx.GraphProto) -> onnx.GraphProto:
    """`gp`, or a copy whose inputs named like a value of an enclosing graph have new names.

    ONNX lets a body's input shadow an outer value (onnx's checker and onnxruntime accept
    a Loop body input `x` beside an outer `x`; trial Y), but ge keeps value names unique
    across scopes, so that an edge to an outer value written by name can never be read as
    the body's own. A body input binds by position, so its name is the body's alone: it
    becomes `x_1` (the first name free in the body and around it), in the body's nodes,
    outputs and value_info too, down to the bodies inside it that do not define `x`
    themselves."""
    shadowing = [vi.name for vi in gp.input if vi.name and outer.find_value(vi.name)]
    if not shadowing:
        return gp
    copy = onnx.GraphProto()
    copy.CopyFrom(gp)
    taken = set(proto_value_names(copy))
    renames: dict[str, str] = {}
    for name in shadowing:
        k = 1
        while f"{name}_{k}" in taken or outer.find_value(f"{name}_{k}") is not None:
            k += 1
        renames[name] = f"{name}_{k}"
        taken.add(renames[name])
    for vi in copy.input:
        vi.name = renames.get(vi.name, vi.name)
    _rename_reads(copy, renames)
    return copy


def _rename_reads(gp: onnx.GraphProto, renames: Mapping[str, str]) -> None:
    """Rename, in place, what `gp` reads of `renames` (node inputs, graph outputs, value
    infos), and in the graphs inside it that do not define the name again."""
    for node in gp.node:
        for i, name in enumerate(node.input):
            if name in renames:
                node.input[i] = renames[name]
        for attr in node.attribute:
            for body in (attr.g,) if attr.type == A.GRAPH else attr.graphs:
                defined = {vi.name for vi in body.input} | {t.name for t in body.initializer}
                defined.update(out for inner in body.node for out in inner.output)
                inner_renames = {k: v for k, v in renames.items() if k not in defined}
                if inner_renames:
                    _rename_reads(body, inner_renames)
    for vi in (*gp.output, *gp.value_info):
        if vi.name in renames:
            vi.name = renames[vi.name]


def _outer_value(graph: Graph, node: Node, index: int, value: str) -> tuple[Node, int]:
    _text(value, f"{_place(graph)}: input {index} of {_node(node)}")
    found = graph.find_value(value)
    if found is None and node._type == NET_OUTPUT:
        raise ModelLoadError(
            f"{_place(graph)}: graph output {index} ({value!r}) is produced by no node, "
            "graph input or initializer")
    if found is None:
        raise ModelLoadError(
            f"{_place(graph)}: input {index} of {_node(node)} reads "
            f"{value!r}, which no node, graph input or initializer produces",
            nodes=[node._name],
        )
    return found


def _wire(graph: Graph, node: Node, input_names) -> bool:
    """Connect a node's inputs by value name, through enclosing scopes (no journaling);
    whether every producer in this graph comes before the node in its list."""
    inputs = node._inputs
    values = graph._values
    seq = node._seq
    forward = True
    for i, value in enumerate(input_names):
        if not value:
            continue
        found = values.get(value)  # this graph's own values first: the common case
        if found is None:
            found = _outer_value(graph, node, i, value)
        inputs[i] = found
        producer, index = found
        if producer._seq >= seq and producer._graph is graph:
            forward = False
        consumers = producer._consumers[index]
        if consumers is None:
            producer._consumers[index] = {(node, i): None}
        else:
            consumers[(node, i)] = None
    return forward
