"""DataType/Format/Placement/DumpFormat values, Shape, TensorDesc and Tensor (spec §5.3–5.5)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from ge.errors import GraphTypeError
from ge.graph import (
    UNKNOWN_DIM,
    UNKNOWN_DIM_NUM,
    UNKNOWN_DIM_SIZE,
    DataType,
    DumpFormat,
    Format,
    Placement,
    Shape,
    Tensor,
    TensorDesc,
)
from ge.graph.types import (
    data_type_from_numpy,
    data_type_from_onnx,
    data_type_to_numpy,
    data_type_to_onnx,
)

# §5.4, verbatim: name (without prefix) and GE value. 5 is reserved in DataType.
DATA_TYPES = (
    "FLOAT 0, FLOAT16 1, INT8 2, INT32 3, UINT8 4, INT16 6, UINT16 7, UINT32 8, INT64 9, "
    "UINT64 10, DOUBLE 11, BOOL 12, STRING 13, DUAL_SUB_INT8 14, DUAL_SUB_UINT8 15, "
    "COMPLEX64 16, COMPLEX128 17, QINT8 18, QINT16 19, QINT32 20, QUINT8 21, QUINT16 22, "
    "RESOURCE 23, STRING_REF 24, DUAL 25, VARIANT 26, BF16 27, UNDEFINED 28, INT4 29, UINT1 30, "
    "INT2 31, UINT2 32, COMPLEX32 33, HIFLOAT8 34, FLOAT8_E5M2 35, FLOAT8_E4M3FN 36, "
    "FLOAT8_E8M0 37, FLOAT6_E3M2 38, FLOAT6_E2M3 39, FLOAT4_E2M1 40, FLOAT4_E1M2 41, "
    "HIFLOAT4 42, MAX 43"
)
FORMATS = (
    "NCHW 0, NHWC 1, ND 2, NC1HWC0 3, FRACTAL_Z 4, NC1C0HWPAD 5, NHWC1C0 6, FSR_NCHW 7, "
    "FRACTAL_DECONV 8, C1HWNC0 9, FRACTAL_DECONV_TRANSPOSE 10, "
    "FRACTAL_DECONV_SP_STRIDE_TRANS 11, NC1HWC0_C04 12, FRACTAL_Z_C04 13, CHWN 14, "
    "FRACTAL_DECONV_SP_STRIDE8_TRANS 15, HWCN 16, NC1KHKWHWC0 17, BN_WEIGHT 18, "
    "FILTER_HWCK 19, HASHTABLE_LOOKUP_LOOKUPS 20, HASHTABLE_LOOKUP_KEYS 21, "
    "HASHTABLE_LOOKUP_VALUE 22, HASHTABLE_LOOKUP_OUTPUT 23, HASHTABLE_LOOKUP_HITS 24, "
    "C1HWNCoC0 25, MD 26, NDHWC 27, FRACTAL_ZZ 28, FRACTAL_NZ 29, NCDHW 30, DHWCN 31, "
    "NDC1HWC0 32, FRACTAL_Z_3D 33, CN 34, NC 35, DHWNC 36, FRACTAL_Z_3D_TRANSPOSE 37, "
    "FRACTAL_ZN_LSTM 38, FRACTAL_Z_G 39, RESERVED 40, ALL 41, NULL 42, ND_RNN_BIAS 43, "
    "FRACTAL_ZN_RNN 44, NYUV 45, NYUV_A 46, NCL 47, FRACTAL_Z_WINO 48, C1HWC0 49, "
    "FRACTAL_NZ_C0_16 50, FRACTAL_NZ_C0_32 51, END 52, MAX 53"
)


def _table(text: str, prefix: str) -> dict[str, int]:
    pairs = (item.strip().rsplit(" ", 1) for item in text.split(","))
    return {prefix + name: int(value) for name, value in pairs}


# -- enums -------------------------------------------------------------------------------------


def test_data_type_values_are_ge_values() -> None:
    """Every DataType member of §5.4 exists with GE's value; 5 stays reserved."""
    expected = _table(DATA_TYPES, "DT_")
    assert {name: DataType[name].value for name in expected} == expected
    assert 5 not in {m.value for m in DataType}
    # Extensions (ONNX types GE lacks) live above DT_MAX so they never collide with GE's.
    extra = {m.name: m.value for m in DataType if m.name not in expected}
    assert all(v > DataType.DT_MAX for v in extra.values()), extra


def test_format_values_are_ge_values() -> None:
    """Format has exactly the members of §5.4 with GE's values."""
    expected = _table(FORMATS, "FORMAT_")
    assert {m.name: m.value for m in Format} == expected


def test_placement_and_dump_format_values() -> None:
    """Placement and DumpFormat have GE's values; the enums are IntEnums."""
    assert {m.name: m.value for m in Placement} == {"PLACEMENT_HOST": 0, "PLACEMENT_DEVICE": 1}
    assert {m.name: m.value for m in DumpFormat} == {"kOnnx": 0, "kTxt": 1, "kReadable": 2}
    assert DataType.DT_INT64 == 9 and isinstance(Format.FORMAT_NCHW, int)


@pytest.mark.parametrize(
    ("ge", "onnx_type", "np_type"),
    [
        (DataType.DT_FLOAT, onnx.TensorProto.FLOAT, np.float32),
        (DataType.DT_FLOAT16, onnx.TensorProto.FLOAT16, np.float16),
        (DataType.DT_DOUBLE, onnx.TensorProto.DOUBLE, np.float64),
        (DataType.DT_INT8, onnx.TensorProto.INT8, np.int8),
        (DataType.DT_INT32, onnx.TensorProto.INT32, np.int32),
        (DataType.DT_INT64, onnx.TensorProto.INT64, np.int64),
        (DataType.DT_UINT8, onnx.TensorProto.UINT8, np.uint8),
        (DataType.DT_BOOL, onnx.TensorProto.BOOL, np.bool_),
    ],
)
def test_data_type_onnx_and_numpy_mappings(ge: DataType, onnx_type: int, np_type: type) -> None:
    """GE data types map both ways to ONNX element types and numpy dtypes."""
    assert data_type_to_onnx(ge) == onnx_type
    assert data_type_from_onnx(onnx_type) is ge
    assert data_type_to_numpy(ge) == np.dtype(np_type)
    assert data_type_from_numpy(np_type) is ge


def test_data_type_without_onnx_counterpart_is_a_type_error() -> None:
    """GE-only types (e.g. DT_QINT8) have no ONNX element type: TypeError, not a wrong one."""
    with pytest.raises(TypeError):
        data_type_to_onnx(DataType.DT_QINT8)
    with pytest.raises(TypeError):
        data_type_from_onnx(12345)


# -- Shape -------------------------------------------------------------------------------------


def test_shape_constants() -> None:
    """UNKNOWN_DIM=-1, UNKNOWN_DIM_NUM=-2, UNKNOWN_DIM_SIZE=-1, also on the class."""
    assert (UNKNOWN_DIM, UNKNOWN_DIM_NUM, UNKNOWN_DIM_SIZE) == (-1, -2, -1)
    assert (Shape.UNKNOWN_DIM, Shape.UNKNOWN_DIM_NUM, Shape.UNKNOWN_DIM_SIZE) == (-1, -2, -1)


@pytest.mark.parametrize(
    ("dims", "size", "unknown"),
    [
        (None, 0, False),  # a scalar: GE's convention is 0
        ([], 0, False),
        ([3], 3, False),
        ([2, 3, 4], 24, False),
        ([2, 0, 4], 0, False),
        ([2, -1, 4], -1, True),
        ([-2], -1, True),  # unknown rank
        (["batch", 3], -1, True),  # a symbolic dim is not known
    ],
)
def test_shape_size_and_unknown(dims: list | None, size: int, unknown: bool) -> None:
    """get_shape_size: 0 for a scalar, -1 if any dim is unknown, else the product."""
    shape = Shape(dims)
    assert shape.get_shape_size() == size
    assert shape.is_unknown_shape() is unknown
    assert isinstance(shape, list) and list(shape) == (dims or [])


def test_shape_symbolic_dims_and_unknown_rank() -> None:
    """Symbolic str dims are kept as given; [-2] is the unknown rank."""
    shape = Shape(["batch", 3, "seq"])
    assert shape.get_dims() == ["batch", 3, "seq"] and shape.get_dim_num() == 3
    assert Shape.unknown_rank() == [-2] and Shape.unknown_rank().is_unknown_rank()
    assert Shape.unknown_rank().get_dim_num() == -1


@pytest.mark.parametrize("bad", [[1.5], [True], [None], [[2]]])
def test_shape_rejects_bad_dims(bad: list) -> None:
    """A dim must be an int or a symbolic str: TypeError otherwise."""
    with pytest.raises(TypeError):
        Shape(bad)


# -- TensorDesc --------------------------------------------------------------------------------


def test_tensor_desc_defaults() -> None:
    """TensorDesc() is a float ND scalar; origin fields default to the current ones."""
    desc = TensorDesc()
    assert desc.shape == [] and isinstance(desc.shape, Shape)
    assert desc.format is Format.FORMAT_ND and desc.data_type is DataType.DT_FLOAT
    assert desc.origin_shape == [] and desc.origin_format is Format.FORMAT_ND
    assert desc.get_origin_data_type() is DataType.DT_FLOAT


def test_tensor_desc_getters_setters_chain() -> None:
    """Setters return self; getters and properties agree; origin fields are independent."""
    desc = TensorDesc(Shape([1, 3, 8, 8]), Format.FORMAT_NCHW, DataType.DT_FLOAT16)
    same = (desc.set_shape([1, 8, 8, 3]).set_format(Format.FORMAT_NHWC)
            .set_data_type(DataType.DT_INT32).set_origin_shape(["n", 3])
            .set_origin_format(Format.FORMAT_NC).set_origin_data_type(DataType.DT_BF16))
    assert same is desc
    assert desc.get_shape() == [1, 8, 8, 3] == desc.shape
    assert desc.get_format() is Format.FORMAT_NHWC is desc.format
    assert desc.get_data_type() is DataType.DT_INT32 is desc.data_type
    assert desc.get_origin_shape() == ["n", 3] == desc.origin_shape
    assert desc.get_origin_format() is Format.FORMAT_NC is desc.origin_format
    assert desc.origin_data_type is DataType.DT_BF16


def test_tensor_desc_shape_is_returned_by_value() -> None:
    """Mutating a returned Shape does not change the desc."""
    desc = TensorDesc([2, 3])
    desc.shape.append(4)
    desc.get_shape()[0] = 9
    assert desc.shape == [2, 3]


@pytest.mark.parametrize(
    "make",
    [
        lambda: TensorDesc([2], 2, DataType.DT_FLOAT),  # int, not a Format
        lambda: TensorDesc([2], Format.FORMAT_ND, 0),  # int, not a DataType
        lambda: TensorDesc([2], DataType.DT_FLOAT, DataType.DT_FLOAT),  # wrong enum
        lambda: TensorDesc([2], Format.FORMAT_ND, Format.FORMAT_ND),
        lambda: TensorDesc("2x3"),
        lambda: TensorDesc(3),
        lambda: TensorDesc().set_format("NCHW"),
        lambda: TensorDesc().set_data_type(1),
        lambda: TensorDesc().set_origin_format(0),
        lambda: TensorDesc().set_origin_data_type(Format.FORMAT_ND),
        lambda: TensorDesc().set_shape([2.0]),
    ],
)
def test_tensor_desc_enforces_types(make) -> None:
    """Enums and shapes are type-checked: TypeError (a GraphTypeError)."""
    with pytest.raises(GraphTypeError) as info:
        make()
    assert isinstance(info.value, TypeError)


def test_tensor_desc_copies_share_nothing_a_caller_can_change() -> None:
    """Copies share their Shape objects internally; no getter or setter of one copy can
    reach the other's shape, origin shape or fields."""
    desc = TensorDesc([2, 3], Format.FORMAT_NCHW, DataType.DT_FLOAT)
    twin = desc.copy()
    twin.get_shape().append(7)
    twin.get_origin_shape()[0] = 9
    twin.shape.clear()
    assert desc.get_shape() == [2, 3] == twin.get_shape()
    assert desc.get_origin_shape() == [2, 3] == twin.get_origin_shape()
    twin.set_origin_shape([5]).set_shape([4, 4])
    assert desc.get_shape() == [2, 3] and desc.get_origin_shape() == [2, 3]
    desc.set_shape([1])
    assert twin.get_shape() == [4, 4] and twin.get_origin_shape() == [5]
    unknown = TensorDesc.unknown()
    unknown.get_shape().append(3)
    assert TensorDesc.unknown().get_shape() == [-2] == unknown.get_shape()


def test_tensor_desc_copy_and_equality() -> None:
    """copy() is independent; == compares every field."""
    desc = TensorDesc([2, 3], Format.FORMAT_NCHW, DataType.DT_INT8)
    twin = desc.copy()
    assert twin == desc and twin is not desc
    twin.set_shape([5])
    assert desc.shape == [2, 3] and twin != desc
    assert desc != TensorDesc([2, 3], Format.FORMAT_NCHW, DataType.DT_INT8).set_origin_shape([6])


# -- Tensor ------------------------------------------------------------------------------------


def test_tensor_from_python_floats_is_float() -> None:
    """Python floats become DT_FLOAT with the nested shape (ints among them too: ge.es's
    rule); data reads back as lists."""
    tensor = Tensor([[1, 2, 3.0], [4, 5, 6]])
    assert tensor.data_type is DataType.DT_FLOAT and tensor.get_data_type() is DataType.DT_FLOAT
    assert tensor.shape == [2, 3] and tensor.get_shape() == Shape([2, 3])
    assert tensor.data == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]] == tensor.get_data()
    assert tensor.format is Format.FORMAT_ND and tensor.placement is Placement.PLACEMENT_HOST


def test_tensor_scalar_data_is_a_value() -> None:
    """A scalar tensor's data is the value itself, not a list."""
    tensor = Tensor(7, data_type=DataType.DT_INT64)
    assert tensor.shape == [] and tensor.data == 7 and isinstance(tensor.data, int)


def test_tensor_from_numpy_keeps_dtype() -> None:
    """A numpy array gives its dtype unless data_type says otherwise (then it converts)."""
    array = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert Tensor(array).data_type is DataType.DT_INT32
    converted = Tensor(array, data_type=DataType.DT_INT64)
    assert converted.data_type is DataType.DT_INT64 and converted.numpy().dtype == np.int64
    assert Tensor(np.float16(1.5)).data_type is DataType.DT_FLOAT16


def test_tensor_shape_reshapes_and_mismatch_is_value_error() -> None:
    """`shape` reshapes data of the same element count; a mismatch is ValueError."""
    tensor = Tensor([1, 2, 3, 4, 5, 6], shape=[3, 2], data_type=DataType.DT_INT32)
    assert tensor.shape == [3, 2] and tensor.data == [[1, 2], [3, 4], [5, 6]]
    with pytest.raises(ValueError):
        Tensor([1, 2, 3], shape=[2, 2])
    with pytest.raises(ValueError):
        Tensor(np.zeros((2, 3)), shape=[5])


def test_tensor_bad_enum_arguments_are_type_errors() -> None:
    """data_type/format/placement must be the enums: TypeError otherwise."""
    with pytest.raises(TypeError):
        Tensor([1.0], data_type=0)
    with pytest.raises(TypeError):
        Tensor([1.0], format=2)
    with pytest.raises(TypeError):
        Tensor([1.0], placement=0)
    with pytest.raises(TypeError):
        Tensor([1.0]).set_data_type("float")


def test_tensor_setters_and_desc() -> None:
    """set_format/set_data_type return self; to_device/to_host move the placement."""
    tensor = Tensor([1.5, 2.5])
    assert tensor.set_format(Format.FORMAT_NCHW) is tensor and tensor.get_format() == 0
    assert tensor.set_data_type(DataType.DT_INT32) is tensor
    assert tensor.data == [1, 2] and tensor.numpy().dtype == np.int32
    assert tensor.to_device() is tensor and tensor.get_placement() is Placement.PLACEMENT_DEVICE
    assert tensor.to_host().placement is Placement.PLACEMENT_HOST
    desc = tensor.get_tensor_desc()
    assert (desc.shape, desc.format, desc.data_type) == ([2], Format.FORMAT_NCHW,
                                                         DataType.DT_INT32)


def test_tensor_data_is_read_only_and_does_not_alias_the_callers_array() -> None:
    """The tensor's data can't be written through numpy(), and the caller's array stays
    the caller's: still writable, and writing it does not change the tensor."""
    array = np.zeros(3, dtype=np.float32)
    tensor = Tensor(array)
    with pytest.raises(ValueError):
        tensor.numpy()[0] = 1.0
    array[0] = 5.0  # the caller's array is not frozen by handing it to a Tensor
    assert tensor.data == [0.0, 0.0, 0.0]


def test_tensor_from_file(tmp_path) -> None:
    """file_path reads raw data of data_type; data and file_path together is a TypeError."""
    path = tmp_path / "w.bin"
    np.arange(4, dtype=np.int32).tofile(path)
    tensor = Tensor(file_path=path, data_type=DataType.DT_INT32, shape=[2, 2])
    assert tensor.data == [[0, 1], [2, 3]]
    with pytest.raises(TypeError):
        Tensor([1], file_path=path)


def test_tensor_proto_round_trip() -> None:
    """to_proto/from_proto keep type, shape and bytes."""
    tensor = Tensor(np.arange(6, dtype=np.int64).reshape(3, 2))
    back = Tensor.from_proto(tensor.to_proto("w"))
    assert back.equals(tensor) and back.data_type is DataType.DT_INT64
    assert not back.equals(Tensor(np.arange(6, dtype=np.int32).reshape(3, 2)))
