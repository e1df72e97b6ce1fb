"""`LayerNormFusion` and `RMSNormFusion`: the written-out forms they fuse (both ReduceMean
styles, each normalisation form, operands in either order), what they must leave alone, the
result checked by onnx, with the output names kept and the same outputs in onnxruntime; the
vendored real models, and every one of them compiled with the fusions in the pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.version_converter
import pytest
from builtin_helpers import (
    assert_sound,
    count_rewrites,
    histogram,
    init,
    load,
    ort_run,
)
from norm_models import (
    F16,
    PRIMITIVES,
    assert_unchanged,
    feeds,
    fused_node,
    layer_norm,
    rms_norm,
)
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import ge
import ge.compiler.builtin
from ge.compiler.builtin.fusion_norm import LayerNormFusion, RMSNormFusion
from ge.passes import find_matches
from model_paths import all_shared_models, shared_model
from versions import needs_opset

pytestmark = [
    pytest.mark.builtin_passes,  # these tests are about (future) built-in passes
    pytest.mark.usefixtures("matching"),  # by the search and by match plans
]

# -- LayerNormFusion ------------------------------------------------------------------------


@pytest.mark.parametrize("opset", [17, 18, 21])
@pytest.mark.parametrize("form", ["div", "reciprocal", "one_over"])
@pytest.mark.parametrize("bias", [True, False])
def test_layer_norm_fuses_in_both_reduce_mean_styles(opset: int, form: str,
                                                     bias: bool) -> None:
    source = layer_norm(opset, form=form, bias=bias)
    graph = load(source)
    assert count_rewrites(LayerNormFusion, graph) == 1
    ops = histogram(graph)
    assert ops.get("LayerNormalization") == 1
    assert not set(PRIMITIVES) & set(ops) and "Mul" not in ops and "Add" not in ops
    fused = fused_node(graph, "LayerNormalization")
    assert fused.get_attr("axis") == -1
    assert fused.get_attr("epsilon") == pytest.approx(1e-3, rel=1e-3)
    assert fused.get_inputs_size() == (3 if bias else 2)
    assert fused.get_metadata()["ge.origin_pass"] == "LayerNormFusion"
    exported = assert_sound(graph, source, feeds(), exact=False)
    assert [o.name for o in exported.graph.output] == ["y"]
    assert count_rewrites(LayerNormFusion, graph) == 0  # nothing left to fuse


def test_replacement_takes_the_plan_of_meet_requirements(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The two hooks of one match get two handles of it: the plan meet_requirements made is
    taken by replacement, not made again (it was, on every rewrite): one plan per rewrite,
    the one the fused node carries."""
    plans: list[float] = []
    make = LayerNormFusion._plan

    def counted(self: LayerNormFusion, c: Any) -> Any:
        plan = make(self, c)
        plans.append(plan.epsilon)
        return plan

    monkeypatch.setattr(LayerNormFusion, "_plan", counted)
    for source in (layer_norm(17), layer_norm(18, bias=False)):
        graph = load(source)
        assert count_rewrites(LayerNormFusion, graph) == 1
        assert plans == [pytest.approx(1e-3, rel=1e-3)]
        assert fused_node(graph, "LayerNormalization").get_attr("epsilon") == plans[0]
        plans.clear()


@pytest.mark.parametrize("opset", [17, 18])
def test_layer_norm_operands_in_the_other_order_and_separate_axes(opset: int) -> None:
    source = layer_norm(opset, form="reciprocal", swapped=True, shared_axes=False)
    graph = load(source)
    assert count_rewrites(LayerNormFusion, graph) == 1
    assert histogram(graph).get("LayerNormalization") == 1
    assert_sound(graph, source, feeds(), exact=False)


@pytest.mark.parametrize("opset", [17, 18])
def test_layer_norm_over_the_last_two_axes(opset: int) -> None:
    source = layer_norm(opset, axes=(1, -1), gamma_shape=(3, 4))
    graph = load(source)
    assert count_rewrites(LayerNormFusion, graph) == 1
    assert fused_node(graph, "LayerNormalization").get_attr("axis") == -2
    assert_sound(graph, source, feeds(), exact=False)


def test_a_broadcasting_constant_gamma_is_expanded_to_the_normalized_shape() -> None:
    source = layer_norm(17, gamma_shape=(1, 1, 4))
    graph = load(source)
    assert count_rewrites(LayerNormFusion, graph) == 1
    fused = fused_node(graph, "LayerNormalization")
    for index in (1, 2):
        scale = fused.get_input_producer(index)[0].get_attr("value")
        assert list(scale.shape) == [4]
    assert_sound(graph, source, feeds(), exact=False)


@pytest.mark.parametrize("opset", [17, 18])
def test_find_matches_outside_a_compilation_sees_either_style(opset: int) -> None:
    graph = load(layer_norm(opset))
    (found,) = find_matches(LayerNormFusion, graph)
    assert found.pattern_name.endswith("axes_attr" if opset < 18 else "axes_input")
    assert {n.type for n in found.nodes} >= {"ReduceMean", "Sub", "Pow", "Sqrt", "Div"}


def test_float16_layer_norm_fuses() -> None:
    source = layer_norm(17, dtype=F16)
    graph = load(source)
    assert count_rewrites(LayerNormFusion, graph) == 1
    exported = graph.to_onnx()
    onnx.checker.check_model(exported, full_check=True)
    inputs = feeds(dtype=np.float16)[0]
    got, want = ort_run(exported, inputs)[0], ort_run(source, inputs)[0]
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), atol=2e-2)


@pytest.mark.parametrize("opset", [17, 18])
@pytest.mark.parametrize("case", [
    {"extra_output": "d"},       # the centred value is read outside the match
    {"extra_output": "s"},       # so is the standard deviation
    {"extra_output": "m"},       # and the mean
    {"eps_input": True},         # eps is not a constant
    {"axes2": (-2,)},            # the two ReduceMeans reduce different axes
    {"axes": (1,), "gamma_shape": (3, 1)},  # not the trailing axes
    {"axes": (0, 2), "gamma_shape": (4,)},  # not contiguous
    {"exponent": 3.0},           # not a variance
    {"gamma_shape": (3, 1)},     # gamma varies along an axis that is not normalised
    {"gamma_shape": (1, 1, 1, 4)},  # gamma adds an axis
    {"x_shape": (2, 3, 1), "gamma_shape": (1,)},  # one element (onnxruntime 1.21-1.23 fail)
])
def test_layer_norm_is_left_alone_when_a_condition_fails(opset: int,
                                                         case: dict[str, Any]) -> None:
    assert_unchanged(LayerNormFusion, layer_norm(opset, **case))


def test_layer_norm_does_not_fire_below_opset_17() -> None:
    assert_unchanged(LayerNormFusion, layer_norm(16))


def test_a_double_layer_norm_is_left_alone() -> None:
    source = layer_norm(17)
    graph = source.graph
    graph.input[0].type.tensor_type.elem_type = onnx.TensorProto.DOUBLE
    graph.output[0].type.tensor_type.elem_type = onnx.TensorProto.DOUBLE
    for tensor in graph.initializer:
        tensor.CopyFrom(init(tensor.name, onnx.numpy_helper.to_array(tensor), np.float64))
    onnx.checker.check_model(source, full_check=True)
    assert_unchanged(LayerNormFusion, source)


def test_a_graph_output_inside_the_pattern_keeps_the_model_as_it_was() -> None:
    source = layer_norm(17, extra_output="y0")  # Mul(gamma) is a graph output too
    graph = load(source)
    # Not with the bias (Mul(gamma) is read outside); the no-bias pattern fuses up to
    # Mul(gamma), whose output is a pattern output; the Add reads the LayerNormalization.
    assert count_rewrites(LayerNormFusion, graph) == 1
    ops = histogram(graph)
    assert ops.get("LayerNormalization") == 1 and ops.get("Add") == 1
    assert fused_node(graph, "LayerNormalization").get_inputs_size() == 2
    exported = assert_sound(graph, source, feeds(), exact=False)
    assert [o.name for o in exported.graph.output] == ["y", "y0"]


# -- RMSNormFusion --------------------------------------------------------------------------

#: The fused models are run in onnxruntime: RMSNormalization is opset 23's.
RMS = needs_opset(23, "RMSNormalization")



@RMS
def test_rms_normalization_is_in_onnx_and_onnxruntime_runs_it() -> None:
    assert onnx.defs.has("RMSNormalization")
    assert onnx.defs.get_schema("RMSNormalization").since_version == 23
    graph = load(rms_norm(23))
    assert count_rewrites(RMSNormFusion, graph) == 1
    ort_run(graph.to_onnx(), feeds()[0])  # the CPU provider has a kernel for it


@RMS
@pytest.mark.parametrize("form", ["div", "reciprocal", "one_over"])
@pytest.mark.parametrize("swapped", [False, True])
@pytest.mark.parametrize("square", ["pow", "mul"])  # x.pow(2), x * x (torch.square)
def test_rms_norm_fuses_at_opset_23(form: str, swapped: bool, square: str) -> None:
    source = rms_norm(23, form=form, swapped=swapped, square=square)
    graph = load(source)
    assert count_rewrites(RMSNormFusion, graph) == 1
    ops = histogram(graph)
    assert ops.get("RMSNormalization") == 1
    assert not set(PRIMITIVES) & set(ops) and "Mul" not in ops and "Add" not in ops
    fused = fused_node(graph, "RMSNormalization")
    assert fused.get_attr("axis") == -1
    assert fused.get_attr("epsilon") == pytest.approx(1e-6, rel=1e-3)
    exported = assert_sound(graph, source, feeds(), exact=False)
    assert [o.name for o in exported.graph.output] == ["y"]
    # onnx's reference evaluator agrees too
    reference = ReferenceEvaluator(exported).run(None, feeds()[0])[0]
    np.testing.assert_allclose(reference, ort_run(source, feeds()[0])[0], rtol=1e-4, atol=1e-5)
    assert count_rewrites(RMSNormFusion, graph) == 0


@RMS
@pytest.mark.parametrize("form", ["reciprocal", "one_over"])
@pytest.mark.parametrize("square", ["pow", "mul"])
def test_rms_norm_with_t5s_cast_to_float(form: str, square: str) -> None:
    source = rms_norm(23, form=form, cast_in=True, square=square)
    graph = load(source)
    assert count_rewrites(RMSNormFusion, graph) == 1
    ops = histogram(graph)
    assert ops.get("RMSNormalization") == 1 and "Cast" not in ops
    assert_sound(graph, source, feeds(), exact=False)


@RMS
@pytest.mark.parametrize("square", ["pow", "mul"])
def test_rms_norm_with_llamas_casts_around_a_float16_input(square: str) -> None:
    source = rms_norm(23, form="reciprocal", cast_in=True, cast_out=True, dtype=F16,
                      square=square)
    graph = load(source)
    assert count_rewrites(RMSNormFusion, graph) == 1
    ops = histogram(graph)
    assert ops.get("RMSNormalization") == 1 and "Cast" not in ops
    fused = fused_node(graph, "RMSNormalization")
    assert fused.get_attr("stash_type") == 1  # computed in float32, as the casts did
    exported = graph.to_onnx()
    onnx.checker.check_model(exported, full_check=True)
    inputs = feeds(dtype=np.float16)[0]
    want = ort_run(source, inputs)[0].astype(np.float32)
    got = ReferenceEvaluator(exported).run(None, inputs)[0]
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(ort_run(exported, inputs)[0].astype(np.float32), want,
                               rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("case", [
    {"extra_output": "s"},        # an intermediate value is read outside the match
    {"extra_output": "ms"},
    {"eps_input": True},          # eps is not a constant
    {"exponent": 3.0},
    {"axes": (1,)},               # not the trailing axis
    # a float32 X computed in float16 (and cast back): RMSNormalization would compute in
    # float32, not what the model computes
    {"cast_in": True, "cast_out": True, "cast_in_to": F16, "form": "reciprocal"},
    {"square": "mul_other"},      # Mul(x, e): e is not x
    {"square": "mul_other", "cast_in": True, "form": "one_over"},
    {"square": "mul", "extra_output": "p"},  # the square is read outside the match
])
def test_rms_norm_is_left_alone_when_a_condition_fails(case: dict[str, Any]) -> None:
    assert_unchanged(RMSNormFusion, rms_norm(23, **case))


@pytest.mark.parametrize("opset", [18, 22])
def test_rms_norm_does_not_fire_below_opset_23(opset: int) -> None:
    assert_unchanged(RMSNormFusion, rms_norm(opset))
    assert_unchanged(RMSNormFusion, rms_norm(opset, cast_in=True, form="one_over"))


# -- the vendored models --------------------------------------------------------------------


def test_t5_at_its_opset_17_is_left_alone() -> None:
    path = shared_model("t5_encoder_tiny")
    assert onnx.load(path).opset_import[0].version < 23
    for pass_class in (LayerNormFusion, RMSNormFusion):
        assert_unchanged(pass_class, onnx.load(path))


@RMS
def test_t5_converted_to_opset_23_has_its_five_rms_norms_fused() -> None:
    source = onnx.version_converter.convert_version(onnx.load(shared_model("t5_encoder_tiny")),
                                                    23)
    graph = load(source)
    assert histogram(graph).get("Pow") == 5
    assert count_rewrites(RMSNormFusion, graph) == 5
    ops = histogram(graph)
    assert ops.get("RMSNormalization") == 5 and "Pow" not in ops and "Sqrt" not in ops
    ids = np.arange(12, dtype=np.int64).reshape(1, 12) % 10
    inputs = {"input_ids": ids, "attention_mask": np.ones((1, 12), np.int64)}
    exported = graph.to_onnx()
    onnx.checker.check_model(exported, full_check=True)
    assert [o.name for o in exported.graph.output] == [o.name for o in source.graph.output]
    np.testing.assert_allclose(ort_run(exported, inputs)[0], ort_run(source, inputs)[0],
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["vit_tiny", "distilbert_tiny", "distilbert_tiny_dynamo",
                                  "gelu_mlp_opset20"])
def test_models_exported_with_layer_normalization_have_nothing_to_fuse(name: str) -> None:
    source = onnx.load(shared_model(name))
    assert "LayerNormalization" in {n.op_type for n in source.graph.node}
    assert_unchanged(LayerNormFusion, source)


MODELS = all_shared_models()


@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_every_vendored_model_compiles_and_verifies_with_the_norm_fusions(
        path: Path) -> None:
    result = ge.compile(path, verify=True)
    assert result.verification is not None and result.verification.ok
    names = {r.pass_name for r in result.report.records}
    assert {"LayerNormFusion", "RMSNormFusion"} <= names


def test_compiling_fuses_a_layer_norm_and_verifies(tmp_path: Path) -> None:
    source = layer_norm(18, form="reciprocal")
    result = ge.compile(source, verify=True)
    assert result.verification is not None and result.verification.ok
    assert result.report.ops_after.get("LayerNormalization") == 1
    assert result.report.rewrites_by_pass().get("LayerNormFusion") == 1
    out = tmp_path / "fused.onnx"
    result.save(out)
    saved = onnx.load(out)
    onnx.checker.check_model(saved, full_check=True)
    assert [o.name for o in saved.graph.output] == ["y"]
    disabled = ge.compile(source, disable=["LayerNormFusion"])
    assert "LayerNormalization" not in disabled.report.ops_after


def test_a_layer_norm_hidden_behind_foldable_constants_fuses_in_the_optimisation_rounds(
        ) -> None:
    """Its epsilon is a Div of two constants and x - mean is computed twice: the fusion step
    cannot see the pattern, the origin-graph rounds (folding, CSE, then the catalog) do."""
    f = onnx.TensorProto.FLOAT
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["mean"], axes=[-1], keepdims=1),
        helper.make_node("Sub", ["x", "mean"], ["d1"]),
        helper.make_node("Sub", ["x", "mean"], ["d2"]),
        helper.make_node("Pow", ["d1", "two"], ["sq"]),
        helper.make_node("ReduceMean", ["sq"], ["var"], axes=[-1], keepdims=1),
        helper.make_node("Div", ["eps_num", "eps_den"], ["eps"]),
        helper.make_node("Add", ["var", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["std"]),
        helper.make_node("Div", ["d2", "std"], ["normed"]),
        helper.make_node("Mul", ["normed", "gamma"], ["scaled"]),
        helper.make_node("Add", ["scaled", "beta"], ["y"]),
    ]
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in [
        ("two", 2.0), ("eps_num", 1e-4), ("eps_den", 10.0),
        ("gamma", rng.standard_normal(8)), ("beta", rng.standard_normal(8))]]
    source = helper.make_model(
        helper.make_graph(nodes, "ln", [helper.make_tensor_value_info("x", f, [2, 3, 8])],
                          [helper.make_tensor_value_info("y", f, [2, 3, 8])], inits),
        opset_imports=[helper.make_opsetid("", 17)])
    result = ge.compile(source, verify=True)
    assert result.verification is not None and result.verification.ok
    assert result.report.ops_after.get("LayerNormalization") == 1
    assert {"ReduceMean", "Sub", "Sqrt"}.isdisjoint(result.report.ops_after)
    fused = [r for r in result.report.records if r.pass_name == "LayerNormFusion" and r.changed]
    assert [r.stage for r in fused] == ["OriginGraphOptimize"]


def _branch_layer_norm(constants_outside: bool, mean_outside: bool = False) -> onnx.ModelProto:
    """y = If(c) then LayerNorm(x) in primitives else x: the branch reads x, and its
    constants (axes, 2, eps, gamma, beta) are the outer graph's initializers or its own; with
    `mean_outside` the first ReduceMean is computed by the outer graph (found by
    tools/fuzz_compile.py: a body's pattern bound to outer nodes)."""
    def ln(first_mean: str) -> list[onnx.NodeProto]:
        made = [] if mean_outside else [
            helper.make_node("ReduceMean", ["x", "axes"], [first_mean], name="mean")]
        return [
            *made,
            helper.make_node("Sub", ["x", first_mean], ["d"], name="sub"),
            helper.make_node("Pow", ["d", "two"], ["p"], name="pow"),
            helper.make_node("ReduceMean", ["p", "axes"], ["v"], name="var"),
            helper.make_node("Add", ["v", "eps"], ["ve"], name="add_eps"),
            helper.make_node("Sqrt", ["ve"], ["s"], name="sqrt"),
            helper.make_node("Div", ["d", "s"], ["n"], name="div"),
            helper.make_node("Mul", ["n", "g"], ["ng"], name="mul"),
            helper.make_node("Add", ["ng", "b"], ["t"], name="add")]
    rng = np.random.default_rng(0)
    constants = [numpy_helper.from_array(np.array([-1], np.int64), "axes"),
                 numpy_helper.from_array(np.array(2.0, np.float32), "two"),
                 numpy_helper.from_array(np.array(1e-5, np.float32), "eps"),
                 numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "g"),
                 numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")]
    then = helper.make_graph(ln("m"), "then", [],
                             [helper.make_tensor_value_info("t", onnx.TensorProto.FLOAT, [2, 4])],
                             [] if constants_outside else constants)
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], name="copy")], "else",
                              [], [helper.make_tensor_value_info("e", onnx.TensorProto.FLOAT,
                                                                [2, 4])])
    outer = [helper.make_node("ReduceMean", ["x", "axes"], ["m"], name="mean")] if (
        mean_outside) else []
    graph = helper.make_graph(
        [*outer, helper.make_node("If", ["c"], ["y"], name="if", then_branch=then,
                                  else_branch=other)], "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 4]),
         helper.make_tensor_value_info("c", onnx.TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 4])],
        constants if constants_outside or mean_outside else [])
    made = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(made, full_check=True)
    return made


@pytest.mark.parametrize("constants_outside", [False, True], ids=["own", "outer"])
def test_layer_norm_fuses_in_a_branch_whatever_graph_holds_its_constants(
        constants_outside: bool, tmp_path: Path) -> None:
    """The branch's pattern constants bind to the outer graph's initializers as well: the
    fusion used to remove them from the branch and fail the compilation (E13028,
    "node 'two' is not a node of graph 'then'"). They stay where they are."""
    import onnxruntime as ort

    source = _branch_layer_norm(constants_outside)
    result = ge.compile(source)
    fused = [r for r in result.report.records
             if r.pass_name == "LayerNormFusion" and r.graph_name == "then" and r.rewrites]
    assert len(fused) == 1
    result.save(tmp_path / "out.onnx")
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    for cond in (True, False):
        feeds = {"x": x, "c": np.array(cond)}
        (want,) = ort.InferenceSession(source.SerializeToString()).run(None, feeds)
        (got,) = ort.InferenceSession(str(tmp_path / "out.onnx")).run(None, feeds)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_branch_pattern_does_not_take_an_outer_graphs_operator() -> None:
    """The first ReduceMean is the outer graph's, read only by the branch: the branch's
    pattern does not bind it (rewriting it is not the branch's to do), and nothing fails."""
    result = ge.compile(_branch_layer_norm(True, mean_outside=True))
    assert not [r for r in result.report.records
                if r.pass_name == "LayerNormFusion" and r.rewrites]
    assert "ReduceMean" in {n.type for n in result.graph.get_direct_nodes()}
