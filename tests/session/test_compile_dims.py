"""`ge.compile(dims=...)`: the sizes of symbolic dims in the generated verification inputs
(an audio front end needs more than 2 samples); refused with `inputs=` (nothing to size)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

import ge
from ge.errors import CompilerOptionError, SessionError


def _audio_front_end() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    graph = h.make_graph(
        [h.make_node("Unsqueeze", ["x", "one"], ["x3"]),
         h.make_node("Conv", ["x3", "w"], ["y"], strides=[5])], "g",
        [h.make_tensor_value_info("x", TP.FLOAT, ["batch", "samples"])],
        [h.make_tensor_value_info("y", TP.FLOAT, ["batch", 8, "frames"])],
        [nh.from_array(rng.standard_normal((8, 1, 10)).astype(np.float32), "w"),
         nh.from_array(np.array([1], np.int64), "one")])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def test_dims_size_the_generated_inputs() -> None:
    model = _audio_front_end()
    with pytest.raises(SessionError, match="symbolic dims of 2 unless sized"):
        ge.compile(model, verify=True)
    result = ge.compile(model, verify=True, dims={"samples": 400})
    assert result.verification is not None and result.verification.ok


def test_dims_with_given_inputs_are_refused() -> None:
    model = _audio_front_end()
    before = model.SerializeToString()
    with pytest.raises(CompilerOptionError) as info:
        ge.compile(model, verify=True, dims={"samples": 400},
                   inputs={"x": np.zeros((1, 400), np.float32)})
    assert info.value.code == "GE1202"
    assert "dims= sizes the symbolic dims of generated inputs" in info.value.message
    assert model.SerializeToString() == before
