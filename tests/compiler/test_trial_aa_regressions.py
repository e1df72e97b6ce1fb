"""What trial AA found wrong in stop 39's changes, each checked to fail before its fix:
shape passes trusting the declared dims of a Loop body's carried values from an If branch
inside it, an Einsum output read by a branch, CastLike to strings and Normalizer(MAX)
folded, GE1204 for training_info whose bindings name the algorithm's own state, the
converter's Hardmax rewrite (names across graphs, empty inputs)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge

node = helper.make_node
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _vi(name: str, shape: list[int | str | None] | None, dtype: int = F
        ) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


def _ints(name: str, value: object) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(value, np.int64), name)


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto],
           outputs: list[onnx.ValueInfoProto], inits: list[onnx.TensorProto] = (),  # type: ignore[assignment]
           opset: int = 17, extra: tuple[onnx.OperatorSetIdProto, ...] = ()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), *extra])
    model.ir_version = 8
    return model


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _same(model: onnx.ModelProto, feeds: dict[str, np.ndarray], **options: object) -> None:
    compiled = ge.compile(model, **options).graph.to_onnx()  # type: ignore[arg-type]
    for got, want in zip(_run(compiled, feeds), _run(model, feeds), strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.builtin_passes
def test_a_branch_in_a_loop_body_does_not_trust_the_carried_values_declared_dims() -> None:
    """v and w are declared [L, 4]; v doubles every iteration. A branch views v as
    [Shape(w)[0], -1]: ReshapeTargetFolding wrote [0, -1] and NoOpElimination removed the
    Reshape, both by the shared symbol L (shapes [2, 4], [4, 4], [8, 4] for [2, 4], [2, 8],
    [2, 16])."""
    then = helper.make_graph(
        [node("Shape", ["w"], ["sw"]), node("Gather", ["sw", "i0"], ["w0"]),
         node("Unsqueeze", ["w0", "ax"], ["uw0"]),
         node("Concat", ["uw0", "m1"], ["t"], axis=0),
         node("Reshape", ["v", "t"], ["view"]), node("Shape", ["view"], ["vs"])],
        "then", [], [_vi("vs", [2], I64)])
    other = helper.make_graph([node("Shape", ["v"], ["es"], end=2)], "else", [],
                              [_vi("es", [2], I64)])
    body = helper.make_graph(
        [node("Identity", ["c"], ["co"]),
         node("If", ["flag"], ["shape_i"], then_branch=then, else_branch=other),
         node("Concat", ["v", "v"], ["v_next"], axis=0), node("Identity", ["w"], ["w_next"])],
        "body", [_vi("i", [], I64), _vi("c", [], B), _vi("v", ["L", 4]), _vi("w", ["L", 4])],
        [_vi("co", [], B), _vi("v_next", ["L", 4]), _vi("w_next", ["L", 4]),
         _vi("shape_i", [2], I64)])
    model = _model(
        [node("Loop", ["n", "", "v0", "w0in"], ["vf", "wf", "shapes"], body=body)],
        [_vi("v0", ["L", 4]), _vi("w0in", ["L", 4]), _vi("n", [], I64), _vi("flag", [], B)],
        [_vi("vf", [None, 4]), _vi("wf", [None, 4]), _vi("shapes", [None, 2], I64)],
        [_ints("i0", 0), _ints("ax", [0]), _ints("m1", [-1])])
    feeds = {"v0": np.ones((2, 4), np.float32), "w0in": np.ones((2, 4), np.float32),
             "n": np.array(3), "flag": np.array(True)}
    assert _run(model, feeds)[2].tolist() == [[2, 4], [2, 8], [2, 16]]
    _same(model, feeds)


@pytest.mark.builtin_passes
def test_a_branch_reading_an_einsum_output_does_not_trust_its_symbols() -> None:
    """Einsum of [n, 4, 4] and [m, 4, 4] is inferred [n, 4, 4]; a branch viewing it as
    [Shape(a)[0], -1] was folded to [0, -1] (shape (3, 16) for (1, 48) at n=1, m=3)."""
    then = helper.make_graph(
        [node("Shape", ["a"], ["sa"]), node("Gather", ["sa", "i0"], ["n"]),
         node("Unsqueeze", ["n", "ax"], ["un"]), node("Concat", ["un", "m1"], ["t"], axis=0),
         node("Reshape", ["e", "t"], ["r"])], "then", [], [_vi("r", None)])
    other = helper.make_graph([node("Reshape", ["e", "flat"], ["f"])], "else", [],
                              [_vi("f", None)])
    model = _model(
        [node("Einsum", ["a", "b"], ["e"], equation="...ij,...jk->...ik"),
         node("If", ["flag"], ["out"], then_branch=then, else_branch=other)],
        [_vi("a", ["n", 4, 4]), _vi("b", ["m", 4, 4]), _vi("flag", [], B)],
        [_vi("out", None)],
        [_ints("i0", 0), _ints("ax", [0]), _ints("m1", [-1]), _ints("flat", [-1])])
    feeds = {"a": np.ones((1, 4, 4), np.float32), "b": np.ones((3, 4, 4), np.float32),
             "flag": np.array(True)}
    assert _run(model, feeds)[0].shape == (1, 48)
    _same(model, feeds)


@pytest.mark.builtin_passes
@pytest.mark.parametrize("values", [[True, False], [1.0, np.nan, np.inf]], ids=["bool", "float"])
def test_castlike_to_a_string_is_left_to_the_runtime(values: list[object]) -> None:
    array = np.array(values)
    model = _model(
        [node("CastLike", ["c", "like"], ["s"]), node("Concat", ["s", "x"], ["y"], axis=0)],
        [_vi("x", [1], TensorProto.STRING)], [_vi("y", [len(values) + 1], TensorProto.STRING)],
        [numpy_helper.from_array(array.astype(np.float32) if array.dtype.kind == "f"
                                 else array, "c"),
         numpy_helper.from_array(np.array(["a"], dtype=object), "like")])
    _same(model, {"x": np.array(["!"], dtype=object)})


@pytest.mark.builtin_passes
def test_normalizer_max_is_left_to_the_runtime() -> None:
    """onnxruntime divides by the row's maximum, onnx's evaluator by its largest magnitude."""
    model = _model(
        [node("Normalizer", ["c"], ["n"], domain="ai.onnx.ml", norm="MAX"),
         node("Add", ["n", "x"], ["y"])],
        [_vi("x", [2, 3])], [_vi("y", [2, 3])],
        [numpy_helper.from_array(np.array([[1, -2, 4], [-1.5, -0.25, -3]], np.float32), "c")],
        extra=(helper.make_opsetid("ai.onnx.ml", 3),))
    _same(model, {"x": np.zeros((2, 3), np.float32)})


@pytest.mark.builtin_passes
def test_training_info_binding_the_algorithms_own_state_compiles() -> None:
    """An update binding may name an initializer of the algorithm itself (an iteration
    count): it shares nothing with the inference graph."""
    model = _model([node("Relu", ["x"], ["y"])], [_vi("x", [2])], [_vi("y", [2])])
    info = model.training_info.add()
    info.algorithm.CopyFrom(helper.make_graph(
        [node("Add", ["step", "one"], ["step_next"])], "algo", [], [_vi("step_next", [], I64)],
        [_ints("step", 0), _ints("one", 1)]))
    info.update_binding.add(key="step", value="step_next")
    onnx.checker.check_model(model, full_check=True)
    result = ge.compile(model)
    assert len(result.graph.to_onnx().training_info) == 1


@pytest.mark.builtin_passes
def test_hardmax_rewrites_in_two_graphs_get_distinct_names() -> None:
    """Two Hardmax-11 named `hm`, one at the top and one in a branch: the rewrite named the
    new values of both `hm/shape`... (GE1001 in ConstantFolding)."""
    branch = helper.make_graph([node("Hardmax", ["x"], ["t"], name="hm", axis=1)], "then",
                               [], [_vi("t", [2, 3, 4])])
    other = helper.make_graph([node("Identity", ["x"], ["e"])], "else", [],
                              [_vi("e", [2, 3, 4])])
    model = _model(
        [node("Hardmax", ["x"], ["h"], name="hm", axis=1),
         node("If", ["c"], ["b"], then_branch=branch, else_branch=other),
         node("Add", ["h", "b"], ["y"])],
        [_vi("x", [2, 3, 4]), _vi("c", [], B)], [_vi("y", [2, 3, 4])], opset=11)
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32),
             "c": np.array(True)}
    _same(model, feeds, opset=13)


@pytest.mark.builtin_passes
def test_hardmax_of_an_empty_input_keeps_its_dims_from_opset_14() -> None:
    model = _model([node("Hardmax", ["x"], ["y"], axis=1)], [_vi("x", ["N", 3, "K"])],
                   [_vi("y", ["N", 3, "K"])], opset=11)
    for shape in ((2, 3, 4), (2, 3, 0), (0, 3, 4)):
        _same(model, {"x": np.ones(shape, np.float32)}, opset=14)
