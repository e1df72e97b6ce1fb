"""Journaled setters of a node's attributes, descs, metadata and anchor attributes.

A mixin of `Graph` (see graph.py): `Node`'s setters call these so that every change of a
node's state is journaled by its graph; kept apart from the graph's structure (nodes, edges).
"""

# mypy: disable-error-code="misc"
# (mixin methods take `self: Graph`, a subclass of the mixin: mypy flags that as [misc])

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import onnx

from ge.errors import GraphError, GraphTypeError
from ge.graph import order
from ge.graph.attributes import GRAPH_KINDS, decode_attr, to_stored
from ge.graph.edges import _keep_order
from ge.graph.journal import ChangeKind
from ge.graph.node import Node
from ge.graph.schema_rules import declared_kind
from ge.graph.tensor_desc import TensorDesc

if TYPE_CHECKING:
    from ge.graph.graph import Graph

__all__ = ["GraphNodeState"]


class GraphNodeState:
    """Node attribute and desc setters of `Graph` (a mixin; its methods run on a `Graph`)."""

    # -- node attributes and descs (called through Node) --------------------------------
    def _set_metadata(self: Graph, node: Node, items: Mapping[str, str]) -> None:
        """Set metadata entries of `node` (checked by the caller) in one journal step."""
        old = node._metadata
        node._proto_dirty()
        node._metadata = {**(old or {}), **items}
        journal = self._changed(False)
        if journal.recording:
            journal.record((setattr, node, "_metadata", old))

    def _rename_node(self: Graph, node: Node, name: str) -> None:
        """Give `node` the free name `name` (checked by the caller) in one journal step: a
        rewrite's new node taking the name of the node it replaced, once that one is gone."""
        by_name = self._by_name
        old, old_export = node._name, node._export_name
        node._proto_dirty()
        if by_name.get(old) is node:
            del by_name[old]
        by_name[name] = node
        node._name, node._export_name = name, None
        journal = self._changed(False)
        if journal.recording:
            journal.record((GraphNodeState._undo_rename, self, node, old, old_export))

    def _undo_rename(self: Graph, node: Node, old: str, old_export: str | None) -> None:
        del self._by_name[node._name]
        self._by_name[old] = node
        node._name, node._export_name = old, old_export

    def _rename_value(self: Graph, node: Node, index: int, name: str) -> None:
        """Give output `index` of `node` the value name `name`, free in scope (checked by the
        caller), in one journal step: a rewrite's new output taking the name of the output
        it replaced. Its readers are written again on export (their protos name it)."""
        old = node._out_names[index]
        node._proto_dirty()
        for consumer, _ in node._consumers[index] or ():
            consumer._proto_dirty()
        self._set_value_name(node, index, old, name)
        journal = self._changed(False)
        if journal.recording:
            journal.record((GraphNodeState._set_value_name, self, node, index, name, old))

    def _set_value_name(self: Graph, node: Node, index: int, old: str, name: str) -> None:
        values = self._values
        if old and values.get(old) == (node, index):
            del values[old]
        if name:
            values[name] = (node, index)
        node._out_names[index] = name

    def _set_attr(self: Graph, node: Node, key: str, value: Any) -> None:
        if not isinstance(key, str) or not key:
            raise GraphTypeError("attribute name must be a non-empty str")
        old = node._attrs.get(key)
        previous_kind = decode_attr(old)[0] if old is not None else None
        declared = None if old is not None else declared_kind(
            node._type, node._domain, self.get_opset_version(node._domain), key)
        stored = to_stored(key, value, previous_kind, declared)
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

    def _set_parent(self: Graph, sub: Graph, node: Node | None, declared_for: Graph | None = None
                    ) -> None:
        """Give `sub` an owner node (or none; then `declared_for` says where it may go)."""
        old, declared = sub._parent_node, sub._declared_parent
        left = sub.parent_graph
        sub._parent_node = node
        # An owner says where the body lives; a detached body remembers the scope it reads.
        sub._declared_parent = None if node is not None else declared_for
        _unregister_inner(sub, left)
        _register_inner(sub)
        if node is not None and node._graph is not None:
            # The body's outer reads are new dependencies of its owner: check at next query.
            order.mark_unknown(node._graph)

        def undo() -> None:
            joined = sub.parent_graph
            sub._parent_node, sub._declared_parent = old, declared
            _unregister_inner(sub, joined)
            _register_inner(sub)

        journal = self._changed(True)
        journal.inner_version += 1  # (a body left or joined this graph)
        if journal.recording:
            journal.record(undo)

    def _replace_attr(self: Graph, node: Node, key: str, stored: Any, old: Any) -> None:
        if stored is None:
            _keep_order(self.root_graph()._journal, node._attrs, key)
            del node._attrs[key]
        else:
            node._attrs[key] = stored
        node._proto_dirty()
        journal = self._changed(False)
        if journal.listeners:
            journal.notify_attribute(node, key)
        if journal.recording:
            journal.record((GraphNodeState._replace_attr, self, node, key, old, stored))

    def _take_subgraph(self: Graph, node: Node, key: str) -> Graph:
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

    def _remove_attr(self: Graph, node: Node, key: str) -> None:
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

    def _set_anchor_attr(self: Graph, node: Node, is_input: bool, index: int, key: str,
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

    def _take_output_descs(self: Graph, items: Iterable[tuple[Node, int, TensorDesc]]) -> None:
        """Set output descs of this graph's nodes to the descs given, which the graph takes
        over (the caller made them and keeps no reference: no copies), as one journal step:
        what shape inference writes back for every value of a graph at once."""
        old: list[tuple[list, int, Any]] = []
        for node, index, desc in items:
            slots = node._out_slots()
            old.append((slots, index, slots[index]))
            slots[index] = desc
        if not old:
            return
        journal = self._changed(False)
        if journal.recording:
            journal.record((_restore_slots, old))

    def _set_desc(self: Graph, node: Node, is_input: bool, index: int,
                  desc: TensorDesc | None) -> None:
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
        if journal.listeners:
            if is_input:
                journal.notify(ChangeKind.INPUT_CHANGED, node, index)
            else:
                journal.notify(ChangeKind.OUTPUT_DESC_CHANGED, node, index)
        if journal.recording:
            journal.record((slots.__setitem__, index, old))


def _register_inner(sub: Graph) -> None:
    """Record `sub` among the inner graphs of the graph it now sits in (see `Graph._inner`)."""
    parent = sub.parent_graph
    if parent is not None:
        parent._inner[sub] = None
        parent.root_graph()._journal.inner_version += 1


def _unregister_inner(sub: Graph, left: Graph | None) -> None:
    """Forget `sub` among the inner graphs of `left`, the graph it sat in, once it no longer
    does: a body discarded with its attribute would otherwise be held by that graph for as
    long as it lives (`Graph._inner`)."""
    if left is not None and sub.parent_graph is not left:
        left._inner.pop(sub, None)


def _restore_slots(old: list[tuple[list, int, Any]]) -> None:
    """Undo `_take_output_descs`: every slot back to what it held (newest first)."""
    for slots, index, value in reversed(old):
        slots[index] = value
