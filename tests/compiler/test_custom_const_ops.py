"""An operator a custom domain names `Const` is an operator like any other: ge's own `Const`
(an initializer, a `Constant` operator) is the standard domain's (`ge.graph.node.is_const`).
Taking it for one, ge refused a valid model (GE1003: "Const node has 1 inputs") and wrote
a compiled model with the operator turned into an initializer holding its attribute, a
model that computes something else."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
import ge.graph
from ge.graph import DataType, TensorDesc
from ge.ops import register_op, unregister_op

DOMAIN = "test.customconst"


@pytest.fixture
def scaled_const() -> Iterator[None]:
    """`test.customconst::Const`: ten times its `value` (not its value, as ge's Const)."""
    def infer(ctx):  # type: ignore[no-untyped-def]
        value = ctx.attrs["value"]
        return [TensorDesc(list(value.shape), data_type=DataType.DT_FLOAT)]

    register_op("Const", domain=DOMAIN, inputs=[], outputs=["y"],
                attributes={"value": "tensor"}, infer=infer,
                kernel=lambda value: value.numpy() * 10)
    yield
    unregister_op("Const", DOMAIN)


def _model(node: onnx.NodeProto, reads: str = "c") -> onnx.ModelProto:
    """`node` (writing "c") -> Relu -> Add(x, .) = y."""
    graph = helper.make_graph(
        [node, helper.make_node("Relu", [reads], ["r"], name="relu"),
         helper.make_node("Add", ["x", "r"], ["y"], name="add")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid(DOMAIN, 1)])


def _scaled(name: str = "scaled", value: float = 1.0) -> onnx.NodeProto:
    return helper.make_node("Const", [], ["c"], name=name, domain=DOMAIN,
                            value=numpy_helper.from_array(np.array([value, -2.0], np.float32)))


def test_it_is_compiled_and_written_as_the_operator_it_is(scaled_const: None,
                                                          tmp_path: Path) -> None:
    model = _model(_scaled())
    result = ge.compile(model, builtin_passes=False)
    counts = result.report.counts_after
    assert (counts.nodes, counts.constants) == (3, 0)
    out = tmp_path / "out.onnx"
    result.save(out)
    written = onnx.load(out)
    assert [(n.op_type, n.domain) for n in written.graph.node] == [
        ("Const", DOMAIN), ("Relu", ""), ("Add", "")]
    assert list(written.graph.initializer) == []
    assert written.graph.node[0] == model.graph.node[0]


def test_a_changed_one_is_written_as_read_with_the_change() -> None:
    """Touched (here its metadata), it is written from the proto it was read from, as
    any operator is: not as a `Constant` (nor, without a `value`, a KeyError)."""
    for node in (_scaled(), helper.make_node("Const", ["x"], ["c"], name="scaled",
                                             domain=DOMAIN)):
        graph = ge.graph.load(_model(node))
        graph.find_node_by_name("scaled").set_metadata("seen", "yes")
        proto = graph.to_onnx(lift_constants=True).graph.node[0]
        assert (proto.op_type, proto.domain, list(proto.input)) == (
            "Const", DOMAIN, list(node.input))
        assert list(proto.attribute) == list(node.attribute)
        assert [(p.key, p.value) for p in proto.metadata_props] == [("seen", "yes")]


def test_one_reading_an_input_is_valid() -> None:
    """A Const of a custom domain may read inputs: the IR's arity rule for constants (none
    in, one out, a Tensor `value`) is not its own."""
    graph = ge.graph.load(_model(helper.make_node("Const", ["x"], ["c"], name="scaled",
                                                  domain=DOMAIN)))
    assert graph.find_problems() == []
    graph.validate()


def test_its_value_attribute_is_not_its_output() -> None:
    """Until inferred, its output is unknown (ge's Const's is its value's), and it has no
    value key (constant deduplication merges constants of equal values)."""
    graph = ge.graph.load(_model(_scaled()))
    node = graph.find_node_by_name("scaled")
    assert node.get_output_desc(0).data_type == DataType.DT_UNDEFINED
    assert node.value_key() is None
    assert graph.add_const(np.array([1.0, -2.0], np.float32)).value_key() is not None


@pytest.mark.builtin_passes
def test_no_built_in_pass_takes_its_value_attribute_for_its_output(
        scaled_const: None, tmp_path: Path) -> None:
    """`x * (c / s)` with c = 10 × [1, 1]: ReciprocalMulFusion took the Div for `1 / s`
    (its pattern's constant bound the operator, whose `value` is all ones) and made
    `x / s`. ConstantFolding now folds the operator by its kernel first, and the fusion
    leaves `10 / s` alone: the compiled model computes what the model does."""
    graph = helper.make_graph(
        [_scaled(value=1.0), helper.make_node("Div", ["c", "s"], ["q"], name="div"),
         helper.make_node("Mul", ["x", "q"], ["y"], name="mul")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(DOMAIN, 1)])
    model.graph.node[0].attribute[0].t.CopyFrom(
        numpy_helper.from_array(np.ones(2, np.float32), "value"))
    result = ge.compile(model)
    assert "ReciprocalMulFusion" not in {r.pass_name for r in result.report.records
                                         if r.changed}
    out = tmp_path / "out.onnx"
    result.save(out)
    x, s = np.array([3.0, -1.0], np.float32), np.array([2.0, 4.0], np.float32)
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(["y"], {"x": x, "s": s})[0], x * 10 / s)


@pytest.mark.builtin_passes
def test_constant_folding_does_not_read_its_value_attribute(scaled_const: None) -> None:
    """Too large to fold (its output over the size limit, computed from no constant), the
    operator stays; the ReduceSum reading it was folded from its `value` (64, not 640)."""
    graph = helper.make_graph(
        [helper.make_node("Const", [], ["c"], name="scaled", domain=DOMAIN,
                          value=numpy_helper.from_array(np.ones(64, np.float32))),
         helper.make_node("ReduceSum", ["c"], ["total"], name="sum", keepdims=0),
         helper.make_node("Add", ["x", "total"], ["y"], name="add")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(DOMAIN, 1)])
    result = ge.compile(model, options={"ge.constant_folding.size_limit": "16"})
    assert [(n.type, n.domain) for n in result.graph.get_direct_nodes()
            if n.type not in ("Data", "NetOutput")] == [
        ("Const", DOMAIN), ("ReduceSum", ""), ("Add", "")]
