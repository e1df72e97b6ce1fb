"""A large Graph runs from a temporary model file with external data (`exported_to_run`):
never exported into a proto nor serialized (each a second copy of the weights), one
onnxruntime session at a time in a verification, the temporary folder removed, and the
outputs and verification reports those of the in-memory route. The size threshold is
lowered here: the real thing needs hundreds of MiB of weights."""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
import ge.graph
from ge.errors import SessionError
from ge.graph.graph import Graph
from ge.ops import register_op, unregister_op
from ge.session import ModelRunner, run_model
from ge.session import runner as runner_module
from model_paths import shared_model

DOMAIN = "test.run_from_file"


def _chain(count: int = 3, size: int = 32) -> onnx.ModelProto:
    """x @ w0 @ w1 ... + bias (a Constant), with a symbolic batch."""
    rng = np.random.default_rng(1)
    nodes, inits, last = [], [], "x"
    for i in range(count):
        inits.append(numpy_helper.from_array(
            rng.standard_normal((size, size)).astype(np.float32), f"w{i}"))
        nodes.append(helper.make_node("MatMul", [last, f"w{i}"], [f"h{i}"], name=f"mm{i}"))
        last = f"h{i}"
    nodes += [helper.make_node("Constant", [], ["bias"], name="bias", value=numpy_helper.from_array(
                  rng.standard_normal(size).astype(np.float32), "bias")),
              helper.make_node("Add", [last, "bias"], ["y"], name="add")]
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", size])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _from_files(patch: pytest.MonkeyPatch, temporary: Path) -> list[Any]:
    """Make every Graph run from a file (threshold 0) in a temporary folder under
    `temporary`, refuse exporting the weights into a proto or serializing them, and refuse
    an onnxruntime session created while another lives. Returns what each session was
    created from."""
    created: list[Any] = []
    live: list[weakref.ref[Any]] = []
    real_session = ort.InferenceSession

    def one_at_a_time(model: Any, *args: Any, **kwargs: Any) -> Any:
        assert all(ref() is None for ref in live), "a second session while one lives"
        created.append(model)
        session = real_session(model, *args, **kwargs)
        live.append(weakref.ref(session))
        return session

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the weights were exported into a proto or serialized")

    temporary.mkdir(exist_ok=True)
    patch.setattr(runner_module, "FILE_RUN_BYTES", 0)
    patch.setattr(ort, "InferenceSession", one_at_a_time)
    patch.setattr(Graph, "to_onnx", refused)
    patch.setattr(runner_module, "serialized_or_none", refused)
    patch.setattr("tempfile.tempdir", str(temporary))
    return created


def _with_body() -> onnx.ModelProto:
    """`_chain()` whose result goes through an If, the then-branch adding its own weight."""
    model = _chain()
    body_weight = numpy_helper.from_array(np.full(32, 0.5, np.float32), "body_w")
    then = helper.make_graph([helper.make_node("Add", ["y", "body_w"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, ["n", 32])],
                             [body_weight])
    other = helper.make_graph([helper.make_node("Neg", ["y"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, ["n", 32])])
    model.graph.node.append(helper.make_node("If", ["flag"], ["z"], name="if",
                                             then_branch=then, else_branch=other))
    model.graph.input.append(helper.make_tensor_value_info("flag", TensorProto.BOOL, []))
    model.graph.output[0].CopyFrom(
        helper.make_tensor_value_info("z", TensorProto.FLOAT, ["n", 32]))
    return model


@pytest.fixture
def sessions(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[Any]]:
    """`_from_files` for the whole test; no temporary folder may be left behind."""
    yield _from_files(monkeypatch, tmp_path / "temporary")
    assert list((tmp_path / "temporary").iterdir()) == [], "a temporary folder was left"


def test_a_large_graph_runs_from_a_file_with_the_same_outputs(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Bit-identical outputs (weights in initializers, a Constant, an If body's initializer),
    onnxruntime given a file path, and the graph left as it was."""
    feeds = {"x": np.random.default_rng(2).standard_normal((4, 32)).astype(np.float32),
             "flag": np.array(True)}
    graph = ge.graph.load(_with_body())
    expected = run_model(graph, feeds)
    before = (graph.mutation_count, graph.to_onnx().SerializeToString())
    with monkeypatch.context() as patch:
        created = _from_files(patch, tmp_path / "temporary")
        got = run_model(graph, feeds)
        assert len(created) == 1 and isinstance(created[0], str)
        assert created[0].endswith("model.onnx")
    assert list((tmp_path / "temporary").iterdir()) == []
    assert got.keys() == expected.keys()
    assert all(got[k].tobytes() == expected[k].tobytes() for k in got)
    assert (graph.mutation_count, graph.to_onnx().SerializeToString()) == before


@pytest.mark.parametrize("verify", ["final", "each-pass"])
def test_compile_verification_from_files_reports_the_same(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, verify: str) -> None:
    """`ge.compile(verify=...)` of a real (vendored) model and of a weight chain gives the
    same report run from files, where each model ran in a session of its own, one at a time
    (the original's released before the compiled one's)."""
    for model in (onnx.load(shared_model("distilbert_tiny")), _chain()):
        expected = ge.compile(model, verify=verify).verification
        assert expected is not None
        with monkeypatch.context() as patch:
            created = _from_files(patch, tmp_path / "temporary")
            result = ge.compile(model, verify=verify)
            assert len(created) >= 2 and all(isinstance(c, str) for c in created)
        assert list((tmp_path / "temporary").iterdir()) == []
        assert result.verification is not None
        assert result.verification.as_dict() == expected.as_dict()


def test_a_custom_operator_runs_from_the_file_in_the_reference_evaluator(
        sessions: list[Any]) -> None:
    """The reference evaluator needs the weights in its proto: it reads the whole file."""
    def kernel(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        return x * w

    register_op("Scale", domain=DOMAIN, inputs=["x", "w"], outputs=["y"],
                infer=lambda ctx: [ctx.input_descs[0]], kernel=kernel)
    try:
        weight = numpy_helper.from_array(np.arange(64, dtype=np.float32), "w")
        graph = helper.make_graph(
            [helper.make_node("Scale", ["x", "w"], ["y"], domain=DOMAIN)], "custom",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64])], [weight])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                        helper.make_opsetid(DOMAIN, 1)])
        runner = ModelRunner(ge.graph.load(model))
        assert runner.backend == "reference"
        x = np.full(64, 2.0, np.float32)
        np.testing.assert_array_equal(runner.run({"x": x})["y"],
                                      x * np.arange(64, dtype=np.float32))
    finally:
        unregister_op("Scale", DOMAIN)
    assert sessions == []


def test_a_model_onnxruntime_cannot_load_from_a_file_is_a_session_error(
        sessions: list[Any]) -> None:
    """Same error as from bytes, and the temporary folder is removed all the same."""
    weight = numpy_helper.from_array(np.ones(64, np.int64), "w")  # float + int64: refused
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"], name="mixed")],
        "mixed_types", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(SessionError) as info:
        run_model(ge.graph.load(model), {"x": np.zeros(64, np.float32)})
    assert info.value.code == "GE1601"
    assert info.value.message.startswith("onnxruntime cannot load graph 'mixed_types': ")
    assert "\n" not in info.value.message and len(sessions) == 1
