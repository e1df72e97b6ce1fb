"""Compiling a model read from a file does not import onnxruntime: the import and the scan
of its operator schemas cost ~60 ms, more than compiling a 75-node model takes. The model
file names its own IR version and opsets, so nothing asks which the runtime reads; only a
model made in memory, a node of a non-ONNX domain, verification or a run does."""

from __future__ import annotations

import subprocess
import sys

import pytest

from model_paths import shared_models_dir

PROBE = """
import sys, ge
ge.compile(sys.argv[1]).save(sys.argv[2])
print("onnxruntime" in sys.modules)
"""


@pytest.mark.builtin_passes
def test_a_compilation_of_a_file_does_not_import_onnxruntime(tmp_path) -> None:
    model = shared_models_dir() / "distilbert_tiny_dynamo.onnx"
    out = subprocess.run([sys.executable, "-c", PROBE, str(model), str(tmp_path / "o.onnx")],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    assert (tmp_path / "o.onnx").stat().st_size > 0


def test_a_graph_made_in_memory_still_gets_what_the_runtime_reads() -> None:
    from ge._compat import new_model_ir_version, new_model_opset
    from ge.graph import Graph

    graph = Graph("g")
    assert graph.model.ir_version == new_model_ir_version()
    assert graph.model.opset_imports == {"": new_model_opset()}
