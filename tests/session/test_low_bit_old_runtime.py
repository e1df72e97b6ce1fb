"""Under an onnxruntime that makes no OrtValue of float8, 4-bit or 2-bit values from Python
(1.19, the floor: `ortvalue_from_numpy_with_onnx_type` and `tensor_size_in_bytes` came
later), a model with such an input or output is one RuntimeLoadError before anything runs,
naming it and what onnxruntime lacks (it failed inside the run, 'Not a valid numpy type',
blaming generated inputs). With a newer onnxruntime such models run
(test_low_bit_io.py)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto

from ge.errors import RuntimeLoadError
from ge.graph.types import elem_type_name
from ge.session import run_model
from low_bit_models import EXCHANGE, dequantize_model, quantize_model

pytestmark = pytest.mark.skipif(EXCHANGE, reason=f"onnxruntime {ort.__version__} exchanges "
                                                 "them (test_low_bit_io.py runs them)")


@pytest.mark.parametrize(("model", "role", "name", "type_name"), [
    (dequantize_model(TensorProto.FLOAT8E4M3FN), "input", "x",
     elem_type_name(TensorProto.FLOAT8E4M3FN)),
    (quantize_model(TensorProto.INT4), "output", "q", elem_type_name(TensorProto.INT4)),
], ids=["input", "output"])
def test_an_old_runtime_refuses_low_bit_values_before_running(
        model, role: str, name: str, type_name: str) -> None:
    inputs = ({"x": np.zeros((3, 5), np.float32)} if role == "output" else {})
    with pytest.raises(RuntimeLoadError) as caught:
        run_model(model, inputs)
    assert caught.value.code == "GE1601"
    assert str(caught.value) == (
        f"[GE1601] onnxruntime {ort.__version__} cannot exchange {role} {name!r} "
        f"({type_name}) of graph 'g' with Python: its OrtValue has no "
        "ortvalue_from_numpy_with_onnx_type or tensor_size_in_bytes (a newer onnxruntime "
        "has them)")
