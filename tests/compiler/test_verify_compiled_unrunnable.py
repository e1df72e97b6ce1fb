"""Plain verification (`--verify`, `verify=True`) of a compiled model that onnxruntime
refuses to load or run while the original runs: GE1601 says it is the compiled model (the
runtime's own words name only the graph, which both models have) and, when a pass changed
the node the runtime names (or a node it reads), names that pass: in the message, and as
the error's pass, stage and location. Nothing is written."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import ge
import ge.graph
from ge.cli import cli
from ge.errors import CompileWarning, RuntimeLoadError, SessionError
from plugin_fixtures import node_replacing_plugin

COMPILED = "the compiled model cannot be run (the original runs): "
# What every such error ends with: the pass named may not be the one that broke the model.
EACH_PASS = (' (verify="each-pass", --verify each-pass, names the first pass after which it '
             "cannot run)")

# Relu computed in int64 between two Casts: valid ONNX (and for ge's checks), but
# onnxruntime has no int64 Relu kernel, so it will not load the model.
INT_RELU = """\
from ge.graph import DataType
from ge.ops import infer_node
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="IntRelu", stage=PassStage.AFTER_INFER_SHAPE)
class IntRelu(FusionBasePass):
    def run(self, graph, context):
        relu = graph.find_node_by_name("relu")
        src, index = relu.get_in_data_nodes_and_port_indexes(0)
        (reader, slot), = relu.get_out_data_nodes_and_port_indexes(0)
        to_int = graph.add_node("Cast", num_inputs=1, attrs={"to": DataType.DT_INT64})
        back = graph.add_node("Cast", num_inputs=1, attrs={"to": DataType.DT_FLOAT})
        graph.remove_edge(src, index, relu, 0)
        graph.remove_edge(relu, 0, reader, slot)
        graph.add_data_edge(src, index, to_int, 0)
        graph.add_data_edge(to_int, 0, relu, 0)
        graph.add_data_edge(relu, 0, back, 0)
        graph.add_data_edge(back, 0, reader, slot)
        for node in (to_int, relu, back):
            infer_node(node)
        return True
"""

# The Reshape's shape constant rewritten to one its input cannot take: onnxruntime loads
# the model and fails running the Reshape, which the pass did not change (its input).
BREAK_RESHAPE = """\
import numpy as np
from ge.graph import Tensor
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="BreakReshape", stage=PassStage.AFTER_INFER_SHAPE)
class BreakReshape(FusionBasePass):
    def run(self, graph, context):
        shape = graph.find_node_by_name("shape")
        shape.set_attr("value", Tensor(np.array([5], np.int64)))
"""


def _relu_model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Neg", ["r"], ["y"], name="neg")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _reshape_model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6])],
        [numpy_helper.from_array(np.array([6], np.int64), "shape")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _compile_json(tmp_path: Path, model: onnx.ModelProto, plugin: str
                  ) -> tuple[dict[str, object], Path]:
    source, out, passes = tmp_path / "model.onnx", tmp_path / "out.onnx", tmp_path / "p.py"
    onnx.save(model, source)
    passes.write_text(plugin)
    result = CliRunner().invoke(cli, ["compile", str(source), "-o", str(out), "--pass-path",
                                      str(passes), "--verify", "--json"])
    assert result.exit_code == 1 and result.stderr == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx", "p.py"]
    return json.loads(result.stdout), passes


def test_a_compiled_model_onnxruntime_will_not_load_is_said_to_be_the_compiled_one(
        tmp_path: Path) -> None:
    error, plugin = _compile_json(tmp_path, _relu_model(), INT_RELU)
    assert error["code"] == "GE1601"
    message = str(error["message"])
    assert message.startswith(f"{COMPILED}onnxruntime cannot load graph 'g': ")
    assert "Could not find an implementation for Relu(14) node with name 'relu'" in message
    assert message.endswith(
        f"; node 'relu' was last changed by pass IntRelu (AfterInferShape){EACH_PASS}")
    assert (error["pass_name"], error["stage"], error["location"], error["nodes"]) == (
        "IntRelu", "AfterInferShape", f"{plugin}:7", ["relu"])


def test_a_compiled_model_that_fails_running_names_the_pass_of_a_node_it_reads(
        tmp_path: Path) -> None:
    error, plugin = _compile_json(tmp_path, _reshape_model(), BREAK_RESHAPE)
    message = str(error["message"])
    assert message.startswith(f"{COMPILED}onnxruntime failed to run graph 'g': ")
    assert message.endswith("; node 'reshape' reads node 'shape', last changed by pass "
                            f"BreakReshape (AfterInferShape){EACH_PASS}")
    assert (error["pass_name"], error["stage"], error["location"]) == (
        "BreakReshape", "AfterInferShape", f"{plugin}:7")


def test_the_api_says_so_too_and_leaves_no_listener_behind(tmp_path: Path) -> None:
    """ge.compile(verify=True) raises the same error (a RuntimeLoadError still);
    the Graph compiled in place is given back unchanged, without the listener that
    followed the passes' changes."""
    plugin = tmp_path / "int_relu.py"
    plugin.write_text(INT_RELU)
    graph = ge.graph.load(_relu_model())
    before = graph.to_onnx().SerializeToString()
    with pytest.raises(SessionError) as caught:
        ge.compile(graph, pass_paths=[plugin], verify=True)
    err = caught.value
    assert isinstance(err, RuntimeLoadError) and err.code == "GE1601"
    assert err.message.startswith(COMPILED) and err.pass_name == "IntRelu"
    assert graph.to_onnx().SerializeToString() == before
    assert graph.journal.listeners == []


def test_a_pass_further_upstream_is_named_and_each_pass_verification_pointed_at(
        tmp_path: Path) -> None:
    """The pass changed a node two steps before the one onnxruntime names (the shape goes
    through an Identity): the nearest change upstream names the pass (no pass was named),
    and as that is a guess, `--verify each-pass` is pointed at, which would be sure."""
    model = _reshape_model()
    model.graph.node.insert(0, helper.make_node("Identity", ["shape"], ["s"], name="id"))
    model.graph.node[1].input[1] = "s"
    plugin = tmp_path / "break_reshape.py"
    plugin.write_text(BREAK_RESHAPE)
    with pytest.raises(SessionError) as caught:
        ge.compile(model, pass_paths=[plugin], verify=True)
    err = caught.value
    assert err.message.startswith(f"{COMPILED}onnxruntime failed to run graph 'g': ")
    assert err.message.endswith(
        "; node 'reshape' depends on node 'shape', 2 nodes upstream, last changed by pass "
        f"BreakReshape (AfterInferShape), the nearest change a pass made upstream{EACH_PASS}")
    assert (err.pass_name, err.stage, err.location, err.nodes) == (
        None, None, None, ("reshape",))  # (a guess: the message says so, not the fields)


# IntRelu for the first Relu of the graph, whatever ge names it.
FIRST_INT_RELU = INT_RELU.replace(
    'relu = graph.find_node_by_name("relu")',
    'relu = next(n for n in graph.get_direct_nodes() if n.type == "Relu")')


def _relu_chain(first: str, second: str) -> onnx.ModelProto:
    """x -> Relu (named `first`) -> Neg -> Relu (named `second`) -> Neg -> y."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name=first),
         helper.make_node("Neg", ["r"], ["n"], name="neg"),
         helper.make_node("Relu", ["n"], ["r2"], name=second),
         helper.make_node("Neg", ["r2"], ["y"], name="neg2")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize(("first", "second", "written"), [
    ("relu", "relu2", "relu"),  # the name as written is ge's
    ("x", "relu2", "x"),  # named like the graph input: ge calls it x_1, the model 'x'
    ("x", "x", "x"),  # two of one name, the first keeping it as written (ge: x_1)
])
def test_the_pass_is_named_by_the_name_the_saved_model_writes(
        tmp_path: Path, first: str, second: str, written: str) -> None:
    """onnxruntime names the node as the saved model writes it, which export keeps as read
    even where ge had to name the node apart (from the graph input's node, from a node of
    the same name): the name is mapped back to the node, and its pass named, not the
    generic hint."""
    plugin = tmp_path / "int_relu.py"
    plugin.write_text(FIRST_INT_RELU)
    graph = ge.graph.load(_relu_chain(first, second))
    relu = next(n for n in graph.get_direct_nodes() if n.type == "Relu")
    assert (relu.name == written) == (first == "relu")  # ge's name is another one for 'x'
    before = graph.to_onnx().SerializeToString()
    renamed = (pytest.warns(CompileWarning, match="the 2 nodes named 'x' as 'x', 'x_2'")
               if second == first else contextlib.nullcontext())
    with pytest.raises(RuntimeLoadError) as caught, renamed:
        ge.compile(graph, pass_paths=[plugin], verify=True)
    err = caught.value
    assert err.code == "GE1601"
    assert f"Relu(14) node with name '{written}'" in err.message
    assert err.message.endswith(
        f"; node '{written}' was last changed by pass IntRelu (AfterInferShape){EACH_PASS}")
    assert (err.pass_name, err.stage, str(err.location), err.nodes) == (
        "IntRelu", "AfterInferShape", f"{plugin}:7", (written,))
    assert graph.to_onnx().SerializeToString() == before  # given back as it was


def test_a_renamed_node_reading_a_changed_constant_names_its_pass(tmp_path: Path) -> None:
    """The Reshape named like its input ('x' as written, 'x_1' in ge) fails running on the
    shape constant a pass rewrote: the sentence names both as the saved model does."""
    model = _reshape_model()
    model.graph.node[0].name = "x"
    source, out, plugin = tmp_path / "m.onnx", tmp_path / "out.onnx", tmp_path / "p.py"
    onnx.save(model, source)
    plugin.write_text(BREAK_RESHAPE)
    with pytest.raises(SessionError) as caught:
        ge.compile(source, pass_paths=[plugin], verify=True)
    assert caught.value.message.endswith(
        "; node 'x' reads node 'shape', last changed by pass BreakReshape (AfterInferShape)"
        + EACH_PASS)
    assert caught.value.pass_name == "BreakReshape"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "p.py"]
    assert not out.exists()


# An int64 Abs replaced by a Relu the pass makes (onnxruntime has no int64 Relu kernel),
# reading what the Abs read: the output of an Identity, which the built-in NoOpElimination
# removes afterwards, rewiring the Relu: it changed the node last, the plugin made it.
MADE_RELU = node_replacing_plugin("AbsToRelu", "abs", "Relu", "relu")


def _int_abs_model() -> onnx.ModelProto:
    """x (int64) -> Identity (id) -> Abs (abs) -> Neg (neg) -> y."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["i"], name="id"),
         helper.make_node("Abs", ["i"], ["a"], name="abs"),
         helper.make_node("Neg", ["a"], ["y"], name="neg")], "g",
        [helper.make_tensor_value_info("x", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.builtin_passes
def test_the_pass_that_made_the_node_is_blamed_before_a_built_in_that_changed_it_last(
        tmp_path: Path) -> None:
    """Trial WW: a plugin made a node onnxruntime refuses, and NoOpElimination, removing an
    Identity before it, changed it last: GE1601 blamed the built-in, at ge's own line. It
    names both, puts the error down to the plugin (at its line) and points at --verify
    each-pass; nothing is written."""
    error, plugin = _compile_json(tmp_path, _int_abs_model(), MADE_RELU)
    assert (error["code"], error["type"]) == ("GE1601", "RuntimeLoadError")
    message = str(error["message"])
    assert message.startswith(f"{COMPILED}onnxruntime cannot load graph 'g': ")
    assert "Could not find an implementation for Relu(14) node with name 'relu'" in message
    assert message.endswith(
        f"; node 'relu' was made by pass AbsToRelu (AfterInferShape, at {plugin}:6), last "
        "changed by pass NoOpElimination (OriginGraphOptimize): the likely cause is pass "
        f"AbsToRelu, which made it{EACH_PASS}")
    assert (error["pass_name"], error["stage"], error["location"], error["nodes"]) == (
        "AbsToRelu", "AfterInferShape", f"{plugin}:6", ["relu"])
