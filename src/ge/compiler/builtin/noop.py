"""`NoOpElimination`: remove nodes that hand their data input on unchanged.

Identity; Dropout in inference; a Cast (or CastLike) to the type it already has; a Reshape,
Flatten or Expand to the shape it already has, a Squeeze of nothing; a Transpose by the
identity permutation; a Slice of everything with steps of one, a Pad by zeros, a Tile by
ones; a Concat, Sum, Mean, Max or Min of one input and a Split into one output; Add/Sub of
zeros, Mul/Div by a one (a one-element constant) and Pow by one when broadcasting changes
nothing; a Where whose constant condition is False everywhere (True everywhere) is its
third (second) input, when neither the condition nor the other operand broadcasts it
larger (TorchScript's `expand` writes `Where(Equal(S, -1), ones, S)`, which constant
folding decides for a shape vector S of dims: `dim_bounds`). A scale of several elements
that happens to be all ones (a freshly initialised normalisation's weight) is kept:
runtimes fuse normalisations written in primitives together with it (onnxruntime's
SimplifiedLayerNormalization needs the weight's Mul; without it the T5 encoder ran 18%
slower), and removing it saves one elementwise pass. Consumers read the data input
instead. A node is removed only when its constant arguments and its input's desc prove it
(or, for a non-constant argument, the output's desc says nothing changed): a node whose
dtype or shape is not known is kept. The input's desc is the one to trust: an
output desc inferred before constant folding may still have unknown dims.

Symbolic dims (`[batch, seq, 768]`, the usual export) prove as much as sizes where the
operator does the same at every size: an Add of a scalar zero, a Reshape to `[0, 0, 768]`
or `[0, 0, -1]`, an Expand to `[1]`, a Slice from 0 to the end (an end of at least
2^31 - 1, what exporters write for "to the end"), a Flatten of a 2-D value at axis 1, and
a Reshape, Expand or Slice whose output desc has the input's dims, names and all (one name
is one size throughout a model). A Squeeze without axes stays unless every dim is a known
size other than 1: a symbol may be 1.

Signed zeros: Add(x, +0.0) and Sub(x, -0.0) are removed although IEEE 754 gives +0.0 for
x = -0.0 (an equal value; only a 1/x or atan2 downstream sees the sign). Strictly only
x + (-0.0) and x - (+0.0) give -0.0 back, but exports write +0.0, and the vendored ViT and
the dynamo DistilBERT would keep their no-op Adds.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ge.compiler.builtin._support import (
    allow_zero,
    broadcasts_to,
    const_input,
    const_ints,
    first_element,
    input_connected,
    known_dtype,
    reshaped_dims,
    rewirable,
    slice_arguments,
    static_dims,
    symbolic_dims,
    unsound_dims,
)
from ge.compiler.pass_registry import builtin_pass
from ge.graph import Graph, Node, Tensor
from ge.graph.types import data_type_to_onnx
from ge.ops.onnx_node import node_opset
from ge.ops.randomness import dropout_in_inference
from ge.passes import NOT_CHANGED, FusionBasePass, PassContext
from ge.passes.status import SUCCESS, StatusLike

__all__ = ["NoOpElimination", "passthrough_input"]

# Binary operators with an identity element: (identity value, inputs the constant may be).
_NEUTRAL: dict[str, tuple[int, tuple[int, ...]]] = {
    "Add": (0, (0, 1)),
    "Sub": (0, (1,)),
    "Mul": (1, (0, 1)),
    "Div": (1, (1,)),
    "Pow": (1, (1,)),
}


def _identity(node: Node) -> int | None:
    return 0


def _dropout(node: Node) -> int | None:
    """Dropout is the identity in inference: training_mode absent or a constant false (and,
    before opset 7, `is_test` set); its mask must be unused."""
    if node.get_outputs_size() > 1 and node.get_out_data_nodes_and_port_indexes(1):
        return None
    return 0 if dropout_in_inference(node) else None


def _cast(node: Node) -> int | None:
    """Cast to the element type the input already has."""
    dtype = known_dtype(node.get_input_desc(0))
    if dtype is None or not node.has_attr("to"):
        return None
    try:
        same = data_type_to_onnx(dtype) == int(node.get_attr("to"))
    except Exception:  # a GE type with no ONNX element type: not a Cast we can judge
        return None
    return 0 if same else None


def _cast_like(node: Node) -> int | None:
    """CastLike to the element type the input already has."""
    dtype = known_dtype(node.get_input_desc(0))
    if dtype is None or node.get_inputs_size() < 2:
        return None
    return 0 if known_dtype(node.get_input_desc(1)) == dtype else None


def _unchanged_dims(node: Node) -> list[int | str] | None:
    """The dims of input 0 when output 0 has the same dims (sizes or named symbols) and the
    same known element type (per the descs), else None."""
    in_desc, out_desc = node.get_input_desc(0), node.get_output_desc(0)
    dims = symbolic_dims(in_desc)
    if dims is None or symbolic_dims(out_desc) != dims:
        return None
    dtype = known_dtype(in_desc)
    return dims if dtype is not None and known_dtype(out_desc) == dtype else None


def _reshape(node: Node) -> int | None:
    """Reshape to the shape the input already has: what a constant target shape makes of
    the input's dims, else what the descs say."""
    dims = symbolic_dims(node.get_input_desc(0))
    target = const_ints(node, 1) if node.get_inputs_size() > 1 else None
    if target is not None and dims is not None:
        return 0 if reshaped_dims(dims, target, allow_zero(node)) == dims else None
    return 0 if _unchanged_dims(node) is not None else None


def _flatten(node: Node) -> int | None:
    """Flatten of a 2-D value to the shape it already has ([a, b] with axis 1, [1, b] with
    axis 0, [a, 1] with axis 2)."""
    dims = symbolic_dims(node.get_input_desc(0))
    if dims is None or len(dims) != 2:
        return None
    axis = int(node.get_attr("axis")) if node.has_attr("axis") else 1
    axis = axis + len(dims) if axis < 0 else axis
    return 0 if axis == 1 or (axis == 0 and dims[0] == 1) or (
        axis == 2 and dims[1] == 1) else None


def _squeeze(node: Node) -> int | None:
    """Squeeze without axes of a value that has no dim of size one."""
    if node.has_attr("axes") or input_connected(node, 1):
        return None
    dims = static_dims(node.get_input_desc(0))
    return 0 if dims is not None and 1 not in dims else None


def _expand(node: Node) -> int | None:
    """Expand to a shape the input already has: a constant shape broadcast with the
    input's dims gives them back, else the descs say so."""
    dims = symbolic_dims(node.get_input_desc(0))
    target = const_ints(node, 1)
    if target is not None and dims is not None:
        return 0 if broadcasts_to(target, dims) else None
    return 0 if _unchanged_dims(node) is not None else None


def _slice(node: Node) -> int | None:
    """Slice whose every range is whole, with steps of one: computed from constant
    arguments and the input's dims, else the descs say the shape is unchanged and the
    steps are constant ones."""
    dims = symbolic_dims(node.get_input_desc(0))
    arguments = slice_arguments(node) if dims is not None else None
    if arguments is None:
        steps = const_ints(node, 4) if input_connected(node, 4) else [1]
        if steps is None or any(step != 1 for step in steps):
            return None
        return 0 if _unchanged_dims(node) is not None else None
    assert dims is not None
    starts, ends, axes, steps = arguments
    axes = list(range(len(starts))) if axes is None else axes
    if not len(starts) == len(ends) == len(axes) == len(steps):
        return None
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        if not -len(dims) <= axis < len(dims) or step != 1:
            return None
        dim = dims[axis]
        if isinstance(dim, str):  # any size: from the first element to the end
            if not (start == 0 or start <= -_WHOLE) or end < _WHOLE:
                return None
        elif len(range(dim)[start:end]) != dim:  # ONNX clamps as Python does
            return None
    return 0


#: A Slice bound at least this far out takes a symbolic axis to its end (or from its
#: start): what exporters write for an open end (PyTorch INT64_MAX, others INT32_MAX).
_WHOLE = 2**31 - 1


def _pad(node: Node) -> int | None:
    """Pad by zeros on every side (the pads an attribute before opset 11, an input from)."""
    if node_opset(node) < 11:
        pads = [int(p) for p in node.get_attr("pads")] if node.has_attr("pads") else None
    else:
        pads = const_ints(node, 1)
    return 0 if pads is not None and not any(pads) else None


def _tile(node: Node) -> int | None:
    """Tile by ones."""
    repeats = const_ints(node, 1)
    return 0 if repeats is not None and all(r == 1 for r in repeats) else None


def _single_input(node: Node) -> int | None:
    """Concat, Sum, Mean, Max or Min of one input."""
    return 0 if node.get_inputs_size() == 1 else None


def _split(node: Node) -> int | None:
    """Split into one output (which then is the whole input)."""
    return 0 if node.get_outputs_size() == 1 else None


def _transpose(node: Node) -> int | None:
    """Transpose by the identity permutation (or without perm, of a rank <= 1 input)."""
    if node.has_attr("perm"):
        perm = [int(p) for p in node.get_attr("perm")]
        return 0 if perm == list(range(len(perm))) else None
    shape = node.get_input_desc(0).get_shape()
    if shape.is_unknown_rank():
        return None
    return 0 if len(shape) <= 1 else None


def _neutral_operand(node: Node) -> int | None:
    """Add/Sub of zeros, Mul/Div by ones, Pow by one: the other input's index when the
    constant has its dtype and broadcasts into that input's dims (sizes or symbols)."""
    if node.get_inputs_size() != 2:
        return None
    neutral, const_sides = _NEUTRAL[node.type]
    for side in const_sides:
        value = const_input(node, side)  # the usual answer, found first: no constant
        data = 1 - side
        if value is None or node.get_input_producer(data) is None:
            continue
        first = first_element(value)  # (the usual answer, without decoding the constant)
        if first is not None and first != neutral:
            continue
        if neutral == 1 and node.type != "Pow" and (
                value.get_tensor_desc().get_shape().get_shape_size() > 1):
            continue  # a scale at its initial value: kept for the runtime's fusions
        array = value.numpy()
        if array.dtype.kind == "O":
            continue  # strings: no arithmetic
        try:  # (the first element settles most: a bias, a scale)
            if (array.size and array.flat[0] != neutral) or not bool(np.all(array == neutral)):
                continue
        except (TypeError, ValueError):
            continue
        data_desc = node.get_input_desc(data)
        dims = symbolic_dims(data_desc)
        if dims is None:
            return None
        dtype = known_dtype(data_desc)
        if dtype is None or value.data_type != dtype or (
                known_dtype(node.get_output_desc(0)) != dtype):
            continue
        if not broadcasts_to(list(value.shape), dims):
            continue  # the constant broadcasts the data to a larger shape
        return data
    return None


def _where(node: Node) -> int | None:
    """Where by a constant condition that is False everywhere (the other operand: B) or
    True everywhere (A), when the condition and the operand not taken broadcast into the
    one taken (sizes or symbols): the output is then that operand, shape and all."""
    condition = const_input(node, 0)
    if condition is None or node.get_inputs_size() != 3:
        return None
    chosen = _constant_choice(condition)
    if chosen is None:
        return None
    dims = symbolic_dims(node.get_input_desc(chosen))
    other = symbolic_dims(node.get_input_desc(3 - chosen))
    if dims is None or other is None or known_dtype(node.get_input_desc(chosen)) is None:
        return None
    if not (broadcasts_to(list(condition.shape), dims) and broadcasts_to(other, dims)):
        return None  # the condition or the other operand makes the output larger
    return chosen


def _constant_choice(condition: Tensor) -> int | None:
    """The input a Where with this constant condition hands on everywhere: 2 (B) when
    every element is False, 1 (A) when every one is True, else None."""
    array = np.asarray(condition.numpy())
    if array.dtype != np.bool_:
        return None
    return 2 if not array.any() else 1 if array.all() else None


_RULES: dict[str, Callable[[Node], int | None]] = {
    "Identity": _identity,
    "Dropout": _dropout,
    "Cast": _cast,
    "CastLike": _cast_like,
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Squeeze": _squeeze,
    "Expand": _expand,
    "Transpose": _transpose,
    "Slice": _slice,
    "Pad": _pad,
    "Tile": _tile,
    "Split": _split,
    "Where": _where,
    **dict.fromkeys(("Concat", "Sum", "Mean", "Max", "Min"), _single_input),
    **dict.fromkeys(_NEUTRAL, _neutral_operand),
}


#: Operators whose no-op rule reads no dims (an Identity, a Cast to the type it has, a Concat
#: of one input): sound whatever the dims of what they read.
_DIMS_FREE = frozenset({"Identity", "Dropout", "Cast", "CastLike",
                        "Concat", "Sum", "Mean", "Max", "Min"})


def passthrough_input(node: Node) -> int | None:
    """The input `node` hands on unchanged, if it is a no-op (see the module docstring)."""
    rule = _RULES.get(node.type) if not node.domain else None
    if rule is None:
        return None
    index = rule(node)
    if index is None or node.get_input_producer(index) is None:
        return None
    return index


@builtin_pass(name="NoOpElimination", step="origin_graph_optimize", requires=tuple(_RULES))
class NoOpElimination(FusionBasePass):
    """Bypass and remove no-op nodes (see the module docstring)."""

    def run(self, graph: Graph, context: PassContext) -> StatusLike:
        changed = False
        # A value computed from an operator whose dims inference may get wrong
        # (`unsound_dims`): what is a no-op at its inferred shape may not be at its real one
        # (a Slice [0:1] of a dim inferred 1 and broadcast to 3 at run time).
        unsound = unsound_dims(graph)
        for node in graph.topological_order():
            if node in unsound and node.type not in _DIMS_FREE:
                continue
            index = passthrough_input(node)
            if index is None or not node.get_out_data_nodes_and_port_indexes(0):
                continue  # not a no-op, or unused (left to dead-code elimination)
            if not rewirable(node):
                continue
            source = node.get_input_producer(index)
            assert source is not None
            graph.replace_all_uses(node, 0, source[0], source[1])
            graph.remove_node(node)
            changed = True
        return SUCCESS if changed else NOT_CHANGED
