"""Every way a user's pass can go wrong, end to end through `ge compile`: the command fails
with that pass's E13028 on one line (pass, stage, the user's file:line, the reason), writes
nothing, and leaves the input model as it was."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import ge
from ge.cli import cli
from ge.errors import PassRunError
from plugin_fixtures import clean_plugin_state  # noqa: F401  (no plugin outlives the test)

HEAD = """\
from ge.passes import FusionBasePass, PatternFusionPass, pattern, register_fusion_pass

"""

# name -> (plugin body, the line of the plugin file blamed (the raising line; for a graph
# the pass left invalid, the line that last changed the first node the check names; else
# the class), text the reason must hold)
CASES: dict[str, tuple[str, int, str]] = {
    "raises_in_run": ("""\
@register_fusion_pass(name="Bad", stage="AfterInferShape")
class Bad(FusionBasePass):
    def run(self, graph, context):
        raise ValueError("run broke")
""", 6, "ValueError: run broke"),
    "raises_in_patterns": ("""\
@register_fusion_pass(name="Bad", stage="AfterInferShape")
class Bad(PatternFusionPass):
    @pattern
    def add(self, inputs):
        raise KeyError("patterns broke")
""", 7, "KeyError: 'patterns broke'"),
    "raises_in_meet_requirements": ("""\
@register_fusion_pass(name="Bad", stage="AfterInferShape")
class Bad(PatternFusionPass):
    @pattern
    def add(self, inputs):
        return inputs[0] + inputs[1]

    def meet_requirements(self, match_result):
        raise RuntimeError("requirements broke")
""", 10, "RuntimeError: requirements broke"),
    "raises_in_replacement": ("""\
@register_fusion_pass(name="Bad", stage="AfterInferShape")
class Bad(PatternFusionPass):
    @pattern
    def add(self, inputs):
        return inputs[0] + inputs[1]

    def replacement(self, inputs):
        raise ZeroDivisionError("replacement broke")
""", 10, "ZeroDivisionError: replacement broke"),
    "returns_an_unsupported_type": ("""\
@register_fusion_pass(name="Bad", stage="AfterInferShape")
class Bad(FusionBasePass):
    def run(self, graph, context):
        return "done"
""", 6, "Reason: python pass returned unsupported type: str."),  # (at its return)
    # trial C: a tensor of one match's replacement kept for a later match's; both builders
    # are named Bad_replacement, which the message named on both sides
    "reuses_a_tensor_of_an_earlier_replacement": ("""\
import ge.es.all as es


@register_fusion_pass(name="Bad", stage="AfterInferShape")
class Bad(PatternFusionPass):
    kept = None

    @pattern
    def add(self, inputs):
        return inputs[0] + inputs[1]

    @pattern
    def relu(self, inputs):
        return es.Relu(inputs[0])

    def replacement(self, inputs):
        if Bad.kept is None:
            Bad.kept = inputs[0]
            return inputs[0] + inputs[1]
        return es.Relu(inputs[0] + Bad.kept)
""", 22, "BuilderMixError: [GE1402] Add: input 'x' belongs to an earlier GraphBuilder "
       "'Bad_replacement', which built its graph already (a replacement of an earlier "
       "match: a tensor kept from one replacement cannot be used in another; build each "
       "from its own inputs), but the operator is built by 'Bad_replacement'"),
    "reuses_a_tensor_of_an_earlier_replacement_alone": ("""\
import ge.es.all as es


@register_fusion_pass(name="Bad", stage="AfterInferShape")
class Bad(PatternFusionPass):
    kept = None

    @pattern
    def add(self, inputs):
        return inputs[0] + inputs[1]

    @pattern
    def relu(self, inputs):
        return es.Relu(inputs[0])

    def replacement(self, inputs):
        if Bad.kept is None:
            Bad.kept = inputs[0]
            return inputs[0] + inputs[1]
        return es.Relu(Bad.kept)
""", 22, "BuilderStateError: [GE1401] Cannot Relu: GraphBuilder 'Bad_replacement' "
       "built the replacement of an earlier match already: a tensor kept from one "
       "replacement cannot be used in another; build each from its own inputs"),
    "leaves_a_dangling_input": ("""\
@register_fusion_pass(name="Bad", stage="AfterInferShape")
class Bad(FusionBasePass):
    def run(self, graph, context):
        relu = graph.nodes_of_type("Relu")[0]
        producer, index = relu.get_in_data_nodes_and_port_indexes(0)
        graph.remove_edge(producer, index, relu, 0)
""", 8, "the pass left the graph invalid: arity: required input 0 (X) of Relu node "
       "'relu' is not connected"),
    "leaves_a_cycle": ("""\
@register_fusion_pass(name="Bad", stage="AfterInferShape")
class Bad(FusionBasePass):
    def run(self, graph, context):
        add, relu = graph.nodes_of_type("Add")[0], graph.nodes_of_type("Relu")[0]
        graph.remove_edge(*add.get_in_data_nodes_and_port_indexes(0), add, 0)
        graph.add_data_edge(relu, 0, add, 0)
""", 8, "the pass left the graph invalid: cycle: graph 'g' has a cycle through nodes"),
    "leaves_an_untyped_value": ("""\
@register_fusion_pass(name="Bad", stage="AfterInferShape")
class Bad(FusionBasePass):
    def run(self, graph, context):
        relu = graph.nodes_of_type("Relu")[0]
        mystery = graph.add_node("Mystery", domain="my.ops", num_inputs=1)
        graph.replace_all_uses(relu, 0, mystery, 0)
        graph.add_data_edge(relu, 0, mystery, 0)
""", 9, "untyped: output 0 ('Mystery:0') of my.ops.Mystery node 'Mystery' has no known "
       "dtype"),  # (its domain said: my.ops.Mystery is not ONNX's, ge.graph.domains.qualified_op)
    "sets_an_attribute_onnx_does_not_define": ("""\
@register_fusion_pass(name="Bad", stage="AfterInferShape")
class Bad(FusionBasePass):
    def run(self, graph, context):
        graph.nodes_of_type("Relu")[0].set_attr("tagged", 1)
""", 6, "the pass left the graph invalid: attribute: Relu node 'relu' has attribute "
       "'tagged', which Relu (opset 17) does not define; ONNX runtimes reject it"),
    "calls_sys_exit_0": ("""\
import sys


@register_fusion_pass(name="Bad", stage="AfterInferShape")
class Bad(FusionBasePass):
    def run(self, graph, context):
        graph.remove_node(graph.nodes_of_type("Relu")[0])
        sys.exit(0)
""", 10, "Reason: SystemExit: 0."),
    "raises_a_base_exception": ("""\
class Stop(BaseException):
    pass


@register_fusion_pass(name="Bad", stage="AfterInferShape")
class Bad(FusionBasePass):
    def run(self, graph, context):
        raise Stop("not an Exception")
""", 10, "Reason: Stop: not an Exception."),
    "leaves_a_stale_output_type": ("""\
@register_fusion_pass(name="Bad", stage="AfterInferShape")
class Bad(FusionBasePass):
    def run(self, graph, context):
        relu = graph.nodes_of_type("Relu")[0]
        cast = graph.add_node("Cast", num_inputs=1, attrs={"to": 7})  # int64
        producer, index = relu.get_in_data_nodes_and_port_indexes(0)
        graph.remove_edge(producer, index, relu, 0)
        graph.add_data_edge(producer, index, cast, 0)
        graph.add_data_edge(cast, 0, relu, 0)
""", 11, "the pass left the graph invalid: type: output 0 ('Y') of Relu node 'relu' is "
       "tensor(float) but input 0 ('X') is tensor(int64); Relu wants both of type T"),
    # GE's API docs name SubgraphInput's pair (node, out_index); it is a node inside the
    # region and its input index (D4): a producer's pair is refused, saying so, and naming
    # the pairs of that output's readers (and no log line precedes the error)
    "gives_subgraph_input_a_producer_and_its_output": ("""\
from ge.passes import SubgraphBoundary, SubgraphInput


@register_fusion_pass(name="Bad", stage="AfterInferShape")
class Bad(FusionBasePass):
    def run(self, graph, context):
        add = graph.nodes_of_type("Add")[0]
        producer, out_index = add.get_in_data_nodes_and_port_indexes(0)
        SubgraphBoundary().add_input(0, SubgraphInput([(producer, out_index)]))
""", 11, "Reason: RuntimeError: SubgraphInput cannot take ('x', 0): node 'x' has no input 0 "
       "(it has none). A SubgraphInput pair is (node, input_index): a node inside the region "
       "and the index of its input that reads the boundary value, not a producer and its "
       "output index (GE's API docs call the index out_index; GE reads it as an input "
       "index, and so does ge); output 0 of 'x' is read by input 0 of 'add': pass the pair "
       "of each reader inside the region, (node 'add', 0). (pass Bad"),
    # GE's samples re-raise their own message from the error that says what was wrong:
    # both are in the line (the cause was shown with --debug only)
    "reraises_from_the_cause": ("""\
@register_fusion_pass(name="Bad", stage="AfterInferShape")
class Bad(FusionBasePass):
    def run(self, graph, context):
        relu = graph.nodes_of_type("Relu")[0]
        try:
            relu.get_attr("alpha")
        except Exception as exc:
            raise RuntimeError("Get attributes failed") from exc
""", 10, "Reason: RuntimeError: Get attributes failed (from GraphError: [GE1001] node 'relu' "
        "(Relu) has no attribute 'alpha'). (pass Bad"),
    # a cause without a message (a bare assert) is named all the same (trial R)
    "reraises_from_a_bare_assert": ("""\
@register_fusion_pass(name="Bad", stage="AfterInferShape")
class Bad(FusionBasePass):
    def run(self, graph, context):
        try:
            assert graph.nodes_of_type("Gelu")
        except AssertionError as exc:
            raise RuntimeError("Get attributes failed") from exc
""", 9, "Reason: RuntimeError: Get attributes failed (from AssertionError). (pass Bad"),
    # after shape inference a new node's outputs are typed by inference: one it refuses is
    # said with its reason (it read "has no known dtype", nothing of the axis: trial P)
    "adds_a_node_inference_refuses": ("""\
@register_fusion_pass(name="Bad", stage="AfterInferShape")
class Bad(FusionBasePass):
    def run(self, graph, context):
        relu = graph.nodes_of_type("Relu")[0]
        softmax = graph.add_node("Softmax", num_inputs=1, attrs={"axis": 7}, name="bad_softmax")
        graph.replace_all_uses(relu, 0, softmax, 0)
        graph.add_data_edge(relu, 0, softmax, 0)
""", 9, "the pass left the graph invalid: untyped: output 0 ('bad_softmax:0') of Softmax node "
       "'bad_softmax' has no known dtype: inference refused it: Softmax node 'bad_softmax': "
       "shape inference (opset 13 schema) failed"),
    # a GE author's expression-style decompose replacement: what the hook gets is said
    "decompose_replacement_takes_inputs": ("""\
import ge.es.all as es
from ge.passes import DecomposePass, register_decompose_pass


@register_decompose_pass(name="Bad", stage="AfterInferShape", op_types=["Relu"])
class Bad(DecomposePass):
    def replacement(self, inputs):
        return es.Max(inputs[0], 0.0)
""", 10, "Reason: TypeError: 'Node' object is not subscriptable. DecomposePass.replacement("
        "self, inputs) receives the node it decomposes (a ge.graph.Node) as `inputs`, not "
        "pattern inputs or a MatchResult: it returns a graph it builds"),
    "removes_a_graph_outputs_producer": ("""\
@register_fusion_pass(name="Bad", stage="AfterInferShape")
class Bad(FusionBasePass):
    def run(self, graph, context):
        graph.remove_node(graph.nodes_of_type("Relu")[0])
""", 6, "the pass left the graph invalid: arity: graph output 0 ('y') (input 0 of 'NetOutput') "
       "is not connected (graph g)"),
    "reads_an_unknown_option": ("""\
@register_fusion_pass(name="Bad", stage="AfterInferShape")
class Bad(FusionBasePass):
    def run(self, graph, context):
        self.limit = context.get_option_value("my.limit")
""", 6, "RuntimeError: Failed to get option value for key: my.limit"),
}


def _model(path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    bias = numpy_helper.from_array(np.full((2, 3), 0.5, np.float32), "bias")
    nodes = [helper.make_node("Add", ["x", "bias"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [x], [y], [bias])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_pass_fails_its_compilation_with_nothing_written(case: str,
                                                                tmp_path: Path) -> None:
    body, line, reason = CASES[case]
    plugin = tmp_path / "bad_pass.py"
    plugin.write_text(HEAD + textwrap.dedent(body))
    model, out = tmp_path / "model.onnx", tmp_path / "out.onnx"
    _model(model)
    original = model.read_bytes()
    result = CliRunner().invoke(cli, ["compile", str(model), "-o", str(out),
                                      "--pass-path", str(plugin)])
    assert result.exit_code == 1, result.output
    lines = [text for text in result.stderr.splitlines() if text.strip()]
    assert len(lines) == 1, result.stderr  # one line, no traceback
    message = lines[0]
    assert message.startswith("ge: [E13028]") and "Traceback" not in result.output
    assert "Bad" in message and "AfterInferShape" in message
    assert reason in message
    assert message.endswith(f"bad_pass.py:{line})")  # the raising line, or the class
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad_pass.py", "model.onnx"]
    assert model.read_bytes() == original


def test_an_unnamed_node_a_pass_leaves_uninferable_is_named_by_what_it_computes(
        tmp_path: Path) -> None:
    """A pass rewiring a node the model gives no name so that its inputs do not broadcast:
    the per-node inference failure names it as the model does, by the value it computes
    (ge's name for it, 'Add', is in no file the user has); err.nodes keeps ge's name."""
    plugin = tmp_path / "bad_pass.py"
    plugin.write_text(HEAD + textwrap.dedent("""\
        @register_fusion_pass(name="Bad", stage="AfterInferShape")
        class Bad(FusionBasePass):
            def run(self, graph, context):
                add = graph.nodes_of_type("Add")[0]
                z = graph.find_node_by_name("z")
                graph.remove_edge(*add.get_in_data_nodes_and_port_indexes(1), add, 1)
                graph.add_data_edge(z, 0, add, 1)
        """))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])]
    model = tmp_path / "model.onnx"
    onnx.save(helper.make_model(helper.make_graph(nodes, "g", [x, z], [y]),
                                opset_imports=[helper.make_opsetid("", 17)]), model)
    original = model.read_bytes()
    with pytest.raises(PassRunError) as caught:
        ge.compile(model, pass_paths=[plugin], builtin_passes=False)
    assert caught.value.code == "E13028" and caught.value.pass_name == "Bad"
    assert caught.value.message == (
        "Failed to run custom fusion pass Bad. Return code: FAILED. Reason: the pass left the "
        "graph invalid: shape: unnamed Add node (computing 'y'): shape inference (opset 14 "
        "schema) failed for inputs (TensorDesc(float32[2,3]), TensorDesc(float32[4])): "
        "[ShapeInferenceError] Incompatible dimensions (graph g).")
    assert tuple(caught.value.nodes) == ("Add",)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad_pass.py", "model.onnx"]
    assert model.read_bytes() == original
