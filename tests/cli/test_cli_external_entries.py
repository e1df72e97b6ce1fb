"""External-data entries a model gets wrong are the model's error, said at load and by
`ge inspect` (trial UU): an external tensor naming no location was read as if it had no
external data (loading looks for the word 'location' first) and failed later inside a pass
as "a bug in ge"; an offset that is no integer was a raw ValueError."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_helpers import run_ge
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper

import ge
import ge.graph
from ge.errors import ExternalDataError, ModelLoadError


def _model(folder: Path, entries: list[tuple[str, str]]) -> Path:
    weight = numpy_helper.from_array(np.arange(4, dtype=np.float32), "w")
    weight.ClearField("raw_data")
    weight.data_location = TP.EXTERNAL
    for key, value in entries:
        entry = weight.external_data.add()
        entry.key, entry.value = key, value
    graph = oh.make_graph([oh.make_node("Add", ["x", "w"], ["y"], name="add")], "g",
                          [oh.make_tensor_value_info("x", TP.FLOAT, [4])],
                          [oh.make_tensor_value_info("y", TP.FLOAT, [4])], [weight])
    path = folder / "m.onnx"
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]), path)
    (folder / "d.data").write_bytes(bytes(256))
    return path


@pytest.mark.parametrize(("entries", "error", "code", "message"), [
    ([("offset", "0")], ModelLoadError, "GE1101",
     "graph 'g': initializer 'w' is marked as stored in an external data file but names "
     "none (no 'location' entry): the model is malformed"),
    ([("location", "d.data"), ("offset", "abc")], ExternalDataError, "GE1103",
     "tensor 'w': external data offset 'abc' is not an integer (in d.data)"),
    ([("location", "d.data"), ("length", "16.0")], ExternalDataError, "GE1103",
     "tensor 'w': external data length '16.0' is not an integer (in d.data)"),
])
def test_bad_external_entries_are_the_models_error(
        tmp_path: Path, entries: list[tuple[str, str]], error: type, code: str,
        message: str) -> None:
    path = _model(tmp_path, entries)
    listed = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(error) as caught:
        ge.graph.load(path)
    assert caught.value.code == code and message in caught.value.message
    with pytest.raises(error):
        ge.compile(path)
    for command in (["inspect", str(path)], ["compile", str(path), "-o",
                                             str(tmp_path / "out.onnx")]):
        status, _, err = run_ge(*command)
        assert status == 1 and f"[{code}]" in err and message in err
    assert sorted(p.name for p in tmp_path.iterdir()) == listed  # nothing written
