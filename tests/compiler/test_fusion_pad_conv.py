"""`PadConvFusion` (built-in): a zero constant `Pad` in front of a `Conv` becomes the Conv's
own padding, as tf2onnx writes Keras' ZeroPadding2D and TensorFlow's "same" padding of a
strided convolution. It fires on a model built for it and on no near miss; the rewritten
model passes onnx's full checker, keeps its output names and computes what the original
computes in onnxruntime (rtol = atol = 1e-5)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from builtin_helpers import I64, F, assert_fused, histogram, init, load, model, run_pass, vi
from onnx import helper

import ge
from ge.compiler.builtin import BUILTIN_PASSES
from ge.compiler.builtin.fusion_pad import PadConvFusion

pytestmark = pytest.mark.builtin_passes  # these tests are about a built-in pass

node = helper.make_node
RNG = np.random.default_rng(0)
TOL = 1e-5


def typed_model(nodes: Sequence[onnx.NodeProto], inputs: Sequence[onnx.ValueInfoProto],
                outputs: Sequence[str], initializers: Sequence[onnx.TensorProto] = (),
                *, opset: int = 17) -> onnx.ModelProto:
    """`model(...)` whose float outputs get the shapes onnx's inference gives them."""
    untyped = model(nodes, inputs, [vi(o, F, None) for o in outputs], initializers,
                    opset=opset, check=False)
    inferred = onnx.shape_inference.infer_shapes(untyped, strict_mode=True)
    known = {v.name: v for v in [*inferred.graph.value_info, *inferred.graph.output]}
    return model(nodes, inputs, [known[o] for o in outputs], initializers, opset=opset)


def pad_conv(pads: Sequence[int] = (0, 0, 1, 1, 0, 0, 1, 1), *, opset: int = 17,
             mode: str | None = None, value: float | None = None, value_input: bool = False,
             pads_input: bool = False, axes: Sequence[int] | None = None,
             conv_attrs: dict[str, Any] | None = None, x_shape: Sequence[int] = (2, 4, 8, 8),
             group: int = 1, bias: bool = False, extra: Sequence[onnx.NodeProto] = (),
             outputs: Sequence[str] = ()) -> onnx.ModelProto:
    """y = Conv(Pad(x, pads), w[, b]): w [6, 4 / group, 3, ...]; the Pad's arguments as
    attributes before opset 11 and as inputs from 11 (constants unless `*_input`)."""
    spatial = len(x_shape) - 2
    inputs = [vi("x", F, list(x_shape))]
    inits = [init("w", RNG.standard_normal((6, 4 // group, *[3] * spatial)))]
    pad_attrs: dict[str, Any] = {} if mode is None else {"mode": mode}
    if opset < 11:
        pad_attrs["pads"] = list(pads)
        if value is not None:
            pad_attrs["value"] = value
        pad_in = ["x"]
    else:
        pad_in = ["x", "pads"]
        if pads_input:
            inputs.append(vi("pads", I64, [len(pads)]))
        else:
            inits.append(init("pads", list(pads), np.int64))
        if value is not None or value_input:
            pad_in.append("value")
            if value_input:
                inputs.append(vi("value", F, []))
            else:
                inits.append(init("value", value))
        if axes is not None:
            if len(pad_in) == 2:
                pad_in.append("")
            pad_in.append("axes")
            inits.append(init("axes", list(axes), np.int64))
    conv_in = ["p", "w"]
    if bias:
        inits.append(init("b", RNG.standard_normal(6)))
        conv_in.append("b")
    nodes = [node("Pad", pad_in, ["p"], name="pad", **pad_attrs),
             node("Conv", conv_in, ["y"], name="conv", group=group, **(conv_attrs or {})),
             *extra]
    return typed_model(nodes, inputs, ["y", *outputs], inits, opset=opset)


def conv_attrs(graph: ge.graph.Graph) -> dict[str, Any]:
    (conv,) = graph.nodes_of_type("Conv")
    return {name: conv.get_attr(name) for name in conv.get_attr_names()}


def assert_merged(source: onnx.ModelProto, tmp_path: Path, pads: list[int]) -> onnx.ModelProto:
    """The pass removes the Pad, the Conv reads x with `pads`, and the outputs are kept."""
    graph = load(source)
    assert run_pass(PadConvFusion, graph)
    assert "Pad" not in histogram(graph) and histogram(graph)["Conv"] == 1
    (conv,) = graph.nodes_of_type("Conv")
    assert conv.name == "conv"
    assert conv.get_input_producer(0)[0].name == "x"
    assert [int(p) for p in conv.get_attr("pads")] == pads
    saved = assert_fused(graph, source, tmp_path, tol=TOL)
    assert_second_run_changes_nothing(graph)
    return saved


def assert_second_run_changes_nothing(graph: ge.graph.Graph) -> None:
    before = graph.mutation_count
    assert not run_pass(PadConvFusion, graph)
    assert graph.mutation_count == before


def assert_untouched(source: onnx.ModelProto, tmp_path: Path) -> None:
    graph = load(source)
    before = histogram(graph)
    assert not run_pass(PadConvFusion, graph)
    assert histogram(graph) == before
    assert_fused(graph, source, tmp_path, tol=TOL)


# -- what merges ------------------------------------------------------------------------------


@pytest.mark.parametrize(("pads", "conv", "merged"), [
    ([0, 0, 1, 1, 0, 0, 1, 1], {}, [1, 1, 1, 1]),  # ZeroPadding2D(1)
    ([0, 0, 0, 0, 0, 0, 1, 1], {"strides": [2, 2]}, [0, 0, 1, 1]),  # "same", stride 2, k 3
    ([0, 0, 1, 1, 0, 0, 2, 2], {"strides": [2, 2]}, [1, 1, 2, 2]),  # EfficientNet's, k 5
    ([0, 0, 2, 0, 0, 0, 1, 3], {"pads": [1, 1, 1, 1]}, [3, 1, 2, 4]),  # added to its own
    ([0, 0, 1, 2, 0, 0, 3, 0], {"dilations": [2, 2]}, [1, 2, 3, 0]),
    ([0, 0, 0, 0, 0, 0, 0, 0], {}, [0, 0, 0, 0]),  # a Pad of nothing goes too
    ([0, 0, 5, 5, 0, 0, 5, 5], {}, [5, 5, 5, 5]),  # more than the kernel
], ids=["zero-padding", "same-stride-2", "efficientnet", "conv-pads", "dilated", "none",
        "wide"])
def test_a_zero_pad_merges_into_the_conv_pads(pads: list[int], conv: dict[str, Any],
                                              merged: list[int], tmp_path: Path) -> None:
    assert_merged(pad_conv(pads, conv_attrs=conv), tmp_path, merged)


def test_the_conv_keeps_its_other_attributes_and_inputs(tmp_path: Path) -> None:
    source = pad_conv(conv_attrs={"strides": [2, 2], "kernel_shape": [3, 3],
                                  "auto_pad": "NOTSET"}, group=2, bias=True)
    saved = assert_merged(source, tmp_path, [1, 1, 1, 1])
    (conv,) = saved.graph.node
    attrs = {a.name: helper.get_attribute_value(a) for a in conv.attribute}
    assert attrs["group"] == 2 and attrs["strides"] == [2, 2] and attrs["kernel_shape"] == [3, 3]
    assert list(conv.input) == ["x", "w", "b"] and list(conv.output) == ["y"]


@pytest.mark.parametrize(("x_shape", "pads", "merged"), [
    ((2, 4, 9), [0, 0, 2, 0, 0, 1], [2, 1]),
    ((1, 4, 4, 5, 6), [0, 0, 1, 0, 2, 0, 0, 1, 0, 3], [1, 0, 2, 1, 0, 3]),
], ids=["conv1d", "conv3d"])
def test_conv1d_and_conv3d(x_shape: tuple[int, ...], pads: list[int], merged: list[int],
                           tmp_path: Path) -> None:
    assert_merged(pad_conv(pads, x_shape=x_shape), tmp_path, merged)


@pytest.mark.parametrize("value", [0.0, -0.0], ids=["zero", "negative-zero"])
def test_an_explicit_zero_constant_value(value: float, tmp_path: Path) -> None:
    assert_merged(pad_conv(value=value), tmp_path, [1, 1, 1, 1])


@pytest.mark.parametrize("opset", [9, 10])
def test_before_opset_11_the_pads_and_value_are_attributes(opset: int, tmp_path: Path) -> None:
    assert_merged(pad_conv([0, 0, 1, 0, 0, 0, 2, 1], opset=opset), tmp_path, [1, 0, 2, 1])
    assert_merged(pad_conv(opset=opset, value=0.0, mode="constant"), tmp_path, [1, 1, 1, 1])


@pytest.mark.parametrize(("axes", "pads", "merged"), [
    ([2, 3], [1, 0, 2, 3], [1, 0, 2, 3]),
    ([-2, -1], [1, 0, 2, 3], [1, 0, 2, 3]),
    ([3, 2], [1, 0, 2, 3], [0, 1, 3, 2]),  # the pads follow the axes' order
    ([3], [1, 2], [0, 1, 0, 2]),  # the width only
    ([0, 1, 2, 3], [0, 0, 1, 1, 0, 0, 1, 1], [1, 1, 1, 1]),  # batch and channels named, 0
], ids=["spatial", "negative", "reversed", "width", "all"])
def test_opset_18_axes(axes: list[int], pads: list[int], merged: list[int],
                       tmp_path: Path) -> None:
    assert_merged(pad_conv(pads, opset=18, axes=axes), tmp_path, merged)
    assert_merged(pad_conv(pads, opset=18, axes=axes, value=0.0), tmp_path, merged)


def test_inside_an_if_branch(tmp_path: Path) -> None:
    """A body's Pad of a value of the body merges; one of the outer x stays (a body's
    outer-scope reads are left as they are)."""
    def branch(name: str, padded: str) -> onnx.GraphProto:
        nodes = [node("Relu", ["x"], [f"{name}_r"], name=f"{name}_relu"),
                 node("Pad", [padded, "pads"], [f"{name}_p"], name=f"{name}_pad"),
                 node("Conv", [f"{name}_p", "w"], [name], name=f"{name}_conv")]
        return helper.make_graph(nodes, name, [], [vi(name, F, [2, 6, 8, 8])])

    source = model([node("If", ["c"], ["y"], then_branch=branch("then", "then_r"),
                         else_branch=branch("other", "x"))],
                   [vi("c", onnx.TensorProto.BOOL, []), vi("x", F, [2, 4, 8, 8])],
                   [vi("y", F, [2, 6, 8, 8])],
                   [init("pads", [0, 0, 1, 1, 0, 0, 1, 1], np.int64),
                    init("w", RNG.standard_normal((6, 4, 3, 3)))])
    graph = load(source)
    assert run_pass(PadConvFusion, graph)
    assert histogram(graph, everywhere=True)["Pad"] == 1
    x = RNG.standard_normal((2, 4, 8, 8)).astype(np.float32)
    assert_fused(graph, source, tmp_path, [{"c": np.array(flag), "x": x}
                                           for flag in (True, False)], tol=TOL)


# -- near misses --------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [
    {"value": 0.5}, {"value": 1.0, "opset": 10}, {"mode": "reflect"}, {"mode": "edge"},
    {"mode": "reflect", "opset": 10}, {"value_input": True}, {"pads_input": True},
], ids=["value", "value-attribute", "reflect", "edge", "reflect-attribute", "value-input",
        "pads-input"])
def test_not_for_a_pad_that_is_not_a_constant_zero_pad(kwargs: dict[str, Any],
                                                       tmp_path: Path) -> None:
    source = pad_conv(**kwargs)
    graph = load(source)
    assert not run_pass(PadConvFusion, graph)
    assert histogram(graph)["Pad"] == 1
    if not kwargs.get("value_input") and not kwargs.get("pads_input"):
        assert_fused(graph, source, tmp_path, tol=TOL)


@pytest.mark.parametrize("pads", [
    [0, 1, 1, 1, 0, 0, 1, 1],  # a channel before
    [0, 0, 1, 1, 0, 2, 1, 1],  # a channel after
    [1, 0, 1, 1, 0, 0, 1, 1],  # the batch
    [0, 0, -1, 1, 0, 0, 1, 1],  # a crop
], ids=["channel-begin", "channel-end", "batch", "negative"])
def test_not_for_pads_on_the_batch_or_channel_axes_or_negative(pads: list[int],
                                                                tmp_path: Path) -> None:
    channels = 4 + pads[1] + pads[5]
    x_shape = (2, 4, 8, 8)
    source = pad_conv(pads, x_shape=x_shape)
    if channels != 4:  # the Conv's weight must fit the padded channels
        w = next(i for i in source.graph.initializer if i.name == "w")
        w.CopyFrom(init("w", RNG.standard_normal((6, channels, 3, 3))))
    onnx.checker.check_model(source, full_check=True)
    assert_untouched(source, tmp_path)


def test_not_for_axes_naming_the_channels(tmp_path: Path) -> None:
    source = pad_conv([1, 0, 0, 0], opset=18, axes=[1, 2])
    w = next(i for i in source.graph.initializer if i.name == "w")
    w.CopyFrom(init("w", RNG.standard_normal((6, 5, 3, 3))))
    assert_untouched(source, tmp_path)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_not_into_a_conv_with_auto_pad(auto_pad: str, tmp_path: Path) -> None:
    assert_untouched(pad_conv(conv_attrs={"auto_pad": auto_pad, "strides": [2, 2]}), tmp_path)


def test_not_when_the_pad_has_another_reader(tmp_path: Path) -> None:
    two_convs = pad_conv(extra=[node("Conv", ["p", "w"], ["z"], name="conv2")],
                         outputs=["z"])
    assert_untouched(two_convs, tmp_path)
    relu = pad_conv(extra=[node("Relu", ["p"], ["r"])], outputs=["r"])
    assert_untouched(relu, tmp_path)
    graph_output = pad_conv(outputs=["p"])
    assert_untouched(graph_output, tmp_path)


def test_pools_and_conv_transpose_are_left_alone(tmp_path: Path) -> None:
    """MaxPool's own padding is never the maximum, a zero Pad's can be; AveragePool counts
    its padding only with count_include_pad; ConvTranspose's pads crop its output."""
    pads = init("pads", [0, 0, 1, 1, 0, 0, 1, 1], np.int64)
    for op, attrs in [("MaxPool", {"kernel_shape": [3, 3]}),
                      ("AveragePool", {"kernel_shape": [3, 3], "count_include_pad": 1})]:
        source = typed_model([node("Pad", ["x", "pads"], ["p"]),
                              node(op, ["p"], ["y"], **attrs)],
                       [vi("x", F, [2, 4, 8, 8])], ["y"], [pads])
        assert_untouched(source, tmp_path)
    source = typed_model([node("Pad", ["x", "pads"], ["p"]),
                          node("ConvTranspose", ["p", "w"], ["y"])],
                   [vi("x", F, [2, 4, 8, 8])], ["y"],
                   [pads, init("w", RNG.standard_normal((4, 6, 3, 3)))])
    assert_untouched(source, tmp_path)


# -- in the compiler ----------------------------------------------------------------------


def test_on_by_default_in_the_builtin_fusion_step_and_disabled_by_name() -> None:
    assert PadConvFusion in BUILTIN_PASSES
    spec = PadConvFusion.__ge_builtin__  # type: ignore[attr-defined]
    assert spec.step == "builtin_fusion" and spec.on_by_default
    assert spec.also_in == ("origin_graph_optimize",)
    source = pad_conv(conv_attrs={"strides": [2, 2]})
    result = ge.compile(source, verify=True, rtol=TOL, atol=TOL)
    assert result.verification is not None and result.verification.ok
    assert "Pad" not in result.report.ops_after
    assert result.report.rewrites_by_pass().get("PadConvFusion") == 1
    kept = ge.compile(source, disable=["PadConvFusion"])
    assert kept.report.ops_after.get("Pad") == 1


def test_pads_computed_from_constants_merge_once_folded() -> None:
    """tf2onnx may write the pads as a Concat of constants: folded in the origin-graph
    rounds, where the pass runs again."""
    source = typed_model([node("Concat", ["lo", "hi"], ["pads"], axis=0),
                    node("Pad", ["x", "pads"], ["p"]), node("Conv", ["p", "w"], ["y"])],
                   [vi("x", F, [2, 4, 8, 8])], ["y"],
                   [init("lo", [0, 0, 1, 1], np.int64), init("hi", [0, 0, 1, 1], np.int64),
                    init("w", RNG.standard_normal((6, 4, 3, 3)))])
    result = ge.compile(source, verify=True, rtol=TOL, atol=TOL)
    assert result.verification is not None and result.verification.ok
    assert set(result.report.ops_after) - {"Const"} == {"Conv"}
