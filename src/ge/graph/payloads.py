"""Saving large tensors without copying them into the model proto.

Serializing a model with protobuf copies every weight twice beside the graph's own copy:
into the `ModelProto` being written, then into its serialized bytes (upb builds the whole
payload in its arena, then copies it into a Python `bytes`). `save` instead writes each
large `raw_data` as a placeholder (a per-save random marker and an index) into a small
model proto, serializes that, and writes the file by walking the small serialization:
every field leading to a placeholder gets its length recomputed, and the placeholder its
real bytes, read from the graph's tensor when the file is written. The file is the same,
byte for byte, as serializing the full model (protobuf writes known fields in field-number
order and submessages the same wherever they are), but only one tensor at a time is
copied.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import BinaryIO, TypeVar

import onnx
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message

from ge.errors import GraphError
from ge.graph.external_data import iter_tensors, packed_bytes
from ge.graph.node import Node
from ge.graph.payload_checks import payload_nbytes
from ge.graph.tensor import Tensor

__all__ = ["MIN_SPLICED_BYTES", "PayloadStore", "SplicedModel", "compact", "payload_nbytes",
           "proto_nbytes"]

M = TypeVar("M", bound=Message)

#: Tensors of fewer payload bytes are written into the model proto as before: below this,
#: a copy costs less than the placeholder's bookkeeping.
MIN_SPLICED_BYTES = 4096

_MARKER_BYTES = 16
_INDEX_BYTES = 8
_RAW_DATA = onnx.TensorProto.DESCRIPTOR.fields_by_name["raw_data"].number
_TENSOR = onnx.TensorProto.DESCRIPTOR
_TENSOR_ATTR = onnx.AttributeProto.TENSOR
_LENGTH_DELIMITED = 2


def proto_nbytes(proto: onnx.TensorProto) -> int | None:
    """Payload bytes of a tensor from its dims and element size, without reading the
    payload (a `bytes` field is copied when read); None for element types of no fixed size."""
    return payload_nbytes(proto.data_type, proto.dims[:])  # (a list at once: see payload_checks)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at `pos` and the position after it."""
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


# A piece of the file: a range of the small serialization, new bytes (tags' lengths), or
# the index of a payload.
Piece = tuple[int, int] | bytes | int


@dataclass
class SplicedModel:
    """How to write a model from its serialization with placeholders: the pieces in order
    and the size of the file they make."""

    data: bytes
    pieces: list[Piece] = field(default_factory=list)
    size: int = 0


class PayloadStore:
    """The large tensors of one save that stay out of the model proto, and the writing of
    the file that puts them back: the export writes placeholders (`initializer`,
    `constant`, `default`), `layout` plans the file from the small proto's serialization,
    `write` writes it."""

    def __init__(self, min_bytes: int = MIN_SPLICED_BYTES) -> None:
        self.min_bytes = min_bytes
        self._marker = os.urandom(_MARKER_BYTES)  # never found in what a user wrote
        self._sources: list[onnx.TensorProto | Tensor | None] = []  # None: taken
        self._lengths: list[int] = []

    def takes(self, tensor: Tensor) -> bool:
        """Whether `tensor` is written as a placeholder: a large one whose ONNX form holds
        its payload in `raw_data` (typed fields and strings are written as before; a tensor
        made in memory is written by `to_proto`, whose `raw_data` holds every type but
        strings)."""
        source = tensor._source_proto()
        if source is not None:
            return self.takes_proto(source, tensor._shape)
        array = tensor.numpy()
        return array.dtype.kind not in "OUS" and array.nbytes >= self.min_bytes

    def takes_proto(self, proto: onnx.TensorProto, dims: list[int] | None = None) -> bool:
        """`takes` for a tensor proto of the graph (an initializer kept as read); `dims`, its
        dims when known (a tensor's, read when it was loaded)."""
        size = (proto_nbytes(proto) if dims is None
                else payload_nbytes(proto.data_type, dims))
        return (size is not None and size >= self.min_bytes
                and proto.data_location != onnx.TensorProto.EXTERNAL
                and proto.HasField("raw_data"))

    def _register(self, source: onnx.TensorProto | Tensor) -> bytes:
        """The placeholder of a new payload, read from `source` when the file is written.
        Its length is taken now, before the caller copies the tensor into the message
        being built: reading a `bytes` field copies it, and one copy at a time is the aim."""
        self._lengths.append(memoryview(self._bytes_of(source)).nbytes)
        self._sources.append(source)
        return self._marker + (len(self._sources) - 1).to_bytes(_INDEX_BYTES, "little")

    @staticmethod
    def _bytes_of(source: onnx.TensorProto | Tensor) -> bytes | memoryview:
        if isinstance(source, onnx.TensorProto):
            return source.raw_data
        return packed_bytes(source.numpy())  # what `to_proto` puts into raw_data

    def initializer(self, tensor: Tensor, name: str) -> onnx.TensorProto:
        """The initializer the export writes for `tensor` (the proto it was read from, or
        its `to_proto(name)`), its `raw_data` a placeholder; for a tensor it `takes`."""
        source = tensor._source_proto()
        placeholder = self._register(source if source is not None else tensor)
        if source is not None and source.name == name:
            proto = onnx.TensorProto()
            proto.CopyFrom(source)
        else:
            proto = tensor.to_proto(name)  # a new message
        proto.raw_data = placeholder
        return compact(proto)

    def default(self, default: onnx.TensorProto) -> onnx.TensorProto:
        """An input's default value (IR >= 4) as written, a large one with a placeholder."""
        if not self.takes_proto(default):
            return default
        placeholder = self._register(default)
        proto = onnx.TensorProto()
        proto.CopyFrom(default)
        proto.raw_data = placeholder
        return compact(proto)

    def constant(self, proto: onnx.NodeProto, node: Node) -> onnx.NodeProto:
        """The proto the export writes for a `Constant` operator, a large `value` with a
        placeholder."""
        if "value" not in node._attrs:
            return proto
        tensor = node._stored_tensor("value")
        if not self.takes(tensor):
            return proto
        for i, attr in enumerate(proto.attribute):
            if attr.name == "value" and attr.type == _TENSOR_ATTR and attr.t.HasField("raw_data"):
                source = tensor._source_proto()
                placeholder = self._register(source if source is not None else tensor)
                built = onnx.NodeProto()
                built.CopyFrom(proto)
                built.attribute[i].t.raw_data = placeholder
                return compact(built)
        return proto

    def index_of(self, proto: onnx.TensorProto) -> int | None:
        """The payload a tensor proto is a placeholder for, or None."""
        if not proto.HasField("raw_data"):
            return None
        raw = proto.raw_data
        if len(raw) != _MARKER_BYTES + _INDEX_BYTES or not raw.startswith(self._marker):
            return None
        return int.from_bytes(raw[_MARKER_BYTES:], "little")

    def length(self, index: int) -> int:
        return self._lengths[index]

    def take(self, index: int) -> bytes | memoryview:
        """The bytes of a placeholder that is written elsewhere (an external data file):
        the model it is in no longer holds it."""
        data = self.payload(index)
        self._sources[index] = None
        return data

    def payload(self, index: int) -> bytes | memoryview:
        """The bytes a placeholder stands for (one copy, dropped once written)."""
        source = self._sources[index]
        if source is None:
            raise GraphError(f"tensor payload {index} of the save was already written")
        data = self._bytes_of(source)
        if memoryview(data).nbytes != self._lengths[index]:
            raise GraphError(f"a tensor of {self._lengths[index]} bytes changed to "
                             f"{memoryview(data).nbytes} bytes while the model was saved")
        return data

    def restore(self, model: onnx.ModelProto) -> None:
        """Put the real bytes back into every placeholder of `model` (for onnx's checker)."""
        for tensor in iter_tensors(model):
            index = self.index_of(tensor)
            if index is not None:
                tensor.raw_data = bytes(self.payload(index))

    # -- the file -----------------------------------------------------------------------
    def layout(self, data: bytes) -> SplicedModel:
        """The pieces of the file whose model is `data` (a serialized `ModelProto` with
        placeholders) with every placeholder's payload in place."""
        spliced = SplicedModel(data)
        found: list[int] = []
        spliced.size = self._layout(data, 0, len(data), onnx.ModelProto.DESCRIPTOR,
                                    spliced.pieces, found)
        left = [i for i, source in enumerate(self._sources) if source is not None]
        if sorted(found) != left:
            raise GraphError(f"saving the model lost track of its tensors: found "
                             f"{len(found)} of {len(left)} placeholders")
        return spliced

    def _layout(self, data: bytes, start: int, end: int, descriptor: Descriptor,
                pieces: list[Piece], found: list[int]) -> int:
        """Append the pieces of the message `data[start:end]` of type `descriptor`; its
        size once its placeholders are filled. Fields holding no placeholder are copied."""
        marker = self._marker
        size = 0
        copied = start  # the start of the range not yet appended
        pos = start
        while pos < end:
            key, pos = _read_varint(data, pos)
            wire_type = key & 7
            if wire_type == 0:
                pos = _read_varint(data, pos)[1]
                continue
            if wire_type in (1, 5):
                pos += 8 if wire_type == 1 else 4
                continue
            if wire_type != _LENGTH_DELIMITED:  # groups: none in ONNX
                raise GraphError(f"unexpected protobuf wire type {wire_type} in the model")
            tag_end = pos
            length, body = _read_varint(data, pos)
            pos = body + length
            if data.find(marker, body, pos) < 0:
                continue
            number = key >> 3
            if descriptor is _TENSOR and number == _RAW_DATA and (
                    length == _MARKER_BYTES + _INDEX_BYTES and data.startswith(marker, body)):
                index = int.from_bytes(data[body + _MARKER_BYTES:pos], "little")
                found.append(index)
                inner: list[Piece] = [index]
                inner_size = self._lengths[index]
            else:
                sub = descriptor.fields_by_number.get(number)
                if sub is None or sub.message_type is None:
                    continue  # not a message: the marker is part of its bytes
                inner = []
                inner_size = self._layout(data, body, pos, sub.message_type, inner, found)
            pieces.append((copied, tag_end))
            prefix = _varint(inner_size)
            pieces.append(prefix)
            pieces.extend(inner)
            size += tag_end - copied + len(prefix) + inner_size
            copied = pos
        if copied < end:
            pieces.append((copied, end))
            size += end - copied
        return size

    def write(self, out: BinaryIO, spliced: SplicedModel) -> None:
        """Write the file `spliced` describes into `out`, one payload copy at a time."""
        view = memoryview(spliced.data)
        for piece in spliced.pieces:
            if isinstance(piece, tuple):
                out.write(view[piece[0]:piece[1]])
            elif isinstance(piece, bytes):
                out.write(piece)
            else:
                out.write(self.payload(piece))


def compact(proto: M) -> M:
    """A fresh copy of a message built with `mark`: setting a field leaves the bytes it held
    in the message's arena until the message goes, so the copy is what stays small."""
    copy = type(proto)()
    copy.CopyFrom(proto)
    return copy
