"""GE's nine Python pass samples, ported to ONNX (examples/passes/), each run with `ge compile`.

Every test builds a small ONNX model the sample should rewrite, compiles it in a subprocess
with `ASCEND_GE_PY_PASS_PATH=<the sample file>`, and checks: exit code 0, the sample's pass
ran and succeeded, the expected rewrite happened (op types counted in the output), the
output passes `onnx.checker.check_model(full_check=True)`, and it computes what the input
model computes on random inputs (onnxruntime; for the custom operator of P5 onnx's
ReferenceEvaluator). Models the sample must not touch are compiled too and stay as they were.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

PASSES = Path(__file__).resolve().parents[1] / "examples" / "passes"
ENV = "ASCEND_GE_PY_PASS_PATH"
F32, I64 = TensorProto.FLOAT, TensorProto.INT64


# -- building and compiling models ------------------------------------------------------------


def vi(name: str, shape: Sequence[int], elem_type: int = F32) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, list(shape))


def const(name: str, value: Any, dtype: Any = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto],
          outputs: list[onnx.ValueInfoProto], initializers: Sequence[onnx.TensorProto] = (),
          value_info: Sequence[onnx.ValueInfoProto] = (), opset: int = 17,
          domains: Sequence[tuple[str, int]] = ()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "sample", inputs, outputs, list(initializers),
                              value_info=list(value_info))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in domains]
    built = helper.make_model(graph, opset_imports=opsets)
    onnx.checker.check_model(built, full_check=not domains)  # the test's own model is valid
    return built


class Compiled:
    def __init__(self, source: Path, output: Path, report: dict[str, Any]) -> None:
        self.source = source
        self.output = output
        self.report = report
        self.model = onnx.load(output)

    def op_types(self) -> Counter[str]:
        return Counter(n.op_type for n in self.model.graph.node)

    def record(self, pass_name: str) -> dict[str, Any]:
        records = [r for r in self.report["passes"] if r["name"] == pass_name]
        assert records, f"pass {pass_name} did not run: {self.report['passes']}"
        return records[0]


def compile_sample(sample: str, onnx_model: onnx.ModelProto, tmp_path: Path,
                   name: str = "model") -> Compiled:
    source, output = tmp_path / f"{name}.onnx", tmp_path / f"{name}.compiled.onnx"
    onnx.save(onnx_model, source)
    env = {k: v for k, v in os.environ.items() if k != ENV}
    env[ENV] = str(PASSES / sample)
    result = subprocess.run(
        [sys.executable, "-m", "ge.cli", "compile", str(source), "-o", str(output), "--json",
         "--no-builtin"],
        capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    stdout = result.stdout  # the samples print traces before the JSON report
    start = 0 if stdout.startswith("{") else stdout.index("\n{\n") + 1
    return Compiled(source, output, json.loads(stdout[start:]))


def random_feeds(onnx_model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in onnx_model.graph.input:
        tensor = value.type.tensor_type
        shape = [d.dim_value for d in tensor.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        if np.issubdtype(dtype, np.integer):
            feeds[value.name] = rng.integers(-5, 5, size=shape).astype(dtype)
        else:
            feeds[value.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def assert_same_outputs(compiled: Compiled, *, reference: bool = False) -> None:
    """The compiled model is valid and computes what the source model computes."""
    onnx.checker.check_model(compiled.model, full_check=True)
    source = onnx.load(compiled.source)
    feeds = random_feeds(source)
    if reference:
        expected = ReferenceEvaluator(source, new_ops=[AddCustom]).run(None, feeds)
        got = ReferenceEvaluator(compiled.model, new_ops=[AddCustom]).run(None, feeds)
    else:
        providers = ["CPUExecutionProvider"]
        expected = ort.InferenceSession(str(compiled.source), providers=providers).run(
            None, feeds)
        got = ort.InferenceSession(str(compiled.output), providers=providers).run(None, feeds)
    assert [o.name for o in compiled.model.graph.output] == [o.name for o in source.graph.output]
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


def assert_unchanged(compiled: Compiled, pass_name: str) -> None:
    record = compiled.record(pass_name)
    assert record["outcome"] == "not_changed" and not record["changed"], record
    source = onnx.load(compiled.source)
    assert compiled.op_types() == Counter(n.op_type for n in source.graph.node)
    assert_same_outputs(compiled)


def assert_rewrote(compiled: Compiled, pass_name: str) -> None:
    record = compiled.record(pass_name)
    assert record["outcome"] == "success" and record["changed"], record


class AddCustom(OpRun):
    """ge.examples::AddCustom for onnx's ReferenceEvaluator (onnxruntime cannot run it)."""

    op_domain = "ge.examples"

    def _run(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray]:
        return (np.add(x, y).astype(x.dtype),)


# -- P1, P2, P3: MatMul + Add -> Gemm ---------------------------------------------------------


def _matmul_add_model(value_info: bool, c_value: Any = None) -> onnx.ModelProto:
    """Branch 1 is Gemm-shaped ([4, 3] x [3, 5] + [5]); branch 2 has a 3-D `a` (stays)."""
    c = np.linspace(-1, 1, 5) if c_value is None else c_value
    nodes = [
        helper.make_node("MatMul", ["a", "b"], ["m1"]),
        helper.make_node("Add", ["m1", "c"], ["s1"]),
        helper.make_node("Relu", ["s1"], ["y1"]),
        helper.make_node("MatMul", ["a3", "b"], ["m2"]),
        helper.make_node("Add", ["m2", "c"], ["y2"]),
    ]
    declared = [vi("m1", [4, 5]), vi("m2", [2, 4, 5])] if value_info else []
    return model(nodes, [vi("a", [4, 3]), vi("b", [3, 5]), vi("a3", [2, 4, 3])],
                 [vi("y1", [4, 5]), vi("y2", [2, 4, 5])], [const("c", c)], declared)


def test_p1_expression_pattern_fuses_2d_matmul_add_into_gemm(tmp_path: Path) -> None:
    compiled = compile_sample("p1_matmul_add_expression.py", _matmul_add_model(False), tmp_path)
    assert_rewrote(compiled, "PythonFuseMatMulAndAddPass")
    record = compiled.record("PythonFuseMatMulAndAddPass")
    assert (record["matches"], record["rewrites"]) == (2, 1)  # the 3-D one fails the check
    assert compiled.op_types() == Counter({"Gemm": 1, "MatMul": 1, "Add": 1, "Relu": 1})
    gemm = next(n for n in compiled.model.graph.node if n.op_type == "Gemm")
    assert list(gemm.input) == ["a", "b", "c"]
    assert {a.name: helper.get_attribute_value(a) for a in gemm.attribute} == {
        "alpha": 1.0, "beta": 1.0}
    assert_same_outputs(compiled)


def test_p2_capture_tensor_pattern_fuses_when_the_add_inputs_are_float(tmp_path: Path) -> None:
    compiled = compile_sample("p2_matmul_add_capture_tensor.py", _matmul_add_model(True),
                              tmp_path)
    assert_rewrote(compiled, "PythonFuseMatMulAndAddCaptureTensorPass")
    assert compiled.op_types() == Counter({"Gemm": 1, "MatMul": 1, "Add": 1, "Relu": 1})
    assert_same_outputs(compiled)


def test_p2_needs_the_matmul_output_type_before_shape_inference(tmp_path: Path) -> None:
    # Without value_info the Add's input 0 has no data type yet at BeforeInferShape.
    compiled = compile_sample("p2_matmul_add_capture_tensor.py", _matmul_add_model(False),
                              tmp_path)
    assert_unchanged(compiled, "PythonFuseMatMulAndAddCaptureTensorPass")


def _matmul_add_const_model(bias: float) -> onnx.ModelProto:
    nodes = [helper.make_node("MatMul", ["x", "y"], ["m"]),
             helper.make_node("Add", ["m", "bias"], ["out"])]
    return model(nodes, [vi("x", [2, 3]), vi("y", [3, 2])], [vi("out", [2, 2])],
                 [const("bias", np.full((2, 2), bias))])


def test_p3_const_value_match_fuses_only_the_pattern_constant(tmp_path: Path) -> None:
    compiled = compile_sample("p3_matcher_config.py", _matmul_add_const_model(0.1), tmp_path)
    assert_rewrote(compiled, "PythonMatmulAddFusionPass")
    assert compiled.op_types() == Counter({"Gemm": 1})
    assert_same_outputs(compiled)

    other = compile_sample("p3_matcher_config.py", _matmul_add_const_model(0.2), tmp_path,
                           name="other_constant")
    assert_unchanged(other, "PythonMatmulAddFusionPass")
    assert "Gemm" not in other.op_types()


# -- P4a, P4b: x + 0 -> x ---------------------------------------------------------------------


def test_p4a_add_zero_removes_adds_of_a_zero_of_any_dtype(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Add", ["x", "zero"], ["a1"]),  # float32 scalar 0
        helper.make_node("Add", ["x", "zero_1"], ["a2"]),  # float32 [1]: x keeps its shape
        helper.make_node("Mul", ["a1", "a2"], ["y1"]),
        helper.make_node("Add", ["x", "zero_111"], ["y2"]),  # [1, 1, 1] grows x: stays
        helper.make_node("Add", ["i", "zero_i64"], ["y3"]),  # int64 scalar 0, GE's pattern
    ]
    onnx_model = model(nodes, [vi("x", [2, 3]), vi("i", [3], I64)],
                       [vi("y1", [2, 3]), vi("y2", [1, 2, 3]), vi("y3", [3], I64)],
                       [const("zero", 0.0), const("zero_1", [0.0]),
                        const("zero_111", np.zeros((1, 1, 1))), const("zero_i64", 0, np.int64)])
    compiled = compile_sample("p4a_add_zero.py", onnx_model, tmp_path)
    assert_rewrote(compiled, "PythonAddZeroPass")
    types = compiled.op_types()
    assert types["Add"] == 1 and types["Mul"] == 1
    mul = next(n for n in compiled.model.graph.node if n.op_type == "Mul")
    assert list(mul.input) == ["x", "x"]
    assert_same_outputs(compiled)


def test_p4a_add_zero_keeps_adds_of_a_nonzero_constant(tmp_path: Path) -> None:
    nodes = [helper.make_node("Add", ["x", "c"], ["y1"]),
             helper.make_node("Add", ["x", "tiny"], ["y2"]),  # a layer-norm epsilon: kept
             helper.make_node("Add", ["x", "pair"], ["y3"])]  # two zeros: not one element
    onnx_model = model(nodes, [vi("x", [2, 3])], [vi("y1", [2, 3]), vi("y2", [2, 3]),
                                                  vi("y3", [2, 3])],
                       [const("c", 0.5), const("tiny", 1e-6), const("pair", [[0.0], [0.0]])])
    compiled = compile_sample("p4a_add_zero.py", onnx_model, tmp_path)
    assert_unchanged(compiled, "PythonAddZeroPass")


def test_p4b_const_value_match_removes_only_a_float32_scalar_zero(tmp_path: Path) -> None:
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Add", ["r", "zero"], ["y"])]
    onnx_model = model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3])], [const("zero", 0.0)])
    compiled = compile_sample("p4b_add_zero_const_value_match.py", onnx_model, tmp_path)
    assert_rewrote(compiled, "PythonAddZeroConstValueMatchPass")
    assert "Add" not in compiled.op_types()
    assert_same_outputs(compiled)


def test_p4b_const_value_match_keeps_other_constants(tmp_path: Path) -> None:
    nodes = [helper.make_node("Add", ["x", "one"], ["y1"]),  # not 0.0
             helper.make_node("Add", ["x", "zero_1"], ["y2"]),  # 0.0, but shape [1]
             helper.make_node("Add", ["d", "zero_f64"], ["y3"])]  # 0.0, but double
    onnx_model = model(nodes, [vi("x", [2, 3]), vi("d", [2], TensorProto.DOUBLE)],
                       [vi("y1", [2, 3]), vi("y2", [2, 3]), vi("y3", [2], TensorProto.DOUBLE)],
                       [const("one", 1.0), const("zero_1", [0.0]),
                        const("zero_f64", 0.0, np.float64)])
    compiled = compile_sample("p4b_add_zero_const_value_match.py", onnx_model, tmp_path)
    assert_unchanged(compiled, "PythonAddZeroConstValueMatchPass")


# -- P5: a custom operator --------------------------------------------------------------------


def test_p5_custom_op_pattern_drops_the_zero_add_custom(tmp_path: Path) -> None:
    def add_custom(inputs: list[str], output: str) -> onnx.NodeProto:
        return helper.make_node("AddCustom", inputs, [output], domain="ge.examples")

    nodes = [
        helper.make_node("Identity", ["zero"], ["i1"]),
        add_custom(["x", "i1"], "a1"),
        add_custom(["a1", "y"], "out1"),
        helper.make_node("Identity", ["zero_b"], ["i2"]),  # GE's TensorMove(Identity(C))
        helper.make_node("Identity", ["i2"], ["i3"]),
        add_custom(["y", "i3"], "a2"),
        add_custom(["a2", "x"], "out2"),
        helper.make_node("Identity", ["half"], ["i4"]),  # not zero: stays
        add_custom(["x", "i4"], "a3"),
        add_custom(["a3", "y"], "out3"),
    ]
    onnx_model = model(nodes, [vi("x", [2, 3]), vi("y", [2, 3])],
                       [vi("out1", [2, 3]), vi("out2", [2, 3]), vi("out3", [2, 3])],
                       [const("zero", 0.0), const("zero_b", 0.0), const("half", 0.5)],
                       domains=[("ge.examples", 1)])
    compiled = compile_sample("p5_custom_op_zero.py", onnx_model, tmp_path)
    assert_rewrote(compiled, "PythonAddCustomZeroPass")
    assert compiled.op_types() == Counter({"AddCustom": 4, "Identity": 1})
    adds = [list(n.input) for n in compiled.model.graph.node if n.op_type == "AddCustom"]
    assert ["x", "y"] in adds and ["y", "x"] in adds
    assert all(n.domain == "ge.examples" for n in compiled.model.graph.node
               if n.op_type == "AddCustom")
    assert_same_outputs(compiled, reference=True)


# -- P6: a decompose pass ---------------------------------------------------------------------


@pytest.mark.parametrize("opset", [17, 18])
def test_p6_decomposes_grouped_convs_into_split_conv_concat(tmp_path: Path, opset: int) -> None:
    rng = np.random.default_rng(1)
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], group=2, pads=[1, 1, 1, 1],
                         kernel_shape=[3, 3]),  # with bias
        helper.make_node("Conv", ["c1", "w2"], ["c2"], group=6, strides=[2, 2],
                         pads=[1, 1, 1, 1], dilations=[1, 1]),  # depthwise, no bias
        helper.make_node("Conv", ["c2", "w3"], ["c3"]),  # group 1: stays
        helper.make_node("Conv", ["c3", "w4"], ["y"], group=2, auto_pad="SAME_UPPER",
                         strides=[2, 2]),
    ]
    weights = {"w1": (6, 2, 3, 3), "b1": (6,), "w2": (6, 1, 3, 3), "w3": (2, 6, 1, 1),
               "w4": (2, 1, 3, 3)}
    onnx_model = model(nodes, [vi("x", [1, 4, 6, 6])], [vi("y", [1, 2, 2, 2])],
                       [const(k, rng.standard_normal(v)) for k, v in weights.items()],
                       opset=opset)
    compiled = compile_sample("p6_decompose_grouped_conv.py", onnx_model, tmp_path)
    assert_rewrote(compiled, "PythonDecomposeGroupedConvToSplitedPass")
    assert compiled.op_types() == Counter({"Conv": 2 + 6 + 1 + 2, "Split": 3 + 2 + 2,
                                           "Concat": 3})
    for node in compiled.model.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "Conv":
            assert attrs.get("group", 1) == 1
        if node.op_type == "Split" and opset >= 18:
            assert attrs["num_outputs"] in (2, 6)
    assert_same_outputs(compiled)


# -- G2, G3: FusionBasePass rewrites by hand --------------------------------------------------


def test_g2_moves_a_relu_before_the_concat_it_follows(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Concat", ["a", "b", "a"], ["cat"], axis=1),
        helper.make_node("Relu", ["cat"], ["y1"]),
        helper.make_node("Concat", ["a", "b"], ["cat2"], axis=1),  # two consumers: stays
        helper.make_node("Relu", ["cat2"], ["y2"]),
        helper.make_node("Sigmoid", ["cat2"], ["y3"]),
    ]
    onnx_model = model(nodes, [vi("a", [2, 3]), vi("b", [2, 4])],
                       [vi("y1", [2, 10]), vi("y2", [2, 7]), vi("y3", [2, 7])])
    compiled = compile_sample("g2_relu_before_concat.py", onnx_model, tmp_path)
    assert_rewrote(compiled, "PythonMoveReluBeforeConcatPass")
    assert compiled.op_types() == Counter({"Relu": 3 + 1, "Concat": 2, "Sigmoid": 1})
    graph = compiled.model.graph
    producers = {o: n for n in graph.node for o in n.output}
    moved = next(n for n in graph.node if n.op_type == "Concat" and "y1" in n.output)
    assert [producers[i].op_type for i in moved.input] == ["Relu"] * 3
    assert_same_outputs(compiled)


def test_g3_removes_transpose_pairs_that_undo_each_other(tmp_path: Path) -> None:
    def transpose(src: str, dst: str, perm: list[int]) -> onnx.NodeProto:
        return helper.make_node("Transpose", [src], [dst], perm=perm)

    nhwc, nchw = [0, 2, 3, 1], [0, 3, 1, 2]
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        transpose("r", "t1", nhwc), transpose("t1", "t2", nchw),
        helper.make_node("Sigmoid", ["t2"], ["y1"]),
        transpose("x", "u1", nhwc), transpose("u1", "y2", nchw),  # graph input to output
        transpose("x", "v1", nhwc), transpose("v1", "y3", nchw),  # v1 is read twice: stays
        helper.make_node("Neg", ["v1"], ["y4"]),
        transpose("x", "w1", nchw), transpose("w1", "y5", nhwc),  # other order: stays
    ]
    onnx_model = model(nodes, [vi("x", [1, 3, 4, 5])],
                       [vi("y1", [1, 3, 4, 5]), vi("y2", [1, 3, 4, 5]), vi("y3", [1, 3, 4, 5]),
                        vi("y4", [1, 4, 5, 3]), vi("y5", [1, 3, 4, 5])])
    compiled = compile_sample("g3_inverse_transpose_pairs.py", onnx_model, tmp_path)
    record = compiled.record("PythonRemoveInverseTransposePairsPass")
    assert_rewrote(compiled, "PythonRemoveInverseTransposePairsPass")
    assert record["outcome"] == "success"
    assert record["fusions"] == 2  # report_fuse calls, in the report
    types = compiled.op_types()
    assert types["Transpose"] == 4 and types["Relu"] == 1 and types["Sigmoid"] == 1
    sigmoid = next(n for n in compiled.model.graph.node if n.op_type == "Sigmoid")
    assert list(sigmoid.input) == ["r"]
    assert_same_outputs(compiled)
