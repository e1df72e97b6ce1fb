"""What a compilation says of a pass's run on a body names the body by the node holding it:
exporters (torch) name both branches of every If `body`, so "graph body" said nothing of
which one (tests/graph/test_error_places.py has the model's own errors)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh

import ge
from ge.errors import PassDefinitionWarning, VerificationError

#: Neg -> Relu wherever there is one (only the then-branch has one); `{returned}` from run()
NEG_TO_RELU = """
from ge.passes import NOT_CHANGED, FusionBasePass, PassStage, register_fusion_pass

@register_fusion_pass(name="NegToRelu", stage=PassStage.AFTER_INFER_SHAPE)
class NegToRelu(FusionBasePass):
    def run(self, graph, context):
        for neg in graph.nodes_of_type("Neg"):
            relu = graph.add_node("Relu", num_inputs=1, name="relu_" + neg.name)
            graph.add_data_edge(*neg.get_in_data_nodes_and_port_indexes(0), relu, 0)
            graph.replace_all_uses(neg, 0, relu, 0)
            graph.remove_node(neg)
        return {returned}
"""


def _model() -> onnx.ModelProto:
    """y = If(c, then: Neg(x), else: Identity(x)), both branches named `body`."""
    def body(op: str, out: str) -> onnx.GraphProto:
        return oh.make_graph([oh.make_node(op, ["x"], [out], name=f"{out}_{op.lower()}")],
                             "body", [], [oh.make_tensor_value_info(out, TP.FLOAT, [4])])

    node = oh.make_node("If", ["c"], ["y"], name="cond_if", then_branch=body("Neg", "t"),
                        else_branch=body("Identity", "e"))
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", TP.FLOAT, [4]),
                                        oh.make_tensor_value_info("c", TP.BOOL, [])],
                          [oh.make_tensor_value_info("y", TP.FLOAT, [4])])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def _plugin(tmp_path: Path, returned: str) -> Path:
    path = tmp_path / "neg_to_relu.py"
    path.write_text(NEG_TO_RELU.format(returned=returned))
    return path


def test_each_pass_verification_names_the_body_a_pass_broke(tmp_path: Path) -> None:
    inputs = {"x": np.array([-1, 2, -3, 4], np.float32), "c": np.array(True)}
    with pytest.raises(VerificationError) as caught:
        ge.compile(_model(), pass_paths=[_plugin(tmp_path, "True")], verify="each-pass",
                   inputs=inputs)
    assert caught.value.code == "GE1603" and caught.value.pass_name == "NegToRelu"
    assert caught.value.message.startswith(
        "the outputs differ from the original's after pass NegToRelu (graph body, "
        "then_branch of If node 'cond_if'): ")


def test_a_run_returning_not_changed_names_the_body_it_changed(tmp_path: Path) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ge.compile(_model(), pass_paths=[_plugin(tmp_path, "NOT_CHANGED")])
    told = [str(w.message) for w in caught if w.category is PassDefinitionWarning]
    assert len(told) == 1 and told[0].startswith(
        "pass NegToRelu returned NOT_CHANGED from run() but changed graph 'body', "
        "then_branch of If node 'cond_if' (nodes 1; ")


RAISES_ON_A_BODY = """
from ge.passes import FusionBasePass, PassStage, register_fusion_pass

@register_fusion_pass(name="RaisesOnABody", stage=PassStage.AFTER_INFER_SHAPE)
class RaisesOnABody(FusionBasePass):
    def run(self, graph, context):
        if graph.parent_graph is not None and graph.nodes_of_type("Neg"):
            raise ValueError("cannot handle this")
        return None
"""


def test_a_pass_raising_on_a_body_is_told_which_body(tmp_path: Path) -> None:
    """E13028 of a run on a body says which one (trial TT: only the exception was said)."""
    from ge.errors import PassRunError

    plugin = tmp_path / "raises.py"
    plugin.write_text(RAISES_ON_A_BODY)
    with pytest.raises(PassRunError) as caught:
        ge.compile(_model(), pass_paths=[plugin])
    assert caught.value.code == "E13028" and caught.value.pass_name == "RaisesOnABody"
    assert caught.value.message == (
        "Failed to run custom fusion pass RaisesOnABody. Return code: FAILED. Reason: "
        "ValueError: cannot handle this (in its run on graph 'body', then_branch of If node "
        "'cond_if').")
