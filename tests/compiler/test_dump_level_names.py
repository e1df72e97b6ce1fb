"""A dump level of names (`dump_level=`, `--dump-level`, `DUMP_GRAPH_LEVEL`) must name parts
of step or pass names: one that is part of none (a typo: `abc`, `AfterInfrShape`) would dump
nothing, so it is CompilerOptionError (GE1202) listing what a level may be, checked once the
plugins are loaded (their passes count), before anything runs or is written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import ge
from ge.compiler import compile_graph
from ge.compiler.dumping import DUMP_STEP_NAMES, GraphDumper
from ge.compiler.scheduler import PIPELINE, step_label
from ge.errors import CompilerOptionError
from plugin_fixtures import ADDS_NEG, small_graph

LEVELS = ("a level is 1 (the input, every step, and every pass that changed the graph), 2 "
          "(the input and every step), 3 (the final graph), 4 (the input), or '|'-separated "
          "parts of these names: steps Input, BeforeInferShape, InferShape, AfterInferShape, "
          "BuiltinFusion, AfterBuiltinFusionPass, OriginGraphOptimize, "
          "AfterOriginGraphOptimize, FinalValidation; passes ")


def _refused(level: str, folder: Path, **kwargs: object) -> str:
    """The message of `ge.compile(dump=folder / "dumps", dump_level=level)`; checks that
    nothing ran (the graph is as it was) and nothing was written under `folder`."""
    graph = small_graph()
    count = graph.mutation_count
    folder.mkdir(exist_ok=True)
    before = sorted(folder.rglob("*"))
    with pytest.raises(CompilerOptionError) as info:
        ge.compile(graph, dump=folder / "dumps", dump_level=level,
                   **kwargs)  # type: ignore[arg-type]
    assert info.value.code == "GE1202" and isinstance(info.value, ValueError)
    assert graph.mutation_count == count
    assert sorted(folder.rglob("*")) == before
    return info.value.message


def stems(folder: Path) -> list[str]:
    """The step (and pass) of each text dump in `folder`, in pipeline order."""
    return sorted(p.stem for p in folder.glob("*.txt"))


def labels(folder: Path) -> list[str]:
    return [stem.split("_", 2)[2] for stem in stems(folder)]


def test_the_step_names_are_those_of_the_pipeline() -> None:
    assert list(DUMP_STEP_NAMES) == ["Input", *(step_label(s) for s in PIPELINE)]


def test_a_name_of_nothing_is_refused_with_what_a_level_may_be(tmp_path: Path) -> None:
    assert _refused("abc", tmp_path) == (
        "dump level 'abc': 'abc' is part of no step or pass name, so nothing would be dumped "
        f"for it; {LEVELS}none")


def test_a_typo_gets_the_closest_name_and_each_unknown_part_is_named(tmp_path: Path) -> None:
    assert _refused("Input|AfterInfrShape|zz", tmp_path).startswith(
        "dump level 'Input|AfterInfrShape|zz': 'AfterInfrShape' (did you mean "
        "AfterInferShape?), 'zz' are part of no step or pass name, so nothing would be "
        f"dumped for them; {LEVELS}none")


def test_a_level_of_no_name_is_refused(tmp_path: Path) -> None:
    assert _refused(" | ", tmp_path) == (
        "dump level '|' names nothing: a level is 1 (the input, every step, and every pass "
        "that changed the graph), 2 (the input and every step), 3 (the final graph), 4 (the "
        "input), or '|'-separated parts of the names of steps (Input, BeforeInferShape, "
        "InferShape, AfterInferShape, BuiltinFusion, AfterBuiltinFusionPass, "
        "OriginGraphOptimize, AfterOriginGraphOptimize, FinalValidation) and passes")


def test_plugin_passes_count_once_loaded(write: Callable[[str, str], Path],
                                         tmp_path: Path) -> None:
    plugin = write("neg.py", ADDS_NEG)
    message = _refused("AddsNge", tmp_path, pass_paths=[plugin])
    assert message == (
        "dump level 'AddsNge': 'AddsNge' (did you mean AddsNeg?) is part of no step or pass "
        f"name, so nothing would be dumped for it; {LEVELS}AddsNeg")
    ge.compile(small_graph(), pass_paths=[plugin], dump=tmp_path / "d", dump_level="Neg")
    assert labels(tmp_path / "d") == [
        "AfterInferShape_AddsNeg"]
    assert _refused("AddsNeg", tmp_path / "e").endswith("; passes none")  # not loaded here


@pytest.mark.builtin_passes
def test_built_in_pass_names_count(tmp_path: Path) -> None:
    ge.compile(small_graph(), dump=tmp_path / "d", dump_level="Folding|FinalValidation")
    assert labels(tmp_path / "d") == ["FinalValidation"]
    assert _refused("Foldng", tmp_path / "e").startswith(
        "dump level 'Foldng': 'Foldng' is part of no step or pass name")


def test_blanks_around_names_are_not_part_of_them(tmp_path: Path) -> None:
    ge.compile(small_graph(), dump=tmp_path, dump_level=" InferShape | Input ")
    assert labels(tmp_path) == [
        "Input", "BeforeInferShape", "InferShape", "AfterInferShape"]


def test_the_variable_is_named_when_it_gave_the_level(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUMP_GE_GRAPH", "2")
    monkeypatch.setenv("DUMP_GRAPH_PATH", str(tmp_path / "never"))
    monkeypatch.setenv("DUMP_GRAPH_LEVEL", "abc")
    with pytest.raises(CompilerOptionError) as info:
        ge.compile(small_graph())
    assert info.value.message.startswith("DUMP_GRAPH_LEVEL 'abc': 'abc' is part of no step")
    assert not (tmp_path / "never").exists()


def test_compile_graph_checks_a_dumper_it_is_given(tmp_path: Path) -> None:
    dumper = GraphDumper(tmp_path / "d", level="abc")
    graph = small_graph()
    count = graph.mutation_count
    with pytest.raises(CompilerOptionError, match="dump level 'abc': 'abc' is part of no"):
        compile_graph(graph, observers=iter([dumper]))
    assert graph.mutation_count == count and not (tmp_path / "d").exists()


def test_a_dump_level_without_a_dump_folder_is_refused() -> None:
    """As the CLI's --dump-level without --dump: nothing would be dumped."""
    with pytest.raises(CompilerOptionError) as info:
        ge.compile(small_graph(), dump_level="1")
    assert info.value.code == "GE1202"
    assert info.value.message == ("dump_level='1' needs dump=FOLDER: without it nothing is "
                                  "dumped (the CLI's --dump-level needs --dump)")
