"""`ReciprocalMulFusion`: `X * Reciprocal(S)` and `X * (1 / S)` become `X / S`.

Exporters write `torch.rsqrt(v)` as `Div(1, Sqrt(v))` (Llama's RMSNorm below opset 23) and
`x / s` sometimes as a product with `Reciprocal(s)`; one Div does the same with one operator
and one intermediate tensor fewer (onnxruntime's basic level does this rewrite too). The
quotient is rounded once instead of twice, so results may differ in the last bit. It fires when:

* the element type is a floating-point one (an integer `Div(1, s)` truncates: 1 / 3 is 0);
* the `1` of `Div(1, S)` is a constant whose every element is 1 and whose dims broadcast to
  `S`'s without growing them (a `[1, 1]` one over a `[4]` divisor would make the product 2-D);
* the reciprocal is read by the Mul only (the matcher refuses a match whose inner value has
  another consumer, a graph output included).

The Mul may read the reciprocal as either operand: the pass enables the matcher's
commutative matching. The Div takes the Mul's place and its output's value name, and the
Mul's node name with the operator in it swapped (`/ln/Mul_1` becomes `/ln/Div_1`; a name
that does not spell the operator is kept as it is).
"""

from __future__ import annotations

import numpy as np

from ge.compiler.builtin._support import (
    FLOAT_TYPES,
    broadcasts_to,
    dims_of,
    known_dtype,
    refuse,
    retyped_name,
    value_desc,
)
from ge.compiler.pass_registry import builtin_pass
from ge.es import TensorHolder
from ge.es.all import Div, Mul, Reciprocal
from ge.graph import Node, Tensor
from ge.graph.node import is_const
from ge.passes import PassContext, PatternFusionPass, pattern
from ge.passes.config import PatternMatcherConfigBuilder
from ge.passes.matcher import MatchResult
from ge.passes.pattern import PatternInputs

__all__ = ["ReciprocalMulFusion"]


#: Why a match is refused (`ge passes explain` shows it, the report counts it): one text per
#: cause, whatever the match.
_NOT_FLOAT = ("the product's element type is unknown or not floating-point (an integer "
              "Div(1, S) truncates: 1 / 3 is 0)")
_NOT_ONE = "the dividend of Div(1, S) is not a constant whose every element is 1"
_ONE_GROWS = ("the 1 of Div(1, S) does not broadcast to S's dims without growing them (or "
              "S's rank is unknown)")


def _not_one_over(div: Node) -> str | None:
    """None when `div` is `Div(1, S)` with a `1` that leaves `S`'s dims as they are; else
    why it is not (a refusal's reason)."""
    producer = div.get_input_producer(0)
    if producer is None or not is_const(producer[0]) or not producer[0].has_attr("value"):
        return _NOT_ONE
    one = producer[0].get_attr("value")
    if not isinstance(one, Tensor) or not np.all(one.numpy() == 1):
        return _NOT_ONE
    if not one.shape:
        return None  # a scalar broadcasts to anything unchanged
    divisor = dims_of(value_desc(div, 1))
    return None if divisor is not None and broadcasts_to(one.shape, divisor) else _ONE_GROWS


@builtin_pass(name="ReciprocalMulFusion", step="builtin_fusion", requires=("Reciprocal", "Div"),
              also_in=("origin_graph_optimize",))
class ReciprocalMulFusion(PatternFusionPass):
    """`X * Reciprocal(S)` or `X * (1 / S)` (either operand order) → `X / S` (see the
    module docstring for when)."""

    def __init__(self) -> None:
        # Mul is commutative: `Reciprocal(s) * x` matches the same pattern.
        super().__init__(PatternMatcherConfigBuilder().enable_commutative_match().build())

    @pattern
    def mul_reciprocal(self, inputs: PatternInputs) -> TensorHolder:
        return Mul(inputs[0], Reciprocal(inputs[1]))

    @pattern
    def mul_one_over(self, inputs: PatternInputs) -> TensorHolder:
        x, divisor = inputs[0], inputs[1]
        one = x.get_owner_builder().create_scalar_float(1.0)  # any constant; value checked
        return Mul(x, Div(one, divisor))

    def meet_requirements(self, match_result: MatchResult,
                          context: PassContext | None = None) -> bool:
        nodes = match_result.get_matched_nodes()
        if known_dtype(_mul(match_result).get_output_desc(0)) not in FLOAT_TYPES:
            return refuse(context, _NOT_FLOAT)
        div = next((n for n in nodes if n.type == "Div"), None)
        why = None if div is None else _not_one_over(div)
        return True if why is None else refuse(context, why)

    def replacement(  # type: ignore[override]  # expression style: the engine builds the graph
            self, inputs: PatternInputs, match_result: MatchResult) -> TensorHolder:
        """`X / S`, named as the Mul it replaces with Div for Mul (the engine gives it the
        Mul's own name, when that does not spell the operator, once the Mul is gone)."""
        return Div(inputs[0], inputs[1], name=retyped_name(_mul(match_result).name, "Mul", "Div"))


def _mul(match_result: MatchResult) -> Node:
    return next(n for n in match_result.get_matched_nodes() if n.type == "Mul")
