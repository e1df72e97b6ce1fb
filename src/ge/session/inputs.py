"""Inputs for a model: generating them, reading them from files, and checking them.

Inputs are made (`generate_inputs`), read (`load_inputs`) and checked (`check_inputs`)
against a model's interface without running it; `ge.session.verification` runs models on
them.

Memory: generated inputs are refused before anything is allocated when they would take more
than `generated_inputs_limit()` bytes (4 GiB unless `GE_MAX_GENERATED_INPUT_BYTES` says
otherwise; a verification holds the inputs and both runs' outputs, several times that).
They are drawn block by block into arrays of their own type: no second copy of the data (a
copy of each input made by casting it to its own type took a verification of a Relu to
several times its inputs' size).
"""

from __future__ import annotations

import math
import os
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper

from ge._text import first_and_more
from ge.errors import (
    CompilerOptionError,
    DimsArgumentError,
    GraphTypeError,
    MissingOperatorError,
    RuntimeLoadError,
    SessionError,
    VerificationInputError,
)
from ge.graph.graph import Graph
from ge.graph.types import elem_type_name
from ge.session.comparison import BLOCK_ELEMENTS
from ge.session.low_bit import ML_DTYPES, read_one_byte_floats
from ge.session.model_interface import InputSpec, Model, checked_inputs, model_inputs, model_name
from ge.session.npz import read_npz
from ge.session.values import (
    MAP,
    OPTIONAL,
    SEQUENCE,
    SPARSE,
    TENSOR,
    UNKNOWN,
    ValueType,
    is_nested,
    onnx_elem_name,
    value_label,
)

__all__ = [
    "DEFAULT_DIM",
    "ENV_MAX_GENERATED_INPUT_BYTES",
    "MAX_GENERATED_INPUT_BYTES",
    "SEQUENCE_LENGTH",
    "ModelOrPath",
    "as_model",
    "check_inputs",
    "generate_inputs",
    "generated_inputs_failure",
    "generated_inputs_limit",
    "generated_inputs_note",
    "input_symbols",
    "load_inputs",
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
#: A name that says positions: the word "position" not inside another ("composition"),
#: in any case or starting a camel-case word ("decoderPositionIds").
_POSITIONS = re.compile(r"(?<![A-Za-z])(?i:position)|(?<=[a-z0-9])Position")
#: The integer types positions are drawn in (`_is_positions`): not the 2- and 4-bit ones.
_WIDE_INTS = _types("INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64")
_INT_HIGH = 4  # generated ints are 0..3: valid indices into any table of at least 4 rows
_E8M0 = getattr(TensorProto, "FLOAT8E8M0", None)  # a scale: powers of two, no sign, no zero
DEFAULT_DIM = 2  # the size of a symbolic or unknown dim nobody named

#: The bytes generated inputs may take together by default. A verification holds them, the
#: original's outputs and the compiled model's, plus what onnxruntime allocates while
#: running: several times the inputs' size, so a fixed size that fits a common machine
#: rather than a share of this one's memory (the same command behaves the same everywhere).
MAX_GENERATED_INPUT_BYTES = 4 * 2**30
#: The environment variable replacing `MAX_GENERATED_INPUT_BYTES` (a number of bytes).
ENV_MAX_GENERATED_INPUT_BYTES = "GE_MAX_GENERATED_INPUT_BYTES"


#: A model as the functions here take it: a Graph, a ModelProto or the path of a model file.
ModelOrPath = Model | str | os.PathLike[str]


def as_model(model: ModelOrPath, argument: str = "model") -> Model:
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
    model = as_model(model)
    checked_inputs(inputs, model_inputs(model), model_name(model))


def generated_inputs_note(model: ModelOrPath, feeds: Mapping[str, Any]) -> str:
    """What a failed run of generated inputs adds to its error: that they were generated,
    their shapes, and how to give real ones (a symbolic dim of 2 is too short for the first
    Conv of an audio model)."""
    specs = model_inputs(as_model(model))
    symbolic = _has_symbolic_dims(specs)
    shapes = ", ".join(f"{name} {_generated_shape(value)}" for name, value in feeds.items())
    # (each dim is sized alone: a model taking one as the sum of others, a decoder's total
    # length = past + new tokens, needs them sized to agree, trial AK)
    sizes = _symbol_sizes(specs, feeds)
    said = (f"; symbolic dims {', '.join(f'{k}={v}' for k, v in sizes.items())}, each "
            "sized alone" if len(sizes) > 1 else ", symbolic dims of 2 unless sized")
    return (f"; the inputs were generated ({shapes}"
            f"{said if symbolic else ''}): give real ones with "
            "--inputs FILE.npz (inputs=)"
            + (", or sizes with --dims NAME=SIZE (dims=)" if symbolic else ""))


def generated_inputs_failure(err: SessionError, model: ModelOrPath,
                             feeds: Mapping[str, Any]) -> SessionError | None:
    """A failed run `err` of generated inputs `feeds` with `generated_inputs_note` added
    (`ge run`, `ge verify`), or None when no inputs would run the model: the runtime refused
    to load it, or an operator has no implementation."""
    if isinstance(err, (MissingOperatorError, RuntimeLoadError)):
        return None
    return SessionError(err.message + generated_inputs_note(model, feeds), nodes=err.nodes)


def _symbol_sizes(specs: Iterable[InputSpec], feeds: Mapping[str, Any]) -> dict[str, int]:
    """The size each symbolic dim of the inputs' tensors has in `feeds`, by name."""
    sizes: dict[str, int] = {}
    for spec in specs:
        shape = getattr(feeds.get(spec.name), "shape", None)
        if shape is None or spec.dims is None or len(spec.dims) != len(shape):
            continue
        for dim, size in zip(spec.dims, shape, strict=True):
            if isinstance(dim, str):
                sizes.setdefault(dim, int(size))
    return sizes


def _generated_shape(value: Any) -> str:
    """A generated input's shape for a message; a sequence's or map's type and length."""
    if is_nested(value):
        return f"{value_label(value)} of {len(value) if value is not None else 0}"
    return str(list(np.shape(value)))


def _has_symbolic_dims(specs: Iterable[InputSpec]) -> bool:
    """Whether an input has a dim named, not sized (what `--dims NAME=SIZE` sizes)."""
    return any(_symbols(spec) for spec in specs)


def _dims(spec: InputSpec) -> Iterator[int | str | None]:
    """Every dim of an input, those of the tensors in a sequence or optional too (None for
    a dynamic dim without a name)."""
    yield from spec.dims or ()
    vtype = spec.nested
    while vtype is not None:
        yield from vtype.dims or ()
        vtype = vtype.element


def _symbols(spec: InputSpec) -> set[str]:
    """The symbolic dims of an input, those of the tensors in a sequence or optional too."""
    return {d for d in _dims(spec) if isinstance(d, str)}


def input_symbols(model: ModelOrPath) -> list[str]:
    """The symbolic dims of `model`'s inputs (those of their sequences and optionals too),
    in the order they first appear: what `dims=` (`--dims NAME=SIZE`) sizes."""
    specs = model_inputs(as_model(model))
    return list(dict.fromkeys(d for spec in specs for d in _dims(spec) if isinstance(d, str)))


def _has_unnamed(spec: InputSpec) -> bool:
    """Whether an input (or a tensor in its sequence or optional) has a dynamic dim with no
    name: neither a size nor a `dim_param`."""
    return any(d is None for d in _dims(spec))


def _unknown_dims(names: list[str], specs: Sequence[InputSpec], symbols: set[str],
                  graph: str) -> str:
    """Why `names`, given as dims, size nothing: the symbolic dims there are, and the
    inputs whose dynamic dims have no name, which no name can size (they are generated as
    `DEFAULT_DIM`; only given inputs set them)."""
    given = ", ".join(repr(k) for k in names)
    text = (f"dims {given}: each must name a symbolic dim of graph {graph!r} "
            f"({', '.join(sorted(symbols))})" if symbols
            else f"dims {given}: graph {graph!r} has no named (symbolic) dim to size")
    unnamed = [spec for spec in specs if _has_unnamed(spec)]
    if unnamed:
        shown = first_and_more([f"{spec.name!r} ({spec.describe()})" for spec in unnamed])
        inputs = "input" if len(unnamed) == 1 else "inputs"
        text += (f"; the dynamic dims of its {inputs} {shown} are unnamed ('?'): they are "
                 f"generated as {DEFAULT_DIM} and can only be set by giving the inputs "
                 "(--inputs FILE.npz, inputs=)")
    elif not symbols:
        text += " (its inputs' dims are all static)"
    return text


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


def _element_bytes(elem_type: int) -> int:
    """The bytes one generated element of `elem_type` takes (a string: the object
    reference, the four words being shared)."""
    if elem_type in (TensorProto.STRING, TensorProto.BOOL):
        return 8 if elem_type == TensorProto.STRING else 1
    try:
        return int(np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).itemsize)
    except (KeyError, TypeError, ValueError):
        return 0  # a type that cannot be generated: refused when its turn comes


def _check_size(shapes: Mapping[str, tuple[int, ...]], specs: Mapping[str, InputSpec],
                graph: str, nested: Mapping[str, int]) -> None:
    """Refuse (VerificationInputError, GE1602) inputs that would take more than the limit,
    naming each with its type, shape and bytes, largest first; nothing is allocated yet.
    `nested` gives the bytes of the sequences, maps and optionals."""
    sizes = {name: math.prod(shape) * _element_bytes(specs[name].elem_type)
             for name, shape in shapes.items()}
    sizes.update(nested)
    total, limit = sum(sizes.values()), generated_inputs_limit()
    if total <= limit:
        return
    order = sorted(sizes, key=lambda n: -sizes[n])
    shown = first_and_more([f"{name!r} {_shown_type(specs[name], shapes.get(name))} "
                            f"{_bytes_text(sizes[name])}" for name in order], 4)
    symbolic = _has_symbolic_dims(specs.values())
    raise VerificationInputError(
        f"the generated inputs of graph {graph!r} would take {_bytes_text(total)}"
        f"{f' ({total} bytes)' if total >= 1024 else ''}, over the limit of "
        f"{_bytes_text(limit)} ({ENV_MAX_GENERATED_INPUT_BYTES}): {shown}; give "
        + ("smaller sizes with --dims NAME=SIZE (dims=) or " if symbolic else "")
        + "real inputs with --inputs FILE.npz (inputs=), or raise the limit with "
        f"{ENV_MAX_GENERATED_INPUT_BYTES}=BYTES if the machine has several times that in "
        "memory (the inputs, and the outputs of each run)")


def _dtype_name(spec: InputSpec) -> str:
    return elem_type_name(spec.elem_type) if spec.elem_type else "any type"


def _shown_type(spec: InputSpec, shape: tuple[int, ...] | None) -> str:
    """An input's type and generated shape (a sequence, map or optional: its type)."""
    return spec.describe() if shape is None else f"{_dtype_name(spec)} {list(shape)}"


# -- generating sequences, maps and optionals ---------------------------------------------------

#: How many tensors a generated sequence holds.
SEQUENCE_LENGTH = 2
#: The keys of a generated map, by key kind: all of them, in this order.
_MAP_KEYS: dict[str, list[Any]] = {"int": [0, 1, 2, 3], "string": ["a", "bb", "ccc", "dddd"]}
_WORDS = ["a", "bb", "ccc", "dddd"]


def _map_keys(key_type: int) -> list[Any] | None:
    if key_type == TensorProto.STRING:
        return _MAP_KEYS["string"]
    return _MAP_KEYS["int"] if key_type in _INTS else None


def _not_generated(vtype: ValueType) -> str | None:
    """Why a value of `vtype` (inside a sequence, map or optional) cannot be generated, or
    None when it can: a tensor needs its element type and rank, a map int or string keys
    and number or string values."""
    if vtype.kind == TENSOR:
        if not vtype.elem_type:
            return "its tensors' element type is unknown"
        if vtype.dims is None:
            return "its tensors' rank is unknown"
        return None
    if vtype.kind in (SEQUENCE, OPTIONAL):
        return _not_generated(vtype.element) if vtype.element else "its element type is unknown"
    if vtype.kind == MAP:
        value = vtype.element
        if _map_keys(vtype.elem_type) is None:
            return f"ge generates int and string keys, not {onnx_elem_name(vtype.elem_type)}"
        if value is None or value.kind != TENSOR or value.dims or not value.elem_type:
            return (f"ge generates maps of numbers or strings, not of "
                    f"{value.text() if value else 'an unknown type'}")
        return None
    return f"ge does not generate {'sparse tensors' if vtype.kind == SPARSE else 'it'}"


def _nested_bytes(vtype: ValueType, sizes: Mapping[str, int]) -> int:
    """The bytes a generated value of `vtype` takes (a map's keys and values: 16 each)."""
    if vtype.kind == TENSOR:
        return math.prod(_shape(vtype.dims or (), sizes)) * _element_bytes(vtype.elem_type)
    element = vtype.element or ValueType(UNKNOWN)
    if vtype.kind == SEQUENCE:
        return SEQUENCE_LENGTH * _nested_bytes(element, sizes)
    if vtype.kind == MAP:
        return 16 * len(_map_keys(vtype.elem_type) or ())
    return _nested_bytes(element, sizes)  # an optional: its element


def _shape(dims: tuple[int | str | None, ...], sizes: Mapping[str, int]) -> tuple[int, ...]:
    """Generated sizes: a symbolic dim from `sizes`, else 2, an unknown one 2."""
    return tuple(sizes.get(d, DEFAULT_DIM) if isinstance(d, str)
                 else (DEFAULT_DIM if d is None else d) for d in dims)


def _random_value(rng: np.random.Generator, vtype: ValueType, sizes: Mapping[str, int],
                  name: str) -> Any:
    """A value of `vtype` as onnxruntime takes it: a sequence of `SEQUENCE_LENGTH` tensors
    (or values), an optional's element (not None: it is what computes something), a map of
    every key of `_MAP_KEYS` to a number or string drawn as tensors' elements are."""
    element = vtype.element or ValueType(UNKNOWN)
    if vtype.kind == TENSOR:
        return _random(rng, vtype.elem_type, _shape(vtype.dims or (), sizes), name,
                       vtype.text())
    if vtype.kind == SEQUENCE:
        return [_random_value(rng, element, sizes, name) for _ in range(SEQUENCE_LENGTH)]
    if vtype.kind == MAP:
        keys = _map_keys(vtype.elem_type) or []
        values = _random(rng, element.elem_type, (len(keys),), name, vtype.text())
        return dict(zip(keys, values.tolist()))
    return _random_value(rng, element, sizes, name)  # an optional: its element


def generate_inputs(model: ModelOrPath, *, seed: int = 0,
                    dims: Mapping[str, int] | None = None) -> dict[str, Any]:
    """Random inputs for every input of `model` (a Graph, a ModelProto or the path of a
    model file) without a default, the same for a seed.

    Floats (and complex parts) are standard normal (clipped to the range of a narrow float:
    float4e2m1's ±6; float8e8m0, which has no sign and no zero, is 1/4, 1/2, 1, 2 or 4);
    integers are 0..3 (int2: 0..1), so they are valid indices into small tables
    (embeddings, Gather) and small trip counts; bools are random; an input whose name
    says "mask" (`attention_mask`) of integers, booleans or floats is a right-padded 0/1
    mask, each row keeping at least half and not all of its last axis (`_padding_mask`);
    one whose name says "position" (`position_ids`) of integers is 0, 1, 2... along its
    last axis; strings are drawn from four short words. A symbolic dim takes its size from `dims`
    (by name), else 2; an unknown dim is 2. Each input has its own stream, seeded from
    `seed` and its name, so adding an input does not change the others.

    A sequence input is a list of `SEQUENCE_LENGTH` (2) values of its element type, an
    optional input a value of its element (never None), a map input a dict of every key of
    four (0..3, or the four words) to values drawn likewise. One of an element type or rank
    unknown, a map of other values than numbers or strings, or a sparse tensor is refused
    (VerificationInputError naming its type and why).

    Inputs that would take more than `generated_inputs_limit()` bytes together are refused
    before anything is allocated (VerificationInputError, GE1602, naming them), and running
    out of memory while drawing them is that error too, not a MemoryError.
    """
    model = as_model(model)
    specs = model_inputs(model)
    graph = model_name(model)
    sizes = dict(dims or {})
    symbols = {d for s in specs for d in _symbols(s)}
    unknown = sorted(k for k in sizes if k not in symbols)
    if unknown:
        raise DimsArgumentError(_unknown_dims(unknown, specs, symbols, graph))
    bad = sorted(k for k, v in sizes.items()
                 if not isinstance(v, int) or isinstance(v, bool) or v < 0)
    if bad:
        raise DimsArgumentError(
            f"dims {', '.join(repr(k) for k in bad)}: each size must be an int >= 0, got "
            f"{sizes}")
    shapes: dict[str, tuple[int, ...]] = {}
    nested: dict[str, int] = {}  # the bytes of each sequence, map and optional
    required = {spec.name: spec for spec in specs if not spec.optional}
    for spec in required.values():
        if spec.nested is not None:
            why = _not_generated(spec.nested)
            if why:
                raise VerificationInputError(
                    f"input {spec.name!r} of graph {graph!r} is {spec.describe()}: cannot "
                    f"generate a value for it ({why}); give the inputs explicitly, "
                    f"{spec.nested.what_to_give()} for {spec.name!r} (inputs=; in an .npz "
                    "file for --inputs, as docs/session.md says)")
            nested[spec.name] = _nested_bytes(spec.nested, sizes)
            continue
        if spec.dims is None or not spec.elem_type:
            raise VerificationInputError(
                f"input {spec.name!r} of graph {graph!r} is {spec.describe()}: "
                "cannot generate a value for it; give the inputs explicitly")
        shapes[spec.name] = _shape(spec.dims, sizes)
    _check_size(shapes, required, graph, nested)
    out: dict[str, Any] = {}
    for name, spec in required.items():
        rng = np.random.default_rng([seed % 2**64, zlib.crc32(name.encode())])
        shape = shapes.get(name)
        try:
            out[name] = (_random_value(rng, spec.nested, sizes, name)
                         if spec.nested is not None
                         else _random(rng, spec.elem_type, shapes[name], name, spec.describe()))
        except MemoryError:
            out.clear()  # (what was drawn is given back before the error travels)
            count = (nested[name] if shape is None
                     else math.prod(shape) * _element_bytes(spec.elem_type))
            raise VerificationInputError(
                f"out of memory generating input {name!r} of graph {graph!r} "
                f"({_shown_type(spec, shape)}, {_bytes_text(count)}): give smaller "
                "sizes with --dims NAME=SIZE (dims=) or real inputs with --inputs FILE.npz "
                "(inputs=)") from None
    return out


def _fill(flat: np.ndarray, draw: Callable[[int], Any]) -> None:
    """Fill the 1-d array (or view) `flat` block by block with `draw(count)`, cast on
    assignment: the same values as one `draw` of every element (a generator's stream does
    not depend on how the draws are split), without a whole temporary array of the draw's
    type (int64, float64) beside the result."""
    for start in range(0, flat.size, BLOCK_ELEMENTS):
        stop = min(start + BLOCK_ELEMENTS, flat.size)
        flat[start:stop] = draw(stop - start)


def _filled(shape: tuple[int, ...], dtype: Any, draw: Callable[[int], Any]) -> np.ndarray:
    """A new array of `shape` and `dtype` filled by `_fill`."""
    out = np.empty(shape, dtype=dtype)
    _fill(out.reshape(-1), draw)  # a view: `out` is contiguous
    return out


def _random(rng: np.random.Generator, elem: int, shape: tuple[int, ...], name: str,
            what: str) -> np.ndarray:
    """An array of element type `elem` drawn from `rng` (`name` and its type `what` say
    what it is for, should the type be one ge does not draw)."""
    if _is_mask(name, elem, shape):
        return _padding_mask(rng, elem, shape)
    if _is_positions(name, elem, shape):  # (trial AK: random 0..3 overran a short cache)
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(elem))
        return np.broadcast_to(np.arange(shape[-1], dtype=dtype), shape).copy()
    if elem == TensorProto.STRING:
        words = np.array(_WORDS, dtype=object)
        return _filled(shape, object, lambda n: words[rng.integers(0, len(words), size=n)])
    if elem == TensorProto.BOOL:
        return _filled(shape, bool, lambda n: rng.random(n) < 0.5)
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(elem))
    if elem == _E8M0:  # no sign, no zero: the powers of two 1/4 .. 4
        return _filled(shape, dtype, lambda n: np.exp2(rng.integers(-2, 3, size=n)))
    if elem in _FLOATS and dtype in ML_DTYPES:  # within the type's range: finite values
        top = float(ml_dtypes.finfo(dtype).max)  # (float4e2m1: 6; float8e4m3fn: 448)
        return _filled(shape, dtype, lambda n: np.clip(
            rng.standard_normal(n, dtype=np.float32), -top, top))
    if elem in _FLOATS:
        return _filled(shape, dtype, lambda n: rng.standard_normal(n, dtype=np.float32))
    if elem in _COMPLEX:
        out = np.empty(shape, dtype=dtype)
        flat = out.reshape(-1)
        _fill(flat.real, rng.standard_normal)  # every real part first, then every imaginary
        _fill(flat.imag, rng.standard_normal)
        return out
    if elem in _INTS:  # (int2 holds -2..1: 0..1)
        high = (min(_INT_HIGH, int(ml_dtypes.iinfo(dtype).max) + 1) if dtype in ML_DTYPES
                else _INT_HIGH)
        return _filled(shape, dtype, lambda n: rng.integers(0, high, size=n))
    raise VerificationInputError(f"input {name!r}: cannot generate values of type {what}")


def _is_mask(name: str, elem: int, shape: tuple[int, ...]) -> bool:
    """Whether input `name` is drawn as a padding mask: its name says mask, its type holds 0
    and 1 (integers, booleans, floats), and its last axis has room for both."""
    return ("mask" in name.lower() and len(shape) >= 1 and shape[-1] >= 2
            and math.prod(shape) > 0 and elem != _E8M0
            and (elem in _INTS or elem in _FLOATS or elem == TensorProto.BOOL))


def _is_positions(name: str, elem: int, shape: tuple[int, ...]) -> bool:
    """Whether input `name` is drawn as positions, 0, 1, 2... along its last axis: its name
    says position (`position_ids`) and its type is an integer one. A decoder's rotary table
    holds as many rows as its sequence (and cache) is long: positions 0..3 drawn at random
    were out of its bounds for any total length below 4."""
    if not (_POSITIONS.search(name) and len(shape) >= 1 and elem in _WIDE_INTS):
        return False
    # (not "composition": the word starts there; not positions an int8 cannot hold)
    return shape[-1] <= int(np.iinfo(helper.tensor_dtype_to_np_dtype(elem)).max) + 1


def _padding_mask(rng: np.random.Generator, elem: int, shape: tuple[int, ...]) -> np.ndarray:
    """A right-padded 0/1 mask: along the last axis, each row keeps a prefix of at least half
    its length and not all of it. Both values occur in every row, so a rewrite that drops or
    misreads the mask changes the outputs (random small integers would seldom hold a 0), and
    no row is masked whole whichever value a model takes as "keep"."""
    length = shape[-1]
    rows = math.prod(shape[:-1])
    kept = rng.integers((length + 1) // 2, length, size=rows)
    mask = np.arange(length)[None, :] < kept[:, None]
    dtype = bool if elem == TensorProto.BOOL else np.dtype(
        helper.tensor_dtype_to_np_dtype(elem))
    return mask.reshape(shape).astype(dtype)


def load_inputs(path: str | os.PathLike[str], model: ModelOrPath) -> dict[str, Any]:
    """Inputs read from an `.npz` file (one array per input name; sequences, maps and
    optionals as `ge.session.npz` describes), checked against `model` (a `Graph`, a
    ModelProto, or the path of a model file, loaded with `ge.graph.load`).

    A `.npy` file is accepted for a model with exactly one required input. Neither is read
    with pickle: an object array is refused, saying to save strings with a str dtype.
    """
    model = as_model(model)
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
    if path.suffix == ".npz":
        values = read_npz(path, "inputs")
    else:
        try:
            values = {required[0]: _read_npy(path)}
        except (OSError, ValueError, EOFError) as err:
            hint = (": an object array (dtype=object) is stored pickled, which ge does not "
                    "load; save strings with a str dtype (array.astype(str))"
                    if "allow_pickle" in str(err) else "")
            raise VerificationInputError(
                f"cannot read inputs from {path}: {err}{hint}") from err
    return checked_inputs(values, specs, model_name(model))


def _read_npy(path: Path) -> np.ndarray:
    """The array of a `.npy` file, without pickle; a float8_e5m2 one (`np.save` writes it
    as `<f1`, which `np.load` refuses) as void bytes, as `read_npz` reads it."""
    try:
        return np.asarray(np.load(path, allow_pickle=False))
    except ValueError as err:
        if "allow_pickle" in str(err):
            raise
        with open(path, "rb") as stream:
            raw = read_one_byte_floats(stream)
        if raw is None:
            raise
        return raw
