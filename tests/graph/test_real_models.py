"""The real models exported from PyTorch (tests/models, see conftest.py) round-trip
through `ge.graph`: they load, validate, export byte-identical, save and reload, and the saved
file computes exactly what the original computes in onnxruntime."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from model_corpus import assert_same_outputs, run_onnxruntime

import ge.graph


def _sidecar_feeds(spec: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Inputs following the model's sidecar JSON: float tensors random; int64 token ids small
    (0..99, inside every vocabulary here); attention masks all ones; a scalar int64 (the
    control-flow model's trip count) a small loop count."""
    feeds = {}
    for item in spec["inputs"]:
        shape, dtype = item["shape"], np.dtype(item["dtype"])
        if dtype.kind == "f":
            feeds[item["name"]] = rng.standard_normal(shape).astype(dtype)
        elif item["name"] == "attention_mask":
            feeds[item["name"]] = np.ones(shape, dtype)
        elif not shape:
            feeds[item["name"]] = np.array(rng.integers(1, 6), dtype)
        else:
            feeds[item["name"]] = rng.integers(0, 100, shape).astype(dtype)
    return feeds


def test_real_model_round_trip(shared_models: Path, shared_model: str, tmp_path: Path) -> None:
    """Load, validate, to_onnx byte-identical to the file, save and reload byte-identical,
    and identical onnxruntime outputs (float inputs also negated, so the control-flow model
    takes both If branches)."""
    source = shared_models / f"{shared_model}.onnx"
    spec = json.loads((shared_models / f"{shared_model}.json").read_text())
    original = source.read_bytes()

    graph = ge.graph.load(source)
    graph.validate()
    assert graph.to_onnx().SerializeToString() == original

    saved = tmp_path / source.name
    graph.save(saved)
    assert sorted(p.name for p in tmp_path.iterdir()) == [source.name]
    assert saved.read_bytes() == original
    reloaded = ge.graph.load(saved)
    reloaded.validate()
    assert reloaded.to_onnx().SerializeToString() == original

    model = onnx.load(source)
    assert [vi.name for vi in model.graph.input] == [i["name"] for i in spec["inputs"]]
    feeds = _sidecar_feeds(spec, np.random.default_rng(0))
    negated = {k: -v if v.dtype.kind == "f" else v for k, v in feeds.items()}
    for inputs in (feeds, negated):
        assert_same_outputs(run_onnxruntime(saved, inputs), run_onnxruntime(source, inputs))
