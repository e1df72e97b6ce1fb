"""Looking nodes and values up in a `Graph` (a mixin of `Graph`): its nodes in order, by
type through the op-type index, by name, its inputs and output node, a value's producer."""

# mypy: disable-error-code="misc"
# (mixin methods take `self: Graph`, a subclass of the mixin: mypy flags that as [misc])

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ge.errors import GraphError, GraphTypeError
from ge.graph import order
from ge.graph.domains import normalize_domain
from ge.graph.node import DATA, NET_OUTPUT, Node

if TYPE_CHECKING:
    from ge.graph.graph import Graph

__all__ = ["GraphQueries"]


def _check_op_query(op_type: object, domain: object) -> None:
    """GE1002 unless `op_type` is a str and `domain` a str or None (an operator query)."""
    if not isinstance(op_type, str):
        raise GraphTypeError(f"op_type must be a str, got {type(op_type).__name__}")
    if domain is not None and not isinstance(domain, str):
        raise GraphTypeError(f"domain must be a str or None, got {type(domain).__name__}")


class GraphQueries:
    """The look-ups of `Graph` (a mixin; its methods run on a `Graph`)."""

    def get_direct_nodes(self: Graph) -> list[Node]:
        """Nodes of this graph (not of its subgraphs) in the graph's order: a new list, so
        the graph may be changed while iterating it. The order is a topological one once
        `topological_order()` established it, until an edge closes a cycle (graph.md)."""
        return list(self._listed())

    def _listed(self: Graph) -> list[Node]:
        """The node list in order, cached until the structure changes (do not mutate)."""
        journal = self.root_graph()._journal
        version = (journal, journal.structure_version)
        topo = self._topo
        if topo is None or topo[0] != version:
            topo = self._topo = (version, list(order.walk(self)))
        return topo[1]

    def get_all_nodes(self: Graph) -> list[Node]:
        """Nodes of this graph and, depth first after their owner, of all its subgraphs: a
        new list. A root graph keeps the list until its hierarchy changes."""
        return self._kept_list("_all_nodes", self._collect_all_nodes)

    def _kept_list(self: Graph, slot: str, collect: Callable[[], list[Any]]) -> list[Any]:
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

    def _collect_all_nodes(self: Graph) -> list[Node]:
        out: list[Node] = []
        for node in self._listed():
            out.append(node)
            if node._attrs and not node._clean:  # a clean node owns no subgraph
                for sub in node.get_subgraphs():
                    out.extend(sub._collect_all_nodes())
        return out

    def nodes_of_type(self: Graph, op_type: str, domain: str | None = "") -> list[Node]:
        """Direct nodes of one operator, in the graph's order: a new list (the graph may be
        changed while iterating it).

        Found through the op-type index, never a scan of the graph; putting them in order
        costs a sort of those k nodes the first time after a change of the graph's
        structure (an added or removed node), a copy of k after that. `domain` tells
        operators of the same name apart (`Gelu` of "" and of "com.microsoft" are
        different operators); "" and "ai.onnx" are the same domain, and None is every
        domain.
        """
        try:
            nodes = self._by_type.get(op_type)
        except TypeError:  # unhashable: refused below
            nodes = None
        if not nodes:  # (only a miss checks the types: a hit had a str op_type)
            _check_op_query(op_type, domain)
            return []
        journal = self.root_graph()._journal
        version = (journal, journal.structure_version)
        typed = self._typed
        if typed is None or typed[0] != version:
            fresh: dict[tuple[str, str | None], list[Node]] = {}
            typed = self._typed = (version, fresh)
        try:
            found = typed[1].get((op_type, domain))
        except TypeError:  # unhashable: refused below
            found = None
        if found is None:
            _check_op_query(op_type, domain)
            if domain is None:
                found = sorted(nodes, key=order.label)
            else:
                wanted = normalize_domain(domain)
                found = sorted((n for n in nodes if normalize_domain(n._domain) == wanted),
                               key=order.label)
            typed[1][(op_type, domain)] = found
        return list(found)

    def count_of_type(self: Graph, op_type: str, domain: str | None = "") -> int:
        """How many direct nodes `nodes_of_type(op_type, domain)` would give: ONNX's
        operator by default, another domain's, or every domain's with None. O(1) for every
        domain and for the standard one; another counts the op's nodes."""
        try:
            nodes = self._by_type.get(op_type)
        except TypeError:  # unhashable: refused below
            nodes = None
        if not nodes:  # (only a miss checks the types: a hit had a str op_type)
            _check_op_query(op_type, domain)
            return 0
        if domain is None:
            return len(nodes)
        if domain == "":  # the default, before the type check it makes needless
            return len(nodes) - self._custom_typed.get(op_type, 0)
        _check_op_query(op_type, domain)
        wanted = normalize_domain(domain)
        if not wanted:
            return len(nodes) - self._custom_typed.get(op_type, 0)
        return sum(1 for n in nodes if n._domain == wanted)

    def op_types(self: Graph) -> list[str]:
        return [t for t, nodes in self._by_type.items() if nodes]

    def find_node_by_name(self: Graph, name: str) -> Node:
        """The direct node called `name` (`RuntimeError` when there is none)."""
        if not isinstance(name, str):
            raise GraphTypeError(f"name must be a str, got {type(name).__name__}")
        try:
            return self._by_name[name]
        except KeyError:
            raise GraphError(f"graph {self._name!r} has no node named {name!r}") from None

    def has_node(self: Graph, name: str) -> bool:
        """Whether a direct node is called `name`."""
        try:
            if name in self._by_name:
                return True
        except TypeError:  # unhashable: refused below
            pass
        if not isinstance(name, str):
            raise GraphTypeError(f"name must be a str, got {type(name).__name__}")
        return False

    def get_data_nodes(self: Graph) -> list[Node]:
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

    def get_net_output(self: Graph) -> Node | None:
        """The `NetOutput` node (the first in the graph's order if there are several: an
        invalid graph, but the answer must not depend on the index's insertion history)."""
        outs = self._by_type.get(NET_OUTPUT)
        if not outs:
            return None
        if len(outs) == 1:
            return next(iter(outs))
        return min(outs, key=order.label)

    def find_value(self: Graph, value_name: str) -> tuple[Node, int] | None:
        """The producer of an ONNX value name, looked up in this graph then enclosing ones."""
        try:
            for graph in self._ancestors():
                found = graph._values.get(value_name)
                if found is not None:
                    return found
        except TypeError:  # unhashable: refused below
            pass
        if not isinstance(value_name, str):  # (only a miss checks: a hit had a str)
            raise GraphTypeError(f"value_name must be a str, got {type(value_name).__name__}")
        return None

    def quantization_annotations(self: Graph) -> dict[str, dict[str, str]]:
        """The graph's quantization annotations as read from ONNX: each annotated value's
        name with its parameters (`SCALE_TENSOR`, `ZERO_POINT_TENSOR` ...) and the names of
        the tensors holding them. Saving drops the annotation of a value no longer defined."""
        extras = self._onnx_extras
        if extras is None:
            return {}
        return {a.tensor_name: {p.key: p.value for p in a.quant_parameter_tensor_names}
                for a in extras.quantization_annotation}
