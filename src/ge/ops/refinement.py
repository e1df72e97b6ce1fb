"""Refining output descs downstream of values that became known during optimisation.

Whole-graph inference (`infer_shapes`) runs once, before the optimisations. When constant
folding later turns a computed value into a constant (a shape built by `ConstantOfShape`,
`Where` and `Equal` that onnx's data propagation could not follow, as the attention masks
of exported transformers have), the descs downstream still say what inference knew then:
`[unk__0, unk__1, 12, 12]` where `[1, 1, 12, 12]` is now certain. `refine_output_descs`
infers the consumers of such values again, node by node, and keeps only what adds to a
desc: an unknown type or rank, an unknown or symbolic dim made static. A desc is never made
vaguer (one node's inference cannot see what data propagation saw across a chain) and never
contradicted (a conflict keeps the desc as it was). Refined outputs carry on to their
consumers, so one call settles everything the new constants decide. A custom operator's
inference function failing here is the `InferenceFunctionError` it is anywhere else.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator

from ge.errors import GeError, InferenceFunctionError
from ge.graph.node import Node
from ge.graph.tensor_desc import Shape, TensorDesc
from ge.graph.types import DataType
from ge.ops.inference import infer_node
from ge.ops.onnx_node import STRUCTURAL

__all__ = ["refine_output_descs", "refined_desc"]


def refined_desc(old: TensorDesc, new: TensorDesc) -> TensorDesc | None:
    """`old` with what `new` adds to it (type, rank, static dims), or None when `new`
    adds nothing or contradicts `old` (another type, rank or static dim)."""
    old_type, new_type = old.data_type, new.data_type
    if new_type == DataType.DT_UNDEFINED:
        return None
    if old_type not in (DataType.DT_UNDEFINED, new_type):
        return None
    old_shape, new_shape = old.get_shape(), new.get_shape()
    if new_shape.is_unknown_rank():
        dims = None if old_type == new_type else list(old_shape)
    elif old_shape.is_unknown_rank():
        dims = list(new_shape)
    elif len(old_shape) != len(new_shape):
        return None
    else:
        dims = []
        for was, now in zip(old_shape, new_shape, strict=True):
            was_static = isinstance(was, int) and was >= 0
            now_static = isinstance(now, int) and now >= 0
            if was_static and now_static and was != now:
                return None
            dims.append(now if now_static and not was_static else was)
    if dims is None or (old_type == new_type and dims == list(old_shape)):
        return None
    refined = new.copy()  # (its format is the anchor's: inference keeps that)
    refined.shape = refined.origin_shape = Shape(dims)
    return refined


def _consumers(node: Node, outputs: Iterable[int]) -> Iterator[Node]:
    for index in outputs:
        for consumer, _ in node.get_out_data_nodes_and_port_indexes(index):
            yield consumer


def refine_output_descs(nodes: Iterable[Node],
                        leave: Callable[[Node], bool] | None = None) -> int:
    """Infer `nodes` again and keep what that adds to their output descs (see the module
    docstring), then do the same for the consumers of every refined output. Nodes owning
    subgraphs, structural nodes, nodes onnx cannot type and those `leave` is true of are
    left as they are; a custom operator's inference function failing raises
    (`InferenceFunctionError`). Returns the number of outputs refined."""
    queue = deque(nodes)
    queued = set(queue)
    refined_count = 0
    while queue:
        node = queue.popleft()
        queued.discard(node)
        if node.owner_graph is None or (node.type in STRUCTURAL and not node.domain):
            continue
        if node.get_subgraphs() or (leave is not None and leave(node)):
            continue
        count = node.get_outputs_size()
        old = [node.get_output_desc(i) for i in range(count)]
        try:
            infer_node(node, quiet=True)  # (writes what it infers; undone below if worse)
        except InferenceFunctionError:
            raise  # a custom operator's own function failing: its author's bug, as anywhere
        except GeError:  # an operator without a schema: its descs stay as they are
            continue
        changed: list[int] = []
        for i in range(count):
            now = node.get_output_desc(i)
            if now == old[i]:
                continue
            better = refined_desc(old[i], now)
            if better is None:
                node.update_output_desc(i, old[i])
                continue
            if better != now:
                node.update_output_desc(i, better)
            changed.append(i)
        refined_count += len(changed)
        for consumer in _consumers(node, changed):
            if consumer not in queued:
                queued.add(consumer)
                queue.append(consumer)
    return refined_count
