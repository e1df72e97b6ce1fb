"""Whether each tensor of a model holds the payload its dims and element type declare.

A tensor whose stored data disagrees with its declaration (raw_data of 8 bytes for 4 floats,
float_data of 3 values for dims [4], an int64 tensor holding its values in float_data) can
only fail where it is first decoded: in a pass (a built-in one blamed as "a bug in ge"), in
onnxruntime, in `ge diff`. Loading refuses it instead (`ModelLoadError`, GE1101, naming the
tensor and where it is), and `ge inspect` says the same (`check_model_payloads`).

The check reads sizes, never values, so that loading stays as fast as it was: the element
count comes from the dims, a typed field's length from its container, and raw_data's length
from where loading learnt it without a copy (`MeasuredRaw`: the external data read, the
fields of a large file read a piece at a time). Only where none of those knows it is
`raw_data` itself measured, which protobuf (upb) does by copying it: a small tensor (the
cost of a tensor below `MEASURED_RAW_BYTES` is that of its header), or a model given as a
proto or as bytes, or read from a file of less than `PIECEWISE_FROM_BYTES`, whose parse
copied every byte already.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence

import onnx
from onnx import AttributeProto

from ge.errors import ModelLoadError
from ge.graph.declared_types import (
    ATTRIBUTE_KINDS,
    KNOWN_ELEM_TYPES,
    attribute_kind_error,
    check_declared_types,
    unknown_elem_type,
)
from ge.graph.model_text import check_graph_text, check_model_fields, check_node_text, text
from ge.graph.places import (
    BodyOwner,
    attribute_graphs,
    graph_place,
    node_label,
    proto_body_owner,
)
from ge.graph.sparse_order import sort_sparse_constant, sorted_sparse

__all__ = ["ITEM_BITS", "MEASURED_RAW_BYTES", "TENSOR_KINDS", "MeasuredRaw",
           "attribute_problem", "check_model_payloads", "external_length_problem",
           "function_problems", "node_attribute", "payload_nbytes", "payload_problem",
           "refuse", "sparse_problem"]

A = AttributeProto
T = onnx.TensorProto

#: raw_data of at least this many bytes is measured from the file's field headers when a
#: large file is read a piece at a time (`ge.graph.model_file`); smaller ones are copied to
#: be measured (a copy of a MiB costs about what reading its headers does).
MEASURED_RAW_BYTES = 2**20

#: The attribute kinds that hold tensors.
TENSOR_KINDS = frozenset({A.TENSOR, A.TENSORS, A.SPARSE_TENSOR, A.SPARSE_TENSORS})

#: id(tensor proto) -> (that proto, the length of its raw_data): lengths learnt without
#: copying the bytes (the proto is held so that its id stays its own).
MeasuredRaw = Mapping[int, tuple[onnx.TensorProto, int]]
_NONE_MEASURED: MeasuredRaw = {}


def _bits(bits: int, *names: str) -> dict[int, int]:
    """`bits` for each ONNX element type named; those the installed onnx lacks are left out."""
    return {getattr(T, n): bits for n in names if hasattr(T, n)}


#: Bits per element of the ONNX element types of a fixed size. Sub-byte types are packed
#: in `raw_data` (two int4, four int2, four float6 to three bytes), the last byte padded.
ITEM_BITS: dict[int, int] = {
    **_bits(2, "INT2", "UINT2"),
    **_bits(4, "INT4", "UINT4", "FLOAT4E2M1"),
    **_bits(6, "FLOAT6E2M3", "FLOAT6E3M2"),
    **_bits(8, "INT8", "UINT8", "BOOL", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
            "FLOAT8E5M2FNUZ", "FLOAT8E8M0"),
    **_bits(16, "INT16", "UINT16", "FLOAT16", "BFLOAT16"),
    **_bits(32, "INT32", "UINT32", "FLOAT"),
    **_bits(64, "INT64", "UINT64", "DOUBLE", "COMPLEX64"),
    **_bits(128, "COMPLEX128"),
}


def payload_nbytes(data_type: int, dims: Sequence[int]) -> int | None:
    """Payload bytes of a tensor of ONNX element type `data_type` and `dims`: the length
    of its `raw_data` (or external data), sub-byte types packed, whichever field holds it;
    None for element types of no fixed size (strings, and those `ITEM_BITS` lacks)."""
    bits = ITEM_BITS.get(data_type)
    return None if bits is None else -(-math.prod(dims) * bits // 8)


def _typed(field: str, per: tuple[int, int], *names: str) -> dict[int, tuple[str, int, int]]:
    return {getattr(T, n): (field, *per) for n in names if hasattr(T, n)}


#: The typed field each element type keeps its values in when it has no raw_data, and how
#: many entries it takes per element (numerator, denominator): a complex number is two, two
#: 4-bit elements share an int32_data entry (a byte of it), four 2-bit ones do (onnx.proto).
_TYPED_FIELD: dict[int, tuple[str, int, int]] = {
    **_typed("float_data", (1, 1), "FLOAT"),
    **_typed("float_data", (2, 1), "COMPLEX64"),
    **_typed("int32_data", (1, 1), "INT32", "INT16", "INT8", "UINT16", "UINT8", "BOOL",
             "FLOAT16", "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
             "FLOAT8E5M2FNUZ", "FLOAT8E8M0", "FLOAT6E2M3", "FLOAT6E3M2"),
    **_typed("int32_data", (1, 2), "INT4", "UINT4", "FLOAT4E2M1"),
    **_typed("int32_data", (1, 4), "INT2", "UINT2"),
    **_typed("string_data", (1, 1), "STRING"),
    **_typed("int64_data", (1, 1), "INT64"),
    **_typed("double_data", (1, 1), "DOUBLE"),
    **_typed("double_data", (2, 1), "COMPLEX128"),
    **_typed("uint64_data", (1, 1), "UINT32", "UINT64"),
}
_TYPED_FIELDS = ("float_data", "int32_data", "string_data", "int64_data", "double_data",
                 "uint64_data")


def _type_name(data_type: int) -> str:
    try:
        return T.DataType.Name(data_type)
    except ValueError:
        return f"element type {data_type}"


def _declared(proto: onnx.TensorProto) -> str:
    return f"its dims {list(proto.dims)} of {_type_name(proto.data_type)}"


def _negative_dims(proto: onnx.TensorProto) -> str | None:
    """The problem of dims with a negative entry (whose product may even look valid)."""
    if any(d < 0 for d in proto.dims):
        return f"has dims {list(proto.dims)}: a dim of a tensor cannot be negative"
    return None


def payload_problem(proto: onnx.TensorProto, measured: MeasuredRaw = _NONE_MEASURED,
                    dims: list[int] | None = None) -> str | None:
    """What disagrees between the payload `proto` holds and its dims and element type, as
    the end of a sentence naming the tensor ("holds 8 bytes of raw_data, but ..."); None when
    they agree, or when the payload is not this module's to judge: external data (checked
    as it is read, `external_length_problem`), a segment of a larger tensor, an element type
    the installed onnx does not know. `measured` holds raw_data lengths known without a
    copy; any other is measured by reading it (a copy: see the module's doc). `dims`, the
    proto's dims as a list when the caller read them (to keep).

    Run for every tensor a model has, so written for speed: a slice of the dims is a list
    made at once (iterating upb's container costs microseconds), a raw_data of the length
    needed settles it without asking whether the field is set, and what only a refusal
    needs is looked at only then (`_refined`)."""
    if dims is None:
        dims = proto.dims[:]
    count = math.prod(dims)
    bits = ITEM_BITS.get(proto.data_type)
    if bits is not None:
        need = -(-count * bits // 8)
        known = measured.get(id(proto)) if measured else None
        # (unset, raw_data is b"": a typed tensor gets here with 0)
        have = known[1] if known is not None and known[0] is proto else len(proto.raw_data)
        # (a tensor read from a data file is no longer EXTERNAL: one still marked so has
        # not been, and holds no data of its own whatever its raw_data, `_refined`)
        if (have == need and have and (len(dims) < 2 or min(dims) >= 0)
                and proto.data_location != T.EXTERNAL):
            return None
        if proto.HasField("raw_data"):
            if (have == need and min(dims, default=0) >= 0
                    and proto.data_location != T.EXTERNAL):
                return None
            return _refined(proto, _raw_problem(proto, have, need, count, bits))
    elif proto.data_type not in KNOWN_ELEM_TYPES:  # (99: a damaged file)
        return "has " + unknown_elem_type(proto.data_type)
    elif proto.HasField("raw_data"):
        if proto.data_type == T.STRING:
            return _refined(proto, "holds raw_data, which a STRING tensor cannot: its "
                            "strings go in string_data")
        return None
    spec = _TYPED_FIELD.get(proto.data_type)
    if spec is None:
        return None
    field, entries, per = spec
    need = -(-count * entries // per)
    have = len(getattr(proto, field))
    if have == need and min(dims, default=0) >= 0 and proto.data_location != T.EXTERNAL:
        return None
    return _refined(proto, _typed_problem(proto, field, have, need, entries, per))


def _refined(proto: onnx.TensorProto, problem: str) -> str | None:
    """`problem`, unless the tensor's payload is not this module's to judge (external data,
    a segment of a larger tensor), or has negative dims (said as such)."""
    if proto.data_location == T.EXTERNAL:
        if any(entry.key == "location" and entry.value for entry in proto.external_data):
            return None  # (checked as it is read)
        # (loading reads external data only from a model naming a location: this one names
        # none, and its tensor would reach a pass undecodable)
        return ("is marked as stored in an external data file but names none (no "
                "'location' entry)")
    if proto.HasField("segment"):
        return None
    return _negative_dims(proto) or problem


def _many(count: int, what: str) -> str:
    return f"{count} {what}" if count == 1 else f"{count} {what}s"


def _raw_problem(proto: onnx.TensorProto, have: int, need: int, count: int,
                 bits: int) -> str:
    size = _many(bits // 8, "byte") if bits % 8 == 0 else f"{bits} bits, packed"
    return (f"holds {_many(have, 'byte')} of raw_data, but {_declared(proto)} need {need} "
            f"({_many(count, 'element')} of {size})")


def _typed_problem(proto: onnx.TensorProto, field: str, have: int, need: int,
                   entries: int, per: int) -> str:
    elsewhere = [f for f in _TYPED_FIELDS if f != field and len(getattr(proto, f))]
    packing = ("" if (entries, per) == (1, 1) else
               " (a real and an imaginary part each)" if per == 1 else
               f" ({per} elements to an entry)")
    if have == 0 and elsewhere:
        return (f"holds its values in {elsewhere[0]}, which a tensor of "
                f"{_type_name(proto.data_type)} does not use: {_declared(proto)} need "
                f"{_many(need, 'value')} in {field}{packing}")
    if have == 0:
        return (f"holds no data, but {_declared(proto)} need {_many(need, 'value')} in "
                f"{field}{packing}")
    return (f"holds {_many(have, 'value')} in {field}, but {_declared(proto)} need {need}"
            f"{packing}")


def sparse_problem(sparse: onnx.SparseTensorProto, measured: MeasuredRaw = _NONE_MEASURED
                   ) -> str | None:
    """`payload_problem` of a sparse tensor's values and indices (each a tensor with dims
    of its own), and whether they agree: [NNZ] values, [NNZ] or [NNZ, rank] indices."""
    for part, tensor in (("values", sparse.values), ("indices", sparse.indices)):
        problem = payload_problem(tensor, measured)
        if problem is not None:
            return f"(its {part}) {problem}"
    values, indices = list(sparse.values.dims), list(sparse.indices.dims)
    rank = len(sparse.dims)
    if len(values) != 1 or indices not in (values, [values[0], rank]):
        return (f"has values of dims {values} and indices of dims {indices}: a sparse tensor "
                f"of rank {rank} holds values of dims [NNZ] and indices of dims [NNZ] or "
                f"[NNZ, {rank}]")
    return None


def attribute_problem(attr: onnx.AttributeProto, measured: MeasuredRaw = _NONE_MEASURED
                      ) -> str | None:
    """The first payload problem of a tensor attribute (`TENSOR_KINDS`), said after the
    attribute's name: "'value' holds 8 bytes of raw_data, but ..."."""
    kind = attr.type
    if kind == A.TENSOR:
        problem = payload_problem(attr.t, measured)
    elif kind == A.SPARSE_TENSOR:
        problem = sparse_problem(attr.sparse_tensor, measured)
    else:
        problem = None
        items: Iterable[onnx.TensorProto | onnx.SparseTensorProto] = (
            attr.tensors if kind == A.TENSORS else attr.sparse_tensors)
        for i, item in enumerate(items):
            found = (payload_problem(item, measured) if isinstance(item, onnx.TensorProto)
                     else sparse_problem(item, measured))
            if found is not None:
                problem = f"(tensor {i} of the list) {found}"
                break
    return None if problem is None else f"{attr.name!r} {problem}"


def external_length_problem(tensor: onnx.TensorProto, length: int) -> str | None:
    """What disagrees between the `length` bytes of external data a tensor's entries record
    and its dims and element type; None when they agree or the type has no fixed size."""
    need = payload_nbytes(tensor.data_type, tensor.dims)
    if need is None or (need == length and need >= 0):
        return None
    negative = _negative_dims(tensor)
    if negative is not None:
        return f"tensor {tensor.name!r} {negative}"
    return (f"tensor {tensor.name!r}: its external data is recorded as "
            f"{_many(length, 'byte')}, but {_declared(tensor)} need {need}")


def refuse(what: str, problem: str, nodes: Iterable[str] = ()) -> ModelLoadError:
    """The `ModelLoadError` (GE1101) for a tensor whose payload disagrees with its
    declaration: `what` names it and where it is ("graph 'g': initializer 'w'")."""
    return ModelLoadError(
        f"{what} {problem}: the model is malformed (a damaged file, or an exporter that "
        "wrote the tensor wrong)", nodes=nodes)


# -- a whole ModelProto (`ge inspect`, which reads no Graph), and functions (loading) ------

Problem = tuple[str, str, tuple[str, ...]]  # (what: the tensor and where, problem, nodes)


def node_attribute(where: str, node: onnx.NodeProto, index: int) -> str:
    """How a tensor attribute's problem names its node, at `index` in the node list, after
    `where` ("graph 'g'"): the attribute's name follows ("graph 'g': Constant node 'c':
    attribute 'value' holds ..."; a node of no name by its index and outputs,
    `node_label`)."""
    label = node_label(node.op_type, node.name, domain=node.domain, index=index,
                       outputs=node.output)
    return f"{where}: {label}: attribute"


def _node_problems(nodes: Iterable[onnx.NodeProto], where: str, measured: MeasuredRaw,
                   within: BodyOwner | None = None, function: str = "",
                   sort_sparse: bool = False, texts: bool = False) -> Iterator[Problem]:
    """The problems of `nodes` (the node list of the graph `where` names, a body of
    `within`'s node, or of `function`) and of the bodies they hold; with `sort_sparse`,
    the sparse tensors found sound sorted as loading sorts them (`function_problems`);
    with `texts`, their text fields checked too (`ge.graph.model_text`: raised)."""
    for index, node in enumerate(nodes):
        if texts:
            check_node_text(node, index, where)
        for attr in node.attribute:
            kind = attr.type
            if kind not in ATTRIBUTE_KINDS:
                raise attribute_kind_error(node_attribute(where, node, index), attr)
            if kind in TENSOR_KINDS:
                problem = attribute_problem(attr, measured)
                if problem is not None:
                    yield (node_attribute(where, node, index), problem,
                           (node.name,) if node.name else ())
                elif sort_sparse and kind == A.SPARSE_TENSOR:
                    sort_sparse_constant(node)  # (a Constant's sparse_value; nothing else)
            else:
                for label, body in attribute_graphs(attr):
                    owner = proto_body_owner(node, index, label, within)
                    if texts:
                        text(body.name, f"{where}: the name of a subgraph ({owner})")
                    place = graph_place(repr(body.name), owner)
                    yield from _graph_problems(body, f"{place} in {function}" if function
                                               else place, measured, owner, function,
                                               sort_sparse, texts)


def _graph_problems(graph: onnx.GraphProto, where: str, measured: MeasuredRaw,
                    owner: BodyOwner | None = None, function: str = "",
                    sort_sparse: bool = False, texts: bool = False) -> Iterator[Problem]:
    """The tensors of `graph` (named `where`; a body of `owner`'s node, in `function`) and
    its bodies whose payload disagrees, named as loading names them
    (`ge.graph.onnx_import`); with `sort_sparse`, the sound sparse ones sorted."""
    if texts:
        check_graph_text(graph, where)
    check_declared_types(graph, where)  # (raised: loading checks them first, as it reads)
    for tensor in graph.initializer:
        problem = payload_problem(tensor, measured)
        if problem is not None:
            yield f"{where}: initializer {tensor.name!r}", problem, ()
    for sparse in graph.sparse_initializer:
        problem = sparse_problem(sparse, measured)
        if problem is not None:
            yield f"{where}: sparse initializer {sparse.values.name!r}", problem, ()
        elif sort_sparse:
            ordered = sorted_sparse(sparse)
            if ordered is not None:
                sparse.CopyFrom(ordered)
    yield from _node_problems(graph.node, where, measured, owner, function, sort_sparse,
                              texts)


def function_problems(model: onnx.ModelProto, measured: MeasuredRaw = _NONE_MEASURED, *,
                      sort_sparse: bool = False, texts: bool = False) -> Iterator[Problem]:
    """The tensors of the model's functions (their nodes' attributes, and bodies) whose
    payload disagrees. Loading keeps functions as protos, so it checks them so too; and
    with `sort_sparse` (loading) it sorts, in place, the indices of the sparse `Constant`s
    and body sparse initializers it found sound, as it does the graphs'
    (`ge.graph.sparse_order`: the one change loading makes to a function), in the same
    walk: a model's functions can hold as many nodes as its graph, and one more walk over
    their attributes would add about 45 ms per 50,000 nodes to its loading. With `texts`
    (`ge inspect`), their text fields are checked too (`ge.graph.model_text`)."""
    for function in model.functions:
        if texts:
            text(function.name, "a function's name")
            text(function.domain, f"the domain of function {function.name!r}")
            text(function.overload, f"the overload of function {function.name!r}")
        where = f"function {function.name!r} (domain {function.domain!r})"
        yield from _node_problems(function.node, where, measured, function=where,
                                  sort_sparse=sort_sparse, texts=texts)


def check_model_payloads(model: onnx.ModelProto, measured: MeasuredRaw = _NONE_MEASURED
                         ) -> None:
    """`refuse` the first tensor of `model` (its graph, bodies and functions) whose payload
    disagrees with its declaration, as the first value whose declared type
    (`ge.graph.declared_types`) or text field (`ge.graph.model_text`) is not sound: what
    loading it would say (`ge inspect`). `measured`: the raw_data lengths reading the file
    learnt (`ge.graph.model_file`), not copied."""
    check_model_fields(model)
    root = f"graph {model.graph.name or 'graph'!r}"
    for what, problem, nodes in itertools.chain(
            _graph_problems(model.graph, root, measured, texts=True),
            function_problems(model, measured, texts=True)):
        raise refuse(what, problem, nodes)
