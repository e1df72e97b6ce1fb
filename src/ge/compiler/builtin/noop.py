"""`NoOpElimination`: remove nodes that hand their data input on unchanged.

Identity; Dropout in inference; a Cast to the type it already has; a Reshape to the shape it
already has; a Transpose by the identity permutation; Add/Sub of zeros, Mul/Div by ones and
Pow by one when broadcasting changes nothing. Consumers read the data input instead. Every
decision is made from what the descs say: a node whose dtype or shape is not known is kept.

Signed zeros: Add(x, +0.0) is removed although IEEE 754 gives +0.0 for x = -0.0 (an equal
value; only a 1/x or atan2 downstream sees the sign). Strictly only x + (-0.0) and
x - (+0.0) give -0.0 back, but exports write +0.0, and the vendored ViT and the dynamo
DistilBERT would keep their no-op Adds.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ge.compiler.builtin._support import (
    const_input,
    dropout_in_inference,
    first_element,
    known_dtype,
    rewirable,
    static_dims,
)
from ge.compiler.pass_registry import builtin_pass
from ge.graph import Graph, Node, Tensor, TensorDesc
from ge.graph.types import data_type_to_onnx
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


def _reshape(node: Node) -> int | None:
    """Reshape to the static shape the input already has (per the descs; a constant target
    shape must say the same)."""
    in_desc, out_desc = node.get_input_desc(0), node.get_output_desc(0)
    dims, out_dims = static_dims(in_desc), static_dims(out_desc)
    if dims is None or dims != out_dims or known_dtype(out_desc) != known_dtype(in_desc):
        return None
    if known_dtype(in_desc) is None:
        return None
    target = const_input(node, 1) if node.get_inputs_size() > 1 else None
    if target is not None and _reshaped(dims, target, node) != dims:
        return None
    return 0


def _reshaped(dims: list[int], target: Tensor, node: Node) -> list[int] | None:
    """The shape Reshape makes of `dims` with a constant target shape (0 copies a dim
    unless `allowzero`, one -1 takes what is left), or None when it cannot tell."""
    wanted = [int(v) for v in np.asarray(target.numpy()).reshape(-1)]
    allow_zero = node.has_attr("allowzero") and bool(node.get_attr("allowzero"))
    resolved = [dims[k] if w == 0 and not allow_zero and k < len(dims) else w
                for k, w in enumerate(wanted)]
    if resolved.count(-1) == 1:
        rest = math.prod(w for w in resolved if w != -1)
        total = math.prod(dims)
        if rest <= 0 or total % rest:
            return None
        resolved[resolved.index(-1)] = total // rest
    return resolved


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
    constant has its dtype and that input already has the output's static shape."""
    if node.get_inputs_size() != 2:
        return None
    neutral, const_sides = _NEUTRAL[node.type]
    out_desc: TensorDesc | None = None
    for side in const_sides:
        value = const_input(node, side)  # the usual answer, found first: no constant
        data = 1 - side
        if value is None or node.get_input_producer(data) is None:
            continue
        first = first_element(value)  # (the usual answer, without decoding the constant)
        if first is not None and first != neutral:
            continue
        array = value.numpy()
        if array.dtype.kind == "O":
            continue  # strings: no arithmetic
        try:  # (the first element settles most: a bias, a scale)
            if (array.size and array.flat[0] != neutral) or not bool(np.all(array == neutral)):
                continue
        except (TypeError, ValueError):
            continue
        if out_desc is None:
            out_desc = node.get_output_desc(0)
        out_dims = static_dims(out_desc)
        if out_dims is None:
            return None
        data_desc = node.get_input_desc(data)
        dtype = known_dtype(data_desc)
        if dtype is None or value.data_type != dtype or known_dtype(out_desc) != dtype:
            continue
        if static_dims(data_desc) != out_dims:
            continue  # the constant broadcasts the data to a larger shape
        return data
    return None


_RULES: dict[str, Callable[[Node], int | None]] = {
    "Identity": _identity,
    "Dropout": _dropout,
    "Cast": _cast,
    "Reshape": _reshape,
    "Transpose": _transpose,
    **dict.fromkeys(_NEUTRAL, _neutral_operand),
}


def passthrough_input(node: Node) -> int | None:
    """The input `node` hands on unchanged, if it is a no-op (see the module docstring)."""
    rule = _RULES.get(node.type) if not node.domain else None
    if rule is None:
        return None
    index = rule(node)
    if index is None or node.get_input_producer(index) is None:
        return None
    return index


@builtin_pass(name="NoOpElimination", step="origin_graph_optimize")
class NoOpElimination(FusionBasePass):
    """Bypass and remove no-op nodes (see the module docstring)."""

    def run(self, graph: Graph, context: PassContext) -> StatusLike:
        changed = False
        for node in graph.topological_order():
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
