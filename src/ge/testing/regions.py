"""Readable dumps of the part of a graph a failure is about.

`describe_region(graph, nodes)` shows the whole graph when it is small, else the given
nodes and their direct neighbours (producers and consumers), each graph of the hierarchy
that holds one of them under its own header, in the graph's order, in the notation of
`Graph.dump_to_stream()`; the given nodes are marked with `*`. A region over 80 lines
leaves out the constants among the neighbours, then every neighbour, before it is cut.
"""

from __future__ import annotations

from collections.abc import Iterable

from ge.errors import GraphError
from ge.graph import Graph, Node
from ge.graph.dump import node_line
from ge.graph.node import is_const
from ge.graph.subgraphs import labelled_bodies

__all__ = ["SMALL_GRAPH_NODES", "describe_region"]

#: A graph with at most this many nodes (subgraphs included) is shown whole.
SMALL_GRAPH_NODES = 30
#: At most this many lines of a large graph are shown when no node is highlighted.
_MAX_LINES = 40
#: At most this many lines of the region around many highlighted nodes.
_MAX_REGION_LINES = 80


def _order(graph: Graph) -> list[Node]:
    try:
        return graph.topological_order()
    except GraphError:  # a cycle: show it anyway
        return graph.get_direct_nodes()


def _whole(graph: Graph, marked: set[Node], indent: str = "") -> list[str]:
    lines = [f"{indent}{_header(graph)}"]
    for node in _order(graph):
        mark = "* " if node in marked else "  "
        lines.append(f"{indent}{mark}{node_line(node)}")
        for label, sub in labelled_bodies(node):
            lines.append(f"{indent}    {label}:")
            lines.extend(_whole(sub, marked, indent + "      "))
    return lines


def _header(graph: Graph) -> str:
    if graph.parent_node is None:
        opsets = ", ".join(f"{d or 'ai.onnx'}={v}" for d, v in graph.opset_imports.items())
        return f"graph {graph.name} (opset {opsets})"
    return f"graph {graph.name} (body of {graph.parent_node.name})"


def _neighbours(node: Node) -> list[Node]:
    near = [p[0] for p in node._inputs if p is not None]
    for index in range(node.get_outputs_size()):
        near += [consumer for consumer, _ in node.get_out_data_nodes_and_port_indexes(index)]
    return near


def describe_region(graph: Graph, nodes: Iterable[Node] = (), *,
                    small: int = SMALL_GRAPH_NODES) -> str:
    """The readable dump of `graph` (small) or of `nodes` and their neighbours (large)."""
    marked = {n for n in nodes if n.owner_graph is not None}
    total = len(graph.get_all_nodes())
    legend = " (* = the nodes concerned)" if marked else ""
    if total <= small:
        return "\n".join([f"whole graph, {total} nodes{legend}:", *_whole(graph, marked)])
    if not marked:
        lines = _whole(graph, marked)
        shown = lines[: _MAX_LINES + 1]
        more = len(lines) - len(shown)
        tail = [f"  ... ({more} more lines)"] if more > 0 else []
        return "\n".join([f"graph of {total} nodes, first lines:", *shown, *tail])
    neighbours = {n for node in marked for n in _neighbours(node)
                  if n.owner_graph is node.owner_graph} - marked
    # Cut to fit, the nodes concerned kept: without the constants among the neighbours
    # first (weights, which a topological order lists before everything: a 50k-node BERT's
    # region showed 80 lines of them and none of its nodes; trial DD), then without any.
    cuts: list[tuple[set[Node], str]] = [
        (neighbours, "their neighbours"),
        ({n for n in neighbours if not is_const(n)}, "their neighbours but constants"),
        (set(), "no neighbours")]
    for near, what in cuts:
        lines = _region_lines(marked | near, marked, total, what)
        if len(lines) <= _MAX_REGION_LINES + 1:
            return "\n".join(lines)
    more = len(lines) - _MAX_REGION_LINES - 1
    return "\n".join([*lines[: _MAX_REGION_LINES + 1], f"  ... ({more} more lines)"])


def _region_lines(region: set[Node], marked: set[Node], total: int, what: str) -> list[str]:
    """The lines of `region`, graph by graph, the `marked` nodes with a `*`."""
    by_graph: dict[Graph, list[Node]] = {}
    for node in region:
        owner = node.owner_graph
        assert owner is not None
        by_graph.setdefault(owner, []).append(node)
    lines = [f"region of {len(region)} of {total} nodes: the nodes concerned (*) and {what}:"]
    for owner in sorted(by_graph, key=_depth_key):
        members = set(by_graph[owner])
        lines.append(_header(owner))
        previous = -1
        for position, node in enumerate(_order(owner)):
            if node not in members:
                continue
            if position != previous + 1:
                lines.append("  ...")
            previous = position
            mark = "* " if node in marked else "  "
            lines.append(f"{mark}{node_line(node)}")
    return lines


def _depth_key(graph: Graph) -> tuple[int, str]:
    depth, current = 0, graph
    while current.parent_graph is not None:
        depth, current = depth + 1, current.parent_graph
    return depth, graph.name
