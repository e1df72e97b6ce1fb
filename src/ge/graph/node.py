"""`Node`: one operator, `Data` input, `Const` or `NetOutput` of a graph.

A node knows its inputs (producer node and output index per input anchor), the consumers of
each output anchor, its attributes and the descs of its anchors. Every change goes through
its graph, which keeps the indexes and the journal right; nodes are created by
`Graph.add_node` (or the ES builder), never directly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import onnx

from ge.errors import GraphError, GraphTypeError
from ge.graph.attributes import GRAPH_KINDS, StoredAttr, decode_attr
from ge.graph.sparse import sparse_desc
from ge.graph.tensor import Tensor
from ge.graph.tensor_desc import UNKNOWN_DIM_NUM, TensorDesc
from ge.graph.types import DATA_TYPE_ATTRIBUTES, DataType, OnnxElementType
from ge.graph.value_info import desc_from_value_info

if TYPE_CHECKING:
    from ge.graph.graph import Graph

__all__ = ["CONST", "DATA", "NET_OUTPUT", "SMALL_TENSOR_ELEMENTS", "Node", "is_const",
           "overload_of"]

#: GE's node types of the graph's boundary: an input, a constant, the outputs.
DATA = "Data"
CONST = "Const"
NET_OUTPUT = "NetOutput"

#: A tensor attribute of at most this many elements is decoded once per node (`Node._small_tensor`).
SMALL_TENSOR_ELEMENTS = 64
_TENSOR = onnx.AttributeProto.TENSOR

Producer = tuple["Node", int]
DescSlot = TensorDesc | onnx.ValueInfoProto | None


class Node:
    """A node of a `Graph`. Wrappers compare by identity; nodes cannot be copied."""

    __slots__ = (
        "__weakref__",
        "_attrs",
        "_clean",
        "_consumers",
        "_ctrl_in",
        "_ctrl_out",
        "_domain",
        "_export_name",
        "_graph",
        "_in_anchor_attrs",
        "_in_descs",
        "_inputs",
        "_metadata",
        "_name",
        "_next",
        "_out_anchor_attrs",
        "_out_descs",
        "_out_names",
        "_prev",
        "_proto",
        "_seq",
        "_small_tensor",
        "_type",
    )

    _graph: Graph | None
    _inputs: list[Producer | None]
    _consumers: list[dict[tuple[Node, int], None] | None]
    _out_descs: list[DescSlot] | None  # None: nothing known about any output
    _in_descs: list[DescSlot] | None
    _attrs: dict[str, StoredAttr]
    _proto: onnx.NodeProto | None
    _clean: bool
    _name: str
    _type: str
    _domain: str
    _out_names: list[str]
    _ctrl_in: dict[Node, None] | None
    _ctrl_out: dict[Node, None] | None
    _in_anchor_attrs: dict[int, dict[str, Any]] | None
    _out_anchor_attrs: dict[int, dict[str, Any]] | None
    _export_name: str | None
    _metadata: dict[str, str] | None  # set through the IR; a loaded node's own are in _proto
    _seq: int  # order label: grows along the graph's node list (see ge.graph.order)
    _prev: Node | None
    _next: Node | None
    # The decoded value of a small TENSOR attribute still stored as read: (that stored
    # attribute, its Tensor). Passes read the same scalar constants (an epsilon, an exponent,
    # axes shared by every layer) thousands of times; decoding one costs ~3 µs each time.
    _small_tensor: tuple[onnx.AttributeProto, Tensor] | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise GraphError("ge.graph.Node cannot be constructed directly; use Graph.add_node")

    def __copy__(self) -> Node:
        raise GraphError("ge.graph.Node cannot be copied")

    def __deepcopy__(self, memo: Any) -> Node:
        raise GraphError("ge.graph.Node cannot be copied")

    def __reduce__(self) -> Any:
        raise GraphError("ge.graph.Node cannot be copied")

    def _out_slot(self, index: int) -> DescSlot:
        """What is known about output `index` (None: nothing)."""
        descs = self._out_descs
        return descs[index] if descs is not None else None

    def _out_slots(self) -> list[DescSlot]:
        """The output desc slots, made on first use (loaded nodes rarely need them)."""
        if self._out_descs is None:
            self._out_descs = [None] * len(self._out_names)
        return self._out_descs

    def _proto_dirty(self) -> None:
        """The node no longer matches the NodeProto it was read from (export rebuilds it).

        Called before the change is journaled, so a rollback undoes the change first and
        then makes the node match its proto again (an untouched model saves byte-identical).
        """
        if self._clean:
            self._clean = False
            if self._graph is not None:
                self._graph.journal.record((setattr, self, "_clean", True))

    # -- identity -----------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def type(self) -> str:
        return self._type

    @property
    def domain(self) -> str:
        """The operator's ONNX domain ("" for the standard set)."""
        return self._domain

    def get_name(self) -> str:
        return self._name

    def get_type(self) -> str:
        return self._type

    @property
    def owner_graph(self) -> Graph | None:
        """The graph the node belongs to (None once removed)."""
        return self._graph

    def _owner(self) -> Graph:
        if self._graph is None:
            raise GraphError(f"node {self._name!r} has been removed from its graph")
        return self._graph

    # -- anchors and edges --------------------------------------------------------------
    def get_inputs_size(self) -> int:
        return len(self._inputs)

    def get_outputs_size(self) -> int:
        return len(self._out_names)

    def _check_in(self, index: int) -> int:
        if not isinstance(index, int) or isinstance(index, bool):
            raise GraphTypeError(f"input index must be an int, got {type(index).__name__}")
        if not 0 <= index < len(self._inputs):
            raise GraphError(
                f"node {self._name!r} ({self._type}) has no input {index}; "
                f"it has {len(self._inputs)}", nodes=[self._name]
            )
        return index

    def _check_out(self, index: int) -> int:
        if not isinstance(index, int) or isinstance(index, bool):
            raise GraphTypeError(f"output index must be an int, got {type(index).__name__}")
        if not 0 <= index < len(self._out_names):
            raise GraphError(
                f"node {self._name!r} ({self._type}) has no output {index}; "
                f"it has {len(self._out_names)}", nodes=[self._name]
            )
        return index

    def get_in_data_nodes_and_port_indexes(self, in_index: int) -> tuple[Node, int]:
        """The producer of input `in_index` and its output index (`RuntimeError` if unconnected)."""
        producer = self._inputs[self._check_in(in_index)]
        if producer is None:
            raise GraphError(f"input {in_index} of node {self._name!r} is not connected",
                             nodes=[self._name])
        return producer

    def get_input_producer(self, in_index: int) -> tuple[Node, int] | None:
        """Like `get_in_data_nodes_and_port_indexes`, but None for an unconnected input."""
        return self._inputs[self._check_in(in_index)]

    def get_out_data_nodes_and_port_indexes(self, out_index: int) -> list[tuple[Node, int]]:
        """The consumers of output `out_index`, each with its input index, in edge order."""
        consumers = self._consumers[self._check_out(out_index)]
        return list(consumers) if consumers else []

    def get_in_data_nodes(self) -> list[Node]:
        """Producers of the connected inputs, in input order (a producer may repeat)."""
        return [p[0] for p in self._inputs if p is not None]

    def get_out_data_nodes(self) -> list[Node]:
        """Consumers of every output, in output then edge order, each once."""
        seen: dict[Node, None] = {}
        for consumers in self._consumers:
            if consumers:
                for node, _ in consumers:
                    seen[node] = None
        return list(seen)

    def get_in_control_nodes(self) -> list[Node]:
        return list(self._ctrl_in) if self._ctrl_in else []

    def get_out_control_nodes(self) -> list[Node]:
        return list(self._ctrl_out) if self._ctrl_out else []

    def get_output_name(self, out_index: int) -> str:
        """The ONNX value name of output `out_index` ("" for an omitted optional output)."""
        return self._out_names[self._check_out(out_index)]

    def get_output_names(self) -> list[str]:
        return list(self._out_names)

    # -- attributes ---------------------------------------------------------------------
    def has_attr(self, attr_name: str) -> bool:
        if not isinstance(attr_name, str):
            raise GraphTypeError(f"attribute name must be a str, got {type(attr_name).__name__}")
        return attr_name in self._attrs

    def get_attr(self, key: str) -> Any:
        """The attribute's value (`RuntimeError` when the node has no such attribute)."""
        if not isinstance(key, str):
            raise GraphTypeError(f"attribute name must be a str, got {type(key).__name__}")
        try:
            stored = self._attrs[key]
        except KeyError:
            raise GraphError(
                f"node {self._name!r} ({self._type}) has no attribute {key!r}",
                nodes=[self._name],
            ) from None
        value = self._stored_value(stored)
        if type(value) is int and key in DATA_TYPE_ATTRIBUTES.get(self._type, ()) and (
                self._domain in ("", "ai.onnx")):
            return OnnxElementType(value)  # comparing it with a DataType raises
        # Tensors have setters (set_format, set_data_type...): hand out copies, so that a
        # change can only reach the node through set_attr (journaled, not shared by clones).
        if isinstance(value, list):
            return [v.copy() if isinstance(v, Tensor) else v for v in value]
        if isinstance(value, Tensor):
            return value.copy()
        return value

    def _attr_value(self, key: str) -> Any:
        """The stored value itself, for the IR's own reads (export, sizes): no copy."""
        return self._stored_value(self._attrs[key])

    def _stored_tensor(self, key: str) -> Tensor:
        """A tensor attribute as stored, without decoding its data: for reads that need only
        its proto, type or shape (export, sizes), so that saving an untouched model decodes
        no constant."""
        stored = self._attrs[key]
        if not isinstance(stored, onnx.AttributeProto):
            return stored[1]
        kept = self._small_tensor
        if kept is not None and kept[0] is stored:
            return kept[1]
        return Tensor.from_proto(stored.t)

    def _stored_value(self, stored: StoredAttr) -> Any:
        """The Python value of a stored attribute. A small tensor is decoded once: in place
        when the node holds a Tensor, else kept beside the stored attribute while that stays
        the one read (a change or a rollback stores another object: never stale)."""
        if not isinstance(stored, onnx.AttributeProto):
            kind, value = stored
            if kind == _TENSOR and value._array is None:
                value._decode_if_small(SMALL_TENSOR_ELEMENTS)
            return value
        if stored.type != _TENSOR:
            return decode_attr(stored)[1]
        kept = self._small_tensor
        if kept is not None and kept[0] is stored:
            return kept[1]
        tensor = Tensor.from_proto(stored.t)
        if tensor._decode_if_small(SMALL_TENSOR_ELEMENTS):
            self._small_tensor = (stored, tensor)
        return tensor

    def get_attr_kind(self, key: str) -> int:
        """The ONNX `AttributeProto.AttributeType` of an attribute."""
        if key not in self._attrs:
            raise GraphError(f"node {self._name!r} ({self._type}) has no attribute {key!r}",
                             nodes=[self._name])
        return decode_attr(self._attrs[key])[0]

    def get_attr_names(self) -> list[str]:
        return list(self._attrs)

    def set_attr(self, key: str, value: Any) -> None:
        self._owner()._set_attr(self, key, value)

    def remove_attr(self, key: str) -> None:
        """Drop an attribute (`RuntimeError` when absent)."""
        if not isinstance(key, str):
            raise GraphTypeError(f"attribute name must be a str, got {type(key).__name__}")
        self._owner()._remove_attr(self, key)

    def take_subgraph(self, key: str) -> Graph:
        """Detach the body in GRAPH attribute `key` to give it to another node (extension).

        The body keeps its reads of outer values, so it can become an attribute of another
        node of this graph (or of a graph inside it) as it is, e.g. when a pass replaces an
        If node; `remove_attr` instead discards the body and those reads.
        """
        if not isinstance(key, str):
            raise GraphTypeError(f"attribute name must be a str, got {type(key).__name__}")
        return self._owner()._take_subgraph(self, key)

    def get_subgraphs(self) -> list[Graph]:
        """The graphs this node owns (If branches, Loop/Scan bodies): an If's `then_branch`
        first, as GE declares it (`.GRAPH(then_branch).GRAPH(else_branch)`), whatever order
        the file stores them in (onnx.helper sorts them else first); otherwise attribute order."""
        if self._clean:
            return []  # a node still equal to its NodeProto: subgraph owners are never clean
        out: list[Graph] = []
        for name, stored in self._attrs.items():
            if isinstance(stored, tuple) and stored[0] in GRAPH_KINDS:
                value = stored[1]
                if isinstance(value, list):
                    out.extend(value)
                elif name == "then_branch" and self._type == "If":
                    out.insert(0, value)  # else_branch may have come first in the file
                else:
                    out.append(value)
        return out

    def structural_key(self) -> Any:
        """A hashable key equal for nodes that compute the same thing from the same inputs
        (domain, op type, attributes, input producers), or None for a node owning bodies;
        for common-subexpression elimination. A `Const` also has `value_key()`."""
        from ge.graph.keys import node_key

        return node_key(self)

    def value_key(self) -> Any:
        """A hashable key of a `Const` node's value (dtype, shape, bytes digest), or None for
        any other node; equal keys mean equal constants (constant deduplication)."""
        from ge.graph.keys import value_key

        if not is_const(self) or "value" not in self._attrs:
            return None
        value = self._attr_value("value")
        return value_key(value) if isinstance(value, Tensor) else None

    def get_outer_inputs(self) -> list[tuple[Node, int]]:
        """The values this node's subgraphs read from outside them (producer, output index),
        each once, in the order the subgraphs' nodes read them; [] without subgraphs.

        A node owning a body depends on these as on its inputs: they order it in its graph
        and are what an export of the node must see.
        """
        subs = self.get_subgraphs()
        if not subs:
            return []
        inside: set[int] = set()
        for sub in subs:
            inside.add(id(sub))
            inside.update(id(g) for g in sub.get_all_subgraphs())
        found: dict[tuple[Node, int], None] = {}
        for sub in subs:
            for inner in sub.get_all_nodes():
                for producer in inner._inputs:
                    if producer is not None and id(producer[0]._graph) not in inside:
                        found[producer] = None
        return list(found)

    def _check_anchor_attr_name(self, attr_name: str) -> None:
        if not isinstance(attr_name, str):
            raise GraphTypeError(f"attribute name must be a str, got {type(attr_name).__name__}")

    def get_input_attr(self, attr_name: str, input_index: int) -> Any:
        """An attribute of one input anchor (kept in memory only; ONNX has no such thing)."""
        self._check_anchor_attr_name(attr_name)
        attrs = (self._in_anchor_attrs or {}).get(self._check_in(input_index), {})
        if attr_name not in attrs:
            raise GraphError(
                f"input {input_index} of node {self._name!r} has no attribute {attr_name!r}"
            )
        return attrs[attr_name]

    def set_input_attr(self, attr_name: str, input_index: int, value: Any) -> None:
        self._check_anchor_attr_name(attr_name)
        self._owner()._set_anchor_attr(self, True, self._check_in(input_index), attr_name, value)

    def get_output_attr(self, attr_name: str, output_index: int) -> Any:
        """An attribute of one output anchor (kept in memory only; ONNX has no such thing)."""
        self._check_anchor_attr_name(attr_name)
        attrs = (self._out_anchor_attrs or {}).get(self._check_out(output_index), {})
        if attr_name not in attrs:
            raise GraphError(
                f"output {output_index} of node {self._name!r} has no attribute {attr_name!r}"
            )
        return attrs[attr_name]

    def set_output_attr(self, attr_name: str, output_index: int, value: Any) -> None:
        self._check_anchor_attr_name(attr_name)
        self._owner()._set_anchor_attr(self, False, self._check_out(output_index), attr_name, value)

    # -- descs --------------------------------------------------------------------------
    def get_output_desc(self, index: int) -> TensorDesc:
        """A copy of output `index`'s desc (unknown rank and type when nothing is known)."""
        desc = self._held_output_desc(self._check_out(index))
        if desc is not None:
            shape = desc._shape
            if desc._data_type is DataType.DT_UNDEFINED or (
                    len(shape) == 1 and shape[0] == UNKNOWN_DIM_NUM):
                self._note_unknown_read(index, False)  # typed or not, but of no known rank
            return desc.copy()
        if is_const(self) and "value" in self._attrs:
            # A constant's output is its value: shape and type are known without inference
            # (and without decoding the data).
            value = self._stored_tensor("value")
            if isinstance(value, Tensor):  # anything else is for validate() to report
                return value.get_tensor_desc()
        elif is_const(self) and "sparse_value" in self._attrs:  # (a sparse initializer)
            sparse = self._attr_value("sparse_value")
            if isinstance(sparse, onnx.SparseTensorProto):
                return sparse_desc(sparse)  # the dense tensor it stands for
        self._note_unknown_read(index, False)
        return TensorDesc.unknown()

    def _note_unknown_read(self, index: int, of_input: bool) -> None:
        """Count a read of a desc with no type or no rank on the root of the node's graph
        (see `Graph._unknown_desc_reads`): a body's node reading a value of an enclosing
        graph reads that graph's node's desc."""
        graph = self._graph
        if graph is not None:
            root = graph.root_graph()
            root._unknown_desc_reads += 1
            root._last_unknown_read = (self, index, of_input)

    def _held_output_desc(self, index: int) -> TensorDesc | None:
        """The desc output `index` holds (not a copy), or None; a value info read from ONNX
        is decoded once (lossless: the desc keeps its proto)."""
        descs = self._out_descs
        desc = descs[index] if descs is not None else None
        if desc is not None and not isinstance(desc, TensorDesc):
            desc = descs[index] = self._decoded(desc)  # type: ignore[index]
        return desc

    def _decoded(self, vi: onnx.ValueInfoProto) -> TensorDesc:
        """The desc of a value info read from ONNX, through its root graph's type memo."""
        graph = self._graph
        return desc_from_value_info(vi) if graph is None else graph._type_decoder().decode(vi)

    def _output_dtype(self, index: int) -> DataType:
        """`get_output_desc(index).data_type` without the copy (the IR's own checks)."""
        desc = self._held_output_desc(index)
        if desc is not None:
            return desc._data_type
        if is_const(self) and "value" in self._attrs:
            value = self._stored_tensor("value")
            if isinstance(value, Tensor):
                return value.data_type
        elif is_const(self) and "sparse_value" in self._attrs:
            sparse = self._attr_value("sparse_value")
            if isinstance(sparse, onnx.SparseTensorProto):
                return sparse_desc(sparse)._data_type
        return DataType.DT_UNDEFINED

    def update_output_desc(self, index: int, tensor_desc: TensorDesc) -> None:
        self._owner()._set_desc(self, False, self._check_out(index), tensor_desc)

    def get_input_desc(self, index: int) -> TensorDesc:
        """A copy of input `index`'s desc; without one of its own, the producer's output desc."""
        self._check_in(index)
        descs = self._in_descs
        desc = descs[index] if descs is not None else None
        if desc is not None:
            if not isinstance(desc, TensorDesc):  # decoded once (lossless: keeps its proto)
                desc = descs[index] = self._decoded(desc)  # type: ignore[index]
            return desc.copy()
        producer = self._inputs[index]
        if producer is not None:
            return producer[0].get_output_desc(producer[1])
        self._note_unknown_read(index, True)
        return TensorDesc.unknown()

    def has_input_desc(self, index: int) -> bool:
        """True when input `index` has a desc of its own (a graph output's declared type on
        the NetOutput), not only its producer's output desc."""
        self._check_in(index)
        descs = self._in_descs
        return descs is not None and descs[index] is not None

    def update_input_desc(self, index: int, tensor_desc: TensorDesc) -> None:
        self._owner()._set_desc(self, True, self._check_in(index), tensor_desc)

    def has_output_desc(self, index: int) -> bool:
        """True when something is known about output `index` (it was read or set)."""
        return self._out_slot(self._check_out(index)) is not None

    # -- metadata -----------------------------------------------------------------------
    def get_metadata(self) -> dict[str, str]:
        """The node's metadata (ONNX `metadata_props`), e.g. `ge.origin_pass`: the pass that
        made the node (extension)."""
        found: dict[str, str] = {}
        if self._proto is not None:
            found.update((p.key, p.value) for p in self._proto.metadata_props)
        if self._metadata:
            found.update(self._metadata)
        return found

    def set_metadata(self, key: str, value: str) -> None:
        """Set one metadata entry; saved with the node (extension)."""
        if not isinstance(key, str) or not key or not isinstance(value, str):
            raise GraphTypeError("metadata keys and values must be str (keys non-empty)")
        self._owner()._set_metadata(self, {key: value})

    # -- text ---------------------------------------------------------------------------
    def __repr__(self) -> str:
        state = "" if self._graph is not None else ", removed"
        return f"<Node {self._name!r} type={self._type}{state}>"


def overload_of(node: Node) -> str:
    """The overload a call names (`NodeProto.overload`, IR 10: two local functions of one
    name are told apart by it), read from the proto the node was loaded from ("" for a node
    made in memory, which calls a function of no overload)."""
    proto = node._proto
    return proto.overload if proto is not None else ""


def is_const(node: Node) -> bool:
    """Whether `node` is one of ge's `Const` nodes (an initializer, or a `Constant` operator
    as read: made in domain ""), not an operator that a custom domain names `Const`."""
    return node._type == CONST and not node._domain
