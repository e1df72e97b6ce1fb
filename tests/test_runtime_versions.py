"""What ge makes from nothing runs in the installed onnxruntime, even one older than onnx
(`ge._compat`): onnxruntime 1.23, the last for Python 3.10, reads IR 11 and opset 23 while
onnx 1.23 writes IR 14 and knows opset 28."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

import ge.testing
from ge._compat import (
    ir_version_of_opset,
    new_model_ir_version,
    new_model_opset,
    runtime_ir_version,
    runtime_opset,
)
from ge.es import GraphBuilder
from ge.es.onnx import Relu
from ge.graph import Graph


def _runs(model: onnx.ModelProto) -> None:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (x,) = session.get_inputs()
    shape = [d if isinstance(d, int) else 2 for d in x.shape]
    session.run(None, {x.name: np.ones(shape, np.float32)})


def test_the_ir_version_of_an_opset_is_that_of_its_onnx_release() -> None:
    assert ir_version_of_opset(21) == 10  # onnx 1.16, read by onnxruntime 1.19
    assert ir_version_of_opset(23) == 11  # onnx 1.18, read by onnxruntime 1.23
    assert ir_version_of_opset(10**6) == onnx.IR_VERSION  # a runtime newer than onnx


def test_a_new_model_gets_what_both_onnx_and_onnxruntime_know() -> None:
    assert new_model_opset() == min(onnx.defs.onnx_opset_version(), runtime_opset())
    assert new_model_ir_version() == min(onnx.IR_VERSION, runtime_ir_version())
    graph = Graph("new")
    assert graph.model.ir_version == new_model_ir_version()
    assert graph.opset_imports[""] == new_model_opset()


def test_a_built_graph_runs_in_onnxruntime() -> None:
    builder = GraphBuilder("built")
    x = builder.create_input(0, name="x", shape=["n", 3])
    graph = builder.build_and_reset([Relu(x)])
    assert graph.opset_imports[""] == new_model_opset()
    _runs(graph.to_onnx())


def test_a_testing_model_runs_in_onnxruntime() -> None:
    model = ge.testing.make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", [2, 3])],
                                  [("y", [2, 3])])
    assert model.ir_version == new_model_ir_version()
    _runs(model)
