"""Graph dumps: `ge.compile(dump=DIR)` and GE's DUMP_GE_GRAPH / DUMP_GRAPH_PATH /
DUMP_GRAPH_LEVEL variables write the graph after each step (and pass) in pipeline order."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

import ge
import ge.graph
from ge.compiler.scheduler import PIPELINE, step_label
from ge.errors import CompilerOptionError
from plugin_fixtures import ADDS_NEG, small_graph

STEPS = [step_label(s) for s in PIPELINE]


def stems(folder: Path, suffix: str) -> list[str]:
    return sorted(p.name[: -len(suffix)] for p in folder.glob(f"*{suffix}"))


def test_level_2_dumps_the_input_and_every_step_in_pipeline_order(tmp_path: Path) -> None:
    ge.compile(small_graph(), dump=tmp_path / "dumps")
    names = stems(tmp_path / "dumps", ".txt")
    assert [n.split("_", 2)[2] for n in names] == ["Input", *STEPS]
    assert stems(tmp_path / "dumps", ".onnx") == names
    final = tmp_path / "dumps" / f"{names[-1]}.onnx"
    onnx.checker.check_model(onnx.load(final), full_check=True)
    assert len(ge.graph.load(final).nodes_of_type("Relu")) == 2
    assert "Relu" in (tmp_path / "dumps" / f"{names[-1]}.txt").read_text()


def test_level_1_adds_every_pass_that_changed_the_graph(write, tmp_path: Path) -> None:
    path = write("neg.py", ADDS_NEG)
    ge.compile(small_graph(), pass_paths=[path], dump=tmp_path / "d", dump_level="1")
    labels = [n.split("_", 2)[2] for n in stems(tmp_path / "d", ".txt")]
    assert labels.index("AfterInferShape_AddsNeg") == labels.index("InferShape") + 1
    assert labels.index("AfterInferShape") == labels.index("AfterInferShape_AddsNeg") + 1
    after_pass = next((tmp_path / "d").glob("*_AfterInferShape_AddsNeg.txt")).read_text()
    assert "neg" in after_pass


@pytest.mark.parametrize(("level", "expected"), [
    ("3", ["FinalValidation"]),
    ("4", ["Input"]),
    ("InferShape|Input", ["Input", "BeforeInferShape", "InferShape", "AfterInferShape"]),
])
def test_other_levels_pick_what_is_dumped(level: str, expected: list[str],
                                          tmp_path: Path) -> None:
    ge.compile(small_graph(), dump=tmp_path, dump_level=level)
    assert [n.split("_", 2)[2] for n in stems(tmp_path, ".txt")] == expected


def test_the_ge_variables_turn_dumps_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUMP_GE_GRAPH", "2")  # readable text only, no weights
    monkeypatch.setenv("DUMP_GRAPH_PATH", str(tmp_path / "ge_dumps"))
    monkeypatch.setenv("DUMP_GRAPH_LEVEL", "3")
    ge.compile(small_graph())
    assert [p.name for p in (tmp_path / "ge_dumps").iterdir()] == ["ge_0000_FinalValidation.txt"]
    monkeypatch.setenv("DUMP_GE_GRAPH", "0")
    ge.compile(small_graph())
    assert len(list((tmp_path / "ge_dumps").iterdir())) == 1


@pytest.mark.parametrize(("variable", "value", "message"), [
    ("DUMP_GE_GRAPH", "7", "DUMP_GE_GRAPH must be 1, 2 or 3, got '7'"),
    ("DUMP_GRAPH_LEVEL", "9", "dump level must be 1, 2, 3, 4 or '|'-separated names, got '9'"),
])
def test_bad_dump_settings_are_option_errors_before_anything_runs(
        variable: str, value: str, message: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUMP_GE_GRAPH", "1")
    monkeypatch.setenv("DUMP_GRAPH_PATH", str(tmp_path / "never"))
    monkeypatch.setenv(variable, value)
    graph = small_graph()
    count = graph.mutation_count
    with pytest.raises(CompilerOptionError) as info:
        ge.compile(graph)
    assert info.value.code == "GE1202" and info.value.message == message
    assert graph.mutation_count == count
    assert not (tmp_path / "never").exists()
