"""`GeluFusion`: GELU written out in primitives, fused into the ONNX `Gelu` (opset >= 20).

A `PatternFusionPass` of the `builtin_fusion` step, with commutative matching (`Add` and
`Mul` may take their operands in either order). Its patterns are the usual exports::

    exact:  e = Erf(Div(X, 1.4142135))  or  Erf(Mul(X, 0.70710677))
            Y = Mul(Mul(X, 0.5), Add(e, 1))       0.5 multiplied first
              = Mul(Mul(X, Add(e, 1)), 0.5)       0.5 multiplied last
              = Mul(X, Mul(0.5, Add(e, 1)))       0.5 with the erf term
            ->  Y = Gelu(X, approximate="none")
    tanh:   c = Pow(X, 3)  or  Mul(Mul(X, X), X)
            t = Tanh(Mul(0.7978846, Add(X, Mul(0.044715, c))))
              or Tanh(Mul(Mul(X, 0.7978846), Add(Mul(Mul(X, 0.044715), X), 1)))
                                              (factored: BLOOM's and Falcon's bloom_gelu)
            Y = the same three orderings of 0.5 * X * Add(t, 1)
            ->  Y = Gelu(X, approximate="tanh")

`meet_requirements` checks the rest: the graph's opset has `Gelu` (20), X is a float type
(float16, bfloat16, float32, float64), every constant is a one-element constant within a
relative 1e-5 of its value (or the constant's own precision, for float16 and bfloat16), and
the result has X's shape and type (a constant that broadcast X to more axes is refused).
The matcher refuses a match whose intermediate values are read outside it. See
docs/fusions/norm_gelu.md.
"""

from __future__ import annotations

import math

import numpy as np

from ge.compiler.builtin._support import FLOAT_TYPES, known_dtype, refuse, same_known_dims
from ge.compiler.pass_registry import builtin_pass
from ge.es import GraphBuilder, TensorHolder, current_opset_imports
from ge.es.all import Add, Div, Erf, Gelu, Mul, Pow, Tanh
from ge.graph import CONST, Node, Tensor
from ge.ops.onnx_node import node_opset
from ge.passes import PassContext, PatternFusionPass, PatternMatcherConfigBuilder
from ge.passes.matcher import Match, MatchResult, match_identity
from ge.passes.pattern import Pattern, PatternInputs, create_pattern

__all__ = ["GeluFusion"]

GELU_OPSET = 20
GELU_TYPES = FLOAT_TYPES  # Gelu takes every floating-point type
#: Relative tolerance on the constants: float32 exports round sqrt(2) and friends (to 6e-8),
#: some write them to five digits (0.79788: 6e-6). Wider, it fused a divisor of 1.4143 (6e-5
#: off), which moved the outputs by 2.7e-4, beyond verification's own rtol (trial CC).
RTOL = 1e-5

#: The value each pattern constant must have, by role.
_EXPECTED = {
    "half": 0.5,
    "one": 1.0,
    "sqrt2": math.sqrt(2.0),  # Div(X, sqrt(2))
    "inv_sqrt2": 1.0 / math.sqrt(2.0),  # Mul(X, 1/sqrt(2))
    "three": 3.0,
    "coef": 0.044715,
    "sqrt_2_over_pi": math.sqrt(2.0 / math.pi),
    "one_inner": 1.0,  # the factored tanh form's 1 + 0.044715 * x * x
}

#: Where the 0.5 goes: (X*0.5)*t, (X*t)*0.5, X*(0.5*t).
_ORDERINGS = ("half_first", "half_last", "half_inner")

#: Why a match is refused (`ge passes explain` shows it, the report counts it): one text per
#: cause, whatever the match.
_NO_GELU = "the opset lacks Gelu (it needs opset 20)"
_NOT_FLOAT = ("X's element type is unknown or not floating-point (Gelu takes float16, "
              "bfloat16, float, double)")
_OTHER_TYPE = "the result is not of X's element type"
_UNKNOWN_RANK = "the rank of X or of the result is unknown"
_OTHER_SHAPE = "the result's shape is not X's: a constant broadcast X to another shape"
#: A pattern constant that is not what GELU has, by role.
_WRONG_CONSTANT = {role: f"a constant is not GELU's {what} (a one-element constant within a "
                         "relative 1e-5 of it, or of its type's precision)"
                   for role, what in (("half", "0.5"), ("one", "1 added to the erf or tanh"),
                                      ("sqrt2", "divisor sqrt(2)"),
                                      ("inv_sqrt2", "factor 1/sqrt(2)"),
                                      ("three", "exponent 3"), ("coef", "coefficient 0.044715"),
                                      ("sqrt_2_over_pi", "factor sqrt(2/pi)"),
                                      ("one_inner", "1 of the factored tanh form"))}


def _close(node: Node, want: float) -> bool:
    """Whether `node` is a one-element float constant within tolerance of `want`."""
    if node.type != CONST or node.domain or not node.has_attr("value"):
        return False
    value = node.get_attr("value")
    if not isinstance(value, Tensor) or value.size != 1:
        return False
    array = np.asarray(value.numpy()).reshape(-1)
    if array.dtype.kind in "iu":  # an integer exponent: Pow(X, 3)
        return want == 3.0 and int(array[0]) == 3
    try:
        got = float(array[0])
        precision = float(np.finfo(array.dtype).eps)
    except (TypeError, ValueError):
        return False  # not a floating-point constant
    rtol = max(RTOL, precision)  # float16 holds 1/sqrt(2) only to 1.1e-4
    return math.isfinite(got) and abs(got - want) <= rtol * abs(want)


class _Variant:
    """One pattern being built: X, the tensors it captures by role."""

    def __init__(self, name: str, opset: int) -> None:
        self.name = name
        self.builder = GraphBuilder(name, opset=opset)
        self.captures: dict[str, TensorHolder] = {}
        self.x = self.mark("x", self.builder.create_input(0))

    def mark(self, role: str, tensor: TensorHolder) -> TensorHolder:
        self.captures[role] = tensor
        return tensor

    def const(self, role: str) -> TensorHolder:
        """A pattern constant (matches any constant; its value is checked by role)."""
        return self.mark(role, self.builder.create_scalar_float(_EXPECTED[role]))

    def product(self, ordering: str, term: TensorHolder) -> TensorHolder:
        """0.5 * X * term, in one of its orderings."""
        x = self.x
        if ordering == "half_first":
            return Mul(Mul(x, self.const("half")), term)
        if ordering == "half_last":
            return Mul(Mul(x, term), self.const("half"))
        return Mul(x, Mul(self.const("half"), term))

    def build(self, output: TensorHolder, roles: dict[str, dict[str, int]]) -> Pattern:
        pattern = create_pattern(self.builder.build_and_reset([self.mark("out", output)]))
        roles[self.name] = {}
        for index, (role, tensor) in enumerate(self.captures.items()):
            pattern.capture_tensor(tensor)
            roles[self.name][role] = index
        return pattern


def _erf_pattern(opset: int, scaling: str, ordering: str,
                 roles: dict[str, dict[str, int]]) -> Pattern:
    v = _Variant(f"GeluErf_{scaling}_{ordering}", opset)
    scaled = Div(v.x, v.const("sqrt2")) if scaling == "div" else Mul(v.x, v.const("inv_sqrt2"))
    term = Add(Erf(scaled), v.const("one"))
    return v.build(v.product(ordering, term), roles)


def _tanh_pattern(opset: int, cube: str, ordering: str,
                  roles: dict[str, dict[str, int]]) -> Pattern:
    v = _Variant(f"GeluTanh_{cube}_{ordering}", opset)
    x = v.x
    if cube == "factored":  # sqrt(2/pi) * x * (1 + 0.044715 * x * x), as BLOOM writes it
        squared = Mul(Mul(x, v.const("coef")), x)
        argument = Mul(Mul(x, v.const("sqrt_2_over_pi")), Add(squared, v.const("one_inner")))
    else:
        cubed = Pow(x, v.const("three")) if cube == "pow" else Mul(Mul(x, x), x)
        argument = Mul(v.const("sqrt_2_over_pi"), Add(x, Mul(v.const("coef"), cubed)))
    term = Add(Tanh(argument), v.const("one"))
    return v.build(v.product(ordering, term), roles)


@builtin_pass(name="GeluFusion", step="builtin_fusion", requires=("Erf", "Tanh"),
              also_in=("origin_graph_optimize",))
class GeluFusion(PatternFusionPass):
    """Fuse a written-out GELU (erf or tanh form) into Gelu (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__(PatternMatcherConfigBuilder().enable_commutative_match().build())
        self._roles: dict[str, dict[str, int]] = {}  # pattern name -> role -> capture
        # The last match meet_requirements saw and the approximation it found (replacement,
        # called for that match next with a handle of its own, takes it instead of deciding
        # again, which cost a sixth of each rewrite).
        self._decided: tuple[Match | None, str | None] = (None, None)
        self._refusal = ""  # why `_approximation` last returned None

    def patterns(self) -> list[Pattern]:
        opset = current_opset_imports().get("", 0)  # the model's: patterns build in its scope
        if opset < GELU_OPSET:
            return []  # no Gelu to fuse into
        found = []
        for ordering in _ORDERINGS:
            for scaling in ("div", "mul"):
                found.append(_erf_pattern(opset, scaling, ordering, self._roles))
            for cube in ("pow", "mul", "factored"):
                found.append(_tanh_pattern(opset, cube, ordering, self._roles))
        return found

    def _approximation(self, match_result: MatchResult) -> str | None:
        """"none" or "tanh" when the match is a GELU that Gelu computes, else None (and
        `self._refusal` says why)."""
        name = match_result.get_pattern_graph_name()
        roles = self._roles[name]

        def node(role: str) -> Node:
            return match_result.get_captured_tensor(roles[role]).node

        out, x = (match_result.get_captured_tensor(roles[r]) for r in ("out", "x"))
        if node_opset(out.node) < GELU_OPSET:
            self._refusal = _NO_GELU
            return None
        x_desc, out_desc = x.node.get_output_desc(x.index), out.node.get_output_desc(out.index)
        x_type = known_dtype(x_desc)
        if x_type not in GELU_TYPES:
            self._refusal = _NOT_FLOAT
            return None
        if known_dtype(out_desc) != x_type:
            self._refusal = _OTHER_TYPE
            return None
        x_shape, out_shape = x_desc.get_shape(), out_desc.get_shape()
        if x_shape.is_unknown_rank() or out_shape.is_unknown_rank():
            self._refusal = _UNKNOWN_RANK
            return None
        if not same_known_dims(list(out_shape), list(x_shape)):
            self._refusal = _OTHER_SHAPE  # a constant broadcast X to another shape
            return None
        for role, want in _EXPECTED.items():
            if role in roles and not _close(node(role), want):
                self._refusal = _WRONG_CONSTANT[role]
                return None
        return "tanh" if name.startswith("GeluTanh") else "none"

    def meet_requirements(self, match_result: MatchResult,
                          context: PassContext | None = None) -> bool:
        approximate = self._approximation(match_result)
        self._decided = (match_identity(match_result), approximate)  # for its replacement
        if approximate is None:
            return refuse(context, self._refusal)
        return True

    def replacement(  # type: ignore[override]  # expression style: built in place
            self, inputs: PatternInputs, match_result: MatchResult) -> TensorHolder:
        """Gelu of X (boundary input 0), built where the match is (expression style)."""
        decided, approximate = self._decided
        self._decided = (None, None)
        if decided is not match_identity(match_result) or approximate is None:
            approximate = self._approximation(match_result)
        assert approximate is not None  # meet_requirements accepted this match
        out = Gelu(inputs[0], approximate=approximate)
        assert isinstance(out, TensorHolder)
        return out
