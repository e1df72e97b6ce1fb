"""The example plugin distribution `examples/plugin-package` (ge-example-passes), installed
for real with pip into a temporary folder and used from subprocesses through PYTHONPATH:
`ge passes list` shows its two passes as entry points with the distribution and version,
and `ge compile` of a model made for them fires both, verified in onnxruntime. No network:
`--no-index --no-build-isolation` builds with the setuptools (and wheel) of this venv."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from ge.passes.bootstrap import ENV_PY_PASS_PATH
from plugin_fixtures import clean_plugin_state  # noqa: F401
from scripts import load_script

PACKAGE = Path(__file__).resolve().parents[1] / "examples" / "plugin-package"
DIST, VERSION = "ge-example-passes", "0.1.0"
PASSES = {"FoldPadIntoConv": "pad_conv", "HardSwishFusion": "hard_swish"}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The distribution installed with `pip install --target` (built from a copy, so the
    build leaves nothing in the repository)."""
    root = tmp_path_factory.mktemp("plugin_package")
    source = root / "source"
    shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__", "*.onnx"))
    target = root / "site"
    command = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
               "--no-index", "--disable-pip-version-check", "--quiet", "--target", str(target),
               str(source)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    if "invalid command 'bdist_wheel'" in output:
        pytest.fail("building the example distribution offline needs `wheel` in the venv "
                    "(setuptools < 70.1 has no bdist_wheel of its own): "
                    f"{sys.executable} -m pip install wheel", pytrace=False)
    assert done.returncode == 0, output
    return target


def _env(site: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in (ENV_PY_PASS_PATH, "GE_DISABLE_PLUGIN_AUTOLOAD")}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return env


def _ge(site: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ge", *args], env=_env(site), cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def _make_model_module():
    return load_script(PACKAGE / "make_model.py", "_ge_example_make_model")


def test_the_installed_distribution_has_its_metadata_and_entry_points(site: Path) -> None:
    (info,) = site.glob("ge_example_passes-*.dist-info")
    assert info.name == f"ge_example_passes-{VERSION}.dist-info"
    entry_points = (info / "entry_points.txt").read_text()
    assert "[ge.passes.plugins]" in entry_points
    for module in PASSES.values():
        assert f"{module} = ge_example_passes.{module}" in entry_points
    assert "Requires-Dist" not in (info / "METADATA").read_text()  # nothing to download


def test_ge_passes_list_shows_both_passes_with_distribution_and_version(site: Path) -> None:
    done = _ge(site, "passes", "list", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    payload = json.loads(done.stdout)
    plugins = {p["name"]: p for p in payload["passes"] if not p["builtin"]}
    assert set(plugins) == set(PASSES)
    for name, module in PASSES.items():
        entry = plugins[name]
        assert (entry["kind"], entry["stage"]) == ("pattern_fusion", "AfterInferShape")
        origin = entry["origin"]
        assert origin["kind"] == "entry_point"
        assert (origin["distribution"], origin["version"]) == (DIST, VERSION)
        assert origin["entry_point"] == f"{module} = ge_example_passes.{module}"
        assert origin["file"] == str(site / "ge_example_passes" / f"{module}.py")
    assert payload["failures"] == []


def test_one_entry_point_can_be_disabled_by_name(site: Path) -> None:
    done = _ge(site, "passes", "list", "--json", "--disable", "pad_conv")
    assert done.returncode == 0, done.stdout + done.stderr
    payload = json.loads(done.stdout)
    assert [p["name"] for p in payload["passes"] if not p["builtin"]] == ["HardSwishFusion"]
    assert payload["disabled"] == [f"{DIST}:pad_conv"]


def test_ge_compile_fires_both_passes_and_onnxruntime_agrees(site: Path, tmp_path: Path) -> None:
    model_path = tmp_path / "pad_conv_hardswish.onnx"
    onnx.save(_make_model_module().build_model(), model_path)
    out = tmp_path / "out.onnx"
    done = _ge(site, "compile", str(model_path), "-o", str(out), "--verify",
               "--report", str(tmp_path / "report.json"), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report == json.loads((tmp_path / "report.json").read_text())
    rows = {p["name"]: p for p in report["passes"]}
    # Three Pad -> Conv matches, the reflect Pad refused; both HardSwish forms rewritten.
    assert (rows["FoldPadIntoConv"]["matches"], rows["FoldPadIntoConv"]["rewrites"]) == (3, 2)
    assert rows["HardSwishFusion"]["rewrites"] == 2
    for name in PASSES:
        assert rows[name]["origin"].startswith(f"entry point {PASSES[name]} = ")
        assert f"({DIST} {VERSION})" in rows[name]["origin"]
    assert report["verification"]["ok"] is True
    assert report["nodes_after"] < report["nodes_before"]

    compiled = onnx.load(out)
    onnx.checker.check_model(compiled, full_check=True)
    ops = [n.op_type for n in compiled.graph.node]
    assert ops.count("HardSwish") == 2 and "HardSigmoid" not in ops and "Clip" not in ops
    (pad,) = [n for n in compiled.graph.node if n.op_type == "Pad"]
    assert onnx.helper.get_attribute_value(pad.attribute[0]) == b"reflect"
    conv_pads = [onnx.helper.get_attribute_value(a) for n in compiled.graph.node
                 if n.op_type == "Conv" for a in n.attribute if a.name == "pads"]
    assert [1, 1, 1, 1] in conv_pads and [1, 2, 2, 1] in conv_pads

    x = np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype(np.float32)
    expected, = ort.InferenceSession(str(model_path)).run(None, {"x": x})
    actual, = ort.InferenceSession(str(out)).run(None, {"x": x})
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)
