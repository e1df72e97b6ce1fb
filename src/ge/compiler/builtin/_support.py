"""What the built-in origin-graph passes share: which nodes they may touch, and how.

The passes rewrite one graph at a time (the root or a subgraph body). They must never
change what a body reads from an enclosing graph, remove `Data` or `NetOutput` nodes, or
change a graph's output names; the predicates here say when a node is safe to rewrite.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from ge.graph import CONST, DATA, NET_OUTPUT, DataType, Graph, Node, Tensor, TensorDesc
from ge.ops.onnx_node import (
    const_ints,
    const_value,
    input_connected,
    node_opset,
    slice_arguments,
)
from ge.ops.reshape import allow_zero, reshaped_dims

if TYPE_CHECKING:
    from ge.passes import PassContext

__all__ = [
    "FLOAT_TYPES",
    "UNSOUND_DIMS",
    "allow_zero",
    "broadcasts_to",
    "const_input",
    "const_ints",
    "dims_of",
    "downstream_of",
    "feeds_net_output",
    "first_element",
    "input_connected",
    "input_dims",
    "is_operator",
    "known_dtype",
    "output_name_kept",
    "raw_bytes",
    "raw_item_size",
    "read_by_body",
    "refuse",
    "reshaped_dims",
    "retyped_name",
    "reverses_to_front",
    "rewirable",
    "same_known_dims",
    "shape_dims",
    "slice_arguments",
    "static_dims",
    "symbolic_dims",
    "tensor_nbytes",
    "unique_node_name",
    "unsound_dims",
    "used_outputs",
    "value_desc",
]

_STRUCTURAL = frozenset({DATA, CONST, NET_OUTPUT})

#: ONNX's floating-point element types (what Conv, Gemm, Gelu, Swish... take; the fusions
#: producing them check for these).
FLOAT_TYPES = frozenset({DataType.DT_FLOAT16, DataType.DT_FLOAT, DataType.DT_DOUBLE,
                         DataType.DT_BF16})


def refuse(context: PassContext | None, reason: str) -> bool:
    """Refuse a match saying why: set `reason` as the context's error message (GE's
    `set_error_message`, which the report counts and `ge passes explain` shows) and return
    False. A text per cause rather than per match (no node names, no dims) lets the report's
    few kept reasons add up the refusals of a model instead of listing its first matches."""
    if context is not None:
        context.set_error_message(reason)
    return False


def is_operator(node: Node) -> bool:
    """True for an ONNX operator node (not a graph input, constant or the graph output)."""
    return node.type not in _STRUCTURAL or bool(node.domain)


#: The operators of a quantized model's node units (QDQ format): onnxruntime groups each
#: `DequantizeLinear -> op -> QuantizeLinear` it finds into one quantized operator, and how
#: the quantizer wrote them (a pair per consumer) decides which it can group. Merging two
#: equal QuantizeLinear nodes (or the constants that would make them equal) made one feed
#: two groups, and onnxruntime then fused neither over int8 (trial BB: 2 QLinearMatMul ->
#: 0, 3.8x slower; 10 QLinearAdd -> 0 in a quantized ViT). Left as written.
_QUANTIZATION_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})
_QUANTIZATION_DOMAINS = frozenset({"", "com.microsoft"})


def is_quantization_node(node: Node) -> bool:
    """Whether `node` is a QuantizeLinear or DequantizeLinear (standard or onnxruntime's)."""
    return node.type in _QUANTIZATION_OPS and node.domain in _QUANTIZATION_DOMAINS


def quantization_parameter(node: Node) -> bool:
    """Whether `node`'s value is read as a scale or zero point of a quantization node."""
    return any(j in (1, 2) and is_quantization_node(consumer)
               for _, consumer, j in _consumers(node))


def annotation_parameters(graph: Graph) -> set[str]:
    """The names of the tensors the quantization annotations of `graph`, of the graphs it
    is inside and of the bodies inside it name (a scale, a zero point): a pass must not
    take such a tensor away while its annotation stays (`Graph.quantization_annotations`)."""
    graphs = [graph.root_graph(), *graph.root_graph().get_all_subgraphs()]
    return {name for g in graphs for tensors in g.quantization_annotations().values()
            for name in tensors.values()}


def _consumers(node: Node) -> Iterator[tuple[int, Node, int]]:
    for i in range(node.get_outputs_size()):
        for consumer, j in node.get_out_data_nodes_and_port_indexes(i):
            yield i, consumer, j


def read_by_body(node: Node) -> bool:
    """True when a subgraph body (of a node of this graph) reads one of `node`'s outputs.

    The IR represents such an outer-scope read as an edge from `node` to a node inside the
    body, so it shows as a consumer living in another graph.
    """
    graph = node.owner_graph
    return any(consumer.owner_graph is not graph for _, consumer, _ in _consumers(node))


def used_outputs(node: Node) -> list[int]:
    """The indexes of the outputs that have at least one consumer."""
    return [i for i in range(node.get_outputs_size())
            if node.get_out_data_nodes_and_port_indexes(i)]


def feeds_net_output(node: Node) -> list[int]:
    """The `NetOutput` input indexes (graph outputs) that read one of `node`'s outputs."""
    graph = node.owner_graph
    return [j for _, consumer, j in _consumers(node)
            if consumer.type == NET_OUTPUT and consumer.owner_graph is graph]


def output_name_kept(graph: Graph, index: int) -> bool:
    """Whether graph output `index` keeps its name when it gets another producer.

    A graph read from ONNX remembers its output names and export writes the new producer
    under them; a graph built in memory names its outputs after their producers, so there a
    new producer means a new output name. The IR has no public accessor for the remembered
    names yet, hence the private read.
    """
    names: list[str] = getattr(graph, "_output_names", [])
    return index < len(names) and bool(names[index])


def rewirable(node: Node) -> bool:
    """Whether `node`'s consumers may be moved to another producer and `node` removed.

    Not when a subgraph body reads it (outer reads are left alone), when it has control
    edges (their ordering would be lost), or when it produces a graph output whose name
    would change.
    """
    if node.get_in_control_nodes() or node.get_out_control_nodes():
        return False
    if read_by_body(node):
        return False
    graph = node.owner_graph
    assert graph is not None
    return all(output_name_kept(graph, j) for j in feeds_net_output(node))


#: The value of input `index` when a `Const` node (of any enclosing graph) produces it.
const_input = const_value


#: Element types whose raw bytes in a TensorProto are the bytes numpy's decoded array holds
#: (fixed size, one element per item), with their numpy dtypes.
_RAW_DTYPES = {
    int(t): np.dtype(n) for t, n in (
        (DataType.DT_FLOAT, np.float32), (DataType.DT_DOUBLE, np.float64),
        (DataType.DT_FLOAT16, np.float16), (DataType.DT_INT8, np.int8),
        (DataType.DT_INT16, np.int16), (DataType.DT_INT32, np.int32),
        (DataType.DT_INT64, np.int64), (DataType.DT_UINT8, np.uint8),
        (DataType.DT_UINT16, np.uint16), (DataType.DT_UINT32, np.uint32),
        (DataType.DT_UINT64, np.uint64), (DataType.DT_BOOL, np.bool_))}


def raw_bytes(tensor: Tensor) -> bytes | None:
    """`tensor.tobytes()` read from the TensorProto the tensor still is, without decoding
    it, when that is exact: raw data of a plain numeric type, of the right length, on a
    little-endian machine (`to_array` is `frombuffer` of those bytes then); else None.

    Decoding (`Tensor.numpy()`) costs a few microseconds even for a scalar, and a pass
    asking it of a copy (`get_attr`) pays it again each time: passes that only compare a
    constant's bytes or look at one element read them here.
    """
    proto = tensor._source_proto()
    if proto is None or sys.byteorder != "little" or not proto.HasField("raw_data"):
        return None
    if proto.data_location == onnx.TensorProto.EXTERNAL or proto.HasField("segment"):
        return None
    dtype = _RAW_DTYPES.get(int(tensor.data_type))
    if dtype is None:
        return None
    raw = proto.raw_data
    return raw if len(raw) == tensor.size * dtype.itemsize else None  # (else decoding says)


def raw_item_size(tensor: Tensor) -> int:
    """The bytes per element in `raw_bytes(tensor)` (which must not be None)."""
    return _RAW_DTYPES[int(tensor.data_type)].itemsize


def first_element(tensor: Tensor) -> Any:
    """The first element of a non-empty tensor of a plain numeric type, as numpy's decoded
    array gives it (`array.flat[0]`), read without decoding the rest; None when the tensor
    is not raw bytes (`raw_bytes`) or is empty."""
    raw = raw_bytes(tensor)
    if not raw:
        return None
    dtype = _RAW_DTYPES[int(tensor.data_type)]
    return np.frombuffer(raw, dtype=dtype, count=1)[0]


def static_dims(desc: TensorDesc) -> list[int] | None:
    """The dims of a fully known shape, or None (unknown rank, unknown or symbolic dims)."""
    shape = desc.get_shape()
    if shape.is_unknown_rank() or shape.is_unknown_shape():
        return None
    return [int(d) for d in shape]


def symbolic_dims(desc: TensorDesc) -> list[int | str] | None:
    """The dims of a shape whose every dim is a size or a named symbol, or None (unknown
    rank, or a dim with neither). One name is one size throughout a model (ONNX's rule for
    dim_param, which onnx's inference follows: `unk__3` names one size it made up), so two
    such shapes are the same shape at every size when their dims are equal."""
    shape = desc.get_shape()
    if shape.is_unknown_rank():
        return None
    dims = list(shape)
    if any(not isinstance(d, str) and d < 0 for d in dims):
        return None
    return dims


def input_dims(node: Node) -> list[int | str] | None:
    """The dims of input 0 as its desc says, static or not; None for an unknown rank or a
    missing input."""
    if node.get_input_producer(0) is None:
        return None
    shape = node.get_input_desc(0).get_shape()
    return None if shape.is_unknown_rank() else list(shape)


def shape_dims(node: Node) -> list[int | str] | None:
    """The dims a `Shape` node gives (its `start`/`end` applied), static or not; None for
    an unknown rank or a missing input."""
    dims = input_dims(node)
    if dims is None:
        return None
    rank = len(dims)

    def clamp(value: int) -> int:
        return min(max(value + rank if value < 0 else value, 0), rank)

    start = clamp(int(node.get_attr("start"))) if node.has_attr("start") else 0
    end = clamp(int(node.get_attr("end"))) if node.has_attr("end") else rank
    return dims[start:end]


def dims_of(desc: TensorDesc) -> list[int | str] | None:
    """The dims of a desc of known rank (ints, symbolic names, -1 for unknown), or None."""
    shape = desc.get_shape()
    if shape.is_unknown_rank():
        return None
    return list(shape.get_dims())


def _same_dim(a: int | str, b: int | str) -> bool:
    """Whether two dims are provably equal: equal known sizes or the same symbol."""
    if isinstance(a, int) and a < 0:
        return False
    return a == b


def broadcasts_to(dims: Sequence[int | str], target: Sequence[int | str]) -> bool:
    """Whether a tensor of `dims` broadcasts to `target` without changing it (ONNX's
    unidirectional broadcast): no higher rank, every dim 1 or equal to the target's."""
    if len(dims) > len(target):
        return False
    offset = len(target) - len(dims)
    return all(d == 1 or _same_dim(d, target[offset + i]) for i, d in enumerate(dims))


def value_desc(node: Node, index: int) -> TensorDesc:
    """The desc of the value read by input `index` of `node` (its producer's output desc)."""
    producer = node.get_input_producer(index)
    if producer is None:
        return node.get_input_desc(index)
    return producer[0].get_output_desc(producer[1])


def same_known_dims(a: Sequence[int | str], b: Sequence[int | str]) -> bool:
    """Whether two shapes agree as far as sizes are known: the same rank, and at each axis
    the same size, or no size on either side (symbols by any name: TorchScript declares a
    graph output's dims as `Mul<output>_dim_0` where its input's are `batch`). A size on
    one side only is a difference: a broadcast against a constant makes the size known."""
    return len(a) == len(b) and all(
        x == y or not (_is_size(x) or _is_size(y)) for x, y in zip(a, b, strict=True))


def _is_size(dim: int | str) -> bool:
    return isinstance(dim, int) and dim >= 0


def known_dtype(desc: TensorDesc) -> DataType | None:
    """The desc's element type, or None when it is not known."""
    dtype = desc.data_type
    return None if dtype == DataType.DT_UNDEFINED else dtype


def tensor_nbytes(tensor: Tensor) -> int:
    """The bytes a constant takes in the model (strings: their encoded lengths)."""
    array = tensor.numpy()
    if array.dtype.kind == "O":
        return sum(len(v) if isinstance(v, (bytes, str)) else 8 for v in array.flat)
    return int(array.nbytes)


def unique_node_name(graph: Graph, base: str) -> str:
    """`base`, or `base_<k>` with the smallest k free, among the node names of `graph`."""
    if not graph.has_node(base):
        return base
    k = 1
    while graph.has_node(f"{base}_{k}"):
        k += 1
    return f"{base}_{k}"


def retyped_name(name: str, old_type: str, new_type: str) -> str:
    """`name` of an `old_type` node as its `new_type` replacement should carry it: the
    exporter's scope kept and the operator in its last part swapped (`/ln/Mul_1` ->
    `/ln/Div_1`), so a name never says the wrong operator; other names are kept as given."""
    scope, slash, last = name.rpartition("/")
    if not last.startswith(old_type):
        return name
    rest = last[len(old_type):]
    if rest and not (rest[0] == "_" or rest[0].isdigit()):
        return name  # `Multiply`, not `Mul` + a counter
    return f"{scope}{slash}{new_type}{rest}"


#: Operators whose dims onnx's inference may get wrong: `Einsum`, named after one operand
#: where the runtime broadcasts (`...ij,...jk` of [1, 4, 4] and [m, 4, 4] is inferred
#: [1, 4, 4], and `bij,bjk` likewise), and `STFT`, whose absent `onesided` onnx 1.23 takes
#: as 0 where the operator's default is 1 (16 frequency bins inferred for a frame of 16,
#: 9 computed: a folded `Shape` of it was wrong; trial GG). A dim of a value computed from
#: one may be wrong, so no pass folds or merges a shape on its strength.
UNSOUND_DIMS = ("Einsum", "STFT")

#: onnxruntime reads a Slice end of at least INT32_MAX with a negative step as "to the
#: front" (`[1, 2, 3][1:INT64_MAX:-1]` is [2, 1]) where ONNX clamps it to the last index
#: and onnx's inference and reference evaluator give nothing (trial NN).
_FRONT_END = 2**31 - 1


def reverses_to_front(node: Node) -> bool:
    """Whether `node` is a Slice that onnxruntime computes otherwise than ONNX says: a
    constant negative step whose end is at least INT32_MAX (`_FRONT_END`). Its value is
    not folded and its dims not trusted."""
    if node.type != "Slice" or node.domain or not input_connected(node, 4):
        return False
    if node_opset(node) < 10:
        return False
    steps, ends = const_ints(node, 4), const_ints(node, 2)
    return steps is not None and ends is not None and any(
        step < 0 and end >= _FRONT_END for step, end in zip(steps, ends))


def downstream_of(graph: Graph, is_source: Callable[[Node], bool]) -> set[Node]:
    """The nodes of `graph` that `is_source` holds for and every node computed from one,
    at any distance (walked in the graph's order)."""
    found: set[Node] = set()
    for node in graph.topological_order():
        if is_source(node) or any(
                p is not None and p[0] in found
                for p in map(node.get_input_producer, range(node.get_inputs_size()))):
            found.add(node)
    return found


#: Operators whose bodies' declared input dims may be false: a loop-carried value may change
#: shape from one iteration to the next whatever its body input declares (onnxruntime runs
#: such a model).
LOOPS = frozenset({"Loop", "Scan", "SequenceMap"})


def inside_loop(graph: Graph) -> bool:
    """Whether `graph` is the body of a loop (`LOOPS`) or a graph inside one, at any depth
    (an If branch in a Loop body reads the body's carried values)."""
    owner = graph.parent_node
    while owner is not None:
        if owner.type in LOOPS and not owner.domain:
            return True
        outer = owner.owner_graph
        owner = outer.parent_node if outer is not None else None
    return False


def unsound_dims(graph: Graph) -> set[Node]:
    """The nodes of `graph` whose dims may be wrong: of `UNSOUND_DIMS` or computed from one
    (`downstream_of`), and in a loop's body (`inside_loop`) every node computed from the
    body's inputs or from a value of an enclosing graph (trial AA: an If branch in a Loop
    body took a Reshape of a carried value that doubles each iteration for a no-op by its
    declared dims), and a Slice onnxruntime computes to the front (`reverses_to_front`).
    Empty, and cheap (index look-ups and each Slice's constant ends and steps read), for a
    graph with none of them."""
    looping = inside_loop(graph)
    reversing = {n for n in graph.nodes_of_type("Slice") if reverses_to_front(n)}
    if not looping and not reversing and not any(graph.nodes_of_type(t)
                                                 for t in UNSOUND_DIMS):
        return set()

    def source(node: Node) -> bool:
        if (node.type in UNSOUND_DIMS and not node.domain) or node in reversing:
            return True
        return looping and (node.type == DATA or any(
            p is not None and p[0].owner_graph is not graph
            for p in map(node.get_input_producer, range(node.get_inputs_size()))))

    return downstream_of(graph, source)
