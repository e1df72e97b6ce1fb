"""Writing onnx's inference results back into the IR: each type decoded once but every
value's desc its own (its source one detached copy of the type's value info, so the
inferred model can be let go), graph outputs before value infos
before graph inputs, and value infos read with the model kept undecoded where inference
agrees with them."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ge.graph import load
from ge.graph.value_info import desc_from_value_info
from ge.ops import infer_shapes
from ge.ops.model_inference import _Decoder, _Types

F = TensorProto.FLOAT


def _mlp(value_info: list[onnx.ValueInfoProto] | None = None) -> onnx.ModelProto:
    """x[2,4] -> MatMul -> Add -> Relu -> MatMul -> Add -> y: most values float[2,4]."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.normal(size=(4, 4)).astype(np.float32), n)
             for n in ("w1", "w2")]
    inits += [numpy_helper.from_array(np.zeros(4, np.float32), n) for n in ("b1", "b2")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m1"], name="mm1"),
             helper.make_node("Add", ["m1", "b1"], ["a1"], name="add1"),
             helper.make_node("Relu", ["a1"], ["r1"], name="relu"),
             helper.make_node("MatMul", ["r1", "w2"], ["m2"], name="mm2"),
             helper.make_node("Add", ["m2", "b2"], ["y"], name="add2")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [2, 4])],
                              [helper.make_tensor_value_info("y", F, [2, 4])], inits,
                              value_info=value_info or [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _reference_types(gp: onnx.GraphProto) -> dict[str, onnx.ValueInfoProto]:
    """What the write-back looked values up in before `_Types`: later lists win, within a
    list the last typed entry."""
    found: dict[str, onnx.ValueInfoProto] = {}
    for vi in [*gp.input, *gp.value_info, *gp.output]:
        if vi.type.WhichOneof("value") == "tensor_type" and vi.type.tensor_type.elem_type:
            found[vi.name] = vi
    return found


def test_types_look_up_outputs_then_value_infos_then_inputs() -> None:
    untyped = onnx.ValueInfoProto(name="a")
    gp = helper.make_graph(
        [], "g",
        [helper.make_tensor_value_info("a", F, [1]), helper.make_tensor_value_info("b", F, [2]),
         helper.make_tensor_value_info("d", F, [7])],
        [untyped, helper.make_tensor_value_info("b", F, [3])],
        value_info=[helper.make_tensor_value_info("a", F, [4]),
                    helper.make_tensor_value_info("c", F, [5]),
                    helper.make_tensor_value_info("c", F, [6]),
                    onnx.ValueInfoProto(name="c")])  # "c" twice typed, then untyped
    types = _Types(gp, _Decoder())
    reference = _reference_types(gp)
    for name in ("a", "b", "c", "d", "e"):
        found = types.get(name)
        assert (found[0] if found else None) is reference.get(name), name
        if found:
            assert found[1] == desc_from_value_info(found[0])


def test_every_value_gets_its_own_desc_exported_as_inferred() -> None:
    graph = load(_mlp())
    infer_shapes(graph)
    inferred = onnx.shape_inference.infer_shapes(_mlp(), data_prop=True).graph
    expected = {vi.name: vi for vi in inferred.value_info}
    descs = {}
    for node in graph.get_direct_nodes():
        if node.name in ("mm1", "add1", "relu", "mm2"):
            name = node.get_output_name(0)
            desc = node.get_output_desc(0)
            assert desc == desc_from_value_info(expected[name])
            descs[name] = desc
    assert len(descs) == 4
    # The source export reuses is one unnamed copy per type, not the inferred value info:
    # a reference into the inferred model would keep all of it alive.
    assert descs["m1"]._source is descs["a1"]._source  # float[2,4] both
    assert descs["m1"]._source.name == ""
    exported = {vi.name: vi for vi in graph.to_onnx().graph.value_info}
    for name, vi in expected.items():
        assert exported[name].SerializeToString() == vi.SerializeToString()
    # descs of one type are independent: changing one leaves the others as they were
    relu = graph.find_node_by_name("relu")
    changed = relu.get_output_desc(0).set_shape([8, 1])
    relu.update_output_desc(0, changed)
    assert list(graph.find_node_by_name("mm1").get_output_desc(0).shape) == [2, 4]


def test_value_infos_of_the_model_stay_undecoded_where_inference_agrees() -> None:
    """A model read with value infos keeps those inference confirms as they were read
    (undecoded, the same proto objects); a stale one is replaced by what inference says."""
    inferred = onnx.shape_inference.infer_shapes(_mlp(), data_prop=True).graph
    given = {vi.name: vi for vi in inferred.value_info}
    stale = helper.make_tensor_value_info("r1", F, [9, 9])
    model = _mlp([given["m1"], given["a1"], stale, given["m2"]])
    graph = load(model)
    slots = {n.name: n._out_slot(0) for n in graph.get_direct_nodes()
             if n.name in ("mm1", "add1", "relu", "mm2")}
    infer_shapes(graph)
    for name in ("mm1", "add1", "mm2"):
        node = graph.find_node_by_name(name)
        assert node._out_slot(0) is slots[name]  # untouched, still the proto as read
        assert node.get_output_desc(0) == desc_from_value_info(given[node.get_output_name(0)])
    relu = graph.find_node_by_name("relu")
    assert list(relu.get_output_desc(0).shape) == [2, 4]
    exported = {vi.name: vi.SerializeToString() for vi in graph.to_onnx().graph.value_info}
    assert exported == {name: vi.SerializeToString() for name, vi in given.items()}
