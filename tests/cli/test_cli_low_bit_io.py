"""`ge run` and `ge compile --verify` of models whose graph inputs or outputs are float8 or
int4 (QuantizeLinear / DequantizeLinear at the graph boundary): they run, show the values
and type, read and write them in `.npz` files; a model ge cannot exchange with onnxruntime
is one GE1601 line, and nothing is written."""

from __future__ import annotations

import ctypes
import json
import math
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from cli_helpers import listing, run_ge
from onnx import TensorProto, helper, numpy_helper

from ge.session import generate_inputs

SCALE = 0.5
DTYPES = {TensorProto.FLOAT8E4M3FN: ml_dtypes.float8_e4m3fn,
          TensorProto.FLOAT8E5M2: ml_dtypes.float8_e5m2,
          TensorProto.INT4: ml_dtypes.int4, TensorProto.UINT4: ml_dtypes.uint4}
IDS = ["FLOAT8E4M3FN", "FLOAT8E5M2", "INT4", "UINT4"]


def _boundary_model(path: Path, elem: int, direction: str, name: str | None = None) -> Path:
    """`direction` "in": y = DequantizeLinear(NAME: elem), NAME "x" by default; "out": NAME
    (elem) = QuantizeLinear(x: float), NAME "q" by default; scale 0.5, zero point 0, shape
    [4, 16], opset 21."""
    shape = [4, 16]
    name = name or ("x" if direction == "in" else "q")
    if direction == "in":
        node = helper.make_node("DequantizeLinear", [name, "s", "z"], ["y"], name="dq")
        io = ([helper.make_tensor_value_info(name, elem, shape)],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    else:
        node = helper.make_node("QuantizeLinear", ["x", "s", "z"], [name], name="q")
        io = ([helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
              [helper.make_tensor_value_info(name, elem, shape)])
    graph = helper.make_graph([node], "g", *io, [numpy_helper.from_array(np.float32(SCALE), "s"),
                                                 helper.make_tensor("z", elem, [], [0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.save(model, path)
    return path


def _direct(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """onnxruntime's own run through OrtValues: int4 packed two a byte (low nibble first)
    and float8 as their bytes, by hand."""
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    types = {i.name: i.type.tensor_type.elem_type for i in onnx.load(path).graph.input}
    values = {}
    for name, array in feeds.items():
        elem = types[name]
        if elem in (TensorProto.INT4, TensorProto.UINT4):
            value = ort.OrtValue.ortvalue_from_shape_and_type(list(array.shape), elem)
            nibbles = [int(v) & 15 for v in array.view(np.uint8).reshape(-1)] + [0]
            data = bytes(nibbles[i] | nibbles[i + 1] << 4 for i in range(0, array.size, 2))
            ctypes.memmove(value.data_ptr(), data, len(data))
        elif elem in DTYPES:
            value = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(array.view(np.uint8), elem)
        else:
            value = ort.OrtValue.ortvalue_from_numpy(array)
        values[name] = value
    out = []
    for value in session.run_with_ort_values(None, values):
        elem = value.element_type()
        if elem not in DTYPES:
            out.append(value.numpy())
            continue
        raw = ctypes.string_at(value.data_ptr(), value.tensor_size_in_bytes())
        count = math.prod(value.shape())
        codes = ([(raw[i // 2] >> 4 * (i % 2)) & 15 for i in range(count)]
                 if elem in (TensorProto.INT4, TensorProto.UINT4) else list(raw))
        out.append(np.array(codes, np.uint8).view(DTYPES[elem]).reshape(value.shape()))
    return out


@pytest.mark.parametrize("elem", list(DTYPES), ids=IDS)
def test_run_a_low_bit_input_generated_or_from_npz(tmp_path: Path, elem: int) -> None:
    model = _boundary_model(tmp_path / "dq.onnx", elem, "in")
    code, stdout, stderr = run_ge("run", str(model), "--json")
    assert code == 0, stderr
    data = json.loads(stdout)
    name = np.dtype(DTYPES[elem]).name
    assert data["inputs"] == {"x": {"dtype": name, "shape": [4, 16]}}
    x = generate_inputs(model)["x"]  # what `ge run` generated (seed 0)
    (want,) = _direct(model, {"x": x})
    np.testing.assert_array_equal(want, x.astype(np.float32) * np.float32(SCALE))
    assert data["outputs"]["y"]["values"] == want.reshape(-1)[:6].tolist()
    # the same values saved with np.savez (void bytes; float8_e5m2 as '<f1') and read back
    inputs, output = tmp_path / "x.npz", tmp_path / "y.npz"
    np.savez(inputs, x=x)
    code, stdout, stderr = run_ge("run", str(model), "--inputs", str(inputs),
                                  "--output", str(output))
    assert code == 0, stderr
    assert f"wrote {output}" in stdout
    with np.load(output) as saved:
        np.testing.assert_array_equal(saved["y"], want)


@pytest.mark.parametrize("elem", list(DTYPES), ids=IDS)
def test_run_shows_a_low_bit_output_as_its_type_and_values(
        tmp_path: Path, elem: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the table's row on one line
    model = _boundary_model(tmp_path / "q.onnx", elem, "out")
    x = generate_inputs(model)["x"]
    (want,) = _direct(model, {"x": x})
    assert want.dtype == DTYPES[elem]
    name = np.dtype(DTYPES[elem]).name
    code, stdout, stderr = run_ge("run", str(model), "--json")
    assert code == 0, stderr
    summary = json.loads(stdout)["outputs"]["q"]
    numbers = want.astype(np.float64).reshape(-1)
    assert summary["dtype"] == name and summary["shape"] == [4, 16]
    assert summary["values"] == numbers[:6].tolist()  # the numbers, not the bit patterns
    assert (summary["min"], summary["max"]) == (numbers.min(), numbers.max())
    assert summary["mean"] == pytest.approx(numbers.mean())
    code, stdout, stderr = run_ge("run", str(model))
    assert code == 0, stderr
    row = next(line for line in stdout.splitlines() if name in line)
    shown = ", ".join(f"{v:.6g}" if isinstance(v, float) else str(v)
                      for v in want.reshape(-1)[:6].tolist())
    assert f"[{shown}, …]" in row


def test_quantized_outputs_written_by_run_are_read_by_run(tmp_path: Path) -> None:
    """`ge run --output` writes int4 and float8 outputs as numpy writes them (void bytes:
    float8_e5m2 too, which np.savez would write as '<f1'); `--inputs` reads them back as
    the type the next model declares."""
    for elem in (TensorProto.INT4, TensorProto.FLOAT8E5M2):
        quantize = _boundary_model(tmp_path / "q.onnx", elem, "out")
        dequantize = _boundary_model(tmp_path / "dq.onnx", elem, "in", name="q")
        inputs, between = tmp_path / "x.npz", tmp_path / "q.npz"
        x = (np.arange(64, dtype=np.float32).reshape(4, 16) % 8 - 4) * np.float32(SCALE)
        np.savez(inputs, x=x)
        code, _, stderr = run_ge("run", str(quantize), "--inputs", str(inputs),
                                 "--output", str(between))
        assert code == 0, stderr
        with np.load(between) as saved:
            assert saved["q"].dtype == np.dtype("V1")
            np.testing.assert_array_equal(saved["q"].view(DTYPES[elem]).astype(np.float32),
                                          x / np.float32(SCALE))
        code, stdout, stderr = run_ge("run", str(dequantize), "--inputs", str(between),
                                      "--json")
        assert code == 0, stderr
        assert json.loads(stdout)["outputs"]["y"]["values"] == x.reshape(-1)[:6].tolist()


@pytest.mark.parametrize("elem", list(DTYPES), ids=IDS)
@pytest.mark.parametrize("direction", ["in", "out"])
def test_compile_verify_a_low_bit_boundary(tmp_path: Path, elem: int, direction: str) -> None:
    model = _boundary_model(tmp_path / "m.onnx", elem, direction)
    code, stdout, stderr = run_ge("compile", str(model), "-o", str(tmp_path / "c.onnx"),
                                  "--verify", "--json")
    assert code == 0, stderr
    verification = json.loads(stdout)["verification"]
    assert verification["ok"]
    (out,) = verification["outputs"]
    assert out["compared"] and out["size"] == 64 and out["max_abs_diff"] == 0
    if direction == "out":
        assert out["expected_dtype"] == np.dtype(DTYPES[elem]).name
        if elem in (TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2):  # its precision
            assert out["rtol"] == (2.0 ** -3 if elem == TensorProto.FLOAT8E4M3FN else 0.25)


def test_a_low_bit_output_ge_cannot_read_is_one_line_and_writes_nothing(
        tmp_path: Path) -> None:
    """An int4 output comes from onnxruntime only through run_with_ort_values, and a string
    input cannot go that way: refused before running, without blaming the generated
    inputs, and no output file."""
    nodes = [helper.make_node("Identity", ["words"], ["same"]),
             helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"])]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("words", TensorProto.STRING, [2]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("same", TensorProto.STRING, [2]),
         helper.make_tensor_value_info("q", TensorProto.INT4, [3])],
        initializer=[numpy_helper.from_array(np.float32(SCALE), "s"),
                     helper.make_tensor("z", TensorProto.INT4, [], [0])])
    model = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), model)
    message = ("ge cannot read output 'q' (int4) of graph 'g' from onnxruntime: onnxruntime "
               "gives that type only through run_with_ort_values, where every input and "
               "output is an OrtValue, and input 'words' (string) cannot be one (onnxruntime "
               "makes OrtValues of numeric tensors only)")
    code, stdout, stderr = run_ge("run", str(model), "--output", str(tmp_path / "o.npz"))
    assert (code, stdout, stderr) == (1, "", f"ge: [GE1601] {message}\n")
    code, stdout, _ = run_ge("run", str(model), "--json")
    error = json.loads(stdout)
    assert (code, error["code"], error["type"], error["message"]) == (
        1, "GE1601", "RuntimeLoadError", message)
    code, stdout, stderr = run_ge("compile", str(model), "-o", str(tmp_path / "c.onnx"),
                                  "--verify")
    assert (code, stdout) == (1, "")
    assert stderr == ("ge: [GE1601] the original model (as given, before any pass) cannot "
                      f"be run for the verification: {message}\n")
    assert listing(tmp_path) == ["m.onnx"]
