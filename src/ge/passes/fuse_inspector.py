"""Fuse inspection (spec §4.9): may these nodes become one, and tell the engine they did.

`can_fuse` answers before a rewrite: the nodes must be non-empty, in one graph, agree on the
Ascend scheduling attributes when they carry them, and fusing them into one node must not
make a cycle. `report_fuse` records a done fusion: the new nodes get the pass name and the
names of what they replace as metadata, and the pass's count of fusions (shown in the
compile report) grows by one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ge.graph import Node
from ge.graph import order as graph_order
from ge.passes.context import PassContext
from ge.passes.rewrite import Region, tag_origin, would_create_cycle
from ge.passes.status import FAILED

__all__ = ["FuseCheckResult", "can_fuse", "report_fuse"]

#: Ascend attributes nodes fused into one must agree on (checked when present).
_AGREEING_ATTRIBUTES = (
    ("_user_stream_label", "user stream labels"),
    ("_super_kernel_scope", "super kernel scopes"),
    ("_super_kernel_options", "super kernel options"),
    ("_op_aicore_num", "AI core numbers"),
    ("_op_vectorcore_num", "vector core numbers"),
    ("_deterministic", "deterministic settings"),
    ("_deterministic_level", "deterministic levels"),
)
_DETERMINISTIC_LEVELS = range(0, 3)


@dataclass(frozen=True)
class FuseCheckResult:
    """Whether nodes may be fused, and why not."""

    ok: bool
    reason: str = ""


def _nodes(nodes: Iterable[Node], what: str = "nodes") -> list[Node]:
    listed = list(nodes)
    if not all(isinstance(n, Node) for n in listed):
        raise TypeError(f"{what} must contain only ge.graph.Node objects")
    return listed


def _fused_region(nodes: list[Node]) -> Region:
    """The nodes as one fused node would see them: outside producers and used outputs."""
    graph = nodes[0].owner_graph
    assert graph is not None
    members = set(nodes)
    inputs = list(dict.fromkeys(p for n in nodes for p in n._inputs
                                if p is not None and p[0] not in members))
    outputs = [(n, i) for n in nodes for i, consumers in enumerate(n._consumers)
               if consumers and any(c not in members for c, _ in consumers)]
    return Region(graph, sorted(nodes, key=graph_order.label), inputs, outputs)


def can_fuse(nodes: Iterable[Node]) -> FuseCheckResult:
    """Whether `nodes` (any iterable) may be fused into one node."""
    listed = _nodes(nodes)
    if not listed:
        return FuseCheckResult(False, "nodes_before_fuse is empty")
    for node in listed:
        if node.owner_graph is None:
            return FuseCheckResult(False, f"node {node.name} has no owner graph")
    graphs = {id(n.owner_graph): n.owner_graph for n in listed}
    if len(graphs) > 1:
        names = ", ".join(sorted(g.name for g in graphs.values() if g is not None))
        return FuseCheckResult(False, f"nodes are in different graphs: {names}")
    for attr, what in _AGREEING_ATTRIBUTES:
        values = {repr(n.get_attr(attr)): n.name for n in listed if n.has_attr(attr)}
        if len(values) > 1:
            listing = ", ".join(f"{name}={value}" for value, name in values.items())
            return FuseCheckResult(False, f"nodes have conflicting {what} ({attr}): {listing}")
        if attr == "_deterministic_level":
            for node in listed:
                if node.has_attr(attr) and node.get_attr(attr) not in _DETERMINISTIC_LEVELS:
                    return FuseCheckResult(
                        False, f"node {node.name} has {attr}={node.get_attr(attr)!r}, "
                        f"outside {_DETERMINISTIC_LEVELS.start}..{_DETERMINISTIC_LEVELS.stop - 1}")
    if would_create_cycle(_fused_region(listed)):
        return FuseCheckResult(False, "it will create cycle after fuse")
    return FuseCheckResult(True, "")


def report_fuse(nodes_before: Iterable[Node], nodes_after: Iterable[Node],
                context: PassContext) -> None:
    """Record that `nodes_before` became `nodes_after` (call after rewiring, before
    removing the old nodes; `nodes_after` may be empty)."""
    before = _nodes(nodes_before, "nodes_before")
    after = _nodes(nodes_after, "nodes_after")
    pass_name = context.get_pass_name() if isinstance(context, PassContext) else ""
    problem = ""
    if not isinstance(context, PassContext):
        problem = f"context must be a PassContext, got {type(context).__name__}"
    elif not pass_name:
        problem = "the context has no pass name"
    elif not before:
        problem = "nodes_before is empty"
    else:
        graphs = {id(n.owner_graph) for n in [*before, *after]}
        if None in (n.owner_graph for n in [*before, *after]) or len(graphs) > 1:
            problem = "nodes_before and nodes_after must be nodes of one graph"
    if problem:
        if isinstance(context, PassContext):
            context.set_error_message(problem)
        raise RuntimeError(f"Failed to report fusion result, pass_name={pass_name}, "
                           f"status={FAILED}: {problem}")
    tag_origin(after, pass_name, before)
    context._fusions += 1
