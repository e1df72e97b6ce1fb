"""`CompileResult.as_dict()`: what a service logs, JSON-ready, the same as `ge compile
--report` writes but for the paths and hints (a user trial had to assemble it by hand,
and found `outcome` only in the CLI's pass rows)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import run_ge

import ge
from model_paths import shared_model


@pytest.mark.builtin_passes
def test_as_dict_is_json_and_what_the_cli_report_holds(tmp_path: Path) -> None:
    model = shared_model("distilbert_tiny")
    with pytest.warns(ge.errors.CompileWarning):
        result = ge.compile(model, verify=True, options={"ge.optimise.max_rounds": "2"})
    data = json.loads(json.dumps(result.as_dict()))  # every value JSON-ready
    assert data["source"] == str(model)
    assert data["verification"]["ok"] is True
    assert [w["category"] for w in data["warnings"]] == ["CompileWarning"]
    assert "ge.optimise.max_rounds" in data["warnings"][0]["message"]
    rows = {row["name"]: row for row in data["passes"]}
    assert rows["ConstantFolding"]["outcome"] == "success"
    assert all(row["outcome"] in ("success", "not_changed") for row in rows.values())

    report = tmp_path / "report.json"
    code, _, stderr = run_ge("compile", str(model), "-o", str(tmp_path / "out.onnx"),
                             "--verify", "--report", str(report))
    assert code == 0, stderr
    written = json.loads(report.read_text())
    for key in ("nodes_before", "nodes_after", "constants_before", "constants_after",
                "ops_before", "ops_after"):
        assert written[key] == data[key]
    assert [(r["name"], r["stage"], r["outcome"], r["runs"]) for r in written["passes"]] == [
        (r["name"], r["stage"], r["outcome"], r["runs"]) for r in data["passes"]]
