"""A built-in fusion that replaces what a plugin pass made (a decomposition put back
together) is reported: the plugin's author learns why the work vanished and where the pass
belongs, instead of a compilation that silently undoes it."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ge
from ge.errors import CompileWarning

DECOMPOSE = '''\
import ge.es.all as es
from ge.es import GraphBuilder
from ge.passes import DecomposePass, infer_shape, register_decompose_pass


@register_decompose_pass(name="DecomposeLayerNorm", stage="{stage}",
                         op_types=["LayerNormalization"])
class DecomposeLayerNorm(DecomposePass):
    def replacement(self, node):
        b = GraphBuilder("ln")
        x, scale, bias = b.create_inputs(3)
        d = x - es.ReduceMean(x, axes=[-1], keepdims=1)
        var = es.ReduceMean(es.Pow(d, 2.0), axes=[-1], keepdims=1)
        y = d / es.Sqrt(var + 1e-5) * scale + bias
        g = b.build_and_reset([y])
        infer_shape(g, node)
        return g
'''


def _layer_norm_model(path: Path) -> None:
    rng = np.random.default_rng(0)
    inits = [helper.make_tensor("g", TensorProto.FLOAT, [8], rng.random(8).tolist()),
             helper.make_tensor("b", TensorProto.FLOAT, [8], rng.random(8).tolist())]
    graph = helper.make_graph(
        [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], name="ln")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


@pytest.mark.builtin_passes
def test_a_decomposition_a_builtin_fusion_puts_back_is_reported(tmp_path: Path) -> None:
    model = tmp_path / "ln.onnx"
    _layer_norm_model(model)
    early = tmp_path / "early.py"
    early.write_text(DECOMPOSE.format(stage="AfterInferShape"))
    with pytest.warns(CompileWarning) as caught:
        result = ge.compile(model, pass_paths=[early], verify=True)
    (warning,) = [w for w in caught if "its work was undone" in str(w.message)]
    assert str(warning.message) == (
        "built-in LayerNormFusion replaced 11 node(s) that pass DecomposeLayerNorm made at "
        "AfterInferShape: its work was undone. A pass whose result must stay (a "
        "decomposition for a backend lacking an operator) belongs at "
        "AfterOriginGraphOptimize, after the built-in passes; or disable LayerNormFusion "
        "(--disable LayerNormFusion)")
    assert [n.type for n in result.graph.get_direct_nodes()
            if n.type not in ("Data", "Const", "NetOutput")] == ["LayerNormalization"]

    # Where it belongs: kept, and nothing to say.
    late = tmp_path / "late.py"
    late.write_text(DECOMPOSE.format(stage="AfterOriginGraphOptimize"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        result = ge.compile(model, pass_paths=[late], verify=True)
    assert "LayerNormalization" not in {n.type for n in result.graph.get_direct_nodes()}


SLICES = '''\
import ge.es.all as es
from ge.es import GraphBuilder
from ge.passes import DecomposePass, register_decompose_pass


@register_decompose_pass(name="SplitToSlices", stage="AfterInferShape", op_types=["Split"])
class SplitToSlices(DecomposePass):
    def replacement(self, node):
        b = GraphBuilder("slices")
        (x,) = b.create_inputs(1)
        return b.build_and_reset([es.Slice(x, [2 * i], [2 * i + 2], [0]) for i in range(3)])
'''

IDENTITY = '''\
import ge.es.all as es
from ge.es import GraphBuilder
from ge.passes import DecomposePass, register_decompose_pass


@register_decompose_pass(name="ReluThroughIdentity", stage="AfterInferShape",
                         op_types=["Relu"])
class ReluThroughIdentity(DecomposePass):
    def replacement(self, node):
        b = GraphBuilder("relu")
        (x,) = b.create_inputs(1)
        return b.build_and_reset([es.Identity(es.Relu(x))])
'''


@pytest.mark.builtin_passes
def test_a_fusion_written_as_a_graph_walk_undoing_a_plugin_is_reported(tmp_path: Path) -> None:
    """Trial G: SliceSplitFusion (a FusionBasePass, not a pattern pass) put a plugin's
    Slices back into a Split and nothing said so."""
    graph = helper.make_graph(
        [helper.make_node("Split", ["x"], ["a", "b", "c"], name="split", axis=0,
                          num_outputs=3)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in "abc"])
    model = tmp_path / "split.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), model)
    plugin = tmp_path / "slices.py"
    plugin.write_text(SLICES)
    with pytest.warns(CompileWarning) as caught:
        result = ge.compile(model, pass_paths=[plugin], verify=True)
    (warning,) = [w for w in caught if "its work was undone" in str(w.message)]
    assert str(warning.message).startswith(
        "built-in SliceSplitFusion replaced 3 node(s) that pass SplitToSlices made at "
        "AfterInferShape: its work was undone.")
    assert result.report.rewrites_by_pass().get("SplitToSlices") == 1


@pytest.mark.builtin_passes
def test_cleaning_up_after_a_plugin_is_not_undoing_it(tmp_path: Path) -> None:
    """A built-in that only removes what a plugin made (the Identity it left, by
    NoOpElimination) says nothing: the plugin's Relu stays."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Neg", ["r"], ["y"], name="neg")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    model = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    plugin = tmp_path / "identity.py"
    plugin.write_text(IDENTITY)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        result = ge.compile(model, pass_paths=[plugin], verify=True)
    assert result.report.rewrites_by_pass().get("ReluThroughIdentity") == 1
    assert [n.type for n in result.graph.get_direct_nodes()
            if n.type not in ("Data", "Const", "NetOutput")] == ["Relu", "Neg"]
