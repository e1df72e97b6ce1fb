"""Sparse constants (a graph's sparse initializers, a `Constant`'s `sparse_value`) are the
dense tensors they stand for, as onnxruntime reads them: the user trial's model, a sparse
initializer of float [4] or [2, 3] added to a graph input, failed GE1305 ("has unsupported
type: sparse_tensor(float)": onnx's strict inference types one a `sparse_tensor`, and ge's
`Const` node of one had no desc), while onnxruntime ran it. They compile, keep their sparse
form in the saved model, and their outputs stay onnxruntime's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import ge
import ge.graph
from ge.errors import GraphError, GraphValidationError, ShapeInferenceError
from ge.graph.sparse import dense_of_sparse
from ge.ops.inference import VALUE_ELEMENTS
from sparse_models import dense_with_zeros as _dense
from sparse_models import node
from sparse_models import run_ort as _run
from sparse_models import sparse as _sparse
from sparse_models import sparse_model as _model
from sparse_models import vi as _vi

pytestmark = pytest.mark.builtin_passes  # the model goes through the whole pipeline

I64 = onnx.TensorProto.INT64


def _compiled_like_original(model: onnx.ModelProto, tmp_path: Path,
                            feeds: dict[str, np.ndarray]) -> onnx.ModelProto:
    """`model` compiled (verified) and saved: the saved model, whose outputs on `feeds` are
    the original's in onnxruntime."""
    result = ge.compile(model, verify=True)
    assert result.verification is not None and result.verification.ok
    target = tmp_path / "out.onnx"
    result.save(target)
    expected = _run(model, feeds)
    for got, want in zip(_run(target, feeds), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    return onnx.load(target)


@pytest.mark.parametrize("coordinates", [False, True], ids=["flat-indices", "coordinates"])
@pytest.mark.parametrize("shape", [(4,), (2, 3)], ids=["4", "2x3"])
def test_a_sparse_initializer_added_to_an_input_compiles(shape, coordinates,
                                                         tmp_path: Path) -> None:
    value = _dense(shape)
    model = _model([node("Add", ["x", "s"], ["y"], name="add")], [_vi("x", list(shape))],
                   [_vi("y", list(shape))], [_sparse("s", value, coordinates=coordinates)])
    x = np.arange(value.size, dtype=np.float32).reshape(shape)
    saved = _compiled_like_original(model, tmp_path, {"x": x})
    np.testing.assert_array_equal(_run(saved, {"x": x})[0], x + value)
    # kept as written: sparse, not made dense
    assert [s.values.name for s in saved.graph.sparse_initializer] == ["s"]
    assert not saved.graph.initializer


def test_a_sparse_initializers_const_node_has_the_dense_tensors_desc() -> None:
    model = _model([node("Add", ["x", "s"], ["y"], name="add")], [_vi("x", [2, 3])],
                   [_vi("y", [2, 3])], [_sparse("s", _dense((2, 3)))])
    graph = ge.graph.load(model)
    const = graph.find_node_by_name("s")
    desc = const.get_output_desc(0)
    assert (desc.get_data_type(), list(desc.get_shape())) == (ge.graph.DataType.DT_FLOAT,
                                                               [2, 3])
    assert graph.find_node_by_name("add").get_input_desc(1).get_shape() == [2, 3]


def test_passes_see_a_sparse_weight_typed(tmp_path: Path) -> None:
    """MatMulAddFusion checks its operands' ranks: a sparse weight of no desc kept the
    MatMul and the Add apart."""
    w = _dense((4, 3), seed=1)
    model = _model([node("MatMul", ["x", "w"], ["m"], name="mm"),
                    node("Add", ["m", "b"], ["y"], name="add")],
                   [_vi("x", [2, 4])], [_vi("y", [2, 3])], [_sparse("w", w)],
                   [numpy_helper.from_array(np.ones(3, np.float32), "b")])
    x = np.random.default_rng(2).standard_normal((2, 4)).astype(np.float32)
    saved = _compiled_like_original(model, tmp_path, {"x": x})
    assert [n.op_type for n in saved.graph.node] == ["Gemm"]
    assert [s.values.name for s in saved.graph.sparse_initializer] == ["w"]


def test_a_sparse_shape_is_read_by_inference() -> None:
    """A small sparse initializer goes to onnx's inference with its values: a Reshape to a
    shape given sparse gets that shape."""
    shape = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([3, 4], np.int64), "shape"),
        numpy_helper.from_array(np.array([0, 1], np.int64), "shape_indices"), [2])
    model = _model([node("Reshape", ["x", "shape"], ["r"], name="reshape"),
                    node("Relu", ["r"], ["y"], name="relu")],
                   [_vi("x", [2, 6])], [_vi("y", [3, 4])], [shape])
    result = ge.compile(model, verify=True)
    reshape = result.graph.find_node_by_name("reshape")
    assert list(reshape.get_output_desc(0).get_shape()) == [3, 4]


def test_a_sparse_initializer_in_an_if_branch_compiles(tmp_path: Path) -> None:
    value = _dense((2, 3))
    then = helper.make_graph([node("Add", ["x", "s"], ["t"], name="then_add")], "body", [],
                             [_vi("t", [2, 3])], sparse_initializer=[_sparse("s", value)])
    other = helper.make_graph([node("Neg", ["x"], ["e"], name="else_neg")], "body", [],
                              [_vi("e", [2, 3])])
    model = _model([node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)],
                   [_vi("x", [2, 3]), _vi("c", [], onnx.TensorProto.BOOL)], [_vi("y", [2, 3])])
    x = np.ones((2, 3), np.float32)
    saved = _compiled_like_original(model, tmp_path, {"x": x, "c": np.array(True)})
    np.testing.assert_array_equal(_run(saved, {"x": x, "c": np.array(True)})[0], x + value)
    body = next(a.g for a in saved.graph.node[0].attribute if a.name == "then_branch")
    assert [s.values.name for s in body.sparse_initializer] == ["s"]


def test_large_sparse_initializers_compile(tmp_path: Path) -> None:
    """Of more elements than inference reads values of (`VALUE_ELEMENTS`), in the root
    graph and in a body: typed without their values, saved sparse."""
    side = int(np.sqrt(VALUE_ELEMENTS)) + 8
    big, other = _dense((side, side), seed=3), _dense((side, side), seed=4)
    then = helper.make_graph([node("MatMul", ["x", "inner"], ["t"], name="then_mm")], "body",
                             [], [_vi("t", [2, side])], sparse_initializer=[_sparse("inner", big)])
    els = helper.make_graph([node("MatMul", ["x", "outer"], ["e"], name="else_mm")], "body",
                            [], [_vi("e", [2, side])])
    model = _model([node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=els)],
                   [_vi("x", [2, side]), _vi("c", [], onnx.TensorProto.BOOL)],
                   [_vi("y", [2, side])], [_sparse("outer", other)])
    x = np.random.default_rng(5).standard_normal((2, side)).astype(np.float32)
    for flag in (True, False):
        _compiled_like_original(model, tmp_path, {"x": x, "c": np.array(flag)})


def _sparse_constant_model(where: str) -> onnx.ModelProto:
    """x (+, -, *) a `Constant` of a `sparse_value`, in the root graph, in the then-branch of
    an If or in a model-local function (onnxruntime 1.32 crashes now and then creating a
    session of a model holding all three, so each is a model of its own)."""
    k = _dense((4,), seed=6)
    x, c = _vi("x", [4]), _vi("c", [], onnx.TensorProto.BOOL)
    if where == "root":
        return _model([node("Constant", [], ["rk"], name="root_k", sparse_value=_sparse("rk", k)),
                       node("Add", ["x", "rk"], ["y"], name="add")], [x], [_vi("y", [4])])
    if where == "branch":
        then = helper.make_graph(
            [node("Constant", [], ["bk"], name="body_k", sparse_value=_sparse("bk", k)),
             node("Sub", ["x", "bk"], ["t"], name="then_sub")], "body", [], [_vi("t", [4])])
        other = helper.make_graph([node("Neg", ["x"], ["e"], name="else_neg")], "body", [],
                                  [_vi("e", [4])])
        return _model([node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)],
                      [x, c], [_vi("y", [4])])
    f = helper.make_function(
        "mydomain", "f", ["a"], ["b"],
        [node("Constant", [], ["fk"], sparse_value=_sparse("fk", k)),
         node("Mul", ["a", "fk"], ["b"])], [helper.make_opsetid("", 17)])
    return _model([node("f", ["x"], ["y"], domain="mydomain", name="call")], [x],
                  [_vi("y", [4])], functions=[f])


@pytest.mark.parametrize("where", ["root", "branch", "function"])
def test_sparse_constant_operators_compile(where: str, tmp_path: Path) -> None:
    """onnx's inference types a sparse `Constant`'s output dense, as onnxruntime runs it."""
    model = _sparse_constant_model(where)
    feeds = {"x": np.array([1, 2, 3, 4], np.float32)}
    if where == "branch":
        feeds["c"] = np.array(True)
    _compiled_like_original(model, tmp_path, feeds)
    if where == "function":
        result = ge.compile(model, inline_functions=True, verify=True)
        assert result.verification is not None and result.verification.ok


def test_sparse_indices_out_of_range_are_refused_by_the_checker(tmp_path: Path) -> None:
    """Saving refuses such a model (onnx's checker still checks the sparse tensor as
    written): GE1003, nothing written. (onnxruntime 1.32 refuses to run it too; 1.19, the
    oldest ge supports, runs it: that is not ge's to rely on.)"""
    bad = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "s"),
        numpy_helper.from_array(np.array([0, 7], np.int64), "s_indices"), [4])
    graph = helper.make_graph([node("Add", ["x", "s"], ["y"], name="add")], "g", [_vi("x", [4])],
                              [_vi("y", [4])], sparse_initializer=[bad])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    result = ge.compile(model)
    target = tmp_path / "out.onnx"
    with pytest.raises(GraphValidationError) as caught:
        result.save(target)
    assert caught.value.code == "GE1003"
    assert "Sparse tensor (s_indices) index value at position [1] out of range" in str(
        caught.value)
    assert not target.exists() and list(tmp_path.iterdir()) == []
    with pytest.raises(GraphError, match=r"sparse tensor 's' cannot be made dense: an index "
                                         r"is out of the range 0\.\.3"):
        dense_of_sparse(bad)


def test_a_node_rejecting_a_sparse_constant_is_still_named() -> None:
    """A sparse constant of the wrong type for its consumer is the model's problem, said as
    for a dense one (the dense type named, not `sparse_tensor`)."""
    ints = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([1], np.int64), "s"),
        numpy_helper.from_array(np.array([0], np.int64), "s_indices"), [4])
    model = _model([node("Add", ["x", "s"], ["y"], name="add")], [_vi("x", [4])],
                   [_vi("y", [4])], [ints])
    with pytest.raises(ShapeInferenceError) as caught:
        ge.compile(model)
    assert caught.value.code == "GE1305"
    assert "node name: add" in str(caught.value) and "sparse_tensor" not in str(caught.value)


def test_dense_of_sparse_reads_both_index_forms() -> None:
    value = _dense((3, 2, 4), seed=7)
    for coordinates in (False, True):
        dense = dense_of_sparse(_sparse("v", value, coordinates=coordinates))
        np.testing.assert_array_equal(dense.numpy(), value)


def test_a_valid_sparse_model_is_not_said_to_fail_the_checker(tmp_path: Path) -> None:
    """When onnx's checker refuses a compiled model, ge says whether the input fails it too:
    a model whose sparse initializer onnx's own full check refuses is not said to (its
    check is ge's, the dense tensor), one whose indices are out of range is."""
    from ge.errors import ValidationProblem
    from ge.session.input_verdicts import with_input_verdict

    def verdict(sparse: onnx.SparseTensorProto) -> str:
        graph = helper.make_graph([node("Add", ["x", "s"], ["y"], name="add")], "g",
                                  [_vi("x", [4])], [_vi("y", [4])], sparse_initializer=[sparse])
        source = tmp_path / f"{len(list(tmp_path.iterdir()))}.onnx"
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                  source)
        err = GraphValidationError([ValidationProblem("onnx-checker", ("add",),
                                                      "onnx.checker rejects the model", "g")])
        return with_input_verdict(err, source).message

    good = _sparse("s", _dense((4,)))
    assert "fails this check too" not in verdict(good)
    bad = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([1.0], np.float32), "s"),
        numpy_helper.from_array(np.array([9], np.int64), "s_indices"), [4])
    assert "fails this check too" in verdict(bad)


@pytest.mark.builtin_passes
def test_a_sparse_constant_left_feeding_an_output_gets_an_identity() -> None:
    """NoOpElimination removes the Identity between a sparse Constant and the graph output;
    onnxruntime cannot give a sparse value back ("do not support dims higher than 2"), so
    the written model keeps an Identity producing the output (trial UU)."""
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([1.0, 2.0, 3.0], np.float32), "s"),
        numpy_helper.from_array(np.array([0, 3, 5], np.int64), "s_indices"), [6])
    graph = helper.make_graph([helper.make_node("Constant", [], ["y0"], sparse_value=sparse),
                               helper.make_node("Identity", ["y0"], ["y"])], "g", [],
                              [_vi("y", [6])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    written = ge.compile(model).to_onnx()
    assert [n.op_type for n in written.graph.node] == ["Constant", "Identity"]
    assert [o.name for o in written.graph.output] == ["y"]
    np.testing.assert_array_equal(_run(written, {})[0],
                                  np.array([1, 0, 0, 2, 0, 3], np.float32))


def _sparse_default_model(order: str) -> onnx.ModelProto:
    """y = x + w + k: `w` a graph input whose default is a sparse initializer (valid ONNX,
    onnxruntime runs it, with or without a value fed for `w`), `k` a sparse constant;
    `order` says which the file lists first among the sparse initializers."""
    w, k = _sparse("w", _dense((2, 3), seed=1)), _sparse("k", _dense((2, 3), seed=2))
    return _model([node("Add", ["x", "w"], ["s"]), node("Add", ["s", "k"], ["y"])],
                  [_vi("x", [2, 3]), _vi("w", [2, 3])], [_vi("y", [2, 3])],
                  sparse_initializers=[w, k] if order == "default-first" else [k, w])


@pytest.mark.parametrize("order", ["default-first", "default-last"])
def test_an_input_with_a_sparse_default(tmp_path: Path, order: str) -> None:
    """Refused GE1101 before ("value 'w' is defined twice (by Data node 'w' and Const node
    'w_1')"): the input is an input, its sparse default written back as it was read."""
    model = _sparse_default_model(order)
    source = tmp_path / "m.onnx"
    onnx.save(model, source)
    graph = ge.graph.load(source)
    assert [n.type for n in graph.get_data_nodes()] == ["Data", "Data"]
    assert [n.name for n in graph.nodes_of_type("Const")] == ["k"]
    graph.save(tmp_path / "again.onnx")
    assert (tmp_path / "again.onnx").read_bytes() == source.read_bytes()
    clone = graph.clone().to_onnx()
    assert [s.values.name for s in clone.graph.sparse_initializer] == [
        s.values.name for s in model.graph.sparse_initializer]
    x = np.ones((2, 3), np.float32)
    saved = _compiled_like_original(model, tmp_path, {"x": x})
    assert [i.name for i in saved.graph.input] == ["x", "w"]
    for feeds in ({"x": x}, {"x": x, "w": np.full((2, 3), 3, np.float32)}):
        np.testing.assert_array_equal(_run(saved, feeds)[0], _run(model, feeds)[0])
    converted = ge.compile(model, opset=20, verify=True)  # (the converter's stand-ins too)
    assert converted.verification is not None and converted.verification.ok
    assert [s.values.name for s in converted.to_onnx().graph.sparse_initializer] == [
        s.values.name for s in model.graph.sparse_initializer]
