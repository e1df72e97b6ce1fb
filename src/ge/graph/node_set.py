"""Adding and removing the nodes of a `Graph`, and the node indexes kept in step with them.

A mixin of `Graph` (see graph.py), kept apart because which nodes a graph holds is its own
concept: the journaled primitives `_insert` and `_erase` every addition and removal goes
through, the loader's unjournaled steps (`_new_node`, `_index_node`), and the public calls.
"""

# mypy: disable-error-code="misc"
# (mixin methods take `self: Graph`, a subclass of the mixin: mypy flags that as [misc])

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ge.errors import GraphError, GraphTypeError
from ge.graph import order
from ge.graph.edges import _check_index
from ge.graph.journal import ChangeKind
from ge.graph.node import CONST, DATA, NET_OUTPUT, Node
from ge.graph.removal import remove_nodes as _remove_nodes
from ge.graph.tensor import Tensor

if TYPE_CHECKING:
    import onnx

    from ge.graph.copy_in import CopyResult
    from ge.graph.graph import Graph

__all__ = ["GraphNodeSet"]


class GraphNodeSet:
    """Node creation and removal of `Graph` (a mixin; its methods run on a `Graph`)."""

    # -- node creation and removal ------------------------------------------------------
    def _new_node(
        self: Graph,
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
        node._small_tensor = None
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

    def _index_node(self: Graph, node: Node) -> None:
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
        if node._domain:  # (rare: most nodes are ONNX's)
            self._count_custom(node, 1)
        values = self._values
        for i, value_name in enumerate(node._out_names):
            if value_name:
                values[value_name] = (node, i)

    def _count_custom(self: Graph, node: Node, step: int) -> None:
        """Count `node`, an indexed node with a domain, in `_custom_typed` (`step` 1) or
        out of it (-1) unless its domain is the standard one ("ai.onnx")."""
        if node._domain != "ai.onnx":
            counts = self._custom_typed
            counts[node._type] = counts.get(node._type, 0) + step

    def _insert(self: Graph, node: Node) -> None:
        """Put a fresh node into the graph's indexes (journaled)."""
        journal = self.root_graph()._journal
        # A type new to the index is dropped again on undo: the index keeps its types in
        # first-seen order (`op_types`), which must not remember a rolled-back node.
        new_type = journal.recording and node._type not in self._by_type
        self._index_node(node)
        for sub in node.get_subgraphs():
            self._enclose(sub, node)
        self._changed(True)
        if journal.listeners:
            journal.notify(ChangeKind.NODE_ADDED, node)
        if journal.recording:
            journal.record((GraphNodeSet._undo_insert, self, node, new_type))

    def _undo_insert(self: Graph, node: Node, new_type: bool) -> None:
        self._erase(node)
        if new_type and not self._by_type.get(node._type):
            del self._by_type[node._type]

    def _erase(self: Graph, node: Node) -> None:
        """Take an edge-less node out of the graph's indexes (journaled)."""
        before, label = self._unindex(node)
        journal = self._changed(True)
        if journal.listeners:
            journal.notify_removed(self, (node,))
        if journal.recording:
            journal.record((GraphNodeSet._undo_erase, self, node, before, label))

    def _unindex(self: Graph, node: Node) -> tuple[Node | None, int]:
        """Take a node out of the graph's indexes and order (no journal, no edges touched);
        where it was: the node before it and its order label."""
        del self._nodes[node]
        name = node._name
        if self._by_name.get(name) is node:
            del self._by_name[name]
        del self._by_type[node._type][node]
        if node._domain:
            self._count_custom(node, -1)
        values = self._values
        for value_name in node._out_names:
            if value_name and values.get(value_name, (None,))[0] is node:
                del values[value_name]
        node._graph = None
        bodies = node.get_subgraphs()
        if bodies:  # (its bodies leave the graph with it: `_insert` puts them back)
            for sub in bodies:
                self._inner.pop(sub, None)  # (the graph would hold them for its lifetime)
            self.root_graph()._journal.inner_version += 1
        before, label = node._prev, node._seq
        order.unlink(self, node)
        return before, label

    def _undo_erase(self: Graph, node: Node, before: Node | None, label: int) -> None:
        self._insert(node)
        order.unlink(self, node)  # back at its place in the order
        order.link_after(self, node, before, label)

    def add_node(
        self: Graph,
        op_type: str,
        *,
        name: str | None = None,
        domain: str = "",
        num_inputs: int = 0,
        num_outputs: int | None = None,
        attrs: dict[str, Any] | None = None,
        output_names: list[str] | None = None,
    ) -> Node:
        """Create a node with unconnected anchors (extension; GE creates nodes via the builder).

        `name=None` picks a unique name from the op type; an explicit name already taken is a
        `RuntimeError`. `num_outputs` defaults to 1, to 0 for a `NetOutput`. Output value
        names default to `<node name>:<index>`; a `Data` node's one output to the node's
        name (the graph input `x` of a `Data` node `x`, as a model loaded names it; it was
        `x:0`). A `Data` node given no `index` attribute gets the smallest one no Data node
        of the graph has (the next, while they are 0..n-1; a gap a removal left, trial AC):
        it was invalid until given one, which only validate() and save said (trial Z).
        """
        if not isinstance(op_type, str) or not op_type:
            raise GraphTypeError("op_type must be a non-empty str")
        if not isinstance(domain, str):
            raise GraphTypeError(f"domain must be a str, got {type(domain).__name__}")
        if num_outputs is None:
            num_outputs = 0 if op_type == NET_OUTPUT and not domain else 1
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
        if output_names is None and op_type == DATA and not domain and num_outputs == 1:
            out_names = [self._naming.value_name(name)]  # (the graph input, as loading names it)
        elif output_names is None:
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
        index = None
        if op_type == DATA and not domain and "index" not in (attrs or {}):
            taken = {n.get_attr("index") for n in self.nodes_of_type(DATA)
                     if n.has_attr("index")}
            index = next(i for i in range(len(taken) + 1) if i not in taken)
        self._insert(node)
        for key, value in (attrs or {}).items():
            self._set_attr(node, key, value)
        if index is not None:
            self._set_attr(node, "index", index)
        return node

    def add_const(self: Graph, value: Tensor | Any, *, name: str | None = None) -> Node:
        """A `Const` node holding `value` (a `Tensor`, or data a `Tensor` accepts). A named
        constant's value (its ONNX initializer) has the node's name, made unique."""
        tensor = value if isinstance(value, Tensor) else Tensor(value)
        value_names = None if name is None else [self._naming.value_name(name)]
        node = self.add_node(CONST, name=name, num_outputs=1, output_names=value_names)
        self._set_attr(node, "value", tensor)
        node._out_slots()[0] = tensor.get_tensor_desc()
        return node

    def copy_in(self: Graph, replacement: Graph, inputs: Sequence[tuple[Node, int]]) -> CopyResult:
        """Copy `replacement` into this graph (extension): its `Data` index *i* reads
        `inputs[i]` (a producer output of this graph or an enclosing one), every other node
        is copied with its attributes and descs under a unique name, and the result gives
        the new nodes and, for each replacement output, its producer here (an input for a
        pass-through). The replacement is left as it is, so one can be copied many times.
        The model imports the domains of the copied nodes it did not import yet, at the
        replacement's versions; a custom domain imported at two versions is a `GraphError`
        (see `ge.graph.copy_in`).
        """
        from ge.graph.copy_in import copy_in

        return copy_in(self, replacement, inputs)

    def remove_node(self: Graph, node: Node) -> None:
        """Remove a direct node with all its edges (its consumers' inputs become unconnected)."""
        _remove_nodes(self, (node,))

    def remove_nodes(self: Graph, nodes: Iterable[Node]) -> None:
        """Remove direct nodes with all their edges, as one change (extension).

        The same as removing them one by one, in any order, but the edges among them go
        with them and the whole removal is one undo step: what a rewriter uses to take out
        a matched region. Inputs of the nodes that stay that read a removed node become
        unconnected. Listeners are told `NODE_REMOVED` for each node and `INPUT_CHANGED` for
        each input so cut (not for the removed nodes' own inputs). A node that is not a
        node of this graph is a `RuntimeError`, raised before anything changes.
        """
        _remove_nodes(self, nodes)
