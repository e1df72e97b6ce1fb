"""`save(strip_metadata=True)` (`ge compile --strip-metadata`): the doc strings and
`metadata_props` of nodes, values, tensors, graphs, bodies and functions are left out of
the file, what they annotate is written as it was, and the graph in memory keeps them.
Trial AB: ge's compiled dynamo DistilBERT was 331,511 bytes against onnxruntime's
258,174, a quarter of it the exporter's node metadata."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from click.testing import CliRunner
from onnx import helper

import ge.graph
from ge.cli import cli
from model_paths import shared_model


def _annotations(model: onnx.ModelProto) -> list[str]:
    """Where `model` has a doc string or metadata below the model itself."""
    from ge.graph.domains import proto_graphs

    found = []
    roots = [model.graph, *(a.g for f in model.functions for n in f.node for a in n.attribute
                            if a.type == onnx.AttributeProto.GRAPH)]
    nodes = [n for f in model.functions for n in f.node]
    protos: list[Any] = [*model.functions, *(v for f in model.functions for v in f.value_info)]
    for root in roots:
        for graph in proto_graphs(root):
            nodes.extend(graph.node)
            protos.extend((graph, *graph.input, *graph.output, *graph.value_info,
                           *graph.initializer,
                           *(t for sp in graph.sparse_initializer
                             for t in (sp.values, sp.indices))))
    for node in nodes:
        protos.extend((node, *node.attribute,
                       *(a.t for a in node.attribute if a.type == onnx.AttributeProto.TENSOR)))
    for proto in protos:
        if len(getattr(proto, "metadata_props", ())) or proto.doc_string:
            found.append(f"{type(proto).__name__} {getattr(proto, 'name', '')!r}")
    return found


def _outputs(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def test_a_dynamo_export_saved_without_its_annotations(tmp_path: Path) -> None:
    source = shared_model("distilbert_tiny_dynamo")
    graph = ge.graph.load(source)
    graph.root_graph().model.metadata_props["licence"] = "MIT"  # (the model's own: kept)
    kept, stripped = tmp_path / "kept.onnx", tmp_path / "stripped.onnx"
    graph.save(stripped, strip_metadata=True)
    graph.save(kept)  # (after: the graph in memory still has them)
    assert _annotations(onnx.load(kept))  # the exporter's namespaces and stack traces
    assert _annotations(onnx.load(stripped)) == []
    model = onnx.load(stripped)
    assert [(p.key, p.value) for p in model.metadata_props] == [("licence", "MIT")]
    assert stripped.stat().st_size < 0.8 * kept.stat().st_size
    onnx.checker.check_model(model, full_check=True)
    feeds = {"input_ids": np.arange(12, dtype=np.int64).reshape(1, 12),
             "attention_mask": np.ones((1, 12), np.int64)}
    for a, b in zip(_outputs(kept, feeds), _outputs(stripped, feeds), strict=True):
        np.testing.assert_array_equal(a, b)


def test_bodies_functions_and_tensors_are_stripped_too(tmp_path: Path) -> None:
    """Metadata on a node inside an If branch, on a model-local function, its node and its
    value_info, on an initializer, a sparse one's values and indices, a Constant's value
    and a value: all gone (trial AC found the last four kept); the model runs the same."""
    f = onnx.TensorProto.FLOAT

    def noted(proto: Any) -> Any:
        proto.doc_string = "why"
        proto.metadata_props.add(key="k", value="v")
        return proto

    branch = helper.make_graph([noted(helper.make_node("Neg", ["x"], ["t"]))], "then", [],
                               [helper.make_tensor_value_info("t", f, [2])])
    other = helper.make_graph([helper.make_node("Abs", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", f, [2])])
    function = noted(helper.make_function(
        "local", "Twice", ["a"], ["b"], [noted(helper.make_node("Add", ["a", "a"], ["b"]))],
        [helper.make_opsetid("", 17)]))
    function.value_info.append(noted(helper.make_tensor_value_info("b", f, [2])))
    weight = noted(onnx.numpy_helper.from_array(np.ones(2, np.float32), "w"))
    sparse = helper.make_sparse_tensor(
        noted(onnx.numpy_helper.from_array(np.array([3.0], np.float32), "s")),
        noted(onnx.numpy_helper.from_array(np.array([1], np.int64), "s_idx")), [2])
    constant = helper.make_node("Constant", [], ["k"], value=noted(
        onnx.numpy_helper.from_array(np.full(2, 0.5, np.float32), "k_value")))
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["i"], then_branch=branch, else_branch=other),
         helper.make_node("Twice", ["i"], ["d"], domain="local"), constant,
         helper.make_node("Mul", ["d", "w"], ["m"]), helper.make_node("Add", ["m", "s"], ["a"]),
         helper.make_node("Add", ["a", "k"], ["y"])], "g",
        [helper.make_tensor_value_info("x", f, [2]),
         helper.make_tensor_value_info("c", onnx.TensorProto.BOOL, [])],
        [noted(helper.make_tensor_value_info("y", f, [2]))], [weight],
        sparse_initializer=[sparse])
    model = helper.make_model(graph, functions=[function], opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    assert len(_annotations(model)) == 9
    ge.graph.load(source).save(out, strip_metadata=True)
    assert _annotations(onnx.load(out)) == []
    feeds = {"x": np.array([1.0, -2.0], np.float32), "c": np.array(True)}
    np.testing.assert_array_equal(_outputs(out, feeds)[0], _outputs(source, feeds)[0])


def test_ge_compile_strip_metadata(tmp_path: Path) -> None:
    source = shared_model("distilbert_tiny_dynamo")
    sizes = {}
    for flags in ((), ("--strip-metadata",)):
        out = tmp_path / f"out{len(flags)}.onnx"
        ran = CliRunner().invoke(cli, ["compile", str(source), "-o", str(out), "--verify",
                                       *flags])
        assert ran.exit_code == 0, ran.output
        sizes[flags] = out.stat().st_size
        assert bool(_annotations(onnx.load(out))) == (not flags)
    assert sizes[("--strip-metadata",)] < 0.8 * sizes[()]
