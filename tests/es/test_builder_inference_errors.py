"""An operator onnx's inference proves invalid for inputs of fully known descs is refused at
the line that built it (`BuilderInferenceError`, GE1405), not left untyped for a compile to
find; inputs of unknown or partial descs, what an input created without a shape feeds, and
patterns stay quiet (docs/es.md "Operator functions")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ge.errors import BuilderInferenceError
from ge.es import GraphBuilder, TensorHolder, attr_scope
from ge.es.onnx import Add, MatMul, Relu, Reshape
from ge.es.scopes import pattern_scope
from ge.graph import DataType
from ge.ops.memo import InferenceMemo, inference_memo_scope


def _line_of(text: str) -> int:
    """The line of this file holding `text` (the call the error must point at)."""
    lines = Path(__file__).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line and "_line_of" not in line)


def _inputs(*shapes: list[int | str]) -> tuple[GraphBuilder, list[TensorHolder]]:
    builder = GraphBuilder("b", opset=17)
    return builder, [builder.create_input(i, shape=s) for i, s in enumerate(shapes)]


def test_a_matmul_of_known_mismatched_shapes_is_refused_at_its_line() -> None:
    builder, (a, b) = _inputs([2, 3], [4, 5])
    with pytest.raises(BuilderInferenceError) as caught:
        MatMul(a, b)  # the refused call
    err = caught.value
    assert err.code == "GE1405" and isinstance(err, ValueError)
    assert str(err.location) == f"{__file__}:{_line_of('MatMul(a, b)  # the refused call')}"
    assert err.message.startswith(
        "MatMul node 'MatMul' is invalid for its inputs (A float32[2,3], B float32[4,5]): "
        "onnx's shape inference says: ")
    assert "Incompatible dimensions for matrix multiplication" in err.message
    assert err.nodes == ("MatMul",)
    # the node is taken out: the builder's graph is as before the call, and still builds
    assert [n.type for n in builder.graph.get_direct_nodes()] == ["Data", "Data"]
    graph = builder.build_and_reset([Relu(a)])
    graph.validate()


def test_an_add_that_cannot_broadcast_and_a_mistyped_constant_are_refused() -> None:
    _, (a, b) = _inputs([2, 3], [4])
    with pytest.raises(BuilderInferenceError, match=r"Add node 'Add' is invalid for its inputs "
                       r"\(A float32\[2,3\], B float32\[4\]\).*Incompatible dimensions"):
        Add(a, b)
    with pytest.raises(BuilderInferenceError, match=r"\(A float32\[2,3\], B int64\[\]\)"):
        a + 1  # an int64 constant: `a + 1.0` is meant
    assert (a + 1.0).get_tensor_desc().get_shape().get_dims() == [2, 3]


def test_a_symbolic_dim_is_known_and_a_float_reshape_shape_is_refused() -> None:
    _, (a, b) = _inputs(["batch", 3], [4, 5])
    with pytest.raises(BuilderInferenceError, match=r"A float32\[batch,3\]"):
        MatMul(a, b)
    with pytest.raises(BuilderInferenceError, match=r"shape float32\[2\]"):
        Reshape(a, np.array([3, -1], dtype=np.float32))


def test_an_attribute_onnx_does_not_define_is_refused() -> None:
    _, (a,) = _inputs([2, 3])
    with attr_scope({"_stream": 1}), pytest.raises(BuilderInferenceError,
                                                   match="Unrecognized attribute: _stream"):
        Relu(a)


def test_the_memo_gives_the_same_error_for_a_signature_refused_before() -> None:
    with inference_memo_scope(InferenceMemo()) as memo:
        messages = []
        for _ in range(2):
            _, (a, b) = _inputs([2, 3], [4, 5])
            with pytest.raises(BuilderInferenceError) as caught:
                MatMul(a, b)
            messages.append(caught.value.message)
        assert memo.hits == 1
    assert messages[0] == messages[1]
    assert "Incompatible dimensions for matrix multiplication" in messages[1]


def test_unknown_and_partial_descs_stay_quiet() -> None:
    builder, (a, b) = _inputs([2, 3], [4, 5])
    unknown_dim = builder.create_input(2, shape=[-1, 3])
    assert MatMul(unknown_dim, b).get_tensor_desc().data_type == DataType.DT_UNDEFINED
    untyped = builder.create_input(3, shape=[4, 5], data_type=DataType.DT_UNDEFINED)
    assert MatMul(a, untyped).get_tensor_desc().data_type == DataType.DT_UNDEFINED


def test_what_an_input_without_a_shape_feeds_stays_quiet_until_it_is_given_one() -> None:
    builder = GraphBuilder("replacement", opset=17)
    x, w = builder.create_inputs(2)  # GE's scalar placeholders
    y = MatMul(Relu(x), w)  # rank 0 for onnx, but only a placeholder's
    assert y.get_tensor_desc().data_type == DataType.DT_UNDEFINED
    x.set_shape([2, 3])
    w.set_shape([4, 5])
    with pytest.raises(BuilderInferenceError):
        MatMul(Relu(x), w)


def test_a_pattern_need_not_be_well_typed() -> None:
    _, (a, b) = _inputs([2, 3], [4, 5])
    with pattern_scope():
        assert MatMul(a, b).get_tensor_desc().data_type == DataType.DT_UNDEFINED
        assert (a + 0).get_tensor_desc().data_type == DataType.DT_UNDEFINED


def test_what_a_placeholder_feeds_in_a_pattern_is_not_inferred() -> None:
    """A pattern built on inputs given shapes is typed as anywhere else (an author may read
    its descs); what a placeholder (`create_input(0)`, a scalar) feeds is left unknown:
    typed as a scalar's result it meant nothing, and inferring it cost ~40% of building the
    built-in catalog's patterns in every process (trial R)."""
    _, (a, b) = _inputs([2, 3], [3, 5])
    with pattern_scope():
        typed = MatMul(a, b).get_tensor_desc()
        builder = GraphBuilder("p", opset=17)
        x, w = builder.create_input(0), builder.create_input(1)
        fed = MatMul(Relu(x), w).get_tensor_desc()
    assert typed.get_shape().get_dims() == [2, 5] and typed.data_type == DataType.DT_FLOAT
    assert fed.data_type == DataType.DT_UNDEFINED and fed.get_shape().is_unknown_rank()


def test_a_scalar_of_another_type_is_named_with_how_to_write_it() -> None:
    """`x * 0.5` on a float16 tensor, the commonest refusal (trial U): the message says the
    constant came from the scalar and how to write it in the tensor's type."""
    builder = GraphBuilder("b", opset=17)
    x = builder.create_input(0, shape=[2, 3], data_type=DataType.DT_FLOAT16)
    with pytest.raises(BuilderInferenceError) as caught:
        x * 0.5
    assert caught.value.message.endswith(
        "; B is a scalar constant of another type than A (a Python float becomes a float32 "
        "constant, an int an int64 one): write it in float16, e.g. np.float16(0.5), or "
        "es.CastLike(c, A)")
    assert (x * np.float16(0.5)).get_tensor_desc().get_data_type() == DataType.DT_FLOAT16
