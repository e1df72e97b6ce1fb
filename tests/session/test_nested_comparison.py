"""Comparing sequence, map and optional outputs: walked, not turned into one array.

Their structure must be the same (a sequence's length, a map's keys, None where None), and
their tensors and map values are compared as tensor outputs are, within
`atol + rtol * |expected|`; a failure names the output and the element (`[3][1]`: the
fourth map's key 1). Trial O: a ragged sequence output crashed the comparison with numpy's
ValueError; trial E: ZipMap's seq(map) output was compared as strings, exactly, so a last
bit off failed verification (GE1603, max abs diff inf), and labelled "string"."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import ge
from ge.errors import VerificationError
from ge.session import compare_outputs, run_model, verify
from ge.testing import assert_numerically_equal
from nested_value_models import split_to_sequence, zipmap, zipmap_inputs

F32 = np.float32


def _one(expected: Any, actual: Any, **kw: Any) -> Any:
    (out,) = compare_outputs({"y": expected}, {"y": actual}, **kw).outputs
    return out


def test_a_ragged_sequence_is_compared_element_by_element() -> None:
    e = [np.array([1.0], F32), np.array([2.0, 3.0], F32)]
    out = _one(e, [np.array([1.0], F32), np.array([2.0, 3.00001], F32)])
    assert out.ok and out.max_abs_diff == pytest.approx(1e-5, rel=0.1)
    assert (out.expected_shape, out.expected_dtype, out.size) == ((2,), "seq(tensor(float))", 3)
    assert out.worst_path == (1,) and out.worst_index == (1,)
    out = _one(e, [np.array([1.0], F32), np.array([2.0, 3.5], F32)])
    assert not out.ok and out.mismatches == 1
    assert out.describe() == ("output 'y': max abs diff 0.5, worst at [1] index [1] (expected "
                              "3, got 3.5), 1 of 3 elements beyond tolerance")


def test_maps_are_compared_by_key_within_tolerance() -> None:
    e = [{0: 0.3465520441532135, 1: 0.5}, {0: 0.25, 1: 0.75}]
    last_bit = [{0: 0.3465520143508911, 1: 0.5}, {0: 0.25, 1: 0.75}]
    out = _one(e, last_bit)
    assert out.ok and 0 < out.max_abs_diff < 1e-7
    assert (out.expected_dtype, out.expected_shape, out.size) == (
        "seq(map(int64, float))", (2,), 4)
    off = [{0: 0.3465520441532135, 1: 0.5}, {1: 0.75, 0: 0.35}]  # key order does not count
    out = _one(e, off)
    assert not out.ok and (out.worst_path, out.worst_index) == ((1, 0), ())
    assert out.describe() == ("output 'y': max abs diff 0.1, worst at [1][0] (expected 0.25, "
                              "got 0.35), 1 of 4 elements beyond tolerance")
    strings = _one([{"cat": "a"}], [{"cat": "b"}])
    assert not strings.ok and strings.worst_path == (0, "cat")
    assert "worst at [0]['cat'] (expected a, got b)" in strings.describe()


@pytest.mark.parametrize(("expected", "actual", "reason"), [
    ([np.ones(2, F32)] * 3, [np.ones(2, F32)] * 2, "length 2 instead of 3"),
    ([{0: 1.0, 1: 2.0}], [{0: 1.0, 2: 2.0}],
     "at [0]: keys [1] missing, keys [2] not expected"),
    ([np.ones(2, F32)], [np.ones(3, F32)], "at [0]: shape [3] instead of [2]"),
    ([np.ones(2, F32)], [np.ones(2)], "at [0]: dtype float64 instead of float32"),
    (None, np.ones(2, F32), "a value instead of None"),
    (np.ones(2, F32), None, "None instead of a value"),
    ([{0: 1.0}], [[1.0]], "at [0]: a sequence instead of a map"),
    ([np.ones(1, F32)], np.ones((1, 1), F32), "a tensor instead of a sequence"),
])
def test_differences_of_structure_fail_saying_where(expected: Any, actual: Any,
                                                     reason: str) -> None:
    out = _one(expected, actual)
    assert not out.ok and out.reason == reason
    assert out.describe() == f"output 'y': {reason}"
    report = compare_outputs({"y": expected}, {"y": actual})
    with pytest.raises(VerificationError) as info:
        report.raise_if_failed("check")
    assert info.value.code == "GE1603"
    assert info.value.message.startswith(f"check: output 'y': {reason}")


def test_equal_structures_without_elements_are_equal() -> None:
    for value in (None, [], {}, [{}]):
        out = _one(value, value)
        assert out.ok and out.size == 0, value
    assert _one(None, None).expected_dtype == "None"


def test_a_report_with_nested_outputs_is_json_ready() -> None:
    import json

    report = compare_outputs({"y": [{0: 0.5}], "o": None, "s": [np.ones(1, F32)]},
                             {"y": [{0: 0.6}], "o": None, "s": [np.ones(1, F32)]})
    data = json.loads(json.dumps(report.as_dict()))
    y = data["outputs"][0]
    assert (y["name"], y["ok"], y["worst_path"], y["expected_dtype"]) == (
        "y", False, [0, 0], "seq(map(int64, float))")
    assert data["outputs"][1]["expected_shape"] is None  # an empty optional


def test_missing_and_random_nested_outputs_are_reported_without_arrays() -> None:
    e = {"y": [np.ones(1, F32), np.ones(2, F32)]}
    missing = compare_outputs(e, {})
    (out,) = missing.outputs
    assert out.reason == "missing from the actual model's outputs" and out.size == 3
    skipped = compare_outputs(e, e, not_compared={"y": "not compared: random"})
    assert skipped.ok and skipped.outputs[0].expected_dtype == "seq(tensor(float))"
    extra = compare_outputs({}, e)
    assert extra.outputs[0].actual_shape == (2,)


def test_a_ragged_sequence_output_is_verified() -> None:
    """Trial O's crash: `np.asarray` of [array([1.]), array([2., 3.])]."""
    feeds = {"x": np.array([1, 2, 3], F32), "split": np.array([1, 2], np.int64)}
    result = ge.compile(split_to_sequence(), inputs=feeds)
    assert result.verification is not None and result.verification.ok
    assert result.verification.summary().startswith("ok: 1 output(s) match")


# -- ZipMap: a last bit off passes, a real difference fails naming the element --------------


def test_zipmap_outputs_a_last_bit_off_are_within_tolerance() -> None:
    feeds = zipmap_inputs()
    expected = run_model(zipmap(), feeds)["Y"]
    actual = run_model(zipmap(reciprocal=False), feeds)["Y"]
    assert expected != actual  # X * (1/S) and X / S: some probabilities a last bit apart
    report = verify(zipmap(), zipmap(reciprocal=False), inputs=feeds)
    (out,) = report.outputs
    assert report.ok and 0 < out.max_abs_diff < 1e-6 and out.mismatches == 0
    assert (out.expected_dtype, out.expected_shape, out.size) == (
        "seq(map(int64, float))", (64,), 192)
    assert_numerically_equal(zipmap(), zipmap(reciprocal=False), feeds)


def test_zipmap_outputs_that_differ_fail_naming_the_output_and_the_element() -> None:
    feeds = zipmap_inputs()
    report = verify(zipmap(), zipmap(scale=1.5), inputs=feeds)
    (out,) = report.outputs
    assert not report.ok and out.mismatches > 0 and math.isfinite(out.max_abs_diff)
    row, key = out.worst_path  # type: ignore[misc]
    e, a = (run_model(m, feeds)["Y"][row][key] for m in (zipmap(), zipmap(scale=1.5)))
    assert (out.expected_value, out.actual_value) == (e, a)
    assert out.describe().startswith(
        f"output 'Y': max abs diff {out.max_abs_diff:.3g}, worst at [{row}][{key}] ")
    with pytest.raises(AssertionError) as info:
        assert_numerically_equal(zipmap(), zipmap(scale=1.5), feeds)
    text = str(info.value)
    assert f"worst at [{row}][{key}]" in text and "output 'Y'" in text
    assert "inputs (given): X float32[64, 3]" in text
