"""The README's pass example works as printed: a user copying it gets what it promises."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

import ge.graph
from ge.compiler import compile_graph
from plugin_fixtures import clean_plugin_state  # noqa: F401  (no plugin outlives the test)

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_pass_folds_double_negation(tmp_path: Path) -> None:
    source = re.search(r"# my_passes/fold_double_neg.py\n(.*?)```", README.read_text(), re.S)
    assert source is not None, "the README lost its pass example"
    (tmp_path / "fold_double_neg.py").write_text(source.group(1))
    graph_proto = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["a"], name="n1"),
         helper.make_node("Neg", ["a"], ["b"], name="n2"),
         helper.make_node("Relu", ["b"], ["y"], name="relu")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    model = helper.make_model(graph_proto, opset_imports=[helper.make_opsetid("", 17)])
    graph = ge.graph.load(model)
    report = compile_graph(graph, pass_paths=[tmp_path])
    assert report.passes_that_changed() == ["FoldDoubleNeg"]
    assert [n.type for n in graph.get_direct_nodes()] == ["Data", "Relu", "NetOutput"]
    x = np.array([-1.0, 0.5, 2.0], dtype=np.float32)
    session = ort.InferenceSession(graph.to_onnx().SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(["y"], {"x": x})[0], np.maximum(x, 0))
