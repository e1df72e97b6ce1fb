"""`Session`: GE's add/compile/run/remove by graph id, errors, and the per-graph cache."""

from __future__ import annotations

import subprocess
import sys
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge.compiler
import ge.graph
import ge.session.session as session_module
from ge.errors import GraphTypeError, SessionError, VerificationInputError
from ge.graph import Graph, Tensor
from ge.passes.bootstrap import ENV_PY_PASS_PATH
from ge.session import ModelRunner, Session, generate_inputs, run_model
from model_paths import shared_model
from sample_models import double_negation_model


@pytest.fixture
def compiler(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Compilations with no plugins from the environment; the engine stopped afterwards."""
    monkeypatch.delenv(ENV_PY_PASS_PATH, raising=False)
    ge.compiler.finalize()
    yield
    ge.compiler.finalize()


@pytest.fixture
def runners(monkeypatch: pytest.MonkeyPatch) -> list[Graph]:
    """The graphs the session prepared a runner for, in order (one entry per build)."""
    built: list[Graph] = []

    class CountingRunner(ModelRunner):
        def __init__(self, model: Any) -> None:
            built.append(model)
            super().__init__(model)

    monkeypatch.setattr(session_module, "ModelRunner", CountingRunner)
    return built


def _plus_const_graph() -> Graph:
    """y = x + c, c = [1, 2, 3] an initializer (a Const node)."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "c"], ["y"])], "plus_const",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        initializer=[numpy_helper.from_array(np.array([1, 2, 3], np.float32), "c")])
    return ge.graph.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


X = np.array([10.0, 20.0, 30.0], np.float32)
C = np.array([1.0, 2.0, 3.0], np.float32)


def test_add_run_compile_run_remove(compiler: None) -> None:
    session = Session({"app.exec.example": "1"})  # (not ge.: reserved for ge's own)
    graph = ge.graph.load(double_negation_model())
    session.add_graph(7, graph, options={"app.graph.example": "2"})
    assert session.get_graph_ids() == [7] and session.get_graph(7) is graph
    assert session.is_graph_need_rebuild(7) and session.get_compiled_graph_summary(7) is None
    x = np.array([-1.0, 0.5, 2.0], np.float32)

    before = session.run_graph(7, [x])
    assert isinstance(before, list) and all(isinstance(t, Tensor) for t in before)
    np.testing.assert_array_equal(before[0].numpy(), np.maximum(x, 0))

    report = session.compile_graph(7)
    assert type(report).__name__ == "CompileReport"
    assert session.get_compiled_graph_summary(7) is report
    assert not session.is_graph_need_rebuild(7)
    after = session.run_graph(7, {"x": Tensor(x)})
    np.testing.assert_array_equal(after[0].numpy(), before[0].numpy())

    session.remove_graph(7)
    assert session.get_graph_ids() == []
    with pytest.raises(SessionError, match="graph id 7 is not in the session"):
        session.run_graph(7, [x])


def test_unknown_and_duplicate_graph_ids_are_session_errors() -> None:
    session = Session()
    session.add_graph(1, _plus_const_graph())
    with pytest.raises(SessionError) as info:
        session.add_graph(1, _plus_const_graph())
    assert info.value.code == "GE1601"
    assert info.value.message == ("graph id 1 is already in the session (graph 'plus_const'); "
                                  "remove_graph it first")
    for call in (lambda: session.run_graph(2, [X]), lambda: session.compile_graph(2),
                 lambda: session.remove_graph(2), lambda: session.is_graph_need_rebuild(2)):
        with pytest.raises(SessionError) as info:
            call()
        assert info.value.message == "graph id 2 is not in the session (graph ids: 1)"
    with pytest.raises(SessionError, match="out of range"):
        session.add_graph(-1, _plus_const_graph())


def test_wrong_argument_types_are_type_errors() -> None:
    session = Session()
    with pytest.raises(GraphTypeError, match="graph_id must be an int"):
        session.add_graph("1", _plus_const_graph())  # type: ignore[arg-type]
    with pytest.raises(GraphTypeError, match=r"graph must be a ge\.graph\.Graph"):
        session.add_graph(1, double_negation_model())  # type: ignore[arg-type]
    with pytest.raises(GraphTypeError, match="options must map str to str"):
        Session({"key": 1})  # type: ignore[dict-item]
    session.add_graph(1, _plus_const_graph())
    with pytest.raises(GraphTypeError, match="inputs must be a list or a dict"):
        session.run_graph(1, X)  # type: ignore[arg-type]
    with pytest.raises(VerificationInputError, match="2 inputs given, graph 'plus_const' has 1"):
        session.run_graph(1, [X, X])
    with pytest.raises(VerificationInputError, match="input 'x': missing"):
        session.run_graph(1, [])


def test_the_runner_is_cached_until_the_graph_changes(runners: list[Graph]) -> None:
    session = Session()
    graph = _plus_const_graph()
    session.add_graph(1, graph)
    first = session.run_graph(1, [X])[0].numpy()
    second = session.run_graph(1, [X * 2])[0].numpy()
    np.testing.assert_array_equal(first, X + C)
    np.testing.assert_array_equal(second, X * 2 + C)
    assert len(runners) == 1  # prepared once

    const = graph.nodes_of_type("Const")[0]
    const.set_attr("value", Tensor(np.array([100, 200, 300], np.float32)))
    changed = session.run_graph(1, [X])[0].numpy()
    np.testing.assert_array_equal(changed, X + 100 * C)
    assert len(runners) == 2
    session.run_graph(1, [X])
    assert len(runners) == 2


def test_compiling_drops_the_cached_runner(compiler: None, runners: list[Graph]) -> None:
    session = Session()
    session.add_graph(3, ge.graph.load(double_negation_model()))
    x = np.array([-1.0, 1.0, 2.0], np.float32)
    session.run_graph(3, [x])
    session.compile_graph(3)
    session.run_graph(3, [x])
    session.compile_graph(3)  # again: even an unchanged graph is prepared anew
    result = session.run_graph(3, [x])
    np.testing.assert_array_equal(result[0].numpy(), np.maximum(x, 0))
    assert len(runners) == 3


def test_add_graph_with_copy_leaves_the_callers_graph_alone(compiler: None) -> None:
    session = Session()
    graph = ge.graph.load(double_negation_model())
    before = (graph.mutation_count, graph.to_onnx().SerializeToString())
    session.add_graph_with_copy(1, graph)
    assert session.get_graph(1) is not graph
    session.compile_graph(1)
    assert (graph.mutation_count, graph.to_onnx().SerializeToString()) == before


def test_remove_graph_closes_the_sessions_own_copy_only(
        collector_off: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy `add_graph_with_copy` made is the session's: `remove_graph` closes it (freed by
    reference counting, not left to the collector); a graph added as it is stays the
    caller's; a copy made for an id in use is closed at once."""
    session = Session()
    graph = ge.graph.load(double_negation_model())
    session.add_graph_with_copy(1, graph)
    session.add_graph(2, graph)
    copy = session.get_graph(1)
    assert len(session.run_graph(1, [np.ones([3], np.float32)])) == 1  # (its runner made)
    refs = [weakref.ref(o) for o in (copy, *copy.get_all_nodes())]
    session.remove_graph(1)
    assert copy.closed and session.get_graph_ids() == [2]
    del copy
    assert [ref() for ref in refs] == [None] * len(refs)
    session.remove_graph(2)
    assert not graph.closed
    graph.validate()
    session.add_graph(3, graph)
    copies: list[weakref.ref[Graph]] = []
    clone = Graph.clone

    def recorded(self: Graph) -> Graph:
        made = clone(self)
        copies.append(weakref.ref(made))
        return made

    monkeypatch.setattr(Graph, "clone", recorded)
    with pytest.raises(SessionError, match=r"graph id 3 is already in the session"):
        session.add_graph_with_copy(3, graph)
    assert len(copies) == 1 and copies[0]() is None
    assert session.get_graph(3) is graph and not graph.closed


def test_a_vendored_model_runs_like_run_model() -> None:
    model = onnx.load(shared_model("distilbert_tiny"))
    graph = ge.graph.load(model)
    inputs = generate_inputs(graph, seed=2)
    session = Session()
    session.add_graph(0, graph)
    outputs = session.run_graph(0, [inputs["input_ids"], inputs["attention_mask"]])
    expected = run_model(model, inputs)
    assert len(outputs) == len(expected) == 1
    np.testing.assert_array_equal(outputs[0].numpy(), expected["output"])


def test_importing_ge_session_does_not_import_the_compiler() -> None:
    code = "import sys, ge.session; print('ge.compiler' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_run_model_given_a_path_says_how_to_read_it() -> None:
    """Trial Z: a path gave a plain TypeError, outside ge's errors (errors.md: every
    deliberate error is a GeError)."""
    from ge.errors import GraphTypeError
    from ge.session import run_model

    with pytest.raises(GraphTypeError) as info:
        run_model("model.onnx", {})
    assert info.value.code == "GE1002" and isinstance(info.value, TypeError)
    assert str(info.value.args[0]) == ("model must be a ge.graph.Graph or an onnx.ModelProto, "
                                       "got str; ge.graph.load(path) reads a model file")
