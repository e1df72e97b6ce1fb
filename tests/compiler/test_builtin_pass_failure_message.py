"""A built-in pass that fails says so, and how to compile without it.

GE's E13028 text ("Failed to run custom fusion pass X") is about a plugin's pass; trials O
and E met it for ge's own NoOpElimination, which pointed at ge's source and said nothing of
the way around (`disable=`, `on_pass_failure="skip"`).
"""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

import ge
from ge.compiler.builtin import NoOpElimination
from ge.errors import PassRunError

pytestmark = pytest.mark.builtin_passes


def _model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_failing_builtin_pass_is_called_built_in_and_says_how_to_go_on(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def broken(self: NoOpElimination, graph: object, context: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(NoOpElimination, "run", broken)
    source = tmp_path / "model.onnx"
    onnx.save(_model(), source)
    with pytest.raises(PassRunError) as caught:
        ge.compile(source)
    error = caught.value
    assert error.code == "E13028" and error.pass_name == "NoOpElimination"
    assert error.message.startswith(
        "Failed to run built-in pass NoOpElimination. Return code: FAILED. "
        "Reason: RuntimeError: boom. This is a bug in ge: please report it with the model; "
        "disable='NoOpElimination' (--disable NoOpElimination) or on_pass_failure='skip' "
        "(--on-pass-failure skip) compiles without it.")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]  # nothing written
    # the advice works
    result = ge.compile(_model(), disable=["NoOpElimination"])
    assert "Identity" in result.report.ops_after
    with pytest.warns(UserWarning):
        skipped = ge.compile(_model(), on_pass_failure="skip")
    assert "Identity" in skipped.report.ops_after


BREAK_RESHAPE = """\
import numpy as np
from ge.graph import Tensor
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="BreakReshape", stage=PassStage.AFTER_INFER_SHAPE)
class BreakReshape(FusionBasePass):
    def run(self, graph, context):
        graph.find_node_by_name("shape").set_attr("value", Tensor(np.array([5], np.int64)))
"""


@pytest.mark.builtin_passes
def test_a_stale_shape_a_plugin_left_further_on_is_not_called_a_bug_in_ge(
        tmp_path: Path) -> None:
    """Trial S: a plugin changed a Reshape's shape constant three nodes upstream (through
    Identity, Identity, Abs), beyond the check after it; ConstantFolding's check then found
    the Reshape stale and the error said "This is a bug in ge". It names the plugin."""
    import numpy as np
    from onnx import numpy_helper

    nodes = [helper.make_node("Identity", ["shape"], ["s1"], name="id1"),
             helper.make_node("Identity", ["s1"], ["s2"], name="id2"),
             helper.make_node("Abs", ["s2"], ["s3"], name="abs"),
             helper.make_node("Reshape", ["x", "s3"], ["y"], name="reshape")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6])],
                              [numpy_helper.from_array(np.array([6], np.int64), "shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    plugin = tmp_path / "break_reshape.py"
    plugin.write_text(BREAK_RESHAPE)
    with pytest.raises(PassRunError) as caught:
        ge.compile(model, pass_paths=[plugin])
    err = caught.value
    assert err.pass_name == "ConstantFolding" and "bug in ge" not in err.message
    assert ("A plugin pass before it may have left the graph so; node 'reshape' depends on "
            "node 'shape', 4 nodes upstream, last changed by pass BreakReshape "
            "(AfterInferShape)") in err.message
