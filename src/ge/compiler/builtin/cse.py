"""`CommonSubexpressionElimination`: compute each distinct expression once.

Operator nodes are keyed by `ge.graph.keys.node_key` (domain, op type, attributes, input
producers, output count); walking in topological order, a node whose key was already seen
has its uses moved to the first such node and is removed, so chains of duplicates collapse
in one run. Nondeterministic operators, nodes owning subgraphs, `Const` nodes (see
`ConstantDeduplication`) and a quantized model's QuantizeLinear and DequantizeLinear nodes
(`_support.is_quantization_node`: how they pair decides what onnxruntime can fuse) are left
alone.
"""

from __future__ import annotations

from collections.abc import Hashable

from ge.compiler.builtin._support import is_operator, is_quantization_node, rewirable
from ge.compiler.pass_registry import builtin_pass
from ge.graph import Graph, Node
from ge.graph.keys import node_key
from ge.ops.randomness import is_random
from ge.passes import NOT_CHANGED, FusionBasePass, PassContext
from ge.passes.status import SUCCESS, StatusLike

__all__ = ["CommonSubexpressionElimination"]


def _can_merge(duplicate: Node, first: Node) -> bool:
    """Whether `duplicate`'s uses can all move to `first`: it may be rewired, and every
    output it has a consumer on exists (is not an omitted optional output) on `first`."""
    if not rewirable(duplicate):
        return False
    return all(first.get_output_name(i) for i in range(duplicate.get_outputs_size())
               if duplicate.get_out_data_nodes_and_port_indexes(i))


@builtin_pass(name="CommonSubexpressionElimination", step="origin_graph_optimize")
class CommonSubexpressionElimination(FusionBasePass):
    """Merge operator nodes that compute the same thing (see the module docstring)."""

    def run(self, graph: Graph, context: PassContext) -> StatusLike:
        seen: dict[Hashable, Node] = {}
        changed = False
        for node in graph.topological_order():
            if (not is_operator(node) or is_random(node)
                    or node.get_outputs_size() == 0 or is_quantization_node(node)):
                continue
            key = node_key(node)
            if key is None:
                continue
            first = seen.get(key)
            if first is None:
                seen[key] = node
                continue
            if not _can_merge(node, first):
                continue
            for i in range(node.get_outputs_size()):
                if node.get_out_data_nodes_and_port_indexes(i):
                    graph.replace_all_uses(node, i, first, i)
            graph.remove_node(node)
            changed = True
        return SUCCESS if changed else NOT_CHANGED
