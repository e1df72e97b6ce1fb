"""`run_model` / `ModelRunner`: onnxruntime for standard models, the reference evaluator for
models holding custom operators, errors that name the graph, and graphs left untouched."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge.graph
from ge.errors import SessionError, VerificationInputError
from ge.ops import register_op, unregister_op
from ge.session import ModelRunner, generate_inputs, run_model

DOMAIN = "test.session"


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto],
           outputs: list[onnx.ValueInfoProto], *, name: str = "g",
           initializers: list[onnx.TensorProto] | None = None,
           custom: bool = False) -> onnx.ModelProto:
    opsets = [helper.make_opsetid("", 17)]
    if custom:
        opsets.append(helper.make_opsetid(DOMAIN, 1))
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=initializers or [])
    return helper.make_model(graph, opset_imports=opsets)


def _vi(name: str, shape: list[Any], elem: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _infer_same(ctx: Any) -> list[Any]:
    return [ctx.input_descs[0]]


@pytest.fixture
def scale_add() -> Iterator[list[dict[str, Any]]]:
    """test.session::ScaleAdd(x, y, alpha=1.0) = x + alpha * y, with a numpy kernel that
    records the keyword arguments it was called with."""
    calls: list[dict[str, Any]] = []

    def kernel(x: np.ndarray, y: np.ndarray, **attrs: Any) -> np.ndarray:
        calls.append(attrs)
        return x + attrs["alpha"] * y

    register_op("ScaleAdd", domain=DOMAIN, inputs=["x", "y"], outputs=["z"],
                attributes={"alpha": ("float", 1.0)}, infer=_infer_same, kernel=kernel)
    try:
        yield calls
    finally:
        unregister_op("ScaleAdd", DOMAIN)


def test_every_vendored_model_matches_a_direct_onnxruntime_run(
        shared_models: Path, shared_model: str) -> None:
    path = shared_models / f"{shared_model}.onnx"
    graph = ge.graph.load(path)
    before = graph.mutation_count
    inputs = generate_inputs(graph, seed=0)
    outputs = run_model(graph, inputs)

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    expected = session.run(None, inputs)
    assert list(outputs) == names
    for name, want in zip(names, expected):
        assert outputs[name].dtype == want.dtype and outputs[name].shape == want.shape
        np.testing.assert_allclose(outputs[name], want, rtol=1e-4, atol=1e-5)
    assert graph.mutation_count == before  # running a Graph does not change it
    # The same model as a ModelProto gives the same outputs.
    again = run_model(onnx.load(path), inputs)
    for name in names:
        np.testing.assert_array_equal(again[name], outputs[name])


def test_outputs_come_back_by_name_in_graph_order() -> None:
    model = _model([helper.make_node("Neg", ["x"], ["b_neg"]),
                    helper.make_node("Abs", ["x"], ["a_abs"])],
                   [_vi("x", [3])], [_vi("b_neg", [3]), _vi("a_abs", [3])])
    x = np.array([-1.0, 2.0, -3.0], dtype=np.float32)
    outputs = run_model(model, {"x": x})
    assert list(outputs) == ["b_neg", "a_abs"]
    np.testing.assert_array_equal(outputs["b_neg"], -x)
    np.testing.assert_array_equal(outputs["a_abs"], np.abs(x))


def test_a_runner_is_prepared_once_and_runs_many_times() -> None:
    graph = ge.graph.load(_model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2])],
                                 [_vi("y", [2])]))
    runner = ModelRunner(graph)
    assert runner.backend == "onnxruntime" and runner.output_names == ["y"]
    assert [s.name for s in runner.inputs] == ["x"]
    for value in ([1.0, -1.0], [-2.0, 3.0]):
        x = np.array(value, dtype=np.float32)
        np.testing.assert_array_equal(runner.run({"x": x})["y"], np.maximum(x, 0))


def test_custom_kernel_runs_in_the_reference_evaluator(scale_add: list[dict[str, Any]]) -> None:
    model = _model([helper.make_node("ScaleAdd", ["x", "y"], ["z"], domain=DOMAIN, alpha=2.0),
                    helper.make_node("ScaleAdd", ["z", "y"], ["w"], domain=DOMAIN),
                    helper.make_node("Relu", ["w"], ["out"])],
                   [_vi("x", [2, 3]), _vi("y", [2, 3])], [_vi("out", [2, 3])], custom=True)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.full((2, 3), -1.0, dtype=np.float32)
    graph = ge.graph.load(model)
    runner = ModelRunner(graph)
    assert runner.backend == "reference"
    outputs = runner.run({"x": x, "y": y})
    np.testing.assert_allclose(outputs["out"], np.maximum(x + 2 * y + y, 0))
    # Attributes reach the kernel as keywords: the node's value, else the schema default.
    assert scale_add == [{"alpha": 2.0}, {"alpha": 1.0}]
    assert run_model(model, {"x": x, "y": y})["out"].tolist() == outputs["out"].tolist()


def test_custom_kernel_inside_an_if_branch(scale_add: list[dict[str, Any]]) -> None:
    then = helper.make_graph(
        [helper.make_node("ScaleAdd", ["x", "x"], ["t"], domain=DOMAIN, alpha=3.0)],
        "then", [], [_vi("t", [2])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                              [_vi("e", [2])])
    model = _model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                   [_vi("c", [], TensorProto.BOOL), _vi("x", [2])], [_vi("y", [2])],
                   custom=True)
    x = np.array([1.0, -2.0], dtype=np.float32)
    np.testing.assert_allclose(run_model(model, {"c": np.array(True), "x": x})["y"], 4 * x)
    np.testing.assert_allclose(run_model(model, {"c": np.array(False), "x": x})["y"], -x)


def test_custom_decomposition_runs_through_ge_es() -> None:
    from ge.es import onnx as ops

    register_op("MulAdd", domain=DOMAIN, inputs=["x", "y"], outputs=["z"], infer=_infer_same,
                decomposition=lambda x, y: ops.Add(ops.Mul(x, y), y))
    try:
        model = _model([helper.make_node("MulAdd", ["x", "y"], ["z"], domain=DOMAIN)],
                       [_vi("x", [2]), _vi("y", [2])], [_vi("z", [2])], custom=True)
        x, y = np.array([1.0, 2.0], np.float32), np.array([3.0, 4.0], np.float32)
        np.testing.assert_allclose(run_model(model, {"x": x, "y": y})["z"], x * y + y)
    finally:
        unregister_op("MulAdd", DOMAIN)


def test_a_scalar_input_stays_a_scalar() -> None:
    model = _model([helper.make_node("Neg", ["s"], ["y"])], [_vi("s", [])], [_vi("y", [])])
    outputs = run_model(model, {"s": np.array(2.0, np.float32)})
    assert outputs["y"].shape == () and outputs["y"] == -2.0


def test_a_run_time_failure_writes_nothing_on_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    """onnxruntime's own log line (coloured, timestamped) must not come out beside the
    one-line error: `--json` keeps stderr for JSON."""
    model = _model([helper.make_node("Reshape", ["x", "s"], ["y"])],
                   [_vi("x", [6]), _vi("s", [1], TensorProto.INT64)], [_vi("y", None)])
    with pytest.raises(SessionError, match="cannot be reshaped"):
        run_model(model, {"x": np.ones(6, np.float32), "s": np.array([5], np.int64)})
    assert capfd.readouterr().err == ""


def test_a_failing_kernel_is_a_session_error_naming_the_graph_and_the_cause() -> None:
    def kernel(x: np.ndarray) -> np.ndarray:
        raise ValueError("bad\nvalue")

    register_op("Broken", domain=DOMAIN, inputs=["x"], outputs=["y"], infer=_infer_same,
                kernel=kernel)
    try:
        model = _model([helper.make_node("Broken", ["x"], ["y"], domain=DOMAIN, name="b1")],
                       [_vi("x", [2])], [_vi("y", [2])], name="broken_graph", custom=True)
        with pytest.raises(SessionError) as info:
            run_model(model, {"x": np.zeros(2, np.float32)})
    finally:
        unregister_op("Broken", DOMAIN)
    err = info.value
    assert err.code == "GE1601"
    assert "'broken_graph'" in err.message and "bad value" in err.message
    assert "test.session::Broken" in err.message and "'b1'" in err.message
    assert "\n" not in err.message


def test_a_model_onnxruntime_cannot_load_is_a_session_error() -> None:
    """(An operator of a domain nothing defines is refused before: see below.)"""
    model = _model([helper.make_node("Add", ["x", "n"], ["y"], name="mixed")],
                   [_vi("x", [2]), _vi("n", [2], TensorProto.INT64)], [_vi("y", [2])],
                   name="mixed_types")
    with pytest.raises(SessionError) as info:
        run_model(model, {"x": np.zeros(2, np.float32), "n": np.zeros(2, np.int64)})
    assert info.value.code == "GE1601"
    assert info.value.message.startswith("onnxruntime cannot load graph 'mixed_types': ")
    assert "mixed" in info.value.message and "\n" not in info.value.message


def test_a_failure_while_running_is_a_session_error() -> None:
    model = _model([helper.make_node("Reshape", ["x", "s"], ["y"])],
                   [_vi("x", [6]), _vi("s", [2], TensorProto.INT64)], [_vi("y", None)],
                   name="reshape_graph")
    with pytest.raises(SessionError) as info:
        run_model(model, {"x": np.zeros(6, np.float32), "s": np.array([4, 4])})
    assert info.value.message.startswith("onnxruntime failed to run graph 'reshape_graph': ")
    assert "\n" not in info.value.message


def test_inputs_are_checked_before_running() -> None:
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2])], [_vi("y", [2])])
    with pytest.raises(VerificationInputError, match="input 'x': expected float32 \\[2\\], "
                                                     "got float64 \\[2\\]"):
        run_model(model, {"x": np.zeros(2)})
    with pytest.raises(TypeError, match=r"Graph or an onnx\.ModelProto"):
        run_model("model.onnx", {})  # type: ignore[arg-type]


def test_onnxruntime_warnings_do_not_reach_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    # An unused initializer makes onnxruntime warn at its default log level.
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2])], [_vi("y", [2])],
                   initializers=[numpy_helper.from_array(np.ones(3, np.float32), "unused")])
    run_model(model, {"x": np.ones(2, np.float32)})
    captured = capfd.readouterr()
    assert "unused" not in captured.err and captured.err == ""


def test_running_a_graph_leaves_it_exactly_as_it_was() -> None:
    graph = ge.graph.load(_model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2])],
                                 [_vi("y", [2])]))
    before, text = graph.mutation_count, graph.to_onnx().SerializeToString()
    run_model(graph, {"x": np.ones(2, np.float32)})
    assert graph.mutation_count == before
    assert graph.to_onnx().SerializeToString() == text


def test_a_model_too_large_to_serialize_goes_to_onnxruntime_as_a_file(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from ge.session import runner as runner_module

    monkeypatch.setattr(runner_module, "_INLINE_LIMIT", 0)
    weight = numpy_helper.from_array(np.arange(600, dtype=np.float32).reshape(2, 300), "w")
    model = _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", [2, 300])],
                   [_vi("y", [2, 300])], initializers=[weight])
    x = np.ones((2, 300), np.float32)
    expected = x + numpy_helper.to_array(weight)
    np.testing.assert_array_equal(run_model(model, {"x": x})["y"], expected)
    assert not model.graph.initializer[0].external_data  # the caller's model is not touched


def test_a_bfloat16_model_runs_in_the_reference_evaluator() -> None:
    """onnxruntime's Python API takes no bfloat16 arrays; such a model still runs."""
    import ml_dtypes

    model = _model([helper.make_node("Add", ["x", "x"], ["y"])],
                   [_vi("x", [3], TensorProto.BFLOAT16)], [_vi("y", [3], TensorProto.BFLOAT16)])
    runner = ModelRunner(model)
    assert runner.backend == "reference"
    x = np.array([1.0, 2.5, -3.0], dtype=ml_dtypes.bfloat16)
    y = runner.run({"x": x})["y"]
    assert y.dtype == ml_dtypes.bfloat16 and y.astype(np.float32).tolist() == [2.0, 5.0, -6.0]


def _twice_model(functions: bool) -> onnx.ModelProto:
    """y = trial.fn::Twice(x): defined by a function of the model, or by nothing."""
    graph = helper.make_graph([helper.make_node("Twice", ["x"], ["y"], domain="trial.fn")],
                              "g", [_vi("x", [2])], [_vi("y", [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("trial.fn", 1)])
    if functions:
        model.functions.append(helper.make_function(
            "trial.fn", "Twice", ["x"], ["y"], [helper.make_node("Add", ["x", "x"], ["y"])],
            [helper.make_opsetid("", 17)]))
    return model


def test_an_operator_a_function_of_the_model_defines_runs() -> None:
    """A model-local function of a custom domain is onnxruntime's to run (`ge run` refused
    it as a custom operator no plugin registers)."""
    from ge.graph.onnx_import import model_to_graph

    x = np.array([1.0, -2.0], dtype=np.float32)
    for model in (_twice_model(functions=True), model_to_graph(_twice_model(functions=True))):
        assert run_model(model, {"x": x})["y"].tolist() == [2.0, -4.0]


def test_an_operator_nothing_defines_is_named_with_the_missing_plugin() -> None:
    """Not onnxruntime's "not a registered function/op": the operator, and what to load."""
    with pytest.raises(SessionError) as caught:
        run_model(_twice_model(functions=False), {"x": np.zeros(2, np.float32)})
    assert caught.value.code == "GE1601"
    assert type(caught.value).__name__ == "MissingOperatorError"
    assert caught.value.message == (
        "graph 'g' uses trial.fn::Twice, which no loaded plugin registers (ge.ops.register_op "
        "with a kernel or a decomposition) and no function of the model defines: load the "
        "plugin that registers it (--pass-path or ASCEND_GE_PY_PASS_PATH; in Python, "
        "pass_paths= or ge.testing.load_passes)")
