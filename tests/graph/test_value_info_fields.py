"""A value info written from a changed desc keeps its source's doc string and metadata, and
sets no field its source did not: protobuf's proto2 fields have presence, so copying an
absent doc string wrote an empty one, and compiling ge's own output again changed its bytes
(trial D, a Paddle export)."""

from __future__ import annotations

from onnx import TensorProto, helper

from ge.graph.value_info import desc_from_value_info, value_info_from_desc


def test_an_absent_doc_string_stays_absent() -> None:
    desc = desc_from_value_info(helper.make_tensor_value_info("v", TensorProto.FLOAT, [2]))
    desc.set_shape([3])  # changed: the value info is written anew, not reused
    written = value_info_from_desc("v", desc)
    assert not written.HasField("doc_string")
    assert list(written.type.tensor_type.shape.dim[i].dim_value for i in range(1)) == [3]


def test_a_doc_string_and_metadata_are_kept() -> None:
    source = helper.make_tensor_value_info("v", TensorProto.FLOAT, [2], doc_string="why")
    helper.set_metadata_props(source, {"k": "v"})
    desc = desc_from_value_info(source)
    desc.set_shape([3])
    written = value_info_from_desc("w", desc)
    assert written.doc_string == "why" and written.name == "w"
    assert [(p.key, p.value) for p in written.metadata_props] == [("k", "v")]
