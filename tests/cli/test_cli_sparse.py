"""The `ge` commands on models with sparse initializers: `ge compile --opset` converts them
(onnx's converter knows none), `ge inspect` counts them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_helpers import run_ge

from sparse_models import dense_with_zeros, node, run_ort, sparse, sparse_model, vi


def _add_sparse(path: Path) -> onnx.ModelProto:
    """y = x + s, s a sparse initializer of float [2, 3], saved at `path`."""
    model = sparse_model([node("Add", ["x", "s"], ["y"], name="add")], [vi("x", [2, 3])],
                         [vi("y", [2, 3])], [sparse("s", dense_with_zeros((2, 3)))])
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
