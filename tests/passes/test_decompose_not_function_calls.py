"""A decompose pass naming an operator without a domain (`op_types=["Scale"]`: a custom
operator wherever the model puts it) leaves alone the calls of a function of that name that
the model defines (onnxscript writes `this.Scale`); naming the function's domain
(`this.Scale`) takes them (trial N: the plugin's decomposition rewrote the model's calls,
and the model written computed something else)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import ge

PLUGIN = '''
from ge.es import GraphBuilder
from ge.es.all import Add
from ge.passes import DecomposePass, PassStage, register_decompose_pass

@register_decompose_pass(name="DoubleScale", stage=PassStage.AFTER_INFER_SHAPE,
                         op_types=[{op_type!r}])
class DoubleScale(DecomposePass):
    def replacement(self, node):
        builder = GraphBuilder("double")
        (x,) = builder.create_inputs(1)
        return builder.build_and_reset([Add(x, x)])
'''


def _model() -> onnx.ModelProto:
    """y = this.Scale(x), Scale(X) = X * 0.5, a model-local function."""
    half = helper.make_node("Constant", [], ["h"], value_float=0.5)
    scale = helper.make_function("this", "Scale", ["X"], ["Y"],
                                 [half, helper.make_node("Mul", ["X", "h"], ["Y"])],
                                 [helper.make_opsetid("", 18)])
    graph = helper.make_graph(
        [helper.make_node("Scale", ["x"], ["y"], domain="this", name="call")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    return helper.make_model(graph, functions=[scale], opset_imports=[
        helper.make_opsetid("", 18), helper.make_opsetid("this", 1)])


@pytest.mark.parametrize(("op_type", "rewritten"), [("Scale", False), ("this.Scale", True)])
def test_only_a_domain_given_names_a_functions_calls(op_type: str, rewritten: bool,
                                                     tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(PLUGIN.format(op_type=op_type))
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(_model(), source)
    result = ge.compile(source, pass_paths=[plugin])
    result.save(out)
    (record,) = [r for r in result.report.records if r.pass_name == "DoubleScale"]
    assert record.rewrites == (1 if rewritten else 0)
    x = np.array([1.0, -2.0, 4.0], np.float32)
    (y,) = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})
    np.testing.assert_allclose(y, x * 2 if rewritten else x * 0.5)
