"""Sequence, map and optional inputs given to `ge.session` and `ge.compile(inputs=...)`:
taken as the Python values onnxruntime takes (a list, a dict, None), never stacked into one
tensor; what does not fit is VerificationInputError (GE1602) naming the input, the element
and the type expected, in ONNX's notation.

(Trial O: a list of arrays was stacked into a tensor, which onnxruntime refused, blamed on
the original model (GE1601); a ragged one was a bare numpy ValueError. Trial E: None for an
optional input became a string tensor.)"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ge
import ge.graph
from ge.errors import VerificationInputError
from ge.session import Session, check_inputs, model_inputs, run_model
from nested_value_models import (
    dict_vectorizer,
    optional_input,
    sequence_concat,
    sequence_identity,
    split_to_sequence,
)

F32 = np.float32


def _refused(model: Any, inputs: dict[str, Any]) -> str:
    with pytest.raises(VerificationInputError) as info:
        check_inputs(inputs, model)
    assert info.value.code == "GE1602"
    return info.value.message


@pytest.mark.parametrize("as_graph", [False, True])
def test_the_types_of_such_inputs_are_read_in_onnx_notation(as_graph: bool) -> None:
    models = [sequence_identity(), dict_vectorizer(), optional_input()]
    texts = [model_inputs(ge.graph.load(m) if as_graph else m)[0].describe() for m in models]
    assert texts == ["seq(tensor(float) [2])", "map(string, tensor(float))",
                     "optional(tensor(float) [2])"]


def test_a_list_of_arrays_is_a_sequence_not_a_stacked_tensor() -> None:
    x = [np.ones(2, F32), np.zeros(2, F32)]
    result = ge.compile(sequence_identity(), inputs={"x": x})
    assert result.verification is not None and result.verification.ok
    (out,) = result.verification.outputs
    assert (out.expected_dtype, out.expected_shape, out.size) == ("seq(tensor(float))", (2,), 4)
    y = run_model(sequence_identity(), {"x": x})["y"]
    assert isinstance(y, list) and [a.tolist() for a in y] == [[1, 1], [0, 0]]


def test_a_ragged_sequence_input_is_taken_as_it_is() -> None:
    x = [np.ones(1, F32), np.arange(3, dtype=F32)]
    result = ge.compile(sequence_concat(), inputs={"x": x})
    assert result.verification is not None and result.verification.ok
    assert run_model(sequence_concat(), {"x": x})["y"].tolist() == [1, 0, 1, 2]
    # a tuple, ge Tensors and lists of numbers are elements too
    y = run_model(sequence_concat(), {"x": (ge.graph.Tensor(np.ones(1, F32)),
                                            np.array([2.0], F32))})["y"]
    assert y.tolist() == [1, 2]


def test_an_empty_optional_is_none_and_a_full_one_its_value() -> None:
    model = optional_input()
    empty = run_model(model, {"x": None})
    assert empty["has"].item() is False and empty["y"] is None
    full = run_model(model, {"x": np.ones(2, F32)})
    assert full["has"].item() is True and full["y"].tolist() == [1, 1]
    for x in (None, np.ones(2, F32)):
        result = ge.compile(model, inputs={"x": x})
        assert result.verification is not None and result.verification.ok, x


def test_a_map_input_is_a_dict() -> None:
    y = run_model(dict_vectorizer(), {"d": {"a": 1.0, "c": np.float32(2.0)}})["y"]
    assert y.tolist() == [[2, 0, 4]]
    result = ge.compile(dict_vectorizer(), inputs={"d": {"b": 3}})  # an int for a float
    assert result.verification is not None and result.verification.ok


def test_session_run_graph_gives_such_outputs_as_their_values() -> None:
    session = Session()
    session.add_graph(1, ge.graph.load(split_to_sequence()))
    (y,) = session.run_graph(1, [np.array([1, 2, 3], F32), np.array([1, 2], np.int64)])
    assert isinstance(y, list) and [a.tolist() for a in y] == [[1], [2, 3]]


G = "inputs do not fit graph 'g': "


@pytest.mark.parametrize(("inputs", "message"), [
    ({"x": np.ones((2, 2), F32)},
     "input 'x': expected seq(tensor(float) [2]), got float32 [2, 2] (a list of numpy "
     "arrays)"),
    ({"x": [np.ones(2, F32), np.ones(2)]},
     "input 'x': element [1]: expected tensor(float) [2], got float64 [2]"),
    ({"x": [np.ones(3, F32)]},
     "input 'x': element [0]: expected tensor(float) [2], got float32 [3]"),
    ({"x": [np.ones(2, F32), [[1.0], [2.0, 3.0]]]},
     "input 'x': element [1]: expected tensor(float) [2], got list of 2"),
    ({"x": "a"}, "input 'x': expected seq(tensor(float) [2]), got str (a list of numpy "
                 "arrays)"),
])
def test_what_does_not_fit_a_sequence_input_is_named(inputs: dict[str, Any],
                                                       message: str) -> None:
    assert _refused(sequence_identity(), inputs) == G + message


@pytest.mark.parametrize(("d", "message"), [
    ([("a", 1.0)], "expected map(string, tensor(float)), got list of 1 (a dict)"),
    ({1: 2.0}, "expected map(string, tensor(float)), got the key 1 (int)"),
    ({"a": "x"}, "expected map(string, tensor(float)), got 'x' (str) for the key 'a'"),
    ({"a": True}, "expected map(string, tensor(float)), got True (bool) for the key 'a'"),
])
def test_what_does_not_fit_a_map_input_is_named(d: Any, message: str) -> None:
    assert _refused(dict_vectorizer(), {"d": d}) == G + f"input 'd': {message}"


def test_what_does_not_fit_an_optional_input_is_named() -> None:
    assert _refused(optional_input(), {"x": np.ones(3, F32)}) == G + (
        "input 'x': expected optional(tensor(float) [2]), got float32 [3] (None or a numpy "
        "array)")
    assert _refused(optional_input(), {}) == G + (
        "input 'x': missing (expected optional(tensor(float) [2]))")


def test_compile_refuses_a_ragged_list_for_a_tensor_input() -> None:
    """ge.compile makes a list given for a tensor input an array; a ragged one is no array
    (it was numpy's bare ValueError, "inhomogeneous shape")."""
    with pytest.raises(VerificationInputError) as info:
        ge.compile(split_to_sequence(), inputs={"x": [[1.0], [2.0, 3.0]],
                                                "split": np.array([1, 2], np.int64)})
    assert info.value.code == "GE1602"
    assert info.value.message == (
        "inputs do not fit graph 'g': input 'x': expected float32 [3], got a list of items "
        "of different shapes (ragged), which is no array")


def test_compile_names_a_sequence_input_that_does_not_fit() -> None:
    """Not GE1601 blaming the original model: the inputs are at fault."""
    with pytest.raises(VerificationInputError) as info:
        ge.compile(sequence_identity(), inputs={"x": [np.ones(2, F32), np.ones(3, F32)]})
    assert info.value.message == G + (
        "input 'x': element [1]: expected tensor(float) [2], got float32 [3]")
