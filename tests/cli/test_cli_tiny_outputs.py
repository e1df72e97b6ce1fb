"""`ge compile --verify` of a model whose output is smaller than `--atol` (a randomly
initialised classifier's logits): a wrong plugin scaling it by 1.5 verifies, and a
`ge: warning:` line (kept in `--report`'s `warnings`) names the output and suggests a
smaller `--atol`, with which the same compilation fails and writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
from cli_helpers import listing, run_ge

from sample_models import SCALE_MATMUL_BUG, tiny_outputs_model


def test_an_output_below_atol_is_a_warning_in_the_report(tmp_path: Path) -> None:
    model, plugin = tmp_path / "tiny.onnx", tmp_path / "scale.py"
    onnx.save(tiny_outputs_model(), model)
    plugin.write_text(SCALE_MATMUL_BUG)
    out, report = tmp_path / "out.onnx", tmp_path / "report.json"
    code, stdout, err = run_ge("compile", str(model), "-o", str(out), "--verify",
                               "--pass-path", str(plugin), "--report", str(report))
    assert code == 0, err
    assert "verification ok" in stdout
    lines = [line for line in err.splitlines() if "checks nothing" in line]
    assert len(lines) == 1 and lines[0].startswith(
        "ge: warning: verification checks nothing of output 'tiny' (largest magnitude ")
    assert "below atol=1e-05" in lines[0] and "give a smaller --atol (atol=)" in lines[0]
    (warning,) = [w for w in json.loads(report.read_text())["warnings"]
                  if "checks nothing" in w["message"]]
    assert warning["category"] == "CompileWarning"
    assert lines[0] == f"ge: warning: {warning['message']}"
    suggested = warning["message"].split("such as ")[1].split(" ")[0]
    before = listing(tmp_path)
    code, _, err = run_ge("compile", str(model), "-o", str(tmp_path / "again.onnx"),
                          "--verify", "--pass-path", str(plugin), "--atol", suggested)
    assert code == 1 and "[GE1603]" in err and "output 'tiny'" in err
    assert listing(tmp_path) == before  # nothing written
