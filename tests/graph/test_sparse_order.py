"""A sparse tensor's indices out of the order onnx's checker requires: onnxruntime runs such
a model, onnx's checker refuses it, and ge compiled it but then refused to save it (GE1003
"Sparse tensor (s_indices) index value at position [1] not in sorted order.", "the input
model fails this check too"). Loading now writes unsorted indices sorted, their values
permuted alike: the same dense tensor, which the checker passes. A repeated index cannot be
sorted away: saving still refuses it, saying which tensor, what repeats and why."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import ge.graph
from ge.errors import GraphValidationError
from ge.graph.sparse import dense_of_sparse
from ge.graph.sparse_order import index_order_problem, sorted_sparse
from sparse_models import function_with_sparse_branch, node, run_ort, sparse_model, vi

BOOL = onnx.TensorProto.BOOL


def _sparse(values: np.ndarray, indices: list, dims: list[int], name: str = "s"
            ) -> onnx.SparseTensorProto:
    return helper.make_sparse_tensor(numpy_helper.from_array(values, name),
                                     numpy_helper.from_array(np.array(indices, np.int64),
                                                             name + "_indices"), dims)


UNSORTED = [4, 0, 5]  # of a [2, 3] tensor: [[b, 0, 0], [0, a, c]] for values [a, b, c]
COORDINATES = [[1, 1], [0, 0], [1, 2]]  # the same positions as coordinates


@pytest.mark.parametrize("values", [
    np.array([2.0, 1.5, np.nan], np.float32),
    np.array([2.0, 1.5, -2.0], np.float16),
    np.array([2.0, 1.5, -2.0], ml_dtypes.bfloat16),
    np.array([7, -3, 1], np.int8),
    np.array([True, False, True]),
    np.array(["b", "a", "c"], dtype=object),
], ids=["float32", "float16", "bfloat16", "int8", "bool", "string"])
@pytest.mark.parametrize("indices", [UNSORTED, COORDINATES], ids=["flat", "coordinates"])
def test_sorted_sparse_is_the_same_dense_tensor_in_order(values: np.ndarray,
                                                         indices: list) -> None:
    given = _sparse(values, indices, [2, 3])
    given.values.doc_string = "kept"
    ordered = sorted_sparse(given)
    assert ordered is not None
    onnx.checker.check_sparse_tensor(ordered)  # (the given one fails it)
    with pytest.raises(onnx.checker.ValidationError, match="sorted order"):
        onnx.checker.check_sparse_tensor(given)
    before, after = dense_of_sparse(given).numpy(), dense_of_sparse(ordered).numpy()
    assert before.dtype == after.dtype and before.tobytes() == after.tobytes()  # (NaN too)
    assert (ordered.values.name, ordered.indices.name, list(ordered.dims)) == (
        "s", "s_indices", [2, 3])
    assert ordered.values.data_type == given.values.data_type
    assert ordered.values.doc_string == "kept"
    assert numpy_helper.to_array(ordered.indices).tolist() == sorted(
        indices, key=lambda i: i if isinstance(i, int) else i[0] * 3 + i[1])


def test_indices_that_sorting_cannot_put_in_order_are_left_as_they_are() -> None:
    values = np.array([1.0, 2.0, 3.0], np.float32)
    assert sorted_sparse(_sparse(values, [0, 4, 5], [2, 3])) is None  # in order already
    assert sorted_sparse(_sparse(values, [4, 0, 4], [2, 3])) is None  # 4 twice
    assert sorted_sparse(_sparse(values, [9, 0, 4], [2, 3])) is None  # out of range


def test_index_order_problem_says_what_is_out_of_order() -> None:
    values = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    assert index_order_problem(_sparse(values, [0, 4, 5, 1], [2, 3])) == (
        "has its indices unsorted: 5 at position 2 comes before 1 at position 3")
    assert index_order_problem(_sparse(values, [[0, 0], [1, 1], [1, 2], [0, 1]], [2, 3])) == (
        "has its indices unsorted: [1, 2] at position 2 comes before [0, 1] at position 3")
    assert index_order_problem(_sparse(values, [4, 0, 4, 5], [2, 3])) == (
        "has index 4 twice (at positions 0 and 2)")
    assert index_order_problem(_sparse(values, [1, 1, 0, 1], [2, 3])) == (
        "has index 1 3 times (at positions 0, 1 and 3)")
    assert index_order_problem(_sparse(values, [0, 1, 2, 5], [2, 3])) is None


def _unsorted_model(where: str) -> onnx.ModelProto:
    """y = x + s, s of [2, 3] with unsorted indices, [[1.5, 0, 0], [0, 2, -2]]: a sparse
    initializer of the root graph or of an If's then-branch, or a sparse `Constant` of the
    root graph."""
    s = _sparse(np.array([2.0, 1.5, -2.0], np.float32), UNSORTED, [2, 3])
    add = node("Add", ["x", "s"], ["y"], name="add")
    if where == "root":
        return sparse_model([add], [vi("x", [2, 3])], [vi("y", [2, 3])], [s], check=False)
    if where == "constant":
        return sparse_model([node("Constant", [], ["s"], name="k", sparse_value=s), add],
                            [vi("x", [2, 3])], [vi("y", [2, 3])], check=False)
    then = helper.make_graph([add], "then", [], [vi("y", [2, 3])], sparse_initializer=[s])
    other = helper.make_graph([node("Neg", ["x"], ["n"], name="neg")], "else", [],
                              [vi("n", [2, 3])])
    return sparse_model([node("If", ["c"], ["out"], name="if", then_branch=then,
                              else_branch=other)],
                        [vi("x", [2, 3]), vi("c", [], BOOL)], [vi("out", [2, 3])], check=False)


def _sparse_of(model: onnx.ModelProto, where: str) -> onnx.SparseTensorProto:
    if where == "root":
        return model.graph.sparse_initializer[0]
    if where == "constant":
        return model.graph.node[0].attribute[0].sparse_tensor
    then = next(a.g for a in model.graph.node[0].attribute if a.name == "then_branch")
    return then.sparse_initializer[0]


@pytest.mark.parametrize("where", ["root", "branch", "constant"])
def test_a_loaded_model_saves_its_unsorted_indices_sorted(where: str, tmp_path: Path) -> None:
    model = _unsorted_model(where)
    with pytest.raises(onnx.checker.ValidationError, match="not in sorted order"):
        onnx.checker.check_model(model)
    target = tmp_path / "out.onnx"
    ge.graph.load(model).save(target, full_check=True)  # (GE1003 before)
    saved = onnx.load(target)
    onnx.checker.check_model(saved)
    stored = _sparse_of(saved, where)
    assert numpy_helper.to_array(stored.indices).tolist() == [0, 4, 5]
    assert numpy_helper.to_array(stored.values).tolist() == [1.5, 2.0, -2.0]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    dense = np.array([[1.5, 0, 0], [0, 2, -2]], np.float32)
    if where == "branch":  # (onnxruntime refuses one in a body: it checks bodies as onnx does)
        with pytest.raises(Exception, match="not in sorted order"):
            run_ort(model, {"x": x, "c": np.array(True)})
        np.testing.assert_array_equal(run_ort(saved, {"x": x, "c": np.array(True)})[0],
                                      x + dense)
    else:
        np.testing.assert_array_equal(run_ort(saved, {"x": x})[0], run_ort(model, {"x": x})[0])
        np.testing.assert_array_equal(run_ort(saved, {"x": x})[0], x + dense)


def test_a_model_in_order_still_saves_byte_identical(tmp_path: Path) -> None:
    s = _sparse(np.array([1.5, 2.0, -2.0], np.float32), [0, 4, 5], [2, 3])
    model = sparse_model([node("Add", ["x", "s"], ["y"], name="add")], [vi("x", [2, 3])],
                         [vi("y", [2, 3])], [s])
    source = tmp_path / "m.onnx"
    onnx.save(model, source)
    ge.graph.load(source).save(tmp_path / "out.onnx")
    assert (tmp_path / "out.onnx").read_bytes() == source.read_bytes()


def test_a_repeated_index_is_refused_on_save_saying_which_and_why(tmp_path: Path) -> None:
    s = _sparse(np.array([1.0, 2.0, 3.0], np.float32), [4, 0, 4], [2, 3])
    model = sparse_model([node("Add", ["x", "s"], ["y"], name="add")], [vi("x", [2, 3])],
                         [vi("y", [2, 3])], [s], check=False)
    x = np.zeros((2, 3), np.float32)
    assert run_ort(model, {"x": x})[0].tolist() == [[2, 0, 0], [0, 3, 0]]  # (it runs)
    target = tmp_path / "out.onnx"
    with pytest.raises(GraphValidationError) as caught:
        ge.graph.load(model).save(target, full_check=True)
    assert caught.value.code == "GE1003"
    assert caught.value.problems[0].message == (
        f"onnx.checker rejects the model, nothing was written to {target}: Sparse tensor "
        "(s_indices) index value at position [1] not in sorted order: sparse initializer 's' "
        "has index 4 twice (at positions 0 and 2); onnxruntime runs such a model, but onnx's "
        "checker refuses indices out of increasing order, and so does ge's save, which "
        "writes only models the checker passes; which of a repeated index's values the "
        "dense tensor holds is the reader's choice (onnxruntime takes the last), so ge "
        "cannot sort them")
    assert list(tmp_path.iterdir()) == []


def test_unsorted_indices_ge_does_not_sort_are_named_on_save(tmp_path: Path) -> None:
    """A sparse attribute of another operator than `Constant` (in a model-local function
    here) is kept as the file has it: the save's refusal names it, the function and the
    node holding it."""
    k = _sparse(np.array([2.0, 1.5], np.float32), [3, 0], [4], name="fk")
    f = helper.make_function("mydomain", "f", ["a"], ["b"],
                             [node("Lookup", ["a"], ["b"], domain="other", name="lookup",
                                   table=k)],
                             [helper.make_opsetid("", 17), helper.make_opsetid("other", 1)])
    graph = helper.make_graph([node("f", ["x"], ["y"], domain="mydomain", name="call")], "g",
                              [vi("x", [4])], [vi("y", [4])])
    model = helper.make_model(graph, functions=[f], opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("mydomain", 1),
        helper.make_opsetid("other", 1)])
    target = tmp_path / "out.onnx"
    with pytest.raises(GraphValidationError) as caught:
        ge.graph.load(model).save(target, full_check=True)
    problem = caught.value.problems[0]
    assert problem.place == "function 'f' (domain 'mydomain')"
    assert problem.nodes == ("lookup",)
    assert problem.message.startswith(
        f"onnx.checker rejects the model, nothing was written to {target}: other.Lookup "
        "node 'lookup': Sparse tensor (fk_indices) index value at position [1] not in "
        "sorted order: attribute 'table' of other.Lookup node 'lookup' in function 'f' has "
        "its indices unsorted: 3 at position 0 comes before 0 at position 1; onnxruntime "
        "runs such a model")
    assert problem.message.endswith(
        "ge sorts those of sparse initializers and sparse Constants (of the graphs and "
        "functions) when it loads a model, not those of another operator's attribute")
    assert list(tmp_path.iterdir()) == []


def test_sparse_constant_in_a_body_of_a_function_is_sorted_on_load(tmp_path: Path) -> None:
    """User trial UU #6: loading sorted the sparse Constants of the graphs, not those of a
    model-local function, nor of a body inside one: onnxruntime ran the model, and ge's
    save refused it with the checker's bare text. Now they are sorted too (the one change
    made to a function), and the model saved is the same model."""
    model = function_with_sparse_branch([3, 0])
    with pytest.raises(onnx.checker.ValidationError, match="not in sorted order"):
        onnx.checker.check_model(model)
    feeds = {"c": np.array(True), "x": np.arange(4, dtype=np.float32)}
    expected = run_ort(model, feeds)[0]
    assert expected.tolist() == [1.5, 1, 2, 5]
    graph = ge.graph.load(model)
    target = tmp_path / "out.onnx"
    graph.save(target, full_check=True)
    saved = onnx.load(target)
    onnx.checker.check_model(saved, full_check=True)
    then = next(a.g for a in saved.functions[0].node[0].attribute if a.name == "then_branch")
    sparse = then.node[0].attribute[0].sparse_tensor
    assert numpy_helper.to_array(sparse.indices).tolist() == [0, 3]
    assert numpy_helper.to_array(sparse.values).tolist() == [1.5, 2.0]
    assert run_ort(saved, feeds)[0].tolist() == expected.tolist()
    # nothing else of the function changed
    unsorted = function_with_sparse_branch([0, 3])
    then_given = next(a.g for a in unsorted.functions[0].node[0].attribute
                      if a.name == "then_branch")
    then_given.node[0].attribute[0].sparse_tensor.CopyFrom(sparse)
    assert saved.functions[0] == unsorted.functions[0]
    # the proto given is not changed
    assert numpy_helper.to_array(next(
        a.g for a in model.functions[0].node[0].attribute if a.name == "then_branch"
    ).node[0].attribute[0].sparse_tensor.indices).tolist() == [3, 0]
