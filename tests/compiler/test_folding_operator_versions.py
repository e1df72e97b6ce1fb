"""Constant folding computes an operator as the model's version of it means.

onnx's reference evaluator implements most operators once, for their newest version; a node
of an older version whose meaning changed (Softmax before opset 13, RoiAlign-10, Add-6 with
`broadcast=1, axis=k`) was folded into the newer version's values (trial O: an opset-9
SqueezeNet folded to 1.0 for all 1,000 classes). Such nodes are left to the runtime now;
versions that differ from the implemented one only in types, or in attributes whose default
is the old behaviour, still fold.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
import ge.graph
from ge.compiler import compile_graph
from ge.errors import ConstantEvaluationError
from ge.ops import evaluate_node
from ge.ops.reference_versions import version_gap

pytestmark = pytest.mark.builtin_passes  # (ConstantFolding is what is tested)

RNG = np.random.default_rng(0)


def _constant_model(op_type: str, opset: int, inputs: list[np.ndarray], out_shape: list[int],
                    **attrs: object) -> onnx.ModelProto:
    """One `op_type` node reading only initializers, its output the graph's."""
    names = [f"c{i}" for i in range(len(inputs))]
    node = helper.make_node(op_type, names, ["y"], name="the_node", **attrs)
    out_type = TensorProto.INT64 if op_type == "Shape" else helper.np_dtype_to_tensor_dtype(
        inputs[0].dtype)
    graph = helper.make_graph(
        [node], "g", [], [helper.make_tensor_value_info("y", out_type, out_shape)],
        [numpy_helper.from_array(a, n) for a, n in zip(inputs, names)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model, full_check=True)
    return model


def _run(model: onnx.ModelProto) -> np.ndarray:
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return session.run(None, {})[0]


X3 = np.arange(6, dtype=np.float32).reshape(1, 3, 2)
ROI_X = RNG.standard_normal((1, 1, 6, 6)).astype(np.float32)
ROIS = np.array([[0, 0, 3, 3]], np.float32)
ROI_BATCH = np.array([0], np.int64)

# (op, opset, inputs, output shape, attributes): versions the evaluator does not compute as
# written, each with values onnxruntime shows to differ from the newer version's
NOT_AS_WRITTEN = [
    ("Softmax", 11, [X3], [1, 3, 2], {}),
    ("LogSoftmax", 11, [X3], [1, 3, 2], {}),
    ("Hardmax", 11, [X3], [1, 3, 2], {}),
    ("Softmax", 9, [X3], [1, 3, 2], {"axis": 1}),
    ("RoiAlign", 10, [ROI_X, ROIS, ROI_BATCH], [1, 1, 2, 2],
     {"output_height": 2, "output_width": 2}),
]
# versions that differ from the implemented one only in ways that keep the meaning
AS_WRITTEN = [
    ("Softmax", 13, [X3], [1, 3, 2], {}),
    ("ScatterND", 13, [np.zeros((4, 2), np.float32), np.array([[1], [3]], np.int64),
                       np.ones((2, 2), np.float32)], [4, 2], {}),  # `reduction` came in 16
    ("MaxPool", 9, [RNG.standard_normal((1, 1, 4, 4)).astype(np.float32)], [1, 1, 2, 2],
     {"kernel_shape": [2, 2], "strides": [2, 2]}),  # `ceil_mode`, `dilations` came in 10
    ("GatherND", 11, [np.arange(8, dtype=np.float32).reshape(2, 2, 2),
                      np.array([[0, 1], [1, 0]], np.int64)], [2, 2], {}),  # `batch_dims` 12
]


def _ids(cases: list[tuple]) -> list[str]:
    return [f"{case[0]}-{case[1]}" for case in cases]


@pytest.mark.parametrize(("op_type", "opset", "inputs", "shape", "attrs"), NOT_AS_WRITTEN,
                         ids=_ids(NOT_AS_WRITTEN))
def test_an_operator_version_the_evaluator_does_not_implement_is_not_folded(
        op_type: str, opset: int, inputs: list[np.ndarray], shape: list[int],
        attrs: dict) -> None:
    model = _constant_model(op_type, opset, inputs, shape, **attrs)
    newer = _constant_model(op_type, 16 if op_type == "RoiAlign" else 13, inputs, shape,
                            **attrs)
    assert not np.allclose(_run(model), _run(newer))  # the versions do mean different things
    result = ge.compile(model, verify=True)
    assert result.verification is not None and result.verification.ok
    saved = result.to_onnx()
    assert [n.op_type for n in saved.graph.node] == [op_type]
    np.testing.assert_array_equal(_run(saved), _run(model))


@pytest.mark.parametrize(("op_type", "opset", "inputs", "shape", "attrs"), AS_WRITTEN,
                         ids=_ids(AS_WRITTEN))
def test_an_operator_version_computed_as_written_is_folded(
        op_type: str, opset: int, inputs: list[np.ndarray], shape: list[int],
        attrs: dict) -> None:
    model = _constant_model(op_type, opset, inputs, shape, **attrs)
    saved = ge.compile(model).to_onnx()
    assert [n.op_type for n in saved.graph.node] == []  # folded into an initializer
    np.testing.assert_allclose(_run(saved), _run(model), rtol=1e-6, atol=1e-7)


def test_legacy_broadcast_with_an_axis_is_not_evaluated() -> None:
    """Add-6 with `broadcast=1, axis=0` aligns B at axis 0 ([[1, 2], [3, 4]] + [10, 20] is
    [[11, 12], [23, 24]]); the evaluator's Add broadcasts from the last axis. onnxruntime
    has no opset 6 (`ge.compile` refuses the model: it has no kernel for Add-6), so the
    compiler keeps the node and `evaluate_node` says why."""
    a = np.array([[1, 2], [3, 4]], np.float32)
    b = np.array([10, 20], np.float32)
    model = _constant_model("Add", 6, [a, b], [2, 2], broadcast=1, axis=0)
    graph = ge.graph.load(model)
    compile_graph(graph)
    assert [n.op_type for n in graph.to_onnx().graph.node] == ["Add"]
    node = ge.graph.load(model).nodes_of_type("Add")[0]
    with pytest.raises(ConstantEvaluationError) as caught:
        evaluate_node(node)
    message = caught.value.message
    assert "Add node 'the_node' is not evaluated" in message
    assert "computes Add as version 14 does, and Add-6 differs from it" in message
    assert "attribute axis, attribute broadcast" in message
    assert caught.value.code == ConstantEvaluationError.code


@pytest.mark.parametrize(("op_type", "opset", "expected"), [
    ("Softmax", 11, "Softmax-11 differs from it (attribute axis)"),
    ("Softmax", 13, None),
    ("Add", 7, None),  # Add-7 and Add-14 differ in their types only
    ("ScatterND", 13, None),
    ("RoiAlign", 10, "RoiAlign-10 differs from it (attribute coordinate_transformation_mode)"),
])
def test_version_gap_names_what_differs(op_type: str, opset: int, expected: str | None) -> None:
    model = helper.make_model(helper.make_graph(
        [helper.make_node(op_type, ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
        opset_imports=[helper.make_opsetid("", opset)])
    node = ge.graph.load(model).nodes_of_type(op_type)[0]
    gap = version_gap(node)
    if expected is None:
        assert gap is None
    else:
        assert gap is not None and gap.endswith(expected)


def test_a_custom_domain_has_no_gap() -> None:
    graph = ge.graph.Graph("g")
    node = graph.add_node("Softmax", domain="my.ops", num_inputs=1, num_outputs=1)
    assert version_gap(node) is None
