"""Chain simplification: two layout or type operators in a row that one (or none) can do.

Four built-in fusion passes, one per kind of chain, each a `FusionBasePass` written with the
public API (the way a GE graph pass edits the graph directly):

- `TransposeChainSimplification`: Transpose(Transpose(X, p1), p2) is Transpose(X, p1∘p2),
  and X itself when the composed permutation is the identity.
- `ReshapeChainSimplification`: Reshape(Reshape(X, s1), s2) is Reshape(X, s2) when s2 is a
  constant that does not copy dims of its input (no 0 entries, unless `allowzero`).
- `CastChainSimplification`: Cast(Cast(X, T1), T2) is Cast(X, T2) when the first cast is
  exact (every value of X's type is a value of T1, see `EXACT_CASTS`), and X itself when T2
  is X's type.
- `SqueezeUnsqueezeCancellation`: Unsqueeze then Squeeze of the same axes, and Squeeze of
  dims known to be 1 then Unsqueeze of the same axes, are X; Unsqueeze(Unsqueeze(X, a1),
  a2) is one Unsqueeze of X by the composed axes, and Squeeze(Squeeze(X, a1), a2) one
  Squeeze (exporters write `x[:, None, None, :]` and `unsqueeze(1).unsqueeze(2)` so).

Each pass looks at every node of its second operator type, in topological order, whose data
input is produced by a node of the first type in the same graph (so a chain of three
collapses in one run: the second pair sees the result of the first). What the pair becomes:

- X itself ("identity"): the second node's consumers read X, the second node is removed,
  and so is the first when nothing else reads it (and it has no control edges). This is
  done even when the first node has other consumers: it stays for them, one node is saved.
- one node: the second node is kept (its output, its name, its attributes and its other
  inputs), its data input now reads X, and its `perm` is the composed one for Transpose
  (its axes for a Squeeze or Unsqueeze: the attribute before opset 13, a new constant
  input from 13). Only when the first node has no other consumer, which is then removed:
  otherwise the first node's work would be kept and merely moved, with nothing saved. A
  pass may merge a shared first node (`merges_shared`) when every reader of it collapses
  with it: each then reads X, and the first goes with the last (`Unsqueeze(X, [0])` read
  by two Unsqueezes, as a causal mask's row and column indices are).

Nothing is done when the decision needs what is not known (a constant shape or axes input,
a dtype, a rank, a dim), when X is a value of an enclosing graph (a body's outer-scope reads
stay as they are), when a node that would be removed has control edges, or when bypassing
the second node would rename a graph output. The engine runs these passes after shape
inference, so the descs they read are the inferred ones; a node they keep computes the
value it computed before, so its output desc stays right.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from onnx import TensorProto

from ge.compiler.builtin._support import (
    allow_zero,
    const_ints,
    known_dtype,
    reshaped_dims,
    rewirable,
    symbolic_dims,
    unique_node_name,
)
from ge.compiler.pass_registry import builtin_pass
from ge.graph import Graph, Node
from ge.graph.types import data_type_to_onnx
from ge.ops.onnx_node import node_opset
from ge.ops.reshape import Dim
from ge.passes import NOT_CHANGED, FusionBasePass, PassContext, report_fuse
from ge.passes.status import SUCCESS, StatusLike

__all__ = [
    "CHAIN_PASSES",
    "EXACT_CASTS",
    "CastChainSimplification",
    "ReshapeChainSimplification",
    "SqueezeUnsqueezeCancellation",
    "TransposeChainSimplification",
    "compose_perms",
    "compose_squeeze_axes",
    "compose_unsqueeze_axes",
    "is_exact_cast",
]


# -- what a pair becomes ----------------------------------------------------------------------


@dataclass(frozen=True)
class Collapse:
    """The result of simplifying a pair: X itself, or the second node reading X directly
    (with `attrs` set on it, and its input i reading a new int64 constant `inputs[i]`)."""

    identity: bool
    attrs: dict[str, Any] = field(default_factory=dict)
    inputs: dict[int, list[int]] = field(default_factory=dict)


IDENTITY = Collapse(identity=True)
#: The second node reading X, nothing else changed (Reshape, Cast).
REWIRE = Collapse(identity=False)


class _ChainSimplification(FusionBasePass):
    """A pair `second(first(X, ...), ...)` of the types `first_types` → `second_types`.

    Subclasses say what the pair becomes in `simplify`; `run` finds the pairs, checks what
    every rewrite needs and edits the graph.
    """

    first_types: ClassVar[frozenset[str]]
    second_types: ClassVar[frozenset[str]]
    #: Whether a first node read by several second nodes, every one of which collapses with
    #: it, is merged into each of them (and removed with the last).
    merges_shared: ClassVar[bool] = False

    def simplify(self, first: Node, second: Node) -> Collapse | None:
        """What `second(first(X))` becomes, or None to leave it alone."""
        raise NotImplementedError

    def _every_reader_collapses(self, first: Node) -> bool:
        """Whether every reader of `first` is a second node of this graph collapsing with
        it, and `first` can go once they all read X (no control edges, no graph output, no
        body reading it)."""
        if first.get_in_control_nodes() or first.get_out_control_nodes():
            return False
        for reader, index in first.get_out_data_nodes_and_port_indexes(0):
            if (index != 0 or reader.owner_graph is not first.owner_graph or reader.domain
                    or reader.type not in self.second_types):
                return False
            result = self.simplify(first, reader)
            if result is None or (result.identity and not rewirable(reader)):
                return False
        return True

    def run(self, graph: Graph, context: PassContext) -> StatusLike:
        changed = False
        if len(self.second_types) == 1:  # (through the op-type index, in the graph's order)
            candidates = graph.nodes_of_type(next(iter(self.second_types)))
        else:
            candidates = graph.topological_order()
        for second in candidates:
            if second.owner_graph is not graph or second.type not in self.second_types:
                continue  # removed by an earlier rewrite of this run, or another type
            pair = _pair(second, self.first_types)
            if pair is None:
                continue
            first, source = pair
            exclusive = _only_feeds(first, second)
            result = self.simplify(first, second)
            if result is None:
                continue
            if result.identity:
                if not rewirable(second):
                    continue  # a graph output would be renamed, or control edges lost
                report_fuse([first, second], [], context)
                graph.replace_all_uses(second, 0, source[0], source[1])
                graph.remove_node(second)
            elif exclusive or (self.merges_shared and self._every_reader_collapses(first)):
                # The second node now does the whole chain: its data input reads X.
                graph.remove_edge(first, 0, second, 0)
                graph.add_data_edge(source[0], source[1], second, 0)
                for key, value in result.attrs.items():
                    second.set_attr(key, value)
                for index, values in result.inputs.items():
                    _replace_const_input(graph, second, index, values)
                report_fuse([first, second], [second], context)
            else:
                continue  # the first node stays for its other consumers: nothing saved
            if exclusive:
                graph.remove_node(first)  # no longer read (its other inputs: dead code)
            changed = True
        return SUCCESS if changed else NOT_CHANGED


def _replace_const_input(graph: Graph, node: Node, index: int, values: list[int]) -> None:
    """Make input `index` of `node` read a new int64 constant of `values` (the old one, which
    others may share, is left to dead-code elimination)."""
    const = graph.add_const(np.array(values, np.int64),
                            name=unique_node_name(graph, f"{node.name}/input{index}"))
    old = node.get_input_producer(index)
    if old is not None:
        graph.remove_edge(old[0], old[1], node, index)
    graph.add_data_edge(const, 0, node, index)


def _pair(second: Node, first_types: frozenset[str]) -> tuple[Node, tuple[Node, int]] | None:
    """The first node of the chain ending at `second`, and the producer of its input X."""
    graph = second.owner_graph
    if second.domain:
        return None
    producer = second.get_input_producer(0)
    if producer is None or producer[1] != 0:
        return None
    first = producer[0]
    if first.owner_graph is not graph or first.domain or first.type not in first_types:
        return None
    source = first.get_input_producer(0)
    if source is None or source[0].owner_graph is not graph:
        return None  # X is not a value of this graph: a body's outer reads stay as they are
    return first, source


def _only_feeds(first: Node, second: Node) -> bool:
    """Whether `second` (input 0) is the only reader of `first` and `first` may be removed
    (no control edges; a body reading it or a graph output counts as another reader)."""
    if first.get_in_control_nodes() or first.get_out_control_nodes():
        return False
    return first.get_out_data_nodes_and_port_indexes(0) == [(second, 0)]


def _known_dims(node: Node, index: int) -> list[int | None] | None:
    """The dims of input `index` (None for an unknown or symbolic dim), or None when its
    rank is not known."""
    shape = node.get_input_desc(index).get_shape()
    if shape.is_unknown_rank():
        return None
    return [None if isinstance(d, str) or int(d) < 0 else int(d) for d in shape]


# -- Transpose ----------------------------------------------------------------------------


def compose_perms(p1: Sequence[int], p2: Sequence[int]) -> list[int]:
    """The perm of Transpose(Transpose(X, p1), p2): output axis i is X's axis p1[p2[i]]."""
    return [p1[i] for i in p2]


def _perm(node: Node, rank: int | None) -> list[int] | None:
    """A Transpose's perm; without the attribute the axes reversed (needs the rank)."""
    if node.has_attr("perm"):
        return [int(p) for p in node.get_attr("perm")]
    return None if rank is None else list(reversed(range(rank)))


@builtin_pass(name="TransposeChainSimplification", step="origin_graph_optimize",
              requires=("Transpose",))
class TransposeChainSimplification(_ChainSimplification):
    """Transpose(Transpose(X, p1), p2) → Transpose(X, p1∘p2); X itself for the identity."""

    first_types = second_types = frozenset({"Transpose"})

    def simplify(self, first: Node, second: Node) -> Collapse | None:
        dims = _known_dims(first, 0)
        rank = None if dims is None else len(dims)
        p1, p2 = _perm(first, rank), _perm(second, rank)
        if p1 is None or p2 is None or len(p1) != len(p2):
            return None
        if sorted(p1) != list(range(len(p1))) or sorted(p2) != sorted(p1):
            return None  # not permutations (the checker would have said so)
        perm = compose_perms(p1, p2)
        if perm == list(range(len(perm))):
            return IDENTITY
        return Collapse(identity=False, attrs={"perm": perm})


# -- Reshape ------------------------------------------------------------------------------


@builtin_pass(name="ReshapeChainSimplification", step="origin_graph_optimize",
              requires=("Reshape",))
class ReshapeChainSimplification(_ChainSimplification):
    """Reshape(Reshape(X, s1), s2) → Reshape(X, s2) for a constant s2 whose 0 entries (a
    dim kept, unless `allowzero`) keep the same dim of X as of the intermediate value (X
    [B, S, 768] → [B, S, 12, 64] → [0, 0, 768]); X itself when s2 gives X's own shape,
    sizes or symbols."""

    first_types = second_types = frozenset({"Reshape"})

    def simplify(self, first: Node, second: Node) -> Collapse | None:
        target = const_ints(second, 1)
        if target is None or target.count(-1) > 1:
            return None  # not constant (or not valid)
        zero_is_size = allow_zero(second)
        dims = symbolic_dims(first.get_input_desc(0))
        if 0 in target and not zero_is_size:
            # 0 copies a dim of the intermediate: Reshape(X, s2) copies X's instead
            kept = _intermediate_dims(first, dims)
            if dims is None or kept is None or any(
                    k >= len(dims) or k >= len(kept) or kept[k] != dims[k]
                    for k, t in enumerate(target) if t == 0):
                return None
        # Otherwise the result depends only on the element count, the same for X and the
        # intermediate.
        if dims is not None and reshaped_dims(dims, target, zero_is_size) == dims:
            return IDENTITY
        return REWIRE


def _intermediate_dims(first: Node, dims: list[int | str] | None) -> Sequence[Dim] | None:
    """The dims of the first Reshape's output: what its constant shape makes of X's dims
    (None at an axis that cannot be told), else its desc's (sizes and named symbols only)."""
    target = const_ints(first, 1)
    if target is not None and dims is not None:
        return reshaped_dims(dims, target, allow_zero(first))
    return symbolic_dims(first.get_output_desc(0))


# -- Cast ---------------------------------------------------------------------------------

_T = TensorProto
_FLOATS = (_T.FLOAT, _T.DOUBLE)
_SIGNED = (_T.INT8, _T.INT16, _T.INT32, _T.INT64)
_UNSIGNED = (_T.UINT8, _T.UINT16, _T.UINT32, _T.UINT64)

#: Exact ("widening") casts: source type → the types that hold every value of it exactly.
#: Integers go to wider integers that hold their whole range, and to floats whose
#: significand holds all their digits (float16: 11 bits, bfloat16: 8, float: 24, double:
#: 53); floats go to wider floats (NaN, infinities and subnormals included); bool (0/1)
#: goes to every numeric type; every type to itself (not listed). Strings, float8 and
#: 4-bit types are left out altogether.
EXACT_CASTS: dict[int, frozenset[int]] = {
    _T.BOOL: frozenset({*_SIGNED, *_UNSIGNED, _T.FLOAT16, _T.BFLOAT16, *_FLOATS}),
    _T.UINT8: frozenset({_T.UINT16, _T.UINT32, _T.UINT64, _T.INT16, _T.INT32, _T.INT64,
                         _T.FLOAT16, _T.BFLOAT16, *_FLOATS}),
    _T.INT8: frozenset({_T.INT16, _T.INT32, _T.INT64, _T.FLOAT16, _T.BFLOAT16, *_FLOATS}),
    _T.UINT16: frozenset({_T.UINT32, _T.UINT64, _T.INT32, _T.INT64, *_FLOATS}),
    _T.INT16: frozenset({_T.INT32, _T.INT64, *_FLOATS}),
    _T.UINT32: frozenset({_T.UINT64, _T.INT64, _T.DOUBLE}),
    _T.INT32: frozenset({_T.INT64, _T.DOUBLE}),
    _T.UINT64: frozenset(),
    _T.INT64: frozenset(),
    _T.FLOAT16: frozenset(_FLOATS),
    _T.BFLOAT16: frozenset(_FLOATS),
    _T.FLOAT: frozenset({_T.DOUBLE}),
    _T.DOUBLE: frozenset(),
}


def is_exact_cast(source: int, target: int) -> bool:
    """Whether casting ONNX type `source` to `target` keeps every value: a type of the
    table to itself, or to one of its `EXACT_CASTS`."""
    if source not in EXACT_CASTS:
        return False
    return target == source or target in EXACT_CASTS[source]


@builtin_pass(name="CastChainSimplification", step="origin_graph_optimize",
              requires=("Cast",))
class CastChainSimplification(_ChainSimplification):
    """Cast(Cast(X, T1), T2) → Cast(X, T2) when X's type → T1 is exact; X itself when T2 is
    X's type. The second cast then sees the very values it saw before, so it gives the same
    results (one rounding, where the chain rounded once too)."""

    first_types = second_types = frozenset({"Cast"})

    def simplify(self, first: Node, second: Node) -> Collapse | None:
        dtype = known_dtype(first.get_input_desc(0))
        if dtype is None or not first.has_attr("to") or not second.has_attr("to"):
            return None
        try:
            source = data_type_to_onnx(dtype)
        except Exception:  # a GE type with no ONNX element type
            return None
        middle, target = int(first.get_attr("to")), int(second.get_attr("to"))
        if not is_exact_cast(source, middle) or target not in EXACT_CASTS:
            return None  # the first cast may lose what the second keeps (or exotic types)
        return IDENTITY if target == source else REWIRE


# -- Squeeze / Unsqueeze ------------------------------------------------------------------

_ALL = "all"  # a Squeeze without axes: every dim of size 1


def _axes(node: Node) -> list[int] | str | None:
    """A Squeeze's or Unsqueeze's axes: an attribute before opset 13, an input from 13;
    `_ALL` for a Squeeze without them; None when they are not constant."""
    if node_opset(node) >= 13:
        if node.get_inputs_size() < 2 or node.get_input_producer(1) is None:
            return _ALL if node.type == "Squeeze" else None
        return const_ints(node, 1)
    if not node.has_attr("axes"):
        return _ALL if node.type == "Squeeze" else None
    return [int(a) for a in node.get_attr("axes")]


def _normalized(axes: list[int], rank: int) -> list[int] | None:
    """The axes made non-negative for `rank`, sorted; None when out of range or repeated."""
    fixed = sorted(a + rank if a < 0 else a for a in axes)
    if any(not 0 <= a < rank for a in fixed) or len(set(fixed)) != len(fixed):
        return None
    return fixed


@builtin_pass(name="SqueezeUnsqueezeCancellation", step="origin_graph_optimize",
              requires=("Squeeze", "Unsqueeze"))
class SqueezeUnsqueezeCancellation(_ChainSimplification):
    """Squeeze(Unsqueeze(X, axes), axes) → X; Unsqueeze(Squeeze(X, axes), axes) → X when
    X's dims at `axes` are known to be 1; Unsqueeze(Unsqueeze(X, a1), a2) and
    Squeeze(Squeeze(X, a1), a2) → one node of the composed axes (a first node shared by
    such chains only, merged into each)."""

    first_types = second_types = frozenset({"Squeeze", "Unsqueeze"})
    merges_shared = True

    def simplify(self, first: Node, second: Node) -> Collapse | None:
        if first.type == second.type:
            return _merged(first, second)
        dims = _known_dims(first, 0)
        first_axes, second_axes = _axes(first), _axes(second)
        if dims is None or first_axes is None or second_axes is None:
            return None
        if isinstance(first_axes, list):  # an Unsqueeze, or a Squeeze with axes
            if first.type == "Unsqueeze":
                return _unsqueeze_squeeze(dims, first_axes, second_axes)
            squeezed = _normalized(first_axes, len(dims))
            if squeezed is None or any(dims[a] != 1 for a in squeezed):
                return None  # the squeezed dims are not known to be 1
        elif any(d is None for d in dims):
            return None  # a Squeeze without axes: which dims it removed is not known
        else:
            squeezed = [i for i, d in enumerate(dims) if d == 1]
        # The Unsqueeze's axes index its output, which has X's rank again.
        if not squeezed or not isinstance(second_axes, list):
            return None  # nothing squeezed: a no-op Squeeze is for NoOpElimination
        return IDENTITY if _normalized(second_axes, len(dims)) == squeezed else None


def _unsqueeze_squeeze(dims: list[int | None], inserted: list[int],
                       squeezed: list[int] | str) -> Collapse | None:
    """Squeeze(Unsqueeze(X, inserted), squeezed): X when the Squeeze removes exactly the
    inserted dims. Both sets of axes index the Unsqueeze's output."""
    rank = len(dims) + len(inserted)
    places = _normalized(inserted, rank)
    if places is None or not places:
        return None
    if isinstance(squeezed, list):
        return IDENTITY if _normalized(squeezed, rank) == places else None
    # A Squeeze without axes also removes X's own dims of size 1 (or of unknown size).
    return None if any(d is None or d == 1 for d in dims) else IDENTITY


def _merged(first: Node, second: Node) -> Collapse | None:
    """Unsqueeze(Unsqueeze(X, a1), a2) or Squeeze(Squeeze(X, a1), a2) as the second node of
    X alone: its axes the composed ones (an attribute before opset 13, an input from 13).
    Negative axes need X's rank; a first Squeeze without axes (which dims it removed is not
    known) and empty axes are left alone."""
    first_axes, second_axes = _axes(first), _axes(second)
    if not isinstance(first_axes, list) or not first_axes or not second_axes:
        return None
    shape = first.get_input_desc(0).get_shape()
    rank = None if shape.is_unknown_rank() else len(shape)
    if second_axes == _ALL:
        # Squeeze(Squeeze(X, a1)) removes a1 (of size 1) and every other dim of size 1:
        # what Squeeze(X) removes, but for the check of the first that X's dims at a1 are
        # 1 (the runtime refuses X otherwise): merged only where those dims are known 1.
        places = None if rank is None else _normalized(first_axes, rank)
        if places is None or any(shape[a] != 1 for a in places):
            return None
        return REWIRE
    assert isinstance(second_axes, list)
    if first.type == "Unsqueeze":
        axes = compose_unsqueeze_axes(first_axes, second_axes, rank)
    else:
        axes = compose_squeeze_axes(first_axes, second_axes, rank)
    if axes is None:
        return None
    if node_opset(second) >= 13:
        return Collapse(identity=False, inputs={1: axes})
    return Collapse(identity=False, attrs={"axes": axes})


def _sorted_axes(first: list[int], second: list[int], first_rank: int | None,
                 second_rank: int | None) -> tuple[list[int], list[int]] | None:
    """Both sets of axes made non-negative (for the ranks they index) and sorted; without
    the ranks only axes that are non-negative already. None when repeated or out of range."""
    if first_rank is None or second_rank is None:
        if any(a < 0 for a in (*first, *second)):
            return None  # (the rank would say which axis)
        fixed: tuple[list[int] | None, ...] = (sorted(first), sorted(second))
        if any(a is None or len(set(a)) != len(a) for a in fixed):
            return None
    else:
        fixed = (_normalized(first, first_rank), _normalized(second, second_rank))
    a, b = fixed
    return None if a is None or b is None else (a, b)


def compose_unsqueeze_axes(first: list[int], second: list[int],
                           rank: int | None) -> list[int] | None:
    """The axes of the one Unsqueeze that is Unsqueeze(Unsqueeze(X, first), second) for X of
    `rank` (None: unknown, then only for non-negative axes), or None. The second's axes
    index the output; the intermediate value's axes land, in their order, on the output
    positions it leaves, so its inserted dims (`first`) are at those."""
    rank1 = None if rank is None else rank + len(first)
    rank2 = None if rank1 is None else rank1 + len(second)
    found = _sorted_axes(first, second, rank1, rank2)
    if found is None:
        return None
    inserted, outer = found
    return _interleaved(outer, inserted)


def compose_squeeze_axes(first: list[int], second: list[int],
                         rank: int | None) -> list[int] | None:
    """The axes of the one Squeeze that is Squeeze(Squeeze(X, first), second) for X of
    `rank` (None: unknown, then only for non-negative axes), or None. The second's axes
    index the intermediate value, whose axis j is X's j-th axis not in `first`."""
    rank1 = None if rank is None else rank - len(first)
    found = _sorted_axes(first, second, rank, rank1)
    if found is None:
        return None
    removed, further = found
    return _interleaved(removed, further)


def _interleaved(taken: list[int], counted: list[int]) -> list[int]:
    """The positions `taken`, and those `counted` (sorted indexes counting only the
    positions not taken) land on: where the inner node's axes are among the outer one's
    (Unsqueeze: its inserted dims among the second's; Squeeze: the second's removed dims
    among X's axes the first left)."""
    skipped = set(taken)
    composed = set(taken)
    position = 0
    for index in range(counted[-1] + 1):
        while position in skipped:
            position += 1
        if index in counted:
            composed.add(position)
        position += 1
    return sorted(composed)


#: The chain passes in the order they are best run (see docs/fusions/chains.md).
CHAIN_PASSES: tuple[type, ...] = (
    CastChainSimplification,
    SqueezeUnsqueezeCancellation,
    TransposeChainSimplification,
    ReshapeChainSimplification,
)
