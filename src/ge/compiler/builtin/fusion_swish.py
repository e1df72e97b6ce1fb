"""`SwishFusion`: SiLU written out, `X * Sigmoid(X)`, fused into the ONNX `Swish` (opset >= 24).

The MLP of Llama and most recent decoders computes `gate * sigmoid(gate)` (SiLU), which
exporters write as a Sigmoid and a Mul. From opset 24 ONNX has `Swish(X, alpha) =
X * Sigmoid(alpha * X)`, one operator. Patterns, either operand order of each Mul::

    Y = Mul(X, Sigmoid(X))              ->  Y = Swish(X)             (alpha 1)
    Y = Mul(X, Sigmoid(Mul(X, a)))      ->  Y = Swish(X, alpha=a)

`meet_requirements` checks the rest: the graph's opset has `Swish` (24, and the installed
onnx knows it), X is float16, bfloat16, float32 or float64, `a` is a finite one-element
float constant of no higher rank than X (it must not broadcast X up). The matcher refuses a
match whose Sigmoid (or scaling) is read outside it, and one `X` wildcard binds one value,
so `A * Sigmoid(B)` of two different values never matches.

Off by default (`enable=["SwishFusion"]`, `ge compile --enable SwishFusion`): onnxruntime
1.32 has no `Swish` kernel and runs the operator's function body (Cast, Mul, Sigmoid, Mul),
which keeps it from fusing `X * Sigmoid(X)` with the Conv before it: EfficientNet-B0 ran
27-32% slower on CPU with the fusion (a user trial). Enable it for a runtime that has one.
"""

from __future__ import annotations

import onnx

from ge.compiler.builtin._support import FLOAT_TYPES, known_dtype, refuse
from ge.compiler.builtin.norm_checks import constant_scalar
from ge.compiler.pass_registry import builtin_pass
from ge.es import GraphBuilder, TensorHolder, current_opset_imports
from ge.es.all import Mul, Sigmoid, Swish
from ge.graph import Node
from ge.graph.node import is_const
from ge.ops.onnx_node import node_opset
from ge.passes import PassContext, PatternFusionPass, PatternMatcherConfigBuilder
from ge.passes.matcher import MatchResult
from ge.passes.pattern import Pattern, PatternInputs, create_pattern

__all__ = ["SWISH_OPSET", "SwishFusion"]

SWISH_OPSET = 24

#: Why a match is refused (`ge passes explain` shows it, the report counts it): one text per
#: cause, whatever the match.
_NO_SWISH = "the opset lacks Swish (it needs opset 24, and an onnx that knows Swish)"
_NOT_FLOAT = ("X's element type is unknown or not floating-point (Swish takes float16, "
              "bfloat16, float, double)")
_BAD_ALPHA = ("the scaling constant a is not one finite floating-point element of no higher "
              "rank than X")


def _available(opset: int) -> bool:
    return opset >= SWISH_OPSET and onnx.defs.has("Swish")


def _alpha(node: Node, x_rank: int | None) -> float | None:
    """The value of a scaling constant `a`: one finite float element, no higher rank than X."""
    number = constant_scalar(node)
    if number is None:
        return None
    value = node.get_attr("value")
    if value.data_type not in FLOAT_TYPES or len(value.shape) > (0 if x_rank is None else x_rank):
        return None
    return number


@builtin_pass(name="SwishFusion", step="builtin_fusion", requires=("Sigmoid",),
              also_in=("origin_graph_optimize",), on_by_default=False)
class SwishFusion(PatternFusionPass):
    """`X * Sigmoid(X)` → `Swish(X)`, `X * Sigmoid(X * a)` → `Swish(X, alpha=a)` (see the
    module docstring for when)."""

    def __init__(self) -> None:
        # Mul is commutative: `Sigmoid(x) * x` and `a * x` match too.
        super().__init__(PatternMatcherConfigBuilder().enable_commutative_match().build())
        self._alpha = 1.0  # of the match meet_requirements accepted last

    def patterns(self) -> list[Pattern]:
        # No Swish to fuse into below opset 24: no pattern, the pass costs nothing there.
        if not _available(current_opset_imports().get("", 0)):
            return []
        found = []
        for form in ("scaled", "plain"):  # the scaled one first: it is the larger match
            builder = GraphBuilder(f"SwishFusion_{form}")
            x = builder.create_input(0)
            # `a`: any constant (its value is checked in meet_requirements)
            gate = Mul(x, builder.create_scalar_float(1.0)) if form == "scaled" else x
            made = create_pattern(builder.build_and_reset([Mul(x, Sigmoid(gate))]))
            made.capture_tensor(x)  # capture 0: X
            found.append(made)
        return found

    def meet_requirements(self, match_result: MatchResult,
                          context: PassContext | None = None) -> bool:
        nodes = match_result.get_matched_nodes()
        sigmoid = next(n for n in nodes if n.type == "Sigmoid")
        if not _available(node_opset(sigmoid)):
            return refuse(context, _NO_SWISH)
        x = match_result.get_captured_tensor(0)
        desc = x.node.get_output_desc(x.index)
        if known_dtype(desc) not in FLOAT_TYPES:
            return refuse(context, _NOT_FLOAT)
        constants = [n for n in nodes if is_const(n)]
        if not constants:
            self._alpha = 1.0
            return True
        shape = desc.get_shape()
        alpha = _alpha(constants[0], None if shape.is_unknown_rank() else len(shape))
        if alpha is None:
            return refuse(context, _BAD_ALPHA)
        self._alpha = alpha
        return True

    def replacement(  # type: ignore[override]  # expression style: the engine builds the graph
            self, inputs: PatternInputs, context: PassContext | None = None) -> TensorHolder:
        if self._alpha == 1.0:
            return Swish(inputs[0])
        return Swish(inputs[0], alpha=self._alpha)
