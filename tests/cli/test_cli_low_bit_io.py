"""`ge run` and `ge compile --verify` of models whose graph inputs or outputs are float8 or
int4 (QuantizeLinear / DequantizeLinear at the graph boundary): they run, show the values
and type, read and write them in `.npz` files; a model ge cannot exchange with onnxruntime
is one GE1601 line, and nothing is written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from cli_helpers import listing, run_ge
from onnx import TensorProto

from ge.session import generate_inputs
from low_bit_models import (
    SCALE,
    TYPES,
    dequantize_model,
    direct_run,
    needs_exchange,
    quantize_model,
    saved,
    string_and_int4_model,
    type_ids,
)

pytestmark = needs_exchange  # (every test exchanges such values with onnxruntime)

#: The types these tests run through the CLI (every type runs in tests/session).
ELEMS = [TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2, TensorProto.INT4, TensorProto.UINT4]
SIZE = [4, 16]


def _boundary_model(path: Path, elem: int, direction: str, name: str | None = None) -> Path:
    """`direction` "in": `dequantize_model`, "out": `quantize_model`, of shape [4, 16],
    saved at `path`."""
    made = (dequantize_model(elem, SIZE, name or "x") if direction == "in"
            else quantize_model(elem, SIZE, name or "q"))
    return saved(made, path)


def _direct(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return direct_run(onnx.load(path), feeds)


def _dtype(elem: int) -> Any:
    return TYPES[elem][0]


@pytest.mark.parametrize("elem", ELEMS, ids=type_ids(ELEMS))
def test_run_a_low_bit_input_generated_or_from_npz(tmp_path: Path, elem: int) -> None:
    model = _boundary_model(tmp_path / "dq.onnx", elem, "in")
    code, stdout, stderr = run_ge("run", str(model), "--json")
    assert code == 0, stderr
    data = json.loads(stdout)
    name = np.dtype(_dtype(elem)).name
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


@pytest.mark.parametrize("elem", ELEMS, ids=type_ids(ELEMS))
def test_run_shows_a_low_bit_output_as_its_type_and_values(
        tmp_path: Path, elem: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the table's row on one line
    model = _boundary_model(tmp_path / "q.onnx", elem, "out")
    x = generate_inputs(model)["x"]
    (want,) = _direct(model, {"x": x})
    assert want.dtype == _dtype(elem)
    name = np.dtype(_dtype(elem)).name
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
            np.testing.assert_array_equal(saved["q"].view(_dtype(elem)).astype(np.float32),
                                          x / np.float32(SCALE))
        code, stdout, stderr = run_ge("run", str(dequantize), "--inputs", str(between),
                                      "--json")
        assert code == 0, stderr
        assert json.loads(stdout)["outputs"]["y"]["values"] == x.reshape(-1)[:6].tolist()


@pytest.mark.parametrize("elem", ELEMS, ids=type_ids(ELEMS))
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
        assert out["expected_dtype"] == np.dtype(_dtype(elem)).name
        if elem in (TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2):  # its precision
            assert out["rtol"] == (2.0 ** -3 if elem == TensorProto.FLOAT8E4M3FN else 0.25)


def test_a_low_bit_output_ge_cannot_read_is_one_line_and_writes_nothing(
        tmp_path: Path) -> None:
    """An int4 output comes from onnxruntime only through run_with_ort_values, and a string
    input cannot go that way: refused before running, without blaming the generated
    inputs, and no output file."""
    model = saved(string_and_int4_model(), tmp_path / "m.onnx")
    message = ("ge cannot read output 'q' (int4) of graph 'g' from onnxruntime: onnxruntime "
               "gives that type only through run_with_ort_values, where every input and "
               "output is an OrtValue, and input 'words' (string) cannot be one (onnxruntime "
               "makes OrtValues of numeric tensors only)")
    code, stdout, stderr = run_ge("run", str(model), "--output", str(tmp_path / "o.npz"))
    assert (code, stdout, stderr) == (1, "", f"ge: [GE1601] {model}: {message}\n")
    code, stdout, _ = run_ge("run", str(model), "--json")
    error = json.loads(stdout)
    assert (code, error["code"], error["type"], error["message"], error["path"]) == (
        1, "GE1601", "RuntimeLoadError", f"{model}: {message}", str(model))
    code, stdout, stderr = run_ge("compile", str(model), "-o", str(tmp_path / "c.onnx"),
                                  "--verify")
    assert (code, stdout) == (1, "")
    assert stderr == (f"ge: [GE1601] {model}: the original model (as given, before any pass) "
                      f"cannot be run for the verification: {message}\n")
    assert listing(tmp_path) == ["m.onnx"]
