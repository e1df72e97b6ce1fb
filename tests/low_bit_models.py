"""Models and by-hand onnxruntime runs shared by the tests of float8, 4-bit and 2-bit graph
inputs and outputs (tests/session/test_low_bit_io.py, tests/cli/test_cli_low_bit_io.py):
what ge does is checked against onnxruntime run directly, its OrtValues packed and unpacked
here by hand, not by ge's code."""

from __future__ import annotations

import ctypes
import math
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from versions import ONNX_OPSET, RUNTIME_OPSET

SCALE = 0.5
#: Whether the installed onnxruntime makes OrtValues of these types from Python (1.19, the
#: floor, does not: ge refuses such models with RuntimeLoadError, test_low_bit_old_runtime).
EXCHANGE = all(hasattr(ort.OrtValue, name)
               for name in ("ortvalue_from_numpy_with_onnx_type", "tensor_size_in_bytes"))
needs_exchange = pytest.mark.skipif(
    not EXCHANGE, reason=f"onnxruntime {ort.__version__} makes no OrtValue of float8, 4-bit "
                         "or 2-bit values from Python (a newer one does)")
#: element type: (ml_dtypes dtype, bits per element in onnxruntime, opset of the Q/DQ model),
#: for the types the installed onnx and onnxruntime have (the floors, onnx and onnxruntime
#: 1.19 at opset 21, have no 2-bit type)
TYPES = {
    TensorProto.FLOAT8E4M3FN: (ml_dtypes.float8_e4m3fn, 8, 21),
    TensorProto.FLOAT8E4M3FNUZ: (ml_dtypes.float8_e4m3fnuz, 8, 21),
    TensorProto.FLOAT8E5M2: (ml_dtypes.float8_e5m2, 8, 21),
    TensorProto.FLOAT8E5M2FNUZ: (ml_dtypes.float8_e5m2fnuz, 8, 21),
    TensorProto.INT4: (ml_dtypes.int4, 4, 21),
    TensorProto.UINT4: (ml_dtypes.uint4, 4, 21),
}
if hasattr(TensorProto, "INT2") and min(ONNX_OPSET, RUNTIME_OPSET) >= 25:
    TYPES[TensorProto.INT2] = (ml_dtypes.int2, 2, 25)
    TYPES[TensorProto.UINT2] = (ml_dtypes.uint2, 2, 25)
FLOAT8 = [t for t, (_, bits, _) in TYPES.items() if bits == 8]


def present(*names: str) -> list[int]:
    """The element types of `names` ("INT4", "UINT2") that `TYPES` has, in that order."""
    return [t for name in names if (t := getattr(TensorProto, name, None)) in TYPES]
SHAPE = [3, 5]  # 15 elements: a 4-bit or 2-bit tensor ends in a partly filled byte


def type_name(elem: int) -> str:
    return str(TensorProto.DataType.Name(elem))


def type_ids(types: list[int]) -> list[str]:
    return [type_name(t) for t in types]


def one_node_model(node: onnx.NodeProto, inputs: list[onnx.ValueInfoProto],
           outputs: list[onnx.ValueInfoProto], opset: int,
           initializers: list[onnx.TensorProto] | None = None) -> onnx.ModelProto:
    graph = helper.make_graph([node], "g", inputs, outputs, initializer=initializers or [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def dequantize_model(elem: int, shape: list[Any] | None = None,
                     name: str = "x") -> onnx.ModelProto:
    """y (float) = DequantizeLinear(NAME: elem, 0.5, 0): an input of type `elem`."""
    shape = SHAPE if shape is None else shape
    return one_node_model(helper.make_node("DequantizeLinear", [name, "s", "z"], ["y"], name="dq"),
                  [helper.make_tensor_value_info(name, elem, shape)],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
                  TYPES[elem][2],
                  [numpy_helper.from_array(np.float32(SCALE), "s"),
                   helper.make_tensor("z", elem, [], [0])])


def quantize_model(elem: int, shape: list[Any] | None = None,
                   name: str = "q") -> onnx.ModelProto:
    """NAME (elem) = QuantizeLinear(x: float, 0.5, 0): an output of type `elem`."""
    shape = SHAPE if shape is None else shape
    return one_node_model(helper.make_node("QuantizeLinear", ["x", "s", "z"], [name], name="q"),
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                  [helper.make_tensor_value_info(name, elem, shape)],
                  TYPES[elem][2],
                  [numpy_helper.from_array(np.float32(SCALE), "s"),
                   helper.make_tensor("z", elem, [], [0])])


# -- onnxruntime run directly, values packed and unpacked by hand ----------------------------


def session_of(model: onnx.ModelProto) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _packed(values: np.ndarray, bits: int) -> bytes:
    """Values (their low `bits` bits) packed 8 // bits a byte, the first in the low bits."""
    per, out = 8 // bits, bytearray()
    flat = [int(v) & ((1 << bits) - 1) for v in values.view(np.uint8).reshape(-1)]
    for start in range(0, len(flat), per):
        out.append(sum(v << (bits * i) for i, v in enumerate(flat[start:start + per])))
    return bytes(out)


def _direct_input(array: np.ndarray, elem: int) -> ort.OrtValue:
    """`array` (ml_dtypes) as an OrtValue of `elem`, made by hand."""
    bits = TYPES[elem][1]
    if bits == 8:
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(array.view(np.uint8), elem)
    value = ort.OrtValue.ortvalue_from_shape_and_type(list(array.shape), elem)
    data = _packed(array, bits)
    assert value.tensor_size_in_bytes() == len(data) == math.ceil(array.size * bits / 8)
    ctypes.memmove(value.data_ptr(), data, len(data))
    return value


def _direct_output(value: ort.OrtValue) -> np.ndarray:
    """The ml_dtypes array an OrtValue of a TYPES type holds, unpacked by hand."""
    dtype, bits, _ = TYPES[value.element_type()]
    shape = value.shape()
    raw = ctypes.string_at(value.data_ptr(), value.tensor_size_in_bytes())
    per, count = 8 // bits, math.prod(shape)
    codes = [(raw[i // per] >> (bits * (i % per))) & ((1 << bits) - 1) for i in range(count)]
    return np.array(codes, dtype=np.uint8).view(dtype).reshape(shape)


def direct_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = session_of(model)
    types = {i.name: i.type.tensor_type.elem_type for i in model.graph.input}
    values = {name: _direct_input(v, types[name]) if types[name] in TYPES
              else ort.OrtValue.ortvalue_from_numpy(v) for name, v in feeds.items()}
    return [_direct_output(v) if v.element_type() in TYPES else v.numpy()
            for v in session.run_with_ort_values(None, values)]


def same_values(got: np.ndarray, want: np.ndarray) -> None:
    """Same dtype, shape and values (bit for bit)."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def float_values(elem: int, shape: list[int]) -> np.ndarray:
    """Floats whose quantization to `elem` (scale 0.5) stays in its range, unrounded."""
    dtype = TYPES[elem][0]
    if elem in FLOAT8:
        base = np.array([0.0, 0.5, -1.25, 3.0, -6.0, 12.0, 0.0625, -0.375], np.float32)
    else:
        info = ml_dtypes.iinfo(dtype)
        base = np.arange(int(info.min), int(info.max) + 1, dtype=np.float32)
    return np.resize(base, shape) * np.float32(SCALE)


def low_values(elem: int, shape: list[int]) -> np.ndarray:
    """Values of `elem` covering its range (negative ones, the extremes)."""
    return (float_values(elem, shape) / np.float32(SCALE)).astype(TYPES[elem][0])


def string_and_int4_model() -> onnx.ModelProto:
    """A string input handed on, beside an int4 output."""
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
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def saved(model: onnx.ModelProto, path: Path) -> Path:
    """`model` written to `path` (ir_version 10, as the CLI tests read it), the path."""
    model.ir_version = 10
    onnx.save(model, path)
    return path
