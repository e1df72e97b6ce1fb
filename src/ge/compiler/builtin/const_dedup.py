"""`ConstantDeduplication`: keep one `Const` node per distinct constant value.

`Const` nodes whose values have the same `value_key` (dtype, shape and bytes, exactly: 0.0
and -0.0 differ) are merged into the first one in topological order, so the model stores
the value once and common-subexpression elimination sees the same producer. A constant
read by a subgraph body, or feeding a graph output whose name would change, is kept.
"""

from __future__ import annotations

from collections.abc import Hashable

from ge.compiler.builtin._support import rewirable
from ge.compiler.pass_registry import builtin_pass
from ge.graph import CONST, Graph, Node
from ge.passes import NOT_CHANGED, FusionBasePass, PassContext
from ge.passes.status import SUCCESS, StatusLike

__all__ = ["ConstantDeduplication"]


@builtin_pass(name="ConstantDeduplication", step="origin_graph_optimize")
class ConstantDeduplication(FusionBasePass):
    """Merge `Const` nodes holding equal values (see the module docstring)."""

    def run(self, graph: Graph, context: PassContext) -> StatusLike:
        seen: dict[Hashable, Node] = {}
        changed = False
        for node in graph.topological_order():
            if node.type != CONST or node.domain:
                continue
            key = node.value_key()  # None for a sparse constant
            if key is None:
                continue
            first = seen.setdefault(key, node)
            if first is node or not node.get_out_data_nodes_and_port_indexes(0):
                continue  # the first of its value, or unused (dead-code elimination's)
            if not rewirable(node):
                continue
            graph.replace_all_uses(node, 0, first, 0)
            graph.remove_node(node)
            changed = True
        return SUCCESS if changed else NOT_CHANGED
