"""Reading a model file into a `ModelProto` a piece at a time, not as one bytes object.

`ModelProto.ParseFromString(path.read_bytes())` holds the file's bytes and the parsed model
at once: twice the weights at the peak of a load (a memory map does not help: upb copies
what it parses, and the mapped pages count as the process's memory while they are read).
Protobuf defines parsing the concatenation of two encodings as merging them, so the file
is cut at the boundaries of the model's fields, and a large graph field at the boundaries
of the graph's own fields (a node, an initializer, a value_info...), and each piece is
merged into the model in file order: the result is the model a whole parse gives, and at
most one piece (the largest tensor, or a few MiB of small fields) is held beside it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO, NamedTuple

import onnx
from google.protobuf.message import DecodeError, Message

from ge.graph.payload_checks import MEASURED_RAW_BYTES

__all__ = ["EXTERNAL_KEY", "PIECEWISE_FROM_BYTES", "PIECE_BYTES", "ModelPieces",
           "read_model_pieces"]

#: Files smaller than this are read whole: the copy costs little, while walking a graph of
#: many small fields (a 100k-node, 26 MB encoder: +0.27 s of a 1.1 s load) costs time.
PIECEWISE_FROM_BYTES = 64 * 2**20
#: Neighbouring fields are read and merged together up to this many bytes (fewer calls into
#: protobuf); a larger field is a piece of its own.
PIECE_BYTES = 8 * 2**20
_GRAPH_FIELD = 7  # ModelProto.graph
_LENGTH_DELIMITED = 2
_FIXED_SIZES = {1: 8, 5: 4}  # wire types 64-bit and 32-bit
_VARINT = 0
_MAX_VARINT_BYTES = 10
_TENSOR = onnx.TensorProto.DESCRIPTOR
_RAW_DATA = _TENSOR.fields_by_name["raw_data"].number
#: Every external reference names its file under the key "location": a piece without this
#: word has none, and the caller's walk over every tensor can be skipped.
EXTERNAL_KEY = b"location"


class _NotPlain(Exception):
    """The file is not a sequence of well-formed fields (truncated, not protobuf, groups):
    it is left to a whole parse, which says what is wrong as it always did."""


def _varint(header: bytes, at: int) -> tuple[int, int]:
    """The varint at `at` in `header` and the offset after it."""
    value = shift = 0
    for i in range(at, min(len(header), at + _MAX_VARINT_BYTES)):
        byte = header[i]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i + 1
        shift += 7
    raise _NotPlain


def _fields(file: BinaryIO, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """The fields between `start` and `end`: (field number, offset of the field, offset of
    its content, offset after it), read from their headers only."""
    fields = []
    at = start
    while at < end:
        file.seek(at)
        header = file.read(2 * _MAX_VARINT_BYTES)
        tag, used = _varint(header, 0)
        number, wire_type = tag >> 3, tag & 7
        if number == 0:
            raise _NotPlain
        if wire_type == _LENGTH_DELIMITED:
            length, used = _varint(header, used)
            content = at + used
            after = content + length
        elif wire_type == _VARINT:
            _, used = _varint(header, used)
            content = after = at + used
        elif wire_type in _FIXED_SIZES:
            content = at + used
            after = content + _FIXED_SIZES[wire_type]
        else:  # groups and invalid wire types
            raise _NotPlain
        if after > end:
            raise _NotPlain
        fields.append((number, at, content, after))
        at = after
    return fields


def _pieces(fields: list[tuple[int, int, int, int]]) -> list[tuple[int, int]]:
    """Consecutive fields grouped into byte ranges of about `PIECE_BYTES` or one field."""
    ranges: list[tuple[int, int]] = []
    for _, at, _, after in fields:
        if ranges and after - ranges[-1][0] <= PIECE_BYTES:
            ranges[-1] = (ranges[-1][0], after)
        else:
            ranges.append((at, after))
    return ranges


def _read(file: BinaryIO, start: int, end: int) -> bytes:
    file.seek(start)
    data = file.read(end - start)
    if len(data) != end - start:  # the file shrank while it was read
        raise _NotPlain
    return data


class ModelPieces(NamedTuple):
    """A model read piece by piece (`read_model_pieces`)."""

    model: onnx.ModelProto
    #: whether it may hold external data references (a piece named a "location")
    may_have_external_data: bool
    #: the raw_data lengths of its large tensors, read from their fields' headers
    #: (`ge.graph.payload_checks.MeasuredRaw`)
    measured: dict[int, tuple[onnx.TensorProto, int]]
    #: those of the byte strings asked for that some piece holds: a file holding none of
    #: the tags a kind of field begins with has no such field (`read_model_pieces`)
    found: frozenset[bytes] = frozenset()


def read_model_pieces(path: Path, words: Iterable[bytes] = ()) -> ModelPieces | None:
    """The model in the file at `path`, parsed piece by piece, and which of `words` its
    pieces hold (a piece is whole fields, so a field's bytes are never split); None when
    the file is not made of well-formed fields or protobuf refuses a piece (the caller
    parses it whole to say why). OSError propagates."""
    model = onnx.ModelProto()
    may_have_external_data = False
    wanted = set(words)
    found: set[bytes] = set()
    with open(path, "rb", buffering=0) as file:
        size = os.fstat(file.fileno()).st_size
        try:
            plan: list[tuple[Message, tuple[int, int]]] = []
            ordinary: list[tuple[int, int, int, int]] = []
            top = _fields(file, 0, size)
            listed = {(0, size): top}  # the fields already read of a message's range
            for field in top:
                number, at, content, after = field
                # A small graph field is merged whole, which also keeps an empty graph present.
                if number == _GRAPH_FIELD and after - at > PIECE_BYTES:
                    plan += [(model, span) for span in _pieces(ordinary)]
                    ordinary = []
                    inner = listed[(content, after)] = _fields(file, content, after)
                    plan += [(model.graph, span) for span in _pieces(inner)]
                else:
                    ordinary.append(field)
            plan += [(model, span) for span in _pieces(ordinary)]
            for target, (start, end) in plan:  # in file order: repeated fields keep theirs
                piece = _read(file, start, end)
                may_have_external_data = may_have_external_data or EXTERNAL_KEY in piece
                if wanted:
                    found.update(word for word in wanted if word in piece)
                    wanted -= found
                target.MergeFromString(piece)
                del piece
            measured: dict[int, tuple[onnx.TensorProto, int]] = {}
            _measure_raw(file, 0, size, model, listed, measured)
        except (_NotPlain, DecodeError):
            return None
    return ModelPieces(model, may_have_external_data, measured, frozenset(found))


def _once(fields: list[tuple[int, int, int, int]], number: int) -> bool:
    """Whether field `number` occurs once: a singular field written twice is merged (of
    bytes, the last one kept), which its headers alone cannot follow, so a tensor in one is
    left to be measured by a copy."""
    return sum(1 for field in fields if field[0] == number) == 1


def _measure_raw(file: BinaryIO, start: int, end: int, message: Message,
                 listed: dict[tuple[int, int], list[tuple[int, int, int, int]]],
                 measured: dict[int, tuple[onnx.TensorProto, int]]) -> None:
    """Enter in `measured` the length of the raw_data of every tensor inside `message` (read
    from `start`..`end` of `file`) of at least `MEASURED_RAW_BYTES`, from the fields'
    headers: only submessages that large are entered, so a graph's small nodes and
    tensors cost nothing (a large message's fields are listed once, `listed` holding those
    reading the model listed already). Checking a tensor's payload against its dims then
    needs no copy of it (`ge.graph.payload_checks`)."""
    descriptor = message.DESCRIPTOR
    fields = listed.get((start, end))
    if fields is None:
        fields = _fields(file, start, end)
    seen: dict[int, int] = {}  # occurrences so far: a repeated field's index
    for number, _, content, after in fields:
        index = seen.get(number, 0)
        seen[number] = index + 1
        if after - content < MEASURED_RAW_BYTES:
            continue
        field = descriptor.fields_by_number.get(number)
        if field is None or field.message_type is None:
            if descriptor is _TENSOR and number == _RAW_DATA and _once(fields, number):
                measured[id(message)] = (message, after - content)
            continue  # bytes, strings and packed numbers hold no tensor
        sub = getattr(message, field.name)
        if not isinstance(sub, Message):  # a repeated field: its occurrence `index`
            sub = sub[index]
        elif not _once(fields, number):
            continue
        _measure_raw(file, content, after, sub, listed, measured)
