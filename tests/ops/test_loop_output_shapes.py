"""The values computed from a Loop's carried output (trial VV): onnx's inference gives the
output its element type only, so everything after the first Loop of a decoder was
`float32?` and the LayerNorms written out after it did not fuse (52 of 60). Whole-model
inference now hands onnx the type the body declares for the carried value, kept where
`carried_desc` proves it from the initial value and the body's next value
(`ge.ops.loop_claims`)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

import ge
import ge.graph
import ge.ops.model_inference as model_inference
from ge.graph import Graph
from ge.graph.tensor_desc import TensorDesc
from ge.ops import infer_shapes, register_op, unregister_op
from ge.ops.registry import InferContext

D = 8
SHAPE: list[int | str] = ["batch", "seq", D]


def _layer_norm(x: str, p: str) -> list[onnx.NodeProto]:
    return [h.make_node("ReduceMean", [x, "axes"], [f"{p}m"]),
            h.make_node("Sub", [x, f"{p}m"], [f"{p}d"]),
            h.make_node("Pow", [f"{p}d", "two"], [f"{p}p"]),
            h.make_node("ReduceMean", [f"{p}p", "axes"], [f"{p}v"]),
            h.make_node("Add", [f"{p}v", "eps"], [f"{p}ve"]),
            h.make_node("Sqrt", [f"{p}ve"], [f"{p}s"]),
            h.make_node("Div", [f"{p}d", f"{p}s"], [f"{p}n"]),
            h.make_node("Mul", [f"{p}n", "gamma"], [f"{p}g"]),
            h.make_node("Add", [f"{p}g", "beta"], [f"{p}ln"])]


def _loop(x: str, p: str, body_shape: list[int | str]) -> onnx.NodeProto:
    """Loop(2 trips) carrying x through `v * one` (an outer value), the body declaring the
    carried value `body_shape`."""
    body = h.make_graph(
        [h.make_node("Identity", [f"{p}c"], [f"{p}c_out"]),
         h.make_node("Mul", [f"{p}v", "one"], [f"{p}v_out"])], f"{p}body",
        [h.make_tensor_value_info(f"{p}i", TP.INT64, []),
         h.make_tensor_value_info(f"{p}c", TP.BOOL, []),
         h.make_tensor_value_info(f"{p}v", TP.FLOAT, body_shape)],
        [h.make_tensor_value_info(f"{p}c_out", TP.BOOL, []),
         h.make_tensor_value_info(f"{p}v_out", TP.FLOAT, body_shape)])
    return h.make_node("Loop", ["trips", "", x], [f"{p}out"], name=f"{p}Loop", body=body)


def _model(x_shape: list[int | str] | None = None,
           body_shape: list[int | str] | None = None) -> onnx.ModelProto:
    """x -> Loop -> LayerNorm -> Reshape(Concat(Shape[:2], [D])) -> Loop -> LayerNorm -> Relu
    -> y: two chained Loops, each followed by a LayerNorm written out whose result is not a
    graph output (whose declared dims would have typed it)."""
    nodes = [_loop("x", "a_", body_shape or SHAPE), *_layer_norm("a_out", "a_"),
             h.make_node("Shape", ["a_ln"], ["shape"]),
             h.make_node("Gather", ["shape", "first_two"], ["lead"], axis=0),
             h.make_node("Concat", ["lead", "tail"], ["target"], axis=0),
             h.make_node("Reshape", ["a_ln", "target"], ["r"]),
             _loop("r", "b_", body_shape or SHAPE), *_layer_norm("b_out", "b_"),
             h.make_node("Relu", ["b_ln"], ["y"])]
    rng = np.random.default_rng(0)
    inits = [nh.from_array(np.array(2, np.int64), "trips"),
             nh.from_array(np.array(1.0, np.float32), "one"),
             nh.from_array(np.array([-1], np.int64), "axes"),
             nh.from_array(np.array([0, 1], np.int64), "first_two"),
             nh.from_array(np.array([D], np.int64), "tail"),
             nh.from_array(np.array(2.0, np.float32), "two"),
             nh.from_array(np.array(1e-5, np.float32), "eps"),
             nh.from_array(rng.uniform(0.5, 1.5, D).astype(np.float32), "gamma"),
             nh.from_array(rng.standard_normal(D).astype(np.float32), "beta")]
    shape = x_shape or SHAPE
    graph = h.make_graph(nodes, "main", [h.make_tensor_value_info("x", TP.FLOAT, shape)],
                         [h.make_tensor_value_info("y", TP.FLOAT, shape)], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)], ir_version=9)
    onnx.checker.check_model(model, full_check=True)
    return model


def _dims(graph: Graph) -> dict[str, list[int | str] | None]:
    found = {}
    for node in graph.get_direct_nodes():
        for i, name in enumerate(node.get_output_names()):
            if name and node.has_output_desc(i):
                shape = node.get_output_desc(i).get_shape()
                found[name] = None if shape.is_unknown_rank() else list(shape)
    return found


@pytest.fixture
def onnx_runs(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The whole-model runs of onnx's inference, one entry each."""
    runs: list[bool] = []
    real = model_inference._infer

    def counted(serialized: bytes, strict: bool, data_prop: bool) -> onnx.ModelProto:
        runs.append(data_prop)
        return real(serialized, strict, data_prop)

    monkeypatch.setattr(model_inference, "_infer", counted)
    return runs


def test_onnx_leaves_what_follows_a_loop_without_a_shape() -> None:
    """What the fix is about: onnx's own inference of the model."""
    inferred = onnx.shape_inference.infer_shapes(_model(), strict_mode=True, data_prop=True)
    infos = {vi.name: vi.type.tensor_type for vi in inferred.graph.value_info}
    assert not infos["a_out"].HasField("shape") and not infos["a_m"].HasField("shape")


def test_values_after_chained_loops_are_typed_in_one_run(onnx_runs: list[bool]) -> None:
    graph = ge.graph.load(_model())
    infer_shapes(graph, strict=True)
    dims = _dims(graph)
    for name in ("a_out", "a_d", "a_ln", "r", "b_out", "b_d", "b_ln", "y"):
        assert dims[name] == SHAPE, name
    assert dims["a_m"] == dims["b_v"] == ["batch", "seq", 1]
    assert dims["target"] == [3]
    assert onnx_runs == [True]  # the bodies declare the carried values as they are


def test_a_body_declaring_other_dims_than_proven(onnx_runs: list[bool]) -> None:
    """x is [2, 3, D] while the bodies declare [batch, seq, D]: the claim is corrected to
    what is proven, [?, ?, D] (rank and last dim: the LayerNorms can be checked), and the
    body's symbols never reach the values after the Loop."""
    graph = ge.graph.load(_model(x_shape=[2, 3, D]))
    infer_shapes(graph, strict=True)
    dims = _dims(graph)
    for name in ("a_out", "a_ln", "b_out", "b_ln"):
        got = dims[name]
        assert got is not None and len(got) == 3 and got[2] == D, (name, got)
        assert "batch" not in got and "seq" not in got and 2 not in got, (name, got)
    # a run with both claims, one with the first corrected (the second Loop's initial value
    # then loses its symbols), one with both corrected
    assert len(onnx_runs) == 3


def test_a_body_declaring_another_rank_claims_nothing(onnx_runs: list[bool]) -> None:
    """A body declaring its carried value [n, D] for a [batch, seq, D] initial value proves
    nothing: inference runs again without claims, and the values after the Loop keep the
    element type only, as before."""
    model = _model(body_shape=["n", D])
    graph = ge.graph.load(model)
    infer_shapes(graph)
    dims = _dims(graph)
    assert dims["a_m"] is None and dims["b_m"] is None
    assert len(onnx_runs) == 2


@pytest.mark.builtin_passes
def test_every_layer_norm_after_a_loop_fuses() -> None:
    x = np.random.default_rng(1).standard_normal((2, 5, D)).astype(np.float32)
    result = ge.compile(_model(), verify=True, inputs={"x": x})
    assert result.report.rewrites_by_pass().get("LayerNormFusion") == 2
    ops = [n.type for n in result.graph.get_direct_nodes()]
    assert ops.count("LayerNormalization") == 2 and "ReduceMean" not in ops
    assert result.verification is not None and result.verification.ok


def test_a_claim_onnx_refuses_is_dropped() -> None:
    """A body declaring its carried value [3, D] for a [2, D] initial value, the output then
    added to the initial value: with the claim, onnx's strict inference refuses the Add (3
    against 2); inference runs again without it and the model is typed as before."""
    body = h.make_graph(
        [h.make_node("Identity", ["c"], ["c_out"]), h.make_node("Neg", ["v"], ["v_out"])],
        "body", [h.make_tensor_value_info("i", TP.INT64, []),
                 h.make_tensor_value_info("c", TP.BOOL, []),
                 h.make_tensor_value_info("v", TP.FLOAT, [3, D])],
        [h.make_tensor_value_info("c_out", TP.BOOL, []),
         h.make_tensor_value_info("v_out", TP.FLOAT, [3, D])])
    graph = h.make_graph(
        [h.make_node("Loop", ["trips", "", "x"], ["out"], body=body),
         h.make_node("Add", ["out", "x"], ["y"])], "main",
        [h.make_tensor_value_info("x", TP.FLOAT, [2, D])],
        [h.make_tensor_value_info("y", TP.FLOAT, None)],
        [nh.from_array(np.array(2, np.int64), "trips")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)], ir_version=9)
    loaded = ge.graph.load(model)
    infer_shapes(loaded, strict=True)
    dims = _dims(loaded)
    assert dims["out"] == [-1, D]  # (`carried_desc`, written after the run, as before)
    assert dims["y"] is None


def test_a_body_outgrowing_its_declared_dims_proves_no_symbol() -> None:
    """The body declares its carried value [L, 4] in and out, and doubles it (Concat(v, v):
    trial AA's body): onnx takes the declared dims of a body output over what it infers, so
    they are cleared for the claim's proof, and the values after the Loop get [?, 4], never
    the body's L (vf is [16, 4] for a [2, 4] v0 after 3 trips)."""
    body = h.make_graph(
        [h.make_node("Identity", ["c"], ["c_out"]),
         h.make_node("Concat", ["v", "v"], ["v_next"], axis=0)], "body",
        [h.make_tensor_value_info("i", TP.INT64, []), h.make_tensor_value_info("c", TP.BOOL, []),
         h.make_tensor_value_info("v", TP.FLOAT, ["L", 4])],
        [h.make_tensor_value_info("c_out", TP.BOOL, []),
         h.make_tensor_value_info("v_next", TP.FLOAT, ["L", 4])])
    graph = h.make_graph(
        [h.make_node("Loop", ["n", "", "v0"], ["vf"], body=body),
         h.make_node("Relu", ["vf"], ["y"])], "main",
        [h.make_tensor_value_info("v0", TP.FLOAT, ["L", 4]),
         h.make_tensor_value_info("n", TP.INT64, [])],
        [h.make_tensor_value_info("y", TP.FLOAT, None)])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)], ir_version=9)
    loaded = ge.graph.load(model)
    infer_shapes(loaded, strict=True)
    dims = _dims(loaded)
    for name in ("vf", "y"):
        got = dims[name]
        assert got is not None and len(got) == 2 and got[1] == 4 and got[0] != "L", (name, got)
    feeds = {"v0": np.ones((2, 4), np.float32), "n": np.array(3, np.int64)}
    result = ge.compile(model, verify=True, inputs=feeds)
    assert result.verification is not None and result.verification.ok


def test_a_dim_equal_after_one_trip_only_is_not_folded() -> None:
    """v [1, 4] -> Reshape(Concat(v, v), [2, -1]) per trip: [2, 4] after one trip, [2, 8]
    after two; the second dim agrees after one trip only. ge typed the Loop's output
    [?, 4] from one step and folded Shape(vf)[1] to 4: `ge compile` (no --verify) wrote a
    model answering 4 where the original answers 8. The body's next value is inferred
    with its declared dims cleared, so nothing is claimed of a dim it does not keep."""
    graph = h.make_graph(
        [_doubling_loop("v0", "trips", "vf", 4, ["L", 4]),
         h.make_node("Shape", ["vf"], ["s"]),
         h.make_node("Gather", ["s", "one"], ["d1"], axis=0),
         h.make_node("Relu", ["vf"], ["r"])], "main",
        [h.make_tensor_value_info("v0", TP.FLOAT, [1, 4])],
        [h.make_tensor_value_info("d1", TP.INT64, []),
         h.make_tensor_value_info("r", TP.FLOAT, ["a", "b"])],
        initializer=[nh.from_array(np.array(2, np.int64), "trips"),
                     nh.from_array(np.array(1, np.int64), "one")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    feeds = {"v0": np.ones((1, 4), np.float32)}
    expected = _ort(model, feeds)
    assert int(expected[0]) == 8 and expected[1].shape == (2, 8)
    compiled = ge.compile(model).to_onnx()
    got = _ort(compiled, feeds)
    assert int(got[0]) == 8 and got[1].shape == (2, 8)


def _same_desc(ctx: InferContext) -> list[TensorDesc]:
    desc = ctx.input_descs[0]
    assert desc is not None
    return [desc]


@pytest.fixture
def same_op() -> Iterator[None]:
    register_op("Same", domain="test.loops", inputs=["x"], outputs=["y"], infer=_same_desc,
                kernel=lambda x: x)
    yield
    unregister_op("Same", "test.loops")


def test_a_loop_after_a_custom_operator(same_op: None, onnx_runs: list[bool]) -> None:
    """The Loop's initial value comes from a custom operator, which onnx cannot type: the
    first runs cannot prove the claim; once ge typed the operator, the next run does."""
    nodes = [h.make_node("Same", ["x"], ["xs"], domain="test.loops"), _loop("xs", "a_", SHAPE),
             *_layer_norm("a_out", "a_"), h.make_node("Relu", ["a_ln"], ["y"])]
    model = _model()
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    model.opset_import.append(h.make_opsetid("test.loops", 1))
    graph = ge.graph.load(model)
    infer_shapes(graph, strict=True)
    dims = _dims(graph)
    assert dims["a_out"] == dims["a_ln"] == SHAPE and dims["a_m"] == ["batch", "seq", 1]
    # with the claim (unproven), without it, then with it once `Same` is typed
    assert len(onnx_runs) == 3


def _doubling_loop(v0: str, trips: str, out: str, n: int, declared_next: list[int | str]
                   ) -> onnx.NodeProto:
    """Loop carrying v0 ([1, n]) through Reshape(Concat(v, v), [2, -1]): [2, n] after one
    trip, [2, 2n] after two. The body declares its carried input [L, n] and its next value
    `declared_next`, as an exporter tracing one trip would (the fuzzer's bodies)."""
    body = h.make_graph(
        [h.make_node("Identity", ["d_c"], ["d_c_out"]),
         h.make_node("Concat", ["d_v", "d_v"], ["d_cat"], axis=0),
         h.make_node("Reshape", ["d_cat", "d_two_by"], ["d_next"])], "doubling",
        [h.make_tensor_value_info("d_i", TP.INT64, []),
         h.make_tensor_value_info("d_c", TP.BOOL, []),
         h.make_tensor_value_info("d_v", TP.FLOAT, ["L", n])],
        [h.make_tensor_value_info("d_c_out", TP.BOOL, []),
         h.make_tensor_value_info("d_next", TP.FLOAT, declared_next)],
        initializer=[nh.from_array(np.array([2, -1], np.int64), "d_two_by")])
    return h.make_node("Loop", [trips, "", v0], [out], name="doubling", body=body)


def _ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


@pytest.mark.builtin_passes
def test_a_loop_output_read_only_in_another_body_is_not_typed_from_the_declared_one() -> None:
    """Fuzzer seed 34669: the doubling Loop's output vf ([2, 2] after 2 trips) is read only
    in another Loop's body (MatMul(vf, W[2, 3]) + b), so no root node reads it and nothing
    is claimed of it; it was typed [?, 1] from the body's next value, which onnx had given
    the dims the body declares for it ([L, 1]), and MatMulAddFusion failed (E13028) on a
    Gemm of [?, 1] and [2, 3]. The next value is inferred from the body's nodes alone."""
    rng = np.random.default_rng(3)
    reader = h.make_graph(
        [h.make_node("Identity", ["r_c"], ["r_c_out"]),
         h.make_node("MatMul", ["vf", "w"], ["r_mm"]),
         h.make_node("Add", ["r_mm", "b"], ["r_y"]),
         h.make_node("Add", ["r_s", "one"], ["r_s_next"])], "reader",
        [h.make_tensor_value_info("r_i", TP.INT64, []),
         h.make_tensor_value_info("r_c", TP.BOOL, []),
         h.make_tensor_value_info("r_s", TP.FLOAT, [1])],
        [h.make_tensor_value_info("r_c_out", TP.BOOL, []),
         h.make_tensor_value_info("r_s_next", TP.FLOAT, [1]),
         h.make_tensor_value_info("r_y", TP.FLOAT, ["a", "b"])],
        initializer=[nh.from_array(rng.standard_normal((2, 3)).astype(np.float32), "w"),
                     nh.from_array(rng.standard_normal((1, 3)).astype(np.float32), "b"),
                     nh.from_array(np.array(1.0, np.float32), "one")])
    graph = h.make_graph(
        [_doubling_loop("v0", "two", "vf", 1, ["L", 1]),
         h.make_node("Loop", ["one_trip", "", "s0"], ["s", "ys"], name="reading", body=reader)],
        "main", [h.make_tensor_value_info("v0", TP.FLOAT, [1, 1]),
                 h.make_tensor_value_info("s0", TP.FLOAT, [1])],
        [h.make_tensor_value_info("s", TP.FLOAT, [1]),
         h.make_tensor_value_info("ys", TP.FLOAT, ["t", "a", "b"])],
        [nh.from_array(np.array(2, np.int64), "two"),
         nh.from_array(np.array(1, np.int64), "one_trip")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)], ir_version=9)
    onnx.checker.check_model(model, full_check=True)
    feeds = {"v0": np.full((1, 1), 2.0, np.float32), "s0": np.zeros(1, np.float32)}
    assert _ort(model, feeds)[1].shape == (1, 2, 3)  # vf is [2, 2]

    loaded = ge.graph.load(model)
    infer_shapes(loaded, strict=True)
    vf = _dims(loaded)["vf"]
    assert vf is None or (len(vf) == 2 and 1 not in vf), vf  # never [?, 1]
    result = ge.compile(model, verify=True, inputs=feeds)
    assert result.verification is not None and result.verification.ok
    np.testing.assert_allclose(_ort(result.to_onnx(), feeds)[1], _ort(model, feeds)[1],
                               rtol=1e-5)


def test_a_loop_output_read_in_another_body_compiles_into_a_valid_model() -> None:
    """Fuzzer seed 35654: the doubling Loop runs n trips (a graph input) from [1, 12], its
    body declaring the next value [2, 12]; another Loop's body reads its output vf
    (Mul(vf, x), Reshape(.., Shape(vf))), its scan outputs declared [2, 24] (what vf is
    after 2 trips). ge typed vf [?, 12] from the declared next value and wrote that into
    the compiled model, where onnx's inference of the reading Loop then met [?, 12]
    against the declared [2, 24]: ge refused to save it (GE1003). The model declares vf
    with its element type only, so ge writes vf's type back."""
    reader = h.make_graph(
        [h.make_node("Mul", ["vf", "x"], ["r_mul"]),
         h.make_node("Shape", ["vf"], ["r_shape"]),
         h.make_node("Reshape", ["r_mul", "r_shape"], ["r_re"]),
         h.make_node("Constant", [], ["r_go"], value=nh.from_array(np.array(True))),
         h.make_node("Add", ["r_s", "x"], ["r_s_next"])], "reader",
        [h.make_tensor_value_info("r_i", TP.INT64, []),
         h.make_tensor_value_info("r_c", TP.BOOL, []),
         h.make_tensor_value_info("r_s", TP.FLOAT, [])],
        [h.make_tensor_value_info("r_go", TP.BOOL, []),
         h.make_tensor_value_info("r_s_next", TP.FLOAT, []),
         h.make_tensor_value_info("r_re", TP.FLOAT, [2, 24]),
         h.make_tensor_value_info("r_mul", TP.FLOAT, [2, 24])])
    graph = h.make_graph(
        [_doubling_loop("v0", "n", "vf", 12, [2, 12]),
         h.make_node("Loop", ["three", "", "s0"], ["s", "res", "muls"], name="reading",
                     body=reader)],
        "main", [h.make_tensor_value_info("x", TP.FLOAT, []),
                 h.make_tensor_value_info("s0", TP.FLOAT, []),
                 h.make_tensor_value_info("n", TP.INT64, []),
                 h.make_tensor_value_info("v0", TP.FLOAT, [1, 12])],
        [h.make_tensor_value_info("muls", TP.FLOAT, [3, 2, 24])],
        [nh.from_array(np.array(3, np.int64), "three")],
        value_info=[h.make_tensor_value_info("vf", TP.FLOAT, None)])  # (as onnx types it)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)], ir_version=9)
    onnx.checker.check_model(model, full_check=True)
    feeds = {"x": np.array(1.5, np.float32), "s0": np.array(0.0, np.float32),
             "n": np.array(2, np.int64),
             "v0": np.arange(12, dtype=np.float32).reshape(1, 12)}
    expected = _ort(model, feeds)
    assert expected[0].shape == (3, 2, 24)

    compiled = ge.compile(model).to_onnx()
    onnx.checker.check_model(compiled, full_check=True)
    np.testing.assert_allclose(_ort(compiled, feeds)[0], expected[0], rtol=1e-6)


def test_a_loop_inside_a_body_is_not_typed_from_the_declared_next_value() -> None:
    """The doubling Loop inside another Loop's body (never claimed for): its output is
    typed after the run from the body's next value as its nodes compute it, [?, ?], not
    [?, 1] from the [L, 1] the body declares; Relu of it follows."""
    outer = h.make_graph(
        [_doubling_loop("v0", "two", "vf", 1, ["L", 1]),
         h.make_node("Relu", ["vf"], ["o_y"]),
         h.make_node("Identity", ["o_s"], ["o_s_next"])], "outer",
        [h.make_tensor_value_info("o_i", TP.INT64, []),
         h.make_tensor_value_info("o_c", TP.BOOL, []),
         h.make_tensor_value_info("o_s", TP.FLOAT, [1])],
        [h.make_tensor_value_info("o_c", TP.BOOL, []),
         h.make_tensor_value_info("o_s_next", TP.FLOAT, [1]),
         h.make_tensor_value_info("o_y", TP.FLOAT, ["a", "b"])])
    graph = h.make_graph(
        [h.make_node("Loop", ["one_trip", "", "s0"], ["s", "ys"], body=outer)], "main",
        [h.make_tensor_value_info("v0", TP.FLOAT, [1, 1]),
         h.make_tensor_value_info("s0", TP.FLOAT, [1])],
        [h.make_tensor_value_info("ys", TP.FLOAT, ["t", "a", "b"])],
        [nh.from_array(np.array(2, np.int64), "two"),
         nh.from_array(np.array(1, np.int64), "one_trip")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)], ir_version=9)
    onnx.checker.check_model(model, full_check=True)
    feeds = {"v0": np.ones((1, 1), np.float32), "s0": np.zeros(1, np.float32)}
    assert _ort(model, feeds)[0].shape == (1, 2, 2)
    loaded = ge.graph.load(model)
    infer_shapes(loaded, strict=True)
    body = next(g for g in loaded.get_all_subgraphs() if g.name == "outer")
    dims = _dims(body)
    for name in ("vf", "o_y"):
        assert dims[name] is None or 1 not in dims[name], (name, dims[name])


def test_a_dim_read_at_the_root_of_a_loop_output_another_body_reads() -> None:
    """Fuzzer seed 86861 (a wrong model on stop 44's code): vf grows per trip, the body
    declaring [L, 3]; the trip count is an input. Another Loop's body reads vf (a Gemm), so
    the root Loop got no claim and vf was typed from the body's declared next value,
    [?, 3]: Shape(vf)[1] folded to 3 where two trips give 6, and the model was written
    without a word. Typed from what the body computes, the dim stays unknown."""
    reader = h.make_graph(
        [h.make_node("Identity", ["r_c"], ["r_c_out"]),
         h.make_node("Gemm", ["vf", "b"], ["r_g"]),
         h.make_node("Identity", ["r_s"], ["r_s_next"])], "reader",
        [h.make_tensor_value_info("r_i", TP.INT64, []),
         h.make_tensor_value_info("r_c", TP.BOOL, []),
         h.make_tensor_value_info("r_s", TP.FLOAT, [1])],
        [h.make_tensor_value_info("r_c_out", TP.BOOL, []),
         h.make_tensor_value_info("r_s_next", TP.FLOAT, [1])],
        initializer=[nh.from_array(np.ones((6, 5), np.float32), "b")])
    graph = h.make_graph(
        [_doubling_loop("x0", "trips", "vf", 3, ["L", 3]),
         h.make_node("Shape", ["vf"], ["s"]),
         h.make_node("Gather", ["s", "one"], ["d1"], axis=0),
         h.make_node("Cast", ["d1"], ["y"], to=TP.FLOAT),
         h.make_node("Loop", ["trips2", "", "s0"], ["sf"], body=reader)], "main",
        [h.make_tensor_value_info("x0", TP.FLOAT, [1, 3]),
         h.make_tensor_value_info("s0", TP.FLOAT, [1]),
         h.make_tensor_value_info("trips", TP.INT64, []),
         h.make_tensor_value_info("trips2", TP.INT64, [])],
        [h.make_tensor_value_info("y", TP.FLOAT, []),
         h.make_tensor_value_info("sf", TP.FLOAT, [1])],
        [nh.from_array(np.array(1, np.int64), "one")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    # two trips: the Gemm's [6, 5] needs vf [2, 6]
    feeds = {"x0": np.ones((1, 3), np.float32), "s0": np.zeros(1, np.float32),
             "trips": np.array(2, np.int64), "trips2": np.array(1, np.int64)}
    compiled = ge.compile(model).to_onnx()
    assert _ort(compiled, feeds)[0] == _ort(model, feeds)[0] == 6.0
