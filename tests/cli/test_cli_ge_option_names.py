"""`--option` keys under the reserved prefix `ge.` that ge does not know are a `ge: warning:`
line naming the closest known key (in the JSON's `warnings` with `--json`); the command
still succeeds, and a known option or a plugin's own gives no warning."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import run_ge

from model_paths import shared_model

MODEL = shared_model("mobilenet_like")
WARNING = ("option ge.optimise.max_rounds is not one of ge's options (did you mean "
           "ge.optimize.max_rounds?): ge ignores it, only passes reading it see it; the prefix "
           "'ge.' is reserved for ge's and GE's own options (a plugin's options take a prefix "
           "of their own)")


def test_compile_warns_about_a_typo_of_a_ge_option(tmp_path: Path) -> None:
    out = tmp_path / "out.onnx"
    code, _, err = run_ge("compile", str(MODEL), "-o", str(out), "--option",
                          "ge.optimise.max_rounds=2")
    assert code == 0 and out.exists()
    assert err.splitlines() == [f"ge: warning: {WARNING}"]
    code, stdout, err = run_ge("compile", str(MODEL), "-o", str(out), "--option",
                               "ge.optimise.max_rounds=2", "--json")
    assert code == 0 and err == ""
    assert json.loads(stdout)["warnings"] == [
        {"category": "CompileWarning", "message": WARNING, "location": None}]


def test_known_and_plugin_options_give_no_warning(tmp_path: Path) -> None:
    code, _, err = run_ge("compile", str(MODEL), "-o", str(tmp_path / "out.onnx"),
                          "--option", "ge.optimize.max_rounds=2", "--option", "my.gelu=tanh")
    assert code == 0 and "warning" not in err


def test_passes_list_warns_too() -> None:
    code, _, err = run_ge("passes", "list", "--option", "ge.optimise.max_rounds=2")
    assert code == 0
    assert f"ge: warning: {WARNING}" in err.splitlines()
