"""The pytest plugin (`pytest11` entry point `ge`): its fixtures in-process, the isolation
they rest on, and the plugin used by a test file outside this package, run as a subprocess
the way a pass author runs it."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from passes_source import DROP_ADD, FUSE_MATMUL_ADD

import ge.compiler
import ge.passes
from ge.passes.bootstrap import ENV_PY_PASS_PATH
from ge.testing import assert_rewrites, isolated_plugin_state, make_model


def test_the_entry_point_names_the_plugin_module() -> None:
    found = [ep for ep in entry_points(group="pytest11") if ep.name == "ge"]
    assert [ep.value for ep in found] == ["ge.testing.plugin"]


def test_importing_the_plugin_is_light() -> None:
    code = ("import sys, ge.testing.plugin as p; "
            "print(sorted(m for m in ('onnx', 'numpy', 'ge.compiler', 'ge.graph', 'ge.passes') "
            "if m in sys.modules), p.ge_passes.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["[]", "ge_passes"]


def test_fixtures_in_process(ge_isolated: None, ge_passes, ge_model, tmp_path: Path) -> None:
    path = tmp_path / "fuse.py"
    path.write_text(FUSE_MATMUL_ADD)
    passes = ge_passes(path)
    assert passes.names == ["FuseMatMulAdd"]
    from onnx import helper

    import ge.testing

    model = ge_model([helper.make_node("MatMul", ["x", "w"], ["t"], name="mm"),
                      helper.make_node("Add", ["t", "b"], ["y"], name="add")],
                     [("x", [2, 3]), ("w", [3, 4]), ("b", [4])], [("y", [2, 4])])
    assert_rewrites("FuseMatMulAdd", model, 1, passes=passes)
    assert ge.testing.make_model is ge_model


def test_isolated_plugin_state_gives_the_process_back(tmp_path: Path) -> None:
    environ = {ENV_PY_PASS_PATH: "/somewhere"}
    helper_file = tmp_path / "helper_mod_for_isolation.py"
    helper_file.write_text("VALUE = 1\n")
    plugin = tmp_path / "fuse.py"
    plugin.write_text(FUSE_MATMUL_ADD)
    path_before = list(sys.path)
    with isolated_plugin_state(module_roots=[tmp_path], environ=environ):
        assert ENV_PY_PASS_PATH not in environ
        assert environ["GE_DISABLE_PLUGIN_AUTOLOAD"] == "1"  # no installed plugin autoloads
        sys.path.insert(0, str(tmp_path))
        import helper_mod_for_isolation  # noqa: F401

        ge.compiler.compile_graph(
            ge.testing.as_graph(make_model([], [("x", [1])], [("x", [1])])),
            pass_paths=[plugin])
        assert ge.compiler.is_initialized()
        # the compilation's pass paths were its own: unloaded when it ended
        assert ge.passes.get_registered_passes() == []
        assert not [m for m in sys.modules if m.startswith("_ge_py_pass_fuse_")]
    assert environ == {ENV_PY_PASS_PATH: "/somewhere"}
    assert sys.path == path_before
    assert "helper_mod_for_isolation" not in sys.modules
    assert not [m for m in sys.modules if m.startswith("_ge_py_pass_fuse_")]
    assert not ge.compiler.is_initialized() and ge.passes.get_registered_passes() == []


def test_isolation_drops_only_the_modules_its_block_imported_from_the_roots(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Modules imported before the block stay, even from a root; a module the block put in
    place of an earlier one of the same name is dropped."""
    inside, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    inside.mkdir()
    elsewhere.mkdir()
    (inside / "iso_before_block.py").write_text("")
    (inside / "iso_replaced.py").write_text("WHERE = 'root'\n")
    (elsewhere / "iso_replaced.py").write_text("WHERE = 'elsewhere'\n")
    monkeypatch.syspath_prepend(str(elsewhere))
    monkeypatch.syspath_prepend(str(inside))
    before = importlib.import_module("iso_before_block")
    spec = importlib.util.spec_from_file_location("iso_replaced", elsewhere / "iso_replaced.py")
    assert spec is not None
    sys.modules["iso_replaced"] = importlib.util.module_from_spec(spec)
    with isolated_plugin_state(module_roots=[inside], environ={}):
        del sys.modules["iso_replaced"]
        assert importlib.import_module("iso_replaced").WHERE == "root"
    assert sys.modules["iso_before_block"] is before
    assert "iso_replaced" not in sys.modules
    del sys.modules["iso_before_block"]


# -- a pass author's test file, run with `python -m pytest` -----------------------------------

AUTHOR_TEST = '''
import numpy as np
from onnx import helper

from ge.testing import assert_numerically_equal, assert_rewrites, run_pass, tensor


def model(ge_model, chains):
    nodes, inits, outputs = [], [], []
    for i in range(chains):
        nodes += [helper.make_node("MatMul", ["x", f"w{{i}}"], [f"t{{i}}"], name=f"mm{{i}}"),
                  helper.make_node("Add", [f"t{{i}}", f"b{{i}}"], [f"y{{i}}"], name=f"add{{i}}")]
        inits += [tensor(f"w{{i}}", np.ones((3, 4))), tensor(f"b{{i}}", np.arange(4.0))]
        outputs.append((f"y{{i}}", [2, 4]))
    return ge_model(nodes, [("x", [2, 3])], outputs, inits)


def test_fuse_rewrites(ge_isolated, ge_passes, ge_model):
    passes = ge_passes("passes/fuse.py")
    m = model(ge_model, 2)
    fused = assert_rewrites("FuseMatMulAdd", m, {expected}, passes=passes)
    assert_numerically_equal(m, fused)


def test_drop_add_is_exact(ge_isolated, ge_passes, ge_model):
    passes = ge_passes("passes")
    m = model(ge_model, 1)
    assert_numerically_equal(m, run_pass("{numeric_pass}", m, passes=passes))
'''

# Without asking for a fixture, nothing is reset: a pass registered at import stays, and the
# built-in passes are there. (It runs first: `ge_isolated` in a later test clears it.)
UNTOUCHED_TEST = '''
import ge.compiler.builtin
from ge.passes import FusionBasePass, register_fusion_pass
from ge.passes.registry import get_registered_pass_by_name


@register_fusion_pass(name="RegisteredAtImport", stage="BeforeInferShape")
class RegisteredAtImport(FusionBasePass):
    def run(self, graph, context):
        return True


def test_nothing_was_reset():
    assert get_registered_pass_by_name("RegisteredAtImport") is not None
    assert len(ge.compiler.builtin.BUILTIN_PASSES) > 0
'''


def _author_folder(tmp_path: Path, *, expected: str, numeric_pass: str) -> Path:
    folder = tmp_path / "author"
    (folder / "passes").mkdir(parents=True)
    (folder / "passes" / "fuse.py").write_text(FUSE_MATMUL_ADD)
    (folder / "passes" / "noop_fuse.py").write_text(
        FUSE_MATMUL_ADD.replace('"FuseMatMulAdd"', '"KeepsSemantics"'))
    (folder / "passes" / "drop.py").write_text(DROP_ADD)
    source = AUTHOR_TEST.format(expected=expected, numeric_pass=numeric_pass)
    (folder / "test_author.py").write_text(source)
    (folder / "test_untouched.py").write_text(UNTOUCHED_TEST)
    return folder


def _pytest(folder: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_ADDOPTS", ENV_PY_PASS_PATH)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--rootdir", ".",
         "test_untouched.py", "test_author.py"],
        cwd=folder, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_pass_authors_tests_pass(tmp_path: Path) -> None:
    run = _pytest(_author_folder(tmp_path, expected="2", numeric_pass="KeepsSemantics"))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "3 passed" in run.stdout


@pytest.mark.slow
def test_a_pass_authors_failing_tests_read_well(tmp_path: Path) -> None:
    run = _pytest(_author_folder(tmp_path, expected="3", numeric_pass="DropAdd"))
    out = run.stdout
    assert run.returncode == 1, out + run.stderr
    assert "2 failed, 1 passed" in out
    # the rewrite count, the matches and the region before and after the pass
    for expected in (
        "AssertionError: FuseMatMulAdd: expected 3 rewrites, made 2 (2 matches found)",
        "  match 2: pattern 'FuseMatMulAdd_matmul_add_pattern' in graph g: mm1 (MatMul), "
        "add1 (Add)",
        "before the pass:",
        "* %t1: float32[2,4] = MatMul(%x, %w1)  # mm1",
        "after the pass (2 node(s) made by FuseMatMulAdd):",
        "* %y1: float32[2,4] = Gemm(%x, %w1, %b1)  # Gemm_1",  # (the Add's value)
        # the numeric difference, output by output, and the inputs used
        "AssertionError: models differ: 1 of 1 output(s) beyond tolerance (rtol=0.0001, "
        "atol=1e-05)",
        "  output 'y0': max abs diff 3, max rel diff ",
        "inputs (generated with seed 0): x float32[2, 3]",
    ):
        assert any(line.startswith("E ") and expected in line for line in out.splitlines()), (
            expected, out)
    # ge.testing's own frames are hidden: each failure points at the author's line
    assert "ge/testing/" not in out
    assert len(re.findall(r"^test_author\.py:\d+: AssertionError$", out, re.M)) == 2
