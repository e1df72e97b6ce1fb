"""Subgraph (If branch, Loop body) outputs keep their names and stay valid ONNX on save.

A body output fed by a value of an enclosing graph is written through an `Identity` inside
the body (ONNX allows no other way); names made up on the way are unique in the whole model.
Each edit is checked by `assert_sound_export` (tests/graph/test_output_names.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
from builders import add_data, add_op, add_output
from onnx import TensorProto, helper
from test_output_names import assert_sound_export, fold_double_neg, run, value_names

import ge.graph
import ge.ops
from ge.graph import DataType, Graph, Node, TensorDesc
from model_paths import shared_model

F = TensorProto.FLOAT
OPSET = [helper.make_opsetid("", 17)]


def _f32(name: str, shape: list[int] | None = None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, F, [2, 3] if shape is None else shape)


def _body(graph: Graph, op_type: str) -> Graph:
    """The one subgraph of the graph's only `op_type` node."""
    (node,) = graph.nodes_of_type(op_type)
    (body,) = node.get_subgraphs()
    return body


# -- the shared control-flow model ----------------------------------------------------------


def _control_flow_feeds() -> list[dict[str, np.ndarray]]:
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    n = np.array(3, dtype=np.int64)
    return [{"x": x, "n": n}, {"x": -x, "n": n}]  # both If branches


def test_removing_an_identity_of_an_outer_value_from_a_loop_body(tmp_path: Path) -> None:
    """The Loop body's Identity(/Constant_output_0) feeds its condition output; without it
    the output is an outer value, written through a new Identity in the body."""
    source = tmp_path / "control_flow.onnx"
    shutil.copy(shared_model("control_flow"), source)
    graph = ge.graph.load(source)
    body = _body(graph, "Loop")
    (identity,) = body.nodes_of_type("Identity")
    producer, index = identity.get_in_data_nodes_and_port_indexes(0)
    assert producer.owner_graph is graph  # an outer-scope edge
    body.replace_all_uses(identity, 0, producer, index)
    body.remove_node(identity)

    saved = assert_sound_export(graph, source, _control_flow_feeds(), tmp_path)
    (loop,) = [n for n in saved.graph.node if n.op_type == "Loop"]
    written = loop.attribute[0].g
    assert [(n.op_type, list(n.input), list(n.output)) for n in written.node
            if n.op_type == "Identity"] == [
        ("Identity", ["/Constant_output_0"], ["/Identity_output_0"])]


def test_the_control_flow_edit_exports_the_same_every_time(tmp_path: Path) -> None:
    exports = set()
    for _ in range(2):
        graph = ge.graph.load(shared_model("control_flow"))
        body = _body(graph, "Loop")
        (identity,) = body.nodes_of_type("Identity")
        producer, index = identity.get_in_data_nodes_and_port_indexes(0)
        body.replace_all_uses(identity, 0, producer, index)
        body.remove_node(identity)
        exports.add(graph.to_onnx().SerializeToString())
    assert len(exports) == 1


# -- a Loop body: outputs fed by a body input, by one value twice, by a renamed value -------


def _loop_model() -> onnx.ModelProto:
    """Loop(n, true, x) with body (i, cond, v) -> (c, z, r, y, w):
    c = Identity(cond); z = Neg(Neg(v)) (the next v); r = Relu(v); y = Neg(Neg(r));
    w = Neg(Neg(Sigmoid(v))). Outputs: the last v and the scans of r, y, w."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond"], ["c"], name="keep"),
         helper.make_node("Neg", ["v"], ["z1"], name="z_neg1"),
         helper.make_node("Neg", ["z1"], ["z"], name="z_neg2"),
         helper.make_node("Relu", ["v"], ["r"], name="relu"),
         helper.make_node("Neg", ["r"], ["y1"], name="y_neg1"),
         helper.make_node("Neg", ["y1"], ["y"], name="y_neg2"),
         helper.make_node("Sigmoid", ["v"], ["s"], name="sigmoid"),
         helper.make_node("Neg", ["s"], ["w1"], name="w_neg1"),
         helper.make_node("Neg", ["w1"], ["w"], name="w_neg2")],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []), _f32("v")],
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []), _f32("z"), _f32("r"),
         _f32("y"), _f32("w")],
    )
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["true"],
                          value=helper.make_tensor("t", TensorProto.BOOL, [], [True])),
         helper.make_node("Loop", ["n", "true", "x"], ["v_last", "rs", "ys", "ws"],
                          name="loop", body=body)],
        "main",
        [_f32("x"), helper.make_tensor_value_info("n", TensorProto.INT64, [])],
        [_f32("v_last"), _f32("rs", [3, 2, 3]), _f32("ys", [3, 2, 3]), _f32("ws", [3, 2, 3])],
    )
    return helper.make_model(graph, opset_imports=OPSET)


def _fold_loop_body(graph: Graph) -> Graph:
    body = _body(graph, "Loop")
    for chain in ("z", "y", "w"):
        fold_double_neg(body, f"{chain}_neg1", f"{chain}_neg2")
    return body


def _loop_feeds() -> list[dict[str, np.ndarray]]:
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    return [{"x": x, "n": np.array(3, dtype=np.int64)}]


def test_loop_body_outputs_keep_their_names(tmp_path: Path) -> None:
    """In the body: z is now the input v (an Identity), y is r's value (an Identity), and
    w's new producer, the Sigmoid, is renamed to "w"."""
    graph = ge.graph.load(_loop_model())
    _fold_loop_body(graph)
    saved = assert_sound_export(graph, _loop_model(), _loop_feeds(), tmp_path)
    body = saved.graph.node[-1].attribute[0].g
    assert [(n.op_type, list(n.input), list(n.output)) for n in body.node] == [
        ("Identity", ["cond"], ["c"]), ("Relu", ["v"], ["r"]), ("Sigmoid", ["v"], ["w"]),
        ("Identity", ["v"], ["z"]), ("Identity", ["r"], ["y"])]


def test_a_stale_value_in_a_body_gives_up_the_output_name(tmp_path: Path) -> None:
    """w's Neg is replaced by Mul(w1, -1) but stays: it is renamed, the Mul is written "w"."""
    graph = ge.graph.load(_loop_model())
    body = _body(graph, "Loop")
    neg = body.find_node_by_name("w_neg2")
    mul = body.add_node("Mul", num_inputs=2)
    body.add_data_edge(body.find_node_by_name("w_neg1"), 0, mul, 0)
    body.add_data_edge(body.add_const(np.array(-1.0, np.float32)), 0, mul, 1)
    body.replace_all_uses(neg, 0, mul, 0)
    saved = assert_sound_export(graph, _loop_model(), _loop_feeds(), tmp_path)
    outputs = {n.name: list(n.output) for n in saved.graph.node[-1].attribute[0].g.node}
    assert (outputs["w_neg2"], outputs[mul.name]) == (["w_1"], ["w"])


def test_inference_types_renamed_producers_in_a_body() -> None:
    graph = ge.graph.load(_loop_model())
    body = _fold_loop_body(graph)
    ge.ops.infer_shapes(graph)
    for name in ("relu", "sigmoid"):
        desc = body.find_node_by_name(name).get_output_desc(0)
        assert (desc.data_type, list(desc.shape)) == (DataType.DT_FLOAT, [2, 3]), name


# -- If branches whose outputs become outer values -------------------------------------------


def _if_model() -> onnx.ModelProto:
    """h = Relu(x); If(cond): then t = Neg(Neg(h)), else e = Neg(Neg(x)); output o."""
    def branch(name: str, source: str, out: str) -> onnx.GraphProto:
        return helper.make_graph(
            [helper.make_node("Neg", [source], [f"{out}1"], name=f"{out}_neg1"),
             helper.make_node("Neg", [f"{out}1"], [out], name=f"{out}_neg2")],
            name, [], [_f32(out)])

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["h"], name="relu"),
         helper.make_node("If", ["cond"], ["o"], name="if",
                          then_branch=branch("then", "h", "t"),
                          else_branch=branch("else", "x", "e"))],
        "main",
        [_f32("x"), helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [_f32("o")],
    )
    return helper.make_model(graph, opset_imports=OPSET)


def test_if_branch_outputs_fed_by_outer_values(tmp_path: Path) -> None:
    """Folded, the branches output an outer node's value (h) and an outer graph input (x):
    each becomes an Identity inside its branch, under the branch's output name."""
    graph = ge.graph.load(_if_model())
    (if_node,) = graph.nodes_of_type("If")
    fold_double_neg(if_node.get_attr("then_branch"), "t_neg1", "t_neg2")
    fold_double_neg(if_node.get_attr("else_branch"), "e_neg1", "e_neg2")
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    feeds = [{"x": x, "cond": np.array(flag)} for flag in (True, False)]
    saved = assert_sound_export(graph, _if_model(), feeds, tmp_path)
    branches = [(a.g.name, [(n.op_type, list(n.input), list(n.output)) for n in a.g.node])
                for a in saved.graph.node[-1].attribute]
    assert sorted(branches) == [("else", [("Identity", ["x"], ["e"])]),
                                ("then", [("Identity", ["h"], ["t"])])]


# -- names made up by the export --------------------------------------------------------------


def _stale_name_model() -> onnx.ModelProto:
    """x -> Relu r -> Neg = "y" (output), and a Loop whose body already uses "y_1"."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond"], ["c"]),
         helper.make_node("Relu", ["v"], ["y_1"], name="inner")],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []), _f32("v")],
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []), _f32("y_1")],
    )
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Neg", ["r"], ["y"], name="neg"),
         helper.make_node("Constant", [], ["true"],
                          value=helper.make_tensor("t", TensorProto.BOOL, [], [True])),
         helper.make_node("Loop", ["n", "true", "r"], ["l"], name="loop", body=body)],
        "main",
        [_f32("x"), helper.make_tensor_value_info("n", TensorProto.INT64, [])],
        [_f32("y"), _f32("l")],
    )
    return helper.make_model(graph, opset_imports=OPSET)


def test_a_fresh_name_is_unique_across_subgraphs(tmp_path: Path) -> None:
    """The stale Neg gives up "y" for a name no graph of the model uses ("y_1" is a body's)."""
    graph = ge.graph.load(_stale_name_model())
    relu = graph.find_node_by_name("relu")
    mul = graph.add_node("Mul", num_inputs=2)
    graph.add_data_edge(relu, 0, mul, 0)
    graph.add_data_edge(graph.add_const(np.array(-1.0, np.float32)), 0, mul, 1)
    graph.replace_all_uses(graph.find_node_by_name("neg"), 0, mul, 0)
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    saved = assert_sound_export(graph, _stale_name_model(),
                                [{"x": x, "n": np.array(2, np.int64)}], tmp_path)
    outputs = {n.name: list(n.output) for n in saved.graph.node}
    assert (outputs["neg"], outputs[mul.name]) == (["y_2"], ["y"])


def _in_memory_if() -> tuple[Graph, Node, Node]:
    """x -> Relu h; If(cond) whose then branch outputs h itself (an outer value), else
    Neg(h); outputs (If, h)."""
    graph = Graph("mem")
    graph.model.opset_imports = {"": 17}
    graph.model.ir_version = 8
    x = add_data(graph, 0, "x")
    cond = add_data(graph, 1, "cond", TensorDesc([], data_type=DataType.DT_BOOL))
    h = add_op(graph, "Relu", x, name="h")
    if_node = add_op(graph, "If", cond, name="if")
    then = Graph("then")
    if_node.set_attr("then_branch", then)
    add_output(then, h, name="then_out")
    other = Graph("else")
    if_node.set_attr("else_branch", other)
    neg = other.add_node("Neg", name="neg", num_inputs=1)
    other.add_data_edge(h, 0, neg, 0)
    add_output(other, neg, name="else_out")
    add_output(graph, if_node, h)
    ge.ops.infer_shapes(graph)  # typed values, which the full checker asks for
    return graph, x, h


def test_an_in_memory_branch_outputting_an_outer_value() -> None:
    graph, x, h = _in_memory_if()
    saved = graph.to_onnx()
    onnx.checker.check_model(saved, full_check=True)
    names = value_names(saved.graph)
    assert len(names) == len(set(names))
    (then,) = [a.g for a in saved.graph.node[-1].attribute if a.name == "then_branch"]
    hv = h.get_output_name(0)
    assert [(n.op_type, list(n.input), list(n.output)) for n in then.node] == [
        ("Identity", [hv], [f"{hv}_1"])]
    again = ge.graph.load(saved)
    assert again.to_onnx().SerializeToString() == saved.SerializeToString()
    value = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    for flag, want in ((True, np.maximum(value, 0)), (False, -np.maximum(value, 0))):
        results = run(saved, {x.get_output_name(0): value, "cond": np.array(flag)})
        np.testing.assert_array_equal(results["if:0"], want)
