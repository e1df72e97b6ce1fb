"""Shapes inside If branches: onnx's inference types the values of a branch that reads
outer values without a shape (no rank), so `infer_shapes` keeps the dims the file declares
for them and infers the rest node by node; a layer norm written in a branch (an exported
`torch.cond`) then fuses like one in the main graph."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

import ge
import ge.graph
from ge.graph import Graph
from ge.ops import infer_shapes

D = 16


def _layer_norm(x: str, out: str) -> list[onnx.NodeProto]:
    return [h.make_node("ReduceMean", [x, "axes"], ["m"]), h.make_node("Sub", [x, "m"], ["d"]),
            h.make_node("Pow", ["d", "two"], ["p"]),
            h.make_node("ReduceMean", ["p", "axes"], ["v"]),
            h.make_node("Add", ["v", "eps"], ["ve"]), h.make_node("Sqrt", ["ve"], ["s"]),
            h.make_node("Div", ["d", "s"], ["n"]), h.make_node("Mul", ["n", "gamma"], ["g"]),
            h.make_node("Add", ["g", "beta"], [out])]


def _if_model(body_value_info: bool) -> onnx.ModelProto:
    """y = If(c, then: Relu(LayerNorm(x)), else: x), the branch reading the outer x."""
    then_nodes = [*_layer_norm("x", "ln"), h.make_node("Relu", ["ln"], ["then_out"])]
    infos = []
    if body_value_info:  # as the dynamo exporter writes them
        infos = [h.make_tensor_value_info(o, TP.FLOAT, ["n", 1] if o in ("m", "v", "ve", "s")
                                          else ["n", D])
                 for n in then_nodes for o in n.output if o != "then_out"]
    then_g = h.make_graph(then_nodes, "then_g", [],
                          [h.make_tensor_value_info("then_out", TP.FLOAT, ["n", D])],
                          value_info=infos)
    else_g = h.make_graph([h.make_node("Identity", ["x"], ["else_out"])], "else_g", [],
                          [h.make_tensor_value_info("else_out", TP.FLOAT, ["n", D])])
    rng = np.random.default_rng(0)
    inits = [nh.from_array(np.array([-1], np.int64), "axes"),
             nh.from_array(np.array(2.0, np.float32), "two"),
             nh.from_array(np.array(1e-5, np.float32), "eps"),
             nh.from_array(rng.uniform(0.5, 1.5, D).astype(np.float32), "gamma"),
             nh.from_array(rng.standard_normal(D).astype(np.float32), "beta")]
    graph = h.make_graph([h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
                         "main", [h.make_tensor_value_info("x", TP.FLOAT, ["n", D]),
                                  h.make_tensor_value_info("c", TP.BOOL, [])],
                         [h.make_tensor_value_info("y", TP.FLOAT, ["n", D])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    onnx.checker.check_model(model, full_check=True)
    return model


def _branch_dims(graph: Graph) -> dict[str, list[int | str] | None]:
    (then_g, _) = graph.get_all_subgraphs()
    dims = {}
    for node in then_g.get_direct_nodes():
        if node.get_outputs_size():
            shape = node.get_output_desc(0).get_shape()
            dims[node.get_output_name(0)] = None if shape.is_unknown_rank() else list(shape)
    return dims


def test_onnx_leaves_such_branch_values_without_a_shape() -> None:
    """What the fix is about: onnx's own inference (the reason to keep and infer)."""
    inferred = onnx.shape_inference.infer_shapes(_if_model(False), strict_mode=True)
    (then_g,) = [a.g for a in inferred.graph.node[0].attribute if a.name == "then_branch"]
    assert then_g.value_info and not any(
        v.type.tensor_type.HasField("shape") for v in then_g.value_info)


@pytest.mark.parametrize("declared", [True, False], ids=["declared", "not-declared"])
def test_branch_values_get_their_shapes(declared: bool) -> None:
    graph = ge.graph.load(_if_model(declared))
    infer_shapes(graph)
    dims = _branch_dims(graph)
    assert dims["m"] == ["n", 1] and dims["s"] == ["n", 1]
    assert dims["d"] == ["n", D] and dims["ln"] == ["n", D] and dims["then_out"] == ["n", D]


@pytest.mark.builtin_passes
def test_a_layer_norm_in_a_branch_fuses() -> None:
    source = _if_model(False)
    result = ge.compile(source, verify=True,
                        inputs={"x": np.random.default_rng(1).standard_normal((4, D))
                                .astype(np.float32), "c": np.array(True)})
    assert result.report.rewrites_by_pass().get("LayerNormFusion") == 1
    assert result.verification is not None and result.verification.ok
