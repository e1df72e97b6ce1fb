"""The model builder of the fuzzer (`tools/fuzz_compile.py`): values with static shapes, the
nodes and constants of one model, and the shape arithmetic the generators share."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FLOAT, INT64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
OPSETS = (13, 17, 18, 20, 23, 24)
MAX_NUMEL = 256  # no value grows beyond this many elements
#: Operators whose results are exactly rounded (or not rounded at all) in every kernel.
EXACT_OPS = frozenset({
    "Add", "Sub", "Mul", "Div", "Sqrt", "Neg", "Abs", "Relu", "Max", "Min", "Clip", "Floor",
    "Ceil", "Round", "Sign", "Reciprocal", "Where", "Cast", "Identity", "Dropout", "Reshape",
    "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Expand", "Tile", "Slice", "Concat", "Split",
    "Pad", "Gather", "Shape", "Size", "ConstantOfShape", "Equal", "Less", "Greater",
    "GreaterOrEqual", "ArgMax", "ArgMin", "Mod"})
INT_MAX, INT_MIN = 2**63 - 1, -(2**63)


@dataclass
class Value:
    """A value of the model being built: its name, element type, static shape, constness."""

    name: str
    dtype: int
    shape: tuple[int, ...]
    const: bool = False
    #: computed from inputs and constants by exactly rounded operations only, so that ge's
    #: rewrites (reassociation, folding with other kernels) cannot change it by an ulp;
    #: only such values feed discontinuous operations (Floor, comparisons, casts to int)
    exact: bool = True
    #: in a symbolic model (`fuzz_symbolic`), the dims as declared: ints, a symbol's name
    #: ("B"), or an expression of symbols ("2*S"); `shape` is then their largest size.
    #: None: the value's shape is static.
    dims: tuple[int | str, ...] | None = None

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass
class FuzzModel:
    """A generated model with the inputs to run it on and what the generator emitted."""

    model: onnx.ModelProto
    inputs: dict[str, np.ndarray]
    opset: int
    tags: Counter[str] = field(default_factory=Counter)
    #: a symbolic model's inputs at each assignment of sizes to its symbols, labelled
    #: ("B=2,S=5"); `inputs` are the first; empty for a static model
    sizes: list[tuple[str, dict[str, np.ndarray]]] = field(default_factory=list)


class Builder:
    """The model under construction: nodes, initializers, a pool of values to draw from."""

    def __init__(self, rng: np.random.Generator, opset: int) -> None:
        self.rng, self.opset = rng, opset
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[Value] = []
        self.values: list[Value] = []
        self.consts: list[Value] = []  # every constant, pooled or not (output candidates)
        self.tags: Counter[str] = Counter()
        self.by_name: dict[str, Value] = {}  # every value, pooled or not
        self.const_only = False  # pick() returns constants only (folding material)
        self.hide = False  # new values are not pooled (a pattern's intermediate values)
        self.foldable: list[str] = []  # the generators ConstExpr may run on constants
        #: the generators a control-flow body draws from: name -> (weight, generator)
        self.generators: dict[str, tuple[float, Generator]] = {}
        self.scopes: list[str] = []  # the control-flow bodies being built ("If", "Loop")
        self.outputs: list[Value] = []  # values that must be graph outputs
        self.unshaped: set[str] = set()  # values whose shape is not static: never read
        #: values no node may read: a random draw, which only its own comparison reads
        self.unread: set[str] = set()
        #: the values with symbolic dims (`fuzz_symbolic`'s generators read them, no other);
        #: their names are in `unshaped` too
        self.sym_values: list[Value] = []
        self.symbols: list[str] = []  # the dim_param names of a symbolic model's inputs
        self.unranked: set[str] = set()  # values whose rank depends on the sizes: outputs only
        #: results of Reciprocal and Div: a Mul by one may become a Div (ReciprocalMulFusion),
        #: rounded once instead of twice, so that Mul's result is not exact
        self.inverses: set[str] = set()
        self.local: Any = None  # the model-local functions (`fuzz_functions.Locals`)
        self._count = 0

    # -- naming, randomness ---------------------------------------------------------------
    def fresh(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def choice(self, items: Sequence):
        return items[int(self.rng.integers(len(items)))]

    def randn(self, shape: Sequence[int], scale: float = 1.0) -> np.ndarray:
        return np.asarray(self.rng.standard_normal(tuple(shape)) * scale, dtype=np.float32)

    # -- emitting -------------------------------------------------------------------------
    def emit(self, op: str, inputs: Sequence[Value | str], outs: Sequence[tuple[int, tuple]],
             pool: bool = True, **attrs: Any) -> list[Value]:
        """Append one node; its outputs (dtype, shape) become values, pooled unless told."""
        names = [i if isinstance(i, str) else i.name for i in inputs]
        const = all(isinstance(i, Value) and i.const for i in inputs)
        exact = op in EXACT_OPS and all(not isinstance(i, Value) or i.exact for i in inputs)
        if op == "Mul" and any(name in self.inverses for name in names):
            exact = False
        results = [Value(self.fresh("v"), dtype, tuple(shape), const, exact)
                   for dtype, shape in outs]
        if op in ("Reciprocal", "Div"):
            self.inverses.update(r.name for r in results)
        self.by_name.update((r.name, r) for r in results)
        self.nodes.append(helper.make_node(op, names, [r.name for r in results],
                                           name=self.fresh(f"{op.lower()}_"), **attrs))
        if pool and not self.hide:
            self.values.extend(results)
        return results

    def op(self, op: str, inputs: Sequence[Value | str], shape: Sequence[int],
           dtype: int = FLOAT, pool: bool = True, **attrs: Any) -> Value:
        return self.emit(op, inputs, [(dtype, tuple(shape))], pool, **attrs)[0]

    def const(self, array: np.ndarray, pool: bool = False) -> Value:
        """A constant: an initializer or a `Constant` node (tensor or scalar attribute)."""
        array = np.asarray(array)
        dtype = onnx.helper.np_dtype_to_tensor_dtype(array.dtype)
        value = Value(self.fresh("c"), dtype, array.shape, True)
        self.by_name[value.name] = value
        r = self.rng.random()
        if r < 0.65:
            self.initializers.append(numpy_helper.from_array(array, value.name))
            self.tags["const:initializer"] += 1
        else:
            attrs: dict[str, Any] = {"value": numpy_helper.from_array(array, value.name)}
            if r > 0.9 and array.ndim == 0 and dtype == FLOAT:
                attrs = {"value_float": float(array)}
            elif r > 0.9 and array.ndim == 1 and array.size and dtype in (FLOAT, INT64):
                key = "value_floats" if dtype == FLOAT else "value_ints"
                attrs = {key: [x.item() for x in array]}
            self.nodes.append(helper.make_node("Constant", [], [value.name],
                                               name=self.fresh("constant_"), **attrs))
            self.tags[f"const:{next(iter(attrs))}"] += 1
        self.consts.append(value)
        if pool:
            self.values.append(value)
        return value

    def ints(self, values: Sequence[int]) -> Value:
        return self.const(np.array(list(values), dtype=np.int64))

    def scalar(self, x: float, shape: Sequence[int] = ()) -> Value:
        return self.const(np.full(tuple(shape), x, dtype=np.float32))

    # -- picking --------------------------------------------------------------------------
    def pick(self, dtype: int = FLOAT, ok: Callable[[Value], bool] = lambda v: True
             ) -> Value | None:
        """A pooled value of `dtype` that `ok` accepts; recent and non-constant preferred."""
        cands = [v for v in self.values if v.dtype == dtype and ok(v)
                 and (v.const or not self.const_only)]
        live = [v for v in cands if not v.const]
        if live and self.chance(0.85):
            cands = live
        if not cands:
            return None
        return cands[-1] if self.chance(0.55) else self.choice(cands)

    def bshape(self, shape: tuple[int, ...], grow: bool = False) -> tuple[int, ...]:
        """A shape broadcasting to `shape` (a suffix, some dims 1), or growing it if told."""
        keep = int(self.rng.integers(0, len(shape) + 1))
        out = [1 if self.chance(0.35) else d for d in shape[len(shape) - keep:]]
        if grow:
            out = [int(self.rng.integers(2, 4))] + [1] * (len(shape) - len(out)) + out
        return tuple(out)

    def axes_arg(self, op: str, axes: Sequence[int] | None, attr_before: int
                 ) -> tuple[list[Value | str], dict[str, Any]]:
        """Reduce-style axes: an attribute before opset `attr_before`, a constant input after."""
        if axes is None:
            return [], {}
        if self.opset < attr_before:
            return [], {"axes": list(axes)}
        return [self.ints(axes)], {}


def broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    """The numpy broadcast of `shapes`, or None if they do not broadcast or it is too big."""
    try:
        out = tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        return None
    return out if math.prod(out) <= MAX_NUMEL else None


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The numpy broadcast of `shapes`, which must broadcast (however big it is)."""
    return tuple(int(d) for d in np.broadcast_shapes(*shapes))


def factorise(rng: np.random.Generator, n: int, rank: int) -> list[int]:
    """`rank` dims whose product is `n`."""
    dims = []
    for _ in range(rank - 1):
        divs = [d for d in range(1, n + 1) if n % d == 0]
        d = int(divs[int(rng.integers(len(divs)))])
        dims.append(d)
        n //= d
    return [*dims, n]


#: A generator appends a few valid nodes to the model being built; False if it could not.
Generator = Callable[[Builder], bool]
