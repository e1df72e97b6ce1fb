"""Dims the model file declares (an exporter's `seq`) are kept where onnx's inference can
only make one up (`unk__N`): otherwise onnxruntime cannot prove a residual Add's two inputs
the same shape and skips its SkipLayerNormalization fusion (a user trial on BERT)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import ge

D = 8


def _positions_model() -> onnx.ModelProto:
    """x [batch, seq, D] + the first `seq` rows of a position table, then LayerNorm; the
    exporter's value_info names `seq`, which onnx cannot derive from Shape+Gather+Slice."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((512, D)).astype(np.float32), "table"),
             numpy_helper.from_array(rng.standard_normal(D).astype(np.float32), "gamma"),
             numpy_helper.from_array(rng.standard_normal(D).astype(np.float32), "beta"),
             numpy_helper.from_array(np.array([0], np.int64), "zero"),
             numpy_helper.from_array(np.array([1], np.int64), "one")]
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["seq_len"]),
             helper.make_node("Slice", ["table", "zero", "seq_len", "zero"], ["pos"]),
             helper.make_node("Expand", ["pos", "s"], ["pos_b"]),
             helper.make_node("Add", ["x", "pos_b"], ["hsum"]),
             helper.make_node("LayerNormalization", ["hsum", "gamma", "beta"], ["y"],
                              axis=-1, epsilon=1e-5)]
    vi = helper.make_tensor_value_info
    declared = [vi("pos", TensorProto.FLOAT, ["seq", D]),
                vi("pos_b", TensorProto.FLOAT, ["batch", "seq", D]),
                vi("hsum", TensorProto.FLOAT, ["batch", "seq", D])]
    graph = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, ["batch", "seq", D])],
                              [vi("y", TensorProto.FLOAT, ["batch", "seq", D])], inits,
                              value_info=declared)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _dims(model: onnx.ModelProto) -> dict[str, list[object]]:
    return {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in model.graph.value_info}


def _ort_extended_ops(path: Path) -> Counter[str]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(path.with_suffix(".ort.onnx"))
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return Counter(n.op_type for n in onnx.load(path.with_suffix(".ort.onnx")).graph.node)


def test_the_exporters_dims_stay_and_onnxruntime_still_fuses(tmp_path: Path) -> None:
    source, target = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(_positions_model(), source)
    ge.compile(str(source)).save(target)
    dims = _dims(onnx.load(target))
    assert dims["pos"] == ["seq", D] and dims["hsum"] == ["batch", "seq", D]
    assert dims["pos_b"] == ["batch", "seq", D]
    assert _ort_extended_ops(target)["SkipLayerNormalization"] == 1
    assert _ort_extended_ops(source)["SkipLayerNormalization"] == 1


def test_inferred_static_dims_still_win() -> None:
    """A declared symbol does not override what inference knows better (a number)."""
    model = _positions_model()
    model.graph.value_info.append(helper.make_tensor_value_info("s", TensorProto.INT64, ["r"]))
    graph = ge.graph.load(model)
    ge.compiler.compile_graph(graph, builtin_passes=False)
    (shape,) = graph.nodes_of_type("Shape")
    assert list(shape.get_output_desc(0).get_shape()) == [3]  # inference: 3, not "r"
