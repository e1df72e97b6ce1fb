"""`LayerNormFusion` on Keras' LayerNormalization as tf2onnx writes it: `moments` (a
ReduceMean, or a GlobalAveragePool on a rank-3 X), then `X * inv + offset` with `inv =
gamma / sqrt(var + eps)` and the offset as Keras 3 (`-mean * inv + beta`), tf.keras 2
(`beta - mean * inv`) or either without beta (`-mean * inv`) writes it; the near misses
it must leave alone. The models are those of `norm_models.keras_layer_norm`, written as
tf2onnx 1.17 writes them at opsets 17 and 18."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx.version_converter
import pytest
from builtin_helpers import count_rewrites, histogram, load, ort_run
from norm_models import assert_unchanged, fused_node, keras_layer_norm

import ge
from ge.compiler.builtin.fusion_norm import LayerNormFusion
from ge.passes import PassContext, find_matches

pytestmark = [
    pytest.mark.builtin_passes,  # these tests are about (future) built-in passes
    pytest.mark.usefixtures("matching"),  # by the search and by match plans
]

#: The operators of the written-out form (none may stay after the fusion).
KERAS_PRIMITIVES = {"ReduceMean", "GlobalAveragePool", "Sub", "Mul", "Add", "Sqrt",
                    "Reciprocal", "Neg", "Div"}
OFFSETS = ["neg_bias", "sub_bias", "neg"]


def keras_feeds(shape: tuple[int, ...] = (2, 5, 16), seed: int = 0) -> dict[str, np.ndarray]:
    """Activations as a transformer's: normal, scaled and shifted."""
    rng = np.random.default_rng(seed)
    return {"x": (rng.standard_normal(shape) * 3 + 1).astype(np.float32)}


def assert_same_outputs(fused: onnx.ModelProto, source: onnx.ModelProto,
                        shape: tuple[int, ...] = (2, 5, 16)) -> None:
    """onnxruntime computes what the original does within 1e-5, on random inputs."""
    onnx.checker.check_model(fused, full_check=True)
    assert [o.name for o in fused.graph.output] == [o.name for o in source.graph.output]
    for seed in (0, 1):
        inputs = keras_feeds(shape, seed)
        for got, want in zip(ort_run(fused, inputs), ort_run(source, inputs), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def assert_keras_fused(source: onnx.ModelProto, bias: bool = True,
                       shape: tuple[int, ...] = (2, 5, 16)) -> None:
    graph = load(source)
    assert count_rewrites(LayerNormFusion, graph) == 1
    ops = histogram(graph)
    assert ops.get("LayerNormalization") == 1
    assert not KERAS_PRIMITIVES & set(ops), ops
    fused = fused_node(graph, "LayerNormalization")
    assert fused.get_attr("axis") == -1
    assert fused.get_attr("epsilon") == pytest.approx(1e-6, rel=1e-3)
    assert fused.get_inputs_size() == (3 if bias else 2)
    for index in range(1, fused.get_inputs_size()):  # gamma and beta [1, 1, 16] -> [16]
        assert list(fused.get_input_producer(index)[0].get_attr("value").shape) == [16]
    assert_same_outputs(graph.to_onnx(), source, shape)
    assert count_rewrites(LayerNormFusion, graph) == 0  # nothing left to fuse


def refusals(source: onnx.ModelProto) -> list[str]:
    """What `meet_requirements` says about each full match of the model (none fused)."""
    said: list[str] = []

    class Recording(LayerNormFusion):
        def meet_requirements(self, match_result: Any,
                              context: PassContext | None = None) -> bool:
            accepted = super().meet_requirements(match_result, context)
            if not accepted and context is not None:
                said.append(context.get_error_message())
            return accepted

    assert find_matches(Recording(), load(source)) == []
    return said


@pytest.mark.parametrize("opset", [17, 18])
@pytest.mark.parametrize("offset", OFFSETS)
def test_the_keras_form_with_reduce_mean_fuses(opset: int, offset: str) -> None:
    assert_keras_fused(keras_layer_norm(opset, offset=offset), bias=offset != "neg")


@pytest.mark.parametrize("pool", [False, True])
@pytest.mark.parametrize("offset", OFFSETS)
def test_the_keras_form_with_the_scale_divided_fuses(offset: str, pool: bool) -> None:
    """inv = gamma / sqrt(var + eps), as ReciprocalMulFusion leaves Keras' product."""
    assert_keras_fused(keras_layer_norm(18, offset=offset, pool=pool, divided=True),
                       bias=offset != "neg")


def test_a_keras_norm_fusing_only_after_folding_still_fuses() -> None:
    """gamma behind a Cast: the first round's LayerNormFusion cannot read it, and
    ReciprocalMulFusion turns its product into a Div; the norm fuses in the second round,
    after ConstantFolding (it stayed unfused when only the product form was known)."""
    source = keras_layer_norm(17)
    for consumer in source.graph.node:
        consumer.input[:] = ["gamma_c" if x == "gamma" else x for x in consumer.input]
    source.graph.node.insert(0, onnx.helper.make_node("Cast", ["gamma"], ["gamma_c"], to=1))
    result = ge.compile(source)
    ops = histogram(result.graph)
    assert ops.get("LayerNormalization") == 1 and not KERAS_PRIMITIVES & set(ops), ops
    assert_same_outputs(result.graph.to_onnx(), source)


@pytest.mark.parametrize("opset", [17, 18, 21])
@pytest.mark.parametrize("offset", OFFSETS)
def test_the_keras_form_with_global_average_pool_fuses(opset: int, offset: str) -> None:
    """tf2onnx writes the means of a rank-3 X as GlobalAveragePools while ReduceMean takes
    its axes as an attribute; converted to a newer opset, the model keeps them."""
    source = keras_layer_norm(opset, pool=True, offset=offset)
    assert "ReduceMean" not in {n.op_type for n in source.graph.node}
    assert_keras_fused(source, bias=offset != "neg")


@pytest.mark.parametrize("opset", [17, 18])
@pytest.mark.parametrize("pool", [False, True])
@pytest.mark.parametrize("offset", OFFSETS)
def test_the_keras_form_with_the_operands_swapped_fuses(opset: int, pool: bool,
                                                        offset: str) -> None:
    """Every Add and Mul with its operands in the other order (Sub keeps its order)."""
    assert_keras_fused(keras_layer_norm(opset, pool=pool, offset=offset, swapped=True),
                       bias=offset != "neg")


@pytest.mark.parametrize("opset", [17, 18])
def test_the_keras_form_over_the_last_two_axes_fuses(opset: int) -> None:
    source = keras_layer_norm(opset, axes=(1, 2), x_shape=(2, 5, 16), gamma_shape=(1, 5, 16))
    graph = load(source)
    assert count_rewrites(LayerNormFusion, graph) == 1
    assert fused_node(graph, "LayerNormalization").get_attr("axis") == -2
    assert_same_outputs(graph.to_onnx(), source)


def test_a_keras_layer_norm_of_a_rank_2_value_fuses() -> None:
    """ConvNeXt's head: the norm of the pooled [N, C] features (a ReduceMean: no pool)."""
    source = keras_layer_norm(17, x_shape=("N", 16), axes=(1,))
    graph = load(source)
    assert count_rewrites(LayerNormFusion, graph) == 1
    assert_same_outputs(graph.to_onnx(), source, (3, 16))


@pytest.mark.parametrize(("opset", "pool"), [(17, True), (17, False), (18, False)])
def test_compiling_a_keras_layer_norm_fuses_and_verifies(opset: int, pool: bool) -> None:
    """The whole compilation (a model with GlobalAveragePools and no ReduceMean too: the
    pass runs on it), the result verified against the original."""
    source = keras_layer_norm(opset, pool=pool)
    result = ge.compile(source, verify=True)
    assert result.verification is not None and result.verification.ok
    assert result.report.ops_after.get("LayerNormalization") == 1
    assert result.report.rewrites_by_pass().get("LayerNormFusion") == 1
    assert KERAS_PRIMITIVES.isdisjoint(result.report.ops_after)


def test_an_opset_13_keras_export_converted_to_opset_17_fuses() -> None:
    """tf2onnx's default opsets are older: `ge compile --opset 17` converts first, and the
    GlobalAveragePools stay what they were."""
    source = keras_layer_norm(13, pool=True)
    result = ge.compile(source, verify=True, opset=17)
    assert result.verification is not None and result.verification.ok
    assert result.report.ops_after.get("LayerNormalization") == 1


# -- near misses ----------------------------------------------------------------------------


@pytest.mark.parametrize("opset", [17, 18])
def test_a_global_average_pool_of_a_rank_4_value_is_left_alone(opset: int) -> None:
    """It averages the last two axes of [N, C, H, W]: the fusion takes it on rank 3 only."""
    source = keras_layer_norm(opset, pool=True, x_shape=(2, 3, 4, 16),
                              gamma_shape=(1, 1, 4, 16))
    assert_unchanged(LayerNormFusion, source)
    assert refusals(source) == ["GlobalAveragePool 'moments/mean' averages a rank-4 X: taken "
                                "for a rank-3 X only, where it averages the last axis"]


@pytest.mark.parametrize(("opset", "pool"), [(17, True), (18, False)])
@pytest.mark.parametrize("offset", OFFSETS)
@pytest.mark.parametrize("value", ["m", "d", "d2", "v", "s", "rs", "inv", "xi", "nm_inv"])
def test_a_keras_layer_norm_with_an_intermediate_read_outside_is_left_alone(
        opset: int, pool: bool, offset: str, value: str) -> None:
    assert_unchanged(LayerNormFusion, keras_layer_norm(opset, pool=pool, offset=offset,
                                                       extra_output=value))


@pytest.mark.parametrize("offset", ["neg_bias", "sub_bias"])
def test_a_keras_layer_norm_with_its_offset_read_outside_is_left_alone(offset: str) -> None:
    """`b2` (the offset with beta) is also a graph output; unlike the torch forms, no
    smaller form ends before it (Y reads it), so nothing fuses."""
    assert_unchanged(LayerNormFusion, keras_layer_norm(17, offset=offset, extra_output="b2"))


@pytest.mark.parametrize("opset", [17, 18])
@pytest.mark.parametrize("pool", [False, True])
def test_a_keras_layer_norm_with_a_computed_eps_is_left_alone(opset: int, pool: bool) -> None:
    """eps a graph input: the pattern's constant does not bind it."""
    assert_unchanged(LayerNormFusion, keras_layer_norm(opset, pool=pool, eps_input=True))


@pytest.mark.parametrize("pool", [False, True])
def test_a_keras_layer_norm_with_a_negative_eps_is_left_alone(pool: bool) -> None:
    source = keras_layer_norm(17, pool=pool, eps=-1e-6)
    assert_unchanged(LayerNormFusion, source)
    assert refusals(source) == ["epsilon is not a constant >= 0"]


@pytest.mark.parametrize("opset", [17, 18])
@pytest.mark.parametrize("pool", [False, True])
@pytest.mark.parametrize("gamma_shape", [(1, 5, 16), (5, 1)])
def test_a_keras_gamma_varying_along_an_axis_not_normalised_is_left_alone(
        opset: int, pool: bool, gamma_shape: tuple[int, ...]) -> None:
    """gamma (and beta) [1, 5, 16] or [5, 1] vary along the sequence axis of [N, 5, 16]."""
    source = keras_layer_norm(opset, pool=pool, gamma_shape=gamma_shape,
                              x_shape=(2, 5, 16) if gamma_shape == (5, 1) else ("N", 5, 16))
    assert_unchanged(LayerNormFusion, source)
    (said,) = set(refusals(source))
    assert said.startswith("the scale of 'mul' has shape") and "normalised dims [16]" in said


@pytest.mark.parametrize("opset", [17, 18])
@pytest.mark.parametrize("case", [
    {"offset": "sub_reversed"},  # mean * inv - beta: the offset's sign is wrong
    {"offset": "no_neg"},        # mean * inv + beta: so is the mean's
    {"axes": (1,), "gamma_shape": (1, 5, 1)},  # not the last axis (channels first)
    {"axes": (0, 2)},            # not contiguous
    {"x_shape": (2, 5, 16), "gamma_shape": (1, 1, 1, 16)},  # gamma adds an axis
])
def test_keras_forms_that_are_not_a_layer_norm_are_left_alone(opset: int,
                                                              case: dict[str, Any]) -> None:
    assert_unchanged(LayerNormFusion, keras_layer_norm(opset, **case))


def test_a_double_keras_layer_norm_is_left_alone() -> None:
    assert_unchanged(LayerNormFusion, keras_layer_norm(17, dtype=onnx.TensorProto.DOUBLE))


@pytest.mark.parametrize("pool", [False, True])
def test_the_keras_form_does_not_fire_below_opset_17(pool: bool) -> None:
    assert_unchanged(LayerNormFusion, keras_layer_norm(16, pool=pool))


def test_a_subclass_with_patterns_of_its_own_is_told_to_override_the_hooks() -> None:
    """Trial AJ: a subclass of LayerNormFusion giving its own patterns() but keeping the
    built-in's hooks failed with a bare KeyError in `_plan_of`."""
    import ge.es.all as es
    from ge.es import GraphBuilder
    from ge.passes import create_pattern, find_matches
    from model_paths import shared_model

    class MyNorm(LayerNormFusion):
        def patterns(self):
            builder = GraphBuilder("mine")
            x = builder.create_input(0)
            return [create_pattern(builder.build_and_reset([es.Relu(x)]))]

    with pytest.raises(TypeError) as caught:
        find_matches(MyNorm, load(shared_model("mobilenet_like"), infer=False))
    assert str(caught.value) == (
        "MyNorm: pattern 'mine' is not one of the built-in norm fusion's own, which its "
        "meet_requirements and replacement read: a subclass with patterns of its own must "
        "override both")
