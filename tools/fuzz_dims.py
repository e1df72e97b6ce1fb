"""Symbolic dims for the fuzzer's models (`tools/fuzz_symbolic.py` builds on them): values
whose `dims` hold ints, symbols and expressions of them ("2*S", "B*S"; two dims with the same
text are equal at every size), graph inputs that declare such dims (dim_param "B", "S", "T",
one name sometimes shared by two inputs, or unnamed dynamic dims), the sizes a model is run
at (`SIZES`, 1 included: a dim that may be 1 at run time) and its feeds there, and the
shape-computing pieces the generators share (Shape, a dim read from it, a shape vector)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import onnx
from fuzz_builder import FLOAT, INT64, INT_MAX, MAX_NUMEL, Builder, Value
from onnx import helper

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


def atom(d: str) -> str:
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
            factors.append(atom(d))
    if not factors or n == 0:
        return n
    return "*".join(([str(n)] if n != 1 else []) + sorted(factors))


def sum_dim(a: Dim, b: Dim) -> Dim:
    """`a + b` as a dim."""
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if a == b:
        return prod_dim([2, a])
    return f"{atom(str(a))}+{atom(str(b))}"


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
