"""Generated inputs for sequence, map and optional inputs (`generate_inputs`, what
`ge.compile(verify=True)`, `ge compile --verify` and `ge run` use without inputs): a
sequence of 2 tensors of its element type and declared shape, an optional's element, a map
of four keys; what cannot be generated is refused naming the type in ONNX's notation, why,
and what to give (trial O and E: "input 'x' is any type (any shape)")."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ge
import ge.graph
from ge.errors import VerificationInputError
from ge.session import check_inputs, generate_inputs, run_model
from nested_value_models import (
    dict_vectorizer,
    optional_input,
    sequence_concat,
    sequence_identity,
    zipmap,
)

T = TensorProto


@pytest.mark.parametrize("as_graph", [False, True])
def test_a_sequence_input_is_two_tensors_of_its_element_type(as_graph: bool) -> None:
    model = sequence_identity()
    x = generate_inputs(ge.graph.load(model) if as_graph else model, seed=1)["x"]
    assert isinstance(x, list) and len(x) == 2
    assert all(a.dtype == np.float32 and a.shape == (2,) for a in x)
    assert not np.array_equal(x[0], x[1])  # drawn one after the other
    again = generate_inputs(model, seed=1)["x"]
    assert all(np.array_equal(a, b) for a, b in zip(x, again))  # the same for a seed
    check_inputs({"x": x}, model)


def test_dims_size_the_tensors_of_a_sequence() -> None:
    x = generate_inputs(sequence_concat(), dims={"n": 5})["x"]
    assert [a.shape for a in x] == [(5,), (5,)]
    assert run_model(sequence_concat(), {"x": x})["y"].shape == (10,)
    with pytest.raises(VerificationInputError) as info:
        generate_inputs(sequence_concat(), dims={"m": 5})
    assert info.value.message == "dims 'm': each must name a symbolic dim of graph 'g' (n)"


def test_a_map_input_is_four_keys_to_numbers() -> None:
    d = generate_inputs(dict_vectorizer())["d"]
    assert list(d) == ["a", "bb", "ccc", "dddd"]
    assert all(isinstance(v, float) for v in d.values())
    assert run_model(dict_vectorizer(), {"d": d})["y"][0, 0] == pytest.approx(2 * d["a"])
    result = ge.compile(dict_vectorizer(), verify=True)  # trial E's DictVectorizer
    assert result.verification is not None and result.verification.ok


def test_an_optional_input_is_a_value_of_its_element() -> None:
    x = generate_inputs(optional_input())["x"]
    assert isinstance(x, np.ndarray) and x.dtype == np.float32 and x.shape == (2,)
    assert run_model(optional_input(), {"x": x})["has"].item() is True


def test_a_model_with_a_zipmap_output_verifies_on_generated_inputs() -> None:
    result = ge.compile(zipmap(), verify=True)
    assert result.verification is not None and result.verification.ok
    (out,) = result.verification.outputs
    assert (out.expected_dtype, out.expected_shape) == ("seq(map(int64, float))", (2,))


def _unused_input(vtype: onnx.TypeProto) -> onnx.ModelProto:
    """A model with an input `v` of `vtype` (unused) beside x -> Identity -> y."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])], "g",
        [helper.make_value_info("v", vtype), helper.make_tensor_value_info("x", T.FLOAT, [2])],
        [helper.make_tensor_value_info("y", T.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    return model


FLOATS = helper.make_tensor_type_proto(T.FLOAT, None)
ADVICE = ("; give the inputs explicitly, {what} for 'v' (inputs=; in an .npz file for "
          "--inputs, as docs/session.md says)")


@pytest.mark.parametrize(("vtype", "text", "why", "what"), [
    (helper.make_sequence_type_proto(FLOATS), "seq(tensor(float))",
     "its tensors' rank is unknown", "a list of numpy arrays"),
    (helper.make_sequence_type_proto(helper.make_tensor_type_proto(0, [2])),
     "seq(tensor(?) [2])", "its tensors' element type is unknown", "a list of numpy arrays"),
    (helper.make_optional_type_proto(helper.make_sequence_type_proto(FLOATS)),
     "optional(seq(tensor(float)))", "its tensors' rank is unknown",
     "None or a list of numpy arrays"),
    (helper.make_map_type_proto(T.INT64, helper.make_sequence_type_proto(FLOATS)),
     "map(int64, seq(tensor(float)))",
     "ge generates maps of numbers or strings, not of seq(tensor(float))", "a dict"),
    (helper.make_map_type_proto(T.INT64, helper.make_tensor_type_proto(T.FLOAT, [3])),
     "map(int64, tensor(float) [3])",
     "ge generates maps of numbers or strings, not of tensor(float) [3]", "a dict"),
    (helper.make_sparse_tensor_type_proto(T.FLOAT, [2, 2]), "sparse_tensor(float) [2, 2]",
     "ge does not generate sparse tensors", "a numpy array"),
])
def test_what_cannot_be_generated_is_refused_naming_its_type(
        vtype: onnx.TypeProto, text: str, why: str, what: str) -> None:
    with pytest.raises(VerificationInputError) as info:
        generate_inputs(_unused_input(vtype))
    assert info.value.code == "GE1602"
    assert info.value.message == (f"input 'v' of graph 'g' is {text}: cannot generate a "
                                  f"value for it ({why})" + ADVICE.format(what=what))


def test_generated_sequences_count_towards_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GE_MAX_GENERATED_INPUT_BYTES", "1000")
    with pytest.raises(VerificationInputError) as info:
        generate_inputs(sequence_concat(), dims={"n": 200})  # 2 x 200 float32: 1600 bytes
    assert info.value.message.startswith(
        "the generated inputs of graph 'g' would take 1.56 KiB (1600 bytes), over the limit "
        "of 1000 bytes (GE_MAX_GENERATED_INPUT_BYTES): 'x' seq(tensor(float) [n]) 1.56 KiB; "
        "give smaller sizes with --dims NAME=SIZE (dims=)")
    assert len(generate_inputs(sequence_concat(), dims={"n": 100})["x"]) == 2
