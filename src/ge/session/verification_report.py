"""The verdict of a comparison of two runs: `OutputComparison` per output and the
`VerificationReport` over all of them, with the texts messages and `--json` make of them.
Kept apart from how outputs are compared (`ge.session.comparison`), which builds these.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ge.errors import VerificationError
from ge.session.values import Key, path_text

__all__ = ["PRECISION", "OutputComparison", "VerificationReport", "sizes_text"]


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


#: The largest difference, as a share of an output's typical expected magnitude, that
#: `VerificationReport.rounding_note` puts down to float rounding (float32's epsilon is
#: 1.2e-7; re-ordered sums over hundreds of layers reach 1e-6 of the values they add up).
ROUNDING = 1e-5


@dataclass(frozen=True)
class OutputComparison:
    """How one output of a run compares with the expected one.

    `mismatches` counts elements beyond `atol + rtol * |expected|`; `worst_index` is the
    element furthest beyond that tolerance when some are, else where the absolute difference
    is largest (with the two values there). NaN equals NaN. `rtol`/`atol` are the tolerance
    this output was held to: the report's, raised for a narrow float output (float16,
    bfloat16, float8 ...) to what its type can hold (`precision_floor`).

    For a sequence, map or optional output, the shapes are its length (None for None), the
    dtypes its type (`seq(map(int64, float))`: `value_label`), `size` counts the elements
    of its tensors and map values, and `worst_path` is where in it `worst_index` is (a
    position or key per level: `(3, 1)` for `[3][1]`); None for a tensor output.
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
    computed_in: str | None = None  # the 16-bit float a wider output was computed in
    worst_path: tuple[Key, ...] | None = None  # where, inside a sequence or map output
    #: the typical magnitude (the median |value|) of the expected output's finite elements,
    #: for a float tensor output with elements beyond tolerance (None otherwise: not measured)
    typical_expected: float | None = None

    @property
    def shape_equal(self) -> bool:
        return self.expected_shape is not None and self.expected_shape == self.actual_shape

    @property
    def dtype_equal(self) -> bool:
        return self.expected_dtype is not None and self.expected_dtype == self.actual_dtype

    def as_dict(self) -> dict[str, Any]:
        """Plain data for JSON; non-finite floats are written as 'inf', '-inf' or 'nan'."""
        data = {k: _plain(v) for k, v in vars(self).items()}
        for key in ("expected_shape", "actual_shape", "worst_index", "worst_path"):
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
            at = f"index {list(self.worst_index)}"
            if self.worst_path is not None:  # inside a sequence or map
                at = path_text(self.worst_path) + (f" {at}" if self.worst_index else "")
            text += (f", {where} at {at} (expected "
                     f"{_short(self.expected_value)}, got {_short(self.actual_value)})")
        text += f"{sep} {self.mismatches} of {self.size} elements beyond tolerance"
        narrow = (self.expected_dtype if self.expected_dtype in PRECISION
                  else f"computed in {self.computed_in}" if self.computed_in else None)
        if narrow and self.rtol is not None:
            text += f" ({narrow}: held to rtol={self.rtol:.3g}, atol={self.atol:.3g})"
        if not self.dtype_equal:
            text += f"{sep} dtype {self.actual_dtype} instead of {self.expected_dtype}"
        return text


#: The spacing of 1.0 in each float type narrower than float32 (numpy dtype names; ml_dtypes'
#: for bfloat16 and the 8-, 6- and 4-bit floats): two computations of the same value in such a
#: type, rounded differently (a folded BatchNorm, another summation order, a value quantized
#: on either side of a rounding boundary), differ by about this much relative to the values
#: involved. float8e8m0 holds powers of two only: the next one after 1.0 is 2.0.
PRECISION = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7,
              "float8_e4m3fn": 2.0 ** -3, "float8_e4m3fnuz": 2.0 ** -3,
              "float8_e5m2": 2.0 ** -2, "float8_e5m2fnuz": 2.0 ** -2, "float8_e8m0fnu": 1.0,
              "float6_e2m3fn": 2.0 ** -3, "float6_e3m2fn": 2.0 ** -2,
              "float4_e2m1fn": 2.0 ** -1}


def _severity(out: OutputComparison) -> tuple[bool, float]:
    diff = out.max_abs_diff
    return (not out.ok, math.inf if math.isnan(diff) else diff)


@dataclass(frozen=True)
class VerificationReport:
    """The comparison of every output of two runs, with the tolerance used."""

    outputs: list[OutputComparison]
    rtol: float = 1e-4
    atol: float = 1e-5
    #: The sizes of the symbolic dims the inputs were generated at, set for the check at
    #: other sizes than the defaults (`ge.session.verification.other_sizes`).
    sizes: Mapping[str, int] = field(default_factory=dict)
    #: The other sizes at which the outputs matched too ({} when not checked there).
    also_at: Mapping[str, int] = field(default_factory=dict)
    #: The other sizes the check there was meant for when it could not be made, and why
    #: (the original cannot run there: a KV-cache model whose mask must be as long as the
    #: past and the new tokens together); ({}, "") when it was made or not meant.
    not_at: Mapping[str, int] = field(default_factory=dict)
    not_at_reason: str = ""
    #: The dims of `sizes`, `also_at` or `not_at` whose sizes the caller gave (`dims=`,
    #: `--dims`): the messages name the sizes the check chose first, then these "as given".
    given_dims: tuple[str, ...] = ()
    #: The output names the model lists more than once, with how many times (`[y, z, y]`:
    #: {"y": 2}): `outputs` has one comparison per name, so the messages count those.
    repeated: Mapping[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(out.ok for out in self.outputs)

    @property
    def failures(self) -> list[OutputComparison]:
        return [out for out in self.outputs if not out.ok]

    def worst(self) -> OutputComparison | None:
        """The output that is most off: a failed one first, then the largest abs diff."""
        return max(self.outputs, key=_severity, default=None)

    def rounding_note(self) -> str:
        """When every output that differs is a float32 or float64 tensor of the right shape
        and type, off by no more than `ROUNDING` of its typical magnitude (the median
        |value|): that this is the size of difference float rounding reaches when fusions
        re-order the arithmetic of a deep model, and the tolerance that accepts it; else "".
        Trial AA: 1,191 layers differed by 1.9e-4 on values mostly around 37 (onnxruntime's
        own optimisations by 1.5e-4), which read as a broken pass. The median, not the
        largest value: one column of values near 1e6 must not excuse another off by 5
        (trial AC)."""
        failed = self.failures
        if not failed or not all(
                out.typical_expected and out.shape_equal and out.dtype_equal
                and out.expected_dtype in ("float32", "float64") and not out.computed_in
                and 0 < out.max_abs_diff <= ROUNDING * out.typical_expected
                for out in failed):
            return ""
        worst = max(failed, key=lambda out: out.max_abs_diff / (out.typical_expected or 1))
        atol = _rounded_up(max(out.max_abs_diff for out in failed))
        assert worst.typical_expected is not None
        share = worst.max_abs_diff / worst.typical_expected
        return (f"; output {worst.name!r} is off by at most {share:.2g} of its typical "
                f"magnitude (median |value| {worst.typical_expected:.3g}): the size of "
                "difference float rounding reaches when fusions re-order the arithmetic of a "
                "deep model (onnxruntime's own graph optimisations make such differences "
                f"too), not the mark of a wrong rewrite; atol={atol:g} (--atol {atol:g}) "
                "accepts it")

    def tolerance(self) -> str:
        """The tolerance asked for, and that narrow float outputs (16-bit, float8 ...) were
        held to their type's precision when some were (each output's own is in the table)."""
        text = f"rtol={self.rtol:g}, atol={self.atol:g}"
        raised = sorted({out.computed_in or str(out.expected_dtype) for out in self.outputs
                         if out.compared and out.rtol is not None and (
                             out.expected_dtype in PRECISION or out.computed_in)
                         and (out.rtol > self.rtol or (out.atol or 0) > self.atol)})
        if raised:
            text += f"; {' and '.join(raised)} at its precision"
        return text

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
            also = f"; also at {self._sizes_text(self.also_at)}" if self.also_at else ""
            if self.not_at:
                # (sizes of the user's choice help where the original could not run
                # there, not where the other model's dims are fixed: trial AJ)
                hint = ("; give those dims with --dims (dims=) to check at sizes of your "
                        "choice" if self.not_at_reason.startswith("the original") else "")
                also = (f"; not checked at other sizes ({self._sizes_text(self.not_at)}: "
                        f"{self.not_at_reason}{hint})")
            return (f"ok: {compared} {self._distinct}output(s) match{self._listed}{diff} "
                    f"({self.tolerance()}){left_out}{also}")
        assert worst is not None
        where = f" at {self._sizes_text(self.sizes)}" if self.sizes else ""
        return (f"FAILED{where}: {len(self.failures)} of {len(self.outputs)} "
                f"{self._distinct}output(s) differ{self._listed} ({self.tolerance()}); worst "
                f"{worst.describe()}{left_out}{self.rounding_note()}")

    @property
    def _distinct(self) -> str:
        return "distinct " if self.repeated else ""

    @property
    def _listed(self) -> str:
        """How many outputs the model lists when it lists a name more than once (`[y, z,
        y]`: " (the model lists 3: 'y' twice)"), which the counts by name leave out."""
        if not self.repeated:
            return ""
        listed = len(self.outputs) + sum(times - 1 for times in self.repeated.values())
        times_text = {2: "twice", 3: "three times"}
        names = ", ".join(f"{name!r} {times_text.get(times, f'{times} times')}"
                          for name, times in self.repeated.items())
        return f" (the model lists {listed}: {names})"

    def _sizes_text(self, sizes: Mapping[str, int]) -> str:
        """`sizes` for a message: those the check chose, then those given (`sizes_text`)."""
        return sizes_text(sizes, given=self.given_dims)

    def as_dict(self) -> dict[str, Any]:
        """Plain data for JSON (`ge verify --json`, compile reports)."""
        data: dict[str, Any] = {"ok": self.ok, "rtol": self.rtol, "atol": self.atol,
                                "outputs": [out.as_dict() for out in self.outputs]}
        if self.sizes:
            data["sizes"] = dict(self.sizes)
        if self.also_at:
            data["also_at"] = dict(self.also_at)
        if self.not_at:
            data["not_at"] = {"sizes": dict(self.not_at), "reason": self.not_at_reason}
        if self.repeated:
            data["repeated"] = dict(self.repeated)
        if self.given_dims and (self.sizes or self.also_at or self.not_at):
            data["given_dims"] = list(self.given_dims)
        return data

    def raise_if_failed(self, what: str) -> None:
        """Raise VerificationError naming `what`, the worst output, its diff and the tolerance
        (the error's `report` is this report)."""
        if self.ok:
            return
        worst = self.worst()
        assert worst is not None
        others = len(self.failures) - 1
        more = f"; {others} more output(s) differ" if others else ""
        where = f" at {self._sizes_text(self.sizes)}" if self.sizes else ""
        raise VerificationError(f"{what}{where}: {worst.describe()} ({self.tolerance()}){more}"
                                f"{self.rounding_note()}", report=self)


def _rounded_up(value: float) -> float:
    """`value` (> 0) rounded up to one significant digit: 0.00021 -> 0.0003."""
    scale = 10.0 ** math.floor(math.log10(value))
    return float(f"{math.ceil(value / scale * (1 - 1e-12)) * scale:.1g}")


def sizes_text(sizes: Mapping[str, int], given: Iterable[str] = ()) -> str:
    """Sizes of symbolic dims for a message: `batch=3, seq=5`; those named in `given` (sized
    by the caller, not chosen by the check) last, `batch=3 with seq=1, past=4 as given` (no
    brackets: the text often stands in brackets itself)."""
    given = set(given)
    chosen = ", ".join(f"{name}={size}" for name, size in sizes.items() if name not in given)
    kept = ", ".join(f"{name}={size}" for name, size in sizes.items() if name in given)
    if chosen and kept:
        return f"{chosen} with {kept} as given"
    return chosen or kept
