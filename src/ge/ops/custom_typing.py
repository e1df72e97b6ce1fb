"""Typing the nodes onnx's whole-model inference leaves to ge (custom operators, `ai.onnx.ml`
ones without an inference function) between its runs, each only once its inputs are final.

A value onnx typed while an operator upstream of it had no output type yet is provisional:
onnx gives `Mul(x, <untyped>)` a type of unknown rank, and a custom operator reading it
must not be typed from that (its function would see a placeholder, and its outputs, once
typed, are kept). `provisional_nodes` is what the untyped ones reach; `ready` says whether
a node's inputs are final; `type_in_order` types a provisional region node by node, in
graph order, where whole-model runs would take one run per link of a long chain.
"""

from __future__ import annotations

from collections.abc import Iterable, Set

from ge.errors import GeError, InferenceFunctionError
from ge.graph.graph import Graph
from ge.graph.node import Node
from ge.ops.inference import infer_node, typed_by_ge
from ge.ops.ml_shapes import typed_by_ml_rule
from ge.ops.onnx_node import STRUCTURAL

__all__ = ["provisional_nodes", "ready", "settled", "type_in_order", "typed"]


def typed(node: Node) -> bool:
    """Whether every output `node` gives (an absent optional one, named "", is not given)
    has a desc."""
    return all(node.has_output_desc(i) for i in range(node.get_outputs_size())
               if node.get_output_name(i))


def settled(node: Node) -> bool:
    """Whether a node typed by ge needs no inference: every output typed, and for an
    `ai.onnx.ml` one with a known rank (strict inference gives its outputs an element type
    only)."""
    if not typed(node):
        return False
    return not typed_by_ml_rule(node) or not any(
        node.get_output_desc(i).get_shape().is_unknown_rank()
        for i in range(node.get_outputs_size()) if node.get_output_name(i))


def provisional_nodes(untyped: Iterable[Node]) -> set[Node]:
    """`untyped` (nodes the last whole-model run could not type) and the nodes whose descs
    it computed from their outputs: their consumers, transitively, the owner of a body
    holding one, and every node of the bodies of such an owner (they may read its inputs)."""
    stack = list(untyped)
    found: set[Node] = set(stack)
    while stack:
        node = stack.pop()
        reached = list(node.get_out_data_nodes())
        graph = node.owner_graph
        owner = graph.parent_node if graph is not None else None
        if owner is not None:
            reached.append(owner)
        for body in node.get_subgraphs():
            reached.extend(body.get_all_nodes())
        for each in reached:
            if each not in found:
                found.add(each)
                stack.append(each)
    return found


def ready(node: Node, provisional: Set[Node], fresh: Set[Node] = frozenset()) -> bool:
    """Whether `node`'s inputs are final: each producer is outside `provisional`, in
    `fresh` (typed again since), or a node typed by ge that is settled (typed from final
    inputs itself)."""
    for i in range(node.get_inputs_size()):
        source = node.get_input_producer(i)
        if source is None:
            continue
        producer = source[0]
        if producer in provisional and producer not in fresh and not (
                typed_by_ge(producer) and settled(producer)):
            return False
    return True


def type_in_order(root: Graph, provisional: set[Node]) -> bool:
    """Infer the nodes of `provisional` node by node in graph order (the root graph's, then
    each body's), each once its inputs are final: standard ones by their one-node inference
    (a node owning bodies is left to the next whole-model run), those typed by ge by theirs.
    Whether a node typed by ge was typed."""
    fresh: set[Node] = set()
    changed = False
    for graph in (root, *root.get_all_subgraphs()):
        for node in graph.topological_order():
            if node not in provisional or not ready(node, provisional, fresh):
                continue
            if typed_by_ge(node):
                if not settled(node):
                    if infer_node(node) is None:
                        continue
                    changed = True
                fresh.add(node)
                continue
            if (node.type in STRUCTURAL and not node.domain) or node.get_subgraphs():
                continue
            try:
                if infer_node(node, quiet=True) is not None:
                    fresh.add(node)
            except InferenceFunctionError:
                raise
            except GeError:  # an operator without a schema: the next run types it
                continue
    return changed
