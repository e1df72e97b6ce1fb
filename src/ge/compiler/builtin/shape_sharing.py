"""`SymbolicShapeSharing`: one node per distinct symbolic shape value.

Exporters compute a reshape target from the tensor at hand, `Concat(Unsqueeze(Gather(Shape
(x), 0)), ...)`, in every layer: a 32-layer decoder computes `batch` and `sequence` a hundred
times, each from another layer's hidden state. ONNX names a dim it cannot size with a
symbol (`dim_param`), and one symbol is one size throughout a model, so `Shape(h_1)` and
`Shape(h_7)` of two values typed `[batch, sequence, 64]` are the same tensor: so are
`Gather(Shape(x), 1)` and `Gather(Shape(q), 2)` when both dims are `sequence`.

Walking the graph in topological order, a `Shape` (its `start`/`end` applied), `Size` or
`Gather(Shape(x), constant index)` whose value every dim of which is known, at least one by
a symbol, is keyed by that value (the dims, the result's shape); a later node of the same
key has its uses moved to the first and is removed. Common-subexpression elimination,
which runs next, then merges the arithmetic downstream, now fed by one node. Values whose
dims are all static are constant folding's; a dim with no size and no symbol (an unknown
rank, a dim inference could not name) keeps its node. Only nodes of one graph are merged
(a body's with the body's).

This makes the inferred dims decide what the model computes, where before they only
described it, so only dims inference derives soundly are trusted: not those of a value
computed, at any distance, from a node whose inference may name a dim after one operand
where the runtime broadcasts (`Einsum` does: `...ij,...jk` of `[n, 4, 4]` and `[m, 4, 4]`
is inferred `[n, 4, 4]`, a user trial's wrong model), from an operator of another domain
than ONNX's (a plugin's inference is its author's; onnxruntime's contrib schemas), from a
call of a model function, from a control-flow node, or from a value of an enclosing graph;
nor anything in a `Loop` or `Scan` body, whose inputs the model declares and whose
loop-carried values may change shape from one iteration to the next.
"""

from __future__ import annotations

from collections.abc import Hashable

from ge.compiler.builtin._support import (
    LOOPS,
    UNSOUND_DIMS,
    downstream_of,
    inside_loop,
    rewirable,
    shape_dims,
)
from ge.compiler.builtin.constant_folding import gathered_dims
from ge.compiler.pass_registry import builtin_pass
from ge.graph import Graph, Node
from ge.graph.graph import CONST, DATA
from ge.passes import NOT_CHANGED, FusionBasePass, PassContext
from ge.passes.status import SUCCESS, StatusLike

__all__ = ["SymbolicShapeSharing", "shape_value_key", "untrusted_values"]


def _known(dims: list[int | str]) -> bool:
    """Every dim sized or named, and at least one named (all sized: folding's)."""
    return (any(isinstance(d, str) for d in dims)
            and all(isinstance(d, str) or d >= 0 for d in dims))


def shape_value_key(node: Node) -> Hashable | None:
    """What `node` computes, when it is the shape arithmetic this pass merges: `("dims",
    dims, shape)` for a `Shape` or a `Gather(Shape(x), constant)` (equal keys, equal int64
    tensors, whichever computes them), `("size", dims)` for a `Size`; else None."""
    if node.domain:
        return None
    if node.type == "Shape":
        dims = shape_dims(node)
        return None if dims is None or not _known(dims) else ("dims", tuple(dims), (len(dims),))
    if node.type == "Gather":
        found = gathered_dims(node)
        if found is None or not _known(found[0]):
            return None
        return ("dims", tuple(found[0]), tuple(found[1]))
    if node.type == "Size" and node.get_input_producer(0) is not None:
        shape = node.get_input_desc(0).get_shape()
        if shape.is_unknown_rank() or not _known(list(shape)):
            return None
        return ("size", tuple(shape))
    return None


#: Operators whose dims are not trusted downstream: an inference that may name a broadcast
#: dim after one operand (`UNSOUND_DIMS`), control flow (its outputs' dims are its bodies').
_UNSOUND = frozenset({*UNSOUND_DIMS, "If", *LOOPS})


def untrusted_values(graph: Graph) -> set[Node] | None:
    """The nodes of `graph` whose output dims this pass may not trust (see the module
    docstring), or None for a graph nothing in is trusted (a loop's body, or a graph
    inside one: an If branch reading the body's loop-carried values)."""
    if inside_loop(graph):  # a loop's body, or a branch inside one (trial AA)
        return None
    owner = graph.parent_node

    def untrusted(node: Node) -> bool:
        if node.type in (DATA, CONST):
            return node.type == DATA and owner is not None  # a body's Data: no graph input
        return bool(node.domain) or node.type in _UNSOUND or any(
            p is not None and p[0].owner_graph is not graph  # a value of an enclosing graph
            for p in map(node.get_input_producer, range(node.get_inputs_size())))

    return downstream_of(graph, untrusted)


@builtin_pass(name="SymbolicShapeSharing", step="origin_graph_optimize",
              requires=("Shape", "Size"))
class SymbolicShapeSharing(FusionBasePass):
    """Compute each symbolic shape value once per graph (see the module docstring)."""

    def run(self, graph: Graph, context: PassContext) -> StatusLike:
        untrusted = untrusted_values(graph)
        if untrusted is None:
            return NOT_CHANGED
        first: dict[Hashable, Node] = {}
        changed = False
        for node in graph.topological_order():
            if node.type not in ("Shape", "Gather", "Size") or node in untrusted:
                continue  # (a Shape is untrusted when the value it reads is)
            key = shape_value_key(node)
            if key is None:
                continue
            kept = first.setdefault(key, node)
            if kept is node or not rewirable(node):
                continue
            graph.replace_all_uses(node, 0, kept, 0)
            graph.remove_node(node)
            changed = True
        return SUCCESS if changed else NOT_CHANGED
