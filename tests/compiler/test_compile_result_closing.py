"""`ge.compile` and closed graphs: the graph it loads itself and a conversion replaces is
closed (freed by reference counting, nothing left for the collector), and so is every graph
it made when it fails, its error unchanged; a graph the caller gave stays the caller's, and
a `CompileResult` whose graph was closed keeps its report and refuses to save with GE1001,
writing nothing."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

import onnx
import pytest

import ge
import ge.graph
from ge.errors import GeError, GraphClosedError, GraphValidationError, PassRunError
from ge.graph import Graph
from model_paths import shared_model
from sample_models import cyclic_model

DISTILBERT = shared_model("distilbert_tiny")
CONTROL_FLOW = shared_model("control_flow")


@pytest.fixture
def loaded_graphs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[weakref.ref[Graph]]]:
    """Weak references to the graphs `ge.graph.load` makes while the test runs, with the
    cyclic collector off: what is freed, reference counting freed."""
    made: list[weakref.ref[Graph]] = []
    load = ge.graph.load

    def recording(*args: object, **kwargs: object) -> Graph:
        graph = load(*args, **kwargs)  # type: ignore[arg-type]
        made.append(weakref.ref(graph))
        return graph

    monkeypatch.setattr(ge.graph, "load", recording)
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield made
    finally:
        if was_enabled:
            gc.enable()


@pytest.mark.parametrize("source", ["path", "proto"])
def test_the_graph_compile_loaded_and_converted_is_freed(
        loaded_graphs: list[weakref.ref[Graph]], source: str) -> None:
    model: object = DISTILBERT if source == "path" else onnx.load(str(DISTILBERT))
    result = ge.compile(model, opset=20)  # type: ignore[arg-type]
    (loaded,) = loaded_graphs
    assert loaded() is None  # closed at the end, then dropped
    assert not result.graph.closed and result.graph.get_opset_version() == 20


def test_a_graph_given_stays_the_callers(loaded_graphs: list[weakref.ref[Graph]]) -> None:
    graph = ge.graph.load(CONTROL_FLOW)
    result = ge.compile(graph, opset=20)
    assert result.graph is not graph and not graph.closed
    assert graph.get_opset_version() < 20
    graph.validate()
    in_place = ge.compile(graph)
    assert in_place.graph is graph and not graph.closed


def test_a_result_whose_graph_was_closed_keeps_its_report(tmp_path: Path) -> None:
    result = ge.compile(DISTILBERT)
    summary, data, text = result.report.summary(), result.as_dict(), repr(result)
    changed = [n for n in result.report.last_changes._last]  # (nodes held by the report)
    result.graph.close()
    assert result.report.summary() == summary and result.as_dict() == data
    assert repr(result) == text and result.report.as_dict()["graph"] == "main_graph"
    assert all(n.name for n in changed)
    target = tmp_path / "out.onnx"
    with pytest.raises(GraphClosedError, match=r"graph 'main_graph', which is closed .*\(save\)"):
        result.save(target)
    with pytest.raises(GraphClosedError):
        result.to_onnx()
    assert list(tmp_path.iterdir()) == []


#: A pass that fails, naming a node in its message (an error pointing at the graph).
BOOM = """
from ge.passes import FusionBasePass, PassStage, register_fusion_pass

@register_fusion_pass(name="Boom", stage=PassStage.AFTER_INFER_SHAPE)
class Boom(FusionBasePass):
    def run(self, graph, context):
        raise ValueError(f"cannot use {graph.get_data_nodes()[0]!r}")
"""


def _failure(compile_: Callable[[], object]) -> GeError:
    """The error `compile_()` raises (not through `pytest.raises`, whose record and the
    error's traceback would hold each other, and the graphs, for the collector)."""
    try:
        compile_()
    except GeError as error:
        return error
    raise AssertionError("no error")


@pytest.mark.parametrize("case", ["pass-after-opset", "cycle"])
def test_a_failed_compile_closes_the_graphs_it_made_and_keeps_its_error(
        write: Callable[[str, str], Path], made_graphs: Callable[[], list[Graph]],
        monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    """The model loaded from a path and its converted copy (`opset=`), or a model refused
    before anything ran, are closed when the compilation fails: the error's traceback holds
    them (and the error and its frames hold each other: a collection frees those), but
    they hold nothing of the model any more. The error says what it says without closing."""
    plugin = write("p/boom.py", BOOM)

    def compile_() -> GeError:
        if case == "cycle":
            return _failure(lambda: ge.compile(cyclic_model()))
        return _failure(lambda: ge.compile(DISTILBERT, opset=20, pass_paths=[plugin.parent]))

    def failed() -> tuple[str, dict[str, object], list[bool], int]:
        """The error's text and data, whether each graph made is closed, and how many
        objects the collector finds once the error is dropped."""
        error = compile_()
        assert isinstance(error, PassRunError if case != "cycle" else GraphValidationError)
        text, data = str(error), error.details()
        closed = [g.closed for g in made_graphs()]
        del error
        return text, data, closed, gc.collect()

    failed()  # (what a first compilation imports and keeps: not the subject)
    with monkeypatch.context() as unclosed:  # the same failure, nothing closed
        unclosed.setattr(Graph, "close", lambda self: None)
        text, data, closed, left_unclosed = failed()
    assert closed and not any(closed)
    assert made_graphs() == []
    assert failed()[:2] == (text, data)
    if case != "cycle":
        assert "cannot use <Node 'input_ids' type=Data>" in text
    _, _, closed, left = failed()
    assert closed and all(closed)
    # (distilbert_tiny: 166 objects against 4,328; the 6-node cyclic model: 53 against 123)
    assert left * (4 if case != "cycle" else 2) < left_unclosed
    assert made_graphs() == []


def test_a_failed_compile_of_a_graph_closes_its_converted_copy_only(
        write: Callable[[str, str], Path], made_graphs: Callable[[], list[Graph]]) -> None:
    plugin = write("p/boom.py", BOOM)
    graph = ge.graph.load(CONTROL_FLOW)
    before = graph.to_onnx().SerializeToString()
    error = _failure(lambda: ge.compile(graph, opset=20, pass_paths=[plugin.parent]))
    assert error.code == "E13028"
    given = {graph, *graph.get_all_subgraphs()}
    copies = [g for g in made_graphs() if g not in given]
    assert copies and all(g.closed for g in copies)
    assert not graph.closed and graph.to_onnx().SerializeToString() == before
    del error, copies
    gc.collect()  # (the error and its frames hold each other)
    assert set(made_graphs()) == given
