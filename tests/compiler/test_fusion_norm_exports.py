"""`LayerNormFusion` and `RMSNormFusion` on the forms PyTorch's exporters write for norms
computed by hand: the square as `d * d` (Mul(d, d)), the variance by `torch.var(...,
unbiased=False)` (its own mean and difference; dynamo's Reshape), `torch.rsqrt` as
Div(1, sqrt); and the forms that look alike but are no norm (Mul(d, e), the unbiased
variance, a value read outside). The RMS squares are parametrisations of test_fusion_norm."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import pytest
from builtin_helpers import assert_sound, count_rewrites, histogram, load, ort_run
from norm_models import (
    PRIMITIVES,
    X_SHAPE,
    assert_unchanged,
    feeds,
    fused_node,
    layer_norm,
)

import ge
from ge.compiler.builtin.fusion_norm import LayerNormFusion
from ge.graph import Graph

pytestmark = [
    pytest.mark.builtin_passes,  # these tests are about (future) built-in passes
    pytest.mark.usefixtures("matching"),  # by the search and by match plans
]


def assert_layer_norm_fused(source: onnx.ModelProto, x_shape: Sequence[int] = X_SHAPE
                            ) -> Graph:
    """One LayerNormalization replaces every primitive, with the same outputs in
    onnxruntime; the fused graph."""
    graph = load(source)
    assert count_rewrites(LayerNormFusion, graph) == 1
    ops = histogram(graph)
    assert ops.get("LayerNormalization") == 1
    assert not {*PRIMITIVES, "Mul", "Add", "Reshape"} & set(ops), ops
    exported = assert_sound(graph, source, feeds(x_shape), exact=False)
    assert [o.name for o in exported.graph.output] == ["y"]
    return graph


@pytest.mark.parametrize("opset", [17, 18])
@pytest.mark.parametrize("form", ["div", "reciprocal", "one_over"])
@pytest.mark.parametrize("bias", [True, False])
def test_layer_norm_with_the_square_written_d_times_d_fuses(opset: int, form: str,
                                                             bias: bool) -> None:
    """`d * d` exports as Mul(d, d), both inputs the one value: the same as Pow(d, 2)."""
    assert_layer_norm_fused(layer_norm(opset, form=form, bias=bias, square="mul"))


@pytest.mark.parametrize("opset", [17, 18])
@pytest.mark.parametrize("form", ["div", "reciprocal", "one_over"])
@pytest.mark.parametrize("variance", ["own", "own_reshaped"])
def test_a_layer_norm_with_torch_var_fuses(opset: int, form: str, variance: str) -> None:
    """torch.var(x, -1, unbiased=False, keepdim=True) exports its own ReduceMean(X), Sub
    and Mul(dv, dv), the TorchScript exporter with keepdims=1, dynamo with keepdims=0 and a
    Reshape back; dynamo writes its axes as [2] where the model's mean has [-1]."""
    assert_layer_norm_fused(layer_norm(opset, form=form, square="mul", variance=variance,
                                       var_mean_axes=(2,), shared_axes=False))


def test_a_layer_norm_with_torch_var_over_the_last_two_axes_fuses() -> None:
    source = layer_norm(18, axes=(-2, -1), gamma_shape=(3, 4), square="mul",
                        variance="own_reshaped", var_mean_axes=(1, 2), shared_axes=False)
    graph = assert_layer_norm_fused(source)
    assert fused_node(graph, "LayerNormalization").get_attr("axis") == -2


@pytest.mark.parametrize("opset", [17, 18])
@pytest.mark.parametrize("case", [
    {"square": "mul_other"},                         # Mul(d, e): e is not d
    {"square": "mul_other", "variance": "own"},
    {"square": "mul_other", "variance": "own_reshaped"},
    {"square": "mul", "extra_output": "p"},          # the square is read outside the match
    {"square": "mul", "variance": "own", "extra_output": "dv"},  # so is torch.var's d
    {"square": "mul", "variance": "own_reshaped", "extra_output": "vm"},  # and its mean
    # torch.var's mean reduces another axis than the model's
    {"square": "mul", "variance": "own", "var_mean_axes": (-2,)},
    {"square": "mul", "variance": "own_reshaped", "var_mean_axes": (1,)},
    # torch.var's default, unbiased: var * N / (N - 1) is not LayerNormalization's variance
    {"square": "mul", "variance": "unbiased"},
    {"square": "pow", "variance": "unbiased"},
])
def test_layer_norm_forms_that_are_not_a_layer_norm_are_left_alone(
        opset: int, case: dict[str, Any]) -> None:
    assert_unchanged(LayerNormFusion, layer_norm(opset, **case))


def test_a_variance_reshaped_to_another_shape_is_left_alone() -> None:
    """X is [2, 3, 3]: the variance of row (i, j) reshaped to [2, 1, 3] lands in column j of
    every row of block i, a valid model with X's shape but not a layer norm."""
    source = layer_norm(18, x_shape=(2, 3, 3), gamma_shape=(3,), square="mul",
                        variance="own_reshaped", reshape_to=(2, 1, 3))
    fused = layer_norm(18, x_shape=(2, 3, 3), gamma_shape=(3,), square="mul",
                       variance="own_reshaped")
    inputs = feeds((2, 3, 3))[0]
    assert not np.allclose(ort_run(source, inputs)[0], ort_run(fused, inputs)[0], atol=1e-3)
    assert_unchanged(LayerNormFusion, source)


def test_compiling_a_dynamo_torch_var_layer_norm_fuses_and_verifies() -> None:
    source = layer_norm(18, square="mul", variance="own_reshaped", var_mean_axes=(2,),
                        shared_axes=False)
    result = ge.compile(source, verify=True)
    assert result.verification is not None and result.verification.ok
    assert result.report.ops_after.get("LayerNormalization") == 1
    assert {"ReduceMean", "Sub", "Reshape", "Mul"}.isdisjoint(result.report.ops_after)
