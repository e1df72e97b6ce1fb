"""Data and control edges of a `Graph`: connecting, disconnecting and moving uses.

A mixin of `Graph` (see graph.py), kept apart because edges are their own concept: the
journaled primitives every rewrite goes through (`_connect`, `_disconnect`, control links),
the public calls built on them, and the helpers they share with the rest of `Graph`
(argument checks, `_keep_order` for undoing removals from ordered dicts).
"""

# mypy: disable-error-code="misc"
# (mixin methods take `self: Graph`, a subclass of the mixin: mypy flags that as [misc])

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ge.errors import GraphError, GraphTypeError
from ge.graph import order
from ge.graph.journal import ChangeKind, Journal
from ge.graph.node import Node

if TYPE_CHECKING:
    from ge.graph.graph import Graph

__all__ = ["GraphEdges"]


def _check_node_arg(node: Any, what: str = "node") -> Node:
    if not isinstance(node, Node):
        raise GraphTypeError(f"{what} must be a ge.graph.Node, got {type(node).__name__}")
    return node


def _check_index(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise GraphTypeError(f"{what} must be an int, got {type(value).__name__}")
    return value


def _order_restorer(table: dict[Any, Any]) -> Callable[[], None]:
    """An undo step that puts `table`'s keys back in their present order (values as they are).

    A key the table holds when it runs but did not hold now goes after them: one removed
    earlier in the transaction while it was last (which records no restorer), whose re-adding
    a batch undo step (`Graph.remove_nodes`) made before this one runs."""
    keys = list(table)

    def restore() -> None:
        values = dict(table)
        table.clear()
        table.update((key, values.pop(key)) for key in keys if key in values)
        table.update(values)

    return restore


def _keep_order(journal: Journal, table: dict[Any, Any], key: Any) -> None:
    """Call before `key` leaves `table`: re-adding it on undo would put it last, so unless it
    is last already, the transaction also records how to restore the order (once)."""
    if journal.recording and next(reversed(table)) != key:
        journal.record_once(id(table), lambda: _order_restorer(table))


class GraphEdges:
    """The edge operations of `Graph` (a mixin; its methods run on a `Graph`)."""

    # -- data edges -----------------------------------------------------------------------
    def _connect(self: Graph, src: Node, src_index: int, dst: Node, dst_index: int) -> None:
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
            journal.record((GraphEdges._disconnect, self, dst, dst_index))

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

    def _disconnect(self: Graph, dst: Node, dst_index: int) -> None:
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
            journal.record((GraphEdges._connect, dst._graph, src, src_index, dst, dst_index))

    def _check_member(self: Graph, node: Node, what: str, allow_outer: bool = False) -> None:
        graph = node._graph
        if graph is self:
            return
        if allow_outer and graph is not None and graph in list(self._ancestors()):
            return
        from ge.graph.places import node_ref  # (places imports the graph: not at import)

        raise GraphError(f"{what} {node_ref(node)} is not a node of graph {self._name!r}")

    def add_data_edge(self: Graph, src_node: Node, src_port_index: int, dst_node: Node,
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
            from ge.graph.places import ir_node_label, node_ref

            raise GraphError(
                f"input {dst_port_index} of {ir_node_label(dst_node)} is already connected to "
                f"output {current[1]} of {node_ref(current[0])}; remove that edge first"
            )
        self._connect(src_node, src_port_index, dst_node, dst_port_index)

    def remove_edge(self: Graph, src_node: Node, src_port_index: int, dst_node: Node,
                    dst_port_index: int) -> None:
        """Remove a data edge, or a control edge when both port indexes are -1."""
        _check_node_arg(src_node, "src_node")
        _check_node_arg(dst_node, "dst_node")
        _check_index(src_port_index, "src_port_index")
        _check_index(dst_port_index, "dst_port_index")
        self._check_member(dst_node, "dst_node")
        if src_port_index == -1 and dst_port_index == -1:
            if not dst_node._ctrl_in or src_node not in dst_node._ctrl_in:
                from ge.graph.places import node_ref

                raise GraphError(
                    f"there is no control edge {node_ref(src_node)} -> {node_ref(dst_node)}"
                )
            self._ctrl_unlink(src_node, dst_node)
            return
        dst_node._check_in(dst_port_index)
        if dst_node._inputs[dst_port_index] != (src_node, src_port_index):
            from ge.graph.places import node_ref

            raise GraphError(
                f"there is no data edge {node_ref(src_node)}:{src_port_index} -> "
                f"{node_ref(dst_node)}:{dst_port_index}"
            )
        self._disconnect(dst_node, dst_port_index)

    def replace_all_uses(self: Graph, old: Node, old_index: int, new: Node, new_index: int, *,
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
                from ge.graph.places import ir_node_label, node_ref

                raise GraphError(f"{ir_node_label(consumer)} (graph {scope.name!r}) can't "
                                 f"read {node_ref(new)}, which is not in its scope")
            if self.would_create_cycle(new, consumer):
                from ge.graph.places import node_ref

                raise GraphError(
                    f"moving the uses of {node_ref(old)}:{old_index} to {node_ref(new)}:"
                    f"{new_index} would make a cycle: {node_ref(new)} depends on its "
                    f"consumer-to-be {node_ref(consumer)}; exclude it",
                    nodes=[new._name, consumer._name])
        for consumer, j in consumers:
            consumer._graph._disconnect(consumer, j)  # type: ignore[union-attr]
            consumer._graph._connect(new, new_index, consumer, j)  # type: ignore[union-attr]
        return len(consumers)

    def set_inputs_size(self: Graph, node: Node, size: int) -> None:
        """Grow or shrink a node's input anchors (variadic operators); dropped ones must be free."""
        _check_node_arg(node)
        self._check_member(node, "node")
        _check_index(size, "size")
        if size < 0:
            raise GraphError(f"a node can't have {size} inputs")
        old = len(node._inputs)
        if size < old and any(p is not None for p in node._inputs[size:]):
            from ge.graph.places import ir_node_label

            raise GraphError(f"cannot drop connected inputs of {ir_node_label(node)}")
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
    def add_control_edge(self: Graph, src_node: Node, dst_node: Node) -> None:
        """Order `dst_node` after `src_node` (kept in the IR; ONNX has no control edges)."""
        _check_node_arg(src_node, "src_node")
        _check_node_arg(dst_node, "dst_node")
        self._check_member(src_node, "src_node")
        self._check_member(dst_node, "dst_node")
        if src_node is dst_node:
            from ge.graph.places import node_ref

            raise GraphError(f"a control edge from {node_ref(src_node)} to itself makes a cycle")
        if dst_node._ctrl_in and src_node in dst_node._ctrl_in:
            return
        self._ctrl_link(src_node, dst_node)

    def _ctrl_link(self: Graph, src: Node, dst: Node) -> None:
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

    def _ctrl_unlink(self: Graph, src: Node, dst: Node) -> None:
        journal = self.root_graph()._journal
        _keep_order(journal, src._ctrl_out, dst)  # type: ignore[arg-type]
        _keep_order(journal, dst._ctrl_in, src)  # type: ignore[arg-type]
        del src._ctrl_out[dst]  # type: ignore[union-attr]  # linked, so both exist
        del dst._ctrl_in[src]  # type: ignore[union-attr]
        journal = self._changed(True)
        if journal.recording:
            journal.record(lambda: self._ctrl_link(src, dst))
