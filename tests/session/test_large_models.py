"""Models over protobuf's 2 GiB limit (a 2.4 GB Llama in a user trial): running them
(`--verify`, `ge run`) takes the external-data route, and saving one without external data
is refused up front, one line, nothing written. The limits are lowered here: the real
thing takes minutes and gigabytes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from google.protobuf.message import EncodeError
from onnx import TensorProto, helper, numpy_helper

import ge
import ge.graph.model_io as model_io
import ge.session.runner as runner
from ge.errors import ModelSaveError
from ge.session import run_model


def _model() -> onnx.ModelProto:
    weight = numpy_helper.from_array(np.arange(4096, dtype=np.float32).reshape(64, 64), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 64])], [weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


class _Refusing:
    """A message protobuf refuses to serialize, as upb refuses one over 2 GiB."""

    def SerializeToString(self) -> bytes:
        raise EncodeError("Failed to serialize proto")


def test_a_model_protobuf_refuses_is_not_an_error_of_the_runtime() -> None:
    """It was: `ByteSize()` itself raised, before the external-data fallback (GE1601
    blaming onnxruntime)."""
    assert runner.serialized_or_none(_Refusing()) is None
    assert runner.serialized_or_none(_model()) == _model().SerializeToString()


def test_a_model_over_the_inline_limit_runs_through_external_data(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "_INLINE_LIMIT", 1024)  # the 16 KiB weight is "too large"
    x = np.ones((2, 64), np.float32)
    got = run_model(_model(), {"x": x})["y"]
    np.testing.assert_allclose(got, x @ np.arange(4096, dtype=np.float32).reshape(64, 64))


def test_saving_too_much_without_external_data_is_refused_up_front(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_io, "PROTOBUF_LIMIT", 1024)
    result = ge.compile(_model(), builtin_passes=False)
    out = tmp_path / "out.onnx"
    with pytest.raises(ModelSaveError) as caught:
        result.save(out, external_data=False)
    assert caught.value.code == "GE1104"
    assert str(caught.value).endswith(
        "without external data: its constants alone are 0.0 GiB, over protobuf's 2 GiB limit "
        "for one file; save with external data (--external-data)")
    assert list(tmp_path.iterdir()) == []
    assert result.save(out) is None and out.exists()  # automatic: inline below the limit
