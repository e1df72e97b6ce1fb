"""GE's enums (`DataType`, `Format`, `Placement`, `DumpFormat`) and their ONNX counterparts.

Values are GE's, so pass code written for GE compares and prints the same. ONNX element
types GE has no member for get members above `DT_MAX` (documented extensions), so that no
ONNX model loses its types on the way through the IR.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np
import onnx
from onnx import helper

__all__ = [
    "DATA_TYPE_ATTRIBUTES",
    "DataType",
    "DumpFormat",
    "Format",
    "OnnxElementType",
    "Placement",
    "data_type_from_numpy",
    "data_type_from_onnx",
    "data_type_to_numpy",
    "data_type_to_onnx",
    "elem_type_name",
]


class DataType(IntEnum):
    """Element types, with GE's values (`ge.graph.types.DataType`)."""

    # An attribute read back as an ONNX element type (`OnnxElementType`) holds ONNX's
    # numbering, which differs from GE's (ONNX FLOAT is 1, GE's DT_FLOAT16 is 1): comparing
    # the two would answer wrongly without a word, so it raises.
    def __eq__(self, other: object) -> bool:
        if type(other) is OnnxElementType:
            raise _mixed_numberings(other, self)
        return int.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        if type(other) is OnnxElementType:
            raise _mixed_numberings(other, self)
        return int.__ne__(self, other)

    __hash__ = int.__hash__

    DT_FLOAT = 0
    DT_FLOAT16 = 1
    DT_INT8 = 2
    DT_INT32 = 3
    DT_UINT8 = 4
    DT_INT16 = 6
    DT_UINT16 = 7
    DT_UINT32 = 8
    DT_INT64 = 9
    DT_UINT64 = 10
    DT_DOUBLE = 11
    DT_BOOL = 12
    DT_STRING = 13
    DT_DUAL_SUB_INT8 = 14
    DT_DUAL_SUB_UINT8 = 15
    DT_COMPLEX64 = 16
    DT_COMPLEX128 = 17
    DT_QINT8 = 18
    DT_QINT16 = 19
    DT_QINT32 = 20
    DT_QUINT8 = 21
    DT_QUINT16 = 22
    DT_RESOURCE = 23
    DT_STRING_REF = 24
    DT_DUAL = 25
    DT_VARIANT = 26
    DT_BF16 = 27
    DT_UNDEFINED = 28
    DT_INT4 = 29
    DT_UINT1 = 30
    DT_INT2 = 31
    DT_UINT2 = 32
    DT_COMPLEX32 = 33
    DT_HIFLOAT8 = 34
    DT_FLOAT8_E5M2 = 35
    DT_FLOAT8_E4M3FN = 36
    DT_FLOAT8_E8M0 = 37
    DT_FLOAT6_E3M2 = 38
    DT_FLOAT6_E2M3 = 39
    DT_FLOAT4_E2M1 = 40
    DT_FLOAT4_E1M2 = 41
    DT_HIFLOAT4 = 42
    DT_MAX = 43
    # Extensions: ONNX element types GE has no member for.
    DT_FLOAT8_E4M3FNUZ = 1000
    DT_FLOAT8_E5M2FNUZ = 1001
    DT_UINT4 = 1002


class Format(IntEnum):
    """Tensor layouts, with GE's values. ONNX has none; formats live only in the IR."""

    FORMAT_NCHW = 0
    FORMAT_NHWC = 1
    FORMAT_ND = 2
    FORMAT_NC1HWC0 = 3
    FORMAT_FRACTAL_Z = 4
    FORMAT_NC1C0HWPAD = 5
    FORMAT_NHWC1C0 = 6
    FORMAT_FSR_NCHW = 7
    FORMAT_FRACTAL_DECONV = 8
    FORMAT_C1HWNC0 = 9
    FORMAT_FRACTAL_DECONV_TRANSPOSE = 10
    FORMAT_FRACTAL_DECONV_SP_STRIDE_TRANS = 11
    FORMAT_NC1HWC0_C04 = 12
    FORMAT_FRACTAL_Z_C04 = 13
    FORMAT_CHWN = 14
    FORMAT_FRACTAL_DECONV_SP_STRIDE8_TRANS = 15
    FORMAT_HWCN = 16
    FORMAT_NC1KHKWHWC0 = 17
    FORMAT_BN_WEIGHT = 18
    FORMAT_FILTER_HWCK = 19
    FORMAT_HASHTABLE_LOOKUP_LOOKUPS = 20
    FORMAT_HASHTABLE_LOOKUP_KEYS = 21
    FORMAT_HASHTABLE_LOOKUP_VALUE = 22
    FORMAT_HASHTABLE_LOOKUP_OUTPUT = 23
    FORMAT_HASHTABLE_LOOKUP_HITS = 24
    FORMAT_C1HWNCoC0 = 25
    FORMAT_MD = 26
    FORMAT_NDHWC = 27
    FORMAT_FRACTAL_ZZ = 28
    FORMAT_FRACTAL_NZ = 29
    FORMAT_NCDHW = 30
    FORMAT_DHWCN = 31
    FORMAT_NDC1HWC0 = 32
    FORMAT_FRACTAL_Z_3D = 33
    FORMAT_CN = 34
    FORMAT_NC = 35
    FORMAT_DHWNC = 36
    FORMAT_FRACTAL_Z_3D_TRANSPOSE = 37
    FORMAT_FRACTAL_ZN_LSTM = 38
    FORMAT_FRACTAL_Z_G = 39
    FORMAT_RESERVED = 40
    FORMAT_ALL = 41
    FORMAT_NULL = 42
    FORMAT_ND_RNN_BIAS = 43
    FORMAT_FRACTAL_ZN_RNN = 44
    FORMAT_NYUV = 45
    FORMAT_NYUV_A = 46
    FORMAT_NCL = 47
    FORMAT_FRACTAL_Z_WINO = 48
    FORMAT_C1HWC0 = 49
    FORMAT_FRACTAL_NZ_C0_16 = 50
    FORMAT_FRACTAL_NZ_C0_32 = 51
    FORMAT_END = 52
    FORMAT_MAX = 53


class Placement(IntEnum):
    """Where a tensor's data lives (kept for API parity; everything is on the host here)."""

    PLACEMENT_HOST = 0
    PLACEMENT_DEVICE = 1


class DumpFormat(IntEnum):
    """Formats of `Graph.dump_to_stream` / `dump_to_file` (GE's values)."""

    kOnnx = 0
    kTxt = 1
    kReadable = 2


_TP = onnx.TensorProto
_GE_TO_ONNX: dict[DataType, int] = {
    DataType.DT_FLOAT: _TP.FLOAT,
    DataType.DT_UINT8: _TP.UINT8,
    DataType.DT_INT8: _TP.INT8,
    DataType.DT_UINT16: _TP.UINT16,
    DataType.DT_INT16: _TP.INT16,
    DataType.DT_INT32: _TP.INT32,
    DataType.DT_INT64: _TP.INT64,
    DataType.DT_STRING: _TP.STRING,
    DataType.DT_BOOL: _TP.BOOL,
    DataType.DT_FLOAT16: _TP.FLOAT16,
    DataType.DT_DOUBLE: _TP.DOUBLE,
    DataType.DT_UINT32: _TP.UINT32,
    DataType.DT_UINT64: _TP.UINT64,
    DataType.DT_COMPLEX64: _TP.COMPLEX64,
    DataType.DT_COMPLEX128: _TP.COMPLEX128,
    DataType.DT_BF16: _TP.BFLOAT16,
    DataType.DT_FLOAT8_E4M3FN: _TP.FLOAT8E4M3FN,
    DataType.DT_FLOAT8_E4M3FNUZ: _TP.FLOAT8E4M3FNUZ,
    DataType.DT_FLOAT8_E5M2: _TP.FLOAT8E5M2,
    DataType.DT_FLOAT8_E5M2FNUZ: _TP.FLOAT8E5M2FNUZ,
    DataType.DT_UINT4: _TP.UINT4,
    DataType.DT_INT4: _TP.INT4,
    DataType.DT_UNDEFINED: _TP.UNDEFINED,
}
# Element types added in later onnx releases than the oldest one we support.
for _ge_name, _onnx_name in (
    ("DT_FLOAT4_E2M1", "FLOAT4E2M1"),
    ("DT_FLOAT8_E8M0", "FLOAT8E8M0"),
    ("DT_UINT2", "UINT2"),
    ("DT_INT2", "INT2"),
    ("DT_FLOAT6_E2M3", "FLOAT6E2M3"),
    ("DT_FLOAT6_E3M2", "FLOAT6E3M2"),
):
    if hasattr(_TP, _onnx_name):
        _GE_TO_ONNX[DataType[_ge_name]] = getattr(_TP, _onnx_name)
_ONNX_TO_GE: dict[int, DataType] = {v: k for k, v in _GE_TO_ONNX.items()}
_ONNX_NAMES = frozenset(onnx.TensorProto.DataType.values())


class OnnxElementType(int):
    """The value of an attribute that names an element type (Cast's `to`, ...), as ONNX
    stores it: an int with ONNX's numbering, equal to `onnx.TensorProto.FLOAT` and the
    like. Compared with a `DataType` (GE's numbering) it raises `GraphTypeError` rather
    than answering wrongly; `data_type_from_onnx(value)` gives the `DataType`."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DataType):
            raise _mixed_numberings(self, other)
        return int.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        if isinstance(other, DataType):
            raise _mixed_numberings(self, other)
        return int.__ne__(self, other)

    __hash__ = int.__hash__

    def __repr__(self) -> str:
        return int.__repr__(self)


#: The attributes of standard operators that hold an element type; `Node.get_attr` reads
#: them as `OnnxElementType`.
DATA_TYPE_ATTRIBUTES: dict[str, frozenset[str]] = {
    "Cast": frozenset({"to"}),
    "EyeLike": frozenset({"dtype"}),
    "RandomNormal": frozenset({"dtype"}),
    "RandomNormalLike": frozenset({"dtype"}),
    "RandomUniform": frozenset({"dtype"}),
    "RandomUniformLike": frozenset({"dtype"}),
    "Multinomial": frozenset({"dtype"}),
    "Bernoulli": frozenset({"dtype"}),
    "SequenceEmpty": frozenset({"dtype"}),
    "QuantizeLinear": frozenset({"output_dtype"}),
    "DequantizeLinear": frozenset({"output_dtype"}),
}


def _mixed_numberings(value: OnnxElementType, data_type: DataType) -> Exception:
    from ge.errors import GraphTypeError

    name = onnx.TensorProto.DataType.Name(int(value)) if int(value) in _ONNX_NAMES else "?"
    return GraphTypeError(
        f"an attribute holding the ONNX element type {int(value)} ({name}) was compared with "
        f"DataType.{data_type.name} (GE's numbering, {int(data_type)}); compare it with "
        f"onnx.TensorProto.{data_type_onnx_name(data_type)} or convert it: "
        f"ge.graph.data_type_from_onnx(value) == DataType.{data_type.name}")


def data_type_onnx_name(data_type: DataType) -> str:
    """The `onnx.TensorProto` member name of a GE data type ("?" when ONNX has none)."""
    elem = _GE_TO_ONNX.get(data_type)
    return "?" if elem is None else onnx.TensorProto.DataType.Name(elem)


def data_type_to_onnx(data_type: DataType) -> int:
    """The ONNX `TensorProto.DataType` value of a GE data type (`GraphTypeError` if none)."""
    try:
        return _GE_TO_ONNX[data_type]
    except KeyError:
        from ge.errors import GraphTypeError

        raise GraphTypeError(f"{DataType(data_type).name} has no ONNX element type") from None


def data_type_from_onnx(elem_type: int) -> DataType:
    """The GE data type of an ONNX element type (`GraphTypeError` for unknown values)."""
    try:
        return _ONNX_TO_GE[elem_type]
    except KeyError:
        from ge.errors import GraphTypeError

        raise GraphTypeError(f"unknown ONNX element type {elem_type}") from None


def data_type_to_numpy(data_type: DataType) -> np.dtype:
    """The numpy dtype that holds values of `data_type` (ml_dtypes types where numpy has none)."""
    return np.dtype(helper.tensor_dtype_to_np_dtype(data_type_to_onnx(data_type)))


def data_type_from_numpy(dtype: np.dtype | type) -> DataType:
    """The GE data type of a numpy dtype (`GraphTypeError` if ONNX has no such element type)."""
    try:
        return data_type_from_onnx(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))
    except (KeyError, ValueError, TypeError):
        from ge.errors import GraphTypeError

        raise GraphTypeError(f"numpy dtype {np.dtype(dtype)} has no ONNX element type") from None


def elem_type_name(elem_type: int) -> str:
    """How messages and tables name an ONNX element type: numpy's name (`float32`), else
    ONNX's in lower case (`float8e4m3fn`), `string` for strings."""
    if elem_type == onnx.TensorProto.STRING:
        return "string"
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name
    except (KeyError, TypeError, ValueError):
        return onnx.TensorProto.DataType.Name(elem_type).lower()
