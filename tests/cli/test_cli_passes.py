"""`ge passes list`: passes with kind, stage, op types and origin; failures; exit status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ge.cli import cli
from ge.compiler.options import OPTION_CONTINUE_ON_PLUGIN_ERROR as OPTION
from ge.errors import CompilerOptionError
from ge.passes.bootstrap import ENV_PY_PASS_PATH

DECOMPOSE = """
from ge.passes import DecomposePass, PassStage, register_decompose_pass

@register_decompose_pass(name="SplitConv", stage=PassStage.AFTER_INFER_SHAPE, op_types=["Conv"])
class SplitConv(DecomposePass):
    def replacement(self, node):
        raise NotImplementedError
"""


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_list_json_shows_kind_stage_op_types_and_origin(write, pass_source) -> None:
    decompose = write("plugins/decompose.py", DECOMPOSE)
    fusion = write("plugins/fusion.py", pass_source("FusePass"))
    code, out, _ = _run("passes", "list", "--pass-path", str(decompose.parent), "--json")
    assert code == 0
    payload = json.loads(out)
    assert payload["failures"] == [] and payload["disabled"] == []
    by_name = {p["name"]: p for p in payload["passes"]}
    assert by_name["SplitConv"]["kind"] == "decompose"
    assert by_name["SplitConv"]["stage"] == "AfterInferShape"
    assert by_name["SplitConv"]["op_types"] == ["Conv"]
    assert by_name["SplitConv"]["origin"] == {
        "kind": "module",
        "file": str(decompose),
        "line": 5,
        "entry_point": None,
        "distribution": None,
        "version": None,
    }
    assert by_name["FusePass"]["kind"] == "fusion_base"
    assert by_name["FusePass"]["source"] == f"{fusion}:3"


def test_list_table_and_env_variable(write, pass_source, monkeypatch: pytest.MonkeyPatch) -> None:
    from_env = write("env_plugin.py", pass_source("FromEnv"))
    from_flag = write("flag_plugin.py", pass_source("FromFlag", stage="AfterBuiltinFusionPass"))
    monkeypatch.setenv(ENV_PY_PASS_PATH, str(from_env))
    monkeypatch.setenv("COLUMNS", "240")  # rich folds long cells at 80 columns otherwise
    code, out, _ = _run("passes", "list", "--pass-path", str(from_flag))
    assert code == 0
    assert "Passes (2)" in out
    for text in ("FromEnv", "FromFlag", "fusion_base", "AfterBuiltinFusionPass"):
        assert text in out
    assert out.index("FromEnv") < out.index("FromFlag")  # listed in stage order


def test_a_long_source_path_wraps_at_separators_and_keeps_file_and_line_whole(
    write, pass_source, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 160 columns the Source cell of a plugin in a deep folder wraps; it wraps after a
    path separator, never inside `rope_fusion.py:29` (a user trial saw `...py:2` / `9`).
    A load failure's Where cell wraps the same way."""
    folder = "plugins/" + "a_rather_long_folder_name/" * 3
    plugin = write(folder + "rope_fusion.py", pass_source("RopeFusion"))
    broken = write("broken/" + "another_long_folder_name/" * 3 + "broken_plugin.py",
                   "import math\nmath.no_such_function()\n")
    monkeypatch.setenv("COLUMNS", "160")
    code, out, _ = _run("passes", "list", "--pass-path", str(plugin), "--pass-path",
                        str(broken))
    assert code == 1
    assert f"{plugin}:3" not in out  # too long for the column: it wraps
    for row, column, where in (("RopeFusion", -2, f"{plugin}:3"),
                               ("E13029", 2, f"{broken}:2")):
        lines = out.splitlines()
        start = next(i for i, line in enumerate(lines) if f"│ {row} " in line)
        cells = []
        for line in lines[start:]:
            if not line.startswith("│"):
                break
            cells.append(line.split("│")[column].strip())
        last = next(i for i, text in enumerate(cells) if text.endswith(".py" + where[-2:]))
        assert last > 0 and all(text.endswith("/") for text in cells[:last]), cells[:last + 1]
        assert "".join(cells[:last + 1]) == where


def test_load_failures_are_listed_and_make_the_exit_status_non_zero(
    write, pass_source, tmp_path: Path
) -> None:
    write("plugins/a_ok.py", pass_source("Fine"))
    broken = write("plugins/b_broken.py", "import math\nmath.no_such_function()\n")
    write("plugins/c_dup.py", pass_source("Fine"))
    code, out, _ = _run("passes", "list", "--pass-path", str(tmp_path / "plugins"), "--json")
    assert code == 1
    payload = json.loads(out)
    assert [p["name"] for p in payload["passes"]] == ["Fine"]
    first, second = payload["failures"]
    assert first["code"] == "E13029"
    assert first["location"] == f"{broken}:2"
    assert first["exception"] == (
        "AttributeError: module 'math' has no attribute 'no_such_function'"
    )
    assert second["code"] == "E13030"
    assert second["previous_location"].endswith("a_ok.py:3")

    code, out, _ = _run("passes", "list", "--pass-path", str(tmp_path / "plugins"))
    assert code == 1
    assert "Load failures (2)" in out and "E13029" in out and "E13030" in out


def test_debug_shows_the_traceback() -> None:
    result = CliRunner().invoke(
        cli, ["--debug", "passes", "list", "--option", f"{OPTION}=maybe"]
    )
    assert isinstance(result.exception, CompilerOptionError)


def test_no_plugins_lists_only_builtins() -> None:
    code, out, _ = _run("passes", "list", "--json")
    assert code == 0
    assert all(p["origin"]["kind"] == "builtin" for p in json.loads(out)["passes"])


@pytest.mark.builtin_passes
def test_builtin_passes_are_marked(write, pass_source,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = write("plugins/fusion.py", pass_source("FusePass"))
    code, out, _ = _run("passes", "list", "--pass-path", str(plugin), "--json")
    assert code == 0
    by_name = {p["name"]: p for p in json.loads(out)["passes"]}
    assert by_name["FusePass"]["builtin"] is False
    builtin = [name for name, p in by_name.items() if p["builtin"]]
    assert "ConstantFolding" in builtin and "DeadCodeElimination" in builtin
    assert all(by_name[name]["source"] == "built-in" for name in builtin)
    monkeypatch.setenv("COLUMNS", "240")
    code, out, _ = _run("passes", "list", "--pass-path", str(plugin))
    assert code == 0
    assert "Built-in" in out
    row = next(line for line in out.splitlines() if "ConstantFolding" in line)
    assert "yes" in row and "built-in" in row


@pytest.mark.builtin_passes
def test_the_json_lists_the_passes_in_the_tables_order(write, pass_source,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial Y: the table lists the passes in pipeline order, the JSON listed them as
    registered; both are in pipeline order now."""
    plugin = write("plugins/fusion.py", pass_source("AEarlyPass", stage="BeforeInferShape"))
    monkeypatch.setenv("COLUMNS", "240")
    _, table, _ = _run("passes", "list", "--pass-path", str(plugin))
    _, listed, _ = _run("passes", "list", "--pass-path", str(plugin), "--json")
    names = [p["name"] for p in json.loads(listed)["passes"]]
    rows = [line.split("│")[1].strip() for line in table.splitlines()
            if line.startswith("│")]
    assert rows == names and len(names) > 20
    assert names.index("AEarlyPass") < names.index("ConstantFolding")


@pytest.mark.builtin_passes
@pytest.mark.parametrize(("columns", "left_out"), [
    ("240", []), ("80", ["Kind", "Op types", "Built-in"])])
def test_a_narrow_terminal_lists_fewer_columns(monkeypatch: pytest.MonkeyPatch, columns: str,
                                               left_out: list[str]) -> None:
    """At 80 columns the six columns folded every name (`ConvBatchNor` / `mFusion`): the
    table leaves the built-in mark, op types and kind out (the caption says so), and a pass
    off by default says "(off)" by its name."""
    monkeypatch.setenv("COLUMNS", columns)
    code, out, _ = _run("passes", "list")
    assert code == 0
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("┃"))
    every = ["Name", "Kind", "Stage", "Op types", "Built-in", "Source"]
    assert [n.strip() for n in header.strip("┃ ").split("┃")] == [
        n for n in every if n not in left_out]
    # the table fits; text lines are not wrapped written to a pipe (trial AG: grep)
    assert all(len(line) <= int(columns) for line in lines if line[:1] in "┏┃┡│└")
    swish = next(line for line in lines if "SwishFusion" in line)
    assert ("SwishFusion (off)" in swish) == bool(left_out)
    assert "ConvBatchNormFusion" in out
    caption = " ".join(out.split())
    assert (f"columns {', '.join(left_out)} left out for the terminal's width" in caption
            ) == bool(left_out)


@pytest.mark.parametrize(("env", "options", "autoload", "disabled_by"), [
    (None, [], True, None),
    ("1", [], False, "GE_DISABLE_PLUGIN_AUTOLOAD=1"),
    ("0", ["--option", "ge.passes.disable_plugin_autoload=true"], False,
     "option ge.passes.disable_plugin_autoload"),
])
def test_the_listing_says_whether_entry_points_were_loaded(
    monkeypatch: pytest.MonkeyPatch, env: str | None, options: list[str], autoload: bool,
    disabled_by: str | None,
) -> None:
    if env is None:
        monkeypatch.delenv("GE_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    else:
        monkeypatch.setenv("GE_DISABLE_PLUGIN_AUTOLOAD", env)
    code, out, _ = _run("passes", "list", *options, "--json")
    assert code == 0
    assert json.loads(out)["entry_points"] == {"autoload": autoload, "disabled_by": disabled_by}
    code, out, _ = _run("passes", "list", *options)
    assert code == 0
    expected = ("auto-loaded" if autoload else f"not loaded, disabled by {disabled_by}")
    assert f"Entry points (group ge.passes.plugins): {expected}" in out
