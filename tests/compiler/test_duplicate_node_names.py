"""Two nodes of one graph with the same name: valid ONNX, but onnxruntime refuses the model
("two nodes with same node name"). A compilation writes the unique names the IR gave them
on load (the first keeps the name), in the root graph and in bodies alike, and warns
(CompileWarning) naming the graph, the name and the new names; nodes without a name keep
none. Plain load and save stay lossless (tests/graph/test_roundtrip.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper

import ge
import ge.graph
from ge.cli import cli
from ge.errors import CompileWarning, PassRunError

WARNING = ("onnxruntime refuses a graph with two nodes of one name (two nodes with same node "
           "name); the compiled model names them apart: graph 'g': the 3 nodes named 'dup' "
           "as 'dup', 'dup_1', 'dup_2'; graph 'then': the 2 nodes named 'dup' as 'dup', "
           "'dup_1'")


def _model() -> onnx.ModelProto:
    """y = If(c, then: 2 * |-x| + 1, else: |-x| - 3): the root graph has three nodes named
    'dup', the then body two (the name of the root's, which a body may reuse), the else body
    two without a name."""
    def body(name: str, first: onnx.NodeProto, second: onnx.NodeProto) -> onnx.GraphProto:
        return helper.make_graph(
            [first, second], name, [],
            [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, [3])])

    then = body("then",
                helper.make_node("Mul", ["b", "two"], ["then_m"], name="dup"),
                helper.make_node("Add", ["then_m", "one"], ["then_out"], name="dup"))
    other = body("else",
                 helper.make_node("Sub", ["b", "three"], ["else_s"]),
                 helper.make_node("Identity", ["else_s"], ["else_out"]))
    nodes = [
        helper.make_node("Neg", ["x"], ["a"], name="dup"),
        helper.make_node("Abs", ["a"], ["b"], name="dup"),
        helper.make_node("If", ["c"], ["y"], name="dup", then_branch=then, else_branch=other),
    ]
    weights = [helper.make_tensor(name, TensorProto.FLOAT, [], [value])
               for name, value in (("one", 1.0), ("two", 2.0), ("three", 3.0))]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _names(graph: onnx.GraphProto) -> dict[str, list[str]]:
    """The node names of `graph` and of its bodies, by graph name."""
    names = {graph.name: [node.name for node in graph.node]}
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                names.update(_names(attr.g))
    return names


def _check_runs(path: Path) -> None:
    """onnxruntime loads the compiled model and computes what the model means."""
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = np.array([1.5, -2.0, 0.0], np.float32)
    for c, expected in ((True, 2 * np.abs(x) + 1), (False, np.abs(x) - 3)):
        (y,) = session.run(None, {"x": x, "c": np.array(c)})
        np.testing.assert_allclose(y, expected)


def test_the_original_is_refused_by_onnxruntime() -> None:
    """What the fix is for: onnxruntime does not load the model as written."""
    with pytest.raises(Exception, match="two nodes with same node name"):
        ort.InferenceSession(_model().SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("verify", [False, True])
def test_ge_compile_writes_unique_names_and_warns(tmp_path: Path, verify: bool) -> None:
    """The root graph's and the then body's duplicates get their IR names, the else body's
    nodes stay unnamed; the warnings name graph, name and new names. With --verify the
    original runs too (as given, with the names it will be written with)."""
    source, output = tmp_path / "dup.onnx", tmp_path / "out.onnx"
    onnx.save(_model(), source)
    result = CliRunner().invoke(cli, ["compile", str(source), "-o", str(output), "--json",
                                      *(["--verify"] if verify else [])])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    messages = [w["message"] for w in payload["warnings"]]
    assert [w["category"] for w in payload["warnings"]] == ["CompileWarning"]
    assert messages == [WARNING]
    if verify:
        assert payload["verification"]["ok"] is True
    assert _names(onnx.load(output).graph) == {
        "g": ["dup", "dup_1", "dup_2"], "then": ["dup", "dup_1"], "else": ["", ""]}
    _check_runs(output)


def test_the_api_writes_unique_names_of_a_proto(tmp_path: Path) -> None:
    """ge.compile given the proto (loaded there, not in place) does the same."""
    with pytest.warns(CompileWarning) as caught:
        result = ge.compile(_model())
    assert [str(w.message) for w in caught] == [WARNING]
    result.save(tmp_path / "out.onnx")
    _check_runs(tmp_path / "out.onnx")


def test_a_failing_compilation_gives_a_graph_back_with_its_names(tmp_path: Path,
                                                                write) -> None:
    """A Graph compiled in place and failing is given back unchanged: it writes the names
    it was read with again, duplicates included (as plain load and save do)."""
    plugin = write("fails.py", """
        from ge.passes import FusionBasePass, register_fusion_pass

        @register_fusion_pass(name="Fails", stage="AfterInferShape")
        class Fails(FusionBasePass):
            def run(self, graph, context):
                raise RuntimeError("no")
        """)
    graph = ge.graph.load(_model())
    with pytest.warns(CompileWarning), pytest.raises(PassRunError):
        ge.compile(graph, pass_paths=[plugin])
    assert _names(graph.to_onnx().graph) == _names(_model().graph)


def test_a_name_taken_by_a_renamed_node_is_given_up_too(tmp_path: Path) -> None:
    """'a', 'a', 'a_1': the second 'a' is 'a_1' in the IR, so the node read as 'a_1' writes
    its own IR name, and a warning says why."""
    nodes = [helper.make_node("Neg", ["x"], ["p"], name="a"),
             helper.make_node("Abs", ["p"], ["q"], name="a"),
             helper.make_node("Neg", ["q"], ["y"], name="a_1")]
    model = helper.make_model(
        helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]),
        opset_imports=[helper.make_opsetid("", 17)])
    with pytest.warns(CompileWarning) as caught:
        result = ge.compile(model)
    written = [node.name for node in result.to_onnx().graph.node]
    assert len(set(written)) == 3 and written[:2] == ["a", "a_1"]
    assert [str(w.message) for w in caught] == [
        "onnxruntime refuses a graph with two nodes of one name (two nodes with same node "
        "name); the compiled model names them apart: graph 'g': the 2 nodes named 'a' as "
        f"'a', 'a_1'; graph 'g': node 'a_1' as {written[2]!r} (a node of a duplicate name is "
        "named 'a_1' now)"]
    result.save(tmp_path / "out.onnx")
    x = np.array([1.0, -2.0], np.float32)
    session = ort.InferenceSession(str(tmp_path / "out.onnx"),
                                   providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"x": x})[0], -np.abs(-x))


def test_unique_names_warn_nothing(tmp_path: Path) -> None:
    """A model whose names are unique (several empty ones included) compiles without the
    warning and keeps its names."""
    nodes = [helper.make_node("Neg", ["x"], ["p"]), helper.make_node("Abs", ["p"], ["q"]),
             helper.make_node("Neg", ["q"], ["y"], name="x")]  # (as the input: no node)
    model = helper.make_model(
        helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]),
        opset_imports=[helper.make_opsetid("", 17)])
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        result = ge.compile(model)
    assert [node.name for node in result.to_onnx().graph.node] == ["", "", "x"]
