"""Every bad input the issue names raises its error type, code and message."""

from __future__ import annotations

import numpy as np
import pytest

from ge.errors import (
    BuilderMixError,
    BuilderStateError,
    BuilderTypeError,
    BuilderValueError,
    GeError,
    OpAttributeError,
    OpInputError,
)
from ge.es import GraphBuilder, TensorHolder
from ge.es.onnx import Add, Gemm, MatMul, Relu, Transpose


def _builder() -> tuple[GraphBuilder, TensorHolder]:
    builder = GraphBuilder("errors", opset=17)
    return builder, builder.create_input(0, shape=[2, 2])


def test_wrong_input_count() -> None:
    _, x = _builder()
    with pytest.raises(OpInputError) as err:
        Relu(x, x)
    assert isinstance(err.value, ValueError) and err.value.code == "GE1303"
    assert "Relu (opset 17) takes at most 1 inputs (Relu(X) -> Y), got 2" in str(err.value)
    with pytest.raises(OpInputError, match=r"MatMul \(opset 17\) requires input 1 'B'"):
        MatMul(x)


def test_unknown_attribute() -> None:
    _, x = _builder()
    with pytest.raises(OpAttributeError) as err:
        Transpose(x, permutation=[1, 0])
    assert isinstance(err.value, TypeError) and err.value.code == "GE1304"
    assert "Transpose (opset 17) got an unknown attribute 'permutation'" in str(err.value)
    assert "perm" in str(err.value)


def test_wrong_attribute_type() -> None:
    _, x = _builder()
    with pytest.raises(OpAttributeError) as err:
        Gemm(x, x, alpha="big")
    assert isinstance(err.value, TypeError) and err.value.code == "GE1304"
    assert "Gemm (opset 17): attribute 'alpha' must be of type FLOAT, got str" in str(err.value)
    with pytest.raises(OpAttributeError, match="'perm' must be of type INTS"):
        Transpose(x, perm=[1.5, 0])
    with pytest.raises(OpAttributeError) as err:  # a matrix is not a list
        Transpose(x, perm=np.array([[1, 0]]))
    assert str(err.value).endswith(
        "must be of type INTS, got ndarray array([[1, 0]]); a list attribute takes a 1-D "
        "array, not one of 2 dims")
    with pytest.raises(OpAttributeError, match="'perm' must be of type INTS"):
        Transpose(x, perm=np.array([1.5, 0.0]))


def test_tensors_of_two_builders() -> None:
    _, x = _builder()
    other = GraphBuilder("other", opset=17)
    y = other.create_input(0, shape=[2, 2])
    with pytest.raises(BuilderMixError) as err:
        x + y
    assert isinstance(err.value, ValueError) and err.value.code == "GE1402"
    assert "belongs to GraphBuilder 'other'" in str(err.value)
    assert "tensors of different builders cannot be mixed" in str(err.value)
    with pytest.raises(BuilderMixError):
        Add(x, y)



def test_a_numpy_dtype_as_an_element_type_names_the_data_type() -> None:
    """Trial YY: `Cast(x, to=np.float16)` said only that `to` must be an INT; an element
    type is a DataType here (or ONNX's int), which the message now names."""
    import numpy as np

    from ge.es.onnx import Cast

    _, x = _builder()
    with pytest.raises(OpAttributeError) as err:
        Cast(x, to=np.float16)
    assert err.value.code == "GE1304"
    assert str(err.value).endswith(
        "attribute 'to' must be of type INT, got type <class 'numpy.float16'>; an element "
        "type is given as a DataType: DataType.DT_FLOAT16")
    with pytest.raises(OpAttributeError) as err:  # not an element type: no such hint
        Transpose(x, perm=np.int64)
    assert "DataType" not in str(err.value)

def test_builder_used_after_build_and_reset() -> None:
    builder, x = _builder()
    builder.build_and_reset([Relu(x)])
    for call, op in [(lambda: builder.create_input(1), "create_input"),
                     (lambda: builder.create_scalar_float(1.0), "create_scalar_float"),
                     (lambda: Relu(x), "Relu"),
                     (lambda: builder.build_and_reset([]), "build_and_reset")]:
        with pytest.raises(BuilderStateError) as err:
            call()
        assert isinstance(err.value, RuntimeError) and err.value.code == "GE1401"
        assert f"Cannot {op}: GraphBuilder has already been built." in str(err.value)


def test_ragged_list_constant() -> None:
    builder, x = _builder()
    with pytest.raises(BuilderValueError) as err:
        x + [[1.0, 2.0], [3.0]]  # noqa: RUF005 (a TensorHolder, not a list)
    assert isinstance(err.value, ValueError) and err.value.code == "GE1403"
    assert "ragged list" in str(err.value)
    with pytest.raises(BuilderValueError, match="ragged list"):
        builder.create_const_float([[0.1, 0.1], [0.1]])


def test_const_count_and_range_and_outputs_type() -> None:
    builder, x = _builder()
    with pytest.raises(BuilderValueError, match=r"shape \[2, 2\] holds 4 elements but 3"):
        builder.create_const_int64([1, 2, 3], [2, 2])
    with pytest.raises(BuilderValueError, match="outside the range of DT_UINT32"):
        builder.create_scalar_uint32(2**32)
    with pytest.raises(BuilderTypeError, match="outputs must be a list, got tuple"):
        builder.build_and_reset((x,))  # type: ignore[arg-type]
    with pytest.raises(BuilderTypeError):
        builder.create_inputs(0)


def test_tensor_holder_is_not_constructible() -> None:
    with pytest.raises(RuntimeError) as err:
        TensorHolder()
    assert isinstance(err.value, GeError) and "cannot be constructed directly" in str(err.value)


def test_strings_that_are_not_utf8_are_refused_as_loading_refuses_them() -> None:
    """Trial D: `Constant(value_string=b"\\xff\\xfe")` built a Const that saved and passed
    onnx's checker, which ge's loading then refused (GE1101) and onnxruntime failed on: ES
    refuses the strings at the call, with loading's check (`string_problem`)."""
    from ge.es.onnx import Constant
    from ge.graph import Tensor

    builder, _ = _builder()
    bad = "holds a string that is not UTF-8 text (element {}: {}); ONNX strings are UTF-8"
    cases = [({"value_string": b"\xff\xfe"}, "value_string", bad.format(0, r"b'\xff\xfe'")),
             ({"value_strings": np.array([b"ok", b"\xc3"])}, "value_strings",
              bad.format(1, r"b'\xc3'")),
             ({"value_strings": [b"ok", b"\xc3"]}, "value_strings", bad.format(1, r"b'\xc3'")),
             ({"value": np.array([b"\xc3"], dtype=object)}, "value", bad.format(0, r"b'\xc3'"))]
    for kwargs, key, why in cases:
        with pytest.raises(OpAttributeError) as err:
            Constant(builder=builder, **kwargs)
        assert err.value.code == "GE1304"
        assert f"Constant (opset 17): attribute {key!r}" in err.value.message
        assert err.value.message.endswith(why)
    with pytest.raises(BuilderValueError) as made:
        builder.create_const(np.array([b"ok", b"\xc3"], dtype=object))
    assert made.value.code == "GE1403"
    assert made.value.message == "create_const: a string tensor " + bad.format(1, r"b'\xc3'")
    # no node was added by any refused call; text and UTF-8 bytes are taken
    assert [n.type for n in builder.graph.get_all_nodes()] == ["Data"]
    assert Constant(builder=builder, value_strings=["é", "é".encode()]) is not None
    assert Tensor(np.array(["a", b"\xc3\xa9"], dtype=object)).size == 2


def test_ints_beyond_int64_are_refused_at_the_call() -> None:
    """Trial D: `perm=np.array([2**64 - 1, 0, 1], np.uint64)` or a Python int past int64 was
    a bare ValueError of onnx's make_attribute (no code): GE1304 naming the attribute."""
    builder, _ = _builder()
    x = builder.create_input(1, shape=[1, 2, 3])
    for perm in (np.array([2**64 - 1, 0, 1], np.uint64), [2**63, 0, 1], [-2**63 - 1, 0, 1]):
        with pytest.raises(OpAttributeError) as err:
            Transpose(x, perm=perm)
        assert err.value.code == "GE1304"
        assert err.value.message == (
            f"Transpose (opset 17): attribute 'perm' holds {perm[0]}, beyond int64: ONNX "
            "attribute ints are int64")
    assert [n.type for n in builder.graph.get_all_nodes()] == ["Data", "Data"]
    assert Transpose(x, perm=[2, 1, 0])._node.get_attr("perm") == [2, 1, 0]
