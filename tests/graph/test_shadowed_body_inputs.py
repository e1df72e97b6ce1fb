"""A body input named like a value of an enclosing graph (onnx's checker and onnxruntime
accept it; trial Y) loads under a new name, so that ge's names stay unique across scopes:
the model was refused at the end of a compilation ("value 'x' shadows a value of an
enclosing graph"). The body's reads of it, the bodies inside it, and its outputs follow."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

import ge
import ge.graph


def _vi(name: str, dtype: int = TensorProto.FLOAT, shape: list[int] | None = None
        ) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, [2, 3] if shape is None else shape)


def _loop_model() -> onnx.ModelProto:
    """y = Loop(n, x) whose body input `x` shadows the outer `x`; the body relus it, passes
    it through as a second state via an If reading `x` from inside, and reads the outer
    `bias` (not shadowed)."""
    then = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [], [_vi("t")])
    other = helper.make_graph([helper.make_node("Abs", ["x"], ["e"])], "else", [], [_vi("e")])
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]),
         helper.make_node("Add", ["x", "bias"], ["xb"]),
         helper.make_node("Relu", ["xb"], ["x_new"]),
         helper.make_node("If", ["c"], ["branch"], then_branch=then, else_branch=other)],
        "body", [_vi("i", TensorProto.INT64, []), _vi("c", TensorProto.BOOL, []), _vi("x")],
        [_vi("c_out", TensorProto.BOOL, []), _vi("x_new"), _vi("branch")])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "x"], ["y", "scan"], name="loop", body=body)],
        "g", [_vi("x"), _vi("n", TensorProto.INT64, []), _vi("bias")],
        [_vi("y"), helper.make_tensor_value_info("scan", TensorProto.FLOAT, ["steps", 2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def _run(model: onnx.ModelProto) -> list[np.ndarray]:
    feeds = {"x": np.array([[-1, 2, -3], [4, -5, 6]], np.float32),
             "n": np.array(2, np.int64), "bias": np.full((2, 3), 0.5, np.float32)}
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def test_a_shadowing_body_input_loads_renamed_and_valid() -> None:
    graph = ge.graph.load(_loop_model())
    assert graph.find_problems() == []
    (loop,) = graph.nodes_of_type("Loop")
    (body,) = loop.get_subgraphs()
    data = sorted(body.nodes_of_type("Data"), key=lambda n: n.get_attr("index"))
    assert [n.name for n in data] == ["i", "c", "x_1"]
    add = body.nodes_of_type("Add")[0]
    assert add.get_in_data_nodes_and_port_indexes(0)[0] is data[2]  # the body's own x
    assert add.get_in_data_nodes_and_port_indexes(1)[0].owner_graph is graph  # outer bias
    (if_node,) = body.nodes_of_type("If")
    then = if_node.get_subgraphs()[0]
    assert then.nodes_of_type("Neg")[0].get_in_data_nodes_and_port_indexes(0)[0] is data[2]


def test_it_compiles_and_computes_what_it_did(tmp_path: Path) -> None:
    model = _loop_model()
    result = ge.compile(model, verify=True)
    out = tmp_path / "out.onnx"
    result.save(out)
    saved = onnx.load(out)
    onnx.checker.check_model(saved, full_check=True)
    for got, want in zip(_run(saved), _run(model), strict=True):
        np.testing.assert_array_equal(got, want)


def _scan_model(body_value: str) -> onnx.ModelProto:
    """acc, ys = Scan(init, Relu(x)) whose body computes `body_value` (its second output is
    `ys`, named as the Scan's own output, as trial E's export wrote it)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "xs"], [body_value]),
         helper.make_node("Identity", [body_value], ["ys"]),
         helper.make_node("Identity", [body_value], ["acc_out"])], "sbody",
        [_vi("acc_in", shape=[3]), _vi("xs", shape=[3])],
        [_vi("acc_out", shape=[3]), _vi("ys", shape=[3])])
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]),
         helper.make_node("Scan", ["init", "r"], ["acc", "ys"], name="S", body=body,
                          num_scan_inputs=1)],
        "g", [_vi("init", shape=[3]), _vi("x", shape=[4, 3])],
        [_vi("acc", shape=[3]), _vi("ys", shape=[4, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_a_body_value_named_like_its_owners_output_shadows_nothing(tmp_path: Path) -> None:
    """Trial E: the body cannot read the Scan's own output `ys` (or anything computed after
    the Scan), so its `ys` shadows nothing, as onnx's checker says; validation refused it
    ("value 'ys' shadows a value of an enclosing graph"), so under --check full a pass
    adding an Identity in the body failed E13028."""
    model = _scan_model("s")
    onnx.checker.check_model(model, full_check=True)
    assert ge.graph.load(model).find_problems() == []
    plugin = tmp_path / "ident.py"
    plugin.write_text('''\
from ge.passes import FusionBasePass, PassStage, register_fusion_pass

@register_fusion_pass(name="IdentBodyOuts", stage=PassStage.AFTER_INFER_SHAPE)
class IdentBodyOuts(FusionBasePass):
    def run(self, graph, context):
        if graph.parent_node is None:
            return 1
        (net,) = graph.nodes_of_type("NetOutput")
        src, j = net.get_in_data_nodes_and_port_indexes(1)
        idn = graph.add_node("Identity", name="ib", num_inputs=1, num_outputs=1)
        graph.add_data_edge(src, j, idn, 0)
        graph.remove_edge(src, j, net, 1)
        graph.add_data_edge(idn, 0, net, 1)
        return True
''')
    out = tmp_path / "o.onnx"
    result = ge.compile(model, pass_paths=[plugin], check="full")
    result.save(out)
    assert [r.pass_name for r in result.report.records if r.changed][:1] == ["IdentBodyOuts"]
    onnx.checker.check_model(onnx.load(out), full_check=True)


def test_a_body_value_named_like_a_value_it_could_read_still_shadows_it() -> None:
    """`r` is computed before the Scan: the body could read it, so its own `r` shadows it
    (onnx's checker refuses it too)."""
    graph = ge.graph.load(_scan_model("r"))
    assert [p.message for p in graph.find_problems()] == [
        "value 'r' shadows a value of an enclosing graph"]
