"""Generators of the fuzzer's models: elementwise operators, linear algebra (MatMul, Gemm,
Conv, BatchNormalization) and normalisations (reductions, Softmax, LayerNorm and Gelu in
primitives), often in a fusable form or a near miss that must not fuse; and operators of
onnxruntime's com.microsoft domain, which ge types through onnxruntime."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from fuzz_builder import (
    BOOL,
    FLOAT,
    INT64,
    MAX_NUMEL,
    Builder,
    Value,
    broadcast,
    broadcast_shape,
)
from onnx import TensorProto

# -- elementwise ----------------------------------------------------------------------------
DISCONTINUOUS = ("Floor", "Ceil", "Round", "Sign")


def g_unary(b: Builder, op: str) -> bool:
    """`op` on a value (Sqrt and Reciprocal mostly of a positive one, so NaN stays rare)."""
    v = b.pick(ok=lambda v: v.exact) if op in DISCONTINUOUS else b.pick()
    if v is None:
        return False
    if op == "Sqrt" and b.chance(0.9):  # else NaN for negative inputs, rarely
        v = b.op("Abs", [v], v.shape)
    elif op == "Reciprocal":
        v = b.op("Add", [b.op("Abs", [v], v.shape), b.scalar(1.0)], v.shape)
    b.op(op, [v], v.shape)
    return True


IDENTITY = {"Add": 0.0, "Sub": 0.0, "Mul": 1.0, "Div": 1.0, "Pow": 1.0}


def g_binary(b: Builder, op: str) -> bool:
    """`op` with broadcasting: of a constant, of another value, or of its identity element
    (a no-op, or not quite when the constant broadcasts the value up); Add/Sub/Mul on ints too."""
    ints = [v for v in b.values if v.dtype == INT64]
    if op in ("Add", "Sub", "Mul") and ints and b.chance(0.2):
        v = b.choice(ints)
        c = b.const(b.rng.integers(-3, 4, size=b.bshape(v.shape)).astype(np.int64))
        b.op(op, [v, c], broadcast_shape(v.shape, c.shape), INT64)
        return True
    a = b.pick(ok=lambda v: v.numel <= MAX_NUMEL // 3)
    if a is None:
        return False
    mode = b.choice(["noop", "const", "const", "value", "value"])
    if op in ("Max", "Min") and mode == "noop":
        mode = "const"
    if op == "Pow" and mode == "value":
        mode = "const"
    other: Value | None = None
    if mode == "noop" and op in IDENTITY:
        shape = b.bshape(a.shape, grow=b.chance(0.2))
        other = b.scalar(IDENTITY[op], shape)
        b.tags[f"{op}:identity-operand{'-grows' if len(shape) > a.rank else ''}"] += 1
    elif mode == "value":
        base = a
        other = b.pick(ok=lambda v: v is not base and broadcast(base.shape, v.shape) is not None)
        if other is not None and op == "Div":
            other = b.op("Add", [b.op("Abs", [other], other.shape), b.scalar(1.0)], other.shape)
    if other is None:
        shape = b.bshape(a.shape, grow=b.chance(0.1))
        if op == "Pow":
            exp = float(b.choice([2.0, 3.0, 1.0, 0.5]))
            if exp == 0.5:
                a = b.op("Abs", [a], a.shape)
            other = (b.const(np.array(int(exp), dtype=np.int64)) if exp != 0.5 and b.chance(0.2)
                     else b.scalar(exp))
        elif op == "Div":
            sign = np.where(b.rng.random(shape) < 0.5, -1.0, 1.0)
            other = b.const((sign * b.rng.uniform(0.5, 2.0, shape)).astype(np.float32),
                            pool=True)
        else:
            other = b.const(b.randn(shape), pool=b.chance(0.5))
    out = broadcast(a.shape, other.shape)
    if out is None:
        return False
    swap = op in ("Add", "Mul", "Max", "Min") and b.chance(0.4)
    b.op(op, [other, a] if swap else [a, other], out)
    return True


def g_reciprocal_mul(b: Builder) -> bool:
    """`x * Reciprocal(s)` or `x * Div(1, s)` (ReciprocalMulFusion), and near misses: a `1`
    that broadcasts `s` up, a 2 instead of a 1, integer division (1 / 3 is 0)."""
    if b.chance(0.15):  # integers: Div(1, s) truncates, nothing to fuse
        ints = [v for v in b.values if v.dtype == INT64]
        if not ints:
            return False
        x = b.choice(ints)
        s = b.const(b.rng.integers(1, 4, size=b.bshape(x.shape)).astype(np.int64))
        inverse = b.op("Div", [b.const(np.array(1, dtype=np.int64)), s], s.shape, INT64)
        b.op("Mul", [x, inverse], broadcast_shape(x.shape, s.shape), INT64)
        b.tags["ReciprocalMul:int"] += 1
        return True
    x = b.pick(ok=lambda v: v.numel <= MAX_NUMEL // 3)
    if x is None:
        return False
    other = b.pick(ok=lambda v: v is not x and broadcast(x.shape, v.shape) is not None)
    shape = other.shape if other is not None else b.bshape(x.shape)
    s = b.op("Add", [b.op("Abs", [other], shape), b.scalar(1.0)], shape) if other is not None \
        else b.const(b.rng.uniform(0.5, 2.0, shape).astype(np.float32))
    form = b.choice(["reciprocal", "one", "one", "one-grows", "two"])
    if form == "reciprocal":
        inverse = b.op("Reciprocal", [s], s.shape)
    else:
        one_shape = b.bshape(s.shape, grow=form == "one-grows")
        inverse_shape = broadcast(one_shape, s.shape)
        if inverse_shape is None:
            return False
        one = b.scalar(2.0 if form == "two" else 1.0, one_shape)
        inverse = b.op("Div", [one, s], inverse_shape)
    out = broadcast(x.shape, inverse.shape)
    if out is None:
        return False
    b.tags[f"ReciprocalMul:{form}"] += 1
    b.op("Mul", [inverse, x] if b.chance(0.4) else [x, inverse], out)
    return True


def g_where(b: Builder) -> bool:
    """Where of a comparison (of an exact value: a rewrite must not flip it) or a pooled bool."""
    x = b.pick(ok=lambda v: v.numel <= MAX_NUMEL // 3)
    if x is None:
        return False
    cond = b.pick(BOOL, ok=lambda v: broadcast(v.shape, x.shape) is not None)
    if cond is None or b.chance(0.5):
        src = b.pick(ok=lambda v: v.exact and broadcast(v.shape, x.shape) is not None)
        if src is None:
            return False
        cmp = b.choice(["Greater", "Less", "Equal", "GreaterOrEqual"])
        cond = b.op(cmp, [src, b.scalar(0.0 if cmp != "Equal" else 1.0)], src.shape, BOOL)
    y = b.pick(ok=lambda v: v is not x and broadcast(v.shape, x.shape, cond.shape) is not None)
    if y is None or b.chance(0.4):
        y = b.const(b.randn(b.bshape(x.shape)))
    shape = broadcast(cond.shape, x.shape, y.shape)
    if shape is None:
        return False
    b.op("Where", [cond, x, y] if b.chance(0.7) else [cond, y, x], shape)
    return True


def g_int(b: Builder) -> bool:
    """Integer arithmetic (Div and Mod of negative numbers included), comparisons and casts."""
    v = b.pick(INT64)
    if v is None:
        return False
    what = b.choice(["cast", "equal", "arith", "divmod", "unary"])
    if what == "cast":
        b.op("Cast", [v], v.shape, to=FLOAT)
    elif what == "equal":
        b.op("Equal", [v, b.const(np.array(1, dtype=np.int64))], v.shape, BOOL)
    elif what == "arith":
        b.op(b.choice(["Add", "Mul", "Sub"]), [v, b.const(np.array(2, dtype=np.int64))],
             v.shape, INT64)
    elif what == "unary":
        b.op(b.choice(["Neg", "Abs", "Sign"]), [v], v.shape, INT64)
    else:  # integer division and modulo of negative numbers: truncation vs floor
        v = b.op("Sub", [v, b.const(np.array(3, dtype=np.int64))], v.shape, INT64)
        d = b.const(np.array(int(b.choice([2, -2, 3])), dtype=np.int64))
        if b.chance(0.5):
            b.op("Div", [v, d], v.shape, INT64)
        else:
            attrs: dict[str, Any] = {"fmod": 1} if b.chance(0.5) else {}
            b.op("Mod", [v, d], v.shape, INT64, **attrs)
    return True


# -- linear algebra -------------------------------------------------------------------------
def g_matmul(b: Builder, bias: bool) -> bool:
    """MatMul of a 1-D, 2-D or batched value by a weight, then (bias) an Add of various
    shapes (MatMulAddFusion) or a BatchNormalization (GemmBatchNormFusion)."""
    a = b.pick(ok=lambda v: v.rank >= 1 and v.numel <= 96)
    if a is None:
        return False
    k, n = a.shape[-1], int(b.rng.integers(1, 6))
    w_shape: tuple[int, ...]
    out: tuple[int, ...]
    if a.rank == 1:
        w_shape, out = (k, n), (n,)
    elif b.chance(0.1):
        w_shape, out = (k,), a.shape[:-1]
    elif a.rank >= 3 and b.chance(0.3):
        w_shape, out = (*a.shape[:-2], k, n), (*a.shape[:-1], n)
    else:
        w_shape, out = (k, n), (*a.shape[:-1], n)
    w = b.pick(ok=lambda v: v.shape == w_shape and v is not a) if b.chance(0.2) else None
    w = w or b.const(b.randn(w_shape, 1 / math.sqrt(k)))
    y = b.op("MatMul", [a, w], out)
    if not bias and len(out) == 2 and b.chance(0.3):  # GemmBatchNormFusion from a MatMul
        batch_norm(b, y, out[1])
    choices = [(out[-1],), (1, out[-1]), out, ()] if out else [()]
    if len(out) == 2:
        choices.append((out[0], 1))
    if len(out) >= 2:
        choices.append((1, 1, out[-1]))
    if bias and out:
        c_shape = b.choice(choices)
        c = b.const(b.randn(c_shape)) if b.chance(0.85) else b.pick(
            ok=lambda v: v.shape == c_shape) or b.const(b.randn(c_shape))
        shape = broadcast_shape(out, c_shape)
        y = b.op("Add", [y, c] if b.chance(0.7) else [c, y], shape)
        if len(shape) == 2 and b.chance(0.25):
            batch_norm(b, y, shape[1])
            return True
    if out and b.chance(0.3):  # Dense + BatchNormalization as tf2onnx writes it
        b.tags["MatMul:mul-add"] += 1
        affine_steps(b, y, choices)
    return True


def g_gemm(b: Builder) -> bool:
    """Gemm with transposes, alpha, beta and a C of every shape that broadcasts, sometimes
    followed by a BatchNormalization; a value of another rank is flattened first."""
    a = b.pick(ok=lambda v: v.rank == 2 and v.numel <= 96)
    if a is None:
        src = b.pick(ok=lambda v: v.rank >= 1 and v.numel <= 96)
        if src is None:
            return False
        axis = int(b.rng.integers(0, src.rank + 1))
        a = b.op("Flatten", [src], (math.prod(src.shape[:axis]), math.prod(src.shape[axis:])),
                 axis=axis)
    trans_a, trans_b = b.chance(0.3), b.chance(0.3)
    m, k = a.shape[::-1] if trans_a else a.shape
    n = int(b.rng.integers(1, 6))
    w = b.const(b.randn((n, k) if trans_b else (k, n), 1 / math.sqrt(k)))
    inputs: list[Value | str] = [a, w]
    attrs: dict[str, Any] = {}
    if trans_a:
        attrs["transA"] = 1
    if trans_b:
        attrs["transB"] = 1
    if b.chance(0.3):
        attrs["alpha"] = float(b.choice([0.5, 1.0, 2.0]))
    if b.chance(0.7):
        inputs.append(b.const(b.randn(b.choice([(n,), (1, n), (m, n), (m, 1), ()]))))
        if b.chance(0.3):
            attrs["beta"] = float(b.choice([0.5, 1.0, 2.0]))
    y = b.op("Gemm", inputs, (m, n), **attrs)
    if b.chance(0.35):
        batch_norm(b, y, n)
    elif b.chance(0.3):  # per feature (GemmAddMulFusion) or not quite
        affine_steps(b, y, [(n,), (1, n), (), (m, 1), (m, n), (1, 1, n)])
    return True


def batch_norm(b: Builder, x: Value, channels: int) -> Value:
    """An inference BatchNormalization of `x` over `channels` with constant statistics."""
    stats = [b.const(b.randn((channels,))), b.const(b.randn((channels,))),
             b.const(b.randn((channels,))),
             b.const(b.rng.uniform(0.5, 2.0, channels).astype(np.float32))]
    attrs: dict[str, Any] = {"epsilon": float(b.choice([1e-5, 1e-3]))}
    if b.opset >= 14 and b.chance(0.3):
        attrs["training_mode"] = 0
    return b.op("BatchNormalization", [x, *stats], x.shape, **attrs)


def g_batchnorm(b: Builder) -> bool:
    """A BatchNormalization of any value of rank >= 2 (folded only when constant)."""
    x = b.pick(ok=lambda v: v.rank >= 2)
    if x is None:
        return False
    batch_norm(b, x, x.shape[1])
    return True


def affine_steps(b: Builder, y: Value, shapes: list[tuple[int, ...]]) -> Value:
    """Mul and Add of `y` by constants, in an order a decomposed BatchNormalization takes
    (or not quite), each constant of a shape from `shapes` (per channel or per feature, or
    not: a near miss) and on either side."""
    for op in b.choice([["Mul", "Add"], ["Add", "Mul"], ["Mul"], ["Add"], ["Mul", "Mul"]]):
        c_shape = b.choice(shapes)
        shape = broadcast(y.shape, c_shape)
        if shape is None:
            continue
        scale = b.const(b.randn(c_shape))
        y = b.op(op, [y, scale] if b.chance(0.7) else [scale, y], shape)
    return y


def conv_input_pad(b: Builder, x: Value) -> Value:
    """Sometimes a Pad before a Conv, as tf2onnx writes Keras' ZeroPadding2D and the "same"
    padding of a strided convolution: zeros on the spatial axes (PadConvFusion), at opset 18
    with axes too; or a near miss: another value, reflect mode, a padded channel."""
    if not b.chance(0.3):
        return x
    rank = x.rank
    kind = b.choice(["zeros", "zeros", "zeros", "value", "reflect", "channel"])
    pads = [0] * (2 * rank)
    for a in range(2, rank):
        pads[a], pads[rank + a] = int(b.rng.integers(0, 3)), int(b.rng.integers(0, 3))
    if kind == "channel":
        pads[1] = 1
    elif kind == "reflect":
        pads = [min(p, x.shape[i % rank] - 1) for i, p in enumerate(pads)]
    shape = [d + pads[i] + pads[rank + i] for i, d in enumerate(x.shape)]
    inputs: list[Value | str] = [x, b.ints(pads)]
    if kind == "value" or b.chance(0.3):
        inputs.append(b.scalar(1.5 if kind == "value" else 0.0))
    if b.opset >= 18 and kind != "channel" and b.chance(0.4):  # the spatial axes only
        axes = list(range(2, rank))
        if b.chance(0.5):
            axes = [a - rank for a in axes]
        inputs[1] = b.ints(pads[2:rank] + pads[rank + 2:])
        inputs += [""] * (3 - len(inputs)) + [b.ints(axes)]
    b.tags[f"Conv:pad-{kind}"] += 1
    return b.op("Pad", inputs, shape, **({"mode": "reflect"} if kind == "reflect" else {}))


def g_conv(b: Builder) -> bool:
    """Conv (grouped, padded, strided, with or without bias, sometimes after a Pad) or
    ConvTranspose, then a BatchNormalization or Mul/Add by constants that vary per channel
    or not (the ConvBatchNorm, ConvAddMul and PadConv fusions)."""
    x = b.pick(ok=lambda v: v.rank in (3, 4) and v.numel <= 160)
    if x is None:
        return False
    transposed = b.chance(0.2)
    if not transposed:
        x = conv_input_pad(b, x)
    c, spatial = x.shape[1], x.shape[2:]
    group = c if c > 1 and b.chance(0.25) else 1
    m = c * int(b.rng.integers(1, 3)) if group > 1 else int(b.rng.integers(1, 5))
    k = int(b.rng.integers(1, min(3, min(spatial)) + 1))
    pad = int(b.rng.integers(0, k)) if k > 1 else 0
    stride = int(b.choice([1, 1, 2]))
    rank = len(spatial)
    scale = 1 / math.sqrt(k * k * c)
    if transposed:  # W is [C_in, M / group, k...]; a pad crops: at most (k - 1) / 2 of it
        pad = min(pad, (k - 1) // 2)
        out = [(d - 1) * stride - 2 * pad + k for d in spatial]
        w = b.const(b.randn((c, m // group, *[k] * rank), scale))
    else:
        out = [(d + 2 * pad - k) // stride + 1 for d in spatial]
        w = b.const(b.randn((m, c // group, *[k] * rank), scale))
    inputs: list[Value | str] = [x, w]
    if b.chance(0.5):
        inputs.append(b.const(b.randn((m,))))
    attrs: dict[str, Any] = {}
    if pad:
        attrs["pads"] = [pad] * (2 * rank)
    if stride > 1:
        attrs["strides"] = [stride] * rank
    if group > 1:
        attrs["group"] = group
    if b.chance(0.5):
        attrs["kernel_shape"] = [k] * rank
    y = b.op("ConvTranspose" if transposed else "Conv", inputs, (x.shape[0], m, *out), **attrs)
    after = b.rng.random()
    if after < 0.5:
        batch_norm(b, y, m)
    elif after < 0.8:  # per-channel (or not quite) Mul / Add: ConvAddMulFusion
        affine_steps(b, y, [(m, *[1] * rank), (1, m, *[1] * rank), (), (1,), (m,), (out[-1],),
                            (1, 1, *out), (2, m, *[1] * rank)])
    return True


# -- normalisations -------------------------------------------------------------------------
def g_reduce(b: Builder, op: str) -> bool:
    """`op` over some axes (attribute or input per opset), keepdims or not, or the no-op
    form: empty axes with noop_with_empty_axes."""
    x = b.pick(ok=lambda v: v.rank >= 1)
    if x is None:
        return False
    r = x.rank
    keep = int(b.chance(0.6))
    attr_before = 13 if op == "ReduceSum" else 18
    if b.opset >= attr_before and b.chance(0.1):  # empty axes with noop_with_empty_axes=1
        b.op(op, [x, b.ints([])], x.shape, noop_with_empty_axes=1)
        b.tags[f"{op}:noop-empty-axes"] += 1
        return True
    if b.chance(0.15):
        axes, chosen = None, set(range(r))
    else:
        chosen = {int(a) for a in b.rng.choice(r, int(b.rng.integers(1, r + 1)), replace=False)}
        axes = [a - r if b.chance(0.3) else a for a in sorted(chosen)]
    extra, attrs = b.axes_arg(op, axes, attr_before)
    shape = [1 if i in chosen else d for i, d in enumerate(x.shape) if keep or i not in chosen]
    b.op(op, [x, *extra], shape, keepdims=keep, **attrs)
    return True


def g_softmax(b: Builder) -> bool:
    """Softmax over a random axis."""
    x = b.pick(ok=lambda v: v.rank >= 1)
    if x is None:
        return False
    b.op("Softmax", [x], x.shape, axis=int(b.rng.integers(-x.rank, x.rank)))
    return True


def g_layernorm(b: Builder) -> bool:
    """LayerNorm in primitives (LayerNormFusion), in its variants and near misses (the
    Sub reversed, another exponent, another X) that must not fuse."""
    x = b.pick(ok=lambda v: v.rank >= 1 and v.shape[-1] >= 2)
    if x is None:
        return False
    k = 2 if x.rank >= 2 and b.chance(0.3) else 1
    axes = list(range(-k, 0)) if b.chance(0.5) else list(range(x.rank - k, x.rank))
    red = (*x.shape[:-k], *[1] * k)
    normed = x.shape[-k:]
    # A row of equal values has a variance of 0 and its normalisation magnifies rounding by
    # 1/sqrt(eps): any rewrite then changes the numbers. A spread added first prevents that.
    spread = np.linspace(-2, 2, math.prod(normed), dtype=np.float32).reshape(normed)
    x = b.op("Add", [x, b.const(b.rng.permutation(spread.ravel()).reshape(normed))], x.shape)
    shared = b.axes_arg("ReduceMean", axes, 18)

    def mean(v: Value) -> Value:
        extra, attrs = shared if b.chance(0.5) else b.axes_arg("ReduceMean", axes, 18)
        return b.op("ReduceMean", [v, *extra], red, keepdims=1, **attrs)

    miss = b.choice(["none"] * 6 + ["sub-order", "int-exponent", "exponent-4", "other-x"])
    b.tags[f"LayerNorm:variant-{miss}"] += 1
    m = mean(x)
    other = b.pick(ok=lambda v: v.shape == x.shape and v is not x) if miss == "other-x" else None
    d = b.op("Sub", [m, x] if miss == "sub-order" else [other or x, m], x.shape)
    exponent = (b.const(np.array(2, dtype=np.int64)) if miss == "int-exponent"
                else b.scalar(4.0 if miss == "exponent-4" else 2.0))
    var = mean(b.op("Pow", [d, exponent], x.shape))
    std = b.op("Sqrt", [b.op("Add", [var, b.scalar(float(b.choice([1e-5, 1e-4])))],
                              red)], red)
    if b.chance(0.75):
        n = b.op("Div", [d, std], x.shape)
    else:
        n = b.op("Mul", [d, b.op("Reciprocal", [std], red)], x.shape)
    g_shape = normed if b.chance(0.7) else (1, *normed)
    y = b.op("Mul", [n, b.const(b.randn(g_shape))], broadcast_shape(x.shape, g_shape))
    if b.chance(0.8):
        b.op("Add", [y, b.const(b.randn(normed))], y.shape)
    b.tags["LayerNorm:pattern"] += 1
    return True


def g_gelu(b: Builder) -> bool:
    """GELU in its Erf form, in the three orderings of the product (GeluFusion), and near
    misses (wrong constants, a 0.5 that broadcasts, Div by 2) that must not fuse."""
    x = b.pick()
    if x is None:
        return False
    miss = b.choice(["none"] * 5 + ["mul-sqrt2", "half-0.6", "half-wide", "div-2"])
    b.tags[f"Gelu:variant-{miss}"] += 1
    if miss == "mul-sqrt2":
        s = b.op("Mul", [x, b.scalar(1.4142135)], x.shape)
    elif b.chance(0.5):
        s = b.op("Div", [x, b.scalar(1.4142135)], x.shape)
    else:
        s = b.op("Mul", [x, b.scalar(0.70710677)], x.shape)
    t = b.op("Add", [b.op("Erf", [s], x.shape), b.scalar(1.0)], x.shape)
    h_shape = (1,) * (x.rank + 1) if miss == "half-wide" else b.choice([(), (1,)])
    half = b.scalar(0.6 if miss == "half-0.6" else 0.5, h_shape)
    y_shape = broadcast_shape(x.shape, h_shape)
    order = int(b.rng.integers(3))
    if miss == "div-2":
        b.op("Div", [b.op("Mul", [x, t], x.shape), b.scalar(2.0)], x.shape)
    elif order == 0:
        b.op("Mul", [b.op("Mul", [x, half], y_shape), t], y_shape)
    elif order == 1:
        b.op("Mul", [b.op("Mul", [x, t], x.shape), half], y_shape)
    else:
        b.op("Mul", [x, b.op("Mul", [half, t], y_shape)], y_shape)
    b.tags["Gelu:pattern"] += 1
    return True


def g_silu(b: Builder) -> bool:
    """SiLU, x * Sigmoid(x) or x * Sigmoid(a * x) (SwishFusion at opset 24), and near
    misses: Sigmoid of another value, an `a` that broadcasts x up."""
    x = b.pick()
    if x is None:
        return False
    miss = b.choice(["none"] * 4 + ["scaled", "scaled", "other", "a-wide"])
    b.tags[f"SiLU:{miss}"] += 1
    gate = x
    if miss in ("scaled", "a-wide"):
        shape = (1,) * (x.rank + 1) if miss == "a-wide" else b.choice([(), (1,)])
        a = b.scalar(float(b.choice([1.702, 0.5, 1.0])), shape)
        gate = b.op("Mul", [a, x] if b.chance(0.5) else [x, a], broadcast_shape(x.shape, shape))
    elif miss == "other":
        other = b.pick(ok=lambda v: v is not x and v.shape == x.shape)
        if other is None:
            return False
        gate = other
    s = b.op("Sigmoid", [gate], gate.shape)
    out = broadcast_shape(x.shape, s.shape)
    b.op("Mul", [s, x] if b.chance(0.5) else [x, s], out)
    return True


def g_rmsnorm(b: Builder) -> bool:
    """RMSNorm in primitives (RMSNormFusion at opset 23), sometimes between Casts as in T5
    and Llama exports (of a float16 value, or no-op ones of a float), and near misses (eps
    not a constant, another exponent, axes not the last) that must not fuse.

    onnxruntime's CPU provider computes float16 arithmetic in float and drops a Cast pair
    float -> float16 -> float, so the float16 form feeds values exact in float16, scales by
    powers of two and makes its float16 result a graph output: rounded once either way."""
    x = b.pick(ok=lambda v: v.rank >= 1 and v.shape[-1] >= 2)
    if x is None:
        return False
    miss = b.choice(["none"] * 6 + ["eps-computed", "exponent-3", "axes-not-last"])
    cast = b.choice(["none", "none", "float", "float16"])
    if cast == "float16" and b.scopes:  # a body's value cannot be a graph output
        cast = "float"
    k = 2 if x.rank >= 2 and b.chance(0.3) else 1
    axes = list(range(-k, 0)) if b.chance(0.5) else list(range(x.rank - k, x.rank))
    if miss == "axes-not-last" and (x.rank < 2 or x.shape[0] == 1):
        miss = "none"
    if miss == "axes-not-last":
        k, axes = 0, [0]
    b.tags[f"RMSNorm:variant-{miss}"] += 1
    b.tags[f"RMSNorm:cast-{cast}"] += 1
    red = tuple(1 if (i in axes or i - x.rank in axes) else d for i, d in enumerate(x.shape))
    normed = x.shape[-k:] if k else x.shape[1:]
    half = TensorProto.FLOAT16
    if cast == "float16":  # multiples of 1/64 in [-8, 8]: exact in float16
        x = b.op("Clip", [x, b.scalar(-8.0), b.scalar(8.0)], x.shape)
        x = b.op("Div", [b.op("Round", [b.op("Mul", [x, b.scalar(64.0)], x.shape)], x.shape),
                         b.scalar(64.0)], x.shape)
        x = b.op("Cast", [x], x.shape, half, to=half)
    xc = b.op("Cast", [x], x.shape, to=FLOAT) if cast != "none" else x
    exponent = b.scalar(3.0 if miss == "exponent-3" else 2.0)
    extra, attrs = b.axes_arg("ReduceMean", axes, 18)
    ms = b.op("ReduceMean", [b.op("Pow", [xc, exponent], x.shape), *extra], red, keepdims=1,
              **attrs)
    if miss == "exponent-3":
        ms = b.op("Abs", [ms], red)
    eps_value = float(b.choice([1e-6, 1e-5, 1e-3]))
    if miss == "eps-computed":  # eps computed from a value: not a constant
        src = b.pick()
        eps = b.op("Mul", [b.op("Abs", [b.op("ReduceMax", [src], (), keepdims=0)], ()),
                           b.scalar(eps_value)], ()) if src is not None else b.scalar(eps_value)
    else:
        eps = b.scalar(eps_value, b.choice([(), (), (1,)]))
    rms = b.op("Sqrt", [b.op("Add", [ms, eps] if b.chance(0.7) else [eps, ms],
                              broadcast_shape(red, eps.shape))], red)
    form = b.choice(["div", "div", "reciprocal", "one-over"])
    b.tags[f"RMSNorm:form-{form}"] += 1
    if form == "div":
        n = b.op("Div", [xc, rms], x.shape)
    elif form == "reciprocal":
        n = b.op("Mul", [xc, b.op("Reciprocal", [rms], red)], x.shape)
    else:
        n = b.op("Mul", [b.op("Div", [b.scalar(1.0), rms], red), xc], x.shape)
    out_type = half if cast == "float16" else FLOAT
    if cast != "none" and b.chance(0.8):
        n = b.op("Cast", [n], x.shape, out_type, to=out_type)
    else:
        out_type = FLOAT
    w_shape = normed if b.chance(0.8) else (1, *normed)
    if out_type == half:  # powers of two: the product is exact, rounded once or twice
        signs = np.where(b.rng.random(w_shape) < 0.5, -1.0, 1.0)
        weight = b.const((signs * 2.0 ** b.rng.integers(-1, 2, w_shape)).astype(np.float16))
    else:
        weight = b.const(b.randn(w_shape))
    y = b.op("Mul", [n, weight] if b.chance(0.7) else [weight, n],
             broadcast_shape(x.shape, w_shape), out_type)
    if out_type == half:
        b.outputs.append(y)
    b.tags["RMSNorm:pattern"] += 1
    return True


# -- onnxruntime's own operators ------------------------------------------------------------
MS = "com.microsoft"


def g_contrib(b: Builder) -> bool:
    """An operator of com.microsoft (ge types it by asking onnxruntime): FusedMatMul with
    transposes and alpha, BiasGelu, FastGelu, QuickGelu, com.microsoft Gelu, or
    SkipLayerNormalization with its optional outputs present or absent."""
    kind = b.choice(["FusedMatMul", "BiasGelu", "FastGelu", "QuickGelu", "Gelu",
                     "SkipLayerNormalization"])
    ranks = {"FusedMatMul": (2, 3, 4), "SkipLayerNormalization": (2, 3)}.get(kind, (1, 2, 3, 4))
    x = b.pick(ok=lambda v: v.rank in ranks and v.numel <= 96)
    if x is None:
        return False
    last = x.shape[-1]
    b.tags[f"contrib:{kind}"] += 1
    if kind == "FusedMatMul":
        trans_a, trans_b = bool(b.chance(0.3)), bool(b.chance(0.5))
        rows, k = (x.shape[-1], x.shape[-2]) if trans_a else (x.shape[-2], x.shape[-1])
        n = int(b.rng.integers(1, 6))
        w = b.const(b.randn((n, k) if trans_b else (k, n), 1 / math.sqrt(k)))
        alpha = float(b.choice([1.0, 0.5, 0.125]))
        b.op(kind, [x, w], (*x.shape[:-2], rows, n), domain=MS, alpha=alpha,
             transA=int(trans_a), transB=int(trans_b))
    elif kind in ("BiasGelu", "FastGelu"):
        bias = b.const(b.randn((last,)))
        b.op(kind, [x, bias] if kind == "BiasGelu" or b.chance(0.7) else [x], x.shape, domain=MS)
    elif kind == "QuickGelu":
        b.op(kind, [x], x.shape, domain=MS, alpha=float(b.choice([1.702, 1.0])))
    elif kind == "Gelu":
        b.op(kind, [x], x.shape, domain=MS)
    else:
        skip = b.pick(ok=lambda v: v.shape == x.shape and v is not x) or b.const(b.randn(x.shape))
        gamma, beta = b.const(b.randn((last,))), b.const(b.randn((last,)))
        with_sum = b.chance(0.5)
        outs = [(FLOAT, x.shape), (FLOAT, ()), (FLOAT, ()), (FLOAT, x.shape)]
        results = b.emit(kind, [x, skip, gamma, beta], outs, pool=False, domain=MS,
                         epsilon=1e-5)
        node = b.nodes[-1]
        del node.output[4 if with_sum else 1:]  # the mean and inverse std dev: absent
        if with_sum:
            node.output[1] = node.output[2] = ""
        b.values.extend(results[0:1] + (results[3:4] if with_sum else []))
    return True
