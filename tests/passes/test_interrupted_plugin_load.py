"""A Ctrl-C (or an exception a signal handler raises: a service's timeout) while a
compilation loads its plugins leaves nothing of the import behind (trial R): the plugin's
modules stayed in `sys.modules` when it came after the import and before the plugin was
published (the files' digests), and every later load took them for modules the user had
imported, so an edit of the plugin was ignored, or its helper made a false E13029; and the
plugins published before an interrupt between two of them stayed loaded for good."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest

import ge
import ge.passes.loader as loader
from ge.passes.plugin_cache import CACHE
from sample_models import relu_model

PASS = """
from ge.passes import FusionBasePass, PassStage, register_fusion_pass
from _interrupted_common import NOT_CHANGED


@register_fusion_pass(name="{name}", stage=PassStage.AFTER_INFER_SHAPE)
class Tagger(FusionBasePass):
    def run(self, graph, context):
        return NOT_CHANGED
"""
COMMON = "NOT_CHANGED = 1  # (GE's status for a pass that changed nothing)\n"
FIRST = PASS.format(name="LoadedFirst").replace("class Tagger", "class First")


def _model(path: Path) -> Path:
    onnx.save(relu_model(), path)
    return path


def _folder(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / "plugins"
    folder.mkdir(exist_ok=True)
    (folder / "_interrupted_common.py").write_text(COMMON)
    (folder / "a_first.py").write_text(textwrap.dedent(FIRST))  # (loaded before tagger.py)
    (folder / "tagger.py").write_text(textwrap.dedent(PASS.format(name=name)))
    return folder


def _plugin_modules(folder: Path) -> list[str]:
    return sorted(name for name, module in list(sys.modules.items())
                  if str(getattr(module, "__file__", "") or "").startswith(str(folder)))


def _ran(result: ge.CompileResult) -> set[str]:
    return {record.pass_name for record in result.report.records}


def _interrupt_call(monkeypatch: pytest.MonkeyPatch, target: object, name: str,
                    call: int) -> None:
    """Ctrl-C at the `call`-th call of `target.name` (1: the first)."""
    real = getattr(target, name)
    calls = [0]

    def interrupted(*args: object, **kwargs: object) -> object:
        calls[0] += 1
        if calls[0] == call:
            monkeypatch.setattr(target, name, real)
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(target, name, interrupted)


@pytest.mark.parametrize("where", ["digesting the first plugin's files",
                                   "digesting the second plugin's files",
                                   "publishing the first plugin",
                                   "publishing the second plugin"])
def test_an_interrupted_load_leaves_no_module_and_the_next_load_sees_an_edit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    model = _model(tmp_path / "m.onnx")
    folder = _folder(tmp_path, "TagBefore")
    assert "TagBefore" in _ran(ge.compile(model, pass_paths=[folder]))
    assert _plugin_modules(folder) == []  # (unloaded after the compilation)
    call = 1 if "first" in where else 2  # (the second: the first plugin is published)
    if where.startswith("digesting"):
        _interrupt_call(monkeypatch, loader, "source_stamps", call)
    else:
        _interrupt_call(monkeypatch, CACHE, "publish", call)
    with pytest.raises(KeyboardInterrupt):
        ge.compile(model, pass_paths=[folder])
    assert _plugin_modules(folder) == []  # the plugins and their helper were left imported

    (folder / "tagger.py").write_text(textwrap.dedent(PASS.format(name="TagAfter")))
    result = ge.compile(model, pass_paths=[folder])  # E13029 on the helper, or the old pass
    assert {"TagAfter", "LoadedFirst"} <= _ran(result) and "TagBefore" not in _ran(result)
    assert np.array_equal(
        ge.session.run_model(result.graph, {"x": np.array([-1, 2], np.float32)})["y"],
        np.array([0, 2], np.float32))
