"""The example distribution (ge-example-passes, installed for real into a temporary folder by
`tests/test_plugin_package.py`'s fixture) under per-compilation plugin options, in a fresh
process as a user runs it: disabling `pad_conv` counts for that compilation only, the next
compilation without options has both passes again, a name that is not installed is a
warning, and an isolated plugin state runs neither (the user trial's reproduction)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from plugin_fixtures import clean_plugin_state  # noqa: F401
from test_plugin_package import _env, _make_model_module, site  # noqa: F401

pytestmark = pytest.mark.slow

SCRIPT = """
import json, sys, warnings
import ge
from ge.testing import isolated_plugin_state

model = sys.argv[1]
PLUGINS = ("FoldPadIntoConv", "HardSwishFusion")


def rewrites(**kwargs):
    found = ge.compile(model, **kwargs).report.rewrites_by_pass()
    return {name: count for name, count in found.items() if name in PLUGINS}


out = {"first": rewrites(options={"ge.passes.disabled_plugins": "pad_conv"}),
       "next": rewrites(),
       "dist_name": rewrites(options={"ge.passes.disabled_plugins":
                                      "ge-example-passes:hard_swish"}),
       "autoload_off": rewrites(options={"ge.passes.disable_plugin_autoload": "true"}),
       "again": rewrites()}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out["unknown"] = rewrites(options={"ge.passes.disabled_plugins": "nonexistent"})
out["warnings"] = [(w.category.__name__, str(w.message)) for w in caught]
with isolated_plugin_state():
    out["isolated"] = rewrites()
out["after_isolated"] = rewrites()
print(json.dumps(out))
"""


def test_plugin_options_count_per_compilation(site: Path, tmp_path: Path) -> None:  # noqa: F811
    model = tmp_path / "pad_conv_hardswish.onnx"
    onnx.save(_make_model_module().build_model(), model)
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(model)], env=_env(site),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout)
    both = {"FoldPadIntoConv": 2, "HardSwishFusion": 2}
    assert out["first"] == {"HardSwishFusion": 2}
    assert out["next"] == both
    assert out["dist_name"] == {"FoldPadIntoConv": 2}
    assert out["autoload_off"] == {}
    assert out["again"] == both
    assert out["unknown"] == both
    assert out["warnings"] == [[
        "CompileWarning",
        "cannot disable unknown plugin(s) nonexistent: no installed entry point of group "
        "ge.passes.plugins has that name (installed plugins: ge-example-passes:hard_swish, "
        "ge-example-passes:pad_conv); the name is ignored"]]
    assert out["isolated"] == {}
    assert out["after_isolated"] == both
