"""Generators of the fuzzer (`tools/fuzz_compile.py`) for models with symbolic dims: on graph
inputs that declare dims as named symbols or unnamed dynamic dims (`tools/fuzz_dims.py`),
they build graphs valid at every size of those dims.

A compiler pass that folds a Shape or a Size, removes a Reshape, Expand, Slice or Squeeze, or
merges two values, may be right at one size only; the fuzzer compiles such a model once and
runs it at several sizes (`SIZES`, 1 included: a dim that may be 1 at run time). So these
generators emit what dynamic exports are made of, shape-computing subgraphs above all: Shape
-> Gather/Slice -> Concat -> Reshape/Expand/ConstantOfShape/Tile, Range over a dim, Size,
Reshape with 0 and -1, Slice to INT64_MAX, Expand to [1], Squeeze/Unsqueeze, Add/Mul of
neutral constants (constants have 1 where they meet a symbolic dim).

A value's `dims` holds ints, symbols and expressions of them ("2*S", "B*S"): two dims with
the same text are equal at every size, and only those (or a 1) are ever broadcast, matched
or concatenated together. Values whose dims are all ints join the static pool, so the
static generators build on them (a Size cast to float, a mean over a symbolic axis)."""

from __future__ import annotations

import numpy as np
from fuzz_builder import FLOAT, INT64, INT_MAX, INT_MIN, MAX_NUMEL, Builder, Generator, Value
from fuzz_dims import (
    IDENTITY,
    add,
    atom,
    const_for,
    dim_piece,
    dims_of,
    fits,
    is_static,
    pick,
    prod_dim,
    shape_of,
    shape_vector,
    sop,
    sum_dim,
    sym_broadcast,
)
from onnx import helper, numpy_helper


def s_unary(b: Builder) -> bool:
    x = pick(b)
    if x is None:
        return False
    sop(b, b.choice(["Relu", "Neg", "Abs", "Sigmoid", "Tanh"]), [x], dims_of(x))
    return True


def s_binary(b: Builder) -> bool:
    """Add/Sub/Mul/Div of a neutral constant (a no-op at every size, or not quite when it
    grows the rank), of a random constant, or of another value that broadcasts with it."""
    x = pick(b, ok=lambda v: fits(v.dims or (), MAX_NUMEL // 2))
    if x is None:
        return False
    op = b.choice(["Add", "Sub", "Mul", "Div", "Add", "Mul"])
    form = b.choice(["neutral", "neutral", "const", "value"])
    other: Value | None = None
    if form == "value":
        other = pick(b, ok=lambda v: v is not x and sym_broadcast(dims_of(x), dims_of(v))
                     is not None) or None
        if other is None or op == "Div":
            other, form = None, "neutral"
    if other is None:
        shape = const_for(b, dims_of(x), grow=b.chance(0.15))
        if form == "neutral":
            other = b.scalar(IDENTITY[op], shape)
            b.tags[f"sym:{op}-neutral"] += 1
        elif op == "Div":
            other = b.const(b.rng.uniform(0.5, 2.0, shape).astype(np.float32))
        else:
            other = b.const(b.randn(shape))
    out = sym_broadcast(dims_of(x), dims_of(other))
    if out is None or not fits(out):
        return False
    pair = [other, x] if op in ("Add", "Mul") and b.chance(0.3) else [x, other]
    sop(b, op, pair, out)
    return True


def s_reshape(b: Builder) -> bool:
    """Reshape to dims grouped (merged neighbours, new 1s), the target written with 0, -1,
    static ints and dims read by Shape, or to the Shape of a value of the same size."""
    x = pick(b, ok=lambda v: v.rank >= 1)
    if x is None:
        return False
    xd = dims_of(x)
    same = [v for v in b.sym_values if v is not x and prod_dim(dims_of(v)) == prod_dim(xd)]
    if same and b.chance(0.2):
        y = b.choice(same)
        b.tags["sym:Reshape-to-Shape-of-value"] += 1
        sop(b, "Reshape", [x, shape_of(b, y)], dims_of(y))
        return True
    if b.chance(0.15):
        b.tags["sym:Reshape-to-own-Shape"] += 1
        sop(b, "Reshape", [x, shape_of(b, x)], xd)
        return True
    groups: list[list[int]] = []
    for i in range(x.rank):
        if groups and groups[-1] and b.chance(0.3):
            groups[-1].append(i)
        else:
            groups.append([i])
        if b.chance(0.1):
            groups.append([])  # a new dim of 1
    if b.chance(0.1):
        groups = [list(range(x.rank))]
    out = [prod_dim([xd[i] for i in g]) for g in groups]
    if not fits(out):
        return False
    symbolic = [p for p, g in enumerate(groups) if not is_static(out[p:p + 1])]
    maybe_empty = any("-" in str(d) for d in xd)  # -1 cannot be inferred from a size of 0
    minus = b.choice(symbolic or list(range(len(groups)))) \
        if b.chance(0.6) and not maybe_empty else -1
    entries: list[Value | int] = []
    for p, g in enumerate(groups):
        if p == minus:
            entries.append(-1)
        elif g == [p] and b.chance(0.5):
            entries.append(0)
        elif isinstance(out[p], int) and (len(g) != 1 or b.chance(0.7)):
            entries.append(int(out[p]))
        elif len(g) == 1:
            entries.append(dim_piece(b, x, g[0]))
        else:
            piece = dim_piece(b, x, g[0])
            for i in g[1:]:
                piece = b.op("Mul", [piece, dim_piece(b, x, i)], (1,), INT64, pool=False)
            entries.append(piece)
            b.tags["sym:Reshape-dim-product"] += 1
    if 0 in entries and -1 in entries:
        b.tags["sym:Reshape-0-and-minus-1"] += 1
    attrs = {}
    if 0 not in entries and b.opset >= 14 and b.chance(0.2):  # (a 0 would be a dim of 0)
        attrs["allowzero"] = 1
        b.tags["sym:Reshape-allowzero"] += 1
    sop(b, "Reshape", [x, shape_vector(b, entries)], out, **attrs)
    return True


def s_expand(b: Builder) -> bool:
    """Expand to [1] or to ones (no-ops), to x's own Shape, a value or constant to the Shape
    of x (it broadcasts to it), or x to a new leading dim."""
    x = pick(b, ok=lambda v: v.rank >= 1)
    if x is None:
        return False
    xd = dims_of(x)
    form = b.choice(["ones", "own", "to-shape", "to-shape", "grow"])
    b.tags[f"sym:Expand-{form}"] += 1
    if form == "ones":  # one more 1 than x has dims: a near miss (it grows the rank)
        n = int(b.rng.integers(1, x.rank + 2))
        sop(b, "Expand", [x, b.ints([1] * n)], (1,) * (n - x.rank) + tuple(xd))
    elif form == "own":
        sop(b, "Expand", [x, shape_of(b, x)], xd)
    elif form == "to-shape":
        y = pick(b, ok=lambda v: v is not x and sym_broadcast(dims_of(v), xd) == xd)
        if y is None or b.chance(0.4):
            y = b.const(b.randn(const_for(b, xd)))
        sop(b, "Expand", [y, shape_of(b, x)], xd)
    else:
        n = int(b.choice([1, 2]))
        if not fits((n, *xd)):
            return False
        entries: list[Value | int] = [n, *[
            dim_piece(b, x, i) if isinstance(d, str) or b.chance(0.3) else d
            for i, d in enumerate(xd)]]  # a static dim read by Shape folds: the rest not
        sop(b, "Expand", [x, shape_vector(b, entries)], (n, *xd))
    return True


def s_constant_of_shape(b: Builder) -> bool:
    """ConstantOfShape of x's Shape (0, 1 or another value), combined with x (an Add of
    zeros, a Mul by ones)."""
    x = pick(b, ok=lambda v: v.rank >= 1)
    if x is None:
        return False
    fill = float(b.choice([0.0, 1.0, 2.5]))
    value = numpy_helper.from_array(np.array([fill], dtype=np.float32))
    c = sop(b, "ConstantOfShape", [shape_of(b, x)], dims_of(x), value=value)
    if b.chance(0.7):
        sop(b, "Add" if fill == 0.0 else "Mul", [x, c], dims_of(x))
    return True


def s_range(b: Builder) -> bool:
    """Range(0, dim) over a symbolic dim (int64 or float), placed along that axis and
    added to x: position encodings, as exporters write them."""
    x = pick(b, ok=lambda v: any(isinstance(d, str) for d in dims_of(v)))
    if x is None:
        return False
    xd = dims_of(x)
    i = b.choice([k for k, d in enumerate(xd) if isinstance(d, str)])
    n = b.op("Gather", [shape_of(b, x), b.const(np.array(i, np.int64))], (), INT64, pool=False)
    if b.chance(0.5):
        r = sop(b, "Range", [b.const(np.array(0, np.int64)), n, b.const(np.array(1, np.int64))],
                (xd[i],), INT64)
        r = sop(b, "Cast", [r], (xd[i],), to=FLOAT)
    else:
        nf = b.op("Cast", [n], (), FLOAT, pool=False, to=FLOAT)
        r = sop(b, "Range", [b.scalar(0.0), nf, b.scalar(1.0)], (xd[i],))
    others = [k for k in range(x.rank) if k != i]
    if others:
        dims = tuple(xd[i] if k == i else 1 for k in range(x.rank))
        r = sop(b, "Unsqueeze", [r, b.ints(others)], dims)
    sop(b, "Add", [x, r], xd)
    b.tags["sym:Range-of-dim"] += 1
    return True


def s_tile(b: Builder) -> bool:
    """Tile by ones (a no-op), by a 2, or by a dim read from a Shape."""
    x = pick(b, ok=lambda v: v.rank >= 1)
    if x is None:
        return False
    xd = dims_of(x)
    reps: list[Value | int] = [1] * x.rank
    out = list(xd)
    form = b.choice(["ones", "two", "dim"])
    if form != "ones":
        a = int(b.rng.integers(x.rank))
        if form == "two":
            reps[a], out[a] = 2, prod_dim([2, xd[a]])
        else:
            src = pick(b, ok=lambda v: any(isinstance(d, str) for d in dims_of(v)))
            if src is None:
                return False
            j = b.choice([k for k, d in enumerate(dims_of(src)) if isinstance(d, str)])
            reps[a], out[a] = dim_piece(b, src, j), prod_dim([xd[a], dims_of(src)[j]])
    if not fits(out):
        return False
    b.tags[f"sym:Tile-{form}"] += 1
    sop(b, "Tile", [x, shape_vector(b, reps)], out)
    return True


def s_size(b: Builder) -> bool:
    """Size(x) (or a dim) as a float scalar scaling x: its value changes with the sizes."""
    x = pick(b)
    if x is None:
        return False
    if b.chance(0.5):
        n = b.op("Size", [x], (), INT64, pool=False)
    else:
        i = int(b.rng.integers(x.rank)) if x.rank else 0
        if not x.rank:
            return False
        n = b.op("Gather", [shape_of(b, x), b.const(np.array(i, np.int64))], (), INT64,
                 pool=False)
    f = b.op("Cast", [n], (), to=FLOAT)  # a static scalar: the static generators may use it
    sop(b, b.choice(["Mul", "Div"]), [x, f], dims_of(x))
    return True


def s_squeeze(b: Builder) -> bool:
    """Unsqueeze then Squeeze (of static 1s only), or Squeeze with no axes, whose result's
    rank depends on the sizes (summed to a scalar, or a graph output of unknown rank)."""
    x = pick(b)
    if x is None:
        return False
    xd = list(dims_of(x))
    r = b.rng.random()
    if r < 0.2:  # then a Reshape to [-1] (its size is x's) or a sum: of a known rank again
        y = b.emit("Squeeze", [x], [(FLOAT, ())], pool=False)[0]
        b.unshaped.add(y.name)
        b.unranked.add(y.name)
        b.tags["sym:Squeeze-all"] += 1
        if b.chance(0.5) and not any("-" in str(d) for d in xd):
            sop(b, "Reshape", [y, b.ints([-1])], [prod_dim(xd)])
        else:
            b.op("ReduceSum", [y], (), keepdims=0)
        return True
    ones = [i for i, d in enumerate(xd) if d == 1]
    if ones and r < 0.6:
        count = int(b.rng.integers(1, len(ones) + 1))
        axes = sorted({int(a) for a in b.rng.choice(ones, count)})
        sop(b, "Squeeze", [x, b.ints(axes)], [d for i, d in enumerate(xd) if i not in axes])
        return True
    axis = int(b.rng.integers(0, x.rank + 1))
    dims = [*xd[:axis], 1, *xd[axis:]]
    y = sop(b, "Unsqueeze", [x, b.ints([axis - len(dims) if b.chance(0.3) else axis])], dims)
    if b.chance(0.5):
        sop(b, "Squeeze", [y, b.ints([axis])], xd)
        b.tags["sym:Unsqueeze-Squeeze"] += 1
    return True


def s_slice(b: Builder) -> bool:
    """Slice along a symbolic axis to INT64_MAX or to its own dim read by Shape (no-ops),
    reversed, or from 1; along a static axis anywhere."""
    x = pick(b, ok=lambda v: v.rank >= 1)
    if x is None:
        return False
    xd = list(dims_of(x))
    a = int(b.rng.integers(x.rank))
    d = xd[a]
    if isinstance(d, str):
        form = b.choice(["to-max", "to-max", "to-int32-max", "to-dim", "reverse", "from-min",
                         "from-1", "to-minus-1", "step-2"])
        b.tags[f"sym:Slice-{form}"] += 1
        if form == "to-dim":
            start, end, step = b.ints([0]), dim_piece(b, x, a), 1
        else:
            lo, hi, step = {"to-max": (0, INT_MAX, 1), "to-int32-max": (0, 2**31 - 1, 1),
                            "reverse": (-1, INT_MIN, -1), "from-min": (INT_MIN, INT_MAX, 1),
                            "from-1": (1, INT_MAX, 1), "to-minus-1": (0, -1, 1),
                            "step-2": (0, INT_MAX, 2)}[form]
            start, end = b.ints([lo]), b.ints([hi])
        if form in ("from-1", "to-minus-1"):  # near misses: 0 at a size of 1
            xd[a] = f"{atom(d)}-1"
        elif form == "step-2":
            xd[a] = f"({atom(d)}+1)//2"
    else:
        lo = int(b.rng.integers(0, d))
        hi = int(b.choice([INT_MAX, d, int(b.rng.integers(lo + 1, d + 1))]))
        start, end, step = b.ints([lo]), b.ints([hi]), 1
        xd[a] = len(range(d)[lo:hi])
    inputs: list[Value | str] = [x, start, end]
    if a != 0 or step != 1 or b.chance(0.5):
        inputs.append(b.ints([a - x.rank if b.chance(0.3) else a]))
        if step != 1 or b.chance(0.3):
            inputs.append(b.ints([step]))
    sop(b, "Slice", inputs, xd)
    return True


def s_transpose(b: Builder) -> bool:
    """Transpose by a random perm, sometimes followed by its inverse."""
    x = pick(b, ok=lambda v: v.rank >= 2)
    if x is None:
        return False
    perm = [int(p) for p in b.rng.permutation(x.rank)]
    y = sop(b, "Transpose", [x], [dims_of(x)[p] for p in perm], perm=perm)
    if b.chance(0.25):
        sop(b, "Transpose", [y], dims_of(x), perm=[int(p) for p in np.argsort(perm)])
        b.tags["sym:Transpose-inverse-pair"] += 1
    return True


def s_norm(b: Builder) -> bool:
    """LayerNorm or RMSNorm written in primitives over the static last dims of a value with
    symbolic leading dims (LayerNormFusion, RMSNormFusion), the means kept (keepdims=1) or
    dropped and restored by a Reshape to the kept shape (the dynamo export's form)."""
    x = pick(b, ok=lambda v: v.rank >= 2 and isinstance(dims_of(v)[-1], int))
    if x is None:
        return False
    xd = dims_of(x)
    k = 1
    while k < x.rank - 1 and isinstance(xd[-k - 1], int) and b.chance(0.3):
        k += 1
    if all(isinstance(d, int) for d in xd[:-k]):
        return False
    axes = list(range(x.rank - k, x.rank)) if b.chance(0.5) else list(range(-k, 0))
    kept = (*xd[:-k], *[1] * k)
    dropped = b.chance(0.3)

    def mean(v: Value) -> Value:
        extra, attrs = b.axes_arg("ReduceMean", axes, 18)
        if not dropped:
            return sop(b, "ReduceMean", [v, *extra], kept, pool=False, **attrs)
        m = sop(b, "ReduceMean", [v, *extra], xd[:-k], pool=False, keepdims=0, **attrs)
        target: list[Value | int] = [0] * (x.rank - k) + [1] * k
        if b.chance(0.5):  # the kept shape read from X
            lead = b.op("Slice", [shape_of(b, x), b.ints([0]), b.ints([x.rank - k])],
                        (x.rank - k,), INT64, pool=False)
            target = [lead, *[1] * k]
        return sop(b, "Reshape", [m, shape_vector(b, target)], kept, pool=False)

    def square(v: Value) -> Value:
        if b.chance(0.5):
            return sop(b, "Pow", [v, b.scalar(2.0)], dims_of(v), pool=False)
        return sop(b, "Mul", [v, v], dims_of(v), pool=False)

    rms = b.opset >= 23 and b.chance(0.4)
    d = x if rms else sop(b, "Sub", [x, mean(x)], xd, pool=False)
    var = mean(square(d))
    r = sop(b, "Sqrt", [sop(b, "Add", [var, b.scalar(1e-5)], kept, pool=False)], kept,
            pool=False)
    if b.chance(0.5):
        n = sop(b, "Div", [d, r], xd, pool=False)
    else:
        n = sop(b, "Mul", [d, sop(b, "Reciprocal", [r], kept, pool=False)], xd, pool=False)
    norm_shape = tuple(int(e) for e in xd[-k:])
    y = sop(b, "Mul", [n, b.const(b.randn(norm_shape, 0.5) + 1)], xd, pool=rms)
    if not rms:
        sop(b, "Add", [y, b.const(b.randn(norm_shape, 0.1))], xd)
    b.tags[f"sym:{'RMSNorm' if rms else 'LayerNorm'}{'-dropped-means' if dropped else ''}"] += 1
    return True


def s_gelu(b: Builder) -> bool:
    """x * 0.5 * (1 + Erf(x / sqrt(2))) on a symbolic value (GeluFusion)."""
    x = pick(b)
    if x is None:
        return False
    xd = dims_of(x)
    e = sop(b, "Erf", [sop(b, "Div", [x, b.scalar(1.4142135)], xd, pool=False)], xd,
            pool=False)
    h = sop(b, "Mul", [x, b.scalar(0.5)], xd, pool=False)
    sop(b, "Mul", [h, sop(b, "Add", [e, b.scalar(1.0)], xd, pool=False)], xd)
    return True


def s_concat(b: Builder) -> bool:
    """Concat of x with itself or a value of the same dims elsewhere along an axis."""
    x = pick(b, ok=lambda v: v.rank >= 1 and fits(v.dims or (), MAX_NUMEL // 2))
    if x is None:
        return False
    xd = dims_of(x)
    a = int(b.rng.integers(x.rank))
    y = pick(b, ok=lambda v: v.rank == x.rank and all(
        e == d for k, (e, d) in enumerate(zip(dims_of(v), xd)) if k != a)) or x
    out = list(xd)
    out[a] = sum_dim(xd[a], dims_of(y)[a])
    if not fits(out):
        return False
    sop(b, "Concat", [x, y], out, axis=a - x.rank if b.chance(0.3) else a)
    return True


def s_matmul(b: Builder) -> bool:
    """x @ W over a static last dim, or x @ x^T (scores of every position with every
    other, over symbolic dims), then a Softmax sometimes."""
    x = pick(b, ok=lambda v: v.rank >= 2)
    if x is None:
        return False
    xd = dims_of(x)
    if isinstance(xd[-1], int) and b.chance(0.6):
        e = int(b.rng.integers(1, 5))
        out = (*xd[:-1], e)
        if not fits(out):
            return False
        bias = b.chance(0.4)
        y = sop(b, "MatMul", [x, b.const(b.randn((xd[-1], e), 0.5))], out, pool=not bias)
        if bias:  # MatMulAddFusion material (a Gemm only where x is 2-D)
            b.tags["sym:MatMul-bias"] += 1
            y = sop(b, "Add", [y, b.const(b.randn((e,) if b.chance(0.7) else (1, e)))], out)
    else:
        perm = [*range(x.rank - 2), x.rank - 1, x.rank - 2]
        t = sop(b, "Transpose", [x], [xd[p] for p in perm], perm=perm)
        out = (*xd[:-1], xd[-2])
        if not fits(out):
            return False
        y = sop(b, "MatMul", [x, t], out)
    if b.chance(0.4):
        sop(b, "Softmax", [y], dims_of(y), axis=-1)
    return True


def s_reduce(b: Builder) -> bool:
    """ReduceMean/Sum/Max over axes (a symbolic one often), keepdims or not."""
    x = pick(b, ok=lambda v: v.rank >= 1)
    if x is None:
        return False
    xd = dims_of(x)
    op = b.choice(["ReduceMean", "ReduceSum", "ReduceMax"])
    sym = [k for k, d in enumerate(xd) if isinstance(d, str)]
    chosen = {b.choice(sym)} if sym and b.chance(0.7) else set()
    chosen |= {int(a) for a in b.rng.choice(x.rank, int(b.rng.integers(0, x.rank)),
                                            replace=False)}
    if not chosen:
        chosen = {0}
    keep = int(b.chance(0.6))
    axes = [a - x.rank if b.chance(0.3) else a for a in sorted(chosen)]
    extra, attrs = b.axes_arg(op, axes, 13 if op == "ReduceSum" else 18)
    dims = [1 if i in chosen else d for i, d in enumerate(xd) if keep or i not in chosen]
    sop(b, op, [x, *extra], dims, keepdims=keep, **attrs)
    return True


def s_gather(b: Builder) -> bool:
    """Gather the first or last entry along a symbolic axis (there at every size), or
    any along a static one."""
    x = pick(b, ok=lambda v: v.rank >= 1)
    if x is None:
        return False
    xd = dims_of(x)
    a = int(b.rng.integers(x.rank))
    d = xd[a]
    i = int(b.choice([0, -1])) if isinstance(d, str) else int(b.rng.integers(-d, d))
    idx = b.const(np.array(i if b.chance(0.5) else [i], np.int64))
    sop(b, "Gather", [x, idx], [*xd[:a], *idx.shape, *xd[a + 1:]],
        axis=a - x.rank if b.chance(0.3) else a)
    return True


def s_flatten(b: Builder) -> bool:
    x = pick(b)
    if x is None:
        return False
    xd = dims_of(x)
    a = int(b.rng.integers(0, x.rank + 1))
    sop(b, "Flatten", [x], (prod_dim(xd[:a]), prod_dim(xd[a:])), axis=a)
    return True


def s_duplicate(b: Builder) -> bool:
    """A copy of a node that reads or makes a symbolic value (CSE material: equal at every
    size), its result combined with the original's."""
    symbolic = {v.name for v in b.sym_values}  # (not `unshaped`: an If's may be any shape)
    nodes = [n for n in b.nodes if len(n.output) == 1 and n.output[0] in b.by_name
             and (n.output[0] in symbolic
                  or (any(i in symbolic for i in n.input) and n.output[0] not in b.unshaped))]
    if not nodes:
        return False
    node = b.choice(nodes)
    v = b.by_name[node.output[0]]
    copy = helper.make_node(node.op_type, list(node.input), [b.fresh("v")],
                            name=b.fresh(f"dup_{node.op_type.lower()}_"))
    copy.attribute.extend(node.attribute)
    b.nodes.append(copy)
    twin = Value(copy.output[0], v.dtype, v.shape, v.const, v.exact)
    b.by_name[twin.name] = twin
    dims = dims_of(v)
    b.tags[f"sym:duplicate-{node.op_type}"] += 1
    if v.dims is not None:
        add(b, twin, dims)
    if v.dtype in (FLOAT, INT64) and (v.dims is not None or v in b.values or b.chance(0.5)):
        sop(b, b.choice(["Add", "Sub"]), [v, twin], dims, v.dtype)
    return True


#: name -> (weight, lowest opset, generator), as `fuzz_models.GENERATORS`.
SYMBOLIC: dict[str, tuple[float, int, Generator]] = {
    "SymUnary": (1.0, 13, s_unary),
    "SymBinary": (3.0, 13, s_binary),
    "SymReshape": (3.0, 13, s_reshape),
    "SymExpand": (2.0, 13, s_expand),
    "SymConstantOfShape": (1.0, 13, s_constant_of_shape),
    "SymRange": (1.0, 13, s_range),
    "SymTile": (1.0, 13, s_tile),
    "SymSize": (1.0, 13, s_size),
    "SymSqueeze": (2.0, 13, s_squeeze),
    "SymSlice": (2.0, 13, s_slice),
    "SymTranspose": (1.0, 13, s_transpose),
    "SymConcat": (1.0, 13, s_concat),
    "SymMatMul": (1.5, 13, s_matmul),
    "SymReduce": (1.0, 13, s_reduce),
    "SymGather": (1.0, 13, s_gather),
    "SymFlatten": (0.7, 13, s_flatten),
    "SymDuplicate": (1.5, 13, s_duplicate),
    "SymNorm": (1.5, 13, s_norm),
    "SymGelu": (0.7, 13, s_gelu),
}
