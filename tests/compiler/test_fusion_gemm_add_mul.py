"""`GemmAddMulFusion` (built-in): a linear layer's output scaled and shifted by per-feature
constants folds into its weights. Keras' Dense + BatchNormalization reaches ONNX through
tf2onnx as MatMul(x, W) [→ Add(B)] → Mul(s) → Add(t) (or Gemm → Mul → Add): W' = W · s
per output column, B' = B · s + t. The fold fires on models built for it, for an x of any
rank and for the Gemm form (transB, alpha, beta, C of any shape Gemm takes), and on no near
miss; the rewritten model passes onnx's full checker, keeps its output names and computes
what the original computes in onnxruntime (rtol = atol = 1e-5)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from builtin_helpers import (
    F,
    affine_steps,
    assert_fused,
    histogram,
    init,
    load,
    model,
    run_pass,
    vi,
)
from onnx import helper

import ge
from ge.compiler.builtin import BUILTIN_PASSES
from ge.compiler.builtin.fusion_gemm import MatMulAddFusion
from ge.compiler.builtin.fusion_linear_affine import GemmAddMulFusion

pytestmark = [
    pytest.mark.builtin_passes,  # these tests are about a built-in pass
    pytest.mark.usefixtures("matching"),  # by the search and by match plans
]

node = helper.make_node
RNG = np.random.default_rng(0)
TOL = 1e-5
K, N = 16, 8

#: (op, constant shape or None for `[N]`, constant first)
Step = tuple[str, Sequence[int] | None, bool]
BN: list[Step] = [("Mul", None, False), ("Add", None, False)]  # tf2onnx's BatchNormalization


def dense_then(ops: Sequence[Step], *, x_shape: Sequence[int] = (4, K), bias: bool = True,
               bias_shape: Sequence[int] = (N,), operand_input: bool = False,
               weight_input: bool = False, bias_input: bool = False,
               outputs: Sequence[onnx.ValueInfoProto] = (),
               y_shape: Sequence[int] | None = None, opset: int = 17) -> onnx.ModelProto:
    """MatMul(x, w [16, 8]) [+ b], then each (op, constant shape, constant first) in turn;
    the last result is y (of `y_shape`, by default x's leading dims and 8)."""
    inputs = [vi("x", F, list(x_shape))]
    inits: list[onnx.TensorProto] = []
    if weight_input:
        inputs.append(vi("w", F, [K, N]))
    else:
        inits.append(init("w", RNG.standard_normal((K, N))))
    nodes = [node("MatMul", ["x", "w"], ["t0"], name="dense/MatMul")]
    if bias:
        if bias_input:
            inputs.append(vi("b", F, list(bias_shape)))
        else:
            inits.append(init("b", RNG.standard_normal(bias_shape)))
        nodes[0].output[0] = "mm"
        nodes.append(node("Add", ["mm", "b"], ["t0"], name="dense/BiasAdd"))
    nodes += _steps(ops, inputs, inits, operand_input)
    shape = [*x_shape[:-1], N] if y_shape is None else list(y_shape)
    return model(nodes, inputs, [vi("y", F, shape), *outputs], inits, opset=opset)


def _steps(ops: Sequence[Step], inputs: list[onnx.ValueInfoProto],
           inits: list[onnx.TensorProto], operand_input: bool) -> list[onnx.NodeProto]:
    return affine_steps(ops, default_shape=[N], inputs=inputs, inits=inits,
                        operand_input=operand_input, rng=RNG, prefix="bn/")


def gemm_then(ops: Sequence[Step], *, c_shape: Sequence[int] | None = (N,), trans_a: int = 0,
              trans_b: int = 0, alpha: float = 1.0, beta: float = 1.0, c_input: bool = False,
              opset: int = 17) -> onnx.ModelProto:
    """Gemm(x, w[, c]) with 4 rows and 8 output features, then the steps as `dense_then`."""
    x_shape = [K, 4] if trans_a else [4, K]
    inputs = [vi("x", F, x_shape)]
    inits = [init("w", RNG.standard_normal((N, K) if trans_b else (K, N)))]
    args = ["x", "w"]
    if c_shape is not None:
        args.append("c")
        if c_input:
            inputs.append(vi("c", F, list(c_shape)))
        else:
            inits.append(init("c", RNG.standard_normal(c_shape)))
    nodes = [node("Gemm", args, ["t0"], name="dense/Gemm", transA=trans_a, transB=trans_b,
                  alpha=alpha, beta=beta)]
    nodes += _steps(ops, inputs, inits, False)
    return model(nodes, inputs, [vi("y", F, [4, N])], inits, opset=opset)


def operators(graph: ge.graph.Graph) -> dict[str, int]:
    return {k: v for k, v in histogram(graph).items() if k not in ("Const", "Data", "NetOutput")}


def assert_folded(source: onnx.ModelProto, tmp_path: Path,
                  expected: dict[str, int]) -> onnx.ModelProto:
    graph = load(source)
    assert run_pass(GemmAddMulFusion, graph)
    assert operators(graph) == expected
    saved = assert_fused(graph, source, tmp_path, tol=TOL)
    before = graph.mutation_count
    assert not run_pass(GemmAddMulFusion, graph)  # a second run changes nothing
    assert graph.mutation_count == before
    return saved


def assert_untouched(source: onnx.ModelProto, tmp_path: Path) -> None:
    graph = load(source)
    before = histogram(graph)
    assert not run_pass(GemmAddMulFusion, graph)
    assert histogram(graph) == before
    assert_fused(graph, source, tmp_path, tol=TOL)


# -- the MatMul form ------------------------------------------------------------------------


@pytest.mark.parametrize("x_shape", [(4, K), (2, 5, K), (2, 3, 5, K), (K,)],
                         ids=["2d", "3d", "4d", "1d"])
def test_dense_batch_norm_folds_into_matmul_and_bias(x_shape: tuple[int, ...],
                                                     tmp_path: Path) -> None:
    """MatMul, Add(B), Mul(s), Add(t) → MatMul(x, W · s) + (B · s + t), for x of any rank."""
    saved = assert_folded(dense_then(BN, x_shape=x_shape), tmp_path, {"MatMul": 1, "Add": 1})
    matmul, add = saved.graph.node
    assert matmul.name == "dense/MatMul" and add.name == "dense/BiasAdd"
    # the bias folded twice (· s, then + t) keeps one suffix and gets a number
    assert list(matmul.input) == ["x", "w_folded"] and add.input[1].startswith("b_folded")
    assert "_folded_folded" not in add.input[1] and list(add.output) == ["y"]


def test_without_a_bias_the_shift_is_the_bias(tmp_path: Path) -> None:
    """Dense(use_bias=False) + BN: MatMul, Mul(s), Add(t) → MatMul(x, W · s) + t."""
    saved = assert_folded(dense_then(BN, bias=False), tmp_path, {"MatMul": 1, "Add": 1})
    assert list(saved.graph.node[0].input) == ["x", "w_folded"]


@pytest.mark.parametrize("op", ["Mul", "Add"])
@pytest.mark.parametrize("shape", [[N], [1, N], [1], [], [1, 1]], ids=str)
def test_one_mul_or_add_by_a_feature_constant(op: str, shape: list[int],
                                              tmp_path: Path) -> None:
    assert_folded(dense_then([(op, shape, False)]), tmp_path, {"MatMul": 1, "Add": 1})


def test_a_mul_alone_after_a_matmul(tmp_path: Path) -> None:
    assert_folded(dense_then([("Mul", None, False)], bias=False), tmp_path, {"MatMul": 1})


@pytest.mark.parametrize("bias_shape", [[N], [1, N], [1, 1, N], [1]], ids=str)
def test_bias_and_constants_of_3d_shapes(bias_shape: list[int], tmp_path: Path) -> None:
    source = dense_then([("Mul", [1, 1, N], False), ("Add", [1, N], False)], x_shape=(2, 5, K),
                        bias_shape=bias_shape)
    assert_folded(source, tmp_path, {"MatMul": 1, "Add": 1})


def test_constant_first_operands_match_too(tmp_path: Path) -> None:
    source = dense_then([("Mul", None, True), ("Add", [1, N], True)])
    assert_folded(source, tmp_path, {"MatMul": 1, "Add": 1})


def test_a_chain_of_scales_and_shifts_folds(tmp_path: Path) -> None:
    source = dense_then([("Mul", None, False), ("Mul", [1], False), ("Add", None, False),
                         ("Add", [], True)], x_shape=(2, 5, K))
    graph = load(source)
    for _ in range(3):
        run_pass(GemmAddMulFusion, graph)
    assert operators(graph) == {"MatMul": 1, "Add": 1}
    assert_fused(graph, source, tmp_path, tol=TOL)


# -- the Gemm form --------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [
    {}, {"c_shape": [4, N]}, {"c_shape": [4, 1]}, {"c_shape": []}, {"c_shape": [1, N]},
    {"c_shape": None}, {"trans_b": 1}, {"trans_b": 1, "alpha": 0.5, "beta": 2.0},
    {"trans_a": 1, "trans_b": 1, "c_shape": [4, 1], "beta": -1.5},
    {"c_shape": None, "beta": 2.0},
], ids=["c", "c-mn", "c-m1", "c-scalar", "c-1n", "no-c", "transB", "transB-alpha-beta",
        "transA", "no-c-beta"])
def test_gemm_mul_add_folds_into_one_gemm(kwargs: dict[str, Any], tmp_path: Path) -> None:
    saved = assert_folded(gemm_then(BN, **kwargs), tmp_path, {"Gemm": 1})
    (gemm,) = saved.graph.node
    attrs = {a.name: helper.get_attribute_value(a) for a in gemm.attribute}
    assert gemm.name == "dense/Gemm" and list(gemm.output) == ["y"] and len(gemm.input) == 3
    assert attrs.get("beta", 1.0) == 1.0
    assert attrs.get("transB", 0) == kwargs.get("trans_b", 0)
    assert attrs.get("alpha", 1.0) == kwargs.get("alpha", 1.0)


@pytest.mark.parametrize("c_shape", [(N,), None], ids=["c", "no-c"])
def test_gemm_mul_alone(c_shape: tuple[int, ...] | None, tmp_path: Path) -> None:
    saved = assert_folded(gemm_then([("Mul", [1, N], True)], c_shape=c_shape, trans_b=1),
                          tmp_path, {"Gemm": 1})
    assert len(saved.graph.node[0].input) == (2 if c_shape is None else 3)


def test_gemm_at_opset_9_where_c_is_required(tmp_path: Path) -> None:
    assert_folded(gemm_then(BN, opset=9), tmp_path, {"Gemm": 1})


# -- near misses ----------------------------------------------------------------------------


@pytest.mark.parametrize(("shape", "x_shape"), [
    ([4, 1], (4, K)),  # per row
    ([4, N], (4, K)),  # per element
    ([1, 1, N], (4, K)),  # broadcasts the output up to rank 3
    ([5, 1], (2, 5, K)),  # over the sequence
    ([2, 1, 1], (2, 5, K)),  # over the batch
], ids=["rows", "elements", "higher-rank", "sequence", "batch"])
@pytest.mark.parametrize("op", ["Mul", "Add"])
def test_not_for_a_constant_that_varies_over_other_axes(op: str, shape: list[int],
                                                        x_shape: tuple[int, ...],
                                                        tmp_path: Path) -> None:
    y_shape = [1, 4, N] if len(shape) > len(x_shape) else None
    source = dense_then([(op, shape, False)], x_shape=x_shape, y_shape=y_shape)
    assert_untouched(source, tmp_path)


def test_not_for_non_constant_scales_weights_or_biases(tmp_path: Path) -> None:
    assert_untouched(dense_then(BN, operand_input=True), tmp_path)
    assert_untouched(dense_then(BN, weight_input=True), tmp_path)
    assert_untouched(dense_then(BN[:1], bias_input=True), tmp_path)  # a residual, say
    assert_untouched(gemm_then([("Mul", None, False)], c_input=True), tmp_path)
    assert_untouched(gemm_then([("Add", None, False)], c_input=True), tmp_path)


def test_not_when_the_product_is_used_elsewhere(tmp_path: Path) -> None:
    assert_untouched(dense_then(BN[:1], bias=False, outputs=[vi("t0", F, [4, N])]), tmp_path)
    source = dense_then(BN[:1], outputs=[vi("mm", F, [4, N])])
    assert_untouched(source, tmp_path)


def test_not_for_a_batched_weight(tmp_path: Path) -> None:
    source = model([node("MatMul", ["x", "w"], ["p"]), node("Mul", ["p", "s"], ["y"])],
                   [vi("x", F, [2, 4, K])], [vi("y", F, [2, 4, N])],
                   [init("w", RNG.standard_normal((2, K, N))), init("s", RNG.uniform(1, 2, N))])
    assert_untouched(source, tmp_path)


def test_a_bias_add_of_a_shift_alone_stays() -> None:
    """MatMul + t is a linear layer's own form: nothing to fold."""
    graph = load(dense_then([("Add", None, False)], bias=False))
    assert not run_pass(GemmAddMulFusion, graph)


# -- in the compiler ------------------------------------------------------------------------


def test_runs_before_matmul_add_fusion() -> None:
    order = list(BUILTIN_PASSES)
    assert order.index(GemmAddMulFusion) < order.index(MatMulAddFusion)
    spec = GemmAddMulFusion.__ge_builtin__  # type: ignore[attr-defined]
    assert spec.step == "builtin_fusion" and spec.on_by_default


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
def test_the_compiler_makes_one_gemm_of_a_2d_dense_batch_norm(bias: bool) -> None:
    """What is left of a 2-D MatMul + Add becomes a Gemm in the same step."""
    source = dense_then(BN, bias=bias)
    result = ge.compile(source, verify=True, rtol=TOL, atol=TOL)
    assert result.verification is not None and result.verification.ok
    assert set(result.report.ops_after) - {"Const"} == {"Gemm"}
    rewrites = result.report.rewrites_by_pass()
    assert rewrites.get("GemmAddMulFusion") == 2 - (not bias) and rewrites.get(
        "MatMulAddFusion") == 1
    kept = ge.compile(source, disable=["GemmAddMulFusion"])
    assert kept.report.ops_after.get("Mul") == 1


def test_the_compiler_folds_a_3d_dense_batch_norm() -> None:
    source = dense_then(BN, x_shape=(2, 5, K))
    result = ge.compile(source, verify=True, rtol=TOL, atol=TOL)
    assert result.verification is not None and result.verification.ok
    assert set(result.report.ops_after) - {"Const"} == {"MatMul", "Add"}
    assert result.report.ops_after["Add"] == 1


def test_an_output_of_unknown_rank_takes_constants_of_rank_one_or_less(tmp_path: Path) -> None:
    """After a Keras Flatten exported at opset 13, onnx's inference gives the MatMul's input
    no rank: `[N]`, `[1]` and scalar constants still vary over the features only (the
    output has at least one axis, the features last); `[1, N]` might grow a 1-D output."""
    def flattened(shape: Sequence[int]) -> onnx.ModelProto:
        source = dense_then([("Mul", shape, False), ("Add", None, False)], x_shape=(2, K))
        source.graph.node.insert(0, node("Reshape", ["x_in", "target"], ["x"], name="flatten"))
        source.graph.input[0].CopyFrom(vi("x_in", F, [2, 4, K // 4]))
        source.graph.input.append(vi("target", onnx.TensorProto.INT64, ["n"]))
        source.graph.output[0].CopyFrom(vi("y", F, ["rows", N]))
        onnx.checker.check_model(source, full_check=True)
        return source

    feeds = [{"x_in": RNG.standard_normal((2, 4, K // 4)).astype(np.float32),
              "target": np.array([2, K], np.int64)}]
    for shape in ([N], [1], []):
        source = flattened(shape)
        graph = load(source)
        (matmul,) = graph.nodes_of_type("MatMul")
        assert matmul.get_output_desc(0).get_shape().is_unknown_rank()
        assert run_pass(GemmAddMulFusion, graph)
        assert operators(graph) == {"Reshape": 1, "MatMul": 1, "Add": 1}
        assert_fused(graph, source, tmp_path, feeds, tol=TOL)
    graph = load(flattened([1, N]))
    assert not run_pass(GemmAddMulFusion, graph)


def test_a_float16_weight_that_would_underflow_is_not_folded(tmp_path: Path) -> None:
    """W = 1e-4 scaled by 1e-4 is 1e-8, zero in float16: folded, every output went from
    4e-6 to 0 (trial CC). A scale that keeps the weights normal still folds."""
    f16 = onnx.TensorProto.FLOAT16

    def scaled(scale: float) -> onnx.ModelProto:
        return model([node("MatMul", ["x", "w"], ["mm"], name="dense/MatMul"),
                      node("Mul", ["mm", "s"], ["y"], name="bn/Mul")],
                     [vi("x", f16, [2, 4])], [vi("y", f16, [2, 3])],
                     [init("w", np.full((4, 3), 1e-4), np.float16),
                      init("s", np.full(3, scale), np.float16)])

    tiny = scaled(1e-4)
    graph = load(tiny)
    assert not run_pass(GemmAddMulFusion, graph)
    feeds = [{"x": np.full((2, 4), 100.0, np.float16)}]
    saved = assert_fused(graph, tiny, tmp_path, feeds, tol=1e-3)
    assert "Mul" in {n.op_type for n in saved.graph.node}
    graph = load(scaled(0.5))
    assert run_pass(GemmAddMulFusion, graph)
