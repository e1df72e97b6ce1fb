"""Comparing two runs' outputs: element by element, `numpy.isclose` semantics (NaN equals
NaN), a float16/bfloat16 or float8/float4 output held to at least its type's precision,
block by block so that no copy of an output is made; the verdict as a `VerificationReport`
(`ge.session.verification_report`).
The ml_dtypes types (bfloat16, float8, int4 ...) are compared as the numbers they hold. A
sequence, map or optional output (`ge.session.values`: a list, a dict, None) is walked: its
structure must be the same (lengths, keys, None where None), its tensors and map values are
compared as tensors are, and a failure names the element (`[3][1]`: the fourth map's key 1).

`verify` and `ge.compile(verify=...)` (in `ge.session.verification`) run the models; this is
what they compare with, also usable on outputs computed elsewhere (`compare_outputs`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ge._text import first_and_more
from ge.errors import CompileWarning, VerificationInputError
from ge.passes.source import warn_user
from ge.session.values import (
    Difference,
    Key,
    is_nested,
    leaf_count,
    outer_shape,
    paired_leaves,
    value_label,
)
from ge.session.verification_report import (
    PRECISION,
    OutputComparison,
    VerificationReport,
    sizes_text,
)

__all__ = [
    "BLOCK_ELEMENTS",
    "OutputComparison",
    "VerificationReport",
    "compare_outputs",
    "precision_floor",
    "sizes_text",
    "tiny_outputs",
    "warn_unchecked_outputs",
]

#: How many elements are compared (and, in `ge.session.inputs`, drawn) at a time: the
#: temporary arrays of a block (float64 differences, int64 draws) stay a few MB whatever the
#: arrays' size.
BLOCK_ELEMENTS = 2**16


# -- the comparison ------------------------------------------------------------------------


def _dtype_of(array: np.ndarray) -> str:
    return "string" if array.dtype.kind in "OSU" else array.dtype.name


def _is_float(dtype: np.dtype[Any]) -> bool:
    """Whether `dtype` holds floats (or complex numbers): numpy's, and ml_dtypes' narrow
    floats (numpy calls most of them void)."""
    return dtype.kind in "fc" or dtype.name in PRECISION


def precision_floor(expected: np.ndarray, rtol: float, atol: float,
                    computed_in: str | None = None) -> tuple[float, float]:
    """The tolerance an output of `expected`'s dtype is held to: `rtol`/`atol` as given for
    float32 and wider (and integers), and for float16, bfloat16 and the 8-, 6- and 4-bit
    floats (float8e4m3fn: 2⁻³) at least the type's spacing of 1.0 as `rtol`, and as `atol`
    for float16 and bfloat16 that spacing times the output's largest finite magnitude
    (rounding errors accumulate at the scale of the values summed, not of each element),
    for the narrower ones the type's smallest step (`_ROUNDED_ONCE`; float8e8m0, powers of
    two, as given). `computed_in` names
    the 16-bit type a wider output was computed in (a float16 model with float32 inputs and
    outputs): it is held to that type's precision too."""
    name = _dtype_of(expected)
    eps = PRECISION.get(name) or PRECISION.get(computed_in or "")
    if eps is None or expected.size == 0:
        return rtol, atol
    if name in _POWERS_OF_TWO:
        return rtol, atol  # one step is a factor of 2: compared as given
    if name.startswith(_ROUNDED_ONCE):
        return max(rtol, eps), max(atol, _smallest_step(expected.dtype))
    return max(rtol, eps), max(atol, eps * _largest_finite(expected))


#: The floats of 8 bits and fewer: what a model gives in them was rounded to them once, each
#: element on its own (a QuantizeLinear's output), not summed in them, so an element is held
#: to a step of its own magnitude (`rtol`) and near zero to the type's smallest step: with
#: float16's `atol`, the spacing times the largest value (56 for float8e4m3fn's 448), 1
#: against -1 and 0.5 against 40 passed (trial FF); with twice the smallest step, float4's
#: 0.5 against -0.5 (trial HH).
_ROUNDED_ONCE = ("float8", "float6", "float4")
#: float8e8m0 holds powers of two: a step is a factor of 2, and a relative tolerance of one
#: step passed 4 against 2**-100 (trial HH): its outputs are compared as the tolerance given.
_POWERS_OF_TWO = frozenset({"float8_e8m0fnu"})


def _smallest_step(dtype: np.dtype[Any]) -> float:
    """The smallest positive value of an ml_dtypes float (its smallest subnormal)."""
    import ml_dtypes

    info = ml_dtypes.finfo(dtype)
    return float(getattr(info, "smallest_subnormal", info.tiny))


def _largest_finite(array: np.ndarray) -> float:
    """The largest magnitude of `array`'s finite elements (0 when none is), a block at a
    time: no copy of the whole output."""
    largest = 0.0
    for block in _blocks(array):
        finite = np.abs(block[np.isfinite(block)])
        if finite.size:
            largest = max(largest, float(finite.max()))
    return largest


def _blocks(array: np.ndarray) -> Iterator[np.ndarray]:
    """`array`'s elements in order, `BLOCK_ELEMENTS` at a time (views of a contiguous array)."""
    flat = array.reshape(-1)
    for start in range(0, flat.size, BLOCK_ELEMENTS):
        yield flat[start:start + BLOCK_ELEMENTS]


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


def _compare(name: str, expected: Any, actual: Any, rtol: float, atol: float,
             computed_in: str | None = None) -> OutputComparison:
    if is_nested(expected) or is_nested(actual):
        return _compare_nested(name, expected, actual, rtol, atol, computed_in)
    e, a = np.asarray(expected), np.asarray(actual)
    shapes, dtypes = (tuple(e.shape), tuple(a.shape)), (_dtype_of(e), _dtype_of(a))
    if e.shape != a.shape:
        return OutputComparison(name, False, *shapes, *dtypes, math.inf, math.inf,
                                mismatches=max(e.size, a.size), size=e.size,
                                reason=f"shape {list(a.shape)} instead of {list(e.shape)}")
    if dtypes[0] != "string":
        rtol, atol = precision_floor(e, rtol, atol, computed_in)
    scan = _scan(e, a, rtol, atol)
    mismatches = scan.mismatches
    reasons = [f"{mismatches} of {e.size} elements beyond tolerance"] if mismatches else []
    if dtypes[0] != dtypes[1]:
        reasons.append(f"dtype {dtypes[1]} instead of {dtypes[0]}")
    if e.size == 0:
        return OutputComparison(name, not reasons, *shapes, *dtypes, reason="; ".join(reasons),
                                rtol=rtol, atol=atol, computed_in=computed_in)
    # where it fails most (a failing element, not merely the largest difference), else the
    # largest difference
    flat = scan.worst if mismatches else scan.largest
    index = tuple(int(i) for i in np.unravel_index(flat, e.shape))
    # (measured when it fails only: what `VerificationReport.rounding_note` weighs)
    typical = _typical_magnitude(e) if mismatches and _is_float(e.dtype) else None
    return OutputComparison(name, not reasons, *shapes, *dtypes, scan.max_abs, scan.max_rel,
                            index, e[index], a[index], mismatches, e.size, "; ".join(reasons),
                            rtol, atol, computed_in=computed_in, typical_expected=typical)


def _typical_magnitude(array: np.ndarray) -> float | None:
    """The median magnitude of `array`'s finite elements (None when none is): the scale
    float rounding of the values works at, which one outlying value does not move."""
    magnitudes = np.abs(array[np.isfinite(array)])
    return float(np.median(magnitudes)) if magnitudes.size else None


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


@dataclass
class _Place:
    """An element of a nested output: where it is (`path` inside it, `index` in the tensor
    there), its two values, and how far off it is (the difference, or its excess over the
    tolerance)."""

    amount: float
    path: tuple[Key, ...]
    index: tuple[int, ...]
    expected: Any
    actual: Any


@dataclass
class _NestedScan:
    """What `_compare_nested` gathers over the tensors and map values of an output: the
    count beyond tolerance, the largest differences and where they are, the differences of
    structure, and the widest tolerance a 16-bit float tensor in it was held to."""

    rtol: float
    atol: float
    mismatches: int = 0
    max_abs: float = 0.0
    max_rel: float = 0.0
    largest: _Place | None = None
    worst: _Place | None = None

    def add(self, e: np.ndarray, a: np.ndarray, rtol: float, atol: float,
            place: Any) -> None:
        """Compare `e` and `a` (same shape); `place(flat index)` is its (path, index)."""
        self.rtol, self.atol = max(self.rtol, rtol), max(self.atol, atol)
        if e.size == 0:
            return
        scan = _scan(e, a, rtol, atol)
        self.mismatches += scan.mismatches
        self.max_rel = max(self.max_rel, scan.max_rel)
        if self.largest is None or scan.max_abs > self.largest.amount:
            self.largest = self._place(scan.max_abs, scan.largest, e, a, place)
        if scan.mismatches and (self.worst is None or scan.worst_excess > self.worst.amount):
            self.worst = self._place(scan.worst_excess, scan.worst, e, a, place)
        self.max_abs = max(self.max_abs, scan.max_abs)

    @staticmethod
    def _place(amount: float, flat: int, e: np.ndarray, a: np.ndarray, place: Any) -> _Place:
        path, index = place(flat)
        return _Place(amount, path, index, e.reshape(-1)[flat], a.reshape(-1)[flat])


def _compare_nested(name: str, expected: Any, actual: Any, rtol: float, atol: float,
                    computed_in: str | None) -> OutputComparison:
    """`_compare` of a sequence, map or optional output (or of one against a tensor): its
    structure first (`paired_leaves`), then each tensor in it as a tensor output is
    compared, the map values (Python numbers) all together."""
    shapes = outer_shape(expected), outer_shape(actual)
    dtypes = value_label(expected), value_label(actual)
    size = leaf_count(expected)
    scan = _NestedScan(rtol, atol)
    differences: list[Difference] = []
    scalars: list[tuple[tuple[Key, ...], Any, Any]] = []  # map values, compared at once
    for pair in paired_leaves(expected, actual):
        if isinstance(pair, Difference):
            differences.append(pair)
            continue
        path, e_leaf, a_leaf = pair
        if not isinstance(e_leaf, np.ndarray) and not isinstance(a_leaf, np.ndarray):
            scalars.append(pair)
            continue
        e, a = np.asarray(e_leaf), np.asarray(a_leaf)
        if e.shape != a.shape:
            differences.append(Difference(
                path, f"shape {list(a.shape)} instead of {list(e.shape)}", max(e.size, 1)))
            continue
        if _dtype_of(e) != _dtype_of(a):
            differences.append(Difference(
                path, f"dtype {_dtype_of(a)} instead of {_dtype_of(e)}", 0))
        held = (rtol, atol) if _dtype_of(e) == "string" else precision_floor(
            e, rtol, atol, computed_in)
        scan.add(e, a, *held, lambda flat, p=path, s=e.shape: (
            p, tuple(int(i) for i in np.unravel_index(flat, s))))
    if scalars:
        scan.add(np.asarray([s[1] for s in scalars]), np.asarray([s[2] for s in scalars]),
                 rtol, atol, lambda flat: (scalars[flat][0], ()))
    mismatches = scan.mismatches + sum(d.elements for d in differences)
    reasons = [d.describe() for d in differences[:3]]
    if len(differences) > 3:
        reasons.append(f"{len(differences) - 3} more difference(s) of structure")
    if scan.mismatches:
        reasons.append(f"{scan.mismatches} of {size} elements beyond tolerance")
    out = OutputComparison(name, not mismatches, *shapes, *dtypes, mismatches=mismatches,
                           size=size, reason="; ".join(reasons), rtol=scan.rtol,
                           atol=scan.atol, computed_in=computed_in)
    if differences:  # no element to point at: the reason says what differs
        return replace(out, ok=False, max_abs_diff=math.inf, max_rel_diff=math.inf)
    place = scan.worst if scan.mismatches else scan.largest
    if place is None:  # nothing to compare (empty sequences, None and None)
        return out
    return replace(out, max_abs_diff=scan.max_abs, max_rel_diff=scan.max_rel,
                   worst_index=place.index, expected_value=place.expected,
                   actual_value=place.actual, worst_path=place.path)


def compare_outputs(expected: Mapping[str, Any], actual: Mapping[str, Any], *,
                    rtol: float = 1e-4, atol: float = 1e-5,
                    not_compared: Mapping[str, str] | None = None,
                    computed_in: Mapping[str, str] | None = None,
                    names: tuple[str, str] = ("expected", "actual")) -> VerificationReport:
    """Compare outputs by name (of the models `names` calls the expected and the actual, as
    reasons say them): an element is ok when `|a - e| <= atol + rtol * |e|` or both
    are NaN (or the same infinity); a float16/bfloat16 (or float8, float4) output is held to
    at least its type's precision (`precision_floor`); float8 and int4 values (ml_dtypes
    arrays) are compared as the numbers they hold. A missing output, an extra one, a
    different shape or a different dtype fails the output. A sequence, map or optional
    output (a list, a dict, None) must have the same structure (lengths, keys, None or not)
    and its tensors and map values are compared element by element likewise.
    `not_compared` names outputs left out, with why (`random_output_reasons`): they count
    as ok, `compared` False. `computed_in` names the
    16-bit float type wider outputs were computed in (`narrow_float_outputs`): they are held
    to its precision. A tolerance that is not a finite number >= 0 is
    `VerificationInputError`."""
    for tol, what in ((rtol, "rtol"), (atol, "atol")):  # inf would pass anything
        if (isinstance(tol, (bool, np.bool_)) or not isinstance(tol, numbers.Real)
                or not math.isfinite(tol) or tol < 0):
            raise VerificationInputError(f"{what} must be a finite number >= 0, got {tol!r}")
    skip = not_compared or {}
    outputs = []
    for name, value in expected.items():
        if name in skip and name in actual:
            other = actual[name]
            outputs.append(OutputComparison(
                name, True, outer_shape(value), outer_shape(other), value_label(value),
                value_label(other), size=leaf_count(value), reason=skip[name],
                compared=False))
        elif name in actual:
            outputs.append(_compare(name, value, actual[name], rtol, atol,
                                    (computed_in or {}).get(name)))
        else:
            outputs.append(OutputComparison(
                name, False, outer_shape(value), None, value_label(value), None, math.inf,
                math.inf, size=leaf_count(value), mismatches=leaf_count(value),
                reason=f"missing from the {names[1]} model's outputs"))
    for name, value in actual.items():
        if name not in expected:
            outputs.append(OutputComparison(
                name, False, None, outer_shape(value), None, value_label(value), math.inf,
                math.inf, size=leaf_count(value), mismatches=leaf_count(value),
                reason=f"not an output of the {names[0]} model"))
    return VerificationReport(outputs, float(rtol), float(atol))


def tiny_outputs(expected: Mapping[str, Any], atol: float,
                 not_compared: Mapping[str, str]) -> dict[str, float]:
    """The float (or complex) tensor outputs whose every value, in the original's run, is
    below `atol` in magnitude while some is not zero, each with its largest magnitude: for
    them `|actual - expected| <= atol + rtol * |expected|` holds for any actual values of
    that size (a randomly initialised classifier's logits of 1e-14 scaled by 1.5 pass
    atol 1e-5), so the comparison checks nothing. An output that is all zeros is left out:
    zero is what masks and unused heads are by design, and atol then still bounds how far
    from exact zeros the compiled model may go; integer, bool and string outputs are
    compared exactly whatever atol is; sequences, maps and optionals are not looked into;
    outputs not compared (random operators) are left out."""
    tiny: dict[str, float] = {}
    for name, value in expected.items():
        if name in not_compared or not isinstance(value, np.ndarray):
            continue
        if not _is_float(value.dtype):
            continue
        largest = _largest_finite(value)
        if 0 < largest < atol and not any(np.isinf(b).any() for b in _blocks(value)):
            tiny[name] = largest
    return tiny


def warn_unchecked_outputs(expected: Mapping[str, Any], rtol: float, atol: float,
                           not_compared: Mapping[str, str]) -> None:
    """Say which outputs `atol` alone accepts whatever the compiled model gives of their
    size (`tiny_outputs`), how large they are, and an atol that would check them; and that
    an `rtol` of 1 or more accepts anything, or that every output is empty. Only a warning:
    the compilation may be right, the verification merely cannot tell."""
    if rtol >= 1:
        # |actual - expected| <= rtol * |expected| holds for zeros from rtol 1, for the
        # sign flipped from 2: nothing is checked (trial AH: --rtol 1e6 passed a flip)
        warn_user(CompileWarning(
            f"verification with rtol={rtol:g} checks next to nothing: from rtol=1 it accepts "
            "zeros for every output, from 2 the sign flipped; give an rtol below 1 (--rtol, "
            "rtol=), such as the default 1e-4"))
    compared = [value for name, value in expected.items() if name not in not_compared]
    if compared and all(getattr(value, "size", None) == 0 for value in compared):
        # (--dims N=0: every output empty, every model "matches", trial AH)
        warn_user(CompileWarning(
            "verification compares no value: every output compared is empty on these inputs "
            "(a dim of size 0?), so any model would match; give inputs with values (--dims, "
            "--inputs; dims=, inputs=)"))
    tiny = tiny_outputs(expected, atol, not_compared)
    if not tiny:
        return
    names = list(tiny)
    shown = first_and_more([f"{n!r} (largest magnitude {tiny[n]:.3g})" for n in names])
    several = len(names) > 1
    smallest = min(tiny.values())
    # (rtol times the magnitude: a tolerance of its own scale; 1e-4 where rtol is none or
    # so large that the product is no smaller an atol, trial AH)
    factor, said = (rtol, "rtol") if 0 < rtol < 1 else (1e-4, "1e-4")
    # (one significant digit, rounded down: 0.99 * 0.96 read "such as 1" beside atol 0.97)
    scale = 10.0 ** math.floor(math.log10(smallest * factor))
    suggested = math.floor(smallest * factor / scale * (1 + 1e-12)) * scale
    warn_user(CompileWarning(
        f"verification checks nothing of output{'s' if several else ''} {shown}: every "
        f"value of {'them' if several else 'it'} in the original's run is below "
        f"atol={atol:g}, which alone accepts any values that small (the output scaled by "
        f"1.5, or zeros, would pass); give a smaller --atol (atol=), such as {suggested:.1g} "
        f"({said} times the{' smallest' if several else ''} largest magnitude)"))
