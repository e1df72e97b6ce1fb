"""`ge passes explain --inline-functions` / `--opset N`: MODEL converted first as `ge compile`
converts it, by its code, so that a pass whose operators sit in model-local functions is
explained on what the compilation gives it.
"""

from __future__ import annotations

import json
from pathlib import Path

import onnx
from cli_helpers import run_ge

from function_models import SILU_PASS, silu_model


def _save(model: onnx.ModelProto, path: Path) -> str:
    onnx.save(model, path)
    return str(path)


def test_inline_functions_explains_what_ge_compile_inline_functions_rewrites(
        write, tmp_path: Path) -> None:
    plugin = str(write("p/silu.py", SILU_PASS))
    model = _save(silu_model(), tmp_path / "f.onnx")
    code, out, err = run_ge("passes", "explain", "FastSiLU", model, "--pass-path", plugin,
                            "--inline-functions")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[1] == ("matched against the model as ge compile --inline-functions converts "
                        "it, after shape inference: the pass's stage")
    assert lines[2].endswith("1 candidate(s), 1 would be rewritten")
    assert lines[3] == "  rewrite at 'call/Mul': call/Sigmoid, call/Mul"
    assert "function local.F" not in out
    code, out, err = run_ge("passes", "explain", "FastSiLU", model, "--pass-path", plugin,
                            "--inline-functions", "--json")
    payload = json.loads(out)
    assert payload["inline_functions"] is True
    (pattern,) = payload["patterns"]
    assert pattern["functions"] == [] and pattern["rewrite_count"] == 1
    # the compilation the explanation stands for rewrites that match
    code, out, err = run_ge("compile", model, "-o", str(tmp_path / "out.onnx"), "--no-builtin",
                            "--pass-path", plugin, "--inline-functions", "--json")
    assert code == 0, err
    (record,) = [r for r in json.loads(out)["passes"] if r["name"] == "FastSiLU"]
    assert record["changed"]


def test_opset_converts_first_as_ge_compile_does(write, tmp_path: Path) -> None:
    plugin = str(write("p/silu.py", SILU_PASS))
    model = _save(silu_model(), tmp_path / "f.onnx")
    code, out, err = run_ge("passes", "explain", "FastSiLU", model, "--pass-path", plugin,
                            "--inline-functions", "--opset", "18", "--json")
    assert code == 0, err
    payload = json.loads(out)
    assert payload["opsets"][""] == 18 and payload["opset"] == 18
    assert payload["patterns"][0]["rewrite_count"] == 1
    code, out, err = run_ge("passes", "explain", "FastSiLU", model, "--pass-path", plugin,
                            "--opset", "16")
    assert code == 1
    _, _, compiled = run_ge("compile", model, "-o", str(tmp_path / "out.onnx"), "--opset", "16")
    assert err.strip() == compiled.strip() and "opset 16 is below the model's (17)" in err


def test_a_suggested_compilation_converts_as_the_explanation_did(write, tmp_path: Path) -> None:
    """A late pass's warning names the `ge compile --dump` to explain instead: with the
    flags that converted MODEL here, or its dumps would hold the calls."""
    plugin = str(write("p/late.py", SILU_PASS.replace("AFTER_INFER_SHAPE",
                                                 "AFTER_ORIGIN_GRAPH_OPTIMIZE")))
    model = _save(silu_model(), tmp_path / "f.onnx")
    code, _, err = run_ge("passes", "explain", "FastSiLU", model, "--pass-path", plugin,
                          "--inline-functions")
    assert code == 0, err
    assert "ge compile MODEL -o OUT --inline-functions --dump DIR, then ge passes explain " \
           "FastSiLU DIR/ge_*_OriginGraphOptimize.onnx" in err
