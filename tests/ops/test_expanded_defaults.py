"""Operators onnx types by expanding their function body, left at an attribute's default
(P's finding): onnx 1.23 resolves the body's reference to that attribute to nothing and
rejects the body, so ge could not compile a MeanVarianceNormalization without `axes`
(GE1305 at InferShape) that onnxruntime runs; onnx.checker's full check rejects it alike.
Inference now reads the default written out; a compilation writes it on the node."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import ge
import ge.graph
import ge.ops


def _mvn(path: Path, opset: int) -> Path:
    graph = helper.make_graph(
        [helper.make_node("MeanVarianceNormalization", ["x"], ["y"], name="mvn")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_inference_types_it_and_the_model_stays_as_it_was(tmp_path: Path) -> None:
    path = _mvn(tmp_path / "mvn.onnx", 18)
    graph = ge.graph.load(path)
    ge.ops.infer_shapes(graph, strict=True)  # GE1305 before
    node = graph.nodes_of_type("MeanVarianceNormalization")[0]
    assert node.get_output_desc(0).shape.get_dims() == [1, 3, 4, 4]
    assert not node.has_attr("axes")
    graph.save(tmp_path / "again.onnx")
    assert (tmp_path / "again.onnx").read_bytes() == path.read_bytes()


@pytest.mark.builtin_passes
@pytest.mark.parametrize("opset", [13, 18])
def test_a_compilation_writes_the_default_and_the_checker_passes(tmp_path: Path,
                                                                  opset: int) -> None:
    path = _mvn(tmp_path / "mvn.onnx", opset)
    result = ge.compile(path, verify=True)
    out = tmp_path / "out.onnx"
    result.save(out)
    model = onnx.load(out)
    onnx.checker.check_model(model, full_check=True)
    assert [(a.name, list(a.ints)) for a in model.graph.node[0].attribute] == [
        ("axes", [0, 2, 3])]
    x = np.random.default_rng(0).random((1, 3, 4, 4), dtype=np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)


def test_one_node_built_alone_gets_its_shape() -> None:
    """The ES builder types one node at a time, where onnx gives an operator it types by
    its body no shape (trial U: an MVN's output was of unknown rank, so nothing built on it
    was checked)."""
    import ge.es.all as es
    from ge.es import GraphBuilder

    builder = GraphBuilder("b", opset=18)
    x = builder.create_input(0, shape=[1, 6, 4, 4])
    assert es.MeanVarianceNormalization(x).get_tensor_desc().shape.get_dims() == [1, 6, 4, 4]
