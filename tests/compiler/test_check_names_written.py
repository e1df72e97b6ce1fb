"""The check after a pass names nodes as the user's model writes them: a node named like a
graph input (or like another node) has another IR name (`x_1` for the model's `x`), and the
E13028 of a pass that broke it said `x_1`, a name the user's model does not have, where
GE1601 and the save-time GE1003 name nodes as the file writes them. A name is given back
only where that is sure (an unnamed node, or an IR name that is a value's too, keeps it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper

import ge
import ge.graph
from ge.cli import cli
from ge.errors import PassRunError

Write = Callable[[str, str], Path]

HEADER = "from ge.passes import FusionBasePass, PassStage, register_fusion_pass\n\n"

# Cuts input 0 of the Relu: a required input left unconnected.
CUT = HEADER + '''
@register_fusion_pass(name="CutRelu", stage=PassStage.BEFORE_INFER_SHAPE)
class CutRelu(FusionBasePass):
    def run(self, graph, context):
        relu = graph.nodes_of_type("Relu")[0]
        producer, index = relu.get_input_producer(0)
        graph.remove_edge(producer, index, relu, 0)
        return True
'''

# Feeds the Relu from the Neg it feeds: a cycle through both.
LOOP = HEADER + '''
@register_fusion_pass(name="Loop", stage=PassStage.BEFORE_INFER_SHAPE)
class Loop(FusionBasePass):
    def run(self, graph, context):
        relu = graph.nodes_of_type("Relu")[0]
        producer, index = relu.get_input_producer(0)
        graph.remove_edge(producer, index, relu, 0)
        graph.add_data_edge(graph.nodes_of_type("Neg")[0], 0, relu, 0)
        return True
'''


# Makes the graph output read the int64 Cast's value instead of the float one.
REWIRE = HEADER + '''
@register_fusion_pass(name="Rewire", stage=PassStage.AFTER_INFER_SHAPE)
class Rewire(FusionBasePass):
    def run(self, graph, context):
        out = graph.get_net_output()
        producer, index = out.get_input_producer(0)
        graph.remove_edge(producer, index, out, 0)
        graph.add_data_edge(graph.find_node_by_name("x_1"), 0, out, 0)
        return True
'''


def _model(relu: str = "x", relu_out: str = "r") -> onnx.ModelProto:
    """x -> Relu (named `relu`, "x": the graph input's name) -> Neg (neg) -> y."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], [relu_out], name=relu),
         helper.make_node("Neg", [relu_out], ["y"], name="neg")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _fails(write: Write, source: str, model: onnx.ModelProto) -> PassRunError:
    """The E13028 of compiling `model` (a Graph, in place) with the pass of `source`; the
    graph is given back as it was."""
    plugin = write("plugin.py", source)
    graph = ge.graph.load(model)
    before = graph.to_onnx().SerializeToString()
    with pytest.raises(PassRunError) as info:
        ge.compile(graph, pass_paths=[plugin])
    err = info.value
    assert err.code == "E13028" and err.stage == "BeforeInferShape"
    assert err.location is not None and err.location.file == str(plugin)
    assert graph.to_onnx().SerializeToString() == before
    return err


def test_a_node_named_like_a_graph_input_is_named_as_the_model_writes_it(
        write: Write) -> None:
    model = _model()
    assert ge.graph.load(model).nodes_of_type("Relu")[0].name == "x_1"  # the IR's name
    err = _fails(write, CUT, model)
    assert err.pass_name == "CutRelu"
    assert err.message == (
        "Failed to run custom fusion pass CutRelu. Return code: FAILED. Reason: the pass left "
        "the graph invalid: arity: required input 0 (X) of Relu node 'x' is not connected "
        "(graph g).")
    assert err.nodes == ("x",)


def test_a_cycle_lists_its_nodes_as_the_model_writes_them(write: Write) -> None:
    err = _fails(write, LOOP, _model())
    assert err.pass_name == "Loop"
    assert "cycle: graph 'g' has a cycle through nodes: neg, x (graph g)" in err.message
    assert err.nodes == ("neg", "x")


def test_a_graph_output_read_from_it_names_it_so(write: Write) -> None:
    """The output check names the node the output now reads (and lists it)."""
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["i"], name="x", to=TensorProto.INT64),
         helper.make_node("Cast", ["i"], ["y"], name="back", to=TensorProto.FLOAT)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    plugin = write("plugin.py", REWIRE)
    with pytest.raises(PassRunError) as info:
        ge.compile(model, pass_paths=[plugin])
    err = info.value
    assert err.code == "E13028" and err.pass_name == "Rewire"
    assert err.stage == "AfterInferShape" and str(err.location) == f"{plugin}:10"  # rewired
    assert ("type: graph output 0 is declared DT_FLOAT but the pass made it read 'i' of "
            "'x', a DT_INT64 (graph g)") in err.message
    assert err.nodes == ("NetOutput", "x")


@pytest.mark.parametrize(("relu", "relu_out", "shown"), [
    ("", "r", "Relu"),  # unnamed: the IR's name is the only one it has
    ("x", "x_1", "x_1"),  # 'x_1' names a value too: the message could mean either
])
def test_a_name_not_surely_the_models_stays_the_irs(write: Write, relu: str, relu_out: str,
                                                    shown: str) -> None:
    err = _fails(write, CUT, _model(relu, relu_out))
    # (an unnamed one is named by what finds it in the model: ge.graph.places.ir_node_label)
    said = f"Relu node {shown!r}" if relu else f"unnamed Relu node (computing {relu_out!r})"
    assert f"required input 0 (X) of {said} is not connected" in err.message
    assert err.nodes == (shown,)


def test_ge_compile_names_it_so_and_writes_nothing(tmp_path: Path, write: Write) -> None:
    model = tmp_path / "model.onnx"
    onnx.save(_model(), model)
    plugin = write("plugin.py", CUT)
    out = tmp_path / "out.onnx"
    before = sorted(tmp_path.rglob("*"))
    result = CliRunner().invoke(cli, ["compile", str(model), "-o", str(out),
                                      "--pass-path", str(plugin)])
    stderr = result.stderr
    assert result.exit_code == 1 and result.stdout == ""
    assert stderr.startswith("ge: [E13028] Failed to run custom fusion pass CutRelu.")
    assert "of Relu node 'x' is not connected" in stderr and "x_1" not in stderr
    assert f"{plugin}:9)" in stderr  # the remove_edge that cut the input
    assert sorted(tmp_path.rglob("*")) == before  # no output file
