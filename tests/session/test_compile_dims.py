"""`ge.compile(dims=...)`: the sizes of symbolic dims in the generated verification inputs
(an audio front end needs more than 2 samples); refused with `inputs=` (nothing to size),
and a name the inputs do not have (saying so when their dynamic dims are unnamed, which no
name sizes) or a negative size is GE1602."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ge
from ge.errors import CompilerOptionError, SessionError, VerificationInputError
from ge.session.verification import generate_inputs
from sample_models import audio_front_end


def test_dims_size_the_generated_inputs() -> None:
    model = audio_front_end()
    # (every symbolic dim's size is said: trial AK's total length had to equal past + new)
    with pytest.raises(SessionError, match="symbolic dims batch=2, samples=2, each sized alone"):
        ge.compile(model, verify=True)
    result = ge.compile(model, verify=True, dims={"samples": 400})
    assert result.verification is not None and result.verification.ok


def test_dims_with_given_inputs_are_refused() -> None:
    model = audio_front_end()
    before = model.SerializeToString()
    with pytest.raises(CompilerOptionError) as info:
        ge.compile(model, verify=True, dims={"samples": 400},
                   inputs={"x": np.zeros((1, 400), np.float32)})
    assert info.value.code == "GE1202"
    assert "dims= sizes the symbolic dims of generated inputs" in info.value.message
    assert model.SerializeToString() == before


def _relu(dims: list[int | str | None], name: str = "unknown_dims") -> onnx.ModelProto:
    """A Relu of x with `dims` (None: a dynamic dim with no name, neither size nor
    dim_param, as exporters leave some)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], name, [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _refused(model: onnx.ModelProto, dims: dict[str, int]) -> VerificationInputError:
    """The error of compiling `model` with `dims`, checked to leave `model` as it was."""
    before = model.SerializeToString()
    with pytest.raises(VerificationInputError) as info:
        ge.compile(model, dims=dims)
    assert info.value.code == "GE1602"
    assert model.SerializeToString() == before
    return info.value


def test_dims_of_a_model_whose_dynamic_dims_are_unnamed_say_so() -> None:
    error = _refused(_relu([None, None, 4]), {"B": 3})
    assert error.message == (
        "dims 'B': graph 'unknown_dims' has no named (symbolic) dim to size; the dynamic dims "
        "of its input 'x' (float32 [?, ?, 4]) are unnamed ('?'): they are generated as 2 and "
        "can only be set by giving the inputs (--inputs FILE.npz, inputs=)")
    x = generate_inputs(_relu([None, None, 4]))["x"]
    assert x.shape == (2, 2, 4)  # what the message says they are


def test_a_wrong_dim_name_beside_unnamed_dims_names_both() -> None:
    error = _refused(_relu(["batch", None]), {"B": 3})
    assert error.message == (
        "dims 'B': each must name a symbolic dim of graph 'unknown_dims' (batch); the dynamic "
        "dims of its input 'x' (float32 [batch, ?]) are unnamed ('?'): they are generated as "
        "2 and can only be set by giving the inputs (--inputs FILE.npz, inputs=)")


def test_dims_of_a_static_model_and_bad_sizes_are_refused() -> None:
    error = _refused(_relu([1, 4], "static"), {"B": 3})
    assert error.message == ("dims 'B': graph 'static' has no named (symbolic) dim to size "
                             "(its inputs' dims are all static)")
    error = _refused(_relu(["B", 4]), {"B": -1})
    assert error.message == "dims 'B': each size must be an int >= 0, got {'B': -1}"
