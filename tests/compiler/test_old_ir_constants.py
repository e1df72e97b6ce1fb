"""A model of ir_version < 4 keeps every constant a `Constant` operator.

In IR 3 (the ONNX model zoo's opset-9 models) an initializer must also be a graph input,
an overridable default; a value ConstantFolding made was written as an initializer alone,
so ge's own save refused its output (GE1003) and the compilation failed (trial D: the
zoo's SqueezeNet with --opset 20, whose converted Softmax reads a foldable Shape).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

import ge

pytestmark = pytest.mark.builtin_passes  # (ConstantFolding makes the constant)


def _ir3_model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Shape", ["x"], ["s"], name="shape"),
         helper.make_node("Cast", ["s"], ["c"], name="cast", to=TensorProto.FLOAT),
         helper.make_node("Add", ["x", "c"], ["y"], name="add")],
        "ir3", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)], ir_version=3)
    onnx.checker.check_model(model, full_check=True)
    return model


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def test_a_folded_value_of_an_ir3_model_is_a_constant_operator(tmp_path: Path) -> None:
    model = _ir3_model()
    result = ge.compile(model)
    out = tmp_path / "out.onnx"
    result.save(out)
    saved = onnx.load(out)
    onnx.checker.check_model(saved, full_check=True)
    assert saved.ir_version == 3
    assert [n.op_type for n in saved.graph.node] == ["Constant", "Add"]
    assert not saved.graph.initializer
    assert [i.name for i in saved.graph.input] == ["x"]
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_array_equal(_run(saved, x), _run(model, x))


def test_an_ir4_model_still_gets_initializers() -> None:
    model = _ir3_model()
    model.ir_version = 4
    saved = ge.compile(model).to_onnx()
    assert [n.op_type for n in saved.graph.node] == ["Add"]
    assert len(saved.graph.initializer) == 1
