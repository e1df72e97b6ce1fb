"""Small shared samples for tests in several folders: models and the README's pass."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

README = Path(__file__).resolve().parents[1] / "README.md"


def double_negation_model() -> onnx.ModelProto:
    """x -> Neg (n1) -> Neg (n2) -> Relu (relu) = y, float32[3], opset 17."""
    graph = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["a"], name="n1"),
         helper.make_node("Neg", ["a"], ["b"], name="n2"),
         helper.make_node("Relu", ["b"], ["y"], name="relu")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def audio_front_end() -> onnx.ModelProto:
    """y = Conv(Unsqueeze(x), w), kernel 10, stride 5, over x [batch, samples]: generated
    inputs (symbolic dims of 2) are too short for it; 400 samples are not."""
    rng = np.random.default_rng(0)
    graph = helper.make_graph(
        [helper.make_node("Unsqueeze", ["x", "one"], ["x3"]),
         helper.make_node("Conv", ["x3", "w"], ["y"], strides=[5])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "samples"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8, "frames"])],
        [numpy_helper.from_array(rng.standard_normal((8, 1, 10)).astype(np.float32), "w"),
         numpy_helper.from_array(np.array([1], np.int64), "one")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    return model


def readme_pass_source() -> str:
    """The pass the README prints (FoldDoubleNeg), exactly as a user would copy it."""
    found = re.search(r"# my_passes/fold_double_neg.py\n(.*?)```", README.read_text(), re.S)
    assert found is not None, "the README lost its pass example"
    return found.group(1)
