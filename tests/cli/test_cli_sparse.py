"""The `ge` commands on models with sparse initializers: `ge compile --opset` converts them
(onnx's converter knows none), `ge inspect` counts them; indices out of the order onnx's
checker requires are written sorted by `ge compile` (onnxruntime ran such a model, and ge
compiled it but refused to save it: GE1003), or, repeated, refused saying which and why."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_helpers import listing, run_ge
from onnx import helper, numpy_helper

from sparse_models import function_with_sparse_branch, node, run_ort, sparse, sparse_model, vi


def _add_sparse(path: Path) -> onnx.ModelProto:
    """y = x + s, s a sparse initializer of float [2, 3] holding 3 values, saved at `path`."""
    value = np.array([[1.5, 0, 0], [0, 2, -2]], np.float32)
    model = sparse_model([node("Add", ["x", "s"], ["y"], name="add")], [vi("x", [2, 3])],
                         [vi("y", [2, 3])], [sparse("s", value)])
    onnx.save(model, path)
    return model


@pytest.mark.builtin_passes
def test_compile_converts_a_model_with_a_sparse_initializer(tmp_path: Path) -> None:
    """It was GE1203 "onnx's version converter cannot take graph 'g' from opset 17 to 20:
    Input s is undefined!"."""
    source, target = tmp_path / "m.onnx", tmp_path / "out.onnx"
    model = _add_sparse(source)
    code, stdout, stderr = run_ge("compile", str(source), "-o", str(target), "--opset", "20",
                                  "--verify", "-q")
    assert code == 0, stderr
    assert "verification ok" in stdout
    saved = onnx.load(target)
    assert [(o.domain, o.version) for o in saved.opset_import] == [("", 20)]
    assert [s.values.name for s in saved.graph.sparse_initializer] == ["s"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(run_ort(saved, {"x": x})[0], run_ort(model, {"x": x})[0])


def test_inspect_counts_sparse_initializers(tmp_path: Path) -> None:
    """A model whose only initializer is sparse showed "0 initializer(s), 0 B"."""
    path = tmp_path / "m.onnx"
    model = _add_sparse(path)
    stored = sum(len(t.raw_data) for s in model.graph.sparse_initializer
                 for t in (s.values, s.indices))
    assert stored == 3 * 4 + 3 * 8  # (three float values, their int64 indices)
    code, stdout, stderr = run_ge("inspect", str(path), "--json")
    assert code == 0, stderr
    data = json.loads(stdout)
    assert data["initializers"] == {"count": 0, "in_subgraphs": 0, "bytes": 0}
    assert data["sparse_initializers"] == {"count": 1, "in_subgraphs": 0, "bytes": stored,
                                           "values": 3, "elements": 6}
    assert data["constants"] == 1
    code, stdout, _ = run_ge("inspect", str(path))
    assert code == 0
    assert ("1 node(s); 0 initializer(s), 0 B; 1 sparse initializer(s), 36 B as stored "
            "(values and indices: 3 value(s) of 6 element(s))") in stdout


def test_inspect_says_nothing_of_sparse_initializers_a_model_has_none_of(
        tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(sparse_model([node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])]),
              path)
    code, stdout, _ = run_ge("inspect", str(path))
    assert code == 0 and "sparse" not in stdout
    data = json.loads(run_ge("inspect", str(path), "--json")[1])
    assert data["sparse_initializers"] == {"count": 0, "in_subgraphs": 0, "bytes": 0,
                                           "values": 0, "elements": 0}


def _out_of_order(path: Path, indices: list[int]) -> onnx.ModelProto:
    """y = x + s, s a sparse initializer of float [2, 3] of values 2, 1.5, -2 at `indices`,
    saved at `path` (onnx's checker refuses it)."""
    s = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([2.0, 1.5, -2.0], np.float32), "s"),
        numpy_helper.from_array(np.array(indices, np.int64), "s_indices"), [2, 3])
    model = sparse_model([node("Add", ["x", "s"], ["y"], name="add")], [vi("x", [2, 3])],
                         [vi("y", [2, 3])], [s], check=False)
    onnx.save(model, path)
    return model


@pytest.mark.builtin_passes
def test_compile_writes_unsorted_sparse_indices_sorted(tmp_path: Path) -> None:
    source, target = tmp_path / "m.onnx", tmp_path / "out.onnx"
    model = _out_of_order(source, [4, 0, 5])
    code, stdout, stderr = run_ge("compile", str(source), "-o", str(target), "--verify", "-q")
    assert code == 0, stderr
    assert "verification ok" in stdout
    saved = onnx.load(target)
    onnx.checker.check_model(saved)  # (the source fails it)
    stored = saved.graph.sparse_initializer[0]
    assert numpy_helper.to_array(stored.indices).tolist() == [0, 4, 5]
    assert numpy_helper.to_array(stored.values).tolist() == [1.5, 2.0, -2.0]
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(run_ort(saved, {"x": x})[0], run_ort(model, {"x": x})[0])


@pytest.mark.builtin_passes
def test_compile_refuses_a_repeated_sparse_index_saying_which_and_why(tmp_path: Path) -> None:
    source, target = tmp_path / "m.onnx", tmp_path / "out.onnx"
    _out_of_order(source, [4, 0, 4])
    before = listing(tmp_path)
    code, stdout, _ = run_ge("compile", str(source), "-o", str(target), "--json")
    assert code == 1
    error = json.loads(stdout)
    assert (error["code"], error["type"]) == ("GE1003", "GraphValidationError")
    for said in ("sparse initializer 's' has index 4 twice (at positions 0 and 2)",
                 "onnxruntime runs such a model, but onnx's checker refuses indices out of "
                 "increasing order, and so does ge's save",
                 "which of a repeated index's values the dense tensor holds is the reader's "
                 "choice (onnxruntime takes the last), so ge cannot sort them",
                 f"(the input model {source} fails this check too"):
        assert said in error["message"], said
    assert listing(tmp_path) == before  # nothing written


def test_inspect_notes_sparse_indices_out_of_order(tmp_path: Path) -> None:
    unsorted, repeated = tmp_path / "unsorted.onnx", tmp_path / "repeated.onnx"
    _out_of_order(unsorted, [4, 0, 5])
    _out_of_order(repeated, [4, 0, 4])
    data = json.loads(run_ge("inspect", str(unsorted), "--json")[1])
    assert data["sparse_index_order"] == [{
        "tensor": "sparse initializer 's'", "onnxruntime_runs": True, "sorted_by_ge": True,
        "problem": "has its indices unsorted: 4 at position 0 comes before 0 at position 1"}]
    code, stdout, _ = run_ge("inspect", str(unsorted))
    assert code == 0
    assert stdout.count("note: ") == 1
    assert ("note: sparse initializer 's' has its indices unsorted: 4 at position 0 comes "
            "before 0 at position 1; onnxruntime runs it, onnx's checker refuses it: ge writes "
            "them sorted (the same dense tensor), which the checker passes"
            ) in " ".join(stdout.split())
    data = json.loads(run_ge("inspect", str(repeated), "--json")[1])
    assert [(e["problem"], e["sorted_by_ge"]) for e in data["sparse_index_order"]] == [
        ("has index 4 twice (at positions 0 and 2)", False)]
    code, stdout, _ = run_ge("inspect", str(repeated))
    assert code == 0
    assert ("ge cannot sort a repeated index away (which of its values counts is the "
            "reader's choice), so ge compile refuses to save it (GE1003)"
            ) in " ".join(stdout.split())


def test_inspect_notes_a_sparse_constant_out_of_order(tmp_path: Path) -> None:
    """Attributes are looked at when the model's bytes can hold a sparse one
    (`SPARSE_ATTRIBUTE_TAGS`)."""
    k = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([2.0, 1.5], np.float32), "k"),
        numpy_helper.from_array(np.array([3, 0], np.int64), "k_indices"), [4])
    path = tmp_path / "m.onnx"
    onnx.save(sparse_model([node("Constant", [], ["k"], name="kc", sparse_value=k),
                            node("Add", ["x", "k"], ["y"], name="add")],
                           [vi("x", [4])], [vi("y", [4])], check=False), path)
    data = json.loads(run_ge("inspect", str(path), "--json")[1])
    assert data["sparse_index_order"] == [{
        "tensor": "attribute 'sparse_value' of Constant node 'kc'", "sorted_by_ge": True,
        "onnxruntime_runs": True,
        "problem": "has its indices unsorted: 3 at position 0 comes before 0 at position 1"}]


def test_inspect_names_a_body_by_its_owner_node_and_attribute(tmp_path: Path) -> None:
    """A note named a body's sparse tensor by the body's graph name alone ("in graph
    'then'"), which exporters give every body alike (trial UU); it is named by the node and
    attribute holding it, outwards, as loading's messages name bodies (`ge.graph.places`):
    an unnamed owner by its index and what it computes."""
    s = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([2.0, 1.5], np.float32), "s"),
        numpy_helper.from_array(np.array([3, 0], np.int64), "s_indices"), [4])
    k = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([1.0, 4.0], np.float32), "k"),
        numpy_helper.from_array(np.array([2, 1], np.int64), "k_indices"), [4])
    inner_then = helper.make_graph([node("Add", ["x", "s"], ["a"], name="a_add")], "then",
                                   [], [vi("a", [4])], sparse_initializer=[s])
    inner_else = helper.make_graph([node("Constant", [], ["b"], name="kc", sparse_value=k)],
                                   "else", [], [vi("b", [4])])
    outer_then = helper.make_graph(
        [node("If", ["c"], ["ti"], then_branch=inner_then, else_branch=inner_else)], "then",
        [], [vi("ti", [4])])
    outer_else = helper.make_graph([node("Neg", ["x"], ["e"], name="neg")], "else", [],
                                   [vi("e", [4])])
    path = tmp_path / "m.onnx"
    onnx.save(sparse_model([node("If", ["c"], ["y"], name="outer_if", then_branch=outer_then,
                                 else_branch=outer_else)],
                           [vi("x", [4]), vi("c", [], onnx.TensorProto.BOOL)], [vi("y", [4])],
                           check=False), path)
    inner = ("unnamed If node (index 0 in the node list, computing 'ti') in the then_branch "
             "of If node 'outer_if'")
    data = json.loads(run_ge("inspect", str(path), "--json")[1])
    assert [(e["tensor"], e["onnxruntime_runs"]) for e in data["sparse_index_order"]] == [
        ("attribute 'sparse_value' of Constant node 'kc' in graph 'else', else_branch of "
         f"{inner}", False),  # (helper.make_node sorts attributes by name: else first)
        (f"sparse initializer 's' in graph 'then', then_branch of {inner}", False)]
    code, stdout, _ = run_ge("inspect", str(path))
    assert code == 0
    assert (f"note: sparse initializer 's' in graph 'then', then_branch of {inner} has its "
            "indices unsorted") in " ".join(stdout.split())


def test_a_sparse_constant_in_a_body_of_a_function_is_noted_and_sorted(tmp_path: Path) -> None:
    """User trial UU #6: a sparse Constant out of order in an If body inside a model-local
    function was neither noted by `ge inspect` (which looked at the functions' nodes, not
    at the bodies they hold) nor sorted on load, and `ge compile` refused to save the
    model with the checker's bare text (GE1003)."""
    model = function_with_sparse_branch([3, 0])
    source, target = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(model, source)
    data = json.loads(run_ge("inspect", str(source), "--json")[1])
    assert data["sparse_index_order"] == [{
        "tensor": "attribute 'sparse_value' of Constant node 'sparse_k' in graph "
                  "'then_body', then_branch of If node 'cond_if' in function 'f'",
        "sorted_by_ge": True, "onnxruntime_runs": True,
        "problem": "has its indices unsorted: 3 at position 0 comes before 0 at position 1"}]
    code, _, stderr = run_ge("compile", str(source), "-o", str(target), "-q")
    assert code == 0, stderr
    feeds = {"c": np.array(True), "x": np.arange(4, dtype=np.float32)}
    onnx.checker.check_model(onnx.load(target), full_check=True)
    assert run_ort(target, feeds)[0].tolist() == run_ort(model, feeds)[0].tolist() == [
        1.5, 1, 2, 5]
