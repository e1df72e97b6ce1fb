"""Generators of the fuzzer's models: layout operators (Reshape, Transpose, Squeeze,
Unsqueeze, Flatten, Expand, Tile, Slice, Concat, Split, Pad), casts, identities, and
Clip, ArgMax, Shape and Gather, often in a no-op form that `NoOpElimination` or a chain
simplification must remove, or one that looks like it and must stay."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from fuzz_builder import (
    BOOL,
    FLOAT,
    INT64,
    INT_MAX,
    INT_MIN,
    MAX_NUMEL,
    Builder,
    Value,
    broadcast,
    factorise,
)
from onnx import TensorProto, numpy_helper


# -- layout ---------------------------------------------------------------------------------
def g_reshape(b: Builder) -> bool:
    """Reshape (or two in a row) to the same shape, to another factorisation with 0 and
    -1 entries, or to the Shape of another value of the same size."""
    x = b.pick(ok=lambda v: v.rank >= 1)
    if x is None:
        return False
    for _ in range(int(b.rng.integers(1, 3))):  # sometimes a chain of two
        if b.chance(0.25):
            target = list(x.shape)
            b.tags["Reshape:same-shape"] += 1
        else:
            target = factorise(b.rng, x.numel, int(b.rng.integers(1, 5)))
        def same_size(v: Value, src: Value = x) -> bool:
            return v.numel == src.numel and v is not src and v.rank >= 1

        same = b.pick(ok=same_size)
        if same is not None and b.chance(0.15):
            shape_in: Value = b.op("Shape", [same], (same.rank,), INT64, pool=False)
            target = list(same.shape)
            b.tags["Reshape:shape-of-value"] += 1
        else:
            spec = list(target)
            for i in range(min(len(spec), x.rank)):
                if spec[i] == x.shape[i] and b.chance(0.2):
                    spec[i] = 0
            if b.chance(0.3):
                spec[int(b.rng.integers(len(spec)))] = -1
            shape_in = b.ints(spec)
        x = b.op("Reshape", [x, shape_in], target)
    return True


def g_transpose(b: Builder) -> bool:
    """Transpose by a random perm, the identity, no perm, or followed by its inverse."""
    x = b.pick(ok=lambda v: v.rank >= 1)
    if x is None:
        return False
    r = b.rng.random()
    if r < 0.2:
        perm = list(range(x.rank))
        b.tags["Transpose:identity"] += 1
    elif r < 0.3:
        b.op("Transpose", [x], x.shape[::-1])
        b.tags["Transpose:no-perm"] += 1
        return True
    else:
        perm = [int(p) for p in b.rng.permutation(x.rank)]
    y = b.op("Transpose", [x], [x.shape[p] for p in perm], perm=perm)
    if b.chance(0.25):  # its inverse right after: the chain cancels
        inv = [int(p) for p in np.argsort(perm)]
        b.op("Transpose", [y], x.shape, perm=inv)
        b.tags["Transpose:inverse-pair"] += 1
    return True


def g_unsqueeze(b: Builder) -> bool:
    """Unsqueeze at random axes (negative too), sometimes followed by the Squeeze undoing it."""
    x = b.pick(ok=lambda v: v.rank <= 3)
    if x is None:
        return False
    out_rank = x.rank + int(b.rng.integers(1, 3))
    axes = sorted(int(a) for a in b.rng.choice(out_rank, out_rank - x.rank, replace=False))
    dims = iter(x.shape)
    shape = [1 if i in axes else next(dims) for i in range(out_rank)]
    spec = [a - out_rank if b.chance(0.3) else a for a in axes]
    y = b.op("Unsqueeze", [x, b.ints(spec)], shape)
    if b.chance(0.35):
        b.op("Squeeze", [y, b.ints(axes)], x.shape)
        b.tags["Unsqueeze:squeeze-pair"] += 1
    return True


def g_squeeze(b: Builder) -> bool:
    """Squeeze of some 1-dims, or of all (no axes), sometimes undone by an Unsqueeze."""
    x = b.pick(ok=lambda v: 1 in v.shape)
    if x is None:
        return False
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    if b.chance(0.25):
        b.op("Squeeze", [x], [d for d in x.shape if d != 1])
        b.tags["Squeeze:no-axes"] += 1
        return True
    axes = sorted(int(a) for a in b.rng.choice(ones, int(b.rng.integers(1, len(ones) + 1)),
                                               replace=False))
    shape = [d for i, d in enumerate(x.shape) if i not in axes]
    y = b.op("Squeeze", [x, b.ints([a - x.rank if b.chance(0.3) else a for a in axes])], shape)
    if b.chance(0.3):
        b.op("Unsqueeze", [y, b.ints(axes)], x.shape)
        b.tags["Squeeze:unsqueeze-pair"] += 1
    return True


def g_flatten(b: Builder) -> bool:
    """Flatten at a random axis, 0 and the rank included."""
    x = b.pick(ok=lambda v: v.rank >= 1)
    if x is None:
        return False
    axis = int(b.rng.integers(-x.rank, x.rank + 1))
    a = axis % x.rank if axis < 0 else axis
    b.op("Flatten", [x], (math.prod(x.shape[:a]), math.prod(x.shape[a:])), axis=axis)
    return True


def g_expand(b: Builder) -> bool:
    """Expand to the same shape, to a shape of ones (also a no-op), or growing the value."""
    x = b.pick(ok=lambda v: v.numel <= MAX_NUMEL // 4)
    if x is None:
        return False
    r = b.rng.random()
    if r < 0.3:
        spec, tag = list(x.shape), "same-shape"
    elif r < 0.45:
        spec, tag = [1] * int(b.rng.integers(0, x.rank + 1)), "ones"
    else:
        spec = [int(b.rng.integers(2, 4)) if d == 1 and b.chance(0.5) else d for d in x.shape]
        if b.chance(0.4):
            spec = [int(b.rng.integers(1, 3)), *spec]
        tag = "grows"
    shape = broadcast(x.shape, tuple(spec))
    if shape is None:
        return False
    b.tags[f"Expand:{tag}"] += 1
    b.op("Expand", [x, b.ints(spec)], shape)
    return True


def g_tile(b: Builder) -> bool:
    """Tile by ones (a no-op) or by small repeats."""
    x = b.pick(ok=lambda v: v.rank >= 1 and v.numel <= MAX_NUMEL // 4)
    if x is None:
        return False
    if b.chance(0.35):
        reps = [1] * x.rank
        b.tags["Tile:ones"] += 1
    else:
        reps = [int(b.rng.integers(1, 3)) for _ in x.shape]
    b.op("Tile", [x, b.ints(reps)], [d * t for d, t in zip(x.shape, reps)])
    return True


def g_slice(b: Builder) -> bool:
    """Slice covering everything (a no-op) or random starts, ends and steps (negative,
    clamped, INT64 extremes), with axes and steps inputs present or not."""
    x = b.pick(ok=lambda v: v.rank >= 1)
    if x is None:
        return False
    if b.chance(0.25):  # covers everything
        axes = list(range(x.rank))
        starts, ends, steps = [0] * x.rank, [b.choice([INT_MAX, d]) for d in x.shape], [1] * x.rank
        b.tags["Slice:covers-all"] += 1
    else:
        for _ in range(20):
            axes = sorted(int(a) for a in b.rng.choice(x.rank, int(b.rng.integers(1, x.rank + 1)),
                                                       replace=False))
            starts, ends, steps = [], [], []
            for a in axes:
                d = x.shape[a]
                step = int(b.choice([1, 1, 1, 2, -1]))
                lo, hi = int(b.rng.integers(-d - 1, d + 2)), int(b.rng.integers(-d - 1, d + 2))
                if step < 0 and b.chance(0.3):
                    lo, hi = -1, INT_MIN
                starts.append(lo)
                ends.append(hi)
                steps.append(step)
            if all(len(range(x.shape[a])[slice(s, e, st)])
                   for a, s, e, st in zip(axes, starts, ends, steps)):
                break
        else:
            return False
    shape = list(x.shape)
    for a, s, e, st in zip(axes, starts, ends, steps):
        shape[a] = len(range(x.shape[a])[slice(s, e, st)])
    if any(d == 0 for d in shape):
        return False
    inputs: list[Value | str] = [x, b.ints(starts), b.ints(ends)]
    if axes != list(range(x.rank)) or b.chance(0.5) or steps != [1] * len(axes):
        inputs.append(b.ints([a - x.rank if b.chance(0.3) else a for a in axes]))
        if steps != [1] * len(axes) or b.chance(0.5):
            inputs.append(b.ints(steps))
    b.op("Slice", inputs, shape)
    return True


def g_slice_pieces(b: Builder) -> bool:
    """A value cut along one axis into consecutive pieces by Slices (SliceSplitFusion), in
    the written forms (negative bounds, INT64_MAX ends, axes input present or not, a third
    Slice across the others), and near misses (a gap, an overlap, a step of 2)."""
    x = b.pick(ok=lambda v: v.rank >= 1 and max(v.shape) >= 2)
    if x is None:
        return False
    axis = b.choice([a for a in range(x.rank) if x.shape[a] >= 2])
    d = x.shape[axis]
    cuts = sorted(int(c) for c in b.rng.choice(np.arange(1, d), size=int(
        b.rng.integers(1, min(d - 1, 3) + 1)), replace=False))
    bounds = list(zip([0, *cuts], [*cuts, d]))
    miss = b.choice(["none", "none", "none", "gap", "overlap", "step", "across"])
    if miss == "gap" and len(bounds) >= 2 and bounds[0][1] - bounds[0][0] >= 2:
        bounds[0] = (bounds[0][0], bounds[0][1] - 1)
    elif miss == "overlap" and len(bounds) >= 2:
        bounds[1] = (bounds[1][0] - 1, bounds[1][1])
    elif miss == "across":
        bounds.append((max(0, cuts[0] - 1), min(d, cuts[0] + 1)))
    b.tags[f"SlicePieces:{miss}"] += 1
    pieces = []
    for lo, hi in bounds:
        start = lo - d if lo and b.chance(0.3) else lo
        end = INT_MAX if hi == d and b.chance(0.5) else (hi - d if hi < d and b.chance(0.3)
                                                          else hi)
        inputs: list[Value | str] = [x, b.ints([start]), b.ints([end])]
        step = 2 if miss == "step" and not pieces else 1
        if axis != 0 or step != 1 or b.chance(0.5):
            inputs.append(b.ints([axis - x.rank if b.chance(0.3) else axis]))
            if step != 1 or b.chance(0.3):
                inputs.append(b.ints([step]))
        shape = list(x.shape)
        shape[axis] = len(range(d)[start:end:step])
        pieces.append(b.op("Slice", inputs, shape))
    if b.chance(0.5):  # rotate_half: the pieces put back in another order
        total = sum(p.shape[axis] for p in pieces)
        b.op("Concat", pieces[::-1], [total if a == axis else n for a, n in enumerate(x.shape)],
             axis=axis)
    return True


def g_concat(b: Builder) -> bool:
    """Concat of one input (a no-op), of a value with itself, or with values and constants."""
    x = b.pick(ok=lambda v: v.rank >= 1 and v.numel <= MAX_NUMEL // 3)
    if x is None:
        return False
    axis = int(b.rng.integers(x.rank))
    parts = [x]
    form = b.rng.random()
    if form < 0.2:
        b.tags["Concat:one-input"] += 1
    elif form < 0.4:
        parts = [x, x]
    else:
        for _ in range(int(b.rng.integers(1, 3))):
            shape = list(x.shape)
            shape[axis] = int(b.rng.integers(1, 4))
            want = tuple(shape)
            same = b.pick(ok=lambda v: v.shape == want and v is not x)  # noqa: B023 - used now
            parts.append(same if same is not None and b.chance(0.5)
                         else b.const(b.randn(shape), pool=b.chance(0.3)))
        if b.chance(0.3):
            parts = parts[::-1]
    shape = list(x.shape)
    shape[axis] = sum(p.shape[axis] for p in parts)
    b.op("Concat", parts, shape, axis=axis - x.rank if b.chance(0.3) else axis)
    return True


def g_split(b: Builder) -> bool:
    """Split by sizes, into equal parts, by num_outputs (opset 18) or into one output."""
    x = b.pick(ok=lambda v: any(d >= 2 for d in v.shape))
    if x is None:
        return False
    axis = b.choice([i for i, d in enumerate(x.shape) if d >= 2])
    d = x.shape[axis]
    n = int(b.rng.integers(2, min(d, 3) + 1))
    inputs: list[Value | str] = [x]
    attrs: dict[str, Any] = {"axis": axis - x.rank if b.chance(0.3) else axis}
    if b.chance(0.5):
        cuts = sorted(int(c) for c in b.rng.choice(np.arange(1, d), n - 1, replace=False))
        sizes = [e - s for s, e in zip([0, *cuts], [*cuts, d])]
        inputs.append(b.ints(sizes))
    elif b.opset >= 18:
        size = -(-d // n)
        if size * (n - 1) >= d:
            n = 2
            size = -(-d // n)
        sizes = [size] * (n - 1) + [d - size * (n - 1)]
        attrs["num_outputs"] = n
    elif d % n == 0:
        sizes = [d // n] * n
    else:
        sizes = [d]  # a Split into one output: the value itself
        b.tags["Split:one-output"] += 1
    outs = []
    for s in sizes:
        shape = list(x.shape)
        shape[axis] = s
        outs.append((FLOAT, tuple(shape)))
    b.emit("Split", inputs, outs, **attrs)
    return True


def g_pad(b: Builder) -> bool:
    """Pad by zeros (a no-op) or not, in constant, edge or reflect mode, with axes at 18."""
    x = b.pick(ok=lambda v: v.rank >= 1 and v.numel <= MAX_NUMEL // 4)
    if x is None:
        return False
    mode = b.choice(["constant", "constant", "edge", "reflect"])
    zero = b.chance(0.3)
    axes = list(range(x.rank))
    if b.opset >= 18 and b.chance(0.3):
        axes = sorted(int(a) for a in b.rng.choice(x.rank, int(b.rng.integers(1, x.rank + 1)),
                                                   replace=False))
    pads = [0 if zero else int(b.rng.integers(0, 3)) for _ in range(2 * len(axes))]
    if mode == "reflect":
        pads = [min(p, x.shape[a] - 1) for p, a in zip(pads, axes + axes)]
    if not any(pads):
        b.tags["Pad:zeros"] += 1
    shape = list(x.shape)
    for i, a in enumerate(axes):
        shape[a] += pads[i] + pads[i + len(axes)]
    inputs: list[Value | str] = [x, b.ints(pads)]
    if mode == "constant" and b.chance(0.5):
        inputs.append(b.scalar(float(b.choice([0.0, 1.5]))))
    if axes != list(range(x.rank)):
        inputs += [""] * (3 - len(inputs)) + [b.ints(axes)]
    b.op("Pad", inputs, shape, **({} if mode == "constant" and b.chance(0.5) else {"mode": mode}))
    return True


def g_cast(b: Builder) -> bool:
    """Casts to the same type (a no-op) and chains that are exact or not (CastChain
    simplification); lossy ones only of exact values, so that an ulp cannot change them."""
    r = b.rng.random()
    src = b.pick(BOOL) if r < 0.1 else b.pick(INT64) if r < 0.2 else None
    if src is not None:
        b.op("Cast", [src], src.shape, to=FLOAT)
        return True
    d, h, i32 = TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.INT32
    x = b.pick(ok=lambda v: v.exact) if b.chance(0.6) else b.pick()
    if x is None:
        return False
    chain = b.choice([[FLOAT], [d, FLOAT], [h, FLOAT], [INT64, FLOAT], [INT64], [BOOL], [d],
                      [BOOL, FLOAT], [d, h, FLOAT], [h, d, FLOAT], [FLOAT, FLOAT], [i32, d, FLOAT],
                      [INT64, d, FLOAT], [d, INT64], [TensorProto.UINT8, FLOAT], [h, h, FLOAT],
                      [TensorProto.INT8, TensorProto.INT32, FLOAT]])
    if not x.exact:  # a cast that rounds to fewer bits would magnify ulps
        chain = [t for t in chain if t in (FLOAT, d)] or [FLOAT]
    if chain[0] == TensorProto.UINT8:  # no negative values: their cast is undefined
        x = b.op("Abs", [x], x.shape)
    elif chain[0] in (INT64, i32) and b.chance(0.4):  # larger values, negative fractions
        x = b.op("Mul", [x, b.scalar(float(b.choice([3.7, 100.0])))], x.shape)
    b.tags["Cast:" + ">".join(TensorProto.DataType.Name(t).lower() for t in chain)] += 1
    for to in chain:
        x = b.op("Cast", [x], x.shape, to, pool=to in (FLOAT, INT64, BOOL), to=to)
    return True


def g_identity(b: Builder, op: str) -> bool:
    """Identity, or Dropout in inference (ratio and training_mode inputs, a mask output)."""
    x = b.pick()
    if x is None:
        return False
    if op == "Identity":
        b.op("Identity", [x], x.shape)
        return True
    inputs: list[Value | str] = [x]
    if b.chance(0.5):
        inputs.append(b.scalar(float(b.choice([0.0, 0.5]))))
        if b.chance(0.5):
            inputs.append(b.const(np.array(False)))
    outs = [(FLOAT, x.shape)]
    if b.chance(0.3):
        outs.append((BOOL, x.shape))
        b.tags["Dropout:mask"] += 1
    b.emit("Dropout", inputs, outs)
    return True


def g_clip(b: Builder) -> bool:
    """Clip with both bounds, one of them (the other an empty input) or none."""
    x = b.pick()
    if x is None:
        return False
    lo, hi = sorted(float(t) for t in b.rng.standard_normal(2))
    inputs: list[Value | str] = [x]
    form = b.choice(["both", "min", "max", "none"])
    if form != "none":
        inputs += [b.scalar(lo) if form != "max" else "", b.scalar(hi) if form != "min" else ""]
    b.op("Clip", inputs, x.shape)
    return True


def g_argmax(b: Builder) -> bool:
    """ArgMax/ArgMin of an exact value (ties decided by select_last_index), cast to float."""
    x = b.pick(ok=lambda v: v.rank >= 1 and v.exact)
    if x is None:
        return False
    axis = int(b.rng.integers(x.rank))
    keep = b.chance(0.5)
    shape = [1 if i == axis else d for i, d in enumerate(x.shape) if keep or i != axis]
    attrs: dict[str, Any] = {"axis": axis - x.rank if b.chance(0.3) else axis,
                                "keepdims": int(keep)}
    if b.chance(0.3):
        attrs["select_last_index"] = 1
    if b.chance(0.5):  # ties, which the index rule decides
        x = b.op("Round", [x], x.shape)
    y = b.op(b.choice(["ArgMax", "ArgMin"]), [x], shape, INT64, **attrs)
    b.op("Cast", [y], y.shape, to=FLOAT)
    return True


def g_shape(b: Builder) -> bool:
    """Shape (with start at opset 15), Size, ConstantOfShape and Expand to a Shape: the
    shape computations constant folding resolves on static shapes."""
    x = b.pick(ok=lambda v: v.rank >= 1)
    if x is None:
        return False
    what = b.choice(["constant_of_shape", "size", "expand", "shape_slice"])
    if what == "shape_slice" and b.opset >= 15:
        s = b.op("Shape", [x], (x.rank - 1,), INT64, pool=False, start=1) if x.rank > 1 else None
        if s is not None:
            b.op("Cast", [s], s.shape, to=FLOAT)
            return True
    if what == "size":
        n = b.op("Cast", [b.op("Size", [x], (), INT64, pool=False)], (), to=FLOAT)
        b.op("Mul", [x, n], x.shape)
        return True
    s = b.op("Shape", [x], (x.rank,), INT64, pool=False)
    if what == "expand":
        y = b.pick(ok=lambda v: broadcast(v.shape, x.shape) == x.shape)
        if y is not None:
            b.op("Expand", [y, s], x.shape)
            return True
    value = numpy_helper.from_array(np.array([b.choice([0.0, 1.0, 2.5])], dtype=np.float32))
    b.op("ConstantOfShape", [s], x.shape, value=value)
    return True


def g_gather(b: Builder) -> bool:
    """Gather by the int64 input or by constant (negative too) indices."""
    x = b.pick(ok=lambda v: any(d >= 2 for d in v.shape) and v.numel <= MAX_NUMEL // 4)
    if x is None:
        return False
    axis = b.choice([i for i, d in enumerate(x.shape) if d >= 2])
    idx = next((v for v in b.inputs if v.dtype == INT64), None)
    if idx is None or b.chance(0.4):
        d = x.shape[axis]
        idx = b.const(b.rng.integers(-d, d, size=b.choice([(), (2,), (1, 3)])).astype(np.int64))
    shape = (*x.shape[:axis], *idx.shape, *x.shape[axis + 1:])
    if math.prod(shape) > MAX_NUMEL:
        return False
    b.op("Gather", [x, idx], shape, axis=axis - x.rank if b.chance(0.3) else axis)
    return True
