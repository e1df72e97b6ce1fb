"""Helper modules beside plugin files (`import _common`, docs/passes.md): a plugin folder's
plugin never silently gets another plugin folder's helper of the same name. The plugin whose
import would have reached a taken name fails with E13029 naming both files (as a package
whose name is taken does, D8); plugins of one folder share their helper; compilations one
after the other each get their own folder's helper."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

import ge
from ge.cli import cli
from ge.errors import PluginLoadError
from ge.passes import get_registered_passes
from ge.passes.bootstrap import ENV_PY_PASS_PATH, discover_plugins, load_pass_plugins
from ge.passes.discovery import module_name_for
from ge.passes.loader import loaded_plugins, unload_all
from plugin_fixtures import small_graph

Write = Callable[[str, str], Path]

HELPER = """
STAGE_NAME = {stage!r}
TAG = {tag!r}
loaded_by = []
"""

PLUGIN = """
from ge.passes import FusionBasePass, register_fusion_pass
from plugin_fixtures import insert_identity
{imports}
_common.loaded_by.append(__name__)

@register_fusion_pass(name={name!r}, stage=_common.STAGE_NAME)
class {name}(FusionBasePass):
    def run(self, graph, context):
        insert_identity(graph, _common.TAG)
"""


def _plugin(name: str, imports: str = "import _common") -> str:
    return PLUGIN.format(name=name, imports=imports)


def _folders(write: Write, tmp_path: Path) -> tuple[Path, Path]:
    """d1 (helper: BeforeInferShape, plugin D1Pass) and d3 (its own helper of the same name:
    AfterInferShape, plugin D3Pass in other.py)."""
    write("d1/_common.py", HELPER.format(stage="BeforeInferShape", tag="from_d1"))
    write("d1/p1.py", _plugin("D1Pass"))
    write("d3/_common.py", HELPER.format(stage="AfterInferShape", tag="from_d3"))
    write("d3/other.py", _plugin("D3Pass"))
    return tmp_path / "d1", tmp_path / "d3"


def _names() -> list[str]:
    return [d.pass_name for d in get_registered_passes()]


def _ran(result: ge.CompileResult) -> list[tuple[str, str]]:
    return [(r.pass_name, r.stage) for r in result.report.records]


def _clash_message(d1: Path, d3: Path) -> str:
    return (
        f"Failed to load custom fusion pass lib {d3 / 'other.py'}. Reason: a module named "
        f"_common is already imported from {d1 / '_common.py'} (by the plugin "
        f"{d1 / 'p1.py'}); {d3 / '_common.py'} is not loaded: rename one of them."
    )


# --- two folders in one discovery ------------------------------------------------------------


def test_a_helper_another_folder_imported_fails_the_plugin_importing_it(
    write: Write, pass_source, tmp_path: Path
) -> None:
    d1, d3 = _folders(write, tmp_path)
    other = write(
        "d3/other.py",
        pass_source("EarlyPass") + "import _common\n" + _plugin("D3Pass", imports=""),
    )
    write("d3/plain.py", pass_source("PlainPass"))
    report = discover_plugins([d1, d3], entry_points=False)

    assert _names() == ["D1Pass", "PlainPass"]  # nothing of other.py, EarlyPass included
    (err,) = report.failures
    assert type(err) is PluginLoadError and err.code == "E13029"
    assert err.message == _clash_message(d1, d3)
    assert err.path == str(other)
    assert err.location is not None
    assert (err.location.file, err.location.line) == (str(other), 6)  # its `import _common`
    assert sys.modules["_common"].__file__ == str(d1 / "_common.py")
    assert sys.modules["_common"].loaded_by == [module_name_for(d1 / "p1.py")]
    assert module_name_for(other) not in sys.modules

    unload_all()
    assert "_common" not in sys.modules
    assert get_registered_passes() == [] and loaded_plugins() == []


@pytest.mark.parametrize(
    "imports",
    [
        "from _common import STAGE_NAME\nimport _common",
        "import importlib\n_common = importlib.import_module('_common')",
        "import types\ntry:\n    import _common\nexcept ImportError:  # caught: still fails\n"
        "    _common = types.SimpleNamespace(STAGE_NAME='AfterInferShape', TAG='t', loaded_by=[])",
    ],
    ids=["from-import", "import_module", "caught"],
)
def test_every_way_of_importing_the_taken_helper_fails(
    write: Write, tmp_path: Path, imports: str
) -> None:
    d1, d3 = _folders(write, tmp_path)
    write("d3/other.py", _plugin("D3Pass", imports=imports))
    with pytest.raises(PluginLoadError) as info:
        load_pass_plugins(f"{d1}:{d3}", entry_points=False)
    assert info.value.message == _clash_message(d1, d3)
    assert _names() == ["D1Pass"]
    assert sys.modules["_common"].__file__ == str(d1 / "_common.py")


def test_ge_passes_list_reports_the_clash(
    write: Write, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d1, d3 = _folders(write, tmp_path)
    monkeypatch.setenv(ENV_PY_PASS_PATH, f"{d1}:{d3}")
    result = CliRunner().invoke(cli, ["passes", "list", "--json"], catch_exceptions=False)
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    listed = {p["name"]: p["stage"] for p in payload["passes"] if not p["builtin"]}
    assert listed == {"D1Pass": "BeforeInferShape"}  # no D3Pass at d1's stage
    assert [(f["code"], f["path"], f["message"]) for f in payload["failures"]] == [
        ("E13029", str(d3 / "other.py"), _clash_message(d1, d3))
    ]


# --- what is not a clash ---------------------------------------------------------------------


def test_plugins_of_one_folder_share_their_helper_even_listed_twice(
    write: Write, tmp_path: Path
) -> None:
    d1, _ = _folders(write, tmp_path)
    write("d1/p2.py", _plugin("D1Second"))
    report = discover_plugins([d1, d1], entry_points=False)
    assert report.failures == []
    assert _names() == ["D1Pass", "D1Second"]
    helper = sys.modules["_common"]
    assert helper.__file__ == str(d1 / "_common.py")
    assert helper.loaded_by == [module_name_for(d1 / "p1.py"), module_name_for(d1 / "p2.py")]

    assert discover_plugins([d1], entry_points=False).failures == []  # loaded again: cached
    assert sys.modules["_common"] is helper and len(helper.loaded_by) == 2


def test_the_same_helper_file_reached_from_two_folders_is_shared(
    write: Write, tmp_path: Path
) -> None:
    d1, d3 = _folders(write, tmp_path)
    (d3 / "_common.py").unlink()
    os.symlink(d1 / "_common.py", d3 / "_common.py")
    report = discover_plugins([d1, d3], entry_points=False)
    assert report.failures == []
    assert [(d.pass_name, d.stage.value) for d in get_registered_passes()] == [
        ("D1Pass", "BeforeInferShape"),
        ("D3Pass", "BeforeInferShape"),
    ]
    assert len(sys.modules["_common"].loaded_by) == 2


# --- compilations with pass_paths ------------------------------------------------------------


def test_compilations_one_after_the_other_each_get_their_own_helper(
    write: Write, tmp_path: Path
) -> None:
    d1, d3 = _folders(write, tmp_path)
    for folder, expected, tag in [
        (d1, ("D1Pass", "BeforeInferShape"), "from_d1"),
        (d3, ("D3Pass", "AfterInferShape"), "from_d3"),
        (d1, ("D1Pass", "BeforeInferShape"), "from_d1"),
    ]:
        result = ge.compile(small_graph(), pass_paths=[folder], builtin_passes=False)
        assert _ran(result) == [expected]
        assert result.graph.find_node_by_name(tag) is not None
        assert "_common" not in sys.modules  # unloaded with the compilation
        assert loaded_plugins() == []


def test_a_compilation_with_both_folders_fails_and_leaves_nothing_loaded(
    write: Write, tmp_path: Path
) -> None:
    d1, d3 = _folders(write, tmp_path)
    with pytest.raises(PluginLoadError) as info:
        ge.compile(small_graph(), pass_paths=[d1, d3], builtin_passes=False)
    assert info.value.code == "E13029"
    assert info.value.message == _clash_message(d1, d3)
    assert "_common" not in sys.modules
    assert loaded_plugins() == [] and get_registered_passes() == []

    result = ge.compile(small_graph(), pass_paths=[d3], builtin_passes=False)
    assert _ran(result) == [("D3Pass", "AfterInferShape")]
    assert result.graph.find_node_by_name("from_d3") is not None


def test_a_compilation_clashing_with_the_environment_keeps_the_environment_helper(
    write: Write, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d1, d3 = _folders(write, tmp_path)
    monkeypatch.setenv(ENV_PY_PASS_PATH, str(d1))
    ge.initialize()
    try:
        helper = sys.modules["_common"]
        with pytest.raises(PluginLoadError) as info:
            ge.compile(small_graph(), pass_paths=[d3], builtin_passes=False)
        assert info.value.message == _clash_message(d1, d3)
        assert sys.modules["_common"] is helper  # put back after the failed import
        result = ge.compile(small_graph(), builtin_passes=False)
        assert _ran(result) == [("D1Pass", "BeforeInferShape")]
    finally:
        ge.finalize()
    assert "_common" not in sys.modules
