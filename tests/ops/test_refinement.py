"""Refining descs downstream of values that became constants: only what adds to a desc is
kept (a type, a rank, a static dim), never a vaguer or contradicting one, and refined
outputs carry on to their consumers."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge.graph import DataType, TensorDesc, load
from ge.ops import infer_shapes
from ge.ops.refinement import refine_output_descs, refined_desc

F32, I64, UNDEF = DataType.DT_FLOAT, DataType.DT_INT64, DataType.DT_UNDEFINED


def _desc(dims: list[int | str] | None, dtype: DataType = F32) -> TensorDesc:
    return TensorDesc.unknown() if dims is None and dtype == UNDEF else (
        TensorDesc([-2] if dims is None else dims, data_type=dtype))


@pytest.mark.parametrize(("old", "new", "expected"), [
    (_desc(["unk__0", 3]), _desc([2, 3]), _desc([2, 3])),
    (_desc([-1, 3]), _desc([2, "n"]), _desc([2, 3])),
    (_desc(None), _desc([2, 3]), _desc([2, 3])),
    (_desc(None, UNDEF), _desc([2, 3]), _desc([2, 3])),
    (_desc(None, UNDEF), _desc(None), _desc(None)),
], ids=["symbolic-to-static", "per-dim", "rank", "type-and-shape", "type-only"])
def test_a_desc_takes_what_the_new_one_adds(old, new, expected) -> None:
    assert refined_desc(old, new) == expected


@pytest.mark.parametrize(("old", "new"), [
    (_desc([2, 3]), _desc([2, 3])),
    (_desc([2, 3]), _desc(["n", 3])),
    (_desc([2, 3]), _desc(None)),
    (_desc([2, 3]), _desc([2, 4])),
    (_desc([2, 3]), _desc([2, 3, 1])),
    (_desc([2, 3]), _desc([2, 3], I64)),
    (_desc([2, 3]), _desc(None, UNDEF)),
], ids=["same", "vaguer-dim", "vaguer-rank", "other-dim", "other-rank", "other-type",
        "unknown"])
def test_a_desc_is_never_made_vaguer_or_contradicted(old, new) -> None:
    assert refined_desc(old, new) is None


def _masked_model() -> onnx.ModelProto:
    """x[1,3] -> Expand(x, shape) -> Relu -> y, the shape ([1, 1]) a Where of constants
    that onnx's data propagation does not follow (the attention-mask shape of the vendored
    T5): inference cannot tell whether the Expand broadcasts x's dims of size one."""
    c = numpy_helper.from_array(np.array([1, -1], np.int64), "c")
    minus = numpy_helper.from_array(np.array(-1, np.int64), "minus")
    count = numpy_helper.from_array(np.array([2], np.int64), "count")
    nodes = [helper.make_node("ConstantOfShape", ["count"], ["ones"], name="ones",
                              value=numpy_helper.from_array(np.array([1], np.int64))),
             helper.make_node("Mul", ["ones", "minus"], ["neg"], name="neg"),
             helper.make_node("Equal", ["c", "neg"], ["eq"], name="eq"),
             helper.make_node("Where", ["eq", "ones", "c"], ["shape"], name="where"),
             helper.make_node("Expand", ["x", "shape"], ["e"], name="expand"),
             helper.make_node("Relu", ["e"], ["y"], name="relu")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [c, minus, count])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_the_readers_of_a_new_constant_and_their_consumers_are_refined() -> None:
    graph = load(_masked_model())
    infer_shapes(graph)
    expand, relu = graph.find_node_by_name("expand"), graph.find_node_by_name("relu")
    assert expand.get_output_desc(0).get_shape().is_unknown_shape()  # what inference knew
    where = graph.find_node_by_name("where")
    graph.remove_node(where)  # the shape "folded": a constant in its place
    const = graph.add_node("Const", name="shape_folded", num_outputs=1,
                           attrs={"value": np.array([1, 1], np.int64)})
    graph.add_data_edge(const, 0, expand, 1)
    assert refine_output_descs([expand]) == 2
    assert expand.get_output_desc(0) == TensorDesc([1, 3], data_type=F32)
    assert relu.get_output_desc(0) == TensorDesc([1, 3], data_type=F32)
    assert refine_output_descs([expand]) == 0  # nothing more to add


def test_a_node_inference_that_knows_less_keeps_the_desc() -> None:
    """A Reshape whose shape data propagation computed from a Shape chain: inferred alone,
    its output would have unknown dims; the static desc stays."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Reshape", ["x", "s"], ["r"], name="reshape"),
             helper.make_node("Relu", ["r"], ["y"], name="relu")]
    model = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
        opset_imports=[helper.make_opsetid("", 17)])
    graph = load(model)
    infer_shapes(graph)
    reshape = graph.find_node_by_name("reshape")
    assert reshape.get_output_desc(0) == TensorDesc([2, 3], data_type=F32)
    assert refine_output_descs([reshape]) == 0
    assert reshape.get_output_desc(0) == TensorDesc([2, 3], data_type=F32)
