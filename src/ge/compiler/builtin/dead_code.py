"""`DeadCodeElimination`: remove the nodes whose values can never reach a graph output.

A node is live when the `NetOutput` node depends on it: through data edges, control edges,
or because a subgraph body of a live node reads its value (an outer-scope read). Everything
else goes, unused constants (initializers) included, but for those holding the quantization
parameters a live value's annotation names (`Graph.quantization_annotations`: the scale and
zero point a quantization tool reads; trial BB); graph inputs (`Data` nodes) always stay.
The exporter writes value infos only for values that exist, so none is left behind for a
removed node.
"""

from __future__ import annotations

from ge.compiler.pass_registry import builtin_pass
from ge.graph import DATA, Graph, Node
from ge.passes import NOT_CHANGED, FusionBasePass, PassContext
from ge.passes.status import SUCCESS, StatusLike

__all__ = ["DeadCodeElimination", "live_nodes"]


def live_nodes(graph: Graph) -> set[Node]:
    """The direct nodes of `graph` that its `NetOutput` node depends on (itself included),
    and the tensors holding the quantization parameters of live annotated values."""
    net_output = graph.get_net_output()
    if net_output is None:
        return set(graph.get_direct_nodes())  # no output to measure liveness by: keep all
    live = {net_output}
    _mark_dependencies(graph, live, [net_output])
    parameters = []
    # the annotations of this graph and of the bodies inside it (one may name this graph's
    # tensors: trial FF's If branch annotated its value with the root's scale)
    for annotating in [graph, *(g for g in graph.get_all_subgraphs() if not g.is_orphan())]:
        for value, tensors in annotating.quantization_annotations().items():
            annotated = annotating.find_value(value)
            if annotated is None or (annotated[0].owner_graph is graph
                                     and annotated[0] not in live):
                continue  # (its annotation is dropped when the graph is saved)
            for name in tensors.values():
                found = annotating.find_value(name)
                if found is not None and found[0] not in live and (
                        found[0].owner_graph is graph):
                    live.add(found[0])
                    parameters.append(found[0])
    _mark_dependencies(graph, live, parameters)
    return live


def _mark_dependencies(graph: Graph, live: set[Node], stack: list[Node]) -> None:
    """Add to `live` every node of `graph` the nodes of `stack` (live already) depend on."""
    while stack:
        node = stack.pop()
        deps = node.get_in_data_nodes()  # (the producers of its connected inputs)
        control = node.get_in_control_nodes()
        if control:
            deps.extend(control)
        if node.get_subgraphs():
            deps.extend(src for src, _ in node.get_outer_inputs())
        for dep in deps:
            if dep not in live and dep.owner_graph is graph:
                live.add(dep)
                stack.append(dep)


@builtin_pass(name="DeadCodeElimination", step="origin_graph_optimize")
class DeadCodeElimination(FusionBasePass):
    """Remove every node with no path to the graph's outputs (see the module docstring)."""

    def run(self, graph: Graph, context: PassContext) -> StatusLike:
        live = live_nodes(graph)
        dead = [n for n in graph.topological_order()
                if n not in live and not (n.type == DATA and not n.domain)]
        graph.remove_nodes(dead)
        return SUCCESS if dead else NOT_CHANGED
