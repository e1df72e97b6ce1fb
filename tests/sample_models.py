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


def cyclic_model(in_body: bool = False) -> onnx.ModelProto:
    """y = Identity(a) where a = Add(x, b) and b = Relu(a): a cycle through add and relu, in
    the root graph or in the then-branch of an If."""
    cycle = [helper.make_node("Add", ["x", "b"], ["a"], name="add"),
             helper.make_node("Relu", ["a"], ["b"], name="relu"),
             helper.make_node("Identity", ["a"], ["y" if not in_body else "t"], name="out")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    if not in_body:
        return helper.make_model(helper.make_graph(cycle, "g", [x], [y]),
                                 opset_imports=[helper.make_opsetid("", 17)])
    then = helper.make_graph(cycle, "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], name="copy")], "else",
                              [], [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])])
    node = helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)
    return helper.make_model(
        helper.make_graph([node], "g", [x, helper.make_tensor_value_info("c", TensorProto.BOOL,
                                                                         [])], [y]),
        opset_imports=[helper.make_opsetid("", 17)])


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


#: A wrong plugin (for `tiny_outputs_model`): its MatMul becomes a Gemm scaling by 1.5.
SCALE_MATMUL_BUG = '''
import ge.es.all as es
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass


@register_fusion_pass(name="ScaleMatMulBug", stage=PassStage.AFTER_INFER_SHAPE)
class ScaleMatMulBug(PatternFusionPass):
    @pattern
    def matmul(self, inputs):
        return es.MatMul(inputs[0], inputs[1])

    def replacement(self, inputs):
        return es.Gemm(inputs[0], inputs[1], alpha=1.5)
'''


def random_output_model() -> onnx.ModelProto:
    """y = x + RandomNormalLike(x), z = Relu(x), x float32[2, 4]: verification cannot
    compare y (two runs differ) and warns so."""
    graph = helper.make_graph(
        [helper.make_node("RandomNormalLike", ["x"], ["r"]),
         helper.make_node("Add", ["x", "r"], ["y"]), helper.make_node("Relu", ["x"], ["z"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 4]) for n in ("y", "z")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def tiny_outputs_model(scale: float = 1e-9) -> onnx.ModelProto:
    """x float [2, 4] through a MatMul by weights of about `scale` (`tiny`), and outputs of
    every other kind: a Relu (`plain`), zeros (`zeros`: x times 0), an int64 Cast (`ints`)
    and a bool Greater (`mask`)."""
    weights = (np.random.default_rng(0).standard_normal((4, 3)) * scale).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["tiny"]),
             helper.make_node("Relu", ["x"], ["plain"]),
             helper.make_node("Mul", ["x", "zero"], ["zeros"]),
             helper.make_node("Cast", ["x"], ["ints"], to=TensorProto.INT64),
             helper.make_node("Greater", ["x", "zero"], ["mask"])]
    outputs = [helper.make_tensor_value_info("tiny", TensorProto.FLOAT, [2, 3]),
               helper.make_tensor_value_info("plain", TensorProto.FLOAT, [2, 4]),
               helper.make_tensor_value_info("zeros", TensorProto.FLOAT, [2, 4]),
               helper.make_tensor_value_info("ints", TensorProto.INT64, [2, 4]),
               helper.make_tensor_value_info("mask", TensorProto.BOOL, [2, 4])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])], outputs,
        [numpy_helper.from_array(weights, "w"),
         numpy_helper.from_array(np.array(0, np.float32), "zero")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def readme_pass_source() -> str:
    """The pass the README prints (FoldDoubleNeg), exactly as a user would copy it."""
    found = re.search(r"# my_passes/fold_double_neg.py\n(.*?)```", README.read_text(), re.S)
    assert found is not None, "the README lost its pass example"
    return found.group(1)


def two_ifs_with_bodies_named_alike() -> onnx.ModelProto:
    """x, c -> If 'if1' (y1) and If 'if2' (y2), each Relu(x) if c else Neg(x) (outputs t1/e1,
    t2/e2), every branch a graph named 'sub_graph', as exporters may name them."""

    def branch(op: str, out: str) -> onnx.GraphProto:
        return helper.make_graph([helper.make_node(op, ["x"], [out])], "sub_graph", [],
                                 [helper.make_tensor_value_info(out, TensorProto.FLOAT, [2])])

    nodes = [helper.make_node("If", ["c"], [f"y{k}"], name=f"if{k}",
                              then_branch=branch("Relu", f"t{k}"),
                              else_branch=branch("Neg", f"e{k}")) for k in (1, 2)]
    graph = helper.make_graph(
        nodes, "main",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info(f"y{k}", TensorProto.FLOAT, [2]) for k in (1, 2)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    return model


def relu_model(opset: int = 17) -> onnx.ModelProto:
    """y = Relu(x), x and y float[2], at `opset`: the smallest model a compilation runs
    plugin passes on (the plugin-loading and lifecycle tests compile it)."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def add_relu_neg_model(opset: int = 17) -> onnx.ModelProto:
    """x[2,3] + W → a; Relu(a) → y, Neg(a) → z, at `opset`, IR 8: the model trial Q broke in
    hundreds of ways (the tests of malformed and invalid models start from it)."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "W"], ["a"], name="add"),
         helper.make_node("Relu", ["a"], ["y"], name="relu"),
         helper.make_node("Neg", ["a"], ["z"], name="neg")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model
