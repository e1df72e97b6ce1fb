"""Every vendored real model compiles with the built-in passes, verifies equal in
onnxruntime, is not larger than its input, and loses what there is to fold."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

import ge
from model_paths import all_shared_models, shared_model

pytestmark = pytest.mark.builtin_passes  # these tests are about the built-in passes

MODELS = all_shared_models()


def _sidecar_ops(path: Path) -> dict[str, int]:
    data = json.loads(path.with_suffix(".json").read_text())
    return data.get("op_histogram") or data.get("ops") or {}


@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_every_vendored_model_compiles_verifies_and_does_not_grow(path: Path,
                                                                  tmp_path: Path) -> None:
    result = ge.compile(path, verify=True)
    assert result.verification is not None and result.verification.ok, \
        result.verification.summary() if result.verification else None
    out = tmp_path / path.name
    result.save(out)
    onnx.checker.check_model(onnx.load(out), full_check=True)
    assert out.stat().st_size <= path.stat().st_size
    before, after = result.report.ops_before, result.report.ops_after
    assert sum(after.values()) <= sum(before.values())
    original = onnx.load(path)
    assert [o.name for o in onnx.load(out).graph.output] == [o.name for o in original.graph.output]
    assert result.report.fixed_point is not None and result.report.fixed_point.converged
    # compiling ge's own output changes nothing, to the byte (a pipeline runs ge twice)
    assert ge.compile(out).to_onnx().SerializeToString() == onnx.load(out).SerializeToString()


@pytest.mark.parametrize("name", ["vit_tiny", "distilbert_tiny", "t5_encoder_tiny"])
def test_torchscript_exports_lose_their_identities(name: str) -> None:
    result = ge.compile(shared_model(name))
    assert result.report.ops_before.get("Identity", 0) > 0
    assert result.report.ops_after.get("Identity", 0) == 0
    assert "NoOpElimination" in result.report.passes_that_changed()


def test_the_dynamo_export_loses_its_constant_subgraphs() -> None:
    result = ge.compile(shared_model("distilbert_tiny_dynamo"), verify=True)
    before, after = result.report.ops_before, result.report.ops_after
    assert sum(after.values()) < sum(before.values())
    changed = result.report.passes_that_changed()
    assert "ConstantFolding" in changed or "DeadCodeElimination" in changed
