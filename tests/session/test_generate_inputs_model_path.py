"""`generate_inputs`, `check_inputs`, `reference_outputs` and `verify` take a model as a
`Graph`, a ModelProto or the path of a model file (as `load_inputs` does), loaded with
`ge.graph.load`; anything else is `GraphTypeError` (GE1002) naming the argument."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

import ge.graph
from ge.errors import GraphTypeError, ModelNotFoundError, VerificationInputError
from ge.session import check_inputs, generate_inputs, reference_outputs, verify
from model_paths import shared_model

DISTILBERT = shared_model("distilbert_tiny")  # input_ids, attention_mask: int64 [1, 12]


@pytest.mark.parametrize("as_text", [True, False])
def test_generate_inputs_from_a_model_path(as_text: bool) -> None:
    path = str(DISTILBERT) if as_text else DISTILBERT
    inputs = generate_inputs(path, seed=4)
    expected = generate_inputs(ge.graph.load(DISTILBERT), seed=4)
    assert list(inputs) == list(expected) == ["input_ids", "attention_mask"]
    for name, array in expected.items():
        np.testing.assert_array_equal(inputs[name], array)
        assert inputs[name].dtype == np.int64 and inputs[name].shape == (1, 12)
    assert list(generate_inputs(onnx.load(DISTILBERT), seed=4)) == list(expected)


def test_check_reference_and_verify_take_paths_too() -> None:
    inputs = generate_inputs(str(DISTILBERT))
    check_inputs(inputs, str(DISTILBERT))
    with pytest.raises(VerificationInputError) as info:
        check_inputs({"input_ids": inputs["input_ids"]}, DISTILBERT)
    assert info.value.code == "GE1602" and "attention_mask" in info.value.message
    outputs = reference_outputs(str(DISTILBERT), inputs)
    assert list(outputs) == ["output"] and outputs["output"].shape == (1, 12, 48)
    report = verify(str(DISTILBERT), DISTILBERT, inputs=inputs)
    assert report.ok and report.worst() is not None and report.worst().max_abs_diff == 0


def test_a_missing_model_file_is_ge1102(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError) as info:
        generate_inputs(str(tmp_path / "model.onnx"))
    assert info.value.code == "GE1102"
    assert info.value.message == f"model file not found: {tmp_path / 'model.onnx'}"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("call", "argument"), [
    (lambda: generate_inputs(3), "model"),  # type: ignore[arg-type]
    (lambda: check_inputs({}, b"model.onnx"), "model"),  # type: ignore[arg-type]
    (lambda: verify(DISTILBERT, None), "compiled"),  # type: ignore[arg-type]
])
def test_anything_else_is_a_graph_type_error(call, argument: str) -> None:
    with pytest.raises(GraphTypeError) as info:
        call()
    assert info.value.code == "GE1002"
    assert info.value.message.startswith(
        f"{argument} must be a ge.graph.Graph, an onnx.ModelProto or the path of a model "
        "file, got ")
    assert isinstance(info.value, TypeError)
