"""`PadConvFusion`: a zero `Pad` in front of a `Conv` becomes the Conv's own padding.

Keras' `ZeroPadding2D`, and TensorFlow's `"same"` padding of a strided convolution (which
pads more at the end than at the start), reach ONNX through tf2onnx as `Pad → Conv`: an
extra operator and a padded copy of the activation that the Conv could do without. A Conv
pads with zeros, so `Conv(Pad(X, p), W[, B])` is `Conv(X, W[, B])` with `p`'s spatial pads
added to the Conv's `pads` (onnxruntime's extended offline level merges it too). It is
merged when:

* the Pad's mode is `"constant"` (the default) and its value 0: absent, or a constant
  whose one element is 0 (the `value` attribute before opset 11, the `constant_value`
  input from 11);
* its pads are constant (the attribute before opset 11, a `Const` input from 11), none
  negative (a negative pad crops), and 0 on the batch and channel axes (axes 0 and 1); from
  opset 18, an `axes` input naming the padded axes (negative ones counted from the end)
  must be a constant too;
* the Conv reads the Pad as its data input (input 0), and nothing else reads the Pad (no
  other node, no graph output, no subgraph body); the Pad has no control edges and reads
  a value of the graph being optimised (a body's outer-scope reads stay as they are);
* the Conv's `auto_pad` is `NOTSET` or absent (with `SAME_*` the Conv computes its own
  pads from the input size, which the Pad changes; with `VALID` there are none to add to).

The Conv stays, with its name, its attributes and its other inputs; it reads the Pad's
input and its `pads` are the sum; the Pad is removed (its pads and value constants are left
to `DeadCodeElimination`). The result is exact: the Conv multiplies the same zeros.

Pools are left alone: `MaxPool` ignores the positions its own padding adds, where a zero
`Pad` makes them candidates for the maximum (a window of negative values gives 0), and
`AveragePool` counts its padding only with `count_include_pad=1`. A `ConvTranspose`'s pads
crop its output, they do not pad its input.
"""

from __future__ import annotations

import numpy as np

from ge.compiler.builtin._support import const_input, const_ints, dims_of, input_connected
from ge.compiler.pass_registry import builtin_pass
from ge.graph import Graph, Node
from ge.ops.onnx_node import node_opset
from ge.passes import NOT_CHANGED, FusionBasePass, PassContext, report_fuse
from ge.passes.status import SUCCESS, StatusLike

__all__ = ["PadConvFusion"]

#: Pad takes its pads (and constant value) as inputs from opset 11, attributes before.
_PAD_INPUTS_OPSET = 11
#: Pad-1 names its attribute `paddings`: not merged (no model is that old).
_PAD_MIN_OPSET = 2


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _zero_value(pad: Node) -> bool:
    """Whether the Pad's constant value is 0 (its default when absent)."""
    if node_opset(pad) < _PAD_INPUTS_OPSET:
        return not pad.has_attr("value") or float(pad.get_attr("value")) == 0.0
    if not input_connected(pad, 2):
        return True
    value = const_input(pad, 2)
    if value is None or value.size != 1:
        return False
    return bool(np.asarray(value.numpy()).reshape(-1)[0] == 0)


def _pads_per_axis(pad: Node, rank: int) -> list[tuple[int, int]] | None:
    """The (begin, end) pads of each of the `rank` axes the Pad pads, when constant (and
    its axes too), or None."""
    if node_opset(pad) < _PAD_INPUTS_OPSET:
        if not pad.has_attr("pads"):
            return None
        pads: list[int] | None = [int(p) for p in pad.get_attr("pads")]
    else:
        pads = const_ints(pad, 1)
    if pads is None:
        return None
    axes: list[int] | None = list(range(rank))
    if input_connected(pad, 3):  # opset 18: the axes the pads are for
        axes = const_ints(pad, 3)
    if axes is None or len(pads) != 2 * len(axes):
        return None
    normalised = [a + rank if a < 0 else a for a in axes]
    if any(not 0 <= a < rank for a in normalised) or len(set(normalised)) != len(axes):
        return None
    per_axis = [(0, 0)] * rank
    for i, axis in enumerate(normalised):
        per_axis[axis] = (pads[i], pads[i + len(axes)])
    return per_axis


def _merged_pads(pad: Node, conv: Node) -> list[int] | None:
    """The Conv's `pads` with the Pad's added, when the Pad may be merged into it."""
    if pad.domain or node_opset(pad) < _PAD_MIN_OPSET:
        return None
    if pad.has_attr("mode") and _text(pad.get_attr("mode")) != "constant":
        return None
    if conv.has_attr("auto_pad") and _text(conv.get_attr("auto_pad")) != "NOTSET":
        return None
    dims = dims_of(pad.get_output_desc(0))
    if dims is None or len(dims) < 3:
        return None  # a Conv's input: [N, C, spatial...]
    rank = len(dims)
    per_axis = _pads_per_axis(pad, rank)
    if per_axis is None or per_axis[0] != (0, 0) or per_axis[1] != (0, 0):
        return None  # not constant, or padding the batch or the channels
    if any(p < 0 for pair in per_axis for p in pair) or not _zero_value(pad):
        return None
    spatial = rank - 2
    conv_pads = [int(p) for p in conv.get_attr("pads")] if conv.has_attr("pads") else [
        0] * (2 * spatial)
    if len(conv_pads) != 2 * spatial:
        return None
    begins = [conv_pads[i] + per_axis[2 + i][0] for i in range(spatial)]
    ends = [conv_pads[spatial + i] + per_axis[2 + i][1] for i in range(spatial)]
    return begins + ends


def _mergeable_pad(conv: Node) -> tuple[Node, tuple[Node, int]] | None:
    """The Pad the Conv reads (as input 0) and nothing else does, with the producer of
    the Pad's data input, or None."""
    graph = conv.owner_graph
    producer = conv.get_input_producer(0)
    if producer is None or producer[1] != 0:
        return None
    pad = producer[0]
    if pad.type != "Pad" or pad.owner_graph is not graph:
        return None
    if pad.get_in_control_nodes() or pad.get_out_control_nodes():
        return None
    if pad.get_out_data_nodes_and_port_indexes(0) != [(conv, 0)]:
        return None  # read by another node, a graph output or a body (or as the weight)
    source = pad.get_input_producer(0)
    if source is None or source[0].owner_graph is not graph:
        return None  # X of an enclosing graph: a body's outer reads stay as they are
    return pad, source


@builtin_pass(name="PadConvFusion", step="builtin_fusion", requires=("Pad",),
              also_in=("origin_graph_optimize",))
class PadConvFusion(FusionBasePass):
    """`Conv(Pad(X, pads), W[, B])` with a zero constant Pad → `Conv(X, W[, B])` with the
    Pad's spatial pads added to its own (see the module docstring for when)."""

    def run(self, graph: Graph, context: PassContext) -> StatusLike:
        changed = False
        for conv in graph.nodes_of_type("Conv"):
            found = _mergeable_pad(conv)
            if found is None:
                continue
            pad, source = found
            pads = _merged_pads(pad, conv)
            if pads is None:
                continue
            graph.remove_edge(pad, 0, conv, 0)
            graph.add_data_edge(source[0], source[1], conv, 0)
            conv.set_attr("pads", pads)
            report_fuse([pad, conv], [conv], context)
            graph.remove_node(pad)
            changed = True
        return SUCCESS if changed else NOT_CHANGED
