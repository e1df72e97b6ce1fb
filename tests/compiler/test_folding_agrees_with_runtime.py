"""Constant folding gives what onnxruntime computes from the original model, at the edges
of the values too: each case here was folded to another value before its fix (trial Y,
trial CC), and is checked against onnxruntime on the original model."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from builtin_helpers import (
    I64,
    assert_sound,
    histogram,
    init,
    load,
    model,
    ort_run,
    run_pass,
    vi,
)
from onnx import helper, numpy_helper

from ge.compiler.builtin import ConstantFolding as CF

node = helper.make_node
I32 = onnx.TensorProto.INT32


def _reduced(op: str, values: list[int], dtype: type = np.int32) -> onnx.ModelProto:
    elem = I32 if dtype is np.int32 else I64
    return model([node(op, ["c"], ["y"], name="op", keepdims=0)], [], [vi("y", elem, [])],
                 [init("c", values, dtype)], opset=17)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceL1", "ReduceMean", "ReduceSumSquare",
                                "ReduceProd", "ReduceL2"])
def test_an_integer_reduction_that_may_overflow_is_left_to_the_runtime(op: str) -> None:
    """onnxruntime reduces integers in a wider type and saturates (an int32 ReduceSum of
    [2**31 - 1, 5] is 2**31 - 1); the reference evaluator wrapped around (-2**31 + 4)."""
    big = [2**31 - 1, 5] if op in ("ReduceSum", "ReduceL1", "ReduceMean") else [2**16, 2**16]
    original = _reduced(op, big)
    graph = load(original)
    assert not run_pass(CF, graph)
    assert histogram(graph)[op] == 1
    if op == "ReduceSumSquare":
        return  # (onnx 1.23's evaluator answers int64 for int32: never folded)
    small = _reduced(op, [7, -5, 3])
    graph = load(small)
    assert run_pass(CF, graph)  # no partial result can overflow: folded, to the runtime's
    assert op not in histogram(graph)
    assert_sound(graph, small, [{}])


def test_an_int64_sum_that_may_overflow_is_left_to_the_runtime() -> None:
    """(onnxruntime 1.32 saturates to 2**63 - 1, 1.19 wraps: whichever it is, it is kept)"""
    original = _reduced("ReduceSum", [2**63 - 1, 5], np.int64)
    graph = load(original)
    assert not run_pass(CF, graph)
    assert_sound(graph, original, [{}])


@pytest.mark.parametrize("values", [[[0.0, -1e30, 2.0]], [[-1e30, -1e30, 1.0]],
                                    [[1.0, 2.0, 3.0]], [[np.inf, 1.0, 0.0]]])
def test_a_log_softmax_folds_to_the_runtime_value(values: list[list[float]]) -> None:
    """The reference evaluator took the log of the softmax: -inf where a probability
    underflows, where onnxruntime gives x - max - log(sum(exp(x - max))) (-1e30). ge's
    kernel computes that in float64, rounded once."""
    original = model([node("LogSoftmax", ["c"], ["y"], name="op", axis=-1)], [],
                     [vi("y", shape=[1, 3])], [init("c", values)], opset=17)
    graph = load(original)
    assert run_pass(CF, graph)
    assert "LogSoftmax" not in histogram(graph)
    assert_sound(graph, original, [{}], exact=False)  # (to an ulp: no runtime agrees there)


F16 = onnx.TensorProto.FLOAT16
STR = onnx.TensorProto.STRING
BOOL = onnx.TensorProto.BOOL
NAN = float("nan")


def _resize(mode: str, transform: str, scale: float) -> onnx.ModelProto:
    return model([node("Resize", ["c", "", "scales"], ["y"], name="op", mode=mode,
                       coordinate_transformation_mode=transform)],
                 [], [vi("y", shape=[1, 1, 4, int(4 * scale)])],
                 [init("c", np.arange(16).reshape(1, 1, 4, 4)),
                  init("scales", [1, 1, 1, scale])], opset=19)


def _cast(values: object, dtype: object, to: int, out: int, shape: list[int]
          ) -> onnx.ModelProto:
    return model([node("Cast", ["c"], ["y"], name="op", to=to)], [], [vi("y", out, shape)],
                 [init("c", values, dtype)], opset=19)


def _bfloat16_cast(values: list[float], to: int) -> onnx.ModelProto:
    return model([node("Cast", ["c"], ["y"], name="op", to=to)], [],
                 [vi("y", to, [len(values)])],
                 [helper.make_tensor("c", onnx.TensorProto.BFLOAT16, [len(values)], values)],
                 opset=19)


#: (what, the model, the operator left to the runtime); each folded to another value
#: than onnxruntime's before its fix (trial CC).
_LEFT = {
    "Resize linear align_corners x0.6": (_resize("linear", "align_corners", 0.6), "Resize"),
    "Resize nearest half_pixel x0.6": (_resize("nearest", "half_pixel", 0.6), "Resize"),
    "Resize cubic asymmetric x0.6":
        (_resize("cubic", "asymmetric", 0.6), "Resize"),
    "Hardmax over a NaN": (model([node("Hardmax", ["c"], ["y"], name="op", axis=-1)], [],
                                 [vi("y", shape=[3, 3])],
                                 [init("c", [[NAN, 1, 2], [1, NAN, 2], [1, 3, 3]])]),
                           "Hardmax"),
    "Unique over a NaN": (model([node("Unique", ["c"], ["y"], name="op")], [],
                                [vi("y", shape=["u"])], [init("c", [-0.0, 1.0, NAN])]),
                          "Unique"),
    "Cast of strings to bool": (_cast(np.array(["0", "00", "0.5", "-0", "1", "2"],
                                               dtype=object), object, BOOL, BOOL, [6]),
                                "Cast"),
    "Cast of out-of-range bfloat16 to uint8": (_bfloat16_cast([-1.5, -2.5, 300.0, np.inf],
                                                              onnx.TensorProto.UINT8), "Cast"),
    "Cast of a bfloat16 NaN to int32": (_bfloat16_cast([NAN, 1.0], I32), "Cast"),
    "Clip to a NaN min": (model([node("Clip", ["c", "lo", "hi"], ["y"], name="op")], [],
                                [vi("y", shape=[4])],
                                [init("c", [-3.5, -0.5, 0.5, 1.5]), init("lo", NAN),
                                 init("hi", 1.0)]), "Clip"),
    "NonZero of a scalar": (model([node("NonZero", ["c"], ["y"], name="op")], [],
                                  [vi("y", I64, ["r", "n"])], [init("c", 3.0)]), "NonZero"),
    "Pow of int32 beyond its range": (model([node("Pow", ["c", "e"], ["y"], name="op")], [],
                                            [vi("y", I32, [3])],
                                            [init("c", [3, -3, 5], np.int32),
                                             init("e", 30, np.int32)]), "Pow"),
    "int64 Pow beyond double's exact integers": (
        model([node("Pow", ["c", "e"], ["y"], name="op")], [], [vi("y", I64, [1])],
              [init("c", [3], np.int64), init("e", 35, np.int64)]), "Pow"),
    "int64 ReduceProd beyond double's exact integers": (
        _reduced("ReduceProd", [3] * 35, np.int64), "ReduceProd"),
    "Cast of a float8 NaN to int32": (
        model([node("Cast", ["c"], ["y"], name="op", to=I32)], [], [vi("y", I32, [3])],
              [numpy_helper.from_array(np.array([1.0, -2.5, NAN], ml_dtypes.float8_e5m2),
                                       "c")], opset=19), "Cast"),
    "int64 Pow far beyond any range": (  # (the bound overflowed Python's float: E13028)
        model([node("Pow", ["c", "e"], ["y"], name="op")], [], [vi("y", I64, [1])],
              [init("c", [10], np.int64), init("e", [400], np.int64)]), "Pow"),
    "Cast of a double to float8": (
        model([node("Cast", ["c"], ["q"], name="op", to=onnx.TensorProto.FLOAT8E4M3FN),
               node("Cast", ["q"], ["y"], name="back", to=onnx.TensorProto.FLOAT)], [],
              [vi("y", shape=[2])], [init("c", [1 + 2**-4 + 2**-30, -1.0], np.float64)],
              opset=19), "Cast"),
    "Cast of floats to int4": (
        model([node("Cast", ["c"], ["q"], name="op", to=onnx.TensorProto.INT4),
               node("Cast", ["q"], ["y"], name="back", to=onnx.TensorProto.FLOAT)], [],
              [vi("y", shape=[5])], [init("c", [2.5, 3.5, 0.5, 1.5, 7.6])], opset=21), "Cast"),
    "Resize tf_crop_and_resize by sizes": (
        model([node("Resize", ["c", "roi", "", "sizes"], ["y"], name="op", mode="nearest",
                    coordinate_transformation_mode="tf_crop_and_resize",
                    nearest_mode="round_prefer_ceil")],
              [], [vi("y", shape=[1, 1, 3, 5])],
              [init("c", np.arange(16).reshape(1, 1, 4, 4)),
               init("roi", [0, 0, 0.2, 0.1, 1, 1, 0.9, 0.8]),
               init("sizes", [1, 1, 3, 5], np.int64)], opset=19), "Resize"),
    "Slice back to the front from an end of INT64_MAX": (  # (trial NN: [] where ORT [2, 1])
        model([node("Slice", ["c", "s", "e", "a", "st"], ["y"], name="op")], [],
              [vi("y", I64, ["k"])],
              [init("c", [1, 2, 3], np.int64), init("s", [1], np.int64),
               init("e", [2**63 - 1], np.int64), init("a", [0], np.int64),
               init("st", [-1], np.int64)], check=False), "Slice"),
    "StringNormalizer of an empty string": (
        model([node("StringNormalizer", ["c"], ["y"], name="op", case_change_action="NONE")],
              [], [vi("y", STR, ["k"])],
              [init("c", np.array(["a", "", "b c"], dtype=object), object)]),
        "StringNormalizer"),
    "StringSplit of an empty string": (
        model([node("StringSplit", ["c"], ["y", "n"], name="op", delimiter=" ")], [],
              [vi("y", STR, [2, "m"]), vi("n", I64, [2])],
              [init("c", np.array(["a b", ""], dtype=object), object)], opset=20),
        "StringSplit"),
}


@pytest.mark.parametrize("case", sorted(_LEFT))
def test_a_value_the_runtime_computes_otherwise_is_left_to_it(case: str) -> None:
    original, op = _LEFT[case]
    try:
        ort_run(original, {})
    except Exception as err:  # onnxruntime 1.19's StringNormalizer needs an en_US locale
        pytest.skip(f"onnxruntime cannot run the original here: {str(err)[:120]}")
    graph = load(original)
    run_pass(CF, graph)
    assert histogram(graph)[op] == sum(n.op_type == op for n in original.graph.node)
    assert_sound(graph, original, [{}])


def test_the_same_operators_fold_where_the_runtime_agrees() -> None:
    """The rules are about the values: whole Resize lengths, in-range casts, NaN-free
    Hardmax, a small Pow still fold (and to onnxruntime's values)."""
    for original in (_resize("linear", "align_corners", 0.5),
                     _resize("nearest", "asymmetric", 2.0),
                     _cast([-0.5, 2.5, 255.0], np.float32, onnx.TensorProto.UINT8,
                           onnx.TensorProto.UINT8, [3]),
                     _bfloat16_cast([-0.5, 2.5, 255.0], onnx.TensorProto.UINT8),
                     _cast([-np.inf, 1.5], np.float32, I64, I64, [2]),  # (T5's log(0))
                     model([node("Hardmax", ["c"], ["y"], name="op", axis=-1)], [],
                           [vi("y", shape=[2, 3])], [init("c", [[0, 1, 2], [1, 3, 3]])]),
                     model([node("Pow", ["c", "e"], ["y"], name="op")], [], [vi("y", I32, [3])],
                           [init("c", [3, -3, 5], np.int32), init("e", 3, np.int32)])):
        graph = load(original)
        assert run_pass(CF, graph)
        assert set(histogram(graph)) == {"Const", "NetOutput"} or "op" not in {
            n.name for n in graph.get_direct_nodes()}
        assert_sound(graph, original, [{}])


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_a_float16_gelu_folds_to_the_runtime_value(approximate: str) -> None:
    """onnxruntime computes a float16 Gelu in float32; the evaluator's function body in
    float16 gave -0.0 for -2.434e-4 at -3.832, and -0.004395 for -0.004051 at -3."""
    x = np.linspace(-8, 8, 401).astype(np.float16)
    original = model([node("Gelu", ["c"], ["y"], name="op", approximate=approximate)], [],
                     [vi("y", F16, [401])], [init("c", x, np.float16)], opset=20)
    graph = load(original)
    assert run_pass(CF, graph)
    exported = graph.to_onnx()
    got, want = ort_run(exported, {})[0], ort_run(original, {})[0]
    # to a float16 ulp, or 1e-6 near zero (onnxruntime's tanh form flushes -3.6e-7 to -0)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32),
                               rtol=2**-10, atol=1e-6)


_GG = {
    "MaxUnpool given an output_shape": (
        model([node("MaxUnpool", ["c", "i", "shape"], ["y"], name="op", kernel_shape=[2, 2],
                    strides=[2, 2])], [], [vi("y", shape=[1, 1, 5, 5])],
              [init("c", [[[[5, 6], [7, 8]]]]), init("i", [[[[5, 7], [13, 15]]]], np.int64),
               init("shape", [1, 1, 5, 5], np.int64)], opset=19), "MaxUnpool"),
    "DFT of float32": (
        model([node("DFT", ["c", "", "ax"], ["y"], name="op")], [], [vi("y", shape=[1, 8, 2])],
              [init("c", np.linspace(-945, 945, 8).reshape(1, 8, 1)),
               init("ax", 1, np.int64)], opset=20), "DFT"),
}


@pytest.mark.parametrize("case", sorted(_GG))
def test_operators_onnxruntime_computes_otherwise_are_not_folded(case: str) -> None:
    """onnx's conformance models with constant inputs (trial GG): onnxruntime places
    MaxUnpool's values by output_shape otherwise, and rounds DFT otherwise."""
    original, op = _GG[case]
    graph = load(original)
    run_pass(CF, graph)
    assert histogram(graph)[op] == 1
    assert_sound(graph, original, [{}])


def test_a_shape_of_a_slice_back_to_the_front_is_not_folded_from_inferred_dims() -> None:
    """onnx infers `x[1:INT32_MAX:-1]` as empty (ONNX clamps the end to the last index);
    onnxruntime computes it to the front, [x1, x0]: Shape of it is not folded (trial NN)."""
    original = model([node("Slice", ["x", "s", "e", "a", "st"], ["r"], name="slice"),
                      node("Shape", ["r"], ["k"], name="shape")],
                     [vi("x", shape=[3])], [vi("k", I64, [1])],
                     [init("s", [1], np.int64), init("e", [2**31 - 1], np.int64),
                      init("a", [0], np.int64), init("st", [-1], np.int64)], check=False)
    graph = load(original)
    run_pass(CF, graph)
    assert histogram(graph)["Shape"] == 1
    x = np.arange(3, dtype=np.float32)
    options = ort.SessionOptions()  # (its own optimisations fold the Shape to the [0] too)
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    for source in (original, graph.to_onnx()):
        session = ort.InferenceSession(source.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        assert session.run(None, {"x": x})[0].tolist() == [2]
    assert_sound(graph, original, [{"x": x}])


def test_a_shape_of_an_stft_is_not_folded_from_inferred_dims() -> None:
    """onnx 1.23 infers an STFT without `onesided` as two-sided (16 bins for a frame of 16)
    where it computes 9: Shape of it folded to the inferred 16 (trial GG)."""
    original = model([node("STFT", ["x", "step", "", "length"], ["spec"], name="stft"),
                      node("Shape", ["spec"], ["s"], name="shape")],
                     [vi("x", shape=[1, 128, 1])], [vi("s", I64, [4])],
                     [init("step", 8, np.int64), init("length", 16, np.int64)], opset=17,
                     check=False)
    graph = load(original)
    run_pass(CF, graph)
    assert histogram(graph)["Shape"] == 1
    x = np.random.default_rng(0).standard_normal((1, 128, 1)).astype(np.float32)
    assert ort_run(original, {"x": x})[0].tolist() == [1, 15, 9, 2]
    assert_sound(graph, original, [{"x": x}])
