"""`LayerNormFusion` and `RMSNormFusion`: normalisations written out in primitives, fused
into the ONNX operator that computes them.

Both are `PatternFusionPass`es of the `builtin_fusion` step. Their patterns are generated,
one per variant of the written-out form, largest first, and only when the opset of the model
being compiled has the fused operator. ReduceMean takes `axes` as an attribute before opset
18 and as an input from 18: LayerNormFusion has patterns for both.
Commutative matching lets `Add` and `Mul` take their operands in either order. The matcher
already refuses a match whose intermediate values are read outside it; `meet_requirements`
checks everything else (the axes, the constants, the types and shapes), and the replacement
is built only when every check holds.

LayerNormFusion (opset >= 17)::

    mean = ReduceMean(X, axes)              d = Sub(X, mean)
    var  = ReduceMean(Pow(d, 2), axes)      n = Div(d, Sqrt(Add(var, eps)))
        or ReduceMean(Mul(d, d), axes)        or Mul(d, Reciprocal(Sqrt(Add(var, eps))))
        or torch.var(unbiased=False)'s        or Mul(d, Div(1, Sqrt(Add(var, eps))))
           ReduceMean(Mul(e, e), axes), e = Sub(X, ReduceMean(X, axes)) computed again;
           in the dynamo export with keepdims=0, then a Reshape to the kept shape
    Y    = Add(Mul(n, gamma), beta)         (or Y = Mul(n, gamma): no bias)
    ->  Y = LayerNormalization(X, gamma, beta, axis=-k, epsilon=eps)

Keras' LayerNormalization as tf2onnx writes it (`moments`, then `X * inv + offset`)::

    mean = ReduceMean(X, axes), or GlobalAveragePool(X) on a rank-3 X (tf2onnx's form of a
           ReduceMean over the axes after axis 1, while axes is an attribute)
    d    = Sub(X, mean)                     var = the same mean of Mul(d, d)
    inv  = Mul(Reciprocal(Sqrt(Add(var, eps))), gamma)
        or Div(gamma, Sqrt(Add(var, eps)))   (what ReciprocalMulFusion makes of the above,
                                              when the norm fuses only in a later round)
    Y    = Add(Mul(X, inv), Add(Mul(Neg(mean), inv), beta))      (Keras 3)
        or Add(Mul(X, inv), Sub(beta, Mul(mean, inv)))           (tf.keras 2, unfused path)
        or Add(Mul(X, inv), Mul(Neg(mean), inv))                 (no beta)

An unbiased variance (torch.var's default, scaled by N / (N - 1)) is another computation:
its Mul and Div stand between the ReduceMean and the Add, so no pattern matches it.

RMSNormFusion (opset >= 23, where ONNX has RMSNormalization)::

    Xc = X, or Cast(X, to=float)            (the cast of T5 and Llama exports)
    r  = Sqrt(Add(ReduceMean(Pow(Xc, 2) or Mul(Xc, Xc), axes), eps))
    n  = Div(Xc, r) or Mul(Xc, Reciprocal(r)) or Mul(Xc, Div(1, r))
    Y  = Mul(n, weight), or Mul(Cast(n, to=type of X), weight)
    ->  Y = RMSNormalization(X, weight, axis=-k, epsilon=eps, stash_type=1)

A square written Mul(d, d) matches only when both inputs are the one value d.
Conditions common to both: the reduced axes are the k >= 1 last axes of X (the same for
every ReduceMean), keepdims=1 (or 0 before a Reshape to the kept shape); X is float32,
float16 or bfloat16 (the fused operators compute in float32, `stash_type=1`; double is left
alone); the exponent is a constant 2, eps a constant scalar >= 0 (its value becomes
`epsilon`); the scale (and bias) has X's type and broadcasts to the normalised dims without
reaching the other axes (a constant is broadcast to exactly the normalised shape, a
non-constant must have it already); the result has X's shape and type. See docs/fusions.md.
"""

from __future__ import annotations

import itertools

import onnx

from ge.compiler.builtin._support import refuse
from ge.compiler.builtin.norm_checks import (
    Captures,
    Plan,
    Refused,
    affine,
    check_restored,
    common_checks,
    param_index,
    parameter,
)
from ge.compiler.pass_registry import builtin_pass
from ge.es import GraphBuilder, TensorHolder, current_opset_imports
from ge.es.all import (
    Add,
    Cast,
    Div,
    GlobalAveragePool,
    LayerNormalization,
    Mul,
    Neg,
    Pow,
    Reciprocal,
    ReduceMean,
    Reshape,
    RMSNormalization,
    Sqrt,
    Sub,
)
from ge.graph import DataType, Node
from ge.graph.types import data_type_to_onnx
from ge.ops.onnx_node import node_opset
from ge.passes import PassContext, PatternFusionPass, PatternMatcherConfigBuilder
from ge.passes.matcher import Match, MatchResult, match_identity
from ge.passes.pattern import Pattern, PatternInputs, create_pattern

__all__ = ["LayerNormFusion", "NormFusion", "RMSNormFusion"]

LAYER_NORM_OPSET = 17
RMS_NORM_OPSET = 23
#: ReduceMean takes `axes` as an input from this opset on (an attribute before).
_AXES_INPUT_OPSET = 18


# -- building the patterns ------------------------------------------------------------------


class _Variant:
    """One pattern being built: its builder, its inputs, the tensors it captures by role."""

    def __init__(self, name: str, opset: int) -> None:
        self.name = name
        self.opset = opset
        self.builder = GraphBuilder(name, opset=opset)
        self.inputs = 0
        self.captures: dict[str, TensorHolder] = {}

    def mark(self, role: str, tensor: TensorHolder) -> TensorHolder:
        """Capture `tensor` as `role` (the hooks look the matched node up by its role)."""
        self.captures[role] = tensor
        return tensor

    def input(self, role: str) -> TensorHolder:
        """The next pattern input (a wildcard for any producer), captured as `role`."""
        self.inputs += 1
        return self.mark(role, self.builder.create_input(self.inputs - 1))

    def const(self, role: str, value: float) -> TensorHolder:
        """A pattern constant: it matches any constant; `meet_requirements` reads the value."""
        return self.mark(role, self.builder.create_scalar_float(value))

    def reduce_mean(self, role: str, data: TensorHolder) -> TensorHolder:
        """ReduceMean in this opset's form; which axes is checked later, not matched.

        From opset 18 the axes are a pattern input rather than a pattern constant: the
        matcher binds each pattern constant to a distinct node, and the two ReduceMeans of
        a layer norm often read one shared axes initializer."""
        if self.opset >= _AXES_INPUT_OPSET:
            return self.mark(role, ReduceMean(data, self.input(f"{role}_axes")))
        return self.mark(role, ReduceMean(data, axes=[-1]))

    def mean(self, role: str, data: TensorHolder, pool: bool) -> TensorHolder:
        """ReduceMean, or (`pool`) GlobalAveragePool, which averages the axes after axis 1:
        tf2onnx writes it for a ReduceMean over exactly those (the rank is checked later)."""
        if pool:
            return self.mark(role, GlobalAveragePool(data))
        return self.reduce_mean(role, data)

    def build(self, output: TensorHolder, pass_: NormFusion) -> Pattern:
        """The pattern, with its captures in role order, recorded in `pass_`'s tables."""
        pattern = create_pattern(self.builder.build_and_reset([output]))
        roles = pass_._roles[self.name] = {}
        for index, (role, tensor) in enumerate(self.captures.items()):
            pattern.capture_tensor(tensor)
            roles[role] = index
        return pattern


def _scope_opset() -> int:
    """The ONNX opset of the model being compiled (patterns are built inside its scope)."""
    return current_opset_imports().get("", 0)


def _squared(v: _Variant, data: TensorHolder, square: str) -> TensorHolder:
    """`data` squared as written: Pow(data, 2), or Mul(data, data) with one value twice (the
    matcher binds both inputs to the same producer, so Mul(d, e) with e != d never matches)."""
    if square == "pow":
        return Pow(data, v.const("exponent", 2.0))
    return Mul(data, data)


def _normalized(v: _Variant, centered: TensorHolder, rms: TensorHolder, form: str
                ) -> TensorHolder:
    """`centered / rms` in one of its written forms: Div, Mul by Reciprocal, Mul by 1/x."""
    if form == "div":
        return v.mark("normed", Div(centered, rms))
    if form == "reciprocal":
        inverse = v.mark("inverse", Reciprocal(rms))
    else:  # "one_over"
        inverse = v.mark("inverse", Div(v.const("one", 1.0), rms))
    return v.mark("normed", Mul(centered, inverse))


class NormFusion(PatternFusionPass):
    """What both fusions share: the roles of each generated pattern, and the plan a match
    gets (computed by `meet_requirements`, taken by `replacement` of the same match)."""

    MIN_OPSET = 0

    def __init__(self, *, reduce_mean_opset: int | None = None) -> None:
        super().__init__(PatternMatcherConfigBuilder().enable_commutative_match().build())
        # The opset whose ReduceMean form the patterns take (axes an attribute before 18,
        # an input from 18); None: the model's. The opset hints count an opset-17 model's
        # norms at opset 23 in the model's form.
        self.reduce_mean_opset = reduce_mean_opset
        self._roles: dict[str, dict[str, int]] = {}  # pattern name -> role -> capture
        # The last match meet_requirements accepted and its plan (None: it refused the last).
        # (replacement gets a handle of its own of that match: `match_identity`)
        self._decided: tuple[Match, Plan] | None = None

    def _plan_of(self, match_result: MatchResult) -> Plan:
        decided, self._decided = self._decided, None
        if decided is not None and decided[0] is match_identity(match_result):
            return decided[1]  # meet_requirements has just planned this match
        name = match_result.get_pattern_graph_name()
        roles = self._roles.get(name)
        if roles is None:  # (trial AJ: a bare KeyError in a subclass's pass)
            raise TypeError(
                f"{type(self).__name__}: pattern {name!r} is not one of the built-in norm "
                "fusion's own, which its meet_requirements and replacement read: a subclass "
                "with patterns of its own must override both")
        c = Captures(match_result, roles)
        if node_opset(c.node("out")) < self.MIN_OPSET:
            raise Refused(f"the model's opset has no fused operator (from {self.MIN_OPSET})")
        return self._plan(c)

    def _plan(self, c: Captures) -> Plan:
        raise NotImplementedError

    def meet_requirements(self, match_result: MatchResult,
                          context: PassContext | None = None) -> bool:
        self._decided = None
        try:
            plan = self._plan_of(match_result)
        except Refused as refused:
            return refuse(context, str(refused))
        self._decided = (match_identity(match_result), plan)  # for its replacement
        if context is not None:
            context.set_error_message("")
        return True


#: How a square is written: Pow(d, 2) or Mul(d, d).
_SQUARES = ("pow", "mul")
#: How a layer norm's variance is written: from the centred value it normalises ("shared"),
#: or from a mean and a difference of its own, as torch.var(unbiased=False) exports it ("own";
#: "own_reshaped": its ReduceMean drops the axes and a Reshape puts them back, the dynamo
#: export). The own forms square with Mul only, as torch.var does (fewer patterns to build).
_VARIANCES = ("shared", "own", "own_reshaped")


def _layer_norm_pattern(pass_: NormFusion, bias: bool, variance: str, form: str, square: str,
                        style: int) -> Pattern:
    name = (f"LayerNorm_{form}_{square}_{variance}{'_bias' if bias else ''}_"
            f"{'axes_input' if style >= _AXES_INPUT_OPSET else 'axes_attr'}")
    v = _Variant(name, style)
    x, gamma = v.input("x"), v.input("scale")
    beta = v.input("bias") if bias else None
    centered = v.mark("centered", Sub(x, v.reduce_mean("mean", x)))
    deviation = centered
    if variance != "shared":  # the same difference again, computed for the variance
        deviation = v.mark("var_centered", Sub(x, v.reduce_mean("var_mean", x)))
    var = v.reduce_mean("var", _squared(v, deviation, square))
    if variance == "own_reshaped":
        var = v.mark("var_reshaped", Reshape(var, v.input("var_shape")))
    rms = Sqrt(Add(var, v.const("eps", 1e-5)))
    out = v.mark("scaled", Mul(_normalized(v, centered, rms, form), gamma))
    if beta is not None:
        out = Add(out, beta)
    return v.build(v.mark("out", out), pass_)


#: How tf2onnx writes the offset of a Keras LayerNormalization, `Y = X * inv + offset`:
#: Keras 3's `-mean * inv + beta`, tf.nn.batch_normalization's `beta - mean * inv` (tf.keras
#: 2 off its fused path), both `-mean * inv` without beta (center=False, or a zero beta that
#: TensorFlow's constant folding took away).
_TF_OFFSETS = ("neg_bias", "sub_bias", "neg")


def _tf_layer_norm_pattern(pass_: NormFusion, offset: str, pool: bool, divided: bool,
                           style: int) -> Pattern:
    suffix = "pool" if pool else ("axes_input" if style >= _AXES_INPUT_OPSET else "axes_attr")
    v = _Variant(f"LayerNorm_tf_{offset}_{suffix}{'_div' if divided else ''}", style)
    x, gamma = v.input("x"), v.input("scale")
    beta = v.input("bias") if offset != "neg" else None
    mean = v.mean("mean", x, pool)
    centered = v.mark("centered", Sub(x, mean))
    var = v.mean("var", Mul(centered, centered), pool)
    rms = Sqrt(Add(var, v.const("eps", 1e-5)))
    if divided:
        inv = v.mark("scaled", Div(gamma, rms))
    else:
        inv = v.mark("scaled", Mul(v.mark("inverse", Reciprocal(rms)), gamma))
    if beta is None:
        shift = Mul(Neg(mean), inv)
    elif offset == "sub_bias":
        shift = v.mark("biased", Sub(beta, Mul(mean, inv)))
    else:
        shift = v.mark("biased", Add(Mul(Neg(mean), inv), beta))
    return v.build(v.mark("out", Add(Mul(x, inv), shift)), pass_)


@builtin_pass(name="LayerNormFusion", step="builtin_fusion",
              requires=("ReduceMean", "GlobalAveragePool"), also_in=("origin_graph_optimize",))
class LayerNormFusion(NormFusion):
    """Fuse a written-out layer normalisation into LayerNormalization (see the module
    docstring)."""

    MIN_OPSET = LAYER_NORM_OPSET

    def patterns(self) -> list[Pattern]:
        opset = _scope_opset()
        if opset < LAYER_NORM_OPSET:
            return []  # no LayerNormalization to fuse into
        # With a bias first: the larger match wins. The variance forms never match the same
        # nodes (one Sub or two), nor do tf2onnx's forms those of the others (their centred
        # value is read by its square only), so their order only decides what `ge passes
        # explain` shows first: the common form. The GlobalAveragePool forms at every
        # opset: a tf2onnx export converted to a newer opset keeps its GlobalAveragePools.
        style = self.reduce_mean_opset or opset
        return [*(_layer_norm_pattern(self, bias, variance, form, square, style)
                  for bias, variance, form, square in itertools.product(
                      (True, False), _VARIANCES, ("div", "reciprocal", "one_over"), _SQUARES)
                  if variance == "shared" or square == "mul"),  # torch.var squares with Mul
                *(_tf_layer_norm_pattern(self, offset, pool, divided, style)
                  for offset, pool, divided in itertools.product(
                      _TF_OFFSETS, (False, True), (False, True)))]

    def _plan(self, c: Captures) -> Plan:
        reshaped = "var_reshaped" in c
        x_dims, x_type, k, eps = common_checks(c, ("mean", "var_mean", "var"),
                                         dropping="var" if reshaped else None)
        if reshaped:
            check_restored(c, x_dims, k)
        if all(d == 1 for d in x_dims[len(x_dims) - k:]):
            # nothing to normalise, and onnxruntime 1.21 to 1.23 refuse to run it
            raise Refused("it normalises one element (whose result is the bias): "
                           "onnxruntime 1.21 to 1.23 refuse such a LayerNormalization")
        scaled = c.node("scaled")
        scale = affine(scaled, param_index(scaled, c.io("scale")), c.io("scale"),
                        x_dims, x_type, k)
        bias = None
        if "bias" in c:
            add = c.node("biased" if "biased" in c else "out")
            bias = affine(add, param_index(add, c.io("bias")), c.io("bias"), x_dims, x_type, k)
        return Plan(-k, eps, scale, bias)

    def replacement(  # type: ignore[override]  # expression style: built in place
            self, inputs: PatternInputs, match_result: MatchResult) -> TensorHolder:
        """LayerNormalization of X (input 0) by the scale and bias inputs, or by constants
        broadcast to the normalised shape (`Plan`)."""
        plan = self._plan_of(match_result)
        assert plan is not None  # meet_requirements accepted this match
        builder = inputs[0].get_owner_builder()
        scale = parameter(builder, inputs[1], plan.scale)
        bias = parameter(builder, inputs[2], plan.bias) if plan.bias is not None else None
        y = LayerNormalization(inputs[0], scale, bias, axis=plan.axis, epsilon=plan.epsilon)
        assert isinstance(y, TensorHolder)  # Y alone: Mean and InvStdDev are not asked for
        return y


#: The input forms RMSNormFusion knows: (a Cast before, a Cast back after).
_RMS_CASTS = ((True, True), (True, False), (False, False))


def _rms_pattern(pass_: NormFusion, opset: int, casts: tuple[bool, bool], form: str,
                 square: str) -> Pattern:
    cast_in, cast_out = casts
    name = (f"RMSNorm_{form}_{square}{'_cast_in' if cast_in else ''}"
            f"{'_cast_out' if cast_out else ''}")
    v = _Variant(name, opset)
    x, weight = v.input("x"), v.input("scale")
    data = v.mark("cast_in", Cast(x, to=DataType.DT_FLOAT)) if cast_in else x
    mean_square = v.reduce_mean("mean_square", _squared(v, data, square))
    rms = Sqrt(Add(mean_square, v.const("eps", 1e-6)))
    normed = _normalized(v, data, rms, form)
    if cast_out:
        normed = v.mark("cast_out", Cast(normed, to=DataType.DT_FLOAT))
    out = v.mark("scaled", Mul(normed, weight))
    return v.build(v.mark("out", out), pass_)


def _cast_to(node: Node) -> int | None:
    return int(node.get_attr("to")) if node.has_attr("to") else None


@builtin_pass(name="RMSNormFusion", step="builtin_fusion", requires=("ReduceMean",),
              also_in=("origin_graph_optimize",))
class RMSNormFusion(NormFusion):
    """Fuse a written-out RMS normalisation into RMSNormalization (see the module
    docstring)."""

    MIN_OPSET = RMS_NORM_OPSET

    def patterns(self) -> list[Pattern]:
        opset = _scope_opset()
        if opset < RMS_NORM_OPSET or not onnx.defs.has("RMSNormalization"):
            return []  # no RMSNormalization to fuse into
        # (the casts first: the larger match wins)
        style = self.reduce_mean_opset or opset
        return [_rms_pattern(self, style, *variant) for variant in itertools.product(
            _RMS_CASTS, ("div", "reciprocal", "one_over"), _SQUARES)]

    def _plan(self, c: Captures) -> Plan:
        x_dims, x_type, k, eps = common_checks(c, ("mean_square",))
        x_onnx = data_type_to_onnx(x_type)
        if "cast_in" in c and _cast_to(c.node("cast_in")) not in (onnx.TensorProto.FLOAT,
                                                                  x_onnx):
            raise Refused("the norm is computed in another type than float32 or X's own")
        if "cast_out" in c and _cast_to(c.node("cast_out")) != x_onnx:
            raise Refused("the result is cast to another type than X's")
        scaled = c.node("scaled")
        scale = affine(scaled, param_index(scaled, c.io("scale")), c.io("scale"),
                        x_dims, x_type, k)
        return Plan(-k, eps, scale)

    def replacement(  # type: ignore[override]  # expression style: built in place
            self, inputs: PatternInputs, match_result: MatchResult) -> TensorHolder:
        """RMSNormalization of X (input 0) by the weight input, or by a constant."""
        plan = self._plan_of(match_result)
        assert plan is not None  # meet_requirements accepted this match
        x, weight = inputs[:2]
        y = RMSNormalization(x, parameter(x.get_owner_builder(), weight, plan.scale),
                             axis=plan.axis, epsilon=plan.epsilon, stash_type=1)
        assert isinstance(y, TensorHolder)
        return y
