"""Loaded value infos are decoded through one memo of types per root graph
(`ge.graph.value_info.TypeDecoder`): values of one type share its decoding, and each value
still gets a desc of its own that keeps its own value info (its name, doc string and
metadata export as written)."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

import ge.graph
from ge.graph.value_info import TypeDecoder, desc_from_value_info, value_info_from_desc


def _chain_model() -> onnx.ModelProto:
    """x -> Relu -> a -> Neg -> b -> Abs -> y, every value typed float[batch, 4] (a and b
    by value_info, with a doc string on `a`)."""
    typed = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 4]) for n in "ab"]
    typed[0].doc_string = "after relu"
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"], name="relu"),
         helper.make_node("Neg", ["a"], ["b"], name="neg"),
         helper.make_node("Abs", ["b"], ["y"], name="abs")],
        "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        value_info=typed)
    return helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 17)])


def test_values_of_one_type_get_descs_of_their_own() -> None:
    graph = ge.graph.load(_chain_model())
    relu, neg = graph.find_node_by_name("relu"), graph.find_node_by_name("neg")
    a, b = relu.get_output_desc(0), neg.get_output_desc(0)
    assert a == b and list(a.get_shape()) == ["batch", 4]
    neg.update_output_desc(0, ge.graph.TensorDesc([7, 4], data_type=ge.graph.DataType.DT_FLOAT))
    assert list(relu.get_output_desc(0).get_shape()) == ["batch", 4]  # not changed with b
    a.set_shape([9])  # a copy handed out: changing it changes neither value
    assert list(relu.get_output_desc(0).get_shape()) == ["batch", 4]


def test_each_value_exports_its_own_value_info() -> None:
    graph = ge.graph.load(_chain_model())
    model = graph.to_onnx()
    infos = {vi.name: vi for vi in model.graph.value_info}
    assert infos["a"].doc_string == "after relu"
    assert not infos["b"].HasField("doc_string")


def test_the_decoder_matches_decoding_each_value() -> None:
    decoder = TypeDecoder()
    infos = [helper.make_tensor_value_info("u", TensorProto.FLOAT16, [2, "n"]),
             helper.make_tensor_value_info("v", TensorProto.FLOAT16, [2, "n"]),
             helper.make_tensor_value_info("w", TensorProto.INT64, None),
             helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, [3])]
    for vi in infos:
        got, want = decoder.decode(vi), desc_from_value_info(vi)
        assert got == want and got._source is vi
        assert value_info_from_desc(vi.name, got) == vi  # lossless: its own proto back
    assert decoder.decode(infos[0]) is not decoder.decode(infos[1])


def test_a_full_decoder_decodes_without_keeping() -> None:
    decoder = TypeDecoder(limit=1)
    first = helper.make_tensor_value_info("u", TensorProto.FLOAT, [1])
    other = helper.make_tensor_value_info("v", TensorProto.DOUBLE, [2])
    assert decoder.template(first.type) is decoder.template(first.type)
    assert decoder.template(other.type) is not decoder.template(other.type)
    assert decoder.decode(other) == desc_from_value_info(other)
