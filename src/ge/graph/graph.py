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

The class is put together from mixins, one concept per module: `node_set` (adding and
removing nodes), `edges` (data and control edges), `node_state` (node attributes and descs),
`subgraphs`, `topology` and `queries` (looking nodes and values up); `ChangeSet` is in
`changes`, `ModelInfo` in `model_info` (both importable from here too).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import onnx

from ge.errors import GraphError, GraphTypeError
from ge.graph.allocation import no_full_collections
from ge.graph.changes import ChangeSet
from ge.graph.domains import record_opset_imports
from ge.graph.edges import GraphEdges
from ge.graph.journal import ChangeListener, Journal
from ge.graph.model_info import ModelInfo
from ge.graph.naming import NameAuthority
from ge.graph.node import CONST, DATA, NET_OUTPUT, Node, is_const
from ge.graph.node_set import GraphNodeSet
from ge.graph.node_state import GraphNodeState
from ge.graph.queries import GraphQueries
from ge.graph.subgraphs import GraphSubgraphs
from ge.graph.topology import GraphTopology
from ge.graph.types import DumpFormat
from ge.graph.value_info import TypeDecoder

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["CONST", "DATA", "NET_OUTPUT", "ChangeSet", "Graph", "is_const"]



class Graph(GraphQueries, GraphNodeSet, GraphEdges, GraphNodeState, GraphSubgraphs,
            GraphTopology):
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
        # Per op type, how many of `_by_type`'s nodes are of a domain other than ONNX's
        # standard one (`count_of_type(op, "")` in O(1): a `Const` of "my.domain" is no
        # constant of ge's).
        self._custom_typed: dict[str, int] = {}
        self._values: dict[str, tuple[Node, int]] = {}
        self._parent_node: Node | None = None
        self._journal = Journal()
        # (journal, structure version) the cached order was computed at, and the order.
        self._topo: tuple[tuple[Journal, int], list[Node]] | None = None
        # `nodes_of_type` answers in order, kept like the order above: {(op type, domain):
        # nodes} as of (journal, structure version), dropped with it.
        self._typed: tuple[tuple[Journal, int],
                           dict[tuple[str, str | None], list[Node]]] | None = None
        # A root's `get_all_nodes()` as of (mutation count, structure version), dropped at
        # the next mutation (reports and the scheduler count nodes after every step).
        self._all_nodes: tuple[tuple[int, int], list[Node]] | None = None
        self._all_subgraphs: tuple[tuple[int, int], list[Graph]] | None = None  # likewise
        self._attrs: dict[str, Any] = {}
        # Of a root graph: reads of a desc with no type or no rank through the nodes' of its
        # hierarchy `get_output_desc`/`get_input_desc`, and the last one as (node, index, of
        # an input): the engine compares the count around a `meet_requirements` call, so
        # that a refusal is said to come from untyped values only when the hook read one
        # (a body's node reading an enclosing graph's value included).
        self._unknown_desc_reads = 0
        self._last_unknown_read: tuple[Node, int, bool] | None = None
        self._orphans: list[Graph] = []
        # Of a root graph: the value-info types its hierarchy's nodes decoded on first read
        # of a desc loaded from ONNX (a pure memo, made at the first: `_type_decoder`).
        self._types: TypeDecoder | None = None
        # (journal, mutation count) of a root when `check_model_as_given` last passed it
        # (`ge.graph.input_checks`): a command and `ge.compile` check a model once.
        self._checked_as_given: tuple[Journal, int] | None = None
        # The root holding this graph as an orphan subgraph (`add_subgraph`): orphans share
        # its journal, opsets and mutation count like subgraphs owned by nodes.
        self._orphan_of: Graph | None = None
        # The graph a body being built will be attached under (`declare_parent`): until its
        # owner node exists, it may already read that graph's values.
        self._declared_parent: Graph | None = None
        # The graphs placed directly inside this one (bodies of its nodes, graphs declared
        # for it), so that a value name can be kept clear of every enclosed graph too
        # (`NameAuthority`): registered wherever a graph gets this one as its parent,
        # dropped when a body leaves with its node or attribute (the graph would otherwise
        # hold it as long as it lives), and checked on use (a superset: a body moved to
        # another node of the hierarchy stays until then).
        self._inner: dict[Graph, None] = {}
        # The value names held inside this graph, at the journal's `inner_version` they
        # were collected at (`naming._held_inside`).
        self._inner_names: tuple[object, int, frozenset[str]] | None = None
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
        # The values quantization_annotation named that the graph defined when read: an
        # annotation of one a pass has since removed is stale and not saved (one naming no
        # value from the start is kept as it was).
        self._annotated_values: frozenset[str] = frozenset()
        # Initializers that give graph inputs a default value (IR >= 4; a sparse one, which
        # onnxruntime reads too, as a SparseTensorProto), and value infos naming no value of
        # the graph: both written back as they were read.
        self._input_defaults: dict[str, onnx.TensorProto | onnx.SparseTensorProto] = {}
        # Graph inputs that an initializer makes constants (IR < 4: read as Const nodes), by
        # value name: how many real inputs came before each, its position among the inputs
        # and its value info as read; saving writes each one still held by a Const back as
        # input and initializer.
        self._initializer_inputs: dict[str, tuple[int, int, onnx.ValueInfoProto]] = {}
        self._stray_value_info: list[onnx.ValueInfoProto] = []
        # The position of each value_info in the file read, when that order is not the one
        # saving writes (the values' order in the node list, then the stray ones): saving
        # keeps the file's order, so that an untouched model is written byte for byte.
        self._value_info_order: dict[str, int] | None = None
        # Where the file put the initializers giving inputs their defaults among the others,
        # when not last (saving writes them after the constants otherwise): {name: position}.
        self._initializer_order: dict[str, int] | None = None
        # The same for the sparse initializers, when a sparse default was not last.
        self._sparse_order: dict[str, int] | None = None
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
        parent._inner[self] = None
        parent.root_graph()._journal.inner_version += 1

    def _type_decoder(self) -> TypeDecoder:
        """The root's memo of the value-info types decoded in its hierarchy (made at the
        first decode: most graphs, bodies, patterns and replacements, decode none)."""
        root = self.root_graph()
        if root._types is None:
            root._types = TypeDecoder()
        return root._types

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
        """Opset version per domain ("" is the standard ONNX domain) of the model: the
        model's own dict, which may be written. Inside a transaction the imports as they are
        when first asked for are recorded, so a rollback puts them back whoever wrote them."""
        root = self.root_graph()
        record_opset_imports(root, once=True)
        return root.model.opset_imports

    def get_opset_version(self, domain: str = "") -> int | None:
        """The model's opset version for `domain` ("" and "ai.onnx" are the same domain)."""
        if not isinstance(domain, str):
            raise GraphTypeError(f"domain must be a str, got {type(domain).__name__}")
        imports = self.root_graph().model.opset_imports
        if domain in ("", "ai.onnx"):
            return imports.get("", imports.get("ai.onnx"))
        return imports.get(domain)

    # -- transactions -------------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[Graph]:
        """Undo every mutation made inside the block (subgraphs too) when an exception escapes.

        Full garbage collections are held off for the block (`no_full_collections`): its
        undo records keep every change alive, so a full collection could free little and
        would traverse the whole graph; young collections go on.

        The model's opset imports are put back as they were too, whoever changed them
        (`opset_imports` records them when a block first asks for the dict)."""
        with no_full_collections(splice=False), self.root_graph()._journal.transaction():
            yield self

    def _changed(self, structural: bool) -> Journal:
        root = self.root_graph()
        root._all_nodes = root._all_subgraphs = None
        journal = root._journal
        journal.mutation_count += 1
        if journal.watcher is not None:
            journal.watcher()
        if root is not self:
            journal.inner_version += 1
        if structural:
            journal.structure_version += 1
            # Drop the cached node list now, not at the next query: it would keep every node
            # removed since alive (and the collector busy with them) until then.
            self._topo = self._typed = None
        return journal

    # -- change tracking ----------------------------------------------------------------
    def subscribe(self, listener: ChangeListener) -> Callable[[], None]:
        """Call `listener(kind, node, index)` on every change of this graph's hierarchy
        (node added or removed, an input's producer changed, an attribute changed); returns
        the function that unsubscribes it. A removed node is reported once, as removed: the
        inputs it loses with it are not reported one by one.

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

    @property
    def changing_attribute(self) -> str | None:
        """While `subscribe` listeners are told of an `ATTR_CHANGED`, the name of the
        attribute set or removed (else None): the notification's `index` is -1, and a
        listener that wants the name reads it here, so edits pay nothing for it."""
        return self.root_graph()._journal.changing_attribute

    @contextmanager
    def track_changes(self) -> Iterator[ChangeSet]:
        """Collect the nodes changed inside the block (a matcher's worklist, a pass's region)."""
        changes = ChangeSet(self.root_graph()._journal)
        unsubscribe = self.subscribe(changes._record)
        try:
            yield changes
        finally:
            unsubscribe()

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, node: object) -> bool:
        return node in self._nodes

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

    def close(self) -> None:
        """Release the graph now (extension): cut the references between its nodes, its
        bodies and its tables, so that reference counting frees them at once instead of
        Python's cyclic collector, which traverses every object of the process to find a
        dropped graph (about a second for a compiled 100,000-node model).

        A root graph only, with every graph of its hierarchy (bodies, orphan subgraphs,
        bodies being built for it); not inside one of its transactions (`GraphError`).
        Afterwards the graph keeps its `name`, and a node of it that something still holds
        (a report, an error, a plugin) its `name`, `type`, `domain` and `owner_graph`; any
        other use of either raises `GraphClosedError`. Closing a closed graph does nothing.
        See `ge.graph.closing`."""
        from ge.graph.closing import close_graph

        close_graph(self)

    @property
    def closed(self) -> bool:
        """Whether `close()` released the graph (or its root, for a body)."""
        return False

    def __copy__(self) -> Graph:
        raise GraphError("ge.graph.Graph cannot be copied with copy(); use Graph.clone()")

    def __deepcopy__(self, memo: Any) -> Graph:
        raise GraphError("ge.graph.Graph cannot be copied with deepcopy(); use Graph.clone()")

    def __reduce__(self) -> Any:
        # (a closed graph too: it holds only its name, and an open one's nodes refuse)
        raise GraphError("ge.graph.Graph cannot be pickled; save it as ONNX (Graph.save, "
                         "Graph.to_onnx) and load that (ge.graph.load)")

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
             lift_constants: bool = False, full_check: bool = False,
             before_commit: Callable[[Path | None], None] | None = None,
             strip_metadata: bool = False) -> Path | None:
        """Write the model to `path` (atomically: on failure nothing is left behind); returns
        the external data file written beside it, or None.

        `external_data=None` decides by size (over protobuf's 2 GB limit → external);
        `True` puts tensors of at least `size_threshold` bytes into one data file beside the
        model (`<model file>.data` unless `external_data_name` says otherwise; `path` a
        symbolic link: the file it names is written, and its data file goes beside that file,
        named after it, which is the path returned). Writing over
        the file the model was loaded from (or its data files) needs `overwrite_input=True`;
        saved over its model file, a model that read its weights from one data file beside
        it keeps them there (that file written anew, renamed into place with the model),
        unless `external_data=False` or `external_data_name` says otherwise. `value_info`
        and `lift_constants` as in `to_onnx`. `full_check=True` runs
        `onnx.checker.check_model(full_check=True)` on what would be written and refuses a
        model it rejects (`GraphValidationError`, nothing written); models with external
        data are not checked (their tensors are not in memory). `before_commit(data_file)`
        runs once the files are written and checked, before they are renamed into place (the
        data file that will be, or None): a caller writes there what describes the model (a
        report), so that its failure leaves the previous model where it was.
        `strip_metadata=True` leaves out the doc strings and `metadata_props` of nodes,
        values, tensors, graphs and functions (`ge.graph.annotations.strip_annotations`:
        exporters' stack traces and namespaces, ge's `ge.origin_*`); the graph keeps them.
        """
        from ge.graph.model_io import save_model

        return save_model(self, path, external_data=external_data,
                          external_data_name=external_data_name,
                          size_threshold=size_threshold, overwrite_input=overwrite_input,
                          value_info=value_info, lift_constants=lift_constants,
                          full_check=full_check, before_commit=before_commit,
                          strip_metadata=strip_metadata)

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

