"""The built-in fusion passes say why they refuse a match (`context.set_error_message`, the
public API a plugin uses): `ge passes explain` shows the reason beside the match, and the
compilation's report counts it. Before, explain said only "meet_requirements returned
False: the pass refuses this match" for each of 61,906 refused candidates of a transformer,
never that its MatMuls are 3-D where Gemm takes 2-D operands.

The reasons name the cause, never a node or dims (the report keeps 5 distinct messages),
and saying them changes nothing else: the models below compile to what they were."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import ge
from ge.cli import cli

F = TensorProto.FLOAT


def _model(nodes: list[onnx.NodeProto], inputs: dict[str, list[int]], output: list[int],
           constants: dict[str, np.ndarray], opset: int = 17) -> onnx.ModelProto:
    """A checked model of `nodes`, float inputs and output "y", initializers `constants`."""
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, F, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info("y", F, output)],
        [numpy_helper.from_array(v.astype(np.float32), n) for n, v in constants.items()])
    made = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(made, full_check=True)
    return made


def batched_matmul_add() -> onnx.ModelProto:
    """A transformer's linear layer: [2, 4, 8] @ [8, 16] + [16], a 3-D MatMul."""
    return _model([helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
                   helper.make_node("Add", ["m", "b"], ["y"], name="add")],
                  {"x": [2, 4, 8]}, [2, 4, 16], {"w": np.ones((8, 16)), "b": np.ones(16)})


def layer_norm(mean_axes: list[int], var_axes: list[int], eps: float) -> onnx.ModelProto:
    """A layer norm in primitives over X [2, 5, 16] (opset 17: ReduceMean's axes attributes)."""
    make = helper.make_node
    return _model([make("ReduceMean", ["x"], ["mean"], name="mean", axes=mean_axes),
                   make("Sub", ["x", "mean"], ["d"], name="sub"),
                   make("Pow", ["d", "two"], ["sq"], name="pow"),
                   make("ReduceMean", ["sq"], ["var"], name="var", axes=var_axes),
                   make("Add", ["var", "eps"], ["ve"], name="add_eps"),
                   make("Sqrt", ["ve"], ["std"], name="sqrt"),
                   make("Div", ["d", "std"], ["n"], name="div"),
                   make("Mul", ["n", "gamma"], ["scaled"], name="mul"),
                   make("Add", ["scaled", "beta"], ["y"], name="add_beta")],
                  {"x": [2, 5, 16]}, [2, 5, 16],
                  {"two": np.array(2.0), "eps": np.array(eps), "gamma": np.full(16, 2.0),
                   "beta": np.full(16, 0.5)})


def conv_batch_norm(*, weight_input: bool = False, training: bool = False) -> onnx.ModelProto:
    """Conv [1, 3, 8, 8] -> [1, 4, 6, 6] then BatchNormalization, its weight a graph input
    (`weight_input`) or a constant, in training mode or inference (opset 15)."""
    stats = {n: np.full(4, v) for n, v in (("s", 1.5), ("bb", 0.5), ("mu", 0.1), ("var", 2.0))}
    constants = stats if weight_input else {"w": np.ones((4, 3, 3, 3)), **stats}
    inputs = {"x": [1, 3, 8, 8], **({"w": [4, 3, 3, 3]} if weight_input else {})}
    outputs = ["y", "running_mean", "running_var"] if training else ["y"]
    bn = helper.make_node("BatchNormalization", ["c", "s", "bb", "mu", "var"], outputs,
                          name="bn", training_mode=int(training))
    return _model([helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), bn],
                  inputs, [1, 4, 6, 6], constants, opset=15)


def gelu(divisor: float, opset: int = 20) -> onnx.ModelProto:
    """The erf form of GELU, 0.5 * X * (1 + erf(X / divisor)), over X [2, 8]."""
    make = helper.make_node
    return _model([make("Div", ["x", "root2"], ["s"], name="div"),
                   make("Erf", ["s"], ["e"], name="erf"),
                   make("Add", ["e", "one"], ["t"], name="add"),
                   make("Mul", ["x", "half"], ["h"], name="mul_half"),
                   make("Mul", ["h", "t"], ["y"], name="mul")],
                  {"x": [2, 8]}, [2, 8],
                  {"root2": np.array(divisor), "one": np.array(1.0), "half": np.array(0.5)},
                  opset=opset)


#: (pass, model, the reason it gives, the operators the compiled model has besides its
#: constants: those of the source model).
CASES: dict[str, tuple[str, Callable[[], onnx.ModelProto], str, dict[str, int]]] = {
    "matmul_3d": ("MatMulAddFusion", batched_matmul_add,
                  "MatMul's operands are not both 2-D (a batched or vector MatMul): Gemm "
                  "takes 2-D A and B", {"MatMul": 1, "Add": 1}),
    "layer_norm_axes": ("LayerNormFusion", lambda: layer_norm([-1], [-2, -1], 1e-5),
                        "the ReduceMeans reduce different axes",
                        {"ReduceMean": 2, "Sub": 1, "Pow": 1, "Add": 2, "Sqrt": 1, "Div": 1,
                         "Mul": 1}),
    "layer_norm_eps": ("LayerNormFusion", lambda: layer_norm([-1], [-1], -1e-5),
                       "epsilon is not a constant >= 0",
                       {"ReduceMean": 2, "Sub": 1, "Pow": 1, "Add": 2, "Sqrt": 1, "Div": 1,
                        "Mul": 1}),
    "conv_weight_input": ("ConvBatchNormFusion", lambda: conv_batch_norm(weight_input=True),
                          "the Conv's weight is not a floating-point constant of rank 3 or "
                          "more", {"Conv": 1, "BatchNormalization": 1}),
    "bn_training": ("ConvBatchNormFusion", lambda: conv_batch_norm(training=True),
                    "the BatchNormalization is in training mode",
                    {"Conv": 1, "BatchNormalization": 1}),
    "gelu_constant": ("GeluFusion", lambda: gelu(1.4143),
                      "a constant is not GELU's divisor sqrt(2) (a one-element constant "
                      "within a relative 1e-5 of it, or of its type's precision)",
                      {"Div": 1, "Erf": 1, "Add": 1, "Mul": 2}),
}


def _save(model: onnx.ModelProto, path: Path) -> Path:
    onnx.save(model, path)
    return path


@pytest.mark.builtin_passes
@pytest.mark.parametrize("case", CASES)
def test_the_report_counts_the_reason_and_the_model_is_unchanged(case: str) -> None:
    name, make, reason, ops = CASES[case]
    result = ge.compile(make())
    rows = [r for r in result.report.by_pass() if r["name"] == name]
    assert rows and all(r["rewrites"] == 0 for r in rows)  # it still does not fire
    for row in rows:  # BuiltinFusion, then each OriginGraphOptimize round: one cause
        assert row["refusal_reasons"] == [{"message": reason, "count": row["refusals"]}]
    assert {op: n for op, n in result.report.ops_after.items() if op != "Const"} == ops
    assert result.report.refusal_notes() == []  # a built-in's refusals: no line of ge compile


@pytest.mark.builtin_passes
@pytest.mark.parametrize("case", ["matmul_3d", "layer_norm_axes", "conv_weight_input",
                                  "gelu_constant"])
def test_explain_shows_the_reason(case: str, tmp_path: Path) -> None:
    name, make, reason, _ = CASES[case]
    model = _save(make(), tmp_path / "m.onnx")
    result = CliRunner().invoke(cli, ["passes", "explain", name, str(model), "--top", "1"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    first = next(line for line in result.stdout.splitlines() if line.startswith("    1. "))
    assert (f"meet_requirements returned False: the pass refuses this match (the pass says: "
            f"{reason}); its inputs: ") in first


@pytest.mark.builtin_passes
def test_one_reason_for_many_layers() -> None:
    """Twelve 3-D linear layers refused for one cause make one reason counted twelve times,
    not twelve reasons of which the report keeps five."""
    nodes: list[onnx.NodeProto] = []
    constants: dict[str, np.ndarray] = {}
    for i in range(12):
        nodes += [helper.make_node("MatMul", [f"h{i}", f"w{i}"], [f"m{i}"], name=f"mm{i}"),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], [f"h{i + 1}"], name=f"add{i}")]
        constants |= {f"w{i}": np.eye(8) * (i + 1), f"b{i}": np.full(8, float(i))}
    nodes.append(helper.make_node("Identity", ["h12"], ["y"], name="out"))
    result = ge.compile(_model(nodes, {"h0": [2, 4, 8]}, [2, 4, 8], constants))
    (row, *_) = [r for r in result.report.by_pass() if r["name"] == "MatMulAddFusion"]
    assert row["refusals"] == 12 and row["rewrites"] == 0
    assert row["refusal_reasons"] == [{"message": CASES["matmul_3d"][2], "count": 12}]
