"""A graph's quantization annotations are saved for the values it still defines: one of a
value a pass removed is dropped (a quantization tool would read a removed value's scale;
trial Y), one naming no value from the start is kept as read, and an untouched model saves
byte-identical. The tensors holding a kept annotation's parameters are kept too, although
no node reads them (dead-code elimination removed them; trial BB)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
from ge.graph import load


def _annotate(graph: onnx.GraphProto, name: str) -> None:
    annotation = graph.quantization_annotation.add()
    annotation.tensor_name = name
    entry = annotation.quant_parameter_tensor_names.add()
    entry.key, entry.value = "SCALE_TENSOR", f"{name}_scale"


def _model() -> onnx.ModelProto:
    """x -> Identity -> a -> Relu -> y, annotations on a, y, a body value and a name
    the graph never defined."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["inner"]),
         helper.make_node("Neg", ["inner"], ["out"])],
        "then", [], [helper.make_tensor_value_info("out", TensorProto.FLOAT, [3])])
    _annotate(body, "inner")
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["y"]),
         helper.make_node("Relu", ["x"], ["c"]),
         helper.make_node("If", ["cond"], ["z"], then_branch=body, else_branch=body)],
        "annotated",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [3])])
    for name in ("a", "y", "ghost"):
        _annotate(graph, name)
    for name in ("a", "y"):
        graph.initializer.append(numpy_helper.from_array(np.array(0.1, np.float32),
                                                         f"{name}_scale"))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    return model


def _annotated(graph: onnx.GraphProto) -> list[str]:
    return [a.tensor_name for a in graph.quantization_annotation]


def test_an_untouched_model_keeps_every_annotation_byte_identical() -> None:
    model = _model()
    assert load(model).to_onnx().SerializeToString() == model.SerializeToString()


@pytest.mark.builtin_passes
def test_annotations_of_removed_values_are_dropped() -> None:
    model = _model()
    result = ge.compile(model)
    written = result.to_onnx()
    onnx.checker.check_model(written, full_check=True)
    names = {o for n in written.graph.node for o in n.output}
    assert "a" not in names  # the Identity went, and with it the value a
    assert _annotated(written.graph) == ["y", "ghost"]
    assert [t.name for t in written.graph.initializer] == ["y_scale"]  # (a's went with a)
    assert load(written).quantization_annotations() == {
        "y": {"SCALE_TENSOR": "y_scale"}, "ghost": {"SCALE_TENSOR": "ghost_scale"}}
    bodies = [attr.g for node in written.graph.node for attr in node.attribute
              if attr.type == onnx.AttributeProto.GRAPH]
    assert bodies and all(_annotated(body) == [] for body in bodies)
    feeds = {"x": np.array([-1.0, 0.0, 2.0], np.float32), "cond": np.array(True)}
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    got = ort.InferenceSession(written.SerializeToString()).run(None, feeds)
    for expected, actual in zip(want, got):
        np.testing.assert_array_equal(actual, expected)


@pytest.mark.builtin_passes
def test_a_named_scale_is_not_merged_into_an_equal_constant() -> None:
    """ConstantDeduplication merged the annotated scale s1 into an equal s0 and removed it:
    the annotation of a (still there) named nothing (trial FF)."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"]),
         helper.make_node("Mul", ["a", "s0"], ["y0"]), helper.make_node("Mul", ["a", "s1"],
                                                                        ["y1"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y0", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("y1", TensorProto.FLOAT, [3])],
        [numpy_helper.from_array(np.array(0.5, np.float32), name) for name in ("s0", "s1")])
    annotation = graph.quantization_annotation.add()
    annotation.tensor_name = "a"
    entry = annotation.quant_parameter_tensor_names.add()
    entry.key, entry.value = "SCALE_TENSOR", "s1"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    written = ge.compile(model).to_onnx()
    assert "s1" in {t.name for t in written.graph.initializer}
    assert _annotated(written.graph) == ["a"]


@pytest.mark.builtin_passes
def test_a_body_annotation_keeps_the_outer_tensors_it_names() -> None:
    """An If branch annotating its value with the root's initializers: dead-code
    elimination of the root read only the root's annotations and removed them (trial FF)."""
    body = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, [3])])
    _annotate(body, "t")
    other = helper.make_graph([helper.make_node("Relu", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, [3])])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=other)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [numpy_helper.from_array(np.array(0.1, np.float32), "t_scale")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    written = ge.compile(model).to_onnx()
    assert [t.name for t in written.graph.initializer] == ["t_scale"]
    then = next(a.g for n in written.graph.node for a in n.attribute if a.name == "then_branch")
    assert _annotated(then) == ["t"]


@pytest.mark.builtin_passes
def test_an_annotated_value_written_as_a_graph_output_keeps_its_annotation() -> None:
    """out = Identity(z), z annotated: NoOpElimination bypasses the Identity and the Mul
    now writes `out`; the annotation of z went (trial II), it now follows the value."""
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "s"], ["z"]), helper.make_node("Identity", ["z"],
                                                                      ["out"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [3])],
        [numpy_helper.from_array(np.full(3, 2.0, np.float32), "s"),
         numpy_helper.from_array(np.array(0.1, np.float32), "z_scale")])
    _annotate(graph, "z")
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    written = ge.compile(model).to_onnx()
    assert [n.op_type for n in written.graph.node] == ["Mul"]
    assert _annotated(written.graph) == ["out"]
    (annotation,) = written.graph.quantization_annotation
    assert [(p.key, p.value) for p in annotation.quant_parameter_tensor_names] == [
        ("SCALE_TENSOR", "z_scale")]
    assert "z_scale" in {t.name for t in written.graph.initializer}
