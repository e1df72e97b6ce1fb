"""Which nodes give different outputs on each run, and which graph outputs they reach.

Constant folding and CSE must leave such nodes alone (two evaluations differ), and numeric
verification cannot compare the outputs they reach: two runs of the same model differ there.
"""

from __future__ import annotations

import onnx

from ge.graph.domains import normalize_domain, proto_nodes
from ge.graph.graph import Graph
from ge.graph.model_info import ModelInfo
from ge.graph.node import Node
from ge.ops.functions import FunctionKey, call_key, called_function, function_key
from ge.ops.onnx_node import const_value, node_opset

__all__ = ["NONDETERMINISTIC_OPS", "dropout_in_inference", "is_random", "random_outputs",
           "random_source"]

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


def _random_itself(node: Node) -> bool:
    """A random operator, or a Dropout that may run in training mode (a random mask)."""
    if node.type in NONDETERMINISTIC_OPS:  # in any domain: never folded or merged
        return True
    return node.type == "Dropout" and not node.domain and not dropout_in_inference(node)


def random_source(node: Node) -> str | None:
    """What makes two evaluations of `node` differ, said for a message ("the random operator
    RandomNormal 'r'", "... in a body of 'if'", "... in function loc.Noise, which 'n'
    calls"), or None when they cannot: the node itself, a node of its bodies at any depth,
    or a random operator in the body of the model-local function it calls (at any depth
    of calls; a Dropout there counts when it has a training_mode input)."""
    if _random_itself(node):
        mode = " in training mode" if node.type == "Dropout" else ""
        return f"the random operator {node.type} {node.name!r}{mode}"
    if node._attrs and not node._clean:
        for body in node.get_subgraphs():
            # (its direct nodes: the call on each looks into their bodies; every node at any
            # depth from here took time exponential in the depth of nested Ifs: trial Q)
            for inner in body.get_direct_nodes():
                found = random_source(inner)
                if found is not None:
                    return f"{found} in a body of {node.name!r}"
    function = called_function(node) if normalize_domain(node.domain) else None
    if function is not None:
        graph = node.owner_graph
        assert graph is not None  # (a node calling a function of its model has a graph)
        op_type = _random_in_function(function, graph.root_graph().model, set())
        if op_type is not None:
            return (f"the random operator {op_type} in function "
                    f"{node.domain}.{node.type}, which {node.name!r} calls")
    return None


def _random_in_function(function: onnx.FunctionProto, model: ModelInfo,
                        seen: set[FunctionKey]) -> str | None:
    """The op type of a random operator in local `function` (its bodies and the functions
    of `model` it calls), or None."""
    seen.add(function_key(function))
    for inner in proto_nodes(function.node):
        if inner.op_type in NONDETERMINISTIC_OPS or (
                inner.op_type == "Dropout" and len(inner.input) > 2 and inner.input[2]):
            return inner.op_type
        callee = model.function(call_key(inner))
        if callee is not None and function_key(callee) not in seen:
            found = _random_in_function(callee, model, seen)
            if found is not None:
                return found
    return None


def is_random(node: Node) -> bool:
    """Whether two evaluations of `node` may differ (`random_source`): constant folding and
    CSE leave it alone."""
    return random_source(node) is not None


def random_outputs(graph: Graph) -> dict[str, str]:
    """The outputs of `graph` that depend on a random node, each with what makes it random
    (`random_source`). Two runs differ there."""
    source: dict[int, str] = {}  # id(node) -> what makes what it depends on random
    for node in graph.topological_order():
        origin = random_source(node)
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
    found: dict[str, str] = {}
    for i in range(net_output.get_inputs_size()):
        producer = net_output.get_input_producer(i)
        if producer is not None and id(producer[0]) in source:
            found[producer[0].get_output_name(producer[1])] = source[id(producer[0])]
    return found
