"""`.npz` files of values (`ge.session.npz`): what `ge run --output` writes, `--inputs` and
`load_inputs` read, never with pickle. Tensors are arrays under their names (strings as str
arrays); sequences, maps and optionals are described by the JSON entry `__ge_values__`,
their tensors in entries of their own. Trial E: seq(map) outputs were written as pickled
object arrays that ge's own reader refused, and an object array of strings (pandas,
skl2onnx users) was refused without saying that a str dtype works."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ge.errors import VerificationInputError
from ge.session import load_inputs
from ge.session.npz import VALUES_ENTRY, read_npz, write_npz
from nested_value_models import dict_vectorizer, optional_input, sequence_concat

F32 = np.float32


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return (isinstance(b, np.ndarray) and a.dtype == b.dtype
                and np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return (isinstance(b, dict) and list(a) == list(b)
                and all(type(k) is type(j) for k, j in zip(a, b))
                and all(_same(a[k], b[k]) for k in a))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return type(a) is type(b) and a == b


VALUES: dict[str, Any] = {
    "t": np.arange(6, dtype=F32).reshape(2, 3),
    "file": np.array(3, np.int64),  # np.savez(f, file=...) fails: a name like any other
    "ragged": [np.ones(1, F32), np.arange(3, dtype=np.int64)],
    "probabilities": [{0: 0.25, 1: 0.75}, {0: float("nan"), 1: float("inf")}],
    "words": {"cat": 1.5, "dog": -2.0},
    "nested": [[np.zeros((0, 2), F32)], [], [{"k": "v"}]],
    "empty": None,
    "labels": np.array(["a", "bb"], dtype=object),  # onnxruntime's strings
}


def test_values_round_trip_without_pickle(tmp_path: Path) -> None:
    path = tmp_path / "values.npz"
    write_npz(path, VALUES)
    back = read_npz(path)
    assert list(back) == ["t", "file", "labels", "ragged", "probabilities", "words",
                          "nested", "empty"]
    for name, value in VALUES.items():
        if name == "labels":  # written as a str array: equal values, no pickle
            assert back[name].dtype.kind == "U" and back[name].tolist() == ["a", "bb"]
            continue
        assert _same(value, back[name]), name
    with np.load(path, allow_pickle=False) as data:  # every entry loads without pickle
        entries = {name: data[name] for name in data.files}
    assert sorted(entries) == sorted(["t", "file", "labels", "ragged[0]", "ragged[1]",
                                      "nested[0][0]", VALUES_ENTRY])
    described = json.loads(str(entries[VALUES_ENTRY]))
    assert described["ragged"] == [{"array": "ragged[0]"}, {"array": "ragged[1]"}]
    assert described["words"] == {"map": [["cat", 1.5], ["dog", -2.0]]}
    assert described["empty"] is None


def test_a_stream_is_written_too_and_entry_names_never_clash(tmp_path: Path) -> None:
    stream = io.BytesIO()
    write_npz(stream, {"y[0]": np.ones(1, F32), "y": [np.zeros(2, F32)]})
    path = tmp_path / "s.npz"
    path.write_bytes(stream.getvalue())
    back = read_npz(path)
    assert back["y[0]"].tolist() == [1] and back["y"][0].tolist() == [0, 0]
    with np.load(path) as data:
        assert sorted(data.files) == [VALUES_ENTRY, "y[0]", "y[0]#1"]


def test_inputs_of_a_sequence_model_are_read_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "in.npz"
    write_npz(path, {"x": [np.ones(1, F32), np.arange(2, dtype=F32)]})
    x = load_inputs(path, sequence_concat())["x"]
    assert [a.tolist() for a in x] == [[1], [0, 1]]
    write_npz(path, {"x": None})
    assert load_inputs(path, optional_input()) == {"x": None}
    write_npz(path, {"d": {"a": 1.0}})
    assert load_inputs(path, dict_vectorizer()) == {"d": {"a": 1.0}}
    write_npz(path, {"x": [np.ones(1, np.float64)]})
    with pytest.raises(VerificationInputError) as info:
        load_inputs(path, sequence_concat())
    assert info.value.message == ("inputs do not fit graph 'g': input 'x': element [0]: "
                                  "expected tensor(float) [n], got float64 [1]")


def test_an_object_array_is_refused_saying_what_to_save_instead(tmp_path: Path) -> None:
    path = tmp_path / "obj.npz"
    np.savez(path, text=np.array([["the cat"], ["a dog"]], dtype=object))
    with pytest.raises(VerificationInputError) as info:
        load_inputs(path, dict_vectorizer())
    assert info.value.code == "GE1602"
    assert info.value.message == (
        f"cannot read inputs from {path}: 'text' is an object array (dtype=object), which "
        "numpy stores pickled and ge does not load (a pickle can run code): save strings "
        f"with a str dtype, np.savez({str(path)!r}, text=array.astype(str)); a sequence or "
        "map as docs/session.md says")
    one = tmp_path / "obj.npy"
    np.save(one, np.array(["a"], dtype=object))
    with pytest.raises(VerificationInputError) as info:
        load_inputs(one, dict_vectorizer())
    assert info.value.message.endswith(
        "an object array (dtype=object) is stored pickled, which ge does not load; save "
        "strings with a str dtype (array.astype(str))")


@pytest.mark.parametrize(("described", "why"), [
    ("not json", "Expecting value: line 1 column 1 (char 0)"),
    ('["x"]', "a JSON list, not an object of values"),
    ('{"x": {"array": "x[0]"}}', "no entry 'x[0]' holds the array it names"),
    ('{"x": {"map": [[[1], 2.0]]}}',
     "a map's entries are [key, value] with an int or str key, got [[1], 2.0]"),
    ('{"x": {"tensor": 1}}', '{"tensor": 1} is no value'),
])
def test_a_values_entry_ge_did_not_write_is_refused(tmp_path: Path, described: str,
                                                    why: str) -> None:
    path = tmp_path / "bad.npz"
    np.savez(path, **{VALUES_ENTRY: np.array(described)})
    with pytest.raises(VerificationInputError) as info:
        load_inputs(path, sequence_concat())
    assert info.value.code == "GE1602"
    assert info.value.message == (f"cannot read inputs from {path}: its entry "
                                  f"'__ge_values__' is not what ge writes ({why}); see "
                                  "docs/session.md")
