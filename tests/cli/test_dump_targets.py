"""Dump folders that cannot be written (`--dump DIR`, `DUMP_GRAPH_PATH`) are one GE1701 line,
refused before compiling starts, with nothing written: an existing file, a path under a
file, a folder that cannot be created or written."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import listing, run_ge

import ge
from ge.compiler.dumping import GraphDumper, check_dump_target, dump_target_problem
from ge.compiler.scheduler import PipelineObserver
from ge.errors import CommandLineError
from ge.graph import Graph
from model_paths import shared_model
from plugin_fixtures import small_graph

MODEL = shared_model("mobilenet_like")
PROC = Path("/proc")
needs_proc = pytest.mark.skipif(not (PROC / "self").is_dir(), reason="needs Linux /proc")


class _Steps(PipelineObserver):
    """Records the pipeline steps that started (none when a compilation is refused)."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def step_started(self, index: int, label: str, graph: Graph) -> None:
        self.started.append(label)


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "m.onnx"
    path.write_bytes(b"not a folder")
    return path


def _refused(tmp_path: Path, *args: str, message: str) -> None:
    """`ge compile MODEL -o OUT ARGS` is exactly one GE1701 line, exit 1, nothing written."""
    before = listing(tmp_path)
    code, out, err = run_ge("compile", str(MODEL), "-o", str(tmp_path / "out.onnx"), *args)
    assert code == 1
    assert out == ""
    assert err == f"ge: [GE1701] {message}\n"
    assert listing(tmp_path) == before


def test_dump_into_an_existing_file(tmp_path: Path, a_file: Path) -> None:
    _refused(tmp_path, "--dump", str(a_file),
             message=f"cannot dump graphs to {a_file}: it exists and is not a folder")
    assert a_file.read_bytes() == b"not a folder"


@needs_proc
def test_dump_into_a_folder_that_cannot_be_created(tmp_path: Path) -> None:
    target = PROC / "ge_dump_test_dir"
    _refused(tmp_path, "--dump", str(target),
             message=f"cannot dump graphs to {target}: the folder cannot be created "
                     "(No such file or directory)")


@needs_proc
def test_dump_into_a_folder_that_cannot_be_written(tmp_path: Path) -> None:
    target = PROC / "self"
    problem = dump_target_problem(target)
    assert problem is not None and problem.startswith("the folder cannot be written (")
    _refused(tmp_path, "--dump", str(target), message=f"cannot dump graphs to {target}: {problem}")


def test_a_read_only_folder_is_refused(tmp_path: Path) -> None:
    """/sys refuses new files even to root (the tests may run as root: chmod is no test)."""
    target = Path("/sys")
    problem = dump_target_problem(target) if target.is_dir() else None
    if problem is None:
        pytest.skip("no read-only /sys here")
    assert problem.startswith("the folder cannot be written (")
    _refused(tmp_path, "--dump", str(target), message=f"cannot dump graphs to {target}: {problem}")


def test_dump_graph_path_naming_a_file(tmp_path: Path, a_file: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUMP_GE_GRAPH", "1")
    monkeypatch.setenv("DUMP_GRAPH_PATH", str(a_file))
    _refused(tmp_path, message=f"cannot dump graphs to {a_file} (DUMP_GRAPH_PATH): it exists "
                               "and is not a folder")


def test_dump_graph_path_under_a_file(tmp_path: Path, a_file: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUMP_GE_GRAPH", "2")
    monkeypatch.setenv("DUMP_GRAPH_PATH", str(a_file / "sub" / "dir"))
    _refused(tmp_path, message=f"cannot dump graphs to {a_file / 'sub' / 'dir'} "
                               f"(DUMP_GRAPH_PATH): {a_file} is not a folder")


@pytest.mark.parametrize("via", ["argument", "environment"])
def test_ge_compile_refuses_before_the_pipeline_starts(
        via: str, a_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    graph = small_graph()
    count = graph.mutation_count
    steps = _Steps()
    if via == "environment":
        monkeypatch.setenv("DUMP_GE_GRAPH", "1")
        monkeypatch.setenv("DUMP_GRAPH_PATH", str(a_file))
    with pytest.raises(CommandLineError) as info:
        ge.compile(graph, dump=a_file if via == "argument" else None, observers=[steps])
    assert info.value.code == "GE1701"
    assert info.value.path == str(a_file)
    assert "it exists and is not a folder" in info.value.message
    assert steps.started == []
    assert graph.mutation_count == count
    assert a_file.read_bytes() == b"not a folder"


def test_the_check_leaves_nothing_behind(tmp_path: Path) -> None:
    """A usable folder that does not exist yet is created by the dumps, not by the check."""
    target = tmp_path / "a" / "b" / "dumps"
    check_dump_target(target)
    GraphDumper(target)
    assert listing(tmp_path) == []
    ge.compile(small_graph(), dump=target, dump_level="3")
    assert sorted(p.name for p in target.iterdir()) == ["ge_0000_FinalValidation.onnx",
                                                       "ge_0000_FinalValidation.txt",
                                                       "ge_dump_manifest.json"]


@pytest.mark.parametrize(("flag", "name", "what"), [
    ("-o", "ge_0008_FinalValidation.onnx", "the output model"),
    ("--report", "ge_0007_AfterOriginGraphOptimize.txt", "the report"),
    ("--html", "ge_0001_AfterInferShape.txt", "the HTML page"),
])
def test_a_file_named_like_a_dump_in_the_dump_folder_is_refused(
        tmp_path: Path, flag: str, name: str, what: str) -> None:
    """A dump would replace it (or it a dump, listed in the manifest as one): refused before
    anything runs, with no failure report written under that name either."""
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    target = dumps / name
    args = ["-o", str(target)] if flag == "-o" else ["-o", str(tmp_path / "out.onnx"),
                                                     flag, str(target)]
    code, out, err = run_ge("compile", str(MODEL), *args, "--dump", str(dumps))
    assert (code, out) == (1, "")
    assert err == (f"ge: [GE1701] cannot write {what} to {target}: the graph dumps into "
                   f"{dumps} write files named like it (ge_<seq>_<step>...); choose another "
                   "name or folder\n")
    assert listing(tmp_path) == ["dumps"] and listing(dumps) == []


def test_the_dump_variables_refuse_a_dump_name_in_their_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUMP_GE_GRAPH", "2")
    monkeypatch.setenv("DUMP_GRAPH_PATH", str(tmp_path))
    target = tmp_path / "ge_0001_mine.onnx"
    code, _, err = run_ge("compile", str(MODEL), "-o", str(target))
    assert code == 1 and err.startswith(f"ge: [GE1701] cannot write the output model to {target}")
    assert listing(tmp_path) == []
    monkeypatch.setenv("DUMP_GE_GRAPH", "0")  # no dumps: the name is free
    code, _, err = run_ge("compile", str(MODEL), "-o", str(target))
    assert code == 0, err
    assert listing(tmp_path) == ["ge_0001_mine.onnx"]
