"""`SliceSplitFusion`: Slices that cut one value into consecutive pieces become one Split.

`rotate_half` of rotary embeddings (Llama, GPT-NeoX, ...) is `x[..., :d/2]` and
`x[..., d/2:]`, exported as two Slices of the same value; a fused QKV projection is cut the
same way into three. One `Split` reads the value once and gives every piece (onnxruntime's
extended offline level does the same). It fires on the Slices of one value, in the graph
being optimised, that:

* each cut one axis with a step of one, from constant arguments (opset 13 and later, where
  Split takes its sizes as an input; the axis and bounds may be written in any of ONNX's
  forms, negative or past the end, and are read as the Slice would clamp them);
* together, taken in order of their starts, cover that axis of the value from 0 to its
  static length (the value's other dims may be symbolic) without a gap or an overlap
  (Slices beyond one covering, such as a third cutting across the others, stay as they
  are), and are at least two.

The Split takes the Slices' place: its outputs carry their value names (graph outputs keep
theirs) and descs, and the Slices' readers read the Split. A Slice with control edges or
read inside a subgraph body, and a value of an enclosing graph (a body's outer-scope read),
are left alone. The Slices'
argument constants are left to `DeadCodeElimination`.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ge.compiler.builtin._support import (
    read_by_body,
    slice_arguments,
    unique_node_name,
)
from ge.compiler.pass_registry import builtin_pass
from ge.graph import CONST, Graph, Node, Tensor
from ge.ops.onnx_node import node_opset
from ge.passes import NOT_CHANGED, FusionBasePass, PassContext, report_fuse
from ge.passes.rewrite import tag_origin
from ge.passes.status import SUCCESS, StatusLike

__all__ = ["SliceSplitFusion"]

#: Split takes its sizes as an input from opset 13 (an attribute before).
_SPLIT_INPUT_OPSET = 13

#: (producer node, output index, axis) of the value the Slices cut.
_Cut = tuple[Node, int, int]


def _piece(node: Node) -> tuple[_Cut, int, int, int] | None:
    """(what is cut, start, end, axis length) of a Slice that cuts one non-empty range of
    one axis with step one, from constants, or None."""
    if node.domain or node_opset(node) < _SPLIT_INPUT_OPSET:
        return None
    if node.get_in_control_nodes() or node.get_out_control_nodes() or read_by_body(node):
        return None
    producer = node.get_input_producer(0)
    if producer is None or producer[0].owner_graph is not node.owner_graph:
        return None
    shape = node.get_input_desc(0).get_shape()
    # the rank and the cut axis' length must be known; the other dims may be anything (a
    # dynamic batch and sequence: rotate_half of every dynamic-shape Llama)
    arguments = None if shape.is_unknown_rank() or not len(shape) else slice_arguments(node)
    if arguments is None:
        return None
    dims = list(shape)
    starts, ends, axes, steps = arguments
    if len(starts) != 1 or len(ends) != 1 or steps != [1]:
        return None
    axis = 0 if axes is None else axes[0]
    if (axes is not None and len(axes) != 1) or not -len(dims) <= axis < len(dims):
        return None
    axis %= len(dims)
    length = dims[axis]
    if not isinstance(length, int) or length < 0:
        return None  # symbolic or unknown
    picked = range(length)[starts[0]:ends[0]]  # ONNX clamps the bounds as Python does
    if not picked:
        return None
    return (producer[0], producer[1], axis), picked.start, picked.stop, dims[axis]


def _covering(pieces: list[tuple[int, int, Node]], length: int) -> list[tuple[int, int, Node]]:
    """Pieces that cover [0, length) one after the other, first found in start order, or []."""
    chosen: list[tuple[int, int, Node]] = []
    position = 0
    for start, end, node in sorted(pieces, key=lambda p: (p[0], p[1], p[2].name)):
        if start == position:
            chosen.append((start, end, node))
            position = end
    return chosen if position == length and len(chosen) >= 2 else []


def _split(graph: Graph, cut: _Cut, chosen: list[tuple[int, int, Node]],
           context: PassContext) -> None:
    """Put one Split in the place of the chosen Slices."""
    slices = [node for _, _, node in chosen]
    names = [node.get_output_name(0) for node in slices]
    descs = [node.get_output_desc(0) for node in slices]
    readers = [node.get_out_data_nodes_and_port_indexes(0) for node in slices]
    base = f"{slices[0].name}_split"
    sizes = graph.add_node(
        CONST, name=unique_node_name(graph, f"{base}_sizes"), num_outputs=1,
        attrs={"value": Tensor(np.array([end - start for start, end, _ in chosen],
                                        dtype=np.int64))})
    sizes.update_output_desc(0, sizes.get_attr("value").get_tensor_desc())
    report_fuse(slices, [], context)  # counted now: the Split needs the Slices' names
    for node in slices:
        graph.remove_node(node)
    split = graph.add_node("Split", name=unique_node_name(graph, base), num_inputs=2,
                           num_outputs=len(slices), attrs={"axis": cut[2]},
                           output_names=names)
    tag_origin([split], context.get_pass_name(), slices)
    graph.add_data_edge(cut[0], cut[1], split, 0)
    graph.add_data_edge(sizes, 0, split, 1)
    for i, desc in enumerate(descs):
        split.update_output_desc(i, desc)
        for reader, j in readers[i]:
            graph.add_data_edge(split, i, reader, j)


@builtin_pass(name="SliceSplitFusion", step="origin_graph_optimize", requires=("Slice",))
class SliceSplitFusion(FusionBasePass):
    """Slices cutting one value into consecutive pieces → one `Split` (see the module
    docstring for when)."""

    def run(self, graph: Graph, context: PassContext) -> StatusLike:
        groups: dict[_Cut, list[tuple[int, int, Node]]] = defaultdict(list)
        lengths: dict[_Cut, int] = {}
        for node in graph.nodes_of_type("Slice"):
            piece = _piece(node)
            if piece is not None:
                cut, start, end, length = piece
                groups[cut].append((start, end, node))
                lengths[cut] = length
        changed = False
        for cut, pieces in groups.items():
            if cut[0].owner_graph is not graph:
                continue  # a Slice an earlier Split of this run replaced: the next round's
            chosen = _covering(pieces, lengths[cut]) if len(pieces) >= 2 else []
            if chosen:
                _split(graph, cut, chosen, context)
                changed = True
        return SUCCESS if changed else NOT_CHANGED
