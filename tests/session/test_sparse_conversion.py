"""`ge.compile(m, opset=N)` (and `--opset`, `--inline-functions`) of a model with sparse
constants: onnx's version converter knows no sparse tensor ("Input s is undefined!" for a
sparse initializer, "Sparse tensors not supported." for a sparse `Constant`: GE1203), so it
gets the dense tensors they stand for as stand-ins without data, and the sparse tensors are
put back where those are, in the root graph and in bodies. The converted model is the
original's in onnxruntime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper, version_converter

import ge
import ge.graph
import ge.session.onnx_tools as onnx_tools
from ge.errors import CompileInputError
from ge.graph.sparse import put_sparse_back, sparse_stand_ins
from ge.session.onnx_tools import upgraded_opset
from sparse_models import dense_with_zeros, node, run_ort, sparse, sparse_model, vi

pytestmark = pytest.mark.builtin_passes  # compiled through the whole pipeline

BOOL = onnx.TensorProto.BOOL
RNG = np.random.default_rng(0)


def _with_sparse(where: str, kind: str) -> onnx.ModelProto:
    """y = (x @ w) + k at opset 17, w a large dense weight (a stand-in of its own), k sparse:
    a sparse initializer or a `Constant` of a `sparse_value`, in the root graph or in the
    then-branch of an If (the else-branch negates x @ w). One place a model: onnxruntime
    1.32 crashes now and then creating a session of a model holding several sparse
    `Constant`s."""
    k = sparse("k", dense_with_zeros((2, 64), seed=1))
    w = numpy_helper.from_array(RNG.standard_normal((64, 64)).astype(np.float32), "w")
    constant = [node("Constant", [], ["k"], name="k_const", sparse_value=k)] if (
        kind == "constant") else []
    given = [k] if kind == "initializer" else []
    add = node("Add", ["m", "k"], ["t"], name="add")
    if where == "root":
        return sparse_model([node("MatMul", ["x", "w"], ["m"], name="mm"), *constant, add],
                            [vi("x", [2, 64])], [vi("t", [2, 64])], given, [w])
    then = helper.make_graph([*constant, add], "then", [], [vi("t", [2, 64])],
                             sparse_initializer=given)
    other = helper.make_graph([node("Neg", ["m"], ["e"], name="neg")], "else", [],
                              [vi("e", [2, 64])])
    return sparse_model([node("MatMul", ["x", "w"], ["m"], name="mm"),
                         node("If", ["c"], ["y"], name="if", then_branch=then,
                              else_branch=other)],
                        [vi("x", [2, 64]), vi("c", [], BOOL)], [vi("y", [2, 64])], [], [w])


def _sparse_places(model: onnx.ModelProto) -> list[tuple[str, str, str]]:
    """(graph, kind, name) of every sparse tensor of `model`'s graphs."""
    found = []
    for each in ge.graph.domains.proto_graphs(model.graph):
        found += [(each.name, "initializer", s.values.name) for s in each.sparse_initializer]
        found += [(each.name, "constant", a.sparse_tensor.values.name) for n in each.node
                  for a in n.attribute if a.name == "sparse_value"]
    return found


def _then_branch(model: onnx.ModelProto) -> onnx.GraphProto:
    """The then-branch of the If of `_with_sparse("branch", ...)`."""
    return next(a.g for a in model.graph.node[1].attribute if a.name == "then_branch")


def _feeds(model: onnx.ModelProto, branch: bool) -> dict[str, np.ndarray]:
    feeds = {"x": RNG.standard_normal((2, 64)).astype(np.float32)}
    if len(model.graph.input) == 2:
        feeds["c"] = np.array(branch)
    return feeds


@pytest.mark.parametrize("kind", ["initializer", "constant"])
@pytest.mark.parametrize("where", ["root", "branch"])
def test_sparse_constants_are_converted_and_kept_sparse(where: str, kind: str,
                                                        tmp_path: Path) -> None:
    model = _with_sparse(where, kind)
    result = ge.compile(model, opset=20, verify=True)
    assert result.verification is not None and result.verification.ok
    target = tmp_path / "out.onnx"
    result.save(target)
    saved = onnx.load(target)
    assert [(o.domain, o.version) for o in saved.opset_import] == [("", 20)]
    assert _sparse_places(saved) == _sparse_places(model)  # where they were, sparse
    for branch in (True, False):
        feeds = _feeds(model, branch)
        for got, want in zip(run_ort(saved, feeds), run_ort(model, feeds), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_the_converter_is_given_no_sparse_tensor(
        converter_calls: list[onnx.ModelProto]) -> None:
    """It gets a dense initializer (a `Constant`'s dense value) of the sparse tensor's type
    and dims, without data, as it gets a large weight."""
    given = converter_calls
    for kind in ("initializer", "constant"):
        model = _with_sparse("branch", kind)
        converted = upgraded_opset(ge.graph.load(model), 20)
        assert _sparse_places(given[-1]) == []
        then = _then_branch(given[-1])
        stand_in = (then.initializer[0] if kind == "initializer"
                    else then.node[0].attribute[0].t)
        assert (stand_in.name, stand_in.data_type, list(stand_in.dims), stand_in.data_location
                ) == ("k", onnx.TensorProto.FLOAT, [2, 64], onnx.TensorProto.EXTERNAL)
        assert _sparse_places(converted.to_onnx()) == _sparse_places(model)


def test_a_shape_given_sparse_is_read_after_the_conversion() -> None:
    shape = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([3, 4], np.int64), "shape"),
        numpy_helper.from_array(np.array([0, 1], np.int64), "shape_indices"), [2])
    model = sparse_model([node("Reshape", ["x", "shape"], ["r"], name="reshape"),
                          node("Relu", ["r"], ["y"], name="relu")],
                         [vi("x", [2, 6])], [vi("y", [3, 4])], [shape])
    result = ge.compile(model, opset=21, verify=True)
    assert result.verification is not None and result.verification.ok
    reshape = result.graph.find_node_by_name("reshape")
    assert list(reshape.get_output_desc(0).get_shape()) == [3, 4]


def test_a_sparse_initializer_beside_functions_inlined_and_converted(tmp_path: Path) -> None:
    """The function inliner gets the stand-ins too, and then the converter."""
    f = helper.make_function("mydomain", "f", ["a", "b"], ["o"],
                             [node("Mul", ["a", "b"], ["o"])], [helper.make_opsetid("", 17)])
    value = dense_with_zeros((4,), seed=2)
    model = sparse_model([node("f", ["x", "s"], ["y"], domain="mydomain", name="call")],
                         [vi("x", [4])], [vi("y", [4])], [sparse("s", value)], functions=[f])
    result = ge.compile(model, inline_functions=True, opset=20, verify=True)
    assert result.verification is not None and result.verification.ok
    target = tmp_path / "out.onnx"
    result.save(target)
    saved = onnx.load(target)
    assert [n.op_type for n in saved.graph.node] == ["Mul"]
    assert [s.values.name for s in saved.graph.sparse_initializer] == ["s"]
    x = np.array([1, 2, 3, 4], np.float32)
    np.testing.assert_array_equal(run_ort(saved, {"x": x})[0], x * value)


def test_stand_ins_and_back_give_the_model_as_it_was() -> None:
    for kind in ("initializer", "constant"):
        model = _with_sparse("branch", kind)
        originals: list[onnx.SparseTensorProto] = []

        def stand_in(tensor: onnx.SparseTensorProto, initializer: bool,
                     originals: list[onnx.SparseTensorProto] = originals) -> onnx.TensorProto:
            originals.append(tensor)
            return helper.make_tensor(f"stand-in {len(originals) - 1}", onnx.TensorProto.FLOAT,
                                      [0], [])

        def original(tensor: onnx.TensorProto, initializer: bool,
                     originals: list[onnx.SparseTensorProto] = originals
                     ) -> onnx.SparseTensorProto | None:
            if not tensor.name.startswith("stand-in "):
                return None
            return originals[int(tensor.name.split()[1])]

        changed = onnx.ModelProto()
        changed.CopyFrom(model)
        sparse_stand_ins(changed.graph, stand_in)
        assert _sparse_places(changed) == [] and len(originals) == 1
        assert put_sparse_back(changed.graph, original) == 1
        assert changed == model


def test_a_sparse_stand_in_not_given_back_is_ge1203(monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole model cannot go through the converter instead (it refuses sparse tensors):
    said, the graph left as it was."""
    convert = version_converter.convert_version

    def dropping(model: onnx.ModelProto, opset: int) -> onnx.ModelProto:
        result = convert(model, opset)
        then = _then_branch(result)
        del then.initializer[:]
        then.input.append(vi("k", [2, 64]))  # (still a model the converter could give)
        return result

    monkeypatch.setattr(version_converter, "convert_version", dropping)
    graph = ge.graph.load(_with_sparse("branch", "initializer"))
    before = graph.to_onnx().SerializeToString()
    with pytest.raises(CompileInputError) as caught:
        upgraded_opset(graph, 20)
    assert caught.value.code == "GE1203"
    assert str(caught.value) == (
        "[GE1203] onnx's version converter could take graph 'g' from opset 17 to 20 without "
        "its weights, but it dropped the stand-in of tensor 'k', so ge cannot put them back; "
        "the whole model cannot go through it with them: its sparse tensors ('k') are what "
        "onnx's version converter does not know")
    assert graph.to_onnx().SerializeToString() == before
    assert len(before) < onnx_tools.WHOLE_MODEL_LIMIT  # (not the size: the sparse tensor)
