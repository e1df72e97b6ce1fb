"""Verification of a model whose custom operator a pass plugin registers: the plugins of
the compilation are loaded before the original model is run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
from ge.errors import CompilerOptionError
from ge.graph import load

P5 = Path(__file__).resolve().parents[2] / "examples" / "passes" / "p5_custom_op_zero.py"


def _add_custom_model() -> onnx.ModelProto:
    """out = AddCustom(AddCustom(x, Identity(zeros)), y), AddCustom in domain ge.examples."""
    nodes = [helper.make_node("Identity", ["zero"], ["i1"]),
             helper.make_node("AddCustom", ["x", "i1"], ["a1"], domain="ge.examples"),
             helper.make_node("AddCustom", ["a1", "y"], ["out"], domain="ge.examples")]
    values = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in "xy"]
    graph = helper.make_graph(nodes, "g", values,
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 3])],
                              [numpy_helper.from_array(np.zeros((2, 3), np.float32), "zero")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("ge.examples", 1)])


@pytest.mark.parametrize("verify", ["final", "each-pass"])
def test_a_custom_operator_of_a_pass_path_plugin_is_verified(verify: str) -> None:
    result = ge.compile(_add_custom_model(), pass_paths=[P5], verify=verify)
    assert result.verification is not None and result.verification.ok
    assert result.report.rewrites_by_pass().get("PythonAddCustomZeroPass", 0) >= 1


def test_compile_graph_takes_passes_or_options_not_both() -> None:
    from ge.compiler.engine import compilation_passes, compile_graph

    graph = load(_add_custom_model())
    with compilation_passes(None, [P5]) as passes, pytest.raises(CompilerOptionError) as info:
        compile_graph(graph, passes=passes, options={"a": "b"})
    assert info.value.code == "GE1202"
    assert "either passes= or options and pass_paths" in info.value.message
