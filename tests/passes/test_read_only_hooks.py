"""Hooks that may only read the graph (`meet_requirements`, a replacement building a graph
of its own) and change it anyway: GE1502 (E13028 of the pass, rolled back) says what the
first change was, on which node, and at which line of the pass; a replacement that does not
fit its match names the pattern and the node it matched (trial WW: "changed graph
'main_graph'" and "has 2 output(s) but the region it replaces has 1" left both to guess on a
model of many layers)."""

from __future__ import annotations

from pathlib import Path

import pytest
from onnx import helper

import ge
from ge.errors import PassRunError, RewriteError
from ge.passes.read_only import read_only_call
from ge.testing import make_model

PLUGIN = """\
import ge.es.all as es
from ge.passes import PatternFusionPass, pattern, register_fusion_pass


@register_fusion_pass(name="P", stage="AfterInferShape")
class P(PatternFusionPass):
    @pattern
    def twice(self, inputs):
        return es.Neg(es.Neg(inputs[0]))

    @pattern
    def relu_neg(self, inputs):
        return es.Neg(es.Relu(inputs[0]))

    def meet_requirements(self, match_result):
        first = match_result.get_matched_nodes()[0]
        graph = first.owner_graph
{change}
        return {accept}

    def replacement(self, inputs):
        self.calls = getattr(self, "calls", 0) + 1
        return {returned}
"""
CHANGE_LINE = 18  # the line of {change} in the file


def _model():
    """x -> Neg (n1) -> Neg (n2) -> Relu (r) -> Neg (n3) -> y."""
    return make_model([helper.make_node("Neg", ["x"], ["a"], name="n1"),
                       helper.make_node("Neg", ["a"], ["b"], name="n2"),
                       helper.make_node("Relu", ["b"], ["c"], name="r"),
                       helper.make_node("Neg", ["c"], ["y"], name="n3")],
                      [("x", [2, 4])], [("y", [2, 4])])


def _fails(tmp_path: Path, change: str = "        pass", accept: str = "True",
           returned: str = "es.Neg(inputs[0])") -> tuple[PassRunError, Path]:
    plugin = tmp_path / "p.py"
    plugin.write_text(PLUGIN.format(change=change, accept=accept, returned=returned))
    graph = ge.graph.load(_model())
    before = graph.to_onnx().SerializeToString()
    with pytest.raises(PassRunError) as caught:
        ge.compile(graph, pass_paths=[plugin])
    assert caught.value.code == "E13028" and caught.value.pass_name == "P"
    assert graph.to_onnx().SerializeToString() == before  # rolled back, nothing kept
    return caught.value, plugin


@pytest.mark.parametrize(("change", "what"), [
    ('        first.set_attr("seen", 1)', "set attribute 'seen' of Neg node 'n1'"),
    ("        src, i = first.get_in_data_nodes_and_port_indexes(0)\n"
     "        graph.remove_edge(src, i, first, 0)", "rewired input 0 of Neg node 'n1'"),
    ('        graph.add_node("Relu", name="extra", num_inputs=1)', "added Relu node 'extra'"),
])
def test_a_check_that_changes_the_graph_says_what_it_changed_first_and_where(
        tmp_path: Path, change: str, what: str) -> None:
    err, plugin = _fails(tmp_path, change=change, accept="False")
    line = CHANGE_LINE + change.count("\n")
    assert (f"RewriteError: [GE1502] meet_requirements changed graph 'g': first, it {what}, "
            f"at {plugin}:{line}; it may only read the graph (the engine makes the change "
            "from what replacement returns)") in err.message
    assert err.location is not None and err.location.line == 15  # the hook's def, as before


@pytest.mark.parametrize("change, later", [
    ('        first.set_metadata("seen", "1")', ""),
    ('        first.set_metadata("seen", "1")', '\n        first.set_attr("seen", 1)'),
])
def test_a_change_no_listener_is_told_of_is_said_by_its_line(
        tmp_path: Path, change: str, later: str) -> None:
    """Trial T: set_metadata in meet_requirements failed with "meet_requirements changed
    graph 'main_graph'" and no line but the hook's def: metadata changes are not told to
    the graph's listeners. The journal's watcher gives the line (first change first: a
    later set_attr, which listeners are told of, is not said instead)."""
    err, plugin = _fails(tmp_path, change=change + later, accept="False")
    assert ("RewriteError: [GE1502] meet_requirements changed graph 'g': first, it made a "
            "change (of metadata, a name or an anchor's attribute) at "
            f"{plugin}:{CHANGE_LINE}; it may only read the graph") in err.message


def test_a_replacement_with_another_output_count_names_its_pattern_and_match(
        tmp_path: Path) -> None:
    """The first pattern's match (n2 over n1) is replaced; the second's (n3 over r) gets
    two outputs where it has one: the second pattern and n3 are named."""
    err, _ = _fails(tmp_path, returned="es.Neg(inputs[0]) if self.calls == 1 else "
                                       "(es.Neg(inputs[0]), es.Abs(inputs[0]))")
    assert ("RewriteError: [GE1502] the replacement has 2 output(s) but the region it "
            "replaces has 1 (pattern 'P_relu_neg_pattern', matched at Neg node 'n3')"
            ) in err.message


def test_a_removed_attribute_is_named_and_only_the_first_change_is_told() -> None:
    graph = ge.graph.load(make_model(
        [helper.make_node("Softmax", ["x"], ["y"], name="s", axis=0)], [("x", [2, 4])],
        [("y", [2, 4])]))
    (node,) = graph.nodes_of_type("Softmax")

    def meet_requirements() -> bool:
        node.remove_attr("axis")  # the first change
        node.set_attr("axis", 1)
        return True

    line = meet_requirements.__code__.co_firstlineno + 1
    with pytest.raises(RewriteError) as caught:
        read_only_call(meet_requirements, graph)
    assert (f"meet_requirements changed graph 'g': first, it removed attribute 'axis' of "
            f"Softmax node 's', at {__file__}:{line}; ") in caught.value.message
    assert graph.changing_attribute is None  # only while listeners are told
