"""`Tensor`: a constant value (a `Const` node's `value`, a tensor attribute).

A tensor read from ONNX keeps its `TensorProto` and decodes it only when its data is asked
for, so loading and saving a model with large weights copies bytes, not Python objects.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from ge.errors import GraphError, GraphTypeError
from ge.graph.tensor_desc import Shape, TensorDesc, _trusted, data_type_name
from ge.graph.types import (
    DataType,
    Format,
    Placement,
    data_type_from_numpy,
    data_type_from_onnx,
    data_type_to_numpy,
    data_type_to_onnx,
)

__all__ = ["Tensor", "python_array", "string_problem"]

#: The element kind of a Python value, by its type (bool before int: bool is an int).
_KINDS: tuple[tuple[type | tuple[type, ...], str], ...] = (
    ((bool, np.bool_), "bool"), ((int, np.integer), "int"), ((float, np.floating), "float"),
    (str, "str"))
#: The numpy dtype of Python data holding these element kinds (None: refused).
_DTYPES: dict[frozenset[str], Any] = {
    frozenset(): np.float32, frozenset({"bool"}): np.bool_, frozenset({"int"}): np.int64,
    frozenset({"float"}): np.float32, frozenset({"int", "float"}): np.float32,
    frozenset({"str"}): np.str_}


def _kinds(data: Any, kinds: set[str]) -> None:
    """Add the element kinds of `data` (a scalar or nested lists and tuples) to `kinds`."""
    if isinstance(data, (list, tuple)):
        for item in data:
            _kinds(item, kinds)
        return
    for types, kind in _KINDS:
        if isinstance(data, types):
            kinds.add(kind)
            return
    raise GraphTypeError(
        f"a constant's Python value holds bool, int, float or str (or nested lists of one of "
        f"them), got {type(data).__name__}; give a numpy array or a Tensor for other data")


def python_array(data: Any, dtype: Any = None) -> np.ndarray:
    """The array of Python data (a scalar or nested lists), by `ge.es`'s rule unless `dtype`
    says: ints are int64, floats (ints among them too) float32, bools bool, str strings."""
    kinds: set[str] = set()
    _kinds(data, kinds)
    if dtype is None:
        dtype = _DTYPES.get(frozenset(kinds))
        if dtype is None:
            raise GraphTypeError(f"a constant's Python value mixes {' and '.join(sorted(kinds))}"
                                 "; give one kind, or a numpy array of the dtype meant")
    try:
        return np.asarray(data, dtype=dtype)
    except OverflowError as exc:
        raise GraphError(f"a constant's Python value does not fit {np.dtype(dtype)}: {exc}"
                         ) from None
    except ValueError as exc:  # ragged lists, or text given a numeric data_type
        raise GraphError(f"a constant's Python value cannot be made an array of "
                         f"{np.dtype(dtype)}: {exc}") from None


def string_problem(strings: Any) -> str | None:
    """What is wrong with the elements of a string tensor (`str`, or bytes that must be UTF-8
    text: ONNX strings are, and loading, folding and runtimes decode them), None if nothing:
    the one check loading (`ge.graph.onnx_import`) and every Tensor made from an array share."""
    for index, value in enumerate(strings):
        if isinstance(value, (bytes, np.bytes_)):
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                return (f"holds a string that is not UTF-8 text (element {index}: "
                        f"{bytes(value[:16])!r}); ONNX strings are UTF-8")
    return None


class Tensor:
    """A constant tensor: data, data type, shape, format and placement.

    `data_type=None` takes the type from a numpy array, and from Python data as `ge.es`
    does (`python_array`: ints are DT_INT64, floats DT_FLOAT); a `shape` reshapes the data
    and must have the same element count (`ValueError` otherwise).
    """

    __slots__ = ("_array", "_dims", "_dtype", "_format", "_placement", "_proto")

    _dtype: DataType | None  # None until first read from `_proto`
    _dims: list[int] | None

    def __init__(
        self,
        data: Any = None,
        file_path: str | os.PathLike[str] | None = None,
        data_type: DataType | None = None,
        format: Format = Format.FORMAT_ND,
        shape: list[int] | None = None,
        placement: Placement = Placement.PLACEMENT_HOST,
    ) -> None:
        if data_type is not None and not isinstance(data_type, DataType):
            raise GraphTypeError(f"data_type must be a DataType, got {type(data_type).__name__}")
        if not isinstance(format, Format):
            raise GraphTypeError(f"format must be a Format, got {type(format).__name__}")
        if not isinstance(placement, Placement):
            raise GraphTypeError(f"placement must be a Placement, got {type(placement).__name__}")
        if data is not None and file_path is not None:
            raise GraphTypeError("give a Tensor either data or file_path, not both")
        self._format = format
        self._placement = placement
        self._proto: onnx.TensorProto | None = None
        if file_path is not None:
            dtype = data_type_to_numpy(data_type or DataType.DT_FLOAT)
            array = np.fromfile(os.fspath(file_path), dtype=dtype)
        elif isinstance(data, np.ndarray):
            # A copy either way: the caller keeps a writable array that can't change ours.
            array = data.copy() if data_type is None else data.astype(data_type_to_numpy(data_type))
        elif isinstance(data, np.generic):
            array = np.asarray(data)
            if data_type is not None:
                array = array.astype(data_type_to_numpy(data_type))
        elif data is None:
            array = np.zeros((0,), dtype=data_type_to_numpy(data_type or DataType.DT_FLOAT))
        else:
            array = python_array(data, None if data_type is None
                                 else data_type_to_numpy(data_type))
        if array.dtype.kind in "OS":  # (a model holding other bytes is one ge cannot load)
            problem = string_problem(array.reshape(-1).tolist())
            if problem is not None:
                raise GraphTypeError(f"a string tensor {problem}")
        if shape is not None:
            dims = [int(d) for d in shape]
            if int(np.prod(dims, dtype=np.int64)) != array.size:
                raise ValueError(
                    f"Tensor shape {dims} holds {int(np.prod(dims, dtype=np.int64))} elements, "
                    f"data has {array.size}"
                )
            array = array.reshape(dims)
        self._data_type = data_type if data_type is not None else data_type_from_numpy(array.dtype)
        self._shape = list(array.shape)
        array.flags.writeable = False
        self._array: np.ndarray | None = array

    @classmethod
    def from_proto(cls, proto: onnx.TensorProto, dims: list[int] | None = None) -> Tensor:
        """Wrap an ONNX tensor without decoding it (the proto must not be changed afterwards);
        `dims`, the proto's dims as a list when the caller read them already."""
        tensor = cls.__new__(cls)
        tensor._proto = proto
        tensor._array = None
        tensor._dtype = None  # read from the proto when first asked: loading stays cheap
        tensor._dims = dims
        tensor._format = Format.FORMAT_ND
        tensor._placement = Placement.PLACEMENT_HOST
        return tensor

    @property
    def _data_type(self) -> DataType:
        if self._dtype is None:
            assert self._proto is not None
            self._dtype = data_type_from_onnx(self._proto.data_type)
        return self._dtype

    @_data_type.setter
    def _data_type(self, value: DataType) -> None:
        self._dtype = value

    @property
    def _shape(self) -> list[int]:
        if self._dims is None:
            assert self._proto is not None
            self._dims = self._proto.dims[:]  # (a list at once; list() iterates upb's container)
        return self._dims

    @_shape.setter
    def _shape(self, value: list[int]) -> None:
        self._dims = value

    def copy(self) -> Tensor:
        """A tensor of its own with the same metadata, sharing the read-only data."""
        other = Tensor.__new__(Tensor)
        other._array, other._proto = self._array, self._proto
        other._data_type, other._shape = self._data_type, list(self._shape)
        other._format, other._placement = self._format, self._placement
        return other

    def to_proto(self, name: str = "") -> onnx.TensorProto:
        """The ONNX form of this tensor, named `name` (a new message; callers may keep it)."""
        if self._proto is not None:
            proto = onnx.TensorProto()
            proto.CopyFrom(self._proto)
        else:
            proto = numpy_helper.from_array(self.numpy())
            if self._data_type != data_type_from_onnx(proto.data_type):
                proto.data_type = data_type_to_onnx(self._data_type)
        proto.name = name
        return proto

    def _source_proto(self) -> onnx.TensorProto | None:
        """The proto this tensor was read from, if it still holds exactly that value."""
        return self._proto

    # -- data ---------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """The data as a read-only numpy array."""
        if self._array is None:
            assert self._proto is not None
            if self._proto.data_location == onnx.TensorProto.EXTERNAL:
                raise GraphError(
                    f"tensor {self._proto.name!r} refers to external data that was not loaded"
                )
            try:
                array = numpy_helper.to_array(self._proto)
            except (TypeError, ValueError) as exc:  # a corrupt proto: wrong size or type
                raise GraphError(
                    f"tensor {self._proto.name!r} cannot be decoded: {exc}"
                ) from exc
            array.flags.writeable = False
            self._array = array
        return self._array

    def _decode_if_small(self, limit: int) -> bool:
        """Decode now when at most `limit` elements (copies then share the array); whether
        the data is decoded. Undecodable data is left for `numpy()` to report."""
        if self._array is not None:
            return True
        if self.size > limit:
            return False
        try:
            self.numpy()
        except GraphError:
            return False
        return True

    @property
    def data(self) -> Any:
        """A scalar's value, otherwise nested lists (GE's `Tensor.data`)."""
        array = self.numpy()
        return array.item() if array.ndim == 0 else array.tolist()

    def get_data(self) -> Any:
        return self.data

    def tobytes(self) -> bytes:
        """The raw little-endian bytes of the data (used for exact value comparison). A
        string tensor, whose array holds object pointers, gives each string's UTF-8 bytes
        after their length instead: equal strings compare equal, and a pointer a freed
        string leaves behind can never make two different tensors look alike."""
        array = self.numpy()
        if array.dtype.kind not in "OUS":
            return array.tobytes()
        parts: list[bytes] = []
        for item in array.reshape(-1).tolist():
            data = item.encode() if isinstance(item, str) else bytes(item)
            parts += (len(data).to_bytes(8, "little"), data)
        return b"".join(parts)

    @property
    def size(self) -> int:
        """Element count."""
        n = 1
        for d in self._shape:
            n *= d
        return n

    # -- metadata -----------------------------------------------------------------------
    @property
    def data_type(self) -> DataType:
        return self._data_type

    def get_data_type(self) -> DataType:
        return self._data_type

    def set_data_type(self, data_type: DataType) -> Tensor:
        """Convert the data to another element type."""
        if not isinstance(data_type, DataType):
            raise GraphTypeError(f"data_type must be a DataType, got {type(data_type).__name__}")
        if data_type != self._data_type:
            array = self.numpy().astype(data_type_to_numpy(data_type))
            array.flags.writeable = False
            self._array, self._proto, self._data_type = array, None, data_type
        return self

    @property
    def shape(self) -> list[int]:
        return list(self._shape)

    def get_shape(self) -> Shape:
        return Shape(self._shape)

    @property
    def format(self) -> Format:
        return self._format

    def get_format(self) -> Format:
        return self._format

    def set_format(self, format: Format) -> Tensor:
        if not isinstance(format, Format):
            raise GraphTypeError(f"format must be a Format, got {type(format).__name__}")
        self._format = format
        return self

    @property
    def placement(self) -> Placement:
        return self._placement

    def get_placement(self) -> Placement:
        return self._placement

    def to_host(self) -> Tensor:
        self._placement = Placement.PLACEMENT_HOST
        return self

    def to_device(self) -> Tensor:
        self._placement = Placement.PLACEMENT_DEVICE
        return self

    def get_tensor_desc(self) -> TensorDesc:
        shape = Shape.__new__(Shape)  # the tensor's dims are ints already
        list.extend(shape, self._shape)
        return _trusted(shape, self._format, self._data_type)

    # -- comparison and text ------------------------------------------------------------
    def equals(self, other: Tensor) -> bool:
        """Same data type, shape and bytes (no tolerance)."""
        return (
            self._data_type == other._data_type
            and self._shape == other._shape
            and self.tobytes() == other.tobytes()
        )

    def __repr__(self) -> str:
        dtype = data_type_name(self._data_type)
        if self.size <= 8:
            try:
                values = np.array2string(self.numpy(), precision=4, separator=",")
                return f"Tensor({dtype}{self._shape} {values})"
            except GraphError:
                pass
        return f"Tensor({dtype}{self._shape})"
