"""The README's pass example works as printed: a user copying it gets what it promises."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort

import ge.graph
from ge.compiler import compile_graph
from plugin_fixtures import clean_plugin_state  # noqa: F401  (no plugin outlives the test)
from sample_models import double_negation_model, readme_pass_source


def test_the_readme_pass_folds_double_negation(tmp_path: Path) -> None:
    (tmp_path / "fold_double_neg.py").write_text(readme_pass_source())
    graph = ge.graph.load(double_negation_model())
    report = compile_graph(graph, pass_paths=[tmp_path])
    assert report.passes_that_changed() == ["FoldDoubleNeg"]
    assert [n.type for n in graph.get_direct_nodes()] == ["Data", "Relu", "NetOutput"]
    x = np.array([-1.0, 0.5, 2.0], dtype=np.float32)
    session = ort.InferenceSession(graph.to_onnx().SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(["y"], {"x": x})[0], np.maximum(x, 0))
