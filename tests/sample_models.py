"""Small shared samples for tests in several folders: a model and the README's pass."""

from __future__ import annotations

import re
from pathlib import Path

import onnx
from onnx import TensorProto, helper

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


def readme_pass_source() -> str:
    """The pass the README prints (FoldDoubleNeg), exactly as a user would copy it."""
    found = re.search(r"# my_passes/fold_double_neg.py\n(.*?)```", README.read_text(), re.S)
    assert found is not None, "the README lost its pass example"
    return found.group(1)
