"""`Graph`: the IR passes read and rewrite.

Invariants (checked by `validate()`):
- every node belongs to exactly one graph; names of direct nodes are unique in their graph;
- an input anchor has at most one producer, which is a node of this graph or of an enclosing
  graph (ONNX's outer-scope references); the producer's consumer set mirrors the edge;
- the data and control edges of a graph form no cycle (a node owning subgraphs depends on the
  outer values its subgraphs read);
- graph inputs are `Data` nodes (attribute `index`), constants are `Const` nodes (attribute
  `value`), graph outputs are the inputs of the one `NetOutput` node.

Cost model: adding or removing a node or an edge is O(1); the producer of an input and the
consumers of an output are O(1) look-ups; nodes by type come from an index kept up to date
as nodes come and go; the topological order is computed on demand and cached until the
structure changes; every mutation is journaled inside `transaction()` so it can be undone.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import onnx

from ge.errors import GraphError, GraphTypeError
from ge.graph import order
from ge.graph.allocation import no_full_collections
from ge.graph.attributes import GRAPH_KINDS, decode_attr, to_stored
from ge.graph.journal import ChangeKind, ChangeListener, Journal
from ge.graph.naming import NameAuthority
from ge.graph.node import Node
from ge.graph.tensor import Tensor
from ge.graph.tensor_desc import TensorDesc
from ge.graph.types import DumpFormat

if TYPE_CHECKING:
    from ge.graph.copy_in import CopyResult

__all__ = ["CONST", "DATA", "NET_OUTPUT", "ChangeSet", "Graph"]

DATA = "Data"
CONST = "Const"
NET_OUTPUT = "NetOutput"


def _check_node_arg(node: Any, what: str = "node") -> Node:
    if not isinstance(node, Node):
        raise GraphTypeError(f"{what} must be a ge.graph.Node, got {type(node).__name__}")
    return node


def _check_index(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise GraphTypeError(f"{what} must be an int, got {type(value).__name__}")
    return value


def _standard_domain(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


def _order_restorer(table: dict[Any, Any]) -> Callable[[], None]:
    """An undo step that puts `table`'s keys back in their present order (values as they are)."""
    keys = list(table)

    def restore() -> None:
        values = dict(table)
        table.clear()
        table.update((key, values[key]) for key in keys)

    return restore


def _keep_order(journal: Journal, table: dict[Any, Any], key: Any) -> None:
    """Call before `key` leaves `table`: re-adding it on undo would put it last, so unless it
    is last already, the transaction also records how to restore the order (once)."""
    if journal.recording and next(reversed(table)) != key:
        journal.record_once(id(table), lambda: _order_restorer(table))


class ChangeSet:
    """Nodes touched while `Graph.track_changes()` was open, each once, in change order."""

    __slots__ = ("added", "removed", "touched")

    def __init__(self) -> None:
        self.added: dict[Node, None] = {}
        self.removed: dict[Node, None] = {}
        # Nodes still in a graph whose inputs or attributes changed (added ones included).
        self.touched: dict[Node, None] = {}

    def _record(self, kind: ChangeKind, node: Node, index: int) -> None:
        if kind is ChangeKind.NODE_ADDED:
            if self.removed.pop(node, "absent") == "absent":  # re-added: no net change
                self.added[node] = None
            self.touched[node] = None
        elif kind is ChangeKind.NODE_REMOVED:
            if self.added.pop(node, "absent") == "absent":
                self.removed[node] = None
            self.touched.pop(node, None)
        elif node._graph is not None:
            self.touched[node] = None

    def live(self) -> list[Node]:
        """The touched nodes still in a graph (what a rewriter re-examines)."""
        return [n for n in self.touched if n._graph is not None]


class ModelInfo:
    """What an ONNX model carries around its root graph, kept so that save loses nothing."""

    __slots__ = (
        "doc_string",
        "domain",
        "extras",
        "functions",
        "ir_version",
        "metadata_props",
        "model_version",
        "opset_imports",
        "opset_source",
        "producer_name",
        "producer_version",
        "source_files",
        "typed_values",
    )

    def __init__(self) -> None:
        self.ir_version: int = onnx.IR_VERSION
        self.opset_imports: dict[str, int] = {"": onnx.defs.onnx_opset_version()}
        self.opset_source: list[onnx.OperatorSetIdProto] = []  # as read, for byte-exact saves
        self.producer_name = "ge"
        self.producer_version = ""
        self.domain = ""
        self.model_version = 0
        self.doc_string = ""
        self.metadata_props: dict[str, str] = {}
        self.functions: list[onnx.FunctionProto] = []
        # Rare ModelProto fields the IR does not model (training_info, configuration).
        self.extras: onnx.ModelProto | None = None
        # Resolved path -> "model file" / "external data file" for every file `load` read:
        # save refuses to write over them unless told to (overwrite_input=True).
        self.source_files: dict[str, str] = {}
        # Whether the model as read typed its intermediate values (value_info in some graph);
        # a model built in Python counts as typed. `ge.compile` keeps an untyped model lean.
        self.typed_values = True


class Graph:
    """A graph of nodes: the root of a model, or a subgraph owned by a node (If/Loop/Scan)."""

    def __init__(self, name: str | None = "graph") -> None:
        if name is None:
            name = "graph"
        if not isinstance(name, str):
            raise GraphTypeError(f"graph name must be a str, got {type(name).__name__}")
        self._name = name
        self._nodes: dict[Node, None] = {}
        self._by_name: dict[str, Node] = {}
        self._by_type: dict[str, dict[Node, None]] = {}
        self._values: dict[str, tuple[Node, int]] = {}
        self._parent_node: Node | None = None
        self._journal = Journal()
        # (journal, structure version) the cached order was computed at, and the order.
        self._topo: tuple[tuple[Journal, int], list[Node]] | None = None
        # A root's `get_all_nodes()` as of (mutation count, structure version), dropped at
        # the next mutation (reports and the scheduler count nodes after every step).
        self._all_nodes: tuple[tuple[int, int], list[Node]] | None = None
        self._all_subgraphs: tuple[tuple[int, int], list[Graph]] | None = None  # likewise
        self._attrs: dict[str, Any] = {}
        self._orphans: list[Graph] = []
        # The root holding this graph as an orphan subgraph (`add_subgraph`): orphans share
        # its journal, opsets and mutation count like subgraphs owned by nodes.
        self._orphan_of: Graph | None = None
        # The graph a body being built will be attached under (`declare_parent`): until its
        # owner node exists, it may already read that graph's values.
        self._declared_parent: Graph | None = None
        # The graph's output names as read from ONNX: save keeps them when a pass gives an
        # output a new producer (see onnx_export), so the model's interface does not change.
        self._output_names: list[str] = []
        # The nodes as a doubly linked list (see `order`): a topological order while
        # `_order_ok`; unknown (as loaded, or after a cycle) until `topological_order()`.
        self._head: Node | None = None
        self._tail: Node | None = None
        self._order_ok = True
        self._naming = NameAuthority(self)
        # ONNX GraphProto fields the IR does not model: doc_string, metadata_props,
        # quantization_annotation (kept verbatim for save).
        self._onnx_extras: onnx.GraphProto | None = None
        # Initializers that give graph inputs a default value (IR < 4), and value infos
        # naming no value of the graph: both written back as they were read.
        self._input_defaults: dict[str, onnx.TensorProto] = {}
        self._stray_value_info: list[onnx.ValueInfoProto] = []
        self.model = ModelInfo()

    # -- identity and hierarchy ---------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def parent_node(self) -> Node | None:
        """The node owning this subgraph (None for a root graph or an orphan subgraph)."""
        return self._parent_node

    @property
    def parent_graph(self) -> Graph | None:
        """The enclosing graph: the owner node's graph, or the one declared by
        `declare_parent` for a body not attached yet."""
        if self._parent_node is not None:
            return self._parent_node._graph
        return self._declared_parent

    def declare_parent(self, parent: Graph) -> None:
        """Build this graph as a future body of a node of `parent` (extension).

        Until the owner node is created (setting this graph as its GRAPH attribute), the
        graph's nodes may already read values of `parent` and of the graphs enclosing it, as
        an If branch or Loop body reads outer values in ONNX. Attaching it anywhere else is
        refused.
        """
        if not isinstance(parent, Graph):
            raise GraphTypeError(f"parent must be a ge.graph.Graph, got {type(parent).__name__}")
        if self._parent_node is not None or self._orphan_of is not None:
            raise GraphError(f"graph {self._name!r} is already part of a graph")
        if self in list(parent._ancestors()):
            raise GraphError(f"graph {self._name!r} cannot enclose itself")
        self._declared_parent = parent

    def root_graph(self) -> Graph:
        """The top of the hierarchy: through owner nodes, and from an orphan to its root."""
        graph = self
        while True:
            parent = graph._parent_node
            if parent is not None and parent._graph is not None:
                graph = parent._graph
            elif graph._orphan_of is not None:
                graph = graph._orphan_of
            elif graph._declared_parent is not None:
                graph = graph._declared_parent
            else:
                return graph

    def is_orphan(self) -> bool:
        """True for a subgraph registered with `add_subgraph` but owned by no node (not saved,
        not compiled), or one inside such a subgraph."""
        graph = self
        while graph._parent_node is not None and graph._parent_node._graph is not None:
            graph = graph._parent_node._graph
        return graph._orphan_of is not None

    def _ancestors(self) -> Iterator[Graph]:
        graph: Graph | None = self
        while graph is not None:
            yield graph
            graph = graph.parent_graph

    @property
    def journal(self) -> Journal:
        return self.root_graph()._journal

    @property
    def mutation_count(self) -> int:
        """Grows with every mutation of this graph's hierarchy: a cheap 'did anything change'."""
        return self.root_graph()._journal.mutation_count

    @property
    def opset_imports(self) -> dict[str, int]:
        """Opset version per domain ("" is the standard ONNX domain) of the model."""
        return self.root_graph().model.opset_imports

    def get_opset_version(self, domain: str = "") -> int | None:
        """The model's opset version for `domain` ("" and "ai.onnx" are the same domain)."""
        imports = self.opset_imports
        if domain in ("", "ai.onnx"):
            return imports.get("", imports.get("ai.onnx"))
        return imports.get(domain)

    # -- transactions -------------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[Graph]:
        """Undo every mutation made inside the block (subgraphs too) when an exception escapes.

        Full garbage collections are held off for the block (`no_full_collections`): its
        undo records keep every change alive, so a full collection could free little and
        would traverse the whole graph; young collections go on."""
        with no_full_collections(splice=False), self.root_graph()._journal.transaction():
            yield self

    def _changed(self, structural: bool) -> Journal:
        root = self.root_graph()
        root._all_nodes = root._all_subgraphs = None
        journal = root._journal
        journal.mutation_count += 1
        if structural:
            journal.structure_version += 1
            # Drop the cached node list now, not at the next query: it would keep every node
            # removed since alive (and the collector busy with them) until then.
            self._topo = None
        return journal

    # -- change tracking ----------------------------------------------------------------
    def subscribe(self, listener: ChangeListener) -> Callable[[], None]:
        """Call `listener(kind, node, index)` on every change of this graph's hierarchy
        (node added or removed, an input's producer changed, an attribute changed); returns
        the function that unsubscribes it.

        Rollbacks replay their undo steps through the same primitives, so a listener that
        keeps a worklist sees the graph go back too. Listeners must not mutate the graph.
        """
        if not callable(listener):
            raise GraphTypeError(f"listener must be callable, got {type(listener).__name__}")
        listeners = self.root_graph()._journal.listeners
        listeners.append(listener)

        def unsubscribe() -> None:
            if listener in listeners:
                listeners.remove(listener)

        return unsubscribe

    @contextmanager
    def track_changes(self) -> Iterator[ChangeSet]:
        """Collect the nodes changed inside the block (a matcher's worklist, a pass's region)."""
        changes = ChangeSet()
        unsubscribe = self.subscribe(changes._record)
        try:
            yield changes
        finally:
            unsubscribe()

    # -- queries ------------------------------------------------------------------------
    def get_direct_nodes(self) -> list[Node]:
        """Nodes of this graph (not of its subgraphs) in the graph's order: a new list, so
        the graph may be changed while iterating it. The order is a topological one once
        `topological_order()` established it (always, for graphs built with the API)."""
        return list(self._listed())

    def _listed(self) -> list[Node]:
        """The node list in order, cached until the structure changes (do not mutate)."""
        journal = self.root_graph()._journal
        version = (journal, journal.structure_version)
        if self._topo is None or self._topo[0] != version:
            self._topo = (version, list(order.walk(self)))
        return self._topo[1]

    def get_all_nodes(self) -> list[Node]:
        """Nodes of this graph and, depth first after their owner, of all its subgraphs: a
        new list. A root graph keeps the list until its hierarchy changes."""
        return self._kept_list("_all_nodes", self._collect_all_nodes)

    def _kept_list(self, slot: str, collect: Callable[[], list[Any]]) -> list[Any]:
        """`collect()`, kept by a root graph in attribute `slot` (as of its mutation count
        and structure version; `_changed` drops it) until its hierarchy changes: a new list
        each call, so callers may change theirs."""
        if self._parent_node is not None or self._orphan_of is not None:
            return collect()
        journal = self._journal
        key = (journal.mutation_count, journal.structure_version)
        cached = getattr(self, slot)
        if cached is None or cached[0] != key:
            cached = (key, collect())
            setattr(self, slot, cached)
        return list(cached[1])

    def _collect_all_nodes(self) -> list[Node]:
        out: list[Node] = []
        for node in self._listed():
            out.append(node)
            if node._attrs and not node._clean:  # a clean node owns no subgraph
                for sub in node.get_subgraphs():
                    out.extend(sub._collect_all_nodes())
        return out

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, node: object) -> bool:
        return node in self._nodes

    def nodes_of_type(self, op_type: str, domain: str = "") -> list[Node]:
        """Direct nodes of one operator, in the graph's order (an index look-up, no scan).

        `domain` tells operators of the same name apart (`Gelu` of "" and of
        "com.microsoft" are different operators); "" and "ai.onnx" are the same domain.
        """
        nodes = self._by_type.get(op_type)
        if not nodes:
            return []
        wanted = _standard_domain(domain)
        return sorted((n for n in nodes if _standard_domain(n._domain) == wanted),
                      key=order.label)

    def count_of_type(self, op_type: str) -> int:
        """How many direct nodes have op type `op_type`, in any domain (O(1))."""
        return len(self._by_type.get(op_type, ()))

    def op_types(self) -> list[str]:
        return [t for t, nodes in self._by_type.items() if nodes]

    def find_node_by_name(self, name: str) -> Node:
        """The direct node called `name` (`RuntimeError` when there is none)."""
        if not isinstance(name, str):
            raise GraphTypeError(f"name must be a str, got {type(name).__name__}")
        try:
            return self._by_name[name]
        except KeyError:
            raise GraphError(f"graph {self._name!r} has no node named {name!r}") from None

    def has_node(self, name: str) -> bool:
        return name in self._by_name

    def get_data_nodes(self) -> list[Node]:
        """The graph's inputs (`Data` nodes) ordered by their `index` attribute."""
        nodes = self.nodes_of_type(DATA)
        for node in nodes:
            index = node.get_attr("index") if node.has_attr("index") else None
            if not isinstance(index, int) or isinstance(index, bool):
                raise GraphError(
                    f"Data node {node._name!r} of graph {self._name!r} has no int 'index' "
                    f"attribute (it has {index!r}); it cannot be ordered among the inputs",
                    nodes=[node._name],
                )
        return sorted(nodes, key=lambda n: n.get_attr("index"))

    def get_net_output(self) -> Node | None:
        """The `NetOutput` node (the first in the graph's order if there are several: an
        invalid graph, but the answer must not depend on the index's insertion history)."""
        outs = self._by_type.get(NET_OUTPUT)
        if not outs:
            return None
        if len(outs) == 1:
            return next(iter(outs))
        return min(outs, key=order.label)

    def find_value(self, value_name: str) -> tuple[Node, int] | None:
        """The producer of an ONNX value name, looked up in this graph then enclosing ones."""
        for graph in self._ancestors():
            found = graph._values.get(value_name)
            if found is not None:
                return found
        return None

    # -- attributes of the graph (memory only) --------------------------------------------
    def get_attr(self, key: str) -> Any:
        if not isinstance(key, str):
            raise GraphTypeError(f"attribute name must be a str, got {type(key).__name__}")
        try:
            return self._attrs[key]
        except KeyError:
            raise GraphError(f"graph {self._name!r} has no attribute {key!r}") from None

    def set_attr(self, key: str, value: Any) -> None:
        if not isinstance(key, str):
            raise GraphTypeError(f"attribute name must be a str, got {type(key).__name__}")
        missing = object()
        old = self._attrs.get(key, missing)
        self._attrs[key] = value
        journal = self._changed(False)
        if journal.recording:
            if old is missing:
                journal.record(lambda: self._attrs.pop(key, None))
            else:
                journal.record(lambda: self._attrs.__setitem__(key, old))

    # -- node creation and removal ------------------------------------------------------
    def _new_node(
        self,
        op_type: str,
        name: str,
        domain: str,
        num_inputs: int,
        out_names: list[str],
        attrs: dict[str, Any],
        proto: onnx.NodeProto | None,
    ) -> Node:
        """Make a node object (not yet inserted); the loader's fast path."""
        node = object.__new__(Node)
        node._graph = None
        node._name = name
        node._type = op_type
        node._domain = domain
        node._attrs = attrs
        node._inputs = [None] * num_inputs
        node._consumers = [None] * len(out_names)
        node._out_names = out_names
        node._out_descs = None  # made on the first desc: most loaded nodes never get one
        node._in_descs = None
        node._ctrl_in = None
        node._ctrl_out = None
        node._in_anchor_attrs = None
        node._out_anchor_attrs = None
        node._proto = proto
        node._clean = proto is not None
        node._export_name = None
        node._metadata = None
        node._seq = 0
        node._prev = node._next = None
        return node

    def _index_node(self, node: Node) -> None:
        """Put a node into the graph's indexes, last in the node order (no journal, no
        checks): the shared step of `_insert` and of loading."""
        node._graph = self
        order.append(self, node)
        self._nodes[node] = None
        self._by_name[node._name] = node
        bucket = self._by_type.get(node._type)
        if bucket is None:
            bucket = self._by_type[node._type] = {}
        bucket[node] = None
        values = self._values
        for i, value_name in enumerate(node._out_names):
            if value_name:
                values[value_name] = (node, i)

    def _insert(self, node: Node) -> None:
        """Put a fresh node into the graph's indexes (journaled)."""
        journal = self.root_graph()._journal
        # A type new to the index is dropped again on undo: the index keeps its types in
        # first-seen order (`op_types`), which must not remember a rolled-back node.
        new_type = journal.recording and node._type not in self._by_type
        self._index_node(node)
        for sub in node.get_subgraphs():
            sub._parent_node = node
        self._changed(True)
        if journal.listeners:
            journal.notify(ChangeKind.NODE_ADDED, node)
        if journal.recording:
            journal.record((Graph._undo_insert, self, node, new_type))

    def _undo_insert(self, node: Node, new_type: bool) -> None:
        self._erase(node)
        if new_type and not self._by_type.get(node._type):
            del self._by_type[node._type]

    def _erase(self, node: Node) -> None:
        """Take an edge-less node out of the graph's indexes (journaled)."""
        before, label = self._unindex(node)
        journal = self._changed(True)
        if journal.listeners:
            journal.notify(ChangeKind.NODE_REMOVED, node)
        if journal.recording:
            journal.record((Graph._undo_erase, self, node, before, label))

    def _unindex(self, node: Node) -> tuple[Node | None, int]:
        """Take a node out of the graph's indexes and order (no journal, no edges touched);
        where it was: the node before it and its order label."""
        del self._nodes[node]
        name = node._name
        if self._by_name.get(name) is node:
            del self._by_name[name]
        del self._by_type[node._type][node]
        values = self._values
        for value_name in node._out_names:
            if value_name and values.get(value_name, (None,))[0] is node:
                del values[value_name]
        node._graph = None
        before, label = node._prev, node._seq
        order.unlink(self, node)
        return before, label

    def _undo_erase(self, node: Node, before: Node | None, label: int) -> None:
        self._insert(node)
        order.unlink(self, node)  # back at its place in the order
        order.link_after(self, node, before, label)

    def add_node(
        self,
        op_type: str,
        *,
        name: str | None = None,
        domain: str = "",
        num_inputs: int = 0,
        num_outputs: int = 1,
        attrs: dict[str, Any] | None = None,
        output_names: list[str] | None = None,
    ) -> Node:
        """Create a node with unconnected anchors (extension; GE creates nodes via the builder).

        `name=None` picks a unique name from the op type; an explicit name already taken is a
        `RuntimeError`. Output value names default to `<node name>:<index>`.
        """
        if not isinstance(op_type, str) or not op_type:
            raise GraphTypeError("op_type must be a non-empty str")
        if not isinstance(domain, str):
            raise GraphTypeError(f"domain must be a str, got {type(domain).__name__}")
        _check_index(num_inputs, "num_inputs")
        _check_index(num_outputs, "num_outputs")
        if num_inputs < 0 or num_outputs < 0:
            raise GraphError("num_inputs and num_outputs must be >= 0")
        if name is None:
            name = self._naming.node_name(op_type)
        elif not isinstance(name, str) or not name:
            raise GraphTypeError("node name must be a non-empty str")
        elif name in self._by_name:
            raise GraphError(f"graph {self._name!r} already has a node named {name!r}")
        if output_names is None:
            out_names = [self._naming.value_name(f"{name}:{i}") for i in range(num_outputs)]
        else:
            out_names = list(output_names)
            if len(out_names) != num_outputs:
                raise GraphError(
                    f"{len(out_names)} output names given for {num_outputs} outputs of {name!r}"
                )
            for value_name in out_names:
                if not isinstance(value_name, str):
                    raise GraphTypeError("output names must be str")
                if value_name and self._naming.value_taken(value_name):
                    raise GraphError(f"value name {value_name!r} is already used in the graph")
        node = self._new_node(op_type, name, domain, num_inputs, out_names, {}, None)
        self._insert(node)
        for key, value in (attrs or {}).items():
            self._set_attr(node, key, value)
        return node

    def add_const(self, value: Tensor | Any, *, name: str | None = None) -> Node:
        """A `Const` node holding `value` (a `Tensor`, or data a `Tensor` accepts)."""
        tensor = value if isinstance(value, Tensor) else Tensor(value)
        node = self.add_node(CONST, name=name, num_outputs=1)
        self._set_attr(node, "value", tensor)
        node._out_slots()[0] = tensor.get_tensor_desc()
        return node

    def copy_in(self, replacement: Graph, inputs: Sequence[tuple[Node, int]]) -> CopyResult:
        """Copy `replacement` into this graph (extension): its `Data` index *i* reads
        `inputs[i]` (a producer output of this graph or an enclosing one), every other node
        is copied with its attributes and descs under a unique name, and the result gives
        the new nodes and, for each replacement output, its producer here (an input for a
        pass-through). The replacement is left as it is, so one can be copied many times.
        """
        from ge.graph.copy_in import copy_in

        return copy_in(self, replacement, inputs)

    def remove_node(self, node: Node) -> None:
        """Remove a direct node with all its edges (its consumers' inputs become unconnected)."""
        self.remove_nodes((node,))

    def remove_nodes(self, nodes: Iterable[Node]) -> None:
        """Remove direct nodes with all their edges, as one change (extension).

        The same as removing them one by one, in any order, but the edges among them go
        with them and the whole removal is one undo step: what a rewriter uses to take out
        a matched region. Inputs of the nodes that stay that read a removed node become
        unconnected. Listeners are told `NODE_REMOVED` for each node and `INPUT_CHANGED` for
        each input so cut (not for the removed nodes' own inputs). A node that is not a
        node of this graph is a `RuntimeError`, raised before anything changes.
        """
        from ge.graph.removal import remove_nodes

        remove_nodes(self, nodes)

    def _drop_outer_edges(self) -> None:
        """Disconnect inputs of this hierarchy whose producers live outside it."""
        inside = {id(g) for g in [self, *self.get_all_subgraphs()]}
        for node in self.get_all_nodes():
            for i, producer in enumerate(node._inputs):
                if producer is not None and id(producer[0]._graph) not in inside:
                    node._graph._disconnect(node, i)  # type: ignore[union-attr]

    # -- data edges -----------------------------------------------------------------------
    def _connect(self, src: Node, src_index: int, dst: Node, dst_index: int) -> None:
        dst._inputs[dst_index] = (src, src_index)
        consumers = src._consumers[src_index]
        if consumers is None:
            consumers = src._consumers[src_index] = {}
        consumers[(dst, dst_index)] = None
        dst._proto_dirty()
        journal = self._changed(True)
        if not journal._replaying:
            self._order_dependency(src, dst)
        if journal.listeners:
            journal.notify(ChangeKind.INPUT_CHANGED, dst, dst_index)
        if journal.recording:
            journal.record((Graph._disconnect, self, dst, dst_index))

    @staticmethod
    def _order_dependency(src: Node, dst: Node) -> None:
        """Keep the order of src's graph valid now that `dst` (or its owner there) needs `src`."""
        graph = src._graph
        if graph is None:
            return
        if dst._graph is not graph:
            owner = order.owner_in(graph, dst)
            if owner is None:
                return
            dst = owner
        order.fix_edge(graph, src, dst)

    def _disconnect(self, dst: Node, dst_index: int) -> None:
        producer = dst._inputs[dst_index]
        assert producer is not None
        src, src_index = producer
        consumers = src._consumers[src_index]
        assert consumers is not None
        key = (dst, dst_index)
        journal = self._changed(True)
        _keep_order(journal, consumers, key)
        dst._inputs[dst_index] = None
        del consumers[key]
        dst._proto_dirty()
        if journal.listeners:
            journal.notify(ChangeKind.INPUT_CHANGED, dst, dst_index)
        if journal.recording:
            journal.record((Graph._connect, dst._graph, src, src_index, dst, dst_index))

    def _check_member(self, node: Node, what: str, allow_outer: bool = False) -> None:
        graph = node._graph
        if graph is self:
            return
        if allow_outer and graph is not None and graph in list(self._ancestors()):
            return
        raise GraphError(f"{what} {node._name!r} is not a node of graph {self._name!r}")

    def add_data_edge(self, src_node: Node, src_port_index: int, dst_node: Node,
                      dst_port_index: int) -> None:
        """Connect output `src_port_index` of `src_node` to input `dst_port_index` of `dst_node`.

        The source may live in an enclosing graph (an outer-scope value of a subgraph).
        The destination input must be free (`RuntimeError` otherwise).
        """
        _check_node_arg(src_node, "src_node")
        _check_node_arg(dst_node, "dst_node")
        _check_index(src_port_index, "src_port_index")
        _check_index(dst_port_index, "dst_port_index")
        self._check_member(dst_node, "dst_node")
        self._check_member(src_node, "src_node", allow_outer=True)
        src_node._check_out(src_port_index)
        dst_node._check_in(dst_port_index)
        current = dst_node._inputs[dst_port_index]
        if current is not None:
            raise GraphError(
                f"input {dst_port_index} of node {dst_node._name!r} is already connected to "
                f"output {current[1]} of {current[0]._name!r}; remove that edge first"
            )
        self._connect(src_node, src_port_index, dst_node, dst_port_index)

    def remove_edge(self, src_node: Node, src_port_index: int, dst_node: Node,
                    dst_port_index: int) -> None:
        """Remove a data edge, or a control edge when both port indexes are -1."""
        _check_node_arg(src_node, "src_node")
        _check_node_arg(dst_node, "dst_node")
        _check_index(src_port_index, "src_port_index")
        _check_index(dst_port_index, "dst_port_index")
        self._check_member(dst_node, "dst_node")
        if src_port_index == -1 and dst_port_index == -1:
            if not dst_node._ctrl_in or src_node not in dst_node._ctrl_in:
                raise GraphError(
                    f"there is no control edge {src_node._name!r} -> {dst_node._name!r}"
                )
            self._ctrl_unlink(src_node, dst_node)
            return
        dst_node._check_in(dst_port_index)
        if dst_node._inputs[dst_port_index] != (src_node, src_port_index):
            raise GraphError(
                f"there is no data edge {src_node._name!r}:{src_port_index} -> "
                f"{dst_node._name!r}:{dst_port_index}"
            )
        self._disconnect(dst_node, dst_port_index)

    def replace_all_uses(self, old: Node, old_index: int, new: Node, new_index: int, *,
                         exclude: Iterable[Node] | Callable[[Node], bool] = ()) -> int:
        """Move every consumer of `old:old_index` to `new:new_index` (extension).

        Consumers in `exclude` (nodes, or a predicate on the consumer as torch.fx's
        `delete_user_cb`) keep reading `old`, and so does `new` itself: inserting a node
        after `old` and moving old's other uses to it never makes a self-loop. A move that
        would make a cycle (a consumer from which `new` is reachable) is refused before
        anything changes. Returns the number of inputs moved.
        """
        _check_node_arg(old, "old")
        _check_node_arg(new, "new")
        self._check_member(old, "old", allow_outer=True)
        self._check_member(new, "new", allow_outer=True)
        old._check_out(old_index)
        new._check_out(new_index)
        if callable(exclude):
            keep = exclude
        else:
            excluded = set(exclude)
            keep = excluded.__contains__
        consumers = [(c, j) for c, j in (old._consumers[old_index] or ())
                     if c is not new and not keep(c)]
        if old is new and old_index == new_index:
            return 0
        for consumer, _ in consumers:  # check all first: a refused call changes nothing
            scope: Graph = consumer._graph  # type: ignore[assignment]
            if scope is not new._graph and new._graph not in list(scope._ancestors()):
                raise GraphError(f"node {consumer._name!r} (graph {scope.name!r}) can't read "
                                 f"{new._name!r}, which is not in its scope")
            if self.would_create_cycle(new, consumer):
                raise GraphError(
                    f"moving the uses of {old._name!r}:{old_index} to {new._name!r}:"
                    f"{new_index} would make a cycle: {new._name!r} depends on its "
                    f"consumer-to-be {consumer._name!r}; exclude it",
                    nodes=[new._name, consumer._name])
        for consumer, j in consumers:
            consumer._graph._disconnect(consumer, j)  # type: ignore[union-attr]
            consumer._graph._connect(new, new_index, consumer, j)  # type: ignore[union-attr]
        return len(consumers)

    def set_inputs_size(self, node: Node, size: int) -> None:
        """Grow or shrink a node's input anchors (variadic operators); dropped ones must be free."""
        _check_node_arg(node)
        self._check_member(node, "node")
        _check_index(size, "size")
        if size < 0:
            raise GraphError(f"a node can't have {size} inputs")
        old = len(node._inputs)
        if size < old and any(p is not None for p in node._inputs[size:]):
            raise GraphError(f"cannot drop connected inputs of node {node._name!r}")
        if size == old:
            return
        dropped_descs = node._in_descs[size:] if node._in_descs is not None else None
        if size > old:
            node._inputs.extend([None] * (size - old))
            if node._in_descs is not None:
                node._in_descs.extend([None] * (size - old))
        else:
            del node._inputs[size:]
            if node._in_descs is not None:
                del node._in_descs[size:]
        node._proto_dirty()
        journal = self._changed(True)
        if journal.recording:

            def undo() -> None:
                self.set_inputs_size(node, old)
                if dropped_descs is not None and node._in_descs is not None:
                    node._in_descs[size:old] = dropped_descs

            journal.record(undo)

    # -- control edges ------------------------------------------------------------------
    def add_control_edge(self, src_node: Node, dst_node: Node) -> None:
        """Order `dst_node` after `src_node` (kept in the IR; ONNX has no control edges)."""
        _check_node_arg(src_node, "src_node")
        _check_node_arg(dst_node, "dst_node")
        self._check_member(src_node, "src_node")
        self._check_member(dst_node, "dst_node")
        if src_node is dst_node:
            raise GraphError(f"a control edge from {src_node._name!r} to itself makes a cycle")
        if dst_node._ctrl_in and src_node in dst_node._ctrl_in:
            return
        self._ctrl_link(src_node, dst_node)

    def _ctrl_link(self, src: Node, dst: Node) -> None:
        if src._ctrl_out is None:
            src._ctrl_out = {}
        if dst._ctrl_in is None:
            dst._ctrl_in = {}
        src._ctrl_out[dst] = None
        dst._ctrl_in[src] = None
        journal = self._changed(True)
        if not journal._replaying:
            order.fix_edge(self, src, dst)
        if journal.recording:
            journal.record(lambda: self._ctrl_unlink(src, dst))

    def _ctrl_unlink(self, src: Node, dst: Node) -> None:
        journal = self.root_graph()._journal
        _keep_order(journal, src._ctrl_out, dst)  # type: ignore[arg-type]
        _keep_order(journal, dst._ctrl_in, src)  # type: ignore[arg-type]
        del src._ctrl_out[dst]  # type: ignore[union-attr]  # linked, so both exist
        del dst._ctrl_in[src]  # type: ignore[union-attr]
        journal = self._changed(True)
        if journal.recording:
            journal.record(lambda: self._ctrl_link(src, dst))

    # -- node attributes and descs (called through Node) --------------------------------
    def _set_metadata(self, node: Node, items: Mapping[str, str]) -> None:
        """Set metadata entries of `node` (checked by the caller) in one journal step."""
        old = node._metadata
        node._proto_dirty()
        node._metadata = {**(old or {}), **items}
        journal = self._changed(False)
        if journal.recording:
            journal.record((setattr, node, "_metadata", old))

    def _set_attr(self, node: Node, key: str, value: Any) -> None:
        if not isinstance(key, str) or not key:
            raise GraphTypeError("attribute name must be a non-empty str")
        old = node._attrs.get(key)
        previous_kind = decode_attr(old)[0] if old is not None else None
        stored = to_stored(key, value, previous_kind)
        new_graphs = [] if stored[0] not in GRAPH_KINDS else (
            stored[1] if isinstance(stored[1], list) else [stored[1]])
        old_graphs = [] if old is None or previous_kind not in GRAPH_KINDS else (
            decode_attr(old)[1] if previous_kind == onnx.AttributeProto.GRAPHS
            else [decode_attr(old)[1]])
        for sub in new_graphs:
            if sub in old_graphs:
                continue
            if sub._parent_node is not None:
                raise GraphError(
                    f"graph {sub._name!r} already belongs to node {sub._parent_node._name!r}"
                )
            if sub in list(self._ancestors()):
                raise GraphError(f"graph {sub._name!r} cannot be a subgraph of itself")
            declared = sub._declared_parent
            if declared is not None and declared not in list(self._ancestors()):
                raise GraphError(
                    f"graph {sub._name!r} was built to read values of graph {declared._name!r}; "
                    f"it cannot become a subgraph of a node of graph {self._name!r}"
                )
        if stored[0] in GRAPH_KINDS:
            stored = (stored[0], list(stored[1]) if isinstance(stored[1], list) else stored[1])
        self._replace_attr(node, key, stored, old)
        for sub in old_graphs:
            if sub not in new_graphs:
                sub._drop_outer_edges()  # as `_remove_attr` does: no reads from a former scope
                self._set_parent(sub, None)
        root = self.root_graph()
        for sub in new_graphs:
            if sub._parent_node is not node:
                if sub in root._orphans:
                    root._remove_orphan(sub)
                self._set_parent(sub, node)

    def _set_parent(self, sub: Graph, node: Node | None, declared_for: Graph | None = None
                    ) -> None:
        """Give `sub` an owner node (or none; then `declared_for` says where it may go)."""
        old, declared = sub._parent_node, sub._declared_parent
        sub._parent_node = node
        # An owner says where the body lives; a detached body remembers the scope it reads.
        sub._declared_parent = None if node is not None else declared_for
        if node is not None and node._graph is not None:
            # The body's outer reads are new dependencies of its owner: check at next query.
            order.mark_unknown(node._graph)

        def undo() -> None:
            sub._parent_node, sub._declared_parent = old, declared

        journal = self._changed(True)
        if journal.recording:
            journal.record(undo)

    def _replace_attr(self, node: Node, key: str, stored: Any, old: Any) -> None:
        if stored is None:
            _keep_order(self.root_graph()._journal, node._attrs, key)
            del node._attrs[key]
        else:
            node._attrs[key] = stored
        node._proto_dirty()
        journal = self._changed(False)
        if journal.listeners:
            journal.notify(ChangeKind.ATTR_CHANGED, node)
        if journal.recording:
            journal.record((Graph._replace_attr, self, node, key, old, stored))

    def _take_subgraph(self, node: Node, key: str) -> Graph:
        if key not in node._attrs:
            raise GraphError(f"node {node._name!r} has no attribute {key!r}")
        old = node._attrs[key]
        kind, value = decode_attr(old)
        if kind != onnx.AttributeProto.GRAPH:
            raise GraphError(
                f"attribute {key!r} of node {node._name!r} is not a graph, it is a "
                f"{onnx.AttributeProto.AttributeType.Name(kind)}"
            )
        self._set_parent(value, None, declared_for=self)
        self._replace_attr(node, key, None, old)
        return value

    def _remove_attr(self, node: Node, key: str) -> None:
        if key not in node._attrs:
            raise GraphError(f"node {node._name!r} has no attribute {key!r}")
        old = node._attrs[key]
        kind = decode_attr(old)[0]
        if kind in GRAPH_KINDS:
            value = decode_attr(old)[1]
            for sub in value if isinstance(value, list) else [value]:
                sub._drop_outer_edges()
                self._set_parent(sub, None)
        self._replace_attr(node, key, None, old)

    def _set_anchor_attr(self, node: Node, is_input: bool, index: int, key: str,
                         value: Any) -> None:
        slot = "_in_anchor_attrs" if is_input else "_out_anchor_attrs"
        table = getattr(node, slot)
        if table is None:
            table = {}
            setattr(node, slot, table)
        attrs = table.setdefault(index, {})
        missing = object()
        old = attrs.get(key, missing)
        attrs[key] = value
        journal = self._changed(False)
        if journal.recording:
            journal.record((attrs.pop, key, None) if old is missing
                           else (attrs.__setitem__, key, old))

    def _set_desc(self, node: Node, is_input: bool, index: int, desc: TensorDesc | None) -> None:
        if desc is not None and not isinstance(desc, TensorDesc):
            raise GraphTypeError(f"tensor_desc must be a TensorDesc, got {type(desc).__name__}")
        if is_input:
            if node._in_descs is None:
                node._in_descs = [None] * len(node._inputs)
            slots = node._in_descs
        else:
            slots = node._out_slots()
        old = slots[index]
        slots[index] = desc.copy() if desc is not None else None
        journal = self._changed(False)
        if journal.recording:
            journal.record((slots.__setitem__, index, old))

    # -- subgraphs ----------------------------------------------------------------------
    def get_all_subgraphs(self) -> list[Graph]:
        """Every subgraph below this graph (depth first, owner order), then orphan subgraphs:
        a new list. A root graph keeps the list until its hierarchy changes (the compiler
        asks before every pass)."""
        return self._kept_list("_all_subgraphs", self._collect_subgraphs)

    def _collect_subgraphs(self) -> list[Graph]:
        out: list[Graph] = []
        for node in self._listed():
            if node._attrs and not node._clean:  # a clean node owns no subgraph
                for sub in node.get_subgraphs():
                    out.append(sub)
                    out.extend(sub._collect_subgraphs())
        if self._parent_node is None:
            for orphan in self._orphans:
                out.append(orphan)
                out.extend(orphan._collect_subgraphs())
        return out

    def get_subgraph(self, name: str) -> Graph | None:
        if not isinstance(name, str):
            raise GraphTypeError(f"name must be a str, got {type(name).__name__}")
        return next((g for g in self.get_all_subgraphs() if g._name == name), None)

    def add_subgraph(self, subgraph: Graph) -> None:
        """Register a subgraph not (yet) owned by a node (GE's orphan subgraph; not exported)."""
        if not isinstance(subgraph, Graph):
            raise GraphTypeError(
                f"subgraph must be a ge.graph.Graph, got {type(subgraph).__name__}"
            )
        root = self.root_graph()
        if subgraph is root or subgraph._parent_node is not None or subgraph in root._orphans:
            raise GraphError(f"graph {subgraph._name!r} is already part of a graph")
        root._orphans.append(subgraph)
        subgraph._orphan_of = root
        journal = self._changed(True)
        if journal.recording:

            def undo() -> None:
                root._orphans.remove(subgraph)
                subgraph._orphan_of = None

            journal.record(undo)

    def _remove_orphan(self, subgraph: Graph) -> None:
        index = self._orphans.index(subgraph)
        journal = self._changed(True)  # the orphan's journal is this root's until it leaves
        del self._orphans[index]
        subgraph._orphan_of = None
        if journal.recording:

            def undo() -> None:
                self._orphans.insert(index, subgraph)
                subgraph._orphan_of = self

            journal.record(undo)

    def remove_subgraph(self, name: str) -> None:
        """Unregister an orphan subgraph; a subgraph owned by a node goes with its attribute."""
        root = self.root_graph()
        for orphan in root._orphans:
            if orphan._name == name:
                root._remove_orphan(orphan)
                return
        if self.get_subgraph(name) is not None:
            raise GraphError(
                f"subgraph {name!r} is owned by a node; remove the node or its attribute instead"
            )
        raise GraphError(f"graph {self._name!r} has no subgraph named {name!r}")

    # -- topology -----------------------------------------------------------------------
    def _dependencies(self, node: Node) -> Iterator[Node]:
        """Direct nodes of this graph that `node` must come after."""
        for producer in node._inputs:
            if producer is not None and producer[0]._graph is self:
                yield producer[0]
        if node._ctrl_in:
            yield from node._ctrl_in
        if node._attrs and not node._clean:
            for producer in node.get_outer_inputs():
                if producer[0]._graph is self:
                    yield producer[0]

    def topological_order(self) -> list[Node]:
        """Direct nodes, producers before consumers: the graph's maintained order, made
        valid here first when it is unknown (a loaded graph: a stable sort that keeps the
        file's order where it is free). A cycle is a `GraphError` naming its nodes."""
        if not self._order_ok:
            order.establish(self)
        return list(self._listed())

    def would_create_cycle(self, src_node: Node, dst_node: Node) -> bool:
        """Would an edge from an output of `src_node` to an input of `dst_node` make a cycle
        (extension)? `dst_node` may be in a subgraph of src's graph (its owner then depends
        on `src_node`). Answered by a search bounded to the nodes between the two in the
        maintained order, so the common case visits a handful of nodes."""
        _check_node_arg(src_node, "src_node")
        _check_node_arg(dst_node, "dst_node")
        self._check_member(src_node, "src_node", allow_outer=True)
        graph = src_node._graph
        assert graph is not None
        owner = order.owner_in(graph, dst_node)
        if owner is None:
            raise GraphError(f"node {dst_node._name!r} cannot read {src_node._name!r}: it is "
                             f"not in the scope of graph {graph._name!r}")
        if not graph._order_ok:
            order.establish(graph)
        return order.would_create_cycle(graph, src_node, owner)

    def insert_before(self, anchor: Node, nodes: Node | Sequence[Node]) -> None:
        """Move direct `nodes` (in the order given) to just before `anchor` (extension, as
        onnx-ir's `insert_before`); `GraphError` if that would put a node before a producer
        or after a consumer, and then nothing moves."""
        self._insert_at(anchor, nodes, before=True)

    def insert_after(self, anchor: Node, nodes: Node | Sequence[Node]) -> None:
        """Move direct `nodes` (in the order given) to just after `anchor` (extension)."""
        self._insert_at(anchor, nodes, before=False)

    def _insert_at(self, anchor: Node, nodes: Node | Sequence[Node], *, before: bool) -> None:
        _check_node_arg(anchor, "anchor")
        self._check_member(anchor, "anchor")
        group = [nodes] if isinstance(nodes, Node) else list(nodes)
        for node in group:
            _check_node_arg(node)
            self._check_member(node, "node")
        if anchor in group:
            raise GraphError(f"node {anchor._name!r} cannot be placed next to itself")
        if len(set(group)) != len(group):
            raise GraphError("a node is given twice")
        if not group:
            return
        if not self._order_ok:
            order.establish(self)
        # Checked on labels, O(edges of the group): the other nodes keep their places, so
        # one outside the group comes before the group iff it comes before the anchor
        # (the anchor itself included when placing after it).
        where = {n: i for i, n in enumerate(group)}
        edge = anchor._seq if before else anchor._seq + 1

        def comes_first(other: Node, node: Node) -> bool:
            if other in where:
                return where[other] < where[node]
            return other._seq < edge

        for node in group:
            for dep in self._dependencies(node):
                if not comes_first(dep, node):
                    raise GraphError(
                        f"node {node._name!r} cannot be placed "
                        f"{'before' if before else 'after'} {anchor._name!r}: it reads "
                        f"{dep._name!r}, which would come after it", nodes=[node._name])
            for succ in order.successors(self, node):
                if comes_first(succ, node):
                    raise GraphError(
                        f"node {node._name!r} cannot be placed "
                        f"{'before' if before else 'after'} {anchor._name!r}: "
                        f"{succ._name!r} reads it and would come before it",
                        nodes=[node._name])
        self._changed(True)
        order.move(self, group, anchor, before=before)

    def _kahn(self, nodes: list[Node], seq: dict[Node, int]) -> list[Node]:
        """Stable topological sort: the ready node first in `seq` goes first."""
        successors: dict[Node, list[Node]] = {n: [] for n in nodes}
        indegree = dict.fromkeys(nodes, 0)
        for node in nodes:
            for dep in self._dependencies(node):
                successors[dep].append(node)
                indegree[node] += 1
        ready = [(seq[n], id(n)) for n in nodes if indegree[n] == 0]
        by_id = {id(n): n for n in nodes}
        heapq.heapify(ready)
        out: list[Node] = []
        while ready:
            node = by_id[heapq.heappop(ready)[1]]
            out.append(node)
            for succ in successors[node]:
                indegree[succ] -= 1
                if indegree[succ] == 0:
                    heapq.heappush(ready, (seq[succ], id(succ)))
        if len(out) != len(nodes):
            stuck = sorted(n._name for n in nodes if indegree[n] > 0)
            raise GraphError(
                f"graph {self._name!r} has a cycle through nodes: {', '.join(stuck[:20])}",
                nodes=stuck,
            )
        return out

    # -- validation, copies, dumps, ONNX ---------------------------------------------------
    def validate(self) -> None:
        """Check every IR invariant; `GraphValidationError` lists each problem with node names."""
        from ge.errors import GraphValidationError
        from ge.graph.validation import find_problems

        problems = find_problems(self)
        if problems:
            raise GraphValidationError(problems)

    def find_problems(self) -> list[Any]:
        """The broken invariants `validate()` would report, as `ValidationProblem`s."""
        from ge.graph.validation import find_problems

        return find_problems(self)

    def clone(self, name: str | None = None) -> Graph:
        """A deep copy of this graph and its subgraphs (extension; `copy.copy` is refused)."""
        from ge.graph.cloning import clone_graph

        return clone_graph(self, name)

    def __copy__(self) -> Graph:
        raise GraphError("ge.graph.Graph cannot be copied with copy(); use Graph.clone()")

    def __deepcopy__(self, memo: Any) -> Graph:
        raise GraphError("ge.graph.Graph cannot be copied with deepcopy(); use Graph.clone()")

    def to_onnx(self, *, value_info: bool = True, lift_constants: bool = False
                ) -> onnx.ModelProto:
        """The graph as an ONNX model (a root graph; a subgraph exports as its own model).

        `value_info=False` leaves out the types of intermediate values (graph inputs and
        outputs keep theirs): smaller, and what most exporters write. `lift_constants=True`
        writes the model's `Constant` operators as initializers (fewer nodes)."""
        from ge.graph.onnx_export import graph_to_model

        return graph_to_model(self, value_info=value_info, lift_constants=lift_constants)

    def save(self, path: str | os.PathLike[str], *, external_data: bool | None = None,
             external_data_name: str | None = None, size_threshold: int = 1024,
             overwrite_input: bool = False, value_info: bool = True,
             lift_constants: bool = False) -> None:
        """Write the model to `path` (atomically: on failure nothing is left behind).

        `external_data=None` decides by size (over protobuf's 2 GB limit → external);
        `True` puts tensors of at least `size_threshold` bytes into one data file beside the
        model (`<model file>.data` unless `external_data_name` says otherwise). Writing over
        the file the model was loaded from (or its data files) needs `overwrite_input=True`.
        `value_info` and `lift_constants` as in `to_onnx`.
        """
        from ge.graph.model_io import save_model

        save_model(self, path, external_data=external_data,
                   external_data_name=external_data_name, size_threshold=size_threshold,
                   overwrite_input=overwrite_input, value_info=value_info,
                   lift_constants=lift_constants)

    def dump_to_stream(self, format: DumpFormat = DumpFormat.kReadable) -> str:
        """The graph as text: readable (one line per node) or ONNX's text form."""
        from ge.graph.dump import dump_text

        return dump_text(self, format)

    def dump_to_file(self, format: DumpFormat = DumpFormat.kReadable, suffix: str = "") -> str:
        """Write a dump into `DUMP_GRAPH_PATH` (or the working directory); returns the path."""
        from ge.graph.dump import dump_file

        return dump_file(self, format, suffix)

    def save_to_air(self, file_path: str) -> None:
        raise GraphError("AIR files are not supported: ge saves ONNX (Graph.save), see D16")

    def load_from_air(self, file_path: str) -> None:
        raise GraphError("AIR files are not supported: ge loads ONNX (ge.graph.load), see D16")

    def __str__(self) -> str:
        return self.dump_to_stream(DumpFormat.kReadable)

    def __repr__(self) -> str:
        return f"<Graph {self._name!r} nodes={len(self._nodes)}>"

