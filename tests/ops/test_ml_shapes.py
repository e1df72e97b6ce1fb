"""`ge.ops.ml_shapes`: the `ai.onnx.ml` operators onnx has no inference function for are
typed by ge, as onnxruntime's kernels compute them (each rule is checked by running the
operator), by node inference and by whole-model inference; a pipeline's MatMul + Add after
a Scaler then fuses (trial E: skl2onnx's MLP pipelines)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

import ge
import ge.graph
from ge.graph.types import data_type_to_numpy
from ge.ops import infer_shapes

F, I64 = TensorProto.FLOAT, TensorProto.INT64
ML = "ai.onnx.ml"

#: (operator, attributes, input element type, number of inputs)
CASES: list[tuple[str, dict[str, Any], int, int]] = [
    ("Scaler", {"offset": [0.5, 1.0, 0.0], "scale": [2.0, 1.0, 3.0]}, F, 1),
    ("Scaler", {"offset": [1.0], "scale": [2.0]}, I64, 1),
    ("Normalizer", {"norm": "L2"}, F, 1),
    ("Imputer", {"imputed_value_floats": [0.0, 1.0, 2.0], "replaced_value_float": -1.0}, F, 1),
    ("Imputer", {"imputed_value_int64s": [7, 8, 9], "replaced_value_int64": -1}, I64, 1),
    ("LinearRegressor", {"coefficients": [0.1] * 6, "intercepts": [0.0, 1.0], "targets": 2},
     F, 1),
    ("LinearRegressor", {"coefficients": [0.1, 0.2, 0.3]}, F, 1),
    ("SVMRegressor", {"coefficients": [1.0, -1.0], "support_vectors": [0.0] * 6,
                      "n_supports": 2, "rho": [0.5], "kernel_type": "LINEAR",
                      "kernel_params": [0.1, 0.0, 3.0]}, F, 1),
    ("TreeEnsembleRegressor", {
        "n_targets": 2, "nodes_treeids": [0, 0, 0], "nodes_nodeids": [0, 1, 2],
        "nodes_featureids": [0, 0, 0], "nodes_values": [0.5, 0.0, 0.0],
        "nodes_modes": ["BRANCH_LEQ", "LEAF", "LEAF"], "nodes_truenodeids": [1, 0, 0],
        "nodes_falsenodeids": [2, 0, 0], "target_treeids": [0, 0], "target_nodeids": [1, 2],
        "target_ids": [0, 1], "target_weights": [1.0, 2.0]}, F, 1),
    ("FeatureVectorizer", {"inputdimensions": [3, 2]}, F, 2),
]


def _model(op: str, attrs: dict[str, Any], elem: int, inputs: int, rank: int) -> onnx.ModelProto:
    widths = attrs.get("inputdimensions", [3] * inputs)
    shapes = [["N", w] if rank == 2 else [w] for w in widths]
    names = [f"x{i}" for i in range(inputs)]
    graph = helper.make_graph(
        [helper.make_node(op, names, ["y"], domain=ML, name="ml", **attrs),
         helper.make_node("Identity", ["y"], ["z"], name="after")],
        "ml", [helper.make_tensor_value_info(n, elem, s) for n, s in zip(names, shapes)],
        [helper.make_tensor_value_info("z", F if op != "Imputer" else elem, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid(ML, 3)])


def _run(model: onnx.ModelProto, rows: int, rank: int) -> np.ndarray:
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {}
    for value in session.get_inputs():
        width = model.graph.input[len(feeds)].type.tensor_type.shape.dim[-1].dim_value
        shape = [rows, width] if rank == 2 else [width]
        array = rng.standard_normal(shape) * 3
        feeds[value.name] = (array.astype(np.int64) if "int64" in value.type
                             else array.astype(np.float32))
    return session.run(None, feeds)[0]


@pytest.mark.parametrize("rank", [2, 1])
@pytest.mark.parametrize(("op", "attrs", "elem", "inputs"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_rule_gives_what_onnxruntime_computes(op: str, attrs: dict[str, Any], elem: int,
                                                   inputs: int, rank: int) -> None:
    model = _model(op, attrs, elem, inputs, rank)
    if op == "TreeEnsembleRegressor" and rank == 1:  # onnxruntime refuses a 1-D X: no type
        graph = ge.graph.load(model)
        infer_shapes(graph)
        (node,) = [n for n in graph.get_all_nodes() if n.type == op]
        assert node.get_output_desc(0).get_shape().is_unknown_rank()
        return
    graph = ge.graph.load(model)
    infer_shapes(graph, strict=True)  # as the compiler does
    (node,) = [n for n in graph.get_all_nodes() if n.type == op]
    desc = node.get_output_desc(0)
    after = graph.nodes_of_type("Identity")[0].get_output_desc(0)  # carried on by onnx
    assert list(after.get_shape()) == list(desc.get_shape())
    for rows in (1, 4):
        got = _run(model, rows, rank)
        dims = [rows if d == "N" else d for d in desc.get_shape()]
        assert list(got.shape) == dims, (op, rank, rows)
        assert got.dtype == data_type_to_numpy(desc.data_type)
    fresh = ge.graph.load(model)  # one node's inference gives the same
    (alone,) = [n for n in fresh.get_all_nodes() if n.type == op]
    ge.ops.infer_node(alone)
    assert alone.get_output_desc(0) == desc


def _scaled_mlp() -> onnx.ModelProto:
    """skl2onnx's MLPRegressor pipeline start: Scaler, then MatMul + Add."""
    rng = np.random.default_rng(1)
    weight = helper.make_tensor("W", F, [3, 4], rng.standard_normal(12).astype(np.float32))
    bias = helper.make_tensor("b", F, [4], rng.standard_normal(4).astype(np.float32))
    graph = helper.make_graph(
        [helper.make_node("Scaler", ["x"], ["s"], domain=ML, name="scaler",
                          offset=[0.5, 1.0, 0.0], scale=[2.0, 1.0, 3.0]),
         helper.make_node("MatMul", ["s", "W"], ["m"], name="matmul"),
         helper.make_node("Add", ["m", "b"], ["a"], name="add"),
         helper.make_node("Relu", ["a"], ["y"], name="relu")],
        "mlp", [helper.make_tensor_value_info("x", F, ["N", 3])],
        [helper.make_tensor_value_info("y", F, ["N", 4])], [weight, bias])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid(ML, 1)])


@pytest.mark.builtin_passes
def test_a_matmul_add_after_a_scaler_fuses_and_verifies() -> None:
    result = ge.compile(_scaled_mlp(), verify=True, dims={"N": 5})
    assert result.report.rewrites_by_pass().get("MatMulAddFusion") == 1
    assert result.verification is not None and result.verification.ok
