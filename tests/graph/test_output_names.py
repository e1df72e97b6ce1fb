"""Saving keeps a model's output names when a pass gives an output a new producer.

Every edit below is checked the same way (`assert_sound_export`): the exported model passes
the full checker, onnxruntime computes what the original computes, the saved file loads back,
and every graph keeps the output names it was read with.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from builders import add_data, add_op, add_output
from onnx import TensorProto, helper

import ge.graph
import ge.ops
from ge.graph import DataType, Graph, Node
from ge.graph.onnx_export import graph_to_model

Feeds = dict[str, np.ndarray]


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


def _relu_and_double_neg() -> onnx.ModelProto:
    """Outputs r = Relu(x) and y = Neg(Neg(r))."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Neg", ["r"], ["n1"], name="neg1"),
         helper.make_node("Neg", ["n1"], ["y"], name="neg2")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _double_neg_of_input() -> onnx.ModelProto:
    """Output z = Neg(Neg(x))."""
    graph = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["n1"], name="neg1"),
         helper.make_node("Neg", ["n1"], ["z"], name="neg2")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def fold_double_neg(graph: Graph, inner: str, outer: str) -> None:
    """Neg(Neg(v)) -> v: the outer Neg's consumers read v, both Negs are removed."""
    first, second = graph.find_node_by_name(inner), graph.find_node_by_name(outer)
    source, index = first.get_in_data_nodes_and_port_indexes(0)
    graph.replace_all_uses(second, 0, source, index)
    graph.remove_node(second)
    graph.remove_node(first)


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


def run(model: onnx.ModelProto | Path, feeds: Feeds) -> dict[str, np.ndarray]:
    """Run on onnxruntime's CPU; the results by output name."""
    source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    session = ort.InferenceSession(source, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds)))


def output_names(gp: onnx.GraphProto) -> list[tuple[str, list[str]]]:
    """(graph name, output names) of a graph and, depth first, of all its subgraphs."""
    found = [(gp.name, [vi.name for vi in gp.output])]
    for node in gp.node:
        for attr in node.attribute:
            for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
                found.extend(output_names(sub))
    return found


def value_names(gp: onnx.GraphProto) -> list[str]:
    """Every value a graph and its subgraphs define (inputs, initializers, node outputs)."""
    names = [vi.name for vi in gp.input] + [t.name for t in gp.initializer]
    for node in gp.node:
        names.extend(o for o in node.output if o)
        for attr in node.attribute:
            for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
                names.extend(value_names(sub))
    return names


def assert_sound_export(graph: Graph, original: onnx.ModelProto | Path, feeds: list[Feeds],
                        tmp_path: Path) -> onnx.ModelProto:
    """The edited graph exports to a model the checker accepts, that computes what the
    original computes, loads back, and keeps every graph's output names; returns it."""
    source = onnx.load(original) if isinstance(original, Path) else original
    exported = graph.to_onnx()
    onnx.checker.check_model(exported, full_check=True)
    assert output_names(exported.graph) == output_names(source.graph)
    names = value_names(exported.graph)
    assert len(names) == len(set(names)), "a value name is defined twice"
    path = tmp_path / "edited.onnx"
    graph.save(path)
    again = ge.graph.load(path)
    again.validate()
    assert output_names(again.to_onnx().graph) == output_names(source.graph)
    for inputs in feeds:
        got, want = run(path, inputs), run(original, inputs)
        assert list(got) == list(want)
        for name in want:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name, strict=True)
    return exported


def _x() -> list[Feeds]:
    return [{"x": np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)}]


def test_a_new_producer_is_saved_under_the_output_name(tmp_path: Path) -> None:
    """Callers fetch "y" before and after the rewrite, with the same numbers."""
    graph = ge.graph.load(_model())
    mul = _replace_neg(graph)
    assert mul.get_output_name(0) != "y"  # the IR keeps the producer's own name
    saved = assert_sound_export(graph, _model(), _x(), tmp_path)
    assert list(saved.graph.node[-1].output) == ["y"]


def test_the_name_is_kept_through_save_and_reload(tmp_path) -> None:
    graph = ge.graph.load(_model())
    _replace_neg(graph)
    graph.save(tmp_path / "m.onnx")
    again = ge.graph.load(tmp_path / "m.onnx")
    net_output = again.get_net_output()
    assert net_output is not None
    producer, index = net_output.get_in_data_nodes_and_port_indexes(0)
    assert (producer.type, producer.get_output_name(index)) == ("Mul", "y")


def test_the_export_reports_the_values_it_renamed() -> None:
    graph = ge.graph.load(_model())
    mul = _replace_neg(graph)
    renamed: dict[tuple[Node, int], str] = {}
    graph_to_model(graph, value_names=renamed)
    assert renamed == {(mul, 0): "y"}


def test_a_stale_value_gives_up_the_output_name(tmp_path: Path) -> None:
    """If "y" is still produced (the old Neg stayed), that value is renamed to a fresh name
    and the output keeps "y"."""
    graph = ge.graph.load(_model())
    mul = _replace_neg(graph, remove_old=False)
    saved = assert_sound_export(graph, _model(), _x(), tmp_path)
    outputs = {node.name: list(node.output) for node in saved.graph.node}
    assert outputs["neg"] == ["y_1"]
    assert outputs[mul.name] == ["y"]


def test_an_output_rewired_to_a_graph_input_keeps_its_name(tmp_path: Path) -> None:
    """z = Neg(Neg(x)) folded: the input stays "x", an Identity of x writes "z"."""
    graph = ge.graph.load(_double_neg_of_input())
    fold_double_neg(graph, "neg1", "neg2")
    saved = assert_sound_export(graph, _double_neg_of_input(), _x(), tmp_path)
    assert [vi.name for vi in saved.graph.input] == ["x"]
    assert [(n.op_type, list(n.input), list(n.output)) for n in saved.graph.node] == [
        ("Identity", ["x"], ["z"])]


def test_one_value_feeding_two_outputs_keeps_both_names(tmp_path: Path) -> None:
    """y = Neg(Neg(r)) folded: Relu feeds outputs r and y; it stays "r", an Identity
    writes "y"."""
    graph = ge.graph.load(_relu_and_double_neg())
    fold_double_neg(graph, "neg1", "neg2")
    saved = assert_sound_export(graph, _relu_and_double_neg(), _x(), tmp_path)
    assert [(n.op_type, list(n.input), list(n.output)) for n in saved.graph.node] == [
        ("Relu", ["x"], ["r"]), ("Identity", ["r"], ["y"])]


def test_the_export_is_deterministic() -> None:
    exports = []
    for _ in range(2):
        graph = ge.graph.load(_relu_and_double_neg())
        fold_double_neg(graph, "neg1", "neg2")
        exports.extend([graph.to_onnx().SerializeToString(), graph.to_onnx().SerializeToString()])
    assert len(set(exports)) == 1


def _assert_f32_2x3(node: Node) -> None:
    desc = node.get_output_desc(0)
    assert (desc.data_type, list(desc.shape)) == (DataType.DT_FLOAT, [2, 3]), node.name


def test_inference_types_a_producer_feeding_two_outputs() -> None:
    graph = ge.graph.load(_relu_and_double_neg())
    fold_double_neg(graph, "neg1", "neg2")
    ge.ops.infer_shapes(graph)
    _assert_f32_2x3(graph.find_node_by_name("relu"))


def test_inference_types_a_producer_exported_under_the_output_name() -> None:
    """The Mul is written as "y": it gets its type back all the same."""
    graph = ge.graph.load(_model())
    mul = _replace_neg(graph)
    ge.ops.infer_shapes(graph)
    _assert_f32_2x3(mul)


def test_inference_types_a_stale_value_and_its_successor() -> None:
    """The Mul is written as "y" and the stale Neg as "y_1": both get their types back."""
    graph = ge.graph.load(_model())
    mul = _replace_neg(graph, remove_old=False)
    ge.ops.infer_shapes(graph)
    _assert_f32_2x3(mul)
    _assert_f32_2x3(graph.find_node_by_name("neg"))


def _in_memory() -> tuple[Graph, Node, Node]:
    graph = Graph("mem")
    graph.model.opset_imports = {"": 17}
    graph.model.ir_version = 8
    x = add_data(graph, 0, "x")
    relu = add_op(graph, "Relu", x, name="relu")
    ge.ops.infer_node(relu)  # typed outputs, which the full checker asks for
    return graph, x, relu


def test_a_graph_built_in_memory_keeps_its_producers_names() -> None:
    graph, x, relu = _in_memory()
    add_output(graph, relu, x)
    saved = graph.to_onnx()
    onnx.checker.check_model(saved, full_check=True)
    assert [vi.name for vi in saved.graph.output] == [relu.get_output_name(0),
                                                        x.get_output_name(0)]
    assert [n.op_type for n in saved.graph.node] == ["Relu"]


def test_a_graph_built_in_memory_gets_distinct_outputs() -> None:
    """One value feeding two outputs: the second is an Identity under a fresh name."""
    graph, x, relu = _in_memory()
    add_output(graph, relu, relu, x, x)
    saved = graph.to_onnx()
    onnx.checker.check_model(saved, full_check=True)
    r, xv = relu.get_output_name(0), x.get_output_name(0)
    assert [vi.name for vi in saved.graph.output] == [r, f"{r}_1", xv, f"{xv}_1"]
    feeds = {xv: np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)}
    results = run(saved, feeds)
    np.testing.assert_array_equal(results[f"{r}_1"], np.maximum(feeds[xv], 0))
    np.testing.assert_array_equal(results[f"{xv}_1"], feeds[xv])
    again = ge.graph.load(saved)
    assert [vi.name for vi in again.to_onnx().graph.output] == [
        vi.name for vi in saved.graph.output]
