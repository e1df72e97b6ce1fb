"""The node counts docs/cli.md shows for the DistilBERT examples are today's: `ge compile`
and `pyatc` are run as the page runs them and their numbers looked for in the page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import DISTILBERT, run_ge

from ge.pyatc import main as pyatc

pytestmark = pytest.mark.builtin_passes

CLI_MD = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_ge_compile_and_pyatc_counts_match_the_page(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    page = CLI_MD.read_text(encoding="utf-8")
    code, out, err = run_ge("compile", str(DISTILBERT), "-o", str(tmp_path / "out.onnx"),
                            "--verify", "--json")
    assert code == 0, err
    report = json.loads(out)
    before, after = report["nodes_before"], report["nodes_after"]
    constants = report["constants_before"], report["constants_after"]
    assert (f"nodes {before} → {after} ({after - before:+d}), constants {constants[0]} → "
            f"{constants[1]};") in page
    assert f'"constants_before": {constants[0]},' in page
    assert f'"constants_after": {constants[1]},' in page
    assert f'"nodes_before": {before},' in page and f'"nodes_after": {after},' in page

    assert pyatc(args=[f"--model={DISTILBERT}", "--framework=5",
                       f"--output={tmp_path / 'out'}"]) == 0
    line = capsys.readouterr().out.strip()
    change = (f"nodes {before} → {after} ({after - before:+d}), constants {constants[0]} → "
              f"{constants[1]}")
    assert line.endswith(f"; {change}")
    assert f"pyatc: run success: wrote out.onnx; {change}\n" in page
