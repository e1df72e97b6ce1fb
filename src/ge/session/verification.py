"""Numeric verification: inputs for a model, checking them, and comparing two runs.

Inputs are made (`generate_inputs`), read (`load_inputs`) and checked (`check_inputs`)
against a model's interface without running it. `verify` runs an original and a compiled
model on the same inputs and compares their outputs element by element (`numpy.isclose`
semantics; NaN equals NaN), giving a `VerificationReport`.

Memory: generated inputs are refused before anything is allocated when they would take more
than `generated_inputs_limit()` bytes (4 GiB unless `GE_MAX_GENERATED_INPUT_BYTES` says
otherwise; a verification holds the inputs and both runs' outputs, several times that).
They are drawn block by block into arrays of their own type, and outputs are compared block
by block: neither holds a second copy of the data (a copy of each input made by casting it
to its own type, and five float64 arrays of each output's size made by the comparison, took
a verification of a Relu to twenty times its inputs' size).
"""

from __future__ import annotations

import math
import numbers
import os
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from ge.errors import (
    CompilerOptionError,
    GraphTypeError,
    VerificationError,
    VerificationInputError,
)
from ge.graph.graph import Graph
from ge.graph.types import elem_type_name
from ge.session.runner import (
    InputSpec,
    Model,
    checked_inputs,
    model_inputs,
    model_name,
    run_model,
)

__all__ = [
    "ENV_MAX_GENERATED_INPUT_BYTES",
    "MAX_GENERATED_INPUT_BYTES",
    "OutputComparison",
    "VerificationReport",
    "check_inputs",
    "compare_outputs",
    "generate_inputs",
    "generated_inputs_limit",
    "generated_inputs_note",
    "load_inputs",
    "precision_floor",
    "random_output_reasons",
    "reference_outputs",
    "verify",
]


def _types(*names: str) -> frozenset[int]:
    """ONNX element types by name; those the installed onnx lacks are left out."""
    return frozenset(getattr(TensorProto, n) for n in names if hasattr(TensorProto, n))


_FLOATS = _types("FLOAT", "FLOAT16", "DOUBLE", "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ",
                 "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "FLOAT8E8M0", "FLOAT4E2M1", "FLOAT6E2M3",
                 "FLOAT6E3M2")
_COMPLEX = _types("COMPLEX64", "COMPLEX128")
_INTS = _types("INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64",
               "INT4", "UINT4", "INT2", "UINT2")
_INT_HIGH = 4  # generated ints are 0..3: valid indices into any table of at least 4 rows
_DEFAULT_DIM = 2  # the size of a symbolic or unknown dim nobody named

#: The bytes generated inputs may take together by default. A verification holds them, the
#: original's outputs and the compiled model's, plus what onnxruntime allocates while
#: running: several times the inputs' size, so a fixed size that fits a common machine
#: rather than a share of this one's memory (the same command behaves the same everywhere).
MAX_GENERATED_INPUT_BYTES = 4 * 2**30
#: The environment variable replacing `MAX_GENERATED_INPUT_BYTES` (a number of bytes).
ENV_MAX_GENERATED_INPUT_BYTES = "GE_MAX_GENERATED_INPUT_BYTES"
#: How many elements are drawn, or compared, at a time: the temporary arrays of a block
#: (float64 differences, int64 draws) stay a few MB whatever the arrays' size.
_BLOCK = 2**16


#: A model as the functions here take it: a Graph, a ModelProto or the path of a model file.
ModelOrPath = Model | str | os.PathLike[str]


def _model(model: ModelOrPath, argument: str = "model") -> Model:
    """`model` itself, or the model file it names loaded with `ge.graph.load` (a missing
    file is ModelNotFoundError); anything else is GraphTypeError naming `argument`."""
    if isinstance(model, (Graph, onnx.ModelProto)):
        return model
    if isinstance(model, (str, os.PathLike)):
        import ge.graph

        return ge.graph.load(model)
    raise GraphTypeError(f"{argument} must be a ge.graph.Graph, an onnx.ModelProto or the path "
                         f"of a model file, got {type(model).__name__}")


def check_inputs(inputs: Mapping[str, Any], model: ModelOrPath) -> None:
    """Raise VerificationInputError listing every missing, unknown or ill-typed/-shaped input.

    Values are numpy arrays (or ge Tensors); a static dim must match, a symbolic dim may have
    any size but the same size wherever it appears; inputs with a default may be left out.
    `model` may be the path of a model file.
    """
    model = _model(model)
    checked_inputs(inputs, model_inputs(model), model_name(model))


def generated_inputs_note(model: ModelOrPath, feeds: Mapping[str, np.ndarray]) -> str:
    """What a failed run of generated inputs adds to its error: that they were generated,
    their shapes, and how to give real ones (a symbolic dim of 2 is too short for the first
    Conv of an audio model)."""
    symbolic = any(isinstance(d, str) for spec in model_inputs(_model(model))
                   for d in spec.dims or ())
    shapes = ", ".join(f"{name} {list(array.shape)}" for name, array in feeds.items())
    return (f"; the inputs were generated ({shapes}"
            f"{', symbolic dims of 2 unless sized' if symbolic else ''}): give real ones with "
            "--inputs FILE.npz (inputs=)"
            + (", or sizes with --dims NAME=SIZE (dims=)" if symbolic else ""))


def generated_inputs_limit(environ: Mapping[str, str] | None = None) -> int:
    """The bytes generated inputs may take together: `GE_MAX_GENERATED_INPUT_BYTES` (a
    whole number of bytes; CompilerOptionError, GE1202, for anything else) or
    `MAX_GENERATED_INPUT_BYTES` (4 GiB) when it is unset or empty."""
    env = os.environ if environ is None else environ
    raw = env.get(ENV_MAX_GENERATED_INPUT_BYTES, "").strip()
    if not raw:
        return MAX_GENERATED_INPUT_BYTES
    if not raw.isdigit():
        raise CompilerOptionError(
            f"{ENV_MAX_GENERATED_INPUT_BYTES} must be a whole number of bytes (e.g. "
            f"{8 * 2**30} for 8 GiB), got {raw!r}")
    return int(raw)


def _bytes_text(count: int) -> str:
    """A byte count for a message: `1.09 TiB`, `512 bytes`."""
    size = float(count)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024:
            return f"{count} bytes" if unit == "bytes" else f"{size:.3g} {unit}"
        size /= 1024
    return f"{size:.3g} PiB"


def _element_bytes(spec: InputSpec) -> int:
    """The bytes one generated element of `spec` takes (a string: the object reference,
    the four words being shared)."""
    if spec.elem_type in (TensorProto.STRING, TensorProto.BOOL):
        return 8 if spec.elem_type == TensorProto.STRING else 1
    try:
        return int(np.dtype(helper.tensor_dtype_to_np_dtype(spec.elem_type)).itemsize)
    except (KeyError, TypeError, ValueError):
        return 0  # a type that cannot be generated: refused when its turn comes


def _check_size(shapes: Mapping[str, tuple[int, ...]], specs: Mapping[str, InputSpec],
                graph: str) -> None:
    """Refuse (VerificationInputError, GE1602) inputs that would take more than the limit,
    naming each with its type, shape and bytes, largest first; nothing is allocated yet."""
    sizes = {name: math.prod(shape) * _element_bytes(specs[name])
             for name, shape in shapes.items()}
    total, limit = sum(sizes.values()), generated_inputs_limit()
    if total <= limit:
        return
    order = sorted(sizes, key=lambda n: -sizes[n])
    shown = ", ".join(f"{name!r} {_dtype_name(specs[name])} {list(shapes[name])} "
                      f"{_bytes_text(sizes[name])}" for name in order[:4])
    more = f" and {len(order) - 4} more" if len(order) > 4 else ""
    symbolic = any(isinstance(d, str) for spec in specs.values() for d in spec.dims or ())
    raise VerificationInputError(
        f"the generated inputs of graph {graph!r} would take {_bytes_text(total)}"
        f"{f' ({total} bytes)' if total >= 1024 else ''}, over the limit of "
        f"{_bytes_text(limit)} ({ENV_MAX_GENERATED_INPUT_BYTES}): {shown}{more}; give "
        + ("smaller sizes with --dims NAME=SIZE (dims=) or " if symbolic else "")
        + "real inputs with --inputs FILE.npz (inputs=), or raise the limit with "
        f"{ENV_MAX_GENERATED_INPUT_BYTES}=BYTES if the machine has several times that in "
        "memory (the inputs, and the outputs of each run)")


def _dtype_name(spec: InputSpec) -> str:
    return elem_type_name(spec.elem_type) if spec.elem_type else "any type"


def generate_inputs(model: ModelOrPath, *, seed: int = 0,
                    dims: Mapping[str, int] | None = None) -> dict[str, np.ndarray]:
    """Random inputs for every input of `model` (a Graph, a ModelProto or the path of a
    model file) without a default, the same for a seed.

    Floats (and complex parts) are standard normal; integers are 0..3, so they are valid
    indices into small tables (embeddings, Gather) and small trip counts; bools are random;
    strings are drawn from four short words. A symbolic dim takes its size from `dims`
    (by name), else 2; an unknown dim is 2. Each input has its own stream, seeded from
    `seed` and its name, so adding an input does not change the others.

    Inputs that would take more than `generated_inputs_limit()` bytes together are refused
    before anything is allocated (VerificationInputError, GE1602, naming them), and running
    out of memory while drawing them is that error too, not a MemoryError.
    """
    model = _model(model)
    specs = model_inputs(model)
    graph = model_name(model)
    sizes = dict(dims or {})
    symbols = {d for s in specs for d in s.dims or () if isinstance(d, str)}
    bad = sorted(k for k, v in sizes.items()
                 if k not in symbols or not isinstance(v, int) or isinstance(v, bool) or v < 0)
    if bad:
        raise VerificationInputError(
            f"dims {', '.join(repr(k) for k in bad)}: each must name a symbolic dim of graph "
            f"{graph!r} ({', '.join(sorted(symbols)) or 'it has none'}) and be an "
            f"int >= 0, got {sizes}")
    shapes: dict[str, tuple[int, ...]] = {}
    required = {spec.name: spec for spec in specs if not spec.optional}
    for spec in required.values():
        if spec.dims is None or not spec.elem_type:
            raise VerificationInputError(
                f"input {spec.name!r} of graph {graph!r} is {spec.describe()}: "
                "cannot generate a value for it; give the inputs explicitly")
        shapes[spec.name] = tuple(sizes.get(d, _DEFAULT_DIM) if isinstance(d, str)
                                  else (_DEFAULT_DIM if d is None else d) for d in spec.dims)
    _check_size(shapes, required, graph)
    out: dict[str, np.ndarray] = {}
    for name, shape in shapes.items():
        spec = required[name]
        rng = np.random.default_rng([seed % 2**64, zlib.crc32(name.encode())])
        try:
            out[name] = _random(rng, spec, shape)
        except MemoryError:
            out.clear()  # (what was drawn is given back before the error travels)
            raise VerificationInputError(
                f"out of memory generating input {name!r} of graph {graph!r} "
                f"({_dtype_name(spec)} {list(shape)}, "
                f"{_bytes_text(math.prod(shape) * _element_bytes(spec))}): give smaller "
                "sizes with --dims NAME=SIZE (dims=) or real inputs with --inputs FILE.npz "
                "(inputs=)") from None
    return out


def _fill(flat: np.ndarray, draw: Callable[[int], Any]) -> None:
    """Fill the 1-d array (or view) `flat` block by block with `draw(count)`, cast on
    assignment: the same values as one `draw` of every element (a generator's stream does
    not depend on how the draws are split), without a whole temporary array of the draw's
    type (int64, float64) beside the result."""
    for start in range(0, flat.size, _BLOCK):
        stop = min(start + _BLOCK, flat.size)
        flat[start:stop] = draw(stop - start)


def _filled(shape: tuple[int, ...], dtype: Any, draw: Callable[[int], Any]) -> np.ndarray:
    """A new array of `shape` and `dtype` filled by `_fill`."""
    out = np.empty(shape, dtype=dtype)
    _fill(out.reshape(-1), draw)  # a view: `out` is contiguous
    return out


def _random(rng: np.random.Generator, spec: InputSpec, shape: tuple[int, ...]) -> np.ndarray:
    elem = spec.elem_type
    if elem == TensorProto.STRING:
        words = np.array(["a", "bb", "ccc", "dddd"], dtype=object)
        return _filled(shape, object, lambda n: words[rng.integers(0, len(words), size=n)])
    if elem == TensorProto.BOOL:
        return _filled(shape, bool, lambda n: rng.random(n) < 0.5)
    dtype = helper.tensor_dtype_to_np_dtype(elem)
    if elem in _FLOATS:
        return _filled(shape, dtype, lambda n: rng.standard_normal(n, dtype=np.float32))
    if elem in _COMPLEX:
        out = np.empty(shape, dtype=dtype)
        flat = out.reshape(-1)
        _fill(flat.real, rng.standard_normal)  # every real part first, then every imaginary
        _fill(flat.imag, rng.standard_normal)
        return out
    if elem in _INTS:
        return _filled(shape, dtype, lambda n: rng.integers(0, _INT_HIGH, size=n))
    raise VerificationInputError(
        f"input {spec.name!r}: cannot generate values of type {spec.describe()}")


def load_inputs(path: str | os.PathLike[str], model: ModelOrPath) -> dict[str, np.ndarray]:
    """Inputs read from an `.npz` file (one array per input name), checked against `model`
    (a `Graph`, a ModelProto, or the path of a model file, loaded with `ge.graph.load`).

    A `.npy` file is accepted for a model with exactly one required input.
    """
    model = _model(model)
    path = Path(path)
    specs = model_inputs(model)
    if path.suffix not in (".npz", ".npy"):
        raise VerificationInputError(
            f"{path}: inputs must be an .npz file (one array per input name)")
    required = [s.name for s in specs if not s.optional]
    if path.suffix == ".npy" and len(required) != 1:
        raise VerificationInputError(
            f"{path}: a .npy file holds one array, graph {model_name(model)!r} has "
            f"{len(required)} required inputs; use an .npz file keyed by input name")
    try:
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files}
        else:
            arrays = {required[0]: np.load(path, allow_pickle=False)}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise VerificationInputError(f"cannot read inputs from {path}: {err}") from err
    return checked_inputs(arrays, specs, model_name(model))


# -- comparing outputs ------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A number or numpy scalar as JSON-friendly data: non-finite floats as 'inf'/'nan'."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value if isinstance(value, (bool, int, float, str)) or value is None else str(value)


def _short(value: Any) -> str:
    """A value for a message: floats with 7 significant digits (float32's precision)."""
    plain = _plain(value)
    return f"{plain:.7g}" if isinstance(plain, float) else str(plain)


def _dtype_of(array: np.ndarray) -> str:
    return "string" if array.dtype.kind in "OSU" else array.dtype.name


@dataclass(frozen=True)
class OutputComparison:
    """How one output of a run compares with the expected one.

    `mismatches` counts elements beyond `atol + rtol * |expected|`; `worst_index` is the
    element furthest beyond that tolerance when some are, else where the absolute difference
    is largest (with the two values there). NaN equals NaN. `rtol`/`atol` are the tolerance
    this output was held to: the report's, raised for a 16-bit float output to what its
    type can hold (`precision_floor`).
    """

    name: str
    ok: bool
    expected_shape: tuple[int, ...] | None
    actual_shape: tuple[int, ...] | None
    expected_dtype: str | None
    actual_dtype: str | None
    max_abs_diff: float = 0.0
    max_rel_diff: float = 0.0
    worst_index: tuple[int, ...] | None = None
    expected_value: Any = None
    actual_value: Any = None
    mismatches: int = 0
    size: int = 0
    reason: str = ""  # why it failed ("" when ok)
    rtol: float | None = None
    atol: float | None = None
    compared: bool = True  # False: depends on a random operator; `reason` names it

    @property
    def shape_equal(self) -> bool:
        return self.expected_shape is not None and self.expected_shape == self.actual_shape

    @property
    def dtype_equal(self) -> bool:
        return self.expected_dtype is not None and self.expected_dtype == self.actual_dtype

    def as_dict(self) -> dict[str, Any]:
        """Plain data for JSON; non-finite floats are written as 'inf', '-inf' or 'nan'."""
        data = {k: _plain(v) for k, v in vars(self).items()}
        for key in ("expected_shape", "actual_shape", "worst_index"):
            value = getattr(self, key)
            data[key] = None if value is None else list(value)
        return data

    def describe(self, *, relative: bool = False, sep: str = ",") -> str:
        """One phrase: how much this output differs and where it fails most (`relative`:
        with the largest relative difference; `sep` between the parts)."""
        if self.worst_index is None and self.reason:  # missing, extra, shape, empty, random
            return f"output {self.name!r}: {self.reason}"
        text = f"output {self.name!r}: max abs diff {self.max_abs_diff:.3g}"
        if relative:
            text += f", max rel diff {self.max_rel_diff:.3g}"
        if self.max_abs_diff and self.worst_index is not None:
            where = "worst" if self.mismatches else "largest"
            text += (f", {where} at index {list(self.worst_index)} (expected "
                     f"{_short(self.expected_value)}, got {_short(self.actual_value)})")
        text += f"{sep} {self.mismatches} of {self.size} elements beyond tolerance"
        if self.expected_dtype in _PRECISION and self.rtol is not None:
            text += (f" ({self.expected_dtype}: held to rtol={self.rtol:.3g}, "
                     f"atol={self.atol:.3g})")
        if not self.dtype_equal:
            text += f"{sep} dtype {self.actual_dtype} instead of {self.expected_dtype}"
        return text


#: The spacing of 1.0 in each 16-bit float type (numpy dtype names): two computations of the
#: same value in such a type, rounded differently (a folded BatchNorm, another summation
#: order), differ by about this much relative to the values involved.
_PRECISION = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}


def precision_floor(expected: np.ndarray, rtol: float, atol: float) -> tuple[float, float]:
    """The tolerance an output of `expected`'s dtype is held to: `rtol`/`atol` as given for
    float32 and wider, and for float16/bfloat16 at least the type's spacing of 1.0 as `rtol`
    and that spacing times the output's largest finite magnitude as `atol` (rounding errors
    accumulate at the scale of the values summed, not of each element)."""
    eps = _PRECISION.get(_dtype_of(expected))
    if eps is None or expected.size == 0:
        return rtol, atol
    scale = 0.0
    for block in _blocks(expected):  # (no whole copy of the output)
        finite = np.abs(block[np.isfinite(block)])
        if finite.size:
            scale = max(scale, float(finite.max()))
    return max(rtol, eps), max(atol, eps * scale)


def _blocks(array: np.ndarray) -> Iterator[np.ndarray]:
    """`array`'s elements in order, `_BLOCK` at a time (views of a contiguous array)."""
    flat = array.reshape(-1)
    for start in range(0, flat.size, _BLOCK):
        yield flat[start:start + _BLOCK]


def _differences(e: np.ndarray, a: np.ndarray, rtol: float,
                 atol: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per element: absolute diff, relative diff, 'beyond tolerance', and how far beyond
    it (diff minus what was allowed; same shapes)."""
    if "string" in (_dtype_of(e), _dtype_of(a)):
        same = np.asarray(e == a, dtype=bool) if _dtype_of(e) == _dtype_of(a) else \
            np.zeros(e.shape, dtype=bool)
        diff = np.where(same, 0.0, math.inf)
        return diff, diff, ~same, diff
    kind = np.complex128 if "complex" in e.dtype.name + a.dtype.name else np.float64
    ef, af = e.astype(kind), a.astype(kind)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        same = (ef == af) | (np.isnan(ef) & np.isnan(af))  # equal infinities, NaN and NaN
        diff = np.where(same, 0.0, np.abs(af - ef))
        diff = np.where(np.isnan(diff), math.inf, diff)  # NaN on one side only
        magnitude = np.abs(ef)
        bad = ~same & ((diff > atol + rtol * magnitude) | np.isinf(diff))
        rel = np.where(diff == 0, 0.0, diff / magnitude)
        excess = diff - (atol + rtol * magnitude)
    return (diff, np.where(np.isnan(rel), math.inf, rel), bad,
            np.where(np.isnan(excess), math.inf, excess))


def _compare(name: str, expected: Any, actual: Any, rtol: float, atol: float) -> OutputComparison:
    e, a = np.asarray(expected), np.asarray(actual)
    shapes, dtypes = (tuple(e.shape), tuple(a.shape)), (_dtype_of(e), _dtype_of(a))
    if e.shape != a.shape:
        return OutputComparison(name, False, *shapes, *dtypes, math.inf, math.inf,
                                mismatches=max(e.size, a.size), size=e.size,
                                reason=f"shape {list(a.shape)} instead of {list(e.shape)}")
    if dtypes[0] != "string":
        rtol, atol = precision_floor(e, rtol, atol)
    scan = _scan(e, a, rtol, atol)
    mismatches = scan.mismatches
    reasons = [f"{mismatches} of {e.size} elements beyond tolerance"] if mismatches else []
    if dtypes[0] != dtypes[1]:
        reasons.append(f"dtype {dtypes[1]} instead of {dtypes[0]}")
    if e.size == 0:
        return OutputComparison(name, not reasons, *shapes, *dtypes, reason="; ".join(reasons),
                                rtol=rtol, atol=atol)
    # where it fails most (a failing element, not merely the largest difference), else the
    # largest difference
    flat = scan.worst if mismatches else scan.largest
    index = tuple(int(i) for i in np.unravel_index(flat, e.shape))
    return OutputComparison(name, not reasons, *shapes, *dtypes, scan.max_abs, scan.max_rel,
                            index, e[index], a[index], mismatches, e.size, "; ".join(reasons),
                            rtol, atol)


@dataclass
class _Scan:
    """What `_compare` needs of two outputs' elements, gathered block by block: the count
    beyond tolerance, the largest absolute and relative differences, and the flat indices
    of the largest difference and of the element furthest beyond tolerance (the first such
    element on ties, as `numpy.argmax` of the whole would give)."""

    mismatches: int = 0
    max_abs: float = -math.inf
    max_rel: float = -math.inf
    largest: int = 0
    worst: int = 0
    worst_excess: float = -math.inf


def _scan(e: np.ndarray, a: np.ndarray, rtol: float, atol: float) -> _Scan:
    """`_Scan` of `e` and `a` (same shape) a block at a time: `_differences` computes five
    float64 arrays the size of its operands, which on whole outputs took twenty times an
    output's size of float32."""
    scan = _Scan()
    start = 0
    for eb, ab in zip(_blocks(e), _blocks(a)):
        diff, rel, bad, excess = _differences(eb, ab, rtol, atol)
        count = int(np.count_nonzero(bad))
        scan.mismatches += count
        at = int(np.argmax(diff))
        if diff[at] > scan.max_abs:
            scan.max_abs, scan.largest = float(diff[at]), start + at
        scan.max_rel = max(scan.max_rel, float(rel.max()))
        if count:
            at = int(np.argmax(np.where(bad, excess, -math.inf)))
            if excess[at] > scan.worst_excess:
                scan.worst_excess, scan.worst = float(excess[at]), start + at
        start += eb.size
    return scan


def _severity(out: OutputComparison) -> tuple[bool, float]:
    diff = out.max_abs_diff
    return (not out.ok, math.inf if math.isnan(diff) else diff)


@dataclass(frozen=True)
class VerificationReport:
    """The comparison of every output of two runs, with the tolerance used."""

    outputs: list[OutputComparison]
    rtol: float = 1e-4
    atol: float = 1e-5

    @property
    def ok(self) -> bool:
        return all(out.ok for out in self.outputs)

    @property
    def failures(self) -> list[OutputComparison]:
        return [out for out in self.outputs if not out.ok]

    def worst(self) -> OutputComparison | None:
        """The output that is most off: a failed one first, then the largest abs diff."""
        return max(self.outputs, key=_severity, default=None)

    def tolerance(self) -> str:
        return f"rtol={self.rtol:g}, atol={self.atol:g}"

    @property
    def not_compared(self) -> list[OutputComparison]:
        """The outputs left out: they depend on a random operator (two runs differ)."""
        return [out for out in self.outputs if not out.compared]

    def summary(self) -> str:
        """One line for logs and the CLI."""
        worst = self.worst()
        skipped = self.not_compared
        left_out = (f"; {len(skipped)} not compared ({skipped[0].name!r} "
                    f"{skipped[0].reason.removeprefix('not compared: ')}"
                    f"{', and others' if len(skipped) > 1 else ''})") if skipped else ""
        if self.ok:
            compared = len(self.outputs) - len(skipped)
            diff = f", max abs diff {worst.max_abs_diff:.3g}" if worst and compared else ""
            return (f"ok: {compared} output(s) match{diff} ({self.tolerance()}){left_out}")
        assert worst is not None
        return (f"FAILED: {len(self.failures)} of {len(self.outputs)} output(s) differ "
                f"({self.tolerance()}); worst {worst.describe()}{left_out}")

    def as_dict(self) -> dict[str, Any]:
        """Plain data for JSON (`ge verify --json`, compile reports)."""
        return {"ok": self.ok, "rtol": self.rtol, "atol": self.atol,
                "outputs": [out.as_dict() for out in self.outputs]}

    def raise_if_failed(self, what: str) -> None:
        """Raise VerificationError naming `what`, the worst output, its diff and the tolerance
        (the error's `report` is this report)."""
        if self.ok:
            return
        worst = self.worst()
        assert worst is not None
        others = len(self.failures) - 1
        more = f"; {others} more output(s) differ" if others else ""
        raise VerificationError(f"{what}: {worst.describe()} ({self.tolerance()}){more}",
                                report=self)


def random_output_reasons(model: ModelOrPath) -> dict[str, str]:
    """The outputs of `model` (its root graph) that depend on a random operator (RandomNormal,
    Bernoulli, a Dropout in training mode...), each with why: two runs differ there, so they
    are not compared."""
    import ge.graph
    from ge.ops.randomness import random_outputs

    model = _model(model)
    graph = model if isinstance(model, Graph) else ge.graph.load(model)
    reasons = {}
    for name, node in random_outputs(graph).items():
        mode = " in training mode" if node.type == "Dropout" else ""
        reasons[name] = (f"not compared: depends on the random operator {node.type} "
                         f"{node.name!r}{mode}")
    return reasons


def compare_outputs(expected: Mapping[str, np.ndarray], actual: Mapping[str, np.ndarray], *,
                    rtol: float = 1e-4, atol: float = 1e-5,
                    not_compared: Mapping[str, str] | None = None) -> VerificationReport:
    """Compare outputs by name: an element is ok when `|a - e| <= atol + rtol * |e|` or both
    are NaN (or the same infinity); a float16/bfloat16 output is held to at least its type's
    precision (`precision_floor`). A missing output, an extra one, a different shape or a
    different dtype fails the output. `not_compared` names outputs left out, with why
    (`random_output_reasons`): they count as ok, `compared` False. A tolerance that is not
    a finite number >= 0 is `VerificationInputError`."""
    for tol, what in ((rtol, "rtol"), (atol, "atol")):  # inf would pass anything
        if (isinstance(tol, (bool, np.bool_)) or not isinstance(tol, numbers.Real)
                or not math.isfinite(tol) or tol < 0):
            raise VerificationInputError(f"{what} must be a finite number >= 0, got {tol!r}")
    skip = not_compared or {}
    outputs = []
    for name, value in expected.items():
        if name in skip and name in actual:
            e, a = np.asarray(value), np.asarray(actual[name])
            outputs.append(OutputComparison(
                name, True, tuple(e.shape), tuple(a.shape), _dtype_of(e), _dtype_of(a),
                size=int(e.size), reason=skip[name], compared=False))
        elif name in actual:
            outputs.append(_compare(name, value, actual[name], rtol, atol))
        else:
            e = np.asarray(value)
            outputs.append(OutputComparison(
                name, False, tuple(e.shape), None, _dtype_of(e), None, math.inf, math.inf,
                size=int(e.size), mismatches=int(e.size), reason="missing from the outputs"))
    for name, value in actual.items():
        if name not in expected:
            a = np.asarray(value)
            outputs.append(OutputComparison(
                name, False, None, tuple(a.shape), None, _dtype_of(a), math.inf, math.inf,
                reason="not an output of the expected model"))
    return VerificationReport(outputs, float(rtol), float(atol))


# -- running and comparing --------------------------------------------------------------------


def reference_outputs(model: ModelOrPath,
                      inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The outputs to compare later runs against (`run_model`; the model is not changed)."""
    return run_model(_model(model), inputs)


def verify(original: ModelOrPath, compiled: ModelOrPath, *,
           inputs: Mapping[str, np.ndarray] | None = None, rtol: float = 1e-4,
           atol: float = 1e-5, seed: int = 0,
           dims: Mapping[str, int] | None = None) -> VerificationReport:
    """Run both models (each may be the path of a model file) on the same inputs (generated
    from `original` when None, see `generate_inputs`) and compare their outputs;
    `report.raise_if_failed(...)` to enforce."""
    original, compiled = _model(original, "original"), _model(compiled, "compiled")
    feeds = generate_inputs(original, seed=seed, dims=dims) if inputs is None else dict(inputs)
    expected = run_model(original, feeds)
    actual = run_model(compiled, feeds)
    return compare_outputs(expected, actual, rtol=rtol, atol=atol,
                           not_compared=random_output_reasons(original))
