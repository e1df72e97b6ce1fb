"""Element types numpy holds only through `ml_dtypes` (bfloat16, float8, 4-bit, 2-bit,
float6) and how ge exchanges the low-bit ones with onnxruntime.

ge holds values of these types as `ml_dtypes` arrays, one byte per element (a 4-bit or
2-bit element in the low bits of its byte), as onnx's `numpy_helper` gives them.
onnxruntime's plain Python API neither takes such arrays ("Numpy_type 259 can't be converted
to MLDataType") nor gives them back ("No corresponding Numpy type for Tensor Type. Int4x2";
a float8e4m3fn output comes back as uint8, the other float8 types not at all). They go
through `OrtValue`s instead, whose layout was established against onnxruntime 1.32:

- a float8 tensor (FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ, FLOAT8E8M0)
  is one byte per element, the bytes ml_dtypes holds: `ortvalue_from_numpy_with_onnx_type`
  of the array viewed as uint8 wraps it without a copy;
- a 4-bit tensor (INT4, UINT4, FLOAT4E2M1) is packed two elements a byte, the first in the
  low nibble, `ceil(n / 2)` bytes (`tensor_size_in_bytes`); a 2-bit one (INT2, UINT2) four
  a byte, the first in the lowest two bits, `ceil(n / 4)` bytes. Such a tensor is made with
  `ortvalue_from_shape_and_type(shape, onnx_type)` and its bytes written at `data_ptr()`.
  (`ortvalue_from_numpy_with_onnx_type` of an ml_dtypes int4 array takes the array's shape
  but reads its first `ceil(n / 2)` bytes as packed pairs: the values come out wrong.)
- an output of any of these types is read from its `OrtValue`: `tensor_size_in_bytes()`
  bytes at `data_ptr()`, unpacked into an ml_dtypes array of its `shape()`
  (`OrtValue.numpy()` fails as `run` does).

FLOAT6E2M3 and FLOAT6E3M2 are not here: onnxruntime does not know them (a model with them
does not load).
"""

from __future__ import annotations

import ast
import ctypes
import math
from typing import IO, Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from ge.errors import RuntimeLoadError, SessionError
from ge.graph.types import elem_type_name
from ge.session.values import ValueType

__all__ = [
    "LOW_BIT_TYPES",
    "ML_DTYPES",
    "as_ort_value",
    "check_ort_values",
    "elem_type",
    "from_ort_value",
    "is_low_bit",
    "is_ml_number",
    "output_array",
    "read_one_byte_floats",
    "restored",
    "storable",
    "to_ort_value",
]


def _types(*names: str) -> dict[int, int]:
    """{ONNX element type: bits per element} of the types the installed onnx has."""
    out = {}
    for name in names:
        bits = 8 if name.startswith("FLOAT8") else 2 if name.endswith("INT2") else 4
        if hasattr(TensorProto, name):
            out[getattr(TensorProto, name)] = bits
    return out


#: The element types ge exchanges with onnxruntime as OrtValues, with their bits per element.
LOW_BIT_TYPES: dict[int, int] = _types(
    "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "FLOAT8E8M0",
    "INT4", "UINT4", "FLOAT4E2M1", "INT2", "UINT2")


def _ml_dtypes() -> dict[np.dtype[Any], int]:
    """{numpy dtype: ONNX element type} of every type numpy holds through ml_dtypes."""
    out: dict[np.dtype[Any], int] = {}
    for name in ("BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
                 "FLOAT8E5M2FNUZ", "FLOAT8E8M0", "INT4", "UINT4", "FLOAT4E2M1", "INT2",
                 "UINT2", "FLOAT6E2M3", "FLOAT6E3M2"):
        elem = getattr(TensorProto, name, None)
        if elem is None:
            continue
        try:
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(elem))
        except (KeyError, TypeError, ValueError):
            continue
        out[dtype] = elem
    return out


#: The ml_dtypes dtypes (bfloat16, float8, 4-bit, 2-bit, float6) by their ONNX type.
ML_DTYPES: dict[np.dtype[Any], int] = _ml_dtypes()


def is_ml_number(dtype: np.dtype[Any]) -> bool:
    """Whether `dtype` is one of the number types of `ML_DTYPES` (ml_dtypes' own: numpy
    calls most of them void, kind 'V', and float8_e5m2 a float)."""
    return dtype in ML_DTYPES


# -- values read from files -----------------------------------------------------------------


def restored(value: Any, elem_type: int) -> Any:
    """`value` as the ml_dtypes array of `elem_type` it was saved from, when it is the void
    array numpy reads back from a file of one (`np.savez` writes ml_dtypes arrays as `|V1`,
    bfloat16 as `|V2`) with the bytes per element of that type; anything else unchanged."""
    if (not isinstance(value, np.ndarray) or value.dtype.kind != "V"
            or value.dtype.names is not None or value.dtype.subdtype is not None):
        return value
    try:
        want = np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        return value
    if want not in ML_DTYPES or want == value.dtype or want.itemsize != value.dtype.itemsize:
        return value
    return value.view(want)


def storable(array: np.ndarray) -> np.ndarray:
    """An ml_dtypes array as a file can hold it: viewed as void bytes (numpy writes
    float8_e5m2 as `<f1`, which numpy itself then refuses to read); others unchanged."""
    if array.dtype in ML_DTYPES:
        return array.view(np.dtype(f"V{array.dtype.itemsize}"))
    return array


def read_one_byte_floats(stream: IO[bytes]) -> np.ndarray | None:
    """The array of a `.npy` stream whose header says `<f1` (an ml_dtypes float8_e5m2
    array saved by `np.save`: numpy writes that descr, the only 1-byte float it writes so,
    and cannot read it back) as the float8_e5m2 array it is: an input of another type is
    then refused as any other dtype (trial II: read as void bytes, it became float8e4m3fn
    values, 448 as 30); None for any other header (read it with numpy)."""
    version = np.lib.format.read_magic(stream)
    length = int.from_bytes(stream.read(2 if version == (1, 0) else 4), "little")
    try:
        header = ast.literal_eval(stream.read(length).decode("latin1"))
    except (ValueError, SyntaxError):
        return None
    if not isinstance(header, dict) or header.get("descr") not in ("<f1", "|f1", ">f1"):
        return None
    shape = tuple(header.get("shape", ()))
    data = bytearray(stream.read(math.prod(shape)))
    if len(data) != math.prod(shape):
        return None
    import ml_dtypes

    array = np.frombuffer(data, dtype=ml_dtypes.float8_e5m2)
    return array.reshape(shape, order="F") if header.get("fortran_order") else \
        array.reshape(shape)


# -- exchanging them with onnxruntime -------------------------------------------------------


def _memory(address: int, size: int) -> np.ndarray:
    """The `size` bytes at `address` (an OrtValue's data, alive while it is used) as a
    uint8 array over them, not a copy."""
    return np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(address))


def to_ort_value(array: np.ndarray, elem_type: int) -> Any:
    """An onnxruntime OrtValue of element type `elem_type` (in `LOW_BIT_TYPES`) holding
    `array` (an ml_dtypes array of that type): a float8 array wrapped without a copy (the
    OrtValue keeps it alive), a 4-bit or 2-bit one packed into a tensor onnxruntime
    allocates."""
    import onnxruntime as ort

    bits = LOW_BIT_TYPES[elem_type]
    array = np.asarray(array, order="C")
    raw = array.view(np.uint8)
    if bits == 8:
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(raw, elem_type)
    value = ort.OrtValue.ortvalue_from_shape_and_type(list(array.shape), elem_type)
    per = 8 // bits
    size = -(-array.size // per)
    if value.tensor_size_in_bytes() != size:  # not the layout this module was written for
        raise RuntimeError(f"onnxruntime holds {array.size} {_onnx_name(elem_type)} "
                           f"elements in {value.tensor_size_in_bytes()} bytes, not {size}")
    if size:
        _pack(raw.reshape(-1), bits, _memory(value.data_ptr(), size))
    return value


def _pack(flat: np.ndarray, bits: int, out: np.ndarray) -> None:
    """Pack the low `bits` bits of each byte of `flat` into `out`, `8 // bits` a byte, the
    first element in the lowest bits."""
    per, mask = 8 // bits, (1 << bits) - 1
    full = flat.size // per
    body = flat[:full * per].reshape(full, per)
    np.bitwise_and(body[:, 0], mask, out=out[:full])
    for i in range(1, per):
        out[:full] |= (body[:, i] & mask) << (bits * i)
    rest = flat[full * per:]
    if rest.size:
        out[full] = sum((int(b) & mask) << (bits * i) for i, b in enumerate(rest))


def from_ort_value(value: Any) -> np.ndarray:
    """The ml_dtypes array an OrtValue tensor of a `LOW_BIT_TYPES` type holds (a copy: the
    OrtValue may go)."""
    elem_type = value.element_type()
    bits = LOW_BIT_TYPES[elem_type]
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    shape = tuple(value.shape())
    count = math.prod(shape)
    size = value.tensor_size_in_bytes()
    per = 8 // bits
    if size != -(-count // per):
        raise RuntimeError(f"onnxruntime gave {count} {_onnx_name(elem_type)} elements in "
                           f"{size} bytes, not {-(-count // per)}")
    out = np.empty(count, dtype=np.uint8)
    if count:
        data = _memory(value.data_ptr(), size)
        if bits == 8:
            out[...] = data
        else:
            mask = (1 << bits) - 1
            full = count // per
            body = out[:full * per].reshape(full, per)
            for i in range(per):
                np.bitwise_and(data[:full] >> (bits * i), mask, out=body[:, i])
            for i in range(count - full * per):
                out[full * per + i] = (int(data[full]) >> (bits * i)) & mask
    return out.view(dtype).reshape(shape)


def elem_type(vtype: onnx.TypeProto) -> int:
    """The element type of a tensor type, 0 for anything else."""
    return vtype.tensor_type.elem_type if vtype.WhichOneof("value") == "tensor_type" else 0


def _type_text(vtype: onnx.TypeProto) -> str:
    """An input's or output's type for a message: `int4`, `string`, `seq(tensor(float))`."""
    if vtype.WhichOneof("value") == "tensor_type":
        return elem_type_name(vtype.tensor_type.elem_type)
    return ValueType.from_proto(vtype).text()


#: What onnxruntime's `OrtValue` must have for ge to exchange these values with it (1.19,
#: the oldest onnxruntime ge supports, has neither: it makes no OrtValue of these types).
_ORT_VALUE_API = ("ortvalue_from_numpy_with_onnx_type", "tensor_size_in_bytes")


def check_ort_values(proto: onnx.ModelProto) -> bool:
    """Whether `proto`'s outputs include a float8, 4-bit or 2-bit one (it then runs with
    `run_with_ort_values`); RuntimeLoadError, before anything runs, for such an input or
    output the installed onnxruntime cannot exchange with Python (its OrtValue lacks what
    `_ORT_VALUE_API` names), and for such an output beside what `run_with_ort_values`
    cannot carry: onnxruntime makes no OrtValue of a string, sequence, map or optional
    input, and ge reads no such output from one."""
    import onnxruntime as ort

    boundary = [*(("input", i) for i in proto.graph.input),
                *(("output", o) for o in proto.graph.output)]
    first = next(((role, v) for role, v in boundary if elem_type(v.type) in LOW_BIT_TYPES),
                 None)
    if first is None:
        return False
    missing = [name for name in _ORT_VALUE_API if not hasattr(ort.OrtValue, name)]
    if missing:
        role, value = first
        raise RuntimeLoadError(
            f"onnxruntime {ort.__version__} cannot exchange {role} {value.name!r} "
            f"({_type_text(value.type)}) of graph {proto.graph.name!r} with Python: its "
            f"OrtValue has no {' or '.join(missing)} (a newer onnxruntime has them)")
    low = next((o for o in proto.graph.output if elem_type(o.type) in LOW_BIT_TYPES), None)
    if low is None:
        return False
    why = next((f"input {i.name!r} ({_type_text(i.type)}) cannot be one (onnxruntime makes "
                "OrtValues of numeric tensors only)"
                for i in proto.graph.input
                if i.type.WhichOneof("value") not in (None, "tensor_type")
                or elem_type(i.type) == TensorProto.STRING), None)
    why = why or next((f"output {o.name!r} ({_type_text(o.type)}) cannot be read from one"
                       for o in proto.graph.output
                       if o.type.WhichOneof("value") not in (None, "tensor_type")), None)
    if why:
        raise RuntimeLoadError(
            f"ge cannot read output {low.name!r} ({_type_text(low.type)}) of graph "
            f"{proto.graph.name!r} from onnxruntime: onnxruntime gives that type only "
            f"through run_with_ort_values, where every input and output is an OrtValue, and "
            f"{why}")
    return True


def is_low_bit(value: Any) -> bool:
    """Whether `value` is an array of a float8, 4-bit or 2-bit type."""
    return isinstance(value, np.ndarray) and ML_DTYPES.get(value.dtype) in LOW_BIT_TYPES


def as_ort_value(value: Any) -> Any:
    """An input as an onnxruntime OrtValue: a float8, 4-bit or 2-bit array in onnxruntime's
    layout, another one over the array's own memory."""
    if is_low_bit(value):
        return to_ort_value(value, ML_DTYPES[value.dtype])
    import onnxruntime as ort

    return ort.OrtValue.ortvalue_from_numpy(value)


def output_array(name: str, value: Any) -> Any:
    """An output OrtValue as the array it holds (a float8, 4-bit or 2-bit one as the
    ml_dtypes array of its type)."""
    if not value.is_tensor():
        raise SessionError(f"output {name!r} is {value.data_type()}, which ge cannot read "
                           "from an onnxruntime OrtValue")
    if value.element_type() in LOW_BIT_TYPES:
        return from_ort_value(value)
    return value.numpy()


def _onnx_name(elem_type: int) -> str:
    return str(TensorProto.DataType.Name(elem_type)).lower()
