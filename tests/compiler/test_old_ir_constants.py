"""Models of ir_version < 4: their initializers are constants, and new constants are
`Constant` operators.

In IR 3 (the ONNX model zoo's opset-7 to 9 models) an initializer must also be a graph
input. onnxruntime reads such an input as the constant (it neither lists nor accepts it as
an input), and so does ge: its Const node folds like any weight, and saving writes it back
as input and initializer. A value ConstantFolding made was written as an initializer
alone, so ge's own save refused its output (GE1003) and the compilation failed (trial D:
the zoo's SqueezeNet with --opset 20, whose converted Softmax reads a foldable Shape): new
constants are written as `Constant` operators.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
import ge.graph

pytestmark = pytest.mark.builtin_passes  # (ConstantFolding makes the constant)


def _ir3_model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Shape", ["x"], ["s"], name="shape"),
         helper.make_node("Cast", ["s"], ["c"], name="cast", to=TensorProto.FLOAT),
         helper.make_node("Add", ["x", "c"], ["y"], name="add")],
        "ir3", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)], ir_version=3)
    onnx.checker.check_model(model, full_check=True)
    return model


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    """The output for `x`, the model's one input as onnxruntime reads it (at IR 3 the
    initializers listed as inputs are constants, not inputs)."""
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["x"]
    return session.run(None, {"x": x})[0]


def test_a_folded_value_of_an_ir3_model_is_a_constant_operator(tmp_path: Path) -> None:
    model = _ir3_model()
    result = ge.compile(model)
    out = tmp_path / "out.onnx"
    result.save(out)
    saved = onnx.load(out)
    onnx.checker.check_model(saved, full_check=True)
    assert saved.ir_version == 3
    assert [n.op_type for n in saved.graph.node] == ["Constant", "Add"]
    assert not saved.graph.initializer
    assert [i.name for i in saved.graph.input] == ["x"]
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_array_equal(_run(saved, x), _run(model, x))


def test_an_ir4_model_still_gets_initializers() -> None:
    model = _ir3_model()
    model.ir_version = 4
    saved = ge.compile(model).to_onnx()
    assert [n.op_type for n in saved.graph.node] == ["Add"]
    assert len(saved.graph.initializer) == 1


def _ir3_conv_bn(weights_first: bool = True) -> onnx.ModelProto:
    """Conv + BatchNormalization + Relu at IR 3, every weight an input as IR 3 requires (the
    zoo's opset-7 ResNets are written so); the Conv's weight listed before `x`."""
    rng = np.random.default_rng(0)

    def tensor(name: str, *shape: int, positive: bool = False) -> onnx.TensorProto:
        values = rng.uniform(0.5, 1.5, shape) if positive else rng.standard_normal(shape)
        return numpy_helper.from_array(values.astype(np.float32), name)

    inits = [tensor("W", 4, 3, 3, 3), tensor("B", 4), tensor("scale", 4, positive=True),
             tensor("bias", 4), tensor("mean", 4), tensor("var", 4, positive=True)]
    weights = [helper.make_tensor_value_info(t.name, TensorProto.FLOAT, list(t.dims))
               for t in inits]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    inputs = [weights[0], x, *weights[1:]] if weights_first else [x, *weights]
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1]),
         helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["bn"],
                          name="bn"),
         helper.make_node("Relu", ["bn"], ["y"], name="relu")],
        "conv_bn", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 7)], ir_version=3)
    onnx.checker.check_model(model, full_check=True)
    return model


def test_the_weights_an_ir3_model_lists_as_inputs_are_constants(tmp_path: Path) -> None:
    """As onnxruntime reads IR 3 (its initializers are constants, not inputs to feed): the
    BatchNormalization folds into the Conv (trial E: it stayed, as if the weights could
    change), and the written model has `x` for its only input."""
    model = _ir3_conv_bn()
    graph = ge.graph.load(model)
    assert [n.get_output_name(0) for n in graph.get_data_nodes()] == ["x"]
    result = ge.compile(model, verify=True)
    assert result.report.rewrites_by_pass().get("ConvBatchNormFusion") == 1
    out = tmp_path / "out.onnx"
    result.save(out)
    saved = onnx.load(out)
    onnx.checker.check_model(saved, full_check=True)
    assert saved.ir_version == 3
    assert [i.name for i in saved.graph.input] == ["x"]
    assert [n.op_type for n in saved.graph.node] == ["Constant", "Constant", "Conv", "Relu"]
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(_run(saved, x), _run(model, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("weights_first", [True, False])
def test_an_ir3_models_constant_inputs_are_written_back_in_place(
        tmp_path: Path, weights_first: bool) -> None:
    """Untouched, the model saves byte for byte; touched, every weight still there is an
    input and an initializer again, in the input order read."""
    model = _ir3_conv_bn(weights_first)
    path = tmp_path / "in.onnx"
    onnx.save(model, path)
    graph = ge.graph.load(path)
    graph.save(tmp_path / "same.onnx")
    assert (tmp_path / "same.onnx").read_bytes() == path.read_bytes()
    relu = graph.nodes_of_type("Relu")[0]
    graph.replace_all_uses(relu, 0, *relu.get_input_producer(0))
    graph.remove_node(relu)  # a touched graph, every weight kept
    saved = graph.to_onnx()
    onnx.checker.check_model(saved, full_check=True)
    assert [i.name for i in saved.graph.input] == [i.name for i in model.graph.input]
    assert [i.type for i in saved.graph.input] == [i.type for i in model.graph.input]
    assert sorted(t.name for t in saved.graph.initializer) == sorted(
        t.name for t in model.graph.initializer)
    assert not [n for n in saved.graph.node if n.op_type == "Constant"]


def test_inspect_calls_an_ir3_models_initialized_inputs_constants(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ge.cli import cli

    path = tmp_path / "m.onnx"
    onnx.save(_ir3_conv_bn(), path)
    result = CliRunner().invoke(cli, ["inspect", str(path), "--json"])
    assert result.exit_code == 0, result.output
    inputs = {i["name"]: (i["has_default"], i["constant"])
              for i in json.loads(result.stdout)["inputs"]}
    assert inputs["x"] == (False, False) and inputs["W"] == (True, True)
    text = CliRunner().invoke(cli, ["inspect", str(path)]).stdout
    assert "constant (initializer)" in text
