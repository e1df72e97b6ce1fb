"""Symbolic dims for the fuzzer (`tools/fuzz_compile.py`): graph inputs that declare dims as
named symbols (dim_param "B", "S", "T", one name sometimes shared by two inputs) or as unnamed
dynamic dims, and generators that build on them graphs valid at every size of those dims.

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

import math
from collections.abc import Callable, Sequence

import numpy as np
import onnx
from fuzz_builder import FLOAT, INT64, INT_MAX, INT_MIN, MAX_NUMEL, Builder, Generator, Value
from onnx import helper, numpy_helper

Dim = int | str
#: The names a model's symbols draw from; "_aN" are unnamed dims (declared without a name).
SYMBOLS = ("B", "S", "T")
#: Every symbol at one size, then the mixed assignment is first (the build-time sizes are
#: the largest, `MAX_SIZE`, so that no value grows past MAX_NUMEL at any of them).
SIZES = (1, 2, 3, 5)
MAX_SIZE = max(SIZES)
IDENTITY = {"Add": 0.0, "Sub": 0.0, "Mul": 1.0, "Div": 1.0}


# -- dims -----------------------------------------------------------------------------------
def size_of(d: Dim, env: dict[str, int]) -> int:
    """The size of dim `d` when the symbols have the sizes of `env`."""
    return d if isinstance(d, int) else int(eval(d, {"__builtins__": {}}, env))


def _is_product(d: str) -> bool:
    return all(p.isidentifier() or p.isdigit() for p in d.split("*"))


def _atom(d: str) -> str:
    """`d` as a factor: parenthesised unless it is a product already."""
    return d if _is_product(d) else f"({d})"


def prod_dim(dims: Sequence[Dim]) -> Dim:
    """The product of `dims` as a dim: an int if all are static, else a normalised product
    ("2*B*S": the number first, then the sorted factors), so that the same product reached
    two ways has the same text."""
    n = math.prod(d for d in dims if isinstance(d, int))
    factors: list[str] = []
    for d in dims:
        if isinstance(d, str) and _is_product(d):
            for p in d.split("*"):
                if p.isdigit():
                    n *= int(p)
                else:
                    factors.append(p)
        elif isinstance(d, str):
            factors.append(_atom(d))
    if not factors or n == 0:
        return n
    return "*".join(([str(n)] if n != 1 else []) + sorted(factors))


def sum_dim(a: Dim, b: Dim) -> Dim:
    """`a + b` as a dim."""
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if a == b:
        return prod_dim([2, a])
    return f"{_atom(str(a))}+{_atom(str(b))}"


def sym_broadcast(*dimss: Sequence[Dim]) -> tuple[Dim, ...] | None:
    """The broadcast of dims that broadcast at every size (equal texts or 1), else None."""
    rank = max(len(d) for d in dimss)
    out: list[Dim] = []
    for i in range(rank):
        seen = {ds[len(ds) - rank + i] for ds in dimss if len(ds) - rank + i >= 0} - {1}
        if len(seen) > 1:
            return None
        out.append(seen.pop() if seen else 1)
    return tuple(out)


def max_shape(dims: Sequence[Dim]) -> tuple[int, ...]:
    """The shape of `dims` with every symbol at its largest size."""
    env = _env(dims, MAX_SIZE)
    return tuple(size_of(d, env) for d in dims)


def _env(dims: Sequence[Dim], n: int) -> dict[str, int]:
    names = {t for d in dims if isinstance(d, str)
             for t in d.replace("(", " ").replace(")", " ").replace("*", " ").replace("+", " ")
             .replace("-", " ").split() if t.isidentifier()}
    return dict.fromkeys(names, n)


def fits(dims: Sequence[Dim], limit: int = MAX_NUMEL) -> bool:
    return math.prod(max_shape(dims)) <= limit


def is_static(dims: Sequence[Dim]) -> bool:
    return all(isinstance(d, int) for d in dims)


def declared(b: Builder, v: Value) -> list[int | str | None] | None:
    """The dims a graph output (or input) declares for `v`: symbols by name, the other
    symbolic dims unknown; None (no shape) if its rank depends on the sizes."""
    if v.name in b.unranked:
        return None
    if v.dims is None:
        return list(v.shape)
    return [d if isinstance(d, int) or d in b.symbols else None for d in v.dims]


# -- building -------------------------------------------------------------------------------
def add(b: Builder, v: Value, dims: Sequence[Dim]) -> Value:
    """Put `v` (of `dims`) in the symbolic pool, or in the static pool if they are static."""
    if is_static(dims):
        v.shape = tuple(int(d) for d in dims)
        if not b.hide:
            b.values.append(v)
    else:
        v.dims = tuple(dims)
        v.shape = max_shape(dims)
        b.unshaped.add(v.name)
        b.sym_values.append(v)
    return v


def sop(b: Builder, op: str, inputs: Sequence[Value | str], dims: Sequence[Dim],
        dtype: int = FLOAT, pool: bool = True, **attrs: object) -> Value:
    """One node whose output has `dims`, pooled by them unless told (a pattern's
    intermediate values: nothing else may read them, or it would not fuse)."""
    v = b.emit(op, inputs, [(dtype, max_shape(dims))], pool=False, **attrs)[0]
    if pool:
        return add(b, v, dims)
    v.dims, v.shape = tuple(dims), max_shape(dims)
    b.unshaped.add(v.name)
    return v


def dims_of(v: Value) -> tuple[Dim, ...]:
    return v.dims if v.dims is not None else v.shape


def pick(b: Builder, ok: Callable[[Value], bool] = lambda v: True, dtype: int = FLOAT
         ) -> Value | None:
    """A symbolic value of `dtype` that `ok` accepts, recent ones preferred."""
    cands = [v for v in b.sym_values if v.dtype == dtype and ok(v)]
    if not cands:
        return None
    return cands[-1] if b.chance(0.5) else b.choice(cands)


def make_inputs(b: Builder) -> None:
    """The float inputs of a symbolic model: the first has a symbolic dim; a second shares
    the first's symbols (the same dims, a broadcastable part) or has its own; sometimes a
    static one for the static generators."""
    b.symbols = list(SYMBOLS[:int(b.rng.integers(1, len(SYMBOLS) + 1))])
    anonymous = 0

    def fresh_dims() -> list[Dim]:
        nonlocal anonymous
        while True:
            dims: list[Dim] = []
            for _ in range(int(b.rng.integers(1, 5))):
                if b.chance(0.5):
                    if b.chance(0.12):  # unnamed: its own size, independent of the others
                        anonymous += 1
                        dims.append(f"_a{anonymous}")
                    else:
                        dims.append(b.choice(b.symbols))
                else:
                    dims.append(int(b.rng.integers(1, 5)))
            if not is_static(dims) and fits(dims, 128):
                return dims

    first = fresh_dims()
    specs = [first]
    if b.chance(0.6):
        r = b.rng.random()
        if r < 0.35:
            specs.append(list(first))
            b.tags["sym:input-same-dims"] += 1
        elif r < 0.75:
            keep = int(b.rng.integers(1, len(first) + 1))
            specs.append([1 if b.chance(0.3) else d for d in first[len(first) - keep:]])
            b.tags["sym:input-broadcasts"] += 1
        else:
            specs.append(fresh_dims())
    if b.chance(0.25):
        specs.append([int(d) for d in b.rng.integers(1, 5, size=int(b.rng.integers(1, 4)))])
        b.tags["sym:input-static"] += 1
    for i, dims in enumerate(specs):
        v = Value(f"x{i}", FLOAT, max_shape(dims))
        b.inputs.append(v)
        b.by_name[v.name] = v
        add(b, v, dims)
    if len({d for s in specs for d in s if isinstance(d, str)}) < sum(
            1 for s in specs for d in s if isinstance(d, str)):
        b.tags["sym:symbol-repeated"] += 1


def assignments(b: Builder, rng: np.random.Generator) -> list[tuple[str, dict[str, int]]]:
    """The sizes to run at, each with a label: a mixed one first (different sizes), then
    every symbol at each of `SIZES`."""
    names = sorted({t for v in b.inputs if v.dims for t in _env(v.dims, 0)})
    mixed = {n: int(rng.integers(1, MAX_SIZE + 1)) for n in names}
    out = [mixed] + [dict.fromkeys(names, n) for n in SIZES]
    return [(",".join(f"{k}={v}" for k, v in env.items()), env) for env in out]


def feeds_at(b: Builder, env: dict[str, int], rng: np.random.Generator
             ) -> dict[str, np.ndarray]:
    """Random float inputs at the sizes of `env`."""
    return {v.name: rng.standard_normal(tuple(size_of(d, env) for d in dims_of(v)))
            .astype(np.float32) for v in b.inputs if v.dtype == FLOAT}


def input_info(b: Builder, v: Value) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(v.name, v.dtype, declared(b, v))


# -- shape pieces ---------------------------------------------------------------------------
def shape_of(b: Builder, v: Value) -> Value:
    """Shape(v): a static (rank,) int64 vector of run-time values."""
    return b.op("Shape", [v], (v.rank,), INT64, pool=False)


def dim_piece(b: Builder, x: Value, i: int) -> Value:
    """A (1,) int64 holding dim `i` of `x` at run time, read from `x` or from another value
    with that dim, in one of the ways exporters write it."""
    d = dims_of(x)[i]
    others = [(v, j) for v in b.sym_values if v is not x for j, e in enumerate(dims_of(v))
              if e == d]
    src, j = b.choice(others) if others and b.chance(0.3) else (x, i)
    if src is not x:
        b.tags["sym:dim-from-other-value"] += 1
    form = b.choice(["gather", "scalar", "slice", "attr"])
    if form == "attr" and b.opset >= 15:
        b.tags["sym:dim-Shape-start-end"] += 1
        if j == src.rank - 1 and b.chance(0.5):  # Shape(start=-1): the last dim
            return b.op("Shape", [src], (1,), INT64, pool=False, start=-1)
        if j < src.rank - 1 and b.chance(0.3):  # negative bounds
            return b.op("Shape", [src], (1,), INT64, pool=False, start=j - src.rank,
                        end=j + 1 - src.rank)
        return b.op("Shape", [src], (1,), INT64, pool=False, start=j, end=j + 1)
    s = shape_of(b, src)
    if form == "scalar":
        g = b.op("Gather", [s, b.const(np.array(j, np.int64))], (), INT64, pool=False)
        return b.op("Unsqueeze", [g, b.ints([0])], (1,), INT64, pool=False)
    if form == "slice":
        end = INT_MAX if j == src.rank - 1 and b.chance(0.5) else j + 1
        return b.op("Slice", [s, b.ints([j]), b.ints([end])], (1,), INT64, pool=False)
    index = j - src.rank if b.chance(0.3) else j
    return b.op("Gather", [s, b.ints([index])], (1,), INT64, pool=False)


def shape_vector(b: Builder, entries: Sequence[Value | int]) -> Value:
    """A 1-D int64 of `entries` (constants and (1,) pieces): a constant if all are ints,
    else a Concat (runs of ints as one constant)."""
    if all(isinstance(e, int) for e in entries):
        return b.ints([int(e) for e in entries])  # type: ignore[arg-type]
    parts: list[Value] = []
    run: list[int] = []
    for e in entries:
        if isinstance(e, int):
            run.append(e)
            continue
        if run:
            parts.append(b.ints(run))
            run = []
        parts.append(e)
    if run:
        parts.append(b.ints(run))
    if len(parts) == 1:
        return parts[0]
    return b.op("Concat", parts, (len(entries),), INT64, pool=False, axis=0)


def const_for(b: Builder, dims: Sequence[Dim], grow: bool = False) -> tuple[int, ...]:
    """A constant's shape broadcasting against `dims` at every size: 1 at the symbolic
    dims, a suffix, some static dims 1; one more leading dim if told."""
    keep = int(b.rng.integers(0, len(dims) + 1))
    out = [1 if isinstance(d, str) or b.chance(0.3) else d for d in dims[len(dims) - keep:]]
    if grow:
        out = [int(b.choice([1, 2]))] + [1] * (len(dims) - len(out)) + out
    return tuple(out)


# -- generators -----------------------------------------------------------------------------
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
            xd[a] = f"{_atom(d)}-1"
        elif form == "step-2":
            xd[a] = f"({_atom(d)}+1)//2"
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
