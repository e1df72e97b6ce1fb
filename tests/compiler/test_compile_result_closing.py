"""`ge.compile` and closed graphs: the graph it loads itself and a conversion replaces is
closed (freed by reference counting, nothing left for the collector), a graph the caller
gave stays the caller's, and a `CompileResult` whose graph was closed keeps its report and
refuses to save with GE1001, writing nothing."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import onnx
import pytest

import ge
import ge.graph
from ge.errors import GraphClosedError
from ge.graph import Graph
from model_paths import shared_model

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
