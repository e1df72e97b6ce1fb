"""`ge.compile(inputs=...)` takes a mapping of input names to arrays or the path of an `.npz`
file; anything else (a list of arrays, one array) is `CompilerOptionTypeError` (GE1202, a
`TypeError`) naming what it got, before anything runs or is written. A list was read with
`.items()`: a raw AttributeError."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ge
import ge.graph
from ge.errors import CompilerOptionError, CompilerOptionTypeError
from model_paths import shared_model

MODEL = shared_model("gelu_mlp_opset20")  # one input, "input" [4, 32]
ARRAY = np.zeros((4, 32), np.float32)
WANTED = ("inputs must be a mapping of input names to arrays ({'x': array, ...}) or the path "
          "of an .npz file, got ")


@pytest.mark.parametrize(("inputs", "message"), [
    ([1, 2, 3], WANTED + "the list [1, 2, 3]"),
    ((np.zeros(2, np.float32),), WANTED + "the tuple (array([0., 0.], dtype=float32),)"),
    (ARRAY, WANTED + "the ndarray of shape (4, 32) and dtype float32"),
    (3, WANTED + "the int 3"),
    (b"inputs.npz", WANTED + "the bytes b'inputs.npz'"),
    ({0: ARRAY}, "inputs must map input names (str) to arrays, got the int 0 as a name"),
])
@pytest.mark.parametrize("verify", [True, None])
def test_inputs_of_another_type_are_refused_naming_it(
        tmp_path: Path, inputs: object, message: str, verify: bool | None) -> None:
    graph = ge.graph.load(MODEL)
    before = graph.to_onnx().SerializeToString()
    dump = tmp_path / "dumps"
    with pytest.raises(CompilerOptionTypeError) as info:
        ge.compile(graph, inputs=inputs, verify=verify, dump=dump)  # type: ignore[arg-type]
    assert isinstance(info.value, CompilerOptionError) and isinstance(info.value, TypeError)
    assert info.value.code == "GE1202"
    assert info.value.message == message
    assert graph.to_onnx().SerializeToString() == before
    assert list(tmp_path.iterdir()) == []  # not even the dump folder


def test_a_mapping_and_an_npz_path_are_taken(tmp_path: Path) -> None:
    feeds = {"input": np.random.default_rng(0).standard_normal((4, 32), np.float32)}
    path = tmp_path / "inputs.npz"
    np.savez(path, **feeds)
    for inputs in (feeds, path, str(path)):
        result = ge.compile(MODEL, inputs=inputs, builtin_passes=False)
        assert result.verification is not None and result.verification.ok
