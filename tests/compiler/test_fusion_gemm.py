"""`MatMulAddFusion` (built-in fusion): `MatMul(A, B) + C` → `Gemm(A, B, C)` where that is
exact, nothing elsewhere. Each pass is run as the engine runs it (an `Invocation`: a graph
transaction, the check after the pass, root graph then bodies), the result saved, checked
by onnx's full checker and run in onnxruntime against the original."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from builtin_helpers import (
    I64,
    F,
    assert_fused,
    histogram,
    init,
    load,
    model,
    run_pass,
    sidecar_feeds,
    vi,
)
from onnx import helper, numpy_helper

import ge
import ge.compiler.builtin
from ge.compiler.builtin._support import broadcasts_to
from ge.compiler.builtin.fusion_gemm import MatMulAddFusion, gemm_dtypes
from ge.graph import DataType
from model_paths import all_shared_models

pytestmark = [
    pytest.mark.builtin_passes,  # these tests are about a built-in pass
    pytest.mark.usefixtures("matching"),  # by the search and by match plans
]

node = helper.make_node
MODELS = all_shared_models()
F16 = onnx.TensorProto.FLOAT16
RNG = np.random.default_rng(0)


def broadcast(a: Sequence[int | str], b: Sequence[int | str]) -> Any:
    """The ONNX broadcast of two shapes for a value_info (None: a dim not known here)."""
    rank = max(len(a), len(b))
    a = [1] * (rank - len(a)) + list(a)
    b = [1] * (rank - len(b)) + list(b)
    return [x if x == y or y == 1 else y if x == 1 else None for x, y in zip(a, b)]


def matmul_add(bias_shape: Sequence[int | str] | None, *, x_shape: Sequence[int | str] = (4, 3),
               n: int = 5, bias_first: bool = False, bias_input: bool = False,
               weight_input: bool = False, extra: Sequence[onnx.NodeProto] = (),
               outputs: Sequence[onnx.ValueInfoProto] = (), elem: int = F,
               opset: int = 17) -> onnx.ModelProto:
    """y = x @ w + b with x of `x_shape`, w [K, n], b of `bias_shape` (constants unless
    `*_input`)."""
    dtype = helper.tensor_dtype_to_np_dtype(elem)
    k = x_shape[-1]
    assert isinstance(k, int)
    inputs, inits = [vi("x", elem, x_shape)], []
    if weight_input:
        inputs.append(vi("w", elem, [k, n]))
    else:
        inits.append(init("w", RNG.standard_normal((k, n)), dtype))
    if bias_input:
        inputs.append(vi("b", elem, bias_shape))
    else:
        assert bias_shape is not None
        inits.append(init("b", RNG.standard_normal([int(d) for d in bias_shape]), dtype))
    add = node("Add", ["b", "mm"] if bias_first else ["mm", "b"], ["y"], name="add")
    nodes = [node("MatMul", ["x", "w"], ["mm"], name="mm"), add, *extra]
    y = vi("y", elem, broadcast([*x_shape[:-1], n], bias_shape or []))
    return model(nodes, inputs, [y, *outputs], inits, opset=opset)


# -- where it fires -------------------------------------------------------------------------


@pytest.mark.parametrize("bias_shape", [[5], [1, 5], [4, 5], [4, 1], [], [1], [1, 1]],
                         ids=str)
def test_matmul_add_becomes_gemm_for_every_bias_gemm_broadcasts(
        bias_shape: list[int], tmp_path: Path) -> None:
    source = matmul_add(bias_shape)
    graph = load(source)
    assert run_pass(MatMulAddFusion, graph)
    hist = histogram(graph)
    assert hist.get("Gemm") == 1 and "MatMul" not in hist and "Add" not in hist
    saved = assert_fused(graph, source, tmp_path)
    (gemm,) = saved.graph.node
    assert gemm.op_type == "Gemm" and list(gemm.input) == ["x", "w", "b"]
    assert list(gemm.output) == ["y"]  # the graph output keeps its name


def test_bias_first_matches_too(tmp_path: Path) -> None:
    source = matmul_add([5], bias_first=True)
    graph = load(source)
    assert run_pass(MatMulAddFusion, graph)
    assert histogram(graph).get("Gemm") == 1
    assert_fused(graph, source, tmp_path)


def test_non_constant_weight_and_bias_are_fine_for_gemm(tmp_path: Path) -> None:
    source = matmul_add([1, 5], weight_input=True, bias_input=True)
    graph = load(source)
    assert run_pass(MatMulAddFusion, graph)
    assert histogram(graph) == {"Data": 3, "Gemm": 1, "NetOutput": 1}
    assert_fused(graph, source, tmp_path)


def test_symbolic_dims_match_by_name(tmp_path: Path) -> None:
    source = matmul_add(["batch", 1], x_shape=["batch", 3], bias_input=True)
    graph = load(source)
    assert run_pass(MatMulAddFusion, graph)
    assert histogram(graph).get("Gemm") == 1
    assert_fused(graph, source, tmp_path)


def test_float16_and_double_fuse(tmp_path: Path) -> None:
    for elem in (F16, onnx.TensorProto.DOUBLE):
        source = matmul_add([5], elem=elem)
        graph = load(source)
        assert run_pass(MatMulAddFusion, graph)
        assert histogram(graph).get("Gemm") == 1
        assert_fused(graph, source, tmp_path, tol=1e-2 if elem == F16 else 1e-4)


def test_the_result_feeding_further_nodes_keeps_them_and_their_names(tmp_path: Path) -> None:
    source = model(
        [node("MatMul", ["x", "w"], ["mm"]), node("Add", ["mm", "b"], ["h"]),
         node("Relu", ["h"], ["y"]), node("Neg", ["h"], ["z"])],
        [vi("x", F, [4, 3])], [vi("y", F, [4, 5]), vi("z", F, [4, 5]), vi("h", F, [4, 5])],
        [init("w", RNG.standard_normal((3, 5))), init("b", RNG.standard_normal(5))])
    graph = load(source)
    assert run_pass(MatMulAddFusion, graph)
    assert histogram(graph).get("Gemm") == 1
    saved = assert_fused(graph, source, tmp_path)
    assert [o.name for o in saved.graph.output] == ["y", "z", "h"]


def test_a_chain_of_two_linears_fuses_both(tmp_path: Path) -> None:
    source = model(
        [node("MatMul", ["x", "w1"], ["m1"]), node("Add", ["m1", "b1"], ["h"]),
         node("Relu", ["h"], ["r"]), node("MatMul", ["r", "w2"], ["m2"]),
         node("Add", ["b2", "m2"], ["y"])],
        [vi("x", F, [4, 3])], [vi("y", F, [4, 2])],
        [init("w1", RNG.standard_normal((3, 5))), init("b1", RNG.standard_normal(5)),
         init("w2", RNG.standard_normal((5, 2))), init("b2", RNG.standard_normal((4, 2)))])
    graph = load(source)
    assert run_pass(MatMulAddFusion, graph)
    assert histogram(graph).get("Gemm") == 2 and "MatMul" not in histogram(graph)
    assert_fused(graph, source, tmp_path)


def test_inside_an_if_branch(tmp_path: Path) -> None:
    then = helper.make_graph(
        [node("MatMul", ["x", "w"], ["tm"]), node("Add", ["tm", "b"], ["t"])],
        "then", [], [vi("t", F, [4, 5])])
    other = helper.make_graph([node("Neg", ["x"], ["e0"]), node("MatMul", ["e0", "w"], ["e"])],
                              "else", [], [vi("e", F, [4, 5])])
    source = model([node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                   [vi("c", onnx.TensorProto.BOOL, []), vi("x", F, [4, 3])], [vi("y", F, [4, 5])],
                   [init("w", RNG.standard_normal((3, 5))), init("b", RNG.standard_normal(5))])
    graph = load(source)
    assert run_pass(MatMulAddFusion, graph)
    assert histogram(graph, everywhere=True).get("Gemm") == 1
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    assert_fused(graph, source, tmp_path,
                 [{"c": np.array(flag), "x": x} for flag in (True, False)])


# -- where it must not fire -----------------------------------------------------------------


def assert_untouched(source: onnx.ModelProto, tmp_path: Path,
                     feeds: Sequence[dict[str, np.ndarray]] | None = None) -> None:
    graph = load(source)
    before = histogram(graph)
    assert not run_pass(MatMulAddFusion, graph)
    assert histogram(graph) == before
    assert_fused(graph, source, tmp_path, feeds)


def test_not_with_a_3d_activation(tmp_path: Path) -> None:
    assert_untouched(matmul_add([5], x_shape=[2, 4, 3]), tmp_path)


def test_not_when_the_matmul_result_is_also_a_graph_output(tmp_path: Path) -> None:
    assert_untouched(matmul_add([5], outputs=[vi("mm", F, [4, 5])]), tmp_path)


def test_not_when_the_matmul_result_has_another_consumer(tmp_path: Path) -> None:
    source = matmul_add([5], extra=[node("Relu", ["mm"], ["r"])], outputs=[vi("r", F, [4, 5])])
    assert_untouched(source, tmp_path)


@pytest.mark.parametrize("bias_shape", [[1, 1, 5], [2, 4, 5], [2, 1, 1]], ids=str)
def test_not_when_the_bias_would_grow_the_product(bias_shape: list[int], tmp_path: Path
                                                  ) -> None:
    assert_untouched(matmul_add(bias_shape), tmp_path)


def test_not_when_the_bias_dims_are_not_provably_those_of_the_product(tmp_path: Path) -> None:
    # [batch] against [4, 5]: onnxruntime broadcasts when batch is 5 or 1, Gemm cannot know.
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    b = [RNG.standard_normal(shape).astype(np.float32) for shape in ((5,), (1,), (4, 1))]
    assert_untouched(matmul_add(["n"], bias_input=True), tmp_path,
                     [{"x": x, "b": b[0]}, {"x": x, "b": b[1]}])
    assert_untouched(matmul_add(["other", 1], x_shape=["batch", 3], bias_input=True), tmp_path,
                     [{"x": x, "b": b[2]}])


def test_not_for_integer_types(tmp_path: Path) -> None:
    source = model([node("MatMul", ["x", "w"], ["mm"]), node("Add", ["mm", "b"], ["y"])],
                   [vi("x", I64, [4, 3])], [vi("y", I64, [4, 5])],
                   [init("w", np.ones((3, 5)), np.int64), init("b", np.ones(5), np.int64)])
    graph = load(source)
    assert not run_pass(MatMulAddFusion, graph)


def test_not_for_a_matrix_vector_product(tmp_path: Path) -> None:
    source = model([node("MatMul", ["x", "w"], ["mm"]), node("Add", ["mm", "b"], ["y"])],
                   [vi("x", F, [4, 3])], [vi("y", F, [4])],
                   [init("w", RNG.standard_normal(3)), init("b", RNG.standard_normal(4))])
    assert_untouched(source, tmp_path)


def test_gemm_types_by_opset() -> None:
    assert gemm_dtypes(6) == frozenset()
    assert DataType.DT_BF16 not in gemm_dtypes(12)
    assert {DataType.DT_FLOAT, DataType.DT_BF16} <= gemm_dtypes(13)
    assert broadcasts_to([], [4, 5]) and broadcasts_to([4, 1], [4, 5])
    assert not broadcasts_to([5, 1], [4, 5]) and not broadcasts_to([-1], [4, 5])
    assert broadcasts_to(["b", 5], ["b", 5]) and not broadcasts_to(["c", 5], ["b", 5])


# -- vendored models and the whole compiler -------------------------------------------------


@pytest.mark.parametrize("name", ["vit_tiny", "distilbert_tiny", "t5_encoder_tiny"])
def test_transformer_linears_on_3d_activations_are_left_alone(name: str) -> None:
    path = next(p for p in MODELS if p.stem == name)
    graph = load(path)
    assert histogram(graph).get("MatMul", 0) > 0
    assert not run_pass(MatMulAddFusion, graph)


@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_every_vendored_model_keeps_its_numbers(path: Path, tmp_path: Path) -> None:
    graph = load(path)
    run_pass(MatMulAddFusion, graph)
    source = onnx.load(path)
    assert_fused(graph, source, tmp_path, sidecar_feeds(path))


def test_through_ge_compile(tmp_path: Path) -> None:
    source = matmul_add([1, 5])
    result = ge.compile(source, verify=True)
    assert result.verification is not None and result.verification.ok
    assert result.report.ops_after.get("Gemm") == 1
    assert "MatMul" not in result.report.ops_after
    assert "MatMulAddFusion" in result.report.passes_that_changed()
    result.save(tmp_path / "out.onnx")
    onnx.checker.check_model(str(tmp_path / "out.onnx"), full_check=True)
    assert [o.name for o in onnx.load(tmp_path / "out.onnx").graph.output] == ["y"]


def test_a_sum_read_by_an_if_branch_is_fused_and_still_read(tmp_path: Path) -> None:
    then = helper.make_graph([node("Relu", ["h"], ["t"])], "then", [], [vi("t", F, [4, 5])])
    other = helper.make_graph([node("Neg", ["h"], ["e"])], "else", [], [vi("e", F, [4, 5])])
    source = model([node("MatMul", ["x", "w"], ["mm"]), node("Add", ["mm", "b"], ["h"]),
                    node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                   [vi("c", onnx.TensorProto.BOOL, []), vi("x", F, [4, 3])], [vi("y", F, [4, 5])],
                   [init("w", RNG.standard_normal((3, 5))), init("b", RNG.standard_normal(5))])
    graph = load(source)
    assert run_pass(MatMulAddFusion, graph)
    assert histogram(graph).get("Gemm") == 1
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    assert_fused(graph, source, tmp_path, [{"c": np.array(f), "x": x} for f in (True, False)])


def test_a_refused_binding_falls_through_to_the_other_order_of_the_inputs(tmp_path: Path
                                                                           ) -> None:
    """Add(MatMul(v, w), MatMul(x, w)): bound first as MatMul(v, w) + C, refused (v is 1-D);
    the other order, MatMul(x, w) + C with C the [4] vector product, is a valid Gemm."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MatMul", ["v", "w"], ["vw"], name="mv"),
             helper.make_node("MatMul", ["x", "w"], ["xw"], name="mm"),
             helper.make_node("Add", ["vw", "xw"], ["y"], name="add")]
    source = helper.make_model(
        helper.make_graph(nodes, "g", [vi("v", F, [4]), vi("x", F, [2, 4])], [vi("y", F, [2, 4])],
                          [numpy_helper.from_array(rng.standard_normal((4, 4)).astype(
                              np.float32), "w")]),
        opset_imports=[helper.make_opsetid("", 17)])
    graph = load(source)
    assert run_pass(MatMulAddFusion, graph)
    assert histogram(graph).get("Gemm") == 1 and histogram(graph).get("MatMul") == 1
    assert_fused(graph, source, tmp_path)
