"""An isolated plugin state does not autoload installed plugins (entry points) unless the
test asks: `isolated_plugin_state(entry_points=True)`, or the marker `ge_entry_points` for
the `ge_isolated` fixture (and this suite's autouse isolation)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import ge
from ge.compiler import ENV_DISABLE_PLUGIN_AUTOLOAD, compile_graph
from ge.passes.bootstrap import ENV_PY_PASS_PATH
from ge.testing import isolated_plugin_state
from plugin_fixtures import install_distribution, small_graph

PASS = """
from ge.passes import FusionBasePass, register_fusion_pass


@register_fusion_pass(name="InstalledPass", stage="BeforeInferShape")
class InstalledPass(FusionBasePass):
    def run(self, graph, context):
        return True
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """geplug-installed 1.0 (entry point `installed`) in a site folder on `sys.path`."""
    folder = tmp_path / "site"
    folder.mkdir()
    install_distribution(folder, "geplug-installed", {"installed": PASS})
    monkeypatch.syspath_prepend(str(folder))
    return folder


def ran() -> list[str]:
    return [r.pass_name for r in compile_graph(small_graph()).records]


def test_installed_plugins_do_not_autoload_in_an_isolated_test(site: Path) -> None:
    assert os.environ[ENV_DISABLE_PLUGIN_AUTOLOAD] == "1"
    assert ran() == []
    assert "geplug_installed_pkg.installed" not in sys.modules


@pytest.mark.ge_entry_points
def test_a_test_marked_ge_entry_points_gets_them(site: Path) -> None:
    assert ENV_DISABLE_PLUGIN_AUTOLOAD not in os.environ
    assert ran() == ["InstalledPass"]


def test_the_context_manager_sets_and_restores_the_variable(site: Path) -> None:
    environ = {ENV_DISABLE_PLUGIN_AUTOLOAD: "0", ENV_PY_PASS_PATH: "/somewhere"}
    with isolated_plugin_state(environ=environ):
        assert environ == {ENV_DISABLE_PLUGIN_AUTOLOAD: "1"}
    assert environ == {ENV_DISABLE_PLUGIN_AUTOLOAD: "0", ENV_PY_PASS_PATH: "/somewhere"}
    with isolated_plugin_state(environ=environ, entry_points=True):
        assert environ == {}
    assert environ == {ENV_DISABLE_PLUGIN_AUTOLOAD: "0", ENV_PY_PASS_PATH: "/somewhere"}
    environ = {}
    with isolated_plugin_state(environ=environ):
        assert environ == {ENV_DISABLE_PLUGIN_AUTOLOAD: "1"}
    assert environ == {}


def test_nested_opt_in_on_the_process_environment(site: Path) -> None:
    assert ran() == []
    with isolated_plugin_state(entry_points=True):
        assert ran() == ["InstalledPass"]
    assert os.environ[ENV_DISABLE_PLUGIN_AUTOLOAD] == "1"  # the outer isolation's value
    assert not ge.compiler.is_initialized()
    assert ran() == []


AUTHOR_TEST = """
import pytest

from ge.compiler import compile_graph
from ge.graph import DataType, Format, Graph, TensorDesc


def graph():
    g = Graph("g")
    data = g.add_node("Data", num_inputs=0, attrs={"index": 0})
    data.update_output_desc(0, TensorDesc([2], Format.FORMAT_ND, DataType.DT_FLOAT))
    out = g.add_node("NetOutput", num_inputs=1, num_outputs=0)
    g.add_data_edge(data, 0, out, 0)
    return g


def ran():
    return [r.pass_name for r in compile_graph(graph(), builtin_passes=False).records]


def test_without_fixture():
    assert ran() == ["InstalledPass"]  # nothing isolated: installed plugins autoload


def test_isolated(ge_isolated):
    assert ran() == []


@pytest.mark.ge_entry_points
def test_isolated_asking_for_entry_points(ge_isolated):
    assert ran() == ["InstalledPass"]
"""


@pytest.mark.slow
def test_the_ge_isolated_fixture_and_its_marker(site: Path, tmp_path: Path) -> None:
    folder = tmp_path / "author"
    folder.mkdir()
    (folder / "test_author.py").write_text(AUTHOR_TEST)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_ADDOPTS", ENV_PY_PASS_PATH,
                        ENV_DISABLE_PLUGIN_AUTOLOAD)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH")) if p)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--strict-markers",
         "--rootdir", ".", "-p", "no:randomly", "test_author.py"],
        cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "3 passed" in run.stdout
