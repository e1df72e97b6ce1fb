"""Runs dumping into one folder (`--dump DIR`, `dump=`, DUMP_GE_GRAPH + DUMP_GRAPH_PATH)
never leave a mix of two runs: each lists its files in `ge_dump_manifest.json`, a new run
removes exactly the previous run's (unchanged) dumps when its pipeline starts, and a file
ge cannot tell is its own makes the folder refused (GE1701) before anything runs, unchanged.
A user's own files in the folder survive every run."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper

import ge
from ge.cli import cli
from ge.compiler.dumping import GraphDumper
from ge.compiler.scheduler import PIPELINE, step_label
from ge.errors import CommandLineError, CompilerOptionError, CompileWarning, PassRunError
from plugin_fixtures import small_graph

MANIFEST = "ge_dump_manifest.json"

BREAKS = """
from ge.passes import FusionBasePass, register_fusion_pass

@register_fusion_pass(name="Breaks", stage="AfterInferShape")
class Breaks(FusionBasePass):
    def run(self, graph, context):
        raise RuntimeError("no luck")
"""

# The user's own files: ge's dumps never remove them (one is named as `dump_to_file` names
# a dump, which is not the compilation's).
USER_FILES = {"notes.txt": "mine", "model.onnx": "not a model", "ge_graph_g.txt": "mine too"}
# level 2: the input and every step, as ONNX and text
ALL_STEPS = [f"ge_{i:04d}_{label}{suffix}"
             for i, label in enumerate(["Input", *(step_label(s) for s in PIPELINE)])
             for suffix in (".onnx", ".txt")]
UNTIL_FAILURE = ALL_STEPS[:6]  # Input, BeforeInferShape, InferShape: Breaks fails after


def _model() -> onnx.ModelProto:
    """x (float [2, 3]) -> Relu -> Relu -> y."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu1"),
         helper.make_node("Relu", ["r"], ["y"], name="relu2")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _compile(how: str, folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
             plugins: list[Path]) -> None:
    """Compile `_model()` dumping into `folder` at level 2, as `how` says: the
    `dump=` argument, GE's variables, or `ge compile --dump`; a failure raises."""
    if how == "cli":
        source = tmp_path / "m.onnx"
        if not source.exists():
            onnx.save(_model(), source)
        args = ["compile", str(source), "-o", str(tmp_path / "out.onnx"), "--no-builtin",
                "--dump", str(folder), "--json"]
        for plugin in plugins:
            args += ["--pass-path", str(plugin)]
        result = CliRunner().invoke(cli, args)
        if result.exit_code != 0:
            error = json.loads(result.stdout)
            kinds = {"E13028": PassRunError, "GE1701": CommandLineError}
            raise kinds[error["code"]](error["message"])
        return
    if how == "env":
        with monkeypatch.context() as env:
            env.setenv("DUMP_GE_GRAPH", "1")
            env.setenv("DUMP_GRAPH_PATH", str(folder))
            env.setenv("DUMP_GRAPH_LEVEL", "2")
            ge.compile(_model(), pass_paths=plugins)
        return
    ge.compile(_model(), pass_paths=plugins, dump=folder)


def _user_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "dumps"
    folder.mkdir()
    for name, text in USER_FILES.items():
        (folder / name).write_text(text)
    return folder


def _dumps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in USER_FILES)


def _manifest(folder: Path) -> dict[str, object]:
    data = json.loads((folder / MANIFEST).read_text())
    assert isinstance(data, dict)
    return data


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()}


@pytest.mark.parametrize("how", ["dump", "env", "cli"])
def test_a_failed_run_replaces_the_previous_runs_dumps_and_keeps_the_users_files(
        how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        write: Callable[[str, str], Path]) -> None:
    """Run 1 dumps every step; run 2 fails in AfterInferShape (a plugin pass raising): the
    folder holds run 2's three dumps and its manifest saying it did not get through, none
    of run 1's later ones, and every file of the user's as it was."""
    folder = _user_folder(tmp_path)
    _compile(how, folder, tmp_path, monkeypatch, [])
    assert _dumps(folder) == sorted([*ALL_STEPS, MANIFEST])
    first = _manifest(folder)
    assert first["complete"] is True and first["pid"] == os.getpid()
    assert [f["name"] for f in first["files"]] == sorted(  # type: ignore[attr-defined]
        ALL_STEPS, key=lambda n: (n[:7], n.endswith(".onnx")))

    out = tmp_path / "out.onnx"  # (ge compile's output: run 1's stays as it was)
    written = out.read_bytes() if how == "cli" else None
    plugin = write("plugins/breaks.py", BREAKS)
    with pytest.raises(PassRunError, match="Failed to run custom fusion pass Breaks"):
        _compile(how, folder, tmp_path, monkeypatch, [plugin])
    assert _dumps(folder) == sorted([*UNTIL_FAILURE, MANIFEST])
    second = _manifest(folder)
    assert second["complete"] is False and second["run"] != first["run"]
    listed = {f["name"]: (f["size"], f["mtime_ns"])
              for f in second["files"]}  # type: ignore[attr-defined]
    assert sorted(listed) == UNTIL_FAILURE
    assert all(listed[name] == ((folder / name).stat().st_size,
                                (folder / name).stat().st_mtime_ns) for name in listed)
    assert {name: (folder / name).read_text() for name in USER_FILES} == USER_FILES
    assert (out.read_bytes() if how == "cli" else None) == written


def test_a_run_that_dumps_nothing_still_replaces_the_previous_runs_dumps(
        tmp_path: Path, write: Callable[[str, str], Path]) -> None:
    """Level 3 dumps the final graph only: run 2, failing before it, writes no dump, and the
    folder does not show run 1's final graph as if it were run 2's."""
    folder = _user_folder(tmp_path)
    ge.compile(small_graph(), dump=folder, dump_level="3")
    assert _dumps(folder) == ["ge_0000_FinalValidation.onnx", "ge_0000_FinalValidation.txt",
                              MANIFEST]
    with pytest.raises(PassRunError):
        ge.compile(small_graph(), dump=folder, dump_level="3",
                   pass_paths=[write("breaks.py", BREAKS)])
    assert _dumps(folder) == [MANIFEST]
    assert _manifest(folder)["files"] == [] and _manifest(folder)["complete"] is False


def test_a_compilation_refused_before_its_pipeline_leaves_the_dumps_as_they_were(
        tmp_path: Path) -> None:
    folder = _user_folder(tmp_path)
    ge.compile(small_graph(), dump=folder)
    before = _snapshot(folder)
    with pytest.raises(CompilerOptionError, match="'NoSuchStep' is part of no step"):
        ge.compile(small_graph(), dump=folder, dump_level="NoSuchStep")
    assert _snapshot(folder) == before


@pytest.mark.parametrize(("setup", "named"), [
    # an older ge's dump (or a user's file of a dump's name), no manifest
    (lambda d: (d / "ge_0003_AfterInferShape.txt").write_text("old"),
     "(ge_0003_AfterInferShape.txt)"),
    # a weights file no manifest lists
    (lambda d: (d / "ge_weights_abc123.data").write_bytes(b"\0" * 8), "(ge_weights_abc123.data)"),
    # a folder of a dump's name
    (lambda d: (d / "ge_0000_Input.txt").mkdir(), "(ge_0000_Input.txt)"),
], ids=["older-dump", "weights", "folder"])
def test_a_file_named_like_a_dump_that_no_manifest_lists_is_refused_up_front(
        tmp_path: Path, setup: Callable[[Path], object], named: str) -> None:
    """Its run's dumps would mix with it or overwrite it: GE1701 naming it, before anything
    runs; the folder and the graph are left as they were."""
    folder = _user_folder(tmp_path)
    setup(folder)
    before = _snapshot(folder) if not (folder / "ge_0000_Input.txt").is_dir() else None
    graph = small_graph()
    count = graph.mutation_count
    with pytest.raises(CommandLineError) as info:
        ge.compile(graph, dump=folder)
    err = info.value
    assert err.code == "GE1701" and err.path == str(folder)
    assert err.message == (
        f"cannot dump graphs to {folder}: it holds 1 file(s) named like ge's dumps that no "
        f"dump manifest there (ge_dump_manifest.json) lists as written by ge and unchanged "
        f"since {named}: this run's dumps would mix with them, or overwrite them; move them "
        "(an older ge's dumps, or dumps changed since, can be deleted), or dump into another "
        "folder")
    assert graph.mutation_count == count
    if before is not None:
        assert _snapshot(folder) == before
    assert not (folder / MANIFEST).exists()


def test_ge_compile_refuses_such_a_folder_and_writes_nothing(tmp_path: Path) -> None:
    """`ge compile --dump DIR --json`: the GE1701 error as JSON, exit status 1, no output
    written, the folder as it was."""
    folder = _user_folder(tmp_path)
    (folder / "ge_0000_Input.txt").write_text("an older ge's dump")
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(_model(), source)
    before = _snapshot(folder)
    result = CliRunner().invoke(cli, ["compile", str(source), "-o", str(out), "--dump",
                                      str(folder), "--json"])
    assert result.exit_code == 1
    error = json.loads(result.stdout)
    assert (error["code"], error["type"], error["path"]) == (
        "GE1701", "CommandLineError", str(folder))
    assert "(ge_0000_Input.txt): this run's dumps would mix with them" in error["message"]
    assert not out.exists() and _snapshot(folder) == before


def test_a_dump_changed_since_its_run_is_kept_and_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dump the user edited is no longer the run's to remove: nothing is removed, and
    GE's variables' folder is named as DUMP_GRAPH_PATH's in the error. The steps after
    InferShape left the graph as it was, so their dumps are hard links of its file
    (`test_dump_links`): edited in place, it is edited under each of those names."""
    folder = _user_folder(tmp_path)
    ge.compile(small_graph(), dump=folder)
    with (folder / "ge_0002_InferShape.txt").open("a") as edited:
        edited.write("# my note\n")
    before = _snapshot(folder)
    monkeypatch.setenv("DUMP_GE_GRAPH", "2")
    monkeypatch.setenv("DUMP_GRAPH_PATH", str(folder))
    with pytest.raises(CommandLineError) as info:
        ge.compile(small_graph())
    assert info.value.code == "GE1701"
    assert info.value.message.startswith(
        f"cannot dump graphs to {folder} (DUMP_GRAPH_PATH): it holds 7 file(s) named like "
        "ge's dumps that no dump manifest there (ge_dump_manifest.json) lists as written by "
        "ge and unchanged since (ge_0002_InferShape.txt, ge_0003_AfterInferShape.txt, "
        "ge_0004_BuiltinFusion.txt and 4 more): ")
    assert _snapshot(folder) == before


@pytest.mark.parametrize(("manifest", "reason"), [
    ("not json", "Expecting value: line 1 column 1 (char 0)"),
    (json.dumps({"files": []}), "it is not ge's"),
    # lists a user's file: ge never wrote that manifest (and never removes notes.txt)
    (json.dumps({"ge_dump_manifest": 1, "files": [
        {"name": "notes.txt", "size": 4, "mtime_ns": 0}]}), "it lists 'notes.txt'"),
    (json.dumps({"ge_dump_manifest": 1, "files": [
        {"name": "../ge_0000_Input.txt", "size": 4, "mtime_ns": 0}]}),
     "it lists '../ge_0000_Input.txt'"),
    # a user's file as being written: the next run would remove it
    (json.dumps({"ge_dump_manifest": 1, "files": [], "writing": ["notes.txt"]}),
     "it lists 'notes.txt'"),
    (json.dumps({"ge_dump_manifest": 1, "files": [], "writing": "ge_0000_Input.txt"}),
     "its writing is 'ge_0000_Input.txt'"),
], ids=["not-json", "not-ge", "user-file", "outside", "writing-user-file", "writing-not-list"])
def test_a_manifest_ge_cannot_read_is_refused_and_left_alone(
        tmp_path: Path, manifest: str, reason: str) -> None:
    folder = _user_folder(tmp_path)
    (folder / MANIFEST).write_text(manifest)
    before = _snapshot(folder)
    with pytest.raises(CommandLineError) as info:
        ge.compile(small_graph(), dump=folder)
    assert info.value.code == "GE1701"
    assert info.value.message == (
        f"cannot dump graphs to {folder}: {folder / MANIFEST} is not a dump manifest ge can "
        f"read ({reason}), so ge cannot tell which files there an earlier run wrote; move "
        "it, or dump into another folder")
    assert _snapshot(folder) == before


@pytest.mark.parametrize("level", ["2", "4"])
def test_a_run_whose_folder_another_run_took_over_stops_dumping(tmp_path: Path,
                                                                 level: str) -> None:
    """Two compilations dumping into one folder at once: the later takes it over (removing
    the earlier's dumps, as a run after it would) and the earlier, at its next dump (level
    2) or when it would mark its manifest complete (level 4, the input only), finds another
    run's manifest: it warns once and writes nothing more there."""
    folder = tmp_path / "dumps"
    graph = small_graph()
    earlier = GraphDumper(folder, level=level)
    earlier.step_started(0, "BeforeInferShape", graph)
    assert _dumps(folder) == ["ge_0000_Input.onnx", "ge_0000_Input.txt", MANIFEST]
    later = GraphDumper(folder, level=level)
    later.step_started(0, "BeforeInferShape", graph)
    ours = _manifest(folder)
    with pytest.warns(CompileWarning) as caught:
        for index, step in enumerate(PIPELINE):
            earlier.step_finished(index, step_label(step), graph)
    assert len(caught) == 1
    assert str(caught[0].message) == (
        f"stopped dumping graphs to {folder}: another compilation (pid {os.getpid()}, "
        f"started {ours['started']}) dumps into it now and replaced this compilation's "
        "dumps; dump each compilation into its own folder")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        earlier.step_finished(len(PIPELINE) - 1, "FinalValidation", graph)
    assert _dumps(folder) == ["ge_0000_Input.onnx", "ge_0000_Input.txt", MANIFEST]
    assert _manifest(folder) == ours and ours["complete"] is False
