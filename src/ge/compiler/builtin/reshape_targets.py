"""`ReshapeTargetFolding`: a Reshape's computed target made a constant, with 0 for "this dim
of the input" and at most one -1.

Exporters compute reshape targets from the tensor at hand: a BERT layer splits its heads
with `Reshape(q, Concat(Unsqueeze(Gather(Shape(q), 0)), Unsqueeze(Gather(Shape(q), 1)), [12],
[64]))`. Each element that is a dim of the Reshape's own input at the same position is a 0
(Reshape's "copy the input's dim", unless `allowzero`), and the constant elements stay. A
last element still computed becomes -1 when every other one is a static size: the one dim
Reshape infers from the element count is the same value, the original target being valid
(beside a 0, which may copy a dim of size 0, -1 could not be inferred at all). When every
element is then known, the target is that constant, and dead-code elimination removes the
arithmetic.

onnxruntime's basic level does the same at load time, but only for the dims of the very
tensor reshaped: after `SymbolicShapeSharing` merged the Q, K and V projections' shape
arithmetic into one (computed from Q's shape), onnxruntime could no longer prove K's target
and left it computed, 2-4% slower on a small BERT (trial Z). So an element is also the
input's dim when its dim carries the same symbol as the input's at that position, with
the same trust as `SymbolicShapeSharing` (a value downstream of an Einsum, of control flow
or of another domain's operator is not trusted; nothing in a Loop or Scan body is, except
the same tensor's own dims).

An element is read from `Unsqueeze(Gather(Shape(y), i))` (scalar index, axes [0]),
`Gather(Shape(y), [i, ...])` (1-D indices), `Slice(Shape(y), [i], [j])`, `Shape(y)` (its
`start`/`end` applied) or a constant; anything else (a product of dims) is unknown.

A Reshape with `allowzero=1` reads every 0 as a size, and the dynamo exporter writes every
`view` so (`Reshape[allowzero=1](x, Concat(Shape(x)[0:1], Shape(attention_mask)[1:2],
[-1], [64]))`). There an element that is the input's own dim k (or its symbol) is exactly
what a 0 at k copies under `allowzero=0`, a dim of size 0 included; so the Reshape becomes
`Reshape[allowzero=0](x, [0, 0, 12, 64])` when no other element is a 0 (a size there,
which `allowzero=0` would read as a copy). A -1 beside such a copy becomes the size it
stands for, which must be one number (x's other dims static: 768 / 64 for x of
[batch, seq, 768]), else nothing changes: onnxruntime reshapes an empty x of [0, 3, 8] to
`[0, 3, -1, 4]` under `allowzero=1` (inferring -1 from the non-zero dims: [0, 3, 2, 4])
but refuses `[0, 0, -1, 4]` under `allowzero=0` (no -1 is inferred from a size of 0). An
element that is a static size stays that size, and `allowzero=1` stays when nothing needs
a copy.

The rewritten Reshape's output desc (and what is computed from it) is then refined
(`ge.ops.refinement`): inference ran while the target was computed and left the dims it
decides unknown (`[batch, seq, unk, 32]` where the constant `[0, 0, -1, 32]` of a
`[batch, seq, 64]` input makes it 2), so a `Gather(Shape(y), 2)` downstream folds in the
next round (trial JJ: repeat_kv of a TorchScript Llama export reads the number of
key/value heads so).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ge.compiler.builtin._support import shape_dims, symbolic_dims
from ge.compiler.builtin.shape_sharing import untrusted_values
from ge.compiler.pass_registry import builtin_pass
from ge.graph import Graph, Node
from ge.ops.onnx_node import const_ints, slice_arguments
from ge.ops.refinement import refine_output_descs
from ge.ops.reshape import allow_zero
from ge.passes import NOT_CHANGED, FusionBasePass, PassContext
from ge.passes.status import SUCCESS, StatusLike

__all__ = ["FoldedTarget", "ReshapeTargetFolding", "folded_target"]

#: An element of a target as read: a known int, or the dim `index` of the value `source`
#: (its producer and output) whose inferred dim is `dim` (a size, a symbol, or None).
_Element = tuple[int | None, tuple[Node, int] | None, int, int | str | None]


def _shape_source(shape: Node) -> tuple[tuple[Node, int], int, list[int | str | None]] | None:
    """What a `Shape` node reads, the position of its first dim there (its `start`), and
    the dims it gives (None where unknown); None when the rank is unknown."""
    producer = shape.get_input_producer(0)
    dims = shape_dims(shape)
    if producer is None or dims is None:
        return None
    rank = len(shape.get_input_desc(0).get_shape())
    start = int(shape.get_attr("start")) if shape.has_attr("start") else 0
    offset = min(max(start + rank if start < 0 else start, 0), rank)
    known = [d if isinstance(d, str) or d >= 0 else None for d in dims]
    return (producer[0], producer[1]), offset, known


def _elements(piece: Node, index: int) -> list[_Element] | None:
    """The elements Concat input `index` contributes, or None when they cannot be read."""
    values = const_ints(piece, index)
    if values is not None:
        return [(v, None, -1, None) for v in values]
    producer = piece.get_input_producer(index)
    if producer is None or producer[0].domain:
        return None
    node = producer[0]
    if node.type == "Unsqueeze":
        axes = const_ints(node, 1) if node.get_inputs_size() > 1 else (
            list(node.get_attr("axes")) if node.has_attr("axes") else None)
        inner = node.get_input_producer(0)
        if axes not in ([0], [-1]) or inner is None or inner[0].type != "Gather":
            return None
        return _gathered(inner[0], scalar=True)
    if node.type == "Gather":
        return _gathered(node, scalar=False)
    if node.type == "Slice":
        return _sliced(node)
    if node.type == "Shape":
        read = _shape_source(node)
        if read is None:
            return None
        source, offset, dims = read
        return [(d if isinstance(d, int) else None, source, offset + k, d)
                for k, d in enumerate(dims)]
    return None


def _gathered(gather: Node, *, scalar: bool) -> list[_Element] | None:
    """The elements of `Gather(Shape(y), constant indices)` (axis 0): a scalar index when
    `scalar` (under an Unsqueeze), else a 1-D one."""
    if gather.domain or (gather.has_attr("axis") and int(gather.get_attr("axis")) != 0):
        return None
    shape = gather.get_input_producer(0)
    indices = const_ints(gather, 1)
    if shape is None or shape[0].type != "Shape" or shape[0].domain or indices is None:
        return None
    index_rank = len(gather.get_input_desc(1).get_shape())
    if (index_rank != 0) if scalar else (index_rank != 1):
        return None
    read = _shape_source(shape[0])
    if read is None:
        return None
    source, offset, known = read
    found: list[_Element] = []
    for i in indices:
        if not -len(known) <= i < len(known):
            return None  # (the runtime's error)
        i %= len(known)
        dim = known[i]
        found.append((dim if isinstance(dim, int) else None, source, offset + i, dim))
    return found


def _sliced(node: Node) -> list[_Element] | None:
    """The elements of `Slice(Shape(y), [start], [end])` (axis 0, step 1)."""
    shape = node.get_input_producer(0)
    arguments = slice_arguments(node)
    if shape is None or shape[0].type != "Shape" or shape[0].domain or arguments is None:
        return None
    starts, ends, axes, steps = arguments
    if len(starts) != 1 or axes not in (None, [0], [-1]) or steps != [1]:
        return None
    read = _shape_source(shape[0])
    if read is None:
        return None
    source, offset, dims = read
    first, last = (min(max(v + len(dims) if v < 0 else v, 0), len(dims))
                   for v in (starts[0], ends[0]))
    return [(d if isinstance(d, int) else None, source, offset + first + k, d)
            for k, d in enumerate(dims[first:last])]


class FoldedTarget(NamedTuple):
    """A constant target for a Reshape, and whether the Reshape then needs `allowzero=0`
    (it had `allowzero=1`, and the target's 0s are copies of the input's dims)."""

    values: list[int]
    clear_allowzero: bool


def folded_target(reshape: Node, untrusted: set[Node] | None) -> FoldedTarget | None:
    """The constant target of `reshape` (see the module docstring), or None when its target
    is constant already or cannot be made one. `untrusted`: the nodes whose dims are not
    trusted (`untrusted_values`; None: no symbol is, only the input's own dims)."""
    if reshape.domain or reshape.get_inputs_size() < 2:
        return None
    zero_is_size = allow_zero(reshape)
    target = reshape.get_input_producer(1)
    data = reshape.get_input_producer(0)
    if target is None or data is None or target[0].type != "Concat" or target[0].domain:
        return None
    concat = target[0]
    if concat.has_attr("axis") and int(concat.get_attr("axis")) not in (0, -1):
        return None
    elements: list[_Element] = []
    for i in range(concat.get_inputs_size()):
        found = _elements(concat, i)
        if found is None:
            return None
        elements += found
    dims = symbolic_dims(reshape.get_input_desc(0))
    # (a value of an enclosing graph is not in `untrusted`, which covers this graph: not
    # trusted by symbol either; trial AA: an If branch reading a Loop body's carried value)
    trusted = (untrusted is not None and data[0] not in untrusted
               and data[0].owner_graph is reshape.owner_graph)
    values: list[int | None] = []
    copies: list[int] = []  # where a 0 copies the input's dim (the other 0s are sizes)
    for k, (value, source, index, dim) in enumerate(elements):
        own = source == (data[0], data[1]) and index == k  # the input's own dim k
        same_symbol = (trusted and untrusted is not None and source is not None
                       and source[0] not in untrusted
                       and source[0].owner_graph is reshape.owner_graph
                       and isinstance(dim, str)
                       and dims is not None and k < len(dims) and dims[k] == dim)
        # Under allowzero a static size stays a size: no copy is needed for it.
        if (own or same_symbol) and not (zero_is_size and value is not None):
            values.append(0)
            copies.append(k)
        else:
            values.append(value)
    if values.count(None) == 1 and all(v is None or v > 0 for v in values):
        # The one dim left becomes the one Reshape infers, -1, only beside static sizes:
        # beside a 0 (a copied dim, or a size under allowzero) that may be 0 at run time,
        # -1 could not be inferred where the computed value was fine.
        values[values.index(None)] = -1
    known = [v for v in values if v is not None]
    if len(known) != len(values) or known.count(-1) > 1:
        return None
    if zero_is_size and copies:
        # The copies need allowzero=0, which would read a 0 size as a copy too, and
        # refuses a -1 beside a copied 0 that allowzero=1 infers (module docstring):
        # the -1 becomes the size it stands for, when that is one.
        if known.count(0) > len(copies):
            return None
        if -1 in known:
            size = _inferred_size(dims, known, copies)
            if size is None:
                return None
            known[known.index(-1)] = size
        return FoldedTarget(known, clear_allowzero=True)
    return FoldedTarget(known, clear_allowzero=False)


def _inferred_size(dims: list[int | str] | None, target: list[int],
                   copies: list[int]) -> int | None:
    """The size the -1 of `target` stands for at every size of the input's dims `dims`,
    the copied dims (at `copies`) cancelling out: the product of the input's other dims
    (static) over that of the target's other sizes; None when it is not one number.

    Under `allowzero=1` onnxruntime infers the -1 from the non-zero dims on both sides
    (`[0, 3, -1, 4]` of an empty [0, 3, 8] is [0, 3, 2, 4]), and a copied dim of size 0
    is on both sides alike, so this is its -1 at every size, 0 included."""
    if dims is None:
        return None
    rest = [d for k, d in enumerate(dims) if k not in copies]
    sizes = [v for k, v in enumerate(target) if k not in copies and v != -1]
    if any(not isinstance(d, int) or d <= 0 for d in rest) or any(v <= 0 for v in sizes):
        return None
    numerator = math.prod(int(d) for d in rest)
    denominator = math.prod(sizes)
    if numerator % denominator:
        return None
    return numerator // denominator


@builtin_pass(name="ReshapeTargetFolding", step="origin_graph_optimize",
              requires=("Reshape",))
class ReshapeTargetFolding(FusionBasePass):
    """Make computed Reshape targets constants (see the module docstring)."""

    def run(self, graph: Graph, context: PassContext) -> StatusLike:
        candidates = [r for r in graph.nodes_of_type("Reshape")
                      if (t := r.get_input_producer(1)) is not None and t[0].type == "Concat"]
        if not candidates:
            return NOT_CHANGED
        untrusted = untrusted_values(graph)
        changed = False
        for reshape in candidates:
            folded = folded_target(reshape, untrusted)
            if folded is None:
                continue
            old = reshape.get_input_producer(1)
            assert old is not None
            target = graph.add_const(np.array(folded.values, np.int64),
                                     name=f"{reshape.name}/target")
            graph.remove_edge(old[0], old[1], reshape, 1)
            graph.add_data_edge(target, 0, reshape, 1)
            if folded.clear_allowzero:
                reshape.set_attr("allowzero", 0)
            # What the constant target decides (a dim the computed one left unknown), at
            # once: the Shapes read downstream fold in the next round, and a target later
            # in this run may read the dim (module docstring).
            refine_output_descs([reshape])
            changed = True
        return SUCCESS if changed else NOT_CHANGED
