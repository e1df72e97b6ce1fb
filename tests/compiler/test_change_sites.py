"""The E13028 of a graph a FusionBasePass's `run()` left invalid points at the line of
`run()` that last changed the node the check names (`ge.compiler.change_sites`), told apart
by the node itself where two bodies each hold a node of that name, and names the body by
the node and attribute holding it (trial R)."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

import ge
from ge.errors import PassRunError

BREAKS_ONE_BODY = """\
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="BreaksOneBody", stage=PassStage.AFTER_INFER_SHAPE)
class BreaksOneBody(FusionBasePass):
    def run(self, graph, context):
        if graph.parent_node is not None:
            return True
        then_branch, else_branch = graph.nodes_of_type("If")[0].get_subgraphs()
        broken = else_branch.find_node_by_name("n1")
        src, index = broken.get_in_data_nodes_and_port_indexes(0)
        else_branch.remove_edge(src, index, broken, 0)
        fine = then_branch.find_node_by_name("n1")
        src, index = fine.get_in_data_nodes_and_port_indexes(0)
        then_branch.remove_edge(src, index, fine, 0)
        then_branch.add_data_edge(src, index, fine, 0)
        return True
"""


def _if_model() -> onnx.ModelProto:
    """y = If(c, then: Neg(Relu(x)), else: Neg(Sigmoid(x))): both bodies `sub_graph`,
    both with nodes `n1` and `n2`."""
    vi = helper.make_tensor_value_info

    def body(tag: str, op: str) -> onnx.GraphProto:
        return helper.make_graph(
            [helper.make_node(op, ["x"], [f"t_{tag}"], name="n1"),
             helper.make_node("Neg", [f"t_{tag}"], [f"o_{tag}"], name="n2")],
            "sub_graph", [], [vi(f"o_{tag}", TensorProto.FLOAT, [2, 4])])

    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], name="if", then_branch=body("then", "Relu"),
                          else_branch=body("else", "Sigmoid"))], "g",
        [vi("x", TensorProto.FLOAT, [2, 4]), vi("c", TensorProto.BOOL, [])],
        [vi("y", TensorProto.FLOAT, [2, 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_the_line_that_broke_the_node_not_one_of_a_node_of_its_name(tmp_path: Path) -> None:
    plugin = tmp_path / "breaks_one_body.py"
    plugin.write_text(BREAKS_ONE_BODY)
    with pytest.raises(PassRunError) as caught:
        ge.compile(_if_model(), pass_paths=[plugin])
    err = caught.value
    assert ("required input 0 (X) of Sigmoid node 'n1' is not connected (graph sub_graph, "
            "else_branch of If node 'if')") in err.message  # (which body: both are sub_graph)
    assert str(err.location) == f"{plugin}:12"  # the remove_edge in the else branch
