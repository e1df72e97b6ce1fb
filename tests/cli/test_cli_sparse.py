"""The `ge` commands on models with sparse initializers: `ge compile --opset` converts them
(onnx's converter knows none), `ge inspect` counts them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_helpers import run_ge

from sparse_models import node, run_ort, sparse, sparse_model, vi


def _add_sparse(path: Path) -> onnx.ModelProto:
    """y = x + s, s a sparse initializer of float [2, 3] holding 3 values, saved at `path`."""
    value = np.array([[1.5, 0, 0], [0, 2, -2]], np.float32)
    model = sparse_model([node("Add", ["x", "s"], ["y"], name="add")], [vi("x", [2, 3])],
                         [vi("y", [2, 3])], [sparse("s", value)])
    onnx.save(model, path)
    return model


@pytest.mark.builtin_passes
def test_compile_converts_a_model_with_a_sparse_initializer(tmp_path: Path) -> None:
    """It was GE1203 "onnx's version converter cannot take graph 'g' from opset 17 to 20:
    Input s is undefined!"."""
    source, target = tmp_path / "m.onnx", tmp_path / "out.onnx"
    model = _add_sparse(source)
    code, stdout, stderr = run_ge("compile", str(source), "-o", str(target), "--opset", "20",
                                  "--verify", "-q")
    assert code == 0, stderr
    assert "verification ok" in stdout
    saved = onnx.load(target)
    assert [(o.domain, o.version) for o in saved.opset_import] == [("", 20)]
    assert [s.values.name for s in saved.graph.sparse_initializer] == ["s"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(run_ort(saved, {"x": x})[0], run_ort(model, {"x": x})[0])


def test_inspect_counts_sparse_initializers(tmp_path: Path) -> None:
    """A model whose only initializer is sparse showed "0 initializer(s), 0 B"."""
    path = tmp_path / "m.onnx"
    model = _add_sparse(path)
    stored = sum(len(t.raw_data) for s in model.graph.sparse_initializer
                 for t in (s.values, s.indices))
    assert stored == 3 * 4 + 3 * 8  # (three float values, their int64 indices)
    code, stdout, stderr = run_ge("inspect", str(path), "--json")
    assert code == 0, stderr
    data = json.loads(stdout)
    assert data["initializers"] == {"count": 0, "bytes": 0}
    assert data["sparse_initializers"] == {"count": 1, "bytes": stored, "values": 3,
                                           "elements": 6}
    assert data["constants"] == 1
    code, stdout, _ = run_ge("inspect", str(path))
    assert code == 0
    assert ("1 node(s); 0 initializer(s), 0 B; 1 sparse initializer(s), 36 B as stored "
            "(values and indices: 3 value(s) of 6 element(s))") in stdout


def test_inspect_says_nothing_of_sparse_initializers_a_model_has_none_of(
        tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(sparse_model([node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])]),
              path)
    code, stdout, _ = run_ge("inspect", str(path))
    assert code == 0 and "sparse" not in stdout
    data = json.loads(run_ge("inspect", str(path), "--json")[1])
    assert data["sparse_initializers"] == {"count": 0, "bytes": 0, "values": 0, "elements": 0}
