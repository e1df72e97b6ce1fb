"""A pass that breaks a graph's outputs is blamed (E13028, its name and file:line) when it
returns, in ge.compile and ge compile alike, and the caller's graph is given back unchanged:
an error-path audit found a removed NetOutput reported only by the final validation (GE1003,
no pass), and an output rewired to a value of another type or shape not caught at all (the
checker rejected the written model, blaming ge's own Identity)."""

from __future__ import annotations

from pathlib import Path

import pytest

import ge
import ge.graph
from ge.errors import PassRunError
from model_paths import shared_model

HEADER = "from ge.passes import FusionBasePass, PassStage, register_fusion_pass\n\n"

REMOVE_OUTPUT = HEADER + '''
@register_fusion_pass(name="RemoveOutput", stage=PassStage.AFTER_INFER_SHAPE)
class RemoveOutput(FusionBasePass):
    def run(self, graph, context):
        graph.remove_node(graph.get_net_output())
        return True
'''

# DistilBERT's output is float [1, 12, 48]: its int64 input_ids, or a Softmax [1, 3, 12, 12]
OUTPUT_TO = HEADER + '''
@register_fusion_pass(name="RewireOutput", stage=PassStage.AFTER_INFER_SHAPE)
class RewireOutput(FusionBasePass):
    def run(self, graph, context):
        out = graph.get_net_output()
        producer, index = out.get_in_data_nodes_and_port_indexes(0)
        new = {new}
        graph.remove_edge(producer, index, out, 0)
        graph.add_data_edge(new, 0, out, 0)
        return True
'''


@pytest.mark.parametrize(("source", "message"), [
    (REMOVE_OUTPUT, "graph 'main_graph' has 0 NetOutput nodes after the pass, not one: it "
                    "removed the node that gives the graph's outputs"),
    (OUTPUT_TO.format(new="graph.get_data_nodes()[0]"),
     "graph output 0 is declared DT_FLOAT but the pass made it read 'input_ids' of "
     "'input_ids', a DT_INT64"),
    (OUTPUT_TO.format(new="graph.nodes_of_type('Softmax')[0]"),
     "graph output 0 is declared [1, 12, 48] but the pass made it read"),
])
def test_a_pass_breaking_the_graph_outputs_is_blamed(tmp_path: Path, source: str,
                                                     message: str) -> None:
    plugin = tmp_path / "breaks_outputs.py"
    plugin.write_text(source)
    graph = ge.graph.load(shared_model("distilbert_tiny"))
    before = graph.to_onnx().SerializeToString()
    with pytest.raises(PassRunError) as info:
        ge.compile(graph, pass_paths=[plugin])
    err = info.value
    assert err.code == "E13028" and err.stage == "AfterInferShape"
    assert err.location is not None and err.location.file == str(plugin)
    assert message in err.message
    assert graph.to_onnx().SerializeToString() == before  # given back unchanged


MAKE_CYCLE = HEADER + '''
@register_fusion_pass(name="MakeCycle", stage=PassStage.AFTER_INFER_SHAPE)
class MakeCycle(FusionBasePass):
    def run(self, graph, context):
        first = graph.nodes_of_type("Add")[0]
        reader = first.get_out_data_nodes()[0]
        producer, index = first.get_in_data_nodes_and_port_indexes(0)
        graph.remove_edge(producer, index, first, 0)
        graph.add_data_edge(reader, 0, first, 0)
        return True
'''


@pytest.mark.builtin_passes  # (the built-in pass that meets the cycle)
def test_with_the_checks_off_a_built_in_failing_later_is_not_called_a_bug(
        tmp_path: Path) -> None:
    """check="none": the plugin's cycle is found by the next built-in pass, whose error
    said "This is a bug in ge" (audit); it says the checks were off instead."""
    plugin = tmp_path / "cycle.py"
    plugin.write_text(MAKE_CYCLE)
    with pytest.raises(PassRunError) as checked:
        ge.compile(shared_model("distilbert_tiny"), pass_paths=[plugin])
    assert checked.value.pass_name == "MakeCycle" and "cycle" in checked.value.message
    with pytest.raises(PassRunError) as unchecked:
        ge.compile(ge.graph.load(shared_model("distilbert_tiny")), pass_paths=[plugin],
                   check="none")
    message = unchecked.value.message
    assert "built-in pass" in message and "This is a bug in ge" not in message
    assert message.endswith("The checks after each pass were off (check='none', --check none), "
                            "so a pass that ran before it may have left the graph invalid: "
                            "compile with the checks on to find that pass.")


MERGE_TRANSPOSES = HEADER + '''import ge.ops


@register_fusion_pass(name="MergeTransposes", stage=PassStage.AFTER_INFER_SHAPE)
class MergeTransposes(FusionBasePass):
    def run(self, graph, context):
        outer = graph.find_node_by_name("tb")
        inner, _ = outer.get_in_data_nodes_and_port_indexes(0)
        p1, p2 = list(inner.get_attr("perm")), list(outer.get_attr("perm"))
        src, idx = inner.get_in_data_nodes_and_port_indexes(0)
        graph.remove_edge(inner, 0, outer, 0)
        graph.add_data_edge(src, idx, outer, 0)
        outer.set_attr("perm", [p2[i] for i in p1])
        ge.ops.infer_node(outer)
        for reader, _ in outer.get_out_data_nodes_and_port_indexes(0):
            ge.ops.infer_node(reader)
        return True
'''


def test_an_output_shaped_wrongly_names_the_changed_nodes_above_it(tmp_path: Path) -> None:
    """Trial U: a pass composing two Transposes' perms the wrong way round, re-inferring the
    Transpose and the Relu below it, was told the output read 'relu' has another shape, at
    its class line. It is told the nodes it changed above the output too, the Transpose
    first, and the line that last changed that one."""
    from onnx import helper

    from ge.testing import make_model

    model = make_model([helper.make_node("Transpose", ["x"], ["a"], name="ta", perm=[1, 2, 0]),
                        helper.make_node("Transpose", ["a"], ["b"], name="tb", perm=[0, 2, 1]),
                        helper.make_node("Relu", ["b"], ["y"], name="relu")],
                       [("x", [2, 3, 4])], [("y", [3, 2, 4])])
    plugin = tmp_path / "merge_transposes.py"
    plugin.write_text(MERGE_TRANSPOSES)
    with pytest.raises(PassRunError) as info:
        ge.compile(model, pass_paths=[plugin])
    err = info.value
    assert ("graph output 0 is declared [3, 2, 4] but the pass made it read 'y' of 'relu', "
            "shaped [4, 3, 2]; the pass changed, upstream of it: Transpose node 'tb', Relu "
            "node 'relu'") in err.message
    line = 1 + MERGE_TRANSPOSES.splitlines().index("        ge.ops.infer_node(outer)")
    assert err.location is not None and (err.location.file, err.location.line) == (
        str(plugin), line)
