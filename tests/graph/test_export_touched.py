"""A loaded node that changed is written from the NodeProto it was read from with only what
changed rewritten: its inputs, outputs, attributes or metadata, each alone or together;
everything else (doc string, attribute order, its own metadata) comes through as read."""

from __future__ import annotations

import onnx
import onnx.helper as oh

import ge.graph


def _model(tmp_path):
    leaky = oh.make_node("LeakyRelu", ["x"], ["a"], name="leaky", alpha=0.2,
                        doc_string="kept as read")
    leaky.metadata_props.add(key="own", value="entry")
    nodes = [leaky, oh.make_node("Neg", ["a"], ["y"], name="neg"),
             oh.make_node("Abs", ["x"], ["z"], name="abs")]
    vi = [oh.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [2]) for n in "xyz"]
    model = oh.make_model(oh.make_graph(nodes, "g", [vi[0]], vi[1:]),
                          opset_imports=[oh.make_opsetid("", 17)])
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    return path, model


def _saved_nodes(graph, tmp_path):
    graph.save(tmp_path / "out.onnx")
    model = onnx.load(tmp_path / "out.onnx")
    onnx.checker.check_model(model)
    return {n.name: n for n in model.graph.node}


def test_metadata_alone_keeps_the_rest_as_read(tmp_path) -> None:
    path, model = _model(tmp_path)
    graph = ge.graph.load(path)
    graph.find_node_by_name("leaky").set_metadata("touched", "yes")
    leaky = _saved_nodes(graph, tmp_path)["leaky"]
    expected = onnx.NodeProto()
    expected.CopyFrom(model.graph.node[0])
    expected.metadata_props.add(key="touched", value="yes")
    assert leaky == expected


def test_an_input_moved_and_an_attribute_set_are_rewritten(tmp_path) -> None:
    path, _ = _model(tmp_path)
    graph = ge.graph.load(path)
    leaky, neg, abs_ = (graph.find_node_by_name(n) for n in ("leaky", "neg", "abs"))
    graph.remove_edge(leaky, 0, neg, 0)
    graph.add_data_edge(abs_, 0, neg, 0)  # neg now reads z
    leaky.set_attr("alpha", 0.5)
    saved = _saved_nodes(graph, tmp_path)
    assert list(saved["neg"].input) == ["z"] and list(saved["neg"].output) == ["y"]
    assert [(a.name, round(a.f, 6)) for a in saved["leaky"].attribute] == [("alpha", 0.5)]
    assert saved["leaky"].doc_string == "kept as read"
    assert [(p.key, p.value) for p in saved["leaky"].metadata_props] == [("own", "entry")]


def test_a_removed_attribute_is_gone(tmp_path) -> None:
    path, _ = _model(tmp_path)
    graph = ge.graph.load(path)
    graph.find_node_by_name("leaky").remove_attr("alpha")
    assert list(_saved_nodes(graph, tmp_path)["leaky"].attribute) == []
