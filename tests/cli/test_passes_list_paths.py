"""`ge passes list` lists a pass path that does not exist (or a file not ending in `.py`)
as one more load failure, beside the passes that did load and the other failures, with exit
status 1; the compiler still refuses such a path before loading anything (spec D6)."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper

import ge
from ge.cli import cli
from ge.errors import PluginPathNotFoundError
from ge.passes.bootstrap import ENV_PY_PASS_PATH
from plugin_fixtures import small_graph


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_a_missing_env_folder_is_listed_with_the_other_failures(
        write, pass_source, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = write("plugins/a_ok.py", pass_source("Fine"))
    broken = write("plugins/b_broken.py", "def (\n")
    missing = tmp_path / "no_such_folder"
    monkeypatch.setenv(ENV_PY_PASS_PATH, f"{good.parent}:{missing}")
    code, out, err = _run("passes", "list", "--json")
    assert code == 1 and err == ""
    payload = json.loads(out)
    assert [p["name"] for p in payload["passes"] if not p["builtin"]] == ["Fine"]
    assert [(f["code"], f["type"], f["path"]) for f in payload["failures"]] == [
        ("E13029", "PluginPathNotFoundError", str(missing)),
        ("E13029", "PluginLoadError", str(broken)),
    ]
    assert payload["failures"][0]["message"] == (
        f"python pass path does not exist: {missing} (in ASCEND_GE_PY_PASS_PATH)")


@pytest.mark.builtin_passes
def test_bad_pass_paths_are_listed_in_the_table(write, pass_source, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    good = write("flag_plugin.py", pass_source("FromFlag"))
    not_python = write("notes.txt", "hello")
    missing = tmp_path / "absent"
    monkeypatch.setenv("COLUMNS", "240")  # rich folds long cells at 80 columns otherwise
    code, out, err = _run("passes", "list", "--pass-path", str(missing), "--pass-path",
                          str(good), "--pass-path", str(not_python))
    assert code == 1 and err == ""
    assert "FromFlag" in out and "ConstantFolding" in out  # what loaded is still listed
    assert "Load failures (2)" in out
    assert f"python pass path does not exist: {missing} (given with --pass-path)" in out
    assert f"python pass file must end with .py: {not_python} (given with --pass-path)" in out


def test_a_compile_says_where_a_missing_pass_path_came_from(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """The same path error from the environment or from --pass-path: it says which."""
    from cli_helpers import DISTILBERT, run_process

    missing = tmp_path / "absent"
    out = tmp_path / "o.onnx"
    flag = run_process("-m", "ge", "compile", str(DISTILBERT), "-o", str(out), "--pass-path",
                       str(missing))
    assert flag.returncode == 1 and flag.stderr == (
        f"ge: [E13029] python pass path does not exist: {missing} (given as a pass path: "
        "--pass-path or pass_paths=)\n")
    env = run_process("-c", "import os, sys, ge.cli; "
                      f"os.environ['ASCEND_GE_PY_PASS_PATH'] = {str(missing)!r}; "
                      f"ge.cli.main(['compile', {str(DISTILBERT)!r}, '-o', {str(out)!r}])")
    assert env.returncode == 1 and env.stderr == (
        f"ge: [E13029] python pass path does not exist: {missing} (in "
        "ASCEND_GE_PY_PASS_PATH)\n")
    assert not out.exists()


@pytest.mark.builtin_passes
def test_only_a_missing_path_still_lists_the_builtins(tmp_path: Path) -> None:
    code, out, _ = _run("passes", "list", "--pass-path", str(tmp_path / "absent"), "--json")
    assert code == 1
    payload = json.loads(out)
    assert payload["passes"] and all(p["builtin"] for p in payload["passes"])
    assert [f["type"] for f in payload["failures"]] == ["PluginPathNotFoundError"]


def test_the_compiler_still_refuses_a_missing_path(tmp_path: Path) -> None:
    with pytest.raises(PluginPathNotFoundError) as info:
        ge.compile(small_graph(), pass_paths=[tmp_path / "absent"])
    assert info.value.code == "E13029"


def test_a_blank_pass_path_is_no_path_as_in_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--pass-path "$(PLUGINS)"` with the variable empty: no plugin, as an empty piece of
    ASCEND_GE_PY_PASS_PATH (it resolved to the current folder and ran every file in it)."""
    (tmp_path / "stray.py").write_text("raise SystemExit('a stray file was executed')\n")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out.onnx"
    model = tmp_path / "m.onnx"
    onnx.save(helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]),
        opset_imports=[helper.make_opsetid("", 17)]), model)
    code, _, err = _run("compile", str(model), "-o", str(out), "--pass-path", "",
                        "--pass-path", " ")
    assert code == 0 and out.exists(), err
    code, listed, _ = _run("passes", "list", "--pass-path", "", "--json")
    assert code == 0 and json.loads(listed)["failures"] == []
    assert ge.compile(small_graph(), pass_paths=[""]).report is not None


def test_one_string_for_the_pass_paths_is_refused_before_loading_anything(
        tmp_path: Path) -> None:
    """A str's characters would each be a path (`/`, the root, among them)."""
    from ge.errors import PluginPathTypeError

    (tmp_path / "p.py").write_text("raise SystemExit('loaded')\n")
    for given in (str(tmp_path), tmp_path):
        with pytest.raises(PluginPathTypeError) as info:
            ge.compile(small_graph(), pass_paths=given)  # type: ignore[arg-type]
        assert info.value.code == "E13029" and isinstance(info.value, TypeError)
        assert info.value.message == (
            f"pass_paths must be a list of plugin files or folders, got the "
            f"{type(given).__name__} {str(tmp_path)!r}: write [{str(tmp_path)!r}]")
