"""Graph inputs and outputs of float8, 4-bit and 2-bit types: run in onnxruntime through
OrtValues (which onnxruntime's plain `run` refuses), read back as ml_dtypes arrays, loaded
from `.npz` files (where numpy stores them as void), generated valid, compared as numbers.

Every value is checked against onnxruntime run directly through OrtValues packed and
unpacked here by hand (not by ge's code), and against what the operator computes."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
import ge.graph
from ge.errors import RuntimeLoadError, SessionError
from ge.session import ModelRunner, compare_outputs, generate_inputs, load_inputs, run_model
from ge.session.npz import read_npz, write_npz
from low_bit_models import (
    FLOAT8,
    SCALE,
    SHAPE,
    TYPES,
    dequantize_model,
    direct_run,
    float_values,
    low_values,
    needs_exchange,
    one_node_model,
    present,
    quantize_model,
    same_values,
    session_of,
    string_and_int4_model,
    type_ids,
    type_name,
)
from versions import needs_opset

pytestmark = needs_exchange  # (every test exchanges such values with onnxruntime)

# -- inputs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("elem", list(TYPES), ids=type_ids(list(TYPES)))
def test_an_input_of_a_low_bit_type_runs_in_onnxruntime(elem: int) -> None:
    model = dequantize_model(elem)
    x = low_values(elem, SHAPE)
    got = run_model(model, {"x": x})
    assert list(got) == ["y"]
    want = x.astype(np.float32) * np.float32(SCALE)  # what DequantizeLinear computes
    np.testing.assert_array_equal(got["y"], want)
    np.testing.assert_array_equal(got["y"], direct_run(model, {"x": x})[0])
    runner = ModelRunner(ge.graph.load(model))  # a Graph runs alike, many times
    assert runner.backend == "onnxruntime"
    for _ in range(2):
        np.testing.assert_array_equal(runner.run({"x": x})["y"], want)


@pytest.mark.parametrize("elem", present("INT4", "UINT2", "FLOAT8E5M2"),
                         ids=type_ids(present("INT4", "UINT2", "FLOAT8E5M2")))
@pytest.mark.parametrize("shape", [[], [0, 3], [1], [2], [3], [4], [5], [7, 9]],
                         ids=lambda s: str(s))
def test_every_size_of_a_packed_input_reaches_onnxruntime(elem: int, shape: list[int]) -> None:
    model = dequantize_model(elem, shape)
    x = low_values(elem, shape)
    got = run_model(model, {"x": x})["y"]
    assert got.shape == tuple(shape)
    np.testing.assert_array_equal(got, x.astype(np.float32) * np.float32(SCALE))


@pytest.mark.parametrize("elem", list(TYPES), ids=type_ids(list(TYPES)))
def test_generated_inputs_of_a_low_bit_type_are_valid_and_run(elem: int) -> None:
    model = dequantize_model(elem, [64, 16])
    x = generate_inputs(model)["x"]
    assert x.dtype == TYPES[elem][0] and x.shape == (64, 16)
    values = x.astype(np.float64)
    assert np.isfinite(values).all()
    if elem in FLOAT8:
        assert values.min() < 0 < values.max()  # standard normal, in the type
    else:
        info = ml_dtypes.iinfo(TYPES[elem][0])
        assert set(np.unique(values)) == set(range(min(4, int(info.max) + 1)))
    got = run_model(model, {"x": x})["y"]
    np.testing.assert_array_equal(got, direct_run(model, {"x": x})[0])
    np.testing.assert_array_equal(got, values.astype(np.float32) * np.float32(SCALE))


def test_generated_float8e8m0_and_float4_inputs_are_finite() -> None:
    for elem, dtype in ((TensorProto.FLOAT8E8M0, ml_dtypes.float8_e8m0fnu),
                        (TensorProto.FLOAT4E2M1, ml_dtypes.float4_e2m1fn)):
        graph = helper.make_graph([], "g", [helper.make_tensor_value_info("x", elem, [4096])],
                                  [helper.make_tensor_value_info("x", elem, [4096])])
        x = generate_inputs(helper.make_model(graph))["x"]
        values = x.astype(np.float64)
        assert x.dtype == dtype and np.isfinite(values).all()
        if elem == TensorProto.FLOAT8E8M0:  # no sign, no zero: powers of two
            assert set(np.unique(values)) == {0.25, 0.5, 1.0, 2.0, 4.0}
        else:
            assert values.min() < 0 < values.max()


@pytest.mark.parametrize("elem", [TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2,
                                  TensorProto.FLOAT8E5M2FNUZ, TensorProto.INT4,
                                  TensorProto.UINT4],
                         ids=["FLOAT8E4M3FN", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "INT4", "UINT4"])
def test_an_npz_of_low_bit_arrays_is_read_as_the_declared_type(tmp_path: Path,
                                                                elem: int) -> None:
    model = dequantize_model(elem)
    x = low_values(elem, SHAPE)
    path = tmp_path / "x.npz"
    np.savez(path, x=x)  # void bytes for most; float8_e5m2 as '<f1', which np.load refuses
    loaded = load_inputs(path, model)
    same_values(loaded["x"], x)
    np.testing.assert_array_equal(run_model(model, loaded)["y"],
                                  x.astype(np.float32) * np.float32(SCALE))
    np.save(tmp_path / "x.npy", x)  # a .npy for the model's one input
    same_values(load_inputs(tmp_path / "x.npy", model)["x"], x)
    # ... and given to the runner directly, the void array numpy reads is taken too
    if elem != TensorProto.FLOAT8E5M2:
        with np.load(path) as data:
            assert data["x"].dtype.kind == "V"
            np.testing.assert_array_equal(run_model(model, {"x": data["x"]})["y"],
                                          x.astype(np.float32) * np.float32(SCALE))


def test_a_float8_e5m2_file_is_not_read_as_another_float8(tmp_path: Path) -> None:
    """np.savez writes float8_e5m2 as '<f1'; read as void bytes it was taken for a
    float8e4m3fn input's values (448 became 30; trial II): it is read as float8_e5m2, and
    an input of another type refuses it as any other dtype."""
    model = dequantize_model(TensorProto.FLOAT8E4M3FN)
    path = tmp_path / "x.npz"
    np.savez(path, x=low_values(TensorProto.FLOAT8E5M2, SHAPE))
    with pytest.raises(ge.errors.VerificationInputError) as info:
        load_inputs(path, model)
    assert info.value.code == "GE1602"
    assert "input 'x': expected float8_e4m3fn [3, 5], got float8_e5m2 [3, 5]" in str(info.value)


def test_void_bytes_of_another_size_are_still_refused(tmp_path: Path) -> None:
    model = dequantize_model(TensorProto.FLOAT8E4M3FN)
    path = tmp_path / "x.npz"
    np.savez(path, x=np.zeros(SHAPE, ml_dtypes.bfloat16))  # 2 bytes an element
    with pytest.raises(ge.errors.VerificationInputError) as info:
        load_inputs(path, model)
    assert info.value.message == ("inputs do not fit graph 'g': input 'x': expected "
                                  "float8_e4m3fn [3, 5], got void16 [3, 5]")


# -- outputs --------------------------------------------------------------------------------


@pytest.mark.parametrize("elem", list(TYPES), ids=type_ids(list(TYPES)))
def test_an_output_of_a_low_bit_type_comes_back_as_its_ml_dtypes_array(elem: int) -> None:
    model = quantize_model(elem)
    x = float_values(elem, SHAPE)
    got = run_model(model, {"x": x})
    assert list(got) == ["q"]
    want = (x / np.float32(SCALE)).astype(TYPES[elem][0])  # exact: no rounding
    same_values(got["q"], want)
    same_values(got["q"], direct_run(model, {"x": x})[0])
    graph = ge.graph.load(model)
    same_values(ModelRunner(graph).run({"x": x})["q"], want)


@pytest.mark.parametrize("elem", present("INT4", "UINT4", "INT2", "FLOAT8E4M3FNUZ"),
                         ids=type_ids(present("INT4", "UINT4", "INT2", "FLOAT8E4M3FNUZ")))
@pytest.mark.parametrize("shape", [[], [0, 3], [1], [3], [4], [5], [7, 9]],
                         ids=lambda s: str(s))
def test_every_size_of_a_packed_output_is_read(elem: int, shape: list[int]) -> None:
    model = quantize_model(elem, shape)
    x = np.asarray(np.random.default_rng(len(shape)).standard_normal(shape) * 3,
                   dtype=np.float32)
    got = run_model(model, {"x": x})["q"]
    assert got.dtype == TYPES[elem][0] and got.shape == tuple(shape)
    same_values(got, direct_run(model, {"x": x})[0])
    if elem != TensorProto.FLOAT8E4M3FNUZ:  # round half to even, saturate
        info = ml_dtypes.iinfo(TYPES[elem][0])
        want = np.clip(np.rint(x / np.float32(SCALE)), int(info.min), int(info.max))
        np.testing.assert_array_equal(got.astype(np.float32), want)


@needs_opset(24, "float8e8m0 Cast")
def test_float8e8m0_and_float4_pass_through_both_ways() -> None:
    """onnxruntime has kernels for neither in most operators (float4e2m1 none at all), but
    a graph handing its input on as its output runs: the bytes come back unchanged, and
    float8e8m0 goes through Cast (opset 24)."""
    for elem, dtype in ((TensorProto.FLOAT8E8M0, ml_dtypes.float8_e8m0fnu),
                        (TensorProto.FLOAT4E2M1, ml_dtypes.float4_e2m1fn)):
        graph = helper.make_graph([], "g", [helper.make_tensor_value_info("x", elem, [3, 5])],
                                  [helper.make_tensor_value_info("x", elem, [3, 5])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])
        x = generate_inputs(model, seed=3)["x"]
        assert x.dtype == dtype
        same_values(run_model(model, {"x": x})["x"], x)
    powers = np.array([0.25, 1, 2, 64, 2.0 ** -20, 2.0 ** 30], np.float32)
    to = one_node_model(helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E8M0),
                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT8E8M0, [6])], 24)
    scales = run_model(to, {"x": powers})["y"]
    same_values(scales, powers.astype(ml_dtypes.float8_e8m0fnu))
    back = one_node_model(helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT),
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT8E8M0, [6])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6])], 24)
    np.testing.assert_array_equal(run_model(back, {"x": scales})["y"], powers)


def test_a_model_with_low_bit_inputs_and_outputs_and_other_types_runs() -> None:
    """int4 in, float8 and float out, with an int64 and a bool input beside them: every
    input goes to onnxruntime as an OrtValue, every output comes back as its array."""
    nodes = [helper.make_node("DequantizeLinear", ["w", "s", "z4"], ["wf"]),
             helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["wf", "nf"], ["sum"]),
             helper.make_node("Where", ["m", "sum", "nf"], ["y"]),
             helper.make_node("QuantizeLinear", ["y", "s", "z8"], ["q"])]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("w", TensorProto.INT4, [2, 3]),
         helper.make_tensor_value_info("n", TensorProto.INT64, [2, 3]),
         helper.make_tensor_value_info("m", TensorProto.BOOL, [2, 3])],
        [helper.make_tensor_value_info("q", TensorProto.FLOAT8E4M3FN, [2, 3]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        initializer=[numpy_helper.from_array(np.float32(SCALE), "s"),
                     helper.make_tensor("z4", TensorProto.INT4, [], [0]),
                     helper.make_tensor("z8", TensorProto.FLOAT8E4M3FN, [], [0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    feeds = {"w": np.array([[-8, -1, 0], [1, 6, 7]], np.int8).astype(ml_dtypes.int4),
             "n": np.array([[1, 2, 3], [4, 5, 6]], np.int64),
             "m": np.array([[True, False, True], [False, True, True]])}
    got = run_model(model, feeds)
    direct = direct_run(model, feeds)
    y = np.where(feeds["m"], feeds["w"].astype(np.float32) * 0.5 + feeds["n"],
                 feeds["n"]).astype(np.float32)
    np.testing.assert_array_equal(got["y"], y)
    np.testing.assert_array_equal(direct[1], y)
    same_values(got["q"], (y / np.float32(SCALE)).astype(ml_dtypes.float8_e4m3fn))
    same_values(got["q"], direct[0])


def test_outputs_written_to_npz_are_read_back_as_inputs(tmp_path: Path) -> None:
    """What one model quantizes, written with write_npz (as `ge run --output` does), is
    what a model dequantizing it reads (as `--inputs` does)."""
    for elem in (TensorProto.FLOAT8E5M2, TensorProto.INT4):
        x = float_values(elem, SHAPE)
        q = run_model(quantize_model(elem), {"x": x})
        path = tmp_path / f"{type_name(elem)}.npz"
        write_npz(path, q)
        with np.load(path) as data:  # numpy itself reads it (void bytes, not '<f1')
            assert data["q"].dtype == np.dtype("V1")
        assert read_npz(path)["q"].dtype == np.dtype("V1")
        back = run_model(dequantize_model(elem, name="q"), load_inputs(
            path, dequantize_model(elem, name="q")))
        np.testing.assert_array_equal(back["y"], x)


# -- models ge cannot exchange --------------------------------------------------------------


STRING_INT4 = ("ge cannot read output 'q' (int4) of graph 'g' from onnxruntime: onnxruntime "
               "gives that type only through run_with_ort_values, where every input and "
               "output is an OrtValue, and input 'words' (string) cannot be one (onnxruntime "
               "makes OrtValues of numeric tensors only)")


def test_a_low_bit_output_beside_a_string_input_is_refused_before_running() -> None:
    model = string_and_int4_model()
    # onnxruntime itself can run neither way: `run` cannot give int4, and no OrtValue
    # holds strings
    session = session_of(model)
    feeds = {"words": np.array(["a", "bb"]), "x": np.array([1, -2, 3], np.float32)}
    with pytest.raises(Exception, match="No corresponding Numpy type"):
        session.run(None, feeds)
    with pytest.raises(Exception, match="non-string numpy arrays"):
        ort.OrtValue.ortvalue_from_numpy(feeds["words"])
    for given in (model, ge.graph.load(model)):
        with pytest.raises(RuntimeLoadError) as info:
            ModelRunner(given)
        assert isinstance(info.value, SessionError)
        assert info.value.code == "GE1601"
        assert info.value.message == STRING_INT4


def test_a_low_bit_output_beside_a_sequence_output_is_refused_before_running() -> None:
    nodes = [helper.make_node("SequenceConstruct", ["x", "x"], ["seq"]),
             helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_value_info("seq", helper.make_sequence_type_proto(
            helper.make_tensor_type_proto(TensorProto.FLOAT, [3]))),
         helper.make_tensor_value_info("q", TensorProto.FLOAT8E5M2, [3])],
        initializer=[numpy_helper.from_array(np.float32(SCALE), "s"),
                     helper.make_tensor("z", TensorProto.FLOAT8E5M2, [], [0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    with pytest.raises(RuntimeLoadError) as info:
        ModelRunner(model)
    assert info.value.code == "GE1601"
    assert info.value.message == (
        "ge cannot read output 'q' (float8_e5m2) of graph 'g' from onnxruntime: onnxruntime "
        "gives that type only through run_with_ort_values, where every input and output is "
        "an OrtValue, and output 'seq' (seq(tensor(float) [3])) cannot be read from one")


def test_a_low_bit_input_beside_a_string_input_runs() -> None:
    """Inputs alone need no OrtValue path: the int4 one goes as an OrtValue, the string
    one as it is, through onnxruntime's `run`."""
    nodes = [helper.make_node("Identity", ["words"], ["same"]),
             helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"])]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("words", TensorProto.STRING, [2]),
         helper.make_tensor_value_info("x", TensorProto.INT4, [3])],
        [helper.make_tensor_value_info("same", TensorProto.STRING, [2]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        initializer=[numpy_helper.from_array(np.float32(SCALE), "s"),
                     helper.make_tensor("z", TensorProto.INT4, [], [0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    x = np.array([-8, 0, 7], np.int8).astype(ml_dtypes.int4)
    got = run_model(model, {"words": np.array(["a", "bb"]), "x": x})
    assert got["same"].tolist() == ["a", "bb"]
    np.testing.assert_array_equal(got["y"], [-4.0, 0.0, 3.5])


# -- verification ---------------------------------------------------------------------------


@pytest.mark.parametrize("elem", list(TYPES), ids=type_ids(list(TYPES)))
@pytest.mark.parametrize("direction", ["input", "output"])
def test_compile_verifies_a_model_with_low_bit_inputs_or_outputs(elem: int,
                                                                 direction: str) -> None:
    model = dequantize_model(elem) if direction == "input" else quantize_model(elem)
    result = ge.compile(model, verify=True)
    report = result.verification
    assert report is not None and report.ok, report.summary() if report else None
    (out,) = report.outputs
    assert out.compared and out.size == 15
    if direction == "output":
        assert out.expected_dtype == out.actual_dtype == np.dtype(TYPES[elem][0]).name


def test_low_bit_outputs_are_compared_as_numbers() -> None:
    e4 = ml_dtypes.float8_e4m3fn
    expected = np.array([1, 2, 3, -448, 0], np.float32).astype(e4)
    one_step = np.array([1, 2.25, 3, -448, 0], np.float32).astype(e4)  # next float8 up
    report = compare_outputs({"q": expected}, {"q": one_step})
    assert report.ok  # held to float8e4m3fn's precision, not float32's
    (out,) = report.outputs
    assert (out.rtol, out.atol) == (2.0 ** -3, 2.0 ** -9)  # its smallest step
    assert (out.max_abs_diff, out.expected_value, out.actual_value) == (0.25, 2.0, 2.25)
    assert report.summary() == ("ok: 1 output(s) match, max abs diff 0.25 (rtol=0.0001, "
                                "atol=1e-05; float8_e4m3fn at its precision)")
    flipped = np.array([1, 2, 3, 448, 0], np.float32).astype(e4)  # bit 7 is the sign
    report = compare_outputs({"q": expected}, {"q": flipped})
    assert not report.ok and report.outputs[0].max_abs_diff == 896
    # a small value's sign, beside a large one (trial FF: one ulp of 448, 56, let it pass)
    small = np.array([448, 1, -1, 0.5, 0, 20], np.float32).astype(e4)
    wrong = np.array([448, -1, 1, 0.5, 0, 20], np.float32).astype(e4)
    report = compare_outputs({"q": small}, {"q": wrong})
    assert not report.ok and report.outputs[0].mismatches == 2
    # float4: a sign, two steps, 0 for 1 (trial HH: twice the smallest step let them pass);
    # float8e8m0, powers of two: held to the tolerance given
    f4 = ml_dtypes.float4_e2m1fn
    for want, got in (([0.5], [-0.5]), ([6.0], [2.0]), ([0.0], [1.0])):
        report = compare_outputs({"q": np.array(want, np.float32).astype(f4)},
                                 {"q": np.array(got, np.float32).astype(f4)})
        assert not report.ok, (want, got)
    e8 = ml_dtypes.float8_e8m0fnu
    report = compare_outputs({"q": np.array([4.0, 1.0], np.float32).astype(e8)},
                             {"q": np.array([2.0 ** -100, 1.0], np.float32).astype(e8)})
    assert not report.ok and report.outputs[0].mismatches == 1
    # integers exactly: one step of int4 is a difference
    i4 = ml_dtypes.int4
    expected = np.array([-8, -1, 7], np.int8).astype(i4)
    report = compare_outputs({"q": expected}, {"q": np.array([-8, 0, 7], np.int8).astype(i4)})
    assert not report.ok
    assert report.outputs[0].describe() == (
        "output 'q': max abs diff 1, worst at index [1] (expected -1, got 0), 1 of 3 "
        "elements beyond tolerance")
    assert report.as_dict()["outputs"][0]["expected_value"] == -1  # a Python int
    assert compare_outputs({"q": expected}, {"q": expected.copy()}).ok
    # raw bytes in place of the values: a dtype difference, values compared as numbers
    report = compare_outputs({"q": expected}, {"q": expected.view(np.uint8)})
    assert "dtype uint8 instead of int4" in report.outputs[0].reason
    assert report.outputs[0].max_abs_diff == 16  # -8 against its bit pattern 8
