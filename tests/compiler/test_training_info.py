"""A model whose `training_info` reads or updates values of its inference graph is refused
before anything runs (GE1204): ge's passes treat initializers as constants, and trial Y saw
a trainable weight merged into an equal one and a learning rate removed (the kept
training_info then named values that were gone), and `--opset` drop training_info. One that
shares nothing with the inference graph compiles and keeps it as it was."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import ge
from ge.cli import cli
from ge.errors import UnsupportedModelError


def _vi(name: str) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [3])


def _model(*, shares: bool) -> onnx.ModelProto:
    """y = (x + w) * w2, with w and w2 of equal bytes; the training algorithm updates w2
    from lr (`shares`) or computes from constants of its own."""
    def weight(name: str, values: list[float]) -> onnx.TensorProto:
        return numpy_helper.from_array(np.array(values, np.float32), name)

    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["a"], name="add"),
         helper.make_node("Mul", ["a", "w2"], ["y"], name="mul")], "g", [_vi("x")],
        [_vi("y")], [weight("w", [1, 2, 3]), weight("w2", [1, 2, 3]),
                     numpy_helper.from_array(np.array(0.1, np.float32), "lr")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    info = model.training_info.add()
    if shares:
        info.algorithm.CopyFrom(helper.make_graph(
            [helper.make_node("Mul", ["w2", "lr"], ["d"]),
             helper.make_node("Sub", ["w2", "d"], ["w2_new"])], "algo", [], [_vi("w2_new")]))
        info.update_binding.add(key="w2", value="w2_new")
    else:
        info.algorithm.CopyFrom(helper.make_graph(
            [helper.make_node("Neg", ["k"], ["k_neg"])], "algo", [], [_vi("k_neg")],
            [weight("k", [4, 5, 6])]))
    onnx.checker.check_model(model, full_check=True)
    return model


MESSAGE = ("the model's training_info reads or updates values of its inference graph ('w2', "
           "'lr'), which ge's passes would fold, merge or remove as constants: ge compiles "
           "inference graphs; to compile this one, remove training_info first "
           "(`del model.training_info[:]` with onnx)")


@pytest.mark.builtin_passes
@pytest.mark.parametrize("opset", [None, 18])
def test_training_info_reading_the_inference_graph_is_refused(opset: int | None) -> None:
    model = _model(shares=True)
    before = model.SerializeToString()
    with pytest.raises(UnsupportedModelError) as info:
        ge.compile(model, opset=opset)
    assert info.value.code == "GE1204" and info.value.message == MESSAGE
    assert model.SerializeToString() == before
    graph = ge.graph.load(model)
    count = graph.mutation_count
    with pytest.raises(UnsupportedModelError):
        ge.compile(graph)
    assert graph.mutation_count == count


@pytest.mark.builtin_passes
def test_the_command_says_so_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    source, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(_model(shares=True), source)
    result = CliRunner().invoke(cli, ["compile", str(source), "-o", str(out), "--opset", "18"])
    assert result.exit_code == 1 and result.output == f"ge: [GE1204] {source}: {MESSAGE}\n"
    assert not out.exists()


@pytest.mark.builtin_passes
def test_training_info_sharing_nothing_is_kept(tmp_path: Path) -> None:
    model = _model(shares=False)
    result = ge.compile(model)
    out = tmp_path / "out.onnx"
    result.save(out)
    saved = onnx.load(out)
    assert [t.SerializeToString() for t in saved.training_info] == [
        t.SerializeToString() for t in model.training_info]
    assert [i.name for i in saved.graph.initializer] == ["w"]  # w2 merged into w: constants
