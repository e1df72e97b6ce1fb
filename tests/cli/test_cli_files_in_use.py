"""Outputs never replace a file the command reads (an error-path audit found `ge run
--output` replacing its --inputs file, a report replacing the inputs or a plugin, a report
named like OUT's external data file lost), and a plugin that changes the working directory
does not move where the command's paths point."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import DISTILBERT, run_ge

from ge.session import generate_inputs
from plugin_fixtures import ADDS_NEG


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """An --inputs file for DistilBERT, a plugin file and a copy of the model, in tmp_path."""
    inputs = tmp_path / "in.npz"
    np.savez(inputs, **generate_inputs(str(DISTILBERT)))
    plugin = tmp_path / "plugin.py"
    plugin.write_text(ADDS_NEG)
    copy = tmp_path / "copy.onnx"
    copy.write_bytes(DISTILBERT.read_bytes())
    return {"inputs": inputs, "plugin": plugin, "copy": copy}


@pytest.mark.parametrize(("args", "message"), [
    (["run", "{model}", "--inputs", "{inputs}", "--output", "{inputs}"],
     "cannot write the outputs to {inputs}: it is the --inputs file"),
    (["compile", "{model}", "-o", "{tmp}/out.onnx", "--inputs", "{inputs}",
      "--report", "{inputs}"],
     "cannot write the report to {inputs}: it is the --inputs file"),
    (["compile", "{model}", "-o", "{plugin}", "--pass-path", "{plugin}"],
     "cannot write the output model to {plugin}: it is the pass plugin {plugin}"),
    (["compile", "{model}", "-o", "{tmp}/out.onnx", "--pass-path", "{tmp}",
      "--html", "{plugin}"],
     "cannot write the HTML page to {plugin}: it is the pass plugin {plugin}"),
    (["compile", "{model}", "-o", "{tmp}/out.onnx", "--external-data",
      "--report", "{tmp}/out.onnx.data"],
     "cannot write the report to {tmp}/out.onnx.data: it is the output model's external "
     "data file"),
    (["diff", "{model}", "{copy}", "--html", "{copy}"],
     "cannot write the HTML page to {copy}: it is model B"),
])
def test_an_output_naming_a_file_the_command_reads_is_refused(
        tmp_path: Path, files: dict[str, Path], args: list[str], message: str) -> None:
    names = {"model": str(DISTILBERT), "tmp": str(tmp_path), **{k: str(v) for k, v in
                                                                files.items()}}
    before = {name: _digest(path) for name, path in files.items()}
    listed = sorted(p.name for p in tmp_path.iterdir())
    code, out, _ = run_ge(*[a.format(**names) for a in args], "--json")
    assert code == 1
    payload = json.loads(out)
    assert payload["code"] == "GE1701" and payload["message"] == message.format(**names)
    assert {name: _digest(path) for name, path in files.items()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == listed  # nothing written


CHDIR_PLUGIN = '''\
import os
import tempfile

os.chdir(tempfile.gettempdir())  # a plugin that moves the process at import

from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="Wanders", stage=PassStage.AFTER_INFER_SHAPE)
class Wanders(FusionBasePass):
    def run(self, graph, context):
        from ge.passes import NOT_CHANGED

        return NOT_CHANGED
'''


def test_a_plugin_changing_the_working_directory_does_not_move_the_outputs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "work" / "out").mkdir(parents=True)
    (tmp_path / "work" / "wanders.py").write_text(CHDIR_PLUGIN)
    monkeypatch.chdir(tmp_path / "work")
    code, _, err = run_ge("compile", str(DISTILBERT), "-o", "out/m.onnx", "--pass-path",
                          "wanders.py", "--report", "out/r.json", "--dump", "out/dumps")
    assert code == 0, err
    assert Path.cwd() == tmp_path / "work"
    assert {p.name for p in (tmp_path / "work" / "out").iterdir()} == {"m.onnx", "r.json",
                                                                       "dumps"}
    assert "ge: warning: a pass plugin changed the working directory" in err
