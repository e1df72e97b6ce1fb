"""Saving keeps a model's output names when a pass gives an output a new producer."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

import ge.graph
from ge.graph import Graph, Node


def _model() -> onnx.ModelProto:
    """x -> Relu -> Neg = "y" (graph output), opset 17."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Neg", ["r"], ["y"], name="neg")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _replace_neg(graph: Graph, *, remove_old: bool = True) -> Node:
    """Swap Neg(r) for Mul(r, -1): the output gets a producer with another value name."""
    neg = graph.find_node_by_name("neg")
    relu = graph.find_node_by_name("relu")
    minus_one = graph.add_const(np.array(-1.0, dtype=np.float32), name="minus_one")
    mul = graph.add_node("Mul", num_inputs=2)
    graph.add_data_edge(relu, 0, mul, 0)
    graph.add_data_edge(minus_one, 0, mul, 1)
    graph.replace_all_uses(neg, 0, mul, 0)
    if remove_old:
        graph.remove_node(neg)
    return mul


def _run(model: onnx.ModelProto, x: np.ndarray) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {"x": x})))


def test_a_new_producer_is_saved_under_the_output_name() -> None:
    """Callers fetch "y" before and after the rewrite, with the same numbers."""
    graph = ge.graph.load(_model())
    mul = _replace_neg(graph)
    assert mul.get_output_name(0) != "y"  # the IR keeps the producer's own name
    saved = graph.to_onnx()
    onnx.checker.check_model(saved, full_check=True)
    assert [o.name for o in saved.graph.output] == ["y"]
    assert list(saved.graph.node[-1].output) == ["y"]
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(_run(saved, x)["y"], _run(_model(), x)["y"])


def test_the_name_is_kept_through_save_and_reload(tmp_path) -> None:
    graph = ge.graph.load(_model())
    _replace_neg(graph)
    graph.save(tmp_path / "m.onnx")
    again = ge.graph.load(tmp_path / "m.onnx")
    producer, index = again.get_net_output().get_in_data_nodes_and_port_indexes(0)
    assert (producer.type, producer.get_output_name(index)) == ("Mul", "y")


def test_no_rename_while_the_old_value_still_exists() -> None:
    """If "y" is still produced (the old node stayed), the new producer keeps its own name."""
    graph = ge.graph.load(_model())
    mul = _replace_neg(graph, remove_old=False)
    saved = graph.to_onnx()
    assert [o.name for o in saved.graph.output] == [mul.get_output_name(0)]
    assert "y" in {out for node in saved.graph.node for out in node.output}


def test_an_output_rewired_to_a_graph_input_keeps_the_input_name() -> None:
    """Graph inputs are never renamed: the output becomes the input itself."""
    graph = ge.graph.load(_model())
    neg = graph.find_node_by_name("neg")
    graph.replace_all_uses(neg, 0, graph.find_node_by_name("x"), 0)
    graph.remove_node(neg)
    saved = graph.to_onnx()
    assert [o.name for o in saved.graph.input] == ["x"]
    assert [o.name for o in saved.graph.output] == ["x"]
