"""Broadcasting between dims of different names (or a 1 and a name), read through Shape or
cut by a Slice, compiled with every built-in pass: the compiled model computes what
onnxruntime's unoptimised run of the original computes at sizes where the dims differ.

Folding a Shape, bypassing a Slice as a no-op and sharing shapes all trust the dims
inference names; an operator whose inference names a broadcast dim after one operand (onnx's
Einsum does) made each of them write a wrong model (`UNSOUND_DIMS`). These are the
broadcasting operators exporters write, each at the sizes where a wrong dim would show."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge

#: (operator, x's dims, y's dims, sizes where they broadcast; the original runs there)
CASES = [
    *((op, ["n", 4], ["m", 4], [{"n": 1, "m": 3}, {"n": 3, "m": 1}])
      for op in ("Add", "Mul", "Max", "Mean", "Pow", "Equal", "Where", "Expand")),
    *((op, [1, 4], ["m", 4], [{"m": 3}]) for op in ("Add", "Where", "Expand")),
    ("MatMul", ["n", 4, 4], ["m", 4, 4], [{"n": 1, "m": 3}, {"n": 3, "m": 1}]),
    ("MatMul", [1, 4, 4], ["m", 4, 4], [{"m": 3}]),
    ("Einsum", ["n", 4, 4], ["m", 4, 4], [{"n": 1, "m": 3}, {"n": 3, "m": 1}]),
    ("Einsum", [1, 4, 4], ["m", 4, 4], [{"m": 3}]),
    ("EinsumLabels", [1, 4, 4], ["m", 4, 4], [{"m": 3}]),
]


def _model(op: str, xs: list, ys: list, tail: str) -> onnx.ModelProto:
    floats = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("x", floats, xs),
              helper.make_tensor_value_info("y", floats, ys)]
    nodes: list[onnx.NodeProto] = []
    if op == "Where":
        inputs.append(helper.make_tensor_value_info("c", TensorProto.BOOL, xs))
        nodes.append(helper.make_node("Where", ["c", "x", "y"], ["z"]))
    elif op == "Expand":
        nodes += [helper.make_node("Shape", ["y"], ["ys"]),
                  helper.make_node("Expand", ["x", "ys"], ["z"])]
    elif op.startswith("Einsum"):
        equation = "bij,bjk->bik" if op == "EinsumLabels" else "...ij,...jk->...ik"
        nodes.append(helper.make_node("Einsum", ["x", "y"], ["z"], equation=equation))
    else:
        nodes.append(helper.make_node(op, ["x", "y"], ["z"]))
    if tail == "shape":
        nodes += [helper.make_node("Shape", ["z"], ["zs"]),
                  helper.make_node("Shape", ["x"], ["xs"]),
                  helper.make_node("Sub", ["zs", "xs"], ["out"])]
        out = helper.make_tensor_value_info("out", TensorProto.INT64, None)
    else:
        nodes.append(helper.make_node("Slice", ["z", "zero", "one", "zero"], ["out"]))
        out = helper.make_tensor_value_info("out", TensorProto.BOOL if op == "Equal" else floats,
                                            None)
    graph = helper.make_graph(nodes, "g", inputs, [out], [
        numpy_helper.from_array(np.array([0], np.int64), "zero"),
        numpy_helper.from_array(np.array([1], np.int64), "one")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    options = ort.SessionOptions()  # (its optimisations trust the inferred dims too)
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


@pytest.mark.builtin_passes
@pytest.mark.parametrize("tail", ["shape", "slice"])
@pytest.mark.parametrize(("op", "xs", "ys", "sizes"), CASES,
                         ids=[f"{c[0]}-{'x'.join(map(str, c[1]))}" for c in CASES])
def test_the_compiled_model_broadcasts_as_the_runtime_does(op: str, xs: list, ys: list,
                                                           sizes: list, tail: str) -> None:
    original = _model(op, xs, ys, tail)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (a model of unknown output shapes says so)
        compiled = ge.compile(original).to_onnx()
    rng = np.random.default_rng(0)

    def value(dims: list, size: dict[str, int]) -> np.ndarray:
        shape = [size[d] if isinstance(d, str) else d for d in dims]
        return (rng.random(shape) + 0.5).astype(np.float32)

    for size in sizes:
        feeds = {"x": value(xs, size), "y": value(ys, size)}
        if op == "Where":
            feeds["c"] = rng.random(feeds["x"].shape) > 0.5
        expected = _run(original, feeds)
        actual = _run(compiled, feeds)
        assert actual.shape == expected.shape, (size, expected.shape, actual.shape)
        np.testing.assert_array_equal(actual, expected)
