"""Which nodes give different outputs on each run, and which graph outputs they reach.

Constant folding and CSE must leave such nodes alone (two evaluations differ), and numeric
verification cannot compare the outputs they reach: two runs of the same model differ there.
"""

from __future__ import annotations

from ge.graph.graph import Graph
from ge.graph.node import Node
from ge.ops.onnx_node import const_value, node_opset

__all__ = ["NONDETERMINISTIC_OPS", "dropout_in_inference", "is_random", "random_outputs"]

#: Operators whose outputs differ between runs.
NONDETERMINISTIC_OPS = frozenset({
    "Bernoulli",
    "Multinomial",
    "RandomNormal",
    "RandomNormalLike",
    "RandomUniform",
    "RandomUniformLike",
})


def dropout_in_inference(node: Node) -> bool:
    """Whether a Dropout runs in inference mode (the identity on its data): training_mode
    absent or a constant false, and, before opset 7, `is_test` set."""
    if node_opset(node) < 7 and not (node.has_attr("is_test") and node.get_attr("is_test")):
        return False
    if node.get_inputs_size() > 2 and node.get_input_producer(2) is not None:
        mode = const_value(node, 2)
        if mode is None or mode.size != 1 or bool(mode.numpy().reshape(-1)[0]):
            return False
    return True


def is_random(node: Node) -> bool:
    """Whether two evaluations of `node` may differ: a random operator, or a Dropout that
    may run in training mode (a random mask)."""
    if node.type in NONDETERMINISTIC_OPS:  # in any domain: never folded or merged
        return True
    return node.type == "Dropout" and not node.domain and not dropout_in_inference(node)


def _random_inside(node: Node) -> Node | None:
    """A random node in `node`'s bodies (at any depth), or None."""
    for body in node.get_subgraphs():
        for inner in body.get_all_nodes():
            if is_random(inner):
                return inner
    return None


def random_outputs(graph: Graph) -> dict[str, Node]:
    """The outputs of `graph` that depend on a random node, each with one such node (a node
    owning a body with a random node counts as random). Two runs differ there."""
    source: dict[int, Node] = {}  # id(node) -> the random node it depends on
    for node in graph.topological_order():
        origin = node if is_random(node) else _random_inside(node)
        if origin is None:
            producers = [node.get_input_producer(i) for i in range(node.get_inputs_size())]
            producers += node.get_outer_inputs()
            origin = next((source[id(p[0])] for p in producers
                           if p is not None and id(p[0]) in source), None)
        if origin is not None:
            source[id(node)] = origin
    net_output = graph.get_net_output()
    if net_output is None or not source:
        return {}
    found: dict[str, Node] = {}
    for i in range(net_output.get_inputs_size()):
        producer = net_output.get_input_producer(i)
        if producer is not None and id(producer[0]) in source:
            found[producer[0].get_output_name(producer[1])] = source[id(producer[0])]
    return found
