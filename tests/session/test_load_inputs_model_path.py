"""`load_inputs(path, model)` takes the model as a path too (as `ge.testing` does), loaded
with `ge.graph.load`; a missing model file is GE1102, a bad inputs file GE1602 as before.
`Session.add_graph` takes a `Graph` only (GE's signature), as docs/session.md says."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ge.graph
from ge.errors import GraphTypeError, ModelNotFoundError, VerificationInputError
from ge.session import Session, load_inputs


def _model_file(tmp_path: Path) -> Path:
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"])], "add",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, ["n", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    path = tmp_path / "add.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("as_text", [True, False])
def test_the_model_may_be_a_path(tmp_path: Path, as_text: bool) -> None:
    model = _model_file(tmp_path)
    inputs = tmp_path / "in.npz"
    arrays = {"a": np.ones((2, 3), np.float32), "b": np.zeros((2, 3), np.float32)}
    np.savez(inputs, **arrays)
    loaded = load_inputs(str(inputs), str(model) if as_text else model)
    assert list(loaded) == ["a", "b"]
    for name, array in arrays.items():
        np.testing.assert_array_equal(loaded[name], array)


def test_inputs_are_checked_against_the_model_file(tmp_path: Path) -> None:
    model = _model_file(tmp_path)
    inputs = tmp_path / "in.npz"
    np.savez(inputs, a=np.ones((2, 3), np.float64))
    with pytest.raises(VerificationInputError) as info:
        load_inputs(inputs, model)
    assert info.value.code == "GE1602"
    assert "input 'a': expected float32 [2, 3], got float64 [2, 3]" in info.value.message
    assert "input 'b'" in info.value.message  # missing


def test_a_missing_model_file_is_ge1102(tmp_path: Path) -> None:
    inputs = tmp_path / "in.npz"
    np.savez(inputs, a=np.ones((2, 3), np.float32))
    with pytest.raises(ModelNotFoundError) as info:
        load_inputs(inputs, tmp_path / "missing.onnx")
    assert info.value.code == "GE1102"
    assert info.value.message.startswith("model file not found: ")
    assert "missing.onnx" in info.value.message


def test_session_add_graph_takes_a_graph_only(tmp_path: Path) -> None:
    model = _model_file(tmp_path)
    session = Session()
    with pytest.raises(GraphTypeError) as info:
        session.add_graph(1, onnx.load(model))  # type: ignore[arg-type]
    assert info.value.code == "GE1002"
    session.add_graph(1, ge.graph.load(model))
    assert session.get_graph_ids() == [1]
