"""The engine steps of the pipeline: shape inference after BeforeInferShape, final validation
at the end, and shared models that still compute the same after a compilation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import ge.graph
from ge.compiler import compile_graph
from ge.errors import GraphValidationError, PassRunError, ShapeInferenceError
from ge.graph import DataType, Format, Graph, Node, Tensor, TensorDesc
from model_paths import all_shared_models, shared_model
from plugin_fixtures import small_graph

STRUCTURAL = ("Data", "Const", "NetOutput")

SHAPE_LOG_PASS = """
import builtins
from ge.passes import FusionBasePass, register_fusion_pass

@register_fusion_pass(name="{name}", stage="{stage}")
class {name}(FusionBasePass):
    def run(self, graph, context):
        for node in graph.get_direct_nodes():
            if node.type in ("Data", "Const", "NetOutput"):
                continue
            desc = node.get_output_desc(0)
            builtins.GE_TEST_LOG.append(
                ("{name}", graph.name, node.name, desc.data_type.name, list(desc.shape))
            )
"""


@pytest.fixture
def shape_log(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str, str, list]]:
    import builtins

    log: list[tuple[str, str, str, str, list]] = []
    monkeypatch.setattr(builtins, "GE_TEST_LOG", log, raising=False)
    return log


def _shape_loggers(write) -> Path:
    write("loggers/before.py", SHAPE_LOG_PASS.format(name="Before", stage="BeforeInferShape"))
    write("loggers/after.py", SHAPE_LOG_PASS.format(name="After", stage="AfterInferShape"))
    return write("loggers/.keep", "").parent


def _typed_data(graph: Graph, index: int, shape: list[int]) -> Node:
    data = graph.add_node("Data", name=f"x{index}", attrs={"index": index})
    data.update_output_desc(0, TensorDesc(shape, Format.FORMAT_ND, DataType.DT_FLOAT))
    return data


def matmul_graph(right_shape: list[int]) -> Graph:
    """x0 [2, 3] @ x1 (`right_shape`) -> Relu -> NetOutput; MatMul and Relu have no desc."""
    graph = Graph("mm_graph")
    left, right = _typed_data(graph, 0, [2, 3]), _typed_data(graph, 1, right_shape)
    matmul = graph.add_node("MatMul", name="the_matmul", num_inputs=2)
    relu = graph.add_node("Relu", name="the_relu", num_inputs=1)
    output = graph.add_node("NetOutput", name="out", num_inputs=1, num_outputs=0)
    graph.add_data_edge(left, 0, matmul, 0)
    graph.add_data_edge(right, 0, matmul, 1)
    graph.add_data_edge(matmul, 0, relu, 0)
    graph.add_data_edge(relu, 0, output, 0)
    return graph


def node_names_of(graph: Graph) -> list[str]:
    return sorted(n.name for n in graph.get_all_nodes())


def _unknown(node: Node) -> bool:
    return node.get_output_desc(0).data_type == DataType.DT_UNDEFINED


# -- (a) passes after the shape-inference step see inferred descs ---------------------------


def test_after_infer_shape_passes_see_inferred_descs(write, shape_log) -> None:
    graph = matmul_graph([3, 4])
    assert _unknown(graph.find_node_by_name("the_matmul"))
    assert _unknown(graph.find_node_by_name("the_relu"))
    compile_graph(graph, pass_paths=[_shape_loggers(write)])
    assert [row for row in shape_log if row[0] == "Before"] == [
        ("Before", "mm_graph", "the_matmul", "DT_UNDEFINED", [-2]),  # unknown rank
        ("Before", "mm_graph", "the_relu", "DT_UNDEFINED", [-2]),  # unknown rank
    ]
    assert [row for row in shape_log if row[0] == "After"] == [
        ("After", "mm_graph", "the_matmul", "DT_FLOAT", [2, 4]),
        ("After", "mm_graph", "the_relu", "DT_FLOAT", [2, 4]),
    ]


def test_inference_reaches_the_subgraphs_of_a_shared_model(write, shape_log) -> None:
    graph = ge.graph.load(shared_model("control_flow"))
    nodes = [n for n in graph.get_all_nodes() if n.type not in STRUCTURAL]
    assert any(n.owner_graph is not graph for n in nodes)  # If/Loop bodies included
    assert all(_unknown(n) for n in nodes)  # the model as exported has no value_info
    compile_graph(graph, pass_paths=[_shape_loggers(write)])
    before = [row for row in shape_log if row[0] == "Before"]
    after = [row for row in shape_log if row[0] == "After"]
    assert len(before) == len(after) == len(nodes)
    assert {row[3] for row in before} == {"DT_UNDEFINED"}
    assert "DT_UNDEFINED" not in {row[3] for row in after}
    assert {row[1] for row in after} == {graph.name} | {
        sub.name for sub in graph.get_all_subgraphs()
    }
    gemm = next(row for row in after if row[2] == "/lin/Gemm")
    assert gemm[3:] == ("DT_FLOAT", [2, 8])


# -- (b) a failing inference stops the compilation and changes nothing ----------------------


def test_a_failing_inference_is_ge1305_at_infer_shape_and_changes_nothing(
    write, shape_log
) -> None:
    graph = matmul_graph([4, 5])
    before_proto = graph.to_onnx().SerializeToString()
    before_dump = graph.dump_to_stream()
    with pytest.raises(ShapeInferenceError) as info:
        compile_graph(graph, pass_paths=[_shape_loggers(write)])
    err = info.value
    assert err.code == "GE1305"
    assert err.stage == "InferShape"
    assert "the_matmul" in err.message and "the_matmul" in err.nodes
    assert "Incompatible dimensions" in err.message
    assert "(stage InferShape)" in str(err)
    assert {row[0] for row in shape_log} == {"Before"}  # AfterInferShape never ran
    assert graph.to_onnx().SerializeToString() == before_proto
    assert graph.dump_to_stream() == before_dump
    assert _unknown(graph.find_node_by_name("the_matmul"))


def test_a_pass_that_breaks_typing_before_inference_is_caught_there(write) -> None:
    path = write(
        "untypes.py",
        """
        from ge.passes import FusionBasePass, register_fusion_pass
        from ge.graph import TensorDesc

        @register_fusion_pass(name="Untypes", stage="BeforeInferShape")
        class Untypes(FusionBasePass):
            def run(self, graph, context):
                graph.get_data_nodes()[0].update_output_desc(0, TensorDesc.unknown())
        """,
    )
    with pytest.raises(ShapeInferenceError) as info:
        compile_graph(small_graph(), pass_paths=[path])
    assert info.value.stage == "InferShape"
    assert "Relu" in info.value.nodes  # the first node that could not be typed


# -- (c) final validation -------------------------------------------------------------------

DANGLING_PASS = """
from ge.passes import FusionBasePass, register_fusion_pass

@register_fusion_pass(name="Dangling", stage="AfterOriginGraphOptimize")
class Dangling(FusionBasePass):
    def run(self, graph, context):
        graph.add_node("Identity", name="dangling_identity", num_inputs=1)
"""


def test_a_pass_that_leaves_an_unconnected_input_is_its_own_e13028(write) -> None:
    path = write("dangling.py", DANGLING_PASS)
    graph = small_graph()
    names = node_names_of(graph)
    with pytest.raises(PassRunError) as info:
        compile_graph(graph, pass_paths=[path])
    err = info.value
    assert (err.code, err.pass_name, err.stage) == ("E13028", "Dangling",
                                                    "AfterOriginGraphOptimize")
    assert "the pass left the graph invalid: arity: required input 0 (input) of Identity node " \
           "'dangling_identity' is not connected" in err.message
    assert err.location is not None and err.location.file == str(path)
    assert node_names_of(graph) == names  # rolled back


def test_without_checks_final_validation_still_catches_it_as_ge1003(write) -> None:
    path = write("dangling.py", DANGLING_PASS)
    with pytest.raises(GraphValidationError) as info:
        compile_graph(small_graph(), pass_paths=[path], check="none")
    err = info.value
    assert err.code == "GE1003"
    assert err.stage == "FinalValidation"
    assert err.nodes == ("dangling_identity",)
    assert [p.kind for p in err.problems] == ["arity"]
    # the plugin pass that last changed the node is named, with its line, and is the
    # error's pass (what --json reports)
    assert err.pass_name == "Dangling"
    assert str(err).endswith(
        "; node 'dangling_identity' was last changed by pass Dangling (AfterOriginGraphOptimize)"
        f" (pass Dangling, stage FinalValidation, at {path}:5)")


BREAKS_TWICE = """
from ge.passes import FusionBasePass, register_fusion_pass

@register_fusion_pass(name="BreaksTwice", stage="AfterBuiltinFusionPass")
class BreaksTwice(FusionBasePass):
    def run(self, graph, context):
        output = graph.get_net_output()
        graph.remove_edge(output.get_input_producer(0)[0], 0, output, 0)
        graph.add_node("NetOutput", name="second_output", num_outputs=0)
"""


def test_the_full_check_lists_every_problem(write) -> None:
    path = write("breaks_twice.py", BREAKS_TWICE)
    graph = small_graph()
    with pytest.raises(PassRunError) as info:
        compile_graph(graph, pass_paths=[path], check="full")
    message = info.value.message
    assert "graph output 0 (input 0 of" in message
    assert "a graph needs exactly one NetOutput node, found 2" in message
    with pytest.raises(PassRunError) as info:  # the region check sees the output it touched
        compile_graph(small_graph(), pass_paths=[path])
    assert "graph output 0 (input 0 of" in info.value.message


REWIRES_BEFORE_INFERENCE = """
from ge.passes import FusionBasePass, register_fusion_pass

@register_fusion_pass(name="AddIdentity", stage="BeforeInferShape")
class AddIdentity(FusionBasePass):
    def run(self, graph, context):
        output = graph.get_net_output()
        producer, index = output.get_input_producer(0)
        identity = graph.add_node("Identity", name="added_identity", num_inputs=1)
        graph.remove_edge(producer, index, output, 0)
        graph.add_data_edge(producer, index, identity, 0)
        graph.add_data_edge(identity, 0, output, 0)
        return True
"""


def test_the_full_check_of_a_sound_pass_before_shape_inference_passes(write) -> None:
    """It failed the pass with an UnboundLocalError: the shape check after it read the node
    list made only once shapes are inferred."""
    path = write("rewires.py", REWIRES_BEFORE_INFERENCE)
    graph = small_graph()
    compile_graph(graph, pass_paths=[path], check="full")
    assert graph.find_node_by_name("added_identity") is not None


def test_a_compilation_can_be_given_its_own_engine_steps(write) -> None:
    calls: list[str] = []
    steps = {"infer_shape": lambda g, o: calls.append("infer"),
             "final_validation": lambda g, o: calls.append("valid")}
    graph = matmul_graph([4, 5])  # would fail the default inference
    graph.add_node("Identity", name="dangling_identity", num_inputs=1)  # and validation
    compile_graph(graph, steps=steps)
    assert calls == ["infer", "valid"]
    assert _unknown(graph.find_node_by_name("the_matmul"))
    with pytest.raises(ShapeInferenceError):  # the next compilation has the defaults again
        compile_graph(_dangling(), steps=None)


def _dangling() -> Graph:
    graph = small_graph()
    graph.add_node("Identity", name="dangling_identity", num_inputs=1)
    return graph


# -- (d) every shared model compiles and still computes the same ----------------------------


def _inputs_from_sidecar(model: Path) -> dict[str, np.ndarray]:
    sidecar = json.loads(model.with_suffix(".json").read_text())
    rng = np.random.default_rng(0)
    feeds: dict[str, np.ndarray] = {}
    for spec in sidecar["inputs"]:
        name, shape, dtype = spec["name"], spec["shape"], spec["dtype"]
        if dtype == "int64":
            if "mask" in name:
                value = np.ones(shape, np.int64)
            elif not shape:  # control_flow's trip count n
                value = np.array(3, np.int64)
            else:  # token ids: small, valid for every vocabulary
                value = rng.integers(0, 10, size=shape, dtype=np.int64)
        else:
            value = rng.standard_normal(shape).astype(dtype)
        feeds[name] = value
    return feeds


def _run(model_bytes: bytes, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


@pytest.mark.parametrize("model", all_shared_models(), ids=lambda p: p.stem)
def test_shared_models_compile_and_compute_the_same(model: Path) -> None:
    feeds = _inputs_from_sidecar(model)
    expected = _run(model.read_bytes(), feeds)
    graph = ge.graph.load(model)
    report = compile_graph(graph)
    assert report.records == []
    inner = [n for n in graph.get_all_nodes() if n.type not in STRUCTURAL]
    assert not any(_unknown(n) for n in inner if n.get_outputs_size())
    actual = _run(graph.to_onnx().SerializeToString(), feeds)
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_steps_count_nodes_as_the_report_does() -> None:
    """A step counts the model as the report's totals do (`NodeCounts`: the main graph's
    nodes, the bodies' and the constants apart; no Data or NetOutput: an audit saw steps
    count those, 163 beside the report's 160)."""
    graph = ge.graph.load(shared_model("control_flow"))
    report = compile_graph(graph, builtin_passes=False)
    first, last = report.steps[0], report.steps[-1]
    before, after = report.counts_before, report.counts_after
    assert (first.nodes_before, first.subgraph_nodes_before, first.constants_before) == (
        before.nodes, before.subgraph_nodes, before.constants) == (6, 10, 8)
    assert (last.nodes_after, last.subgraph_nodes_after, last.constants_after) == (
        after.nodes, after.subgraph_nodes, after.constants)
    everything = len(graph.get_all_nodes())  # (with the bodies' Data and NetOutput nodes)
    assert before.nodes + before.subgraph_nodes + before.constants < everything


def test_constants_keep_their_values_through_inference() -> None:
    graph = Graph("consts")
    data = _typed_data(graph, 0, [2, 3])
    weight = graph.add_const(Tensor(np.full((3, 2), 0.5, np.float32)), name="weight")
    matmul = graph.add_node("MatMul", name="mm", num_inputs=2)
    output = graph.add_node("NetOutput", num_inputs=1, num_outputs=0)
    graph.add_data_edge(data, 0, matmul, 0)
    graph.add_data_edge(weight, 0, matmul, 1)
    graph.add_data_edge(matmul, 0, output, 0)
    compile_graph(graph)
    assert list(matmul.get_output_desc(0).shape) == [2, 2]
    np.testing.assert_array_equal(weight.get_attr("value").numpy(), np.full((3, 2), 0.5))


def test_descs_written_before_a_later_failure_are_rolled_back() -> None:
    """Custom operators are typed one by one: the first gets its desc, the second's inference
    function raises; the step's transaction takes the first desc back."""
    from ge.ops import register_op, unregister_op

    def widen(ctx):  # type: ignore[no-untyped-def]
        desc = ctx.input_descs[0].copy()
        return [desc.set_shape([*desc.shape[:-1], desc.shape[-1] * 2])]

    def refuse(ctx):  # type: ignore[no-untyped-def]
        raise ValueError("cannot type this")

    def kernel(x):  # type: ignore[no-untyped-def]
        return x

    for op_type, infer in (("Widen", widen), ("Refuse", refuse)):
        register_op(op_type, domain="test.pipeline", inputs=["x"], outputs=["y"], infer=infer,
                    kernel=kernel)
    try:
        graph = Graph("custom")
        graph.model.opset_imports = {"": 17, "test.pipeline": 1}
        data = _typed_data(graph, 0, [2, 3])
        widen_node = graph.add_node("Widen", name="widen", domain="test.pipeline", num_inputs=1)
        refuse_node = graph.add_node(
            "Refuse", name="refuse", domain="test.pipeline", num_inputs=1
        )
        output = graph.add_node("NetOutput", num_inputs=1, num_outputs=0)
        graph.add_data_edge(data, 0, widen_node, 0)
        graph.add_data_edge(widen_node, 0, refuse_node, 0)
        graph.add_data_edge(refuse_node, 0, output, 0)
        before = graph.dump_to_stream()
        with pytest.raises(ShapeInferenceError) as info:
            compile_graph(graph)
        assert info.value.stage == "InferShape"
        assert info.value.nodes == ("refuse",)
        assert "cannot type this" in info.value.message
        assert _unknown(widen_node)  # typed during the step, then rolled back
        assert graph.dump_to_stream() == before
    finally:
        unregister_op("Widen", "test.pipeline")
        unregister_op("Refuse", "test.pipeline")


def test_a_shape_inference_failure_names_the_cause_once() -> None:
    with pytest.raises(ShapeInferenceError) as info:
        compile_graph(matmul_graph([4, 5]))
    message = info.value.message
    assert message.count("(op_type:") == 1
    assert "node name: the_matmul): [ShapeInferenceError] Incompatible dimensions" in message
    # onnx names no dims: the node's inputs as inference types them up to it (trial S)
    assert message.endswith("(and 1 node(s) after it could not be typed); its inputs: "
                            "float32[2, 3], float32[4, 5]")
    assert info.value.nodes == ("the_matmul", "the_relu")


def test_a_failing_node_of_a_body_gets_no_input_types_of_its_owner() -> None:
    """Trial X: a MatMul failing in an If's branch was followed by "its inputs: bool[]",
    the If's condition: onnx names the owner first. Only a node of the main graph named
    alone gets its inputs; a string tensor's type is `string`, not numpy's `object`."""
    from onnx import TensorProto, helper

    import ge

    branch = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["t"], name="mm_in_then")], "then", [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    other = helper.make_graph(
        [helper.make_node("Identity", ["a"], ["e"], name="id_else")], "else", [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["o"], name="if", then_branch=branch,
                          else_branch=other)], "g",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [4, 5])],
        [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ShapeInferenceError) as info:
        ge.compile(model)
    assert "Incompatible dimensions" in info.value.message
    assert "its inputs" not in info.value.message
    strings = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["o"], name="mm")], "g",
        [helper.make_tensor_value_info("a", TensorProto.STRING, [2, 3]),
         helper.make_tensor_value_info("b", TensorProto.STRING, [4, 5])],
        [helper.make_tensor_value_info("o", TensorProto.STRING, None)])
    with pytest.raises(ShapeInferenceError) as info:
        ge.compile(helper.make_model(strings, opset_imports=[helper.make_opsetid("", 17)]))
    assert info.value.message.endswith("; its inputs: string[2, 3], string[4, 5]")
