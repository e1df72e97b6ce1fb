"""`Shape` and `TensorDesc`: what an input or output anchor knows about its tensor.

GE's API, with one extension ONNX needs: a dim may be a `str`, a symbolic dim such as
"batch" (GE has only ints; `-1` is an unknown dim, `[-2]` an unknown rank).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ge.graph.types import DataType, Format

__all__ = ["UNKNOWN_DIM", "UNKNOWN_DIM_NUM", "UNKNOWN_DIM_SIZE", "Dim", "Shape", "TensorDesc"]

UNKNOWN_DIM = -1
UNKNOWN_DIM_NUM = -2
UNKNOWN_DIM_SIZE = -1

Dim = int | str


def _check_dims(dims: Iterable[Any]) -> list[Dim]:
    out: list[Dim] = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, (int, str)):
            from ge.errors import GraphTypeError

            raise GraphTypeError(f"a shape dim must be an int or a symbolic str, got {d!r}")
        out.append(d)
    return out


class Shape(list):
    """A list of dims. `-1` is an unknown dim, `[-2]` an unknown rank, a `str` a symbolic dim."""

    UNKNOWN_DIM = UNKNOWN_DIM
    UNKNOWN_DIM_NUM = UNKNOWN_DIM_NUM
    UNKNOWN_DIM_SIZE = UNKNOWN_DIM_SIZE

    def __init__(self, dims: Iterable[Dim] | None = None) -> None:
        super().__init__(_check_dims(dims) if dims is not None else ())

    def _copy(self) -> Shape:
        """A copy without re-checking dims (they were checked when this shape was made)."""
        other = Shape.__new__(Shape)
        list.extend(other, self)
        return other

    @classmethod
    def unknown_rank(cls) -> Shape:
        """The shape of a tensor whose rank is not known (`[-2]`)."""
        return cls([UNKNOWN_DIM_NUM])

    def get_dims(self) -> list[Dim]:
        return list(self)

    def get_dim_num(self) -> int:
        """The rank, or -1 when the rank is unknown."""
        return -1 if self.is_unknown_rank() else len(self)

    def is_unknown_rank(self) -> bool:
        return len(self) == 1 and self[0] == UNKNOWN_DIM_NUM

    def is_unknown_shape(self) -> bool:
        """True when any dim is unknown or symbolic, or the rank is unknown."""
        return any(isinstance(d, str) or d < 0 for d in self)

    def get_shape_size(self) -> int:
        """Element count: 0 for a scalar (GE's convention), -1 if any dim is not known."""
        if not self:
            return 0
        if self.is_unknown_shape():
            return UNKNOWN_DIM_SIZE
        size = 1
        for d in self:
            size *= int(d)
        return size

    def __repr__(self) -> str:
        return f"Shape({list.__repr__(self)})"


def _as_shape(value: Shape | Iterable[Dim] | None) -> Shape:
    if value is None:
        return Shape()
    if isinstance(value, Shape):
        return Shape(value)
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        from ge.errors import GraphTypeError

        raise GraphTypeError(f"shape must be a Shape or a list of dims, got {type(value).__name__}")
    return Shape(value)


def _check_enum(value: Any, enum: type, what: str) -> Any:
    if not isinstance(value, enum):
        from ge.errors import GraphTypeError

        raise GraphTypeError(f"{what} must be a {enum.__name__}, got {type(value).__name__}")
    return value


class TensorDesc:
    """Shape, data type and format of one tensor, plus GE's origin shape/type/format.

    Origin fields default to the current ones. `Node.get_*_desc` returns a copy; write it
    back with `Node.update_*_desc`. A desc never changes its `Shape` objects in place
    (getters hand out copies, setters store new ones), so copies share them.
    """

    __slots__ = (
        "_data_type",
        "_format",
        "_origin_data_type",
        "_origin_format",
        "_origin_shape",
        "_shape",
        "_source",
        "_source_key",
    )

    def __init__(
        self,
        shape: Shape | Iterable[Dim] | None = None,
        format: Format = Format.FORMAT_ND,
        data_type: DataType = DataType.DT_FLOAT,
    ) -> None:
        self._shape = _as_shape(shape)
        self._format = _check_enum(format, Format, "format")
        self._data_type = _check_enum(data_type, DataType, "data_type")
        self._origin_shape = self._shape  # shared: a desc's shapes are never changed in place
        self._origin_format = self._format
        self._origin_data_type = self._data_type
        # The ONNX ValueInfoProto this desc was read from, and the (shape, dtype) it decoded
        # to: export reuses the original proto while the desc still says the same.
        self._source: Any = None
        self._source_key: Any = None

    @classmethod
    def unknown(cls) -> TensorDesc:
        """A desc that knows nothing: unknown rank, undefined type."""
        return _trusted(Shape([UNKNOWN_DIM_NUM]), Format.FORMAT_ND, DataType.DT_UNDEFINED)

    # -- properties -------------------------------------------------------------------
    @property
    def shape(self) -> Shape:
        return self._shape._copy()

    @shape.setter
    def shape(self, value: Shape | Iterable[Dim]) -> None:
        self._shape = _as_shape(value)

    @property
    def origin_shape(self) -> Shape:
        return self._origin_shape._copy()

    @origin_shape.setter
    def origin_shape(self, value: Shape | Iterable[Dim]) -> None:
        self._origin_shape = _as_shape(value)

    @property
    def format(self) -> Format:
        return self._format

    @format.setter
    def format(self, value: Format) -> None:
        self._format = _check_enum(value, Format, "format")

    @property
    def origin_format(self) -> Format:
        return self._origin_format

    @origin_format.setter
    def origin_format(self, value: Format) -> None:
        self._origin_format = _check_enum(value, Format, "origin_format")

    @property
    def data_type(self) -> DataType:
        return self._data_type

    @data_type.setter
    def data_type(self, value: DataType) -> None:
        self._data_type = _check_enum(value, DataType, "data_type")

    @property
    def origin_data_type(self) -> DataType:
        return self._origin_data_type

    @origin_data_type.setter
    def origin_data_type(self, value: DataType) -> None:
        self._origin_data_type = _check_enum(value, DataType, "origin_data_type")

    # -- GE's getter/setter methods (setters return self for chaining) ------------------
    def get_shape(self) -> Shape:
        return self.shape

    def set_shape(self, shape: Shape | Iterable[Dim]) -> TensorDesc:
        self.shape = shape
        return self

    def get_origin_shape(self) -> Shape:
        return self.origin_shape

    def set_origin_shape(self, shape: Shape | Iterable[Dim]) -> TensorDesc:
        self.origin_shape = shape
        return self

    def get_format(self) -> Format:
        return self._format

    def set_format(self, format: Format) -> TensorDesc:
        self.format = format
        return self

    def get_origin_format(self) -> Format:
        return self._origin_format

    def set_origin_format(self, format: Format) -> TensorDesc:
        self.origin_format = format
        return self

    def get_data_type(self) -> DataType:
        return self._data_type

    def set_data_type(self, data_type: DataType) -> TensorDesc:
        self.data_type = data_type
        return self

    def get_origin_data_type(self) -> DataType:
        return self._origin_data_type

    def set_origin_data_type(self, data_type: DataType) -> TensorDesc:
        self.origin_data_type = data_type
        return self

    # -- value semantics ----------------------------------------------------------------
    def copy(self) -> TensorDesc:
        """An independent copy. It shares the read-only ONNX source it came from and the
        `Shape` objects: a desc never changes its shapes in place (getters hand out copies,
        setters store new ones), so sharing them is safe and saves two lists per copy."""
        other = TensorDesc.__new__(TensorDesc)
        other._shape = self._shape
        other._format = self._format
        other._data_type = self._data_type
        other._origin_shape = self._origin_shape
        other._origin_format = self._origin_format
        other._origin_data_type = self._origin_data_type
        other._source = self._source
        other._source_key = self._source_key
        return other

    def _key(self) -> tuple:
        return (tuple(self._shape), self._data_type)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TensorDesc):
            return NotImplemented
        return (
            self._key() == other._key()
            and self._format == other._format
            and tuple(self._origin_shape) == tuple(other._origin_shape)
            and self._origin_format == other._origin_format
            and self._origin_data_type == other._origin_data_type
        )

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"TensorDesc({format_desc(self)})"


def data_type_name(data_type: DataType) -> str:
    """Short, familiar name of a data type: float32, int64, bfloat16, string..."""
    if data_type == DataType.DT_STRING:
        return "string"
    if data_type == DataType.DT_UNDEFINED:
        return "?"
    try:
        from ge.graph.types import data_type_to_numpy

        return data_type_to_numpy(data_type).name
    except (TypeError, ValueError):
        return data_type.name[3:].lower()


def _trusted(shape: Shape, format: Format, data_type: DataType) -> TensorDesc:
    """A desc of values the IR made itself (a shape of checked dims, enum members): the
    constructor without its checks, for descs decoded or derived in bulk."""
    desc = TensorDesc.__new__(TensorDesc)
    desc._shape = desc._origin_shape = shape
    desc._format = desc._origin_format = format
    desc._data_type = desc._origin_data_type = data_type
    desc._source = desc._source_key = None
    return desc


def format_desc(desc: TensorDesc) -> str:
    """Compact text of a desc for dumps and messages, e.g. `float32[batch,3,224,224]`."""
    shape = desc._shape
    if shape.is_unknown_rank():
        dims = "?"
    else:
        dims = "[" + ",".join("?" if d == UNKNOWN_DIM else str(d) for d in shape) + "]"
    dtype = data_type_name(desc._data_type)
    fmt = "" if desc._format == Format.FORMAT_ND else f" {desc._format.name[7:]}"
    return f"{dtype}{dims}{fmt}"
