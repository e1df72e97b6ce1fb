"""Graphs built with the ES builder export, pass the checker and compute what numpy says."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from ge.errors import BuilderMixError
from ge.es import GraphBuilder, TensorHolder
from ge.es import onnx as ops
from ge.graph import DataType

RNG = np.random.default_rng(0)


def _run(build: Callable[[GraphBuilder, list[TensorHolder]], list[TensorHolder]],
         feeds: list[np.ndarray], opset: int = 17) -> list[np.ndarray]:
    builder = GraphBuilder("t", opset=opset)
    types = {np.float32: DataType.DT_FLOAT, np.int64: DataType.DT_INT64, np.bool_: DataType.DT_BOOL}
    inputs = [builder.create_input(i, data_type=types[a.dtype.type], shape=list(a.shape))
              for i, a in enumerate(feeds)]
    outputs = build(builder, inputs)
    for out in outputs:  # point 7: every output desc is known as it is built
        desc = out._get_node_snapshot().get_output_desc(out.output_index)
        assert desc.data_type != DataType.DT_UNDEFINED and not desc.shape.is_unknown_rank()
    model = builder.build_and_reset(outputs).to_onnx()
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, feeds)))


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def test_elementwise_and_overloads() -> None:
    a, b = f32(2, 3), f32(2, 3)
    got = _run(lambda _, x: [ops.Relu(x[0] * 2.0 + x[1]) - 1.0, 3.0 / ops.Abs(x[1])], [a, b])
    np.testing.assert_allclose(got[0], np.maximum(a * 2 + b, 0) - 1, rtol=1e-6)
    np.testing.assert_allclose(got[1], 3 / np.abs(b), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32])
def test_a_numpy_scalar_keeps_its_dtype(dtype: type) -> None:
    """`x * np.float16(0.5)` on a float16 tensor (trial U: numpy scalars became float32 or
    int64 constants, and a float16 model's replacement was refused, GE1405)."""
    builder = GraphBuilder("t")
    types = {np.float16: DataType.DT_FLOAT16, np.float64: DataType.DT_DOUBLE,
             np.int32: DataType.DT_INT32}
    x = builder.create_input(0, data_type=types[dtype], shape=[2, 3])
    y = x * dtype(3) + dtype(1)
    model = builder.build_and_reset([y]).to_onnx()
    onnx.checker.check_model(model, full_check=True)
    a = np.arange(6).reshape(2, 3).astype(dtype)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: a})[0]
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, a * 3 + 1)


def test_a_numpy_vector_is_a_list_attribute() -> None:
    """`perm=np.array([...])` and `value_floats=np.arange(...)` as the lists they hold
    (trial U: a 1-D array given for a list attribute was GE1304)."""
    builder = GraphBuilder("t")
    x = builder.create_input(0, shape=[2, 3, 4])
    swapped = ops.Transpose(x, perm=np.array([0, 2, 1], dtype=np.int32))
    scale = ops.Constant(value_floats=np.array([2.0, 3.0, 4.0], np.float32), builder=builder)
    model = builder.build_and_reset([ops.Mul(swapped, ops.Unsqueeze(
        scale, ops.Constant(value_ints=np.array([0, 1]), builder=builder)))]).to_onnx()
    onnx.checker.check_model(model, full_check=True)
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: a})[0]
    np.testing.assert_array_equal(got, a.transpose(0, 2, 1) * np.float32([2, 3, 4]))


def test_bools_for_an_ints_attribute_are_ints_as_set_attr_reads_them() -> None:
    """Trial D: ES refused `np.array([True, False])` for an INTS attribute (GE1304) where
    `Node.set_attr` and ES's own INT attributes take bools as 0 and 1: they agree now."""
    builder = GraphBuilder("t")
    x = builder.create_input(0, shape=[2, 3])
    node = ops.Transpose(x, perm=np.array([True, False]))._node
    assert node.get_attr("perm") == [1, 0]
    assert ops.Transpose(x, perm=[True, False])._node.get_attr("perm") == [1, 0]


@pytest.mark.parametrize("attrs", [{"value_ints": [0, 1]}, {"value": np.array([0, 1])},
                                   {"value_ints": np.array([0, 1], dtype=np.int32)}])
def test_a_constant_operator_is_read_as_loading_reads_it(attrs: dict) -> None:
    """`Constant(value_ints=...)` builds the Const node loading makes of a Constant, so what
    reads it is inferred from its value (it was an operator node: Unsqueeze by it had no
    shape, and a graph output built on it failed onnx's checker)."""
    builder = GraphBuilder("t")
    axes = ops.Constant(**attrs, builder=builder)
    assert axes._node.type == "Const"
    x = builder.create_input(0, shape=[3])
    y = ops.Unsqueeze(x, axes)
    assert y.get_tensor_desc().get_shape().get_dims() == [1, 1, 3]
    model = builder.build_and_reset([y]).to_onnx()
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    a = np.float32([1, 2, 3])
    np.testing.assert_array_equal(session.run(None, {session.get_inputs()[0].name: a})[0],
                                  a.reshape(1, 1, 3))


def test_matmul_and_gemm() -> None:
    a, b, c = f32(2, 3), f32(3, 4), f32(4)
    got = _run(lambda _, x: [ops.MatMul(x[0], x[1]),
                             ops.Gemm(x[0], x[1], x[2], alpha=0.5, beta=2)], [a, b, c])
    np.testing.assert_allclose(got[0], a @ b, rtol=1e-5)
    np.testing.assert_allclose(got[1], 0.5 * (a @ b) + 2 * c, rtol=1e-5)


def _conv_ref(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    n, _, h, wd = x.shape
    k = w.shape[2]
    out = np.zeros((n, w.shape[0], h - k + 1, wd - k + 1), np.float32)
    for i in range(out.shape[2]):
        for j in range(out.shape[3]):
            out[:, :, i, j] = np.einsum("nchw,ochw->no", x[:, :, i:i + k, j:j + k], w)
    return out


def test_conv_and_pooling() -> None:
    x, w = f32(1, 2, 6, 6), f32(3, 2, 3, 3)
    got = _run(lambda _, t: [ops.Conv(t[0], t[1], kernel_shape=[3, 3]),
                             ops.MaxPool(t[0], kernel_shape=[2, 2], strides=[2, 2]),
                             ops.GlobalAveragePool(t[0])], [x, w])
    np.testing.assert_allclose(got[0], _conv_ref(x, w), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[1], x.reshape(1, 2, 3, 2, 3, 2).max(axis=(3, 5)))
    np.testing.assert_allclose(got[2], x.mean(axis=(2, 3), keepdims=True), rtol=1e-5)


def test_shape_ops() -> None:
    x = f32(2, 3, 4)

    def build(_: GraphBuilder, t: list[TensorHolder]) -> list[TensorHolder]:
        r = ops.Reshape(t[0], [4, -1])
        tr = ops.Transpose(t[0], perm=[2, 0, 1])
        cat = ops.Concat([t[0], t[0]], axis=1)
        s0, s1 = ops.Split(t[0], [1, 2], axis=1)
        sl = ops.Slice(t[0], [0, 1], [2, 4], [0, 2])
        ga = ops.Gather(t[0], [2, 0], axis=2)
        return [r, tr, cat, s0, s1, sl, ga]

    got = _run(build, [x])
    want = [x.reshape(4, -1), x.transpose(2, 0, 1), np.concatenate([x, x], 1), x[:, :1],
            x[:, 1:], x[0:2, :, 1:4], x[:, :, [2, 0]]]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w)


def test_reductions_softmax_layernorm() -> None:
    x, scale, bias = f32(2, 5), f32(5), f32(5)

    def build(_: GraphBuilder, t: list[TensorHolder]) -> list[TensorHolder]:
        return [ops.ReduceSum(t[0], [1], keepdims=0), ops.ReduceMean(t[0], axes=[0]),
                ops.Softmax(t[0], axis=-1), ops.LayerNormalization(t[0], t[1], t[2])]

    got = _run(build, [x, scale, bias])
    e = np.exp(x - x.max(-1, keepdims=True))
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    want = [x.sum(1), x.mean(0, keepdims=True), e / e.sum(-1, keepdims=True),
            (x - mean) / np.sqrt(var + 1e-5) * scale + bias]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("flag", [True, False])
def test_if_with_branches_built_by_builders(flag: bool) -> None:
    def branch(name: str, value: list[float]):  # type: ignore[no-untyped-def]
        b = GraphBuilder(name, opset=17)
        return b.build_and_reset([ops.Identity(b.create_const_float(value))])

    def build(_: GraphBuilder, t: list[TensorHolder]) -> list[TensorHolder]:
        (out,) = ops.If(t[0], then_branch=branch("then", [1.0, 2.0]),
                        else_branch=branch("else", [3.0, 4.0]))
        return [out]

    (got,) = _run(build, [np.array(flag)])
    np.testing.assert_allclose(got, [1.0, 2.0] if flag else [3.0, 4.0])


@pytest.mark.parametrize("flag", [True, False])
def test_if_branches_read_values_of_the_enclosing_builder(flag: bool) -> None:
    """Branches built by sub-builders use the outer graph's tensors, as ONNX bodies do."""

    def build(b: GraphBuilder, t: list[TensorHolder]) -> list[TensorHolder]:
        cond, x = t
        doubled = x * 2.0
        with b.create_subgraph_builder("then") as then_b:
            then_graph = then_b.build_and_reset([ops.Relu(doubled)])
        with b.create_subgraph_builder("else") as else_b:
            else_graph = else_b.build_and_reset([ops.Neg(x) + doubled])
        (out,) = ops.If(cond, then_branch=then_graph, else_branch=else_graph)
        return [out]

    x = np.array([[-1.0, 2.0, -3.0]], dtype=np.float32)
    (got,) = _run(build, [np.array(flag), x])
    np.testing.assert_allclose(got, np.maximum(2 * x, 0) if flag else x)


def test_a_body_cannot_read_tensors_of_an_unrelated_builder() -> None:
    outer = GraphBuilder("outer", opset=17)
    other = GraphBuilder("other", opset=17)
    body = outer.create_subgraph_builder("body")
    stranger = other.create_input(0, shape=[2])
    with pytest.raises(BuilderMixError, match="tensors of different builders cannot be mixed"):
        ops.Relu(stranger, builder=body)
    inner = body.create_input(0, shape=[2])
    with pytest.raises(BuilderMixError, match="tensors of different builders cannot be mixed"):
        ops.Relu(inner, builder=outer)  # outer values flow in, never out


def test_an_ai_onnx_ml_operator_builds_and_runs() -> None:
    """ge.es.ml functions build nodes of the ai.onnx.ml domain, imported at its opset.
    (onnx infers only the element type of these operators, so shapes stay unknown.)"""
    from ge.es import ml

    builder = GraphBuilder("ml", opset=17)
    x_in = builder.create_input(0, shape=[1, 3])
    outputs = [ml.Binarizer(x_in, threshold=0.5), ml.Scaler(x_in, offset=[1.0], scale=[2.0])]
    assert outputs[0]._get_node_snapshot().domain == "ai.onnx.ml"
    for out in outputs:
        desc = out._get_node_snapshot().get_output_desc(0)
        out.set_shape([1, 3]).set_data_type(desc.data_type)
    graph = builder.build_and_reset(outputs)
    assert graph.opset_imports["ai.onnx.ml"] >= 1
    model = graph.to_onnx()
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.array([[0.2, 0.7, 1.5]], dtype=np.float32)
    binary, scaled = session.run(None, {session.get_inputs()[0].name: x})
    np.testing.assert_array_equal(binary, (x > 0.5).astype(np.float32))
    np.testing.assert_allclose(scaled, (x - 1.0) * 2.0)


def test_a_named_input_keeps_its_name_in_onnx() -> None:
    """create_input(name="x") is the graph input "x" (it was "x:0", so run_model(g, {"x":
    ...}) failed); an unnamed one is the graph input of its Data node's generated name
    (`input_1`; it was `input_1:0`)."""
    from ge.session import run_model

    b = GraphBuilder("g", opset=17)
    x = b.create_input(0, name="x", shape=[2])
    y = b.create_input(1, shape=[2])
    graph = b.build_and_reset([ops.Relu(x) + y])
    assert [i.name for i in graph.to_onnx().graph.input] == ["x", "input_1"]
    out = run_model(graph, {"x": np.array([-1.0, 2.0], np.float32),
                            "input_1": np.ones(2, np.float32)})
    np.testing.assert_array_equal(next(iter(out.values())), [1.0, 3.0])
