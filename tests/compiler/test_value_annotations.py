"""What a model's value declarations say beside the types (an exporter's metadata, a doc
string) is written back after a compilation, whose shape inference gives those values new
descs (trial S: an intermediate value's `metadata_props` went with its old desc)."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper

import ge


def _noted(value: onnx.ValueInfoProto, **metadata: str) -> onnx.ValueInfoProto:
    for key, text in metadata.items():
        value.metadata_props.add(key=key, value=text)
    value.doc_string = f"doc of {value.name}"
    return value


def test_values_keep_their_annotations_through_a_compilation(tmp_path: Path) -> None:
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node("Sigmoid", ["x"], ["cc"], name="a"),
         helper.make_node("Abs", ["cc"], ["y"], name="b")], "g",
        [_noted(helper.make_tensor_value_info("x", f, [2]), io="in")],
        [_noted(helper.make_tensor_value_info("y", f, [2]), io="out")],
        value_info=[_noted(helper.make_tensor_value_info("cc", f, [2]), vi="cc-meta")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    out = tmp_path / "out.onnx"
    ge.compile(model).save(out)
    written = onnx.load(out).graph

    def notes(values: list[onnx.ValueInfoProto]) -> dict[str, tuple[dict[str, str], str]]:
        return {v.name: ({p.key: p.value for p in v.metadata_props}, v.doc_string)
                for v in values}

    assert notes(list(written.value_info)) == {"cc": ({"vi": "cc-meta"}, "doc of cc")}
    assert notes(list(written.input)) == {"x": ({"io": "in"}, "doc of x")}
    assert notes(list(written.output)) == {"y": ({"io": "out"}, "doc of y")}
