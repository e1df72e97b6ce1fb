"""The pass examples of README.md and docs/passes.md work as printed: each block headed
`# my_passes/<file>.py` is written to a plugin folder and compiled on a model built for it,
and the rewrite it promises happens with onnxruntime's outputs unchanged."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge.graph
from ge.compiler import compile_graph
from plugin_fixtures import clean_plugin_state  # noqa: F401  (no plugin outlives the test)

ROOT = Path(__file__).resolve().parents[1]


def _blocks() -> dict[str, str]:
    found: dict[str, str] = {}
    for doc in (ROOT / "README.md", ROOT / "docs" / "passes.md"):
        for name, body in re.findall(r"```python\n# my_passes/(\w+\.py)\n(.*?)```",
                                     doc.read_text(), re.S):
            found[name] = body
    return found


def _model(nodes, initializers, opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [numpy_helper.from_array(np.asarray(v, dtype=np.float32), k)
         for k, v in initializers.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


MATMUL_ADD = _model([helper.make_node("MatMul", ["x", "w"], ["m"]),
                     helper.make_node("Add", ["m", "b"], ["y"])],
                    {"w": np.eye(4) * 3, "b": [1, 2, 3, 4]})
CASES = {
    "fold_double_neg.py": (_model([helper.make_node("Neg", ["x"], ["n"]),
                                   helper.make_node("Neg", ["n"], ["y"])], {}), "Neg", None),
    "fuse_matmul_add.py": (MATMUL_ADD, "MatMul", "Gemm"),
    "fuse_matmul_add_legacy.py": (MATMUL_ADD, "MatMul", "Gemm"),
    # with_bias on the first MatMul (and its Add), without_bias on the second
    "matmul_to_gemm.py": (_model([helper.make_node("MatMul", ["x", "w"], ["m"]),
                                  helper.make_node("Add", ["m", "b"], ["a"]),
                                  helper.make_node("MatMul", ["a", "v"], ["y"])],
                                 {"w": np.eye(4) * 3, "b": [1, 2, 3, 4], "v": np.eye(4) / 2}),
                          "MatMul", "Gemm"),
    "add_zero.py": (_model([helper.make_node("Add", ["x", "zero"], ["y"])], {"zero": 0.0}),
                    "Add", None),
    "expand_square.py": (_model([helper.make_node("Pow", ["x", "two"], ["y"])], {"two": 2.0}),
                         "Pow", "Mul"),
    # scale and bias are one tensor: two replacement inputs for three node inputs
    "decompose_layer_norm.py": (_model([helper.make_node("LayerNormalization",
                                                         ["x", "s", "s"], ["y"])],
                                       {"s": [0.5, -1.0, 2.0, 1.5]}),
                                "LayerNormalization", "ReduceMean"),
    # the erf Gelu (Gelu is standard from opset 20)
    "gelu.py": (_model([helper.make_node("Gelu", ["x"], ["y"], approximate="none")], {},
                       opset=20), "Gelu", "Erf"),
}


def outputs_equal(before: onnx.ModelProto, after: onnx.ModelProto) -> bool:
    onnx.checker.check_model(after, full_check=True)
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    runs = [ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
            .run(["y"], {"x": x})[0] for m in (before, after)]
    return bool(np.allclose(runs[0], runs[1], rtol=1e-5, atol=1e-5))


def test_every_documented_pass_has_a_case() -> None:
    assert set(_blocks()) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_documented_pass_does_what_it_says(tmp_path: Path, name: str) -> None:
    proto, gone, made = CASES[name]
    (tmp_path / name).write_text(_blocks()[name])
    graph = ge.graph.load(proto)
    report = compile_graph(graph, pass_paths=[tmp_path / name])
    assert report.passes_that_changed(), [r.outcome for r in report.records]
    types = [n.type for n in graph.get_direct_nodes()]
    assert gone not in types
    if made is not None:
        assert made in types
    assert outputs_equal(proto, graph.to_onnx())
