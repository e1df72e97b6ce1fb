"""A quantized model's weights stay quantized: constant folding never folds the
`DequantizeLinear` of a constant weight (the QDQ format stores weights that way), which
onnx's reference evaluator can evaluate from opset 19 and which used to become a float32
constant: the file grew (int4: 6x), onnxruntime ran the Conv in float, slower and with other
results, and verification (onnxruntime with its optimisations off) saw no difference. Its
quantization pairs stay as written too: merged, onnxruntime fused none of them (trial BB)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge

RNG = np.random.default_rng(0)
pytestmark = pytest.mark.builtin_passes  # (the built-in passes are what is tested)


def _qdq_conv_model(weight_type: int, opset: int) -> onnx.ModelProto:
    """x -> QuantizeLinear -> DequantizeLinear -> Conv(W) -> y, W = DequantizeLinear of a
    per-channel quantized constant (int8) or per-tensor (int4), as onnxruntime's quantizer
    writes a QDQ model."""
    channels, k = 4, 3
    low, high = (-8, 7) if weight_type == TensorProto.INT4 else (-127, 127)
    w_q = RNG.integers(low, high + 1, size=(channels, 2, k, k))
    if weight_type == TensorProto.INT4:
        weight = helper.make_tensor("w_q", TensorProto.INT4, w_q.shape, w_q.reshape(-1).tolist())
        w_scale = numpy_helper.from_array(np.array(0.05, dtype=np.float32), "w_scale")
        dq_attrs: dict[str, int] = {}
    else:
        weight = numpy_helper.from_array(w_q.astype(np.int8), "w_q")
        w_scale = numpy_helper.from_array(
            RNG.uniform(0.01, 0.05, size=channels).astype(np.float32), "w_scale")
        dq_attrs = {"axis": 0}
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zero"], ["x_q"]),
        helper.make_node("DequantizeLinear", ["x_q", "x_scale", "x_zero"], ["x_dq"]),
        helper.make_node("DequantizeLinear", ["w_q", "w_scale"], ["w"], name="dq_weight",
                         **dq_attrs),
        helper.make_node("Conv", ["x_dq", "w"], ["y"], pads=[1, 1, 1, 1]),
    ]
    graph = helper.make_graph(
        nodes, "qdq_conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, 6, 6])],
        [weight, w_scale, numpy_helper.from_array(np.array(0.02, dtype=np.float32), "x_scale"),
         numpy_helper.from_array(np.array(128, dtype=np.uint8), "x_zero")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


@pytest.mark.parametrize(("weight_type", "opset"), [
    (TensorProto.INT8, 19), (TensorProto.INT8, 21), (TensorProto.INT4, 21)],
    ids=["int8-19", "int8-21", "int4-21"])
def test_the_weight_dequantization_is_kept(weight_type: int, opset: int) -> None:
    model = _qdq_conv_model(weight_type, opset)
    result = ge.compile(model, verify=True)
    assert result.verification is not None and result.verification.ok
    saved = result.to_onnx()
    nodes = {n.name: n for n in saved.graph.node}
    assert "dq_weight" in nodes, [n.op_type for n in saved.graph.node]
    weights = {t.name: t for t in saved.graph.initializer}
    assert weights[nodes["dq_weight"].input[0]].data_type == weight_type
    assert not [t for t in saved.graph.initializer
                if t.data_type == TensorProto.FLOAT and len(t.dims) == 4]
    assert saved.ByteSize() <= model.ByteSize() * 1.1
    feeds = {"x": RNG.standard_normal((1, 2, 6, 6)).astype(np.float32)}
    # onnxruntime with its default optimisations runs a quantized Conv on both
    np.testing.assert_array_equal(_run(saved, feeds), _run(model, feeds))


def test_opset_conversion_keeps_the_weights_quantized(tmp_path: Path) -> None:
    """`--opset 21` of an opset-17 QDQ model: DequantizeLinear becomes evaluable there, and
    is still not folded."""
    source = tmp_path / "qdq17.onnx"
    onnx.save(_qdq_conv_model(TensorProto.INT8, 17), source)
    saved = ge.compile(source, opset=21).to_onnx()
    assert [n.op_type for n in saved.graph.node].count("DequantizeLinear") == 2


def _pair_per_consumer(zero_point: np.generic) -> onnx.ModelProto:
    """Two MatMuls read x through their own equal QuantizeLinear/DequantizeLinear pairs (the
    quantizer's DedicatedQDQPair), each pair with its own, equal, scale and zero point."""
    nodes, inits = [], []
    for i in range(2):
        inits += [numpy_helper.from_array(np.array(0.02, np.float32), f"xs{i}"),
                  numpy_helper.from_array(np.array(zero_point), f"xz{i}"),
                  numpy_helper.from_array(RNG.integers(-127, 127, (16, 16)).astype(np.int8),
                                          f"w{i}"),
                  numpy_helper.from_array(np.array(0.01, np.float32), f"ws{i}"),
                  numpy_helper.from_array(np.array(0, np.int8), f"wz{i}"),
                  numpy_helper.from_array(np.array(0.1 * (i + 1), np.float32), f"ys{i}"),
                  numpy_helper.from_array(np.array(zero_point), f"yz{i}")]
        nodes += [
            helper.make_node("QuantizeLinear", ["x", f"xs{i}", f"xz{i}"], [f"xq{i}"]),
            helper.make_node("DequantizeLinear", [f"xq{i}", f"xs{i}", f"xz{i}"], [f"xd{i}"]),
            helper.make_node("DequantizeLinear", [f"w{i}", f"ws{i}", f"wz{i}"], [f"wd{i}"]),
            helper.make_node("MatMul", [f"xd{i}", f"wd{i}"], [f"mm{i}"]),
            helper.make_node("QuantizeLinear", [f"mm{i}", f"ys{i}", f"yz{i}"], [f"yq{i}"]),
            helper.make_node("DequantizeLinear", [f"yq{i}", f"ys{i}", f"yz{i}"], [f"yd{i}"])]
    nodes.append(helper.make_node("Add", ["yd0", "yd1"], ["y"]))
    graph = helper.make_graph(nodes, "pairs",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _fused_by_onnxruntime(model: onnx.ModelProto, tmp_path: Path) -> dict[str, int]:
    source, optimized = tmp_path / "in.onnx", tmp_path / "optimized.onnx"
    onnx.save(model, source)
    options = onnxruntime.SessionOptions()
    options.optimized_model_filepath = str(optimized)
    onnxruntime.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
    ops = [n.op_type for n in onnx.load(optimized).graph.node]
    return {op: ops.count(op) for op in ("QLinearMatMul", "MatMul")}


@pytest.mark.parametrize("zero_point", [np.int8(0), np.uint8(128)], ids=["int8", "uint8"])
def test_quantization_pairs_are_not_merged(zero_point: np.generic, tmp_path: Path) -> None:
    """ConstantDeduplication made the pairs' scales one constant, then CSE (or onnxruntime's
    own) merged the two pairs; one QuantizeLinear feeding two groups, onnxruntime fused
    neither over int8 (QLinearMatMul 2 -> 0, 3.8x slower at K = 512)."""
    original = _pair_per_consumer(zero_point)
    result = ge.compile(original, verify=True)
    compiled = result.to_onnx()
    ops = [n.op_type for n in compiled.graph.node]
    assert ops.count("QuantizeLinear") == 4 and ops.count("DequantizeLinear") == 6
    scales = {n.input[1] for n in compiled.graph.node if n.op_type == "QuantizeLinear"}
    assert len(scales) == 4  # each pair its own scale, as written
    assert _fused_by_onnxruntime(compiled, tmp_path) == _fused_by_onnxruntime(original,
                                                                               tmp_path)
