"""External tensor data: reading it safely on load, writing it on save.

On load every external reference must name a regular file inside the model's folder, by a
path onnx and onnxruntime would both open (`ge.graph.external_references`). On
save, large tensors go into one data file beside the model, which is how models over
protobuf's 2 GB limit are written. The walk over a model's tensor protos that both need
(`graph_tensors`, `iter_tensors`) is here too, for every other walk of them to share.
"""

from __future__ import annotations

import hashlib
import os
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Literal

import numpy as np
import onnx
from onnx import AttributeProto, numpy_helper

from ge.errors import ExternalDataError
from ge.graph.external_references import entry_int, reference_entries, resolve_location
from ge.graph.payload_checks import external_length_problem, payload_nbytes

if TYPE_CHECKING:
    from ge.graph.payloads import PayloadStore

__all__ = ["MAPPED_FROM", "PACKED_ALIGNMENT", "PAGE_ALIGNMENT", "ExternalDataWriter",
           "ExternalRange", "SharedExternalData", "TensorKind",
           "external_ranges", "graph_tensors", "iter_tensors", "packed_bytes",
           "read_external_data", "write_external_data"]

A = AttributeProto
#: A payload of at least `MAPPED_FROM` bytes starts at a multiple of `PAGE_ALIGNMENT` in the
#: data file: onnxruntime memory-maps a tensor whose offset is page-aligned (its own saver
#: aligns tensors over 1 MiB to 4096 bytes: `ModelSavingOptions.align_threshold`,
#: `on_disk_alignment_factor`) and reads any other into memory. A smaller payload, whose
#: mapping saves little, starts at a multiple of `PACKED_ALIGNMENT`, which the size of
#: every element type divides (a view of the file as an array of it stays aligned): ge
#: once page-aligned every tensor, and a model of many 1 KiB tensors took four times its
#: weights' bytes (12.3 MB in a 49 MB file; trial VV).
MAPPED_FROM = 1 << 20
PAGE_ALIGNMENT = 4096
PACKED_ALIGNMENT = 16
_PAYLOAD_FIELDS = ("raw_data", "float_data", "int32_data", "string_data", "int64_data",
                   "double_data", "uint64_data")


#: What a tensor of `graph_tensors` is: a graph's initializer, a node's tensor attribute, or
#: the values or indices of a sparse tensor (a sparse initializer's or a sparse attribute's).
TensorKind = Literal["initializer", "attribute", "sparse"]


def _attr_tensors(attrs: Iterable[onnx.AttributeProto]
                  ) -> Iterator[tuple[onnx.TensorProto, TensorKind]]:
    for attr in attrs:
        if attr.type == A.TENSOR:
            yield attr.t, "attribute"
        elif attr.type == A.TENSORS:
            for tensor in attr.tensors:
                yield tensor, "attribute"
        elif attr.type == A.SPARSE_TENSOR:
            yield attr.sparse_tensor.values, "sparse"
            yield attr.sparse_tensor.indices, "sparse"
        elif attr.type == A.SPARSE_TENSORS:
            for sparse in attr.sparse_tensors:
                yield sparse.values, "sparse"
                yield sparse.indices, "sparse"
        elif attr.type == A.GRAPH:
            yield from graph_tensors(attr.g)
        elif attr.type == A.GRAPHS:
            for g in attr.graphs:
                yield from graph_tensors(g)


def graph_tensors(graph: onnx.GraphProto) -> Iterator[tuple[onnx.TensorProto, TensorKind]]:
    """Every tensor of a graph and its bodies, in file order, with its kind: initializers,
    then the sparse initializers' values and indices, then each node's tensor attributes."""
    for tensor in graph.initializer:
        yield tensor, "initializer"
    for sparse in graph.sparse_initializer:
        yield sparse.values, "sparse"
        yield sparse.indices, "sparse"
    for node in graph.node:
        if node.attribute:
            yield from _attr_tensors(node.attribute)


def iter_tensors(model: onnx.ModelProto, *, sparse: bool = True
                 ) -> Iterator[onnx.TensorProto]:
    """Every tensor of a model: initializers and tensor attributes, in subgraphs and
    functions (their nodes', and the defaults of their attributes); `sparse=False` leaves
    out the values and indices of sparse tensors."""
    tensors = graph_tensors(model.graph)
    functions = ((tensor, kind) for function in model.functions
                 for attrs in (function.attribute_proto,
                               *(node.attribute for node in function.node))
                 for tensor, kind in _attr_tensors(attrs))
    for source in (tensors, functions):
        for tensor, kind in source:
            if sparse or kind != "sparse":
                yield tensor


@dataclass(frozen=True)
class ExternalRange:
    """Where a tensor's external data is: `offset` and `length` in the data file `path`
    (resolved; `location` as the model writes it, `file_size` its size when checked)."""

    tensor: onnx.TensorProto
    location: str
    path: Path
    offset: int
    length: int
    file_size: int


def external_ranges(model: onnx.ModelProto, base_dir: str | os.PathLike[str] | None
                    ) -> list[ExternalRange]:
    """Every external reference of `model` (graphs, bodies, functions; sparse tensors'
    values and indices too), checked as loading checks it, reading no data: the file is in
    the model's folder `base_dir` (`resolve_location`), the `length` recorded is what the
    tensor's dims and element type need (a reference without one takes what they need, as
    onnxruntime reads it; onnx reads the rest of the file, which a data file of several
    tensors has more of), and the file, whose size is asked once, holds that range (a
    STRING tensor is refused: its strings cannot be stored so).
    `ExternalDataError` (GE1103) naming the tensor and the file otherwise: what `ge inspect`
    says of a model without reading its weights, and `read_external_data` before it reads."""
    base = Path(base_dir) if base_dir is not None else None
    sizes: dict[Path, int] = {}
    resolved: dict[str, Path] = {}  # (a data file of many tensors is walked to once)
    found = []
    for tensor in iter_tensors(model):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        entries = reference_entries(tensor)
        if base is None:
            raise ExternalDataError(
                f"tensor {tensor.name!r} has external data, but the model was given without "
                "its folder; load it from its path or pass base_dir "
                "(ge.graph.load(model, base_dir=FOLDER), which ge.compile then takes)"
            )
        location = entries.get("location", "")
        if tensor.data_type == onnx.TensorProto.STRING and location:
            raise ExternalDataError(
                f"tensor {tensor.name!r} is a STRING tensor stored in external data "
                f"({location!r}): ONNX keeps strings in string_data, never in a data file "
                "(onnxruntime refuses it; onnx reads the bytes into raw_data, which a STRING "
                "tensor cannot hold)", path=location)
        path = resolved.get(location)
        if path is None:
            path = resolved[location] = resolve_location(base, location, tensor.name)
        size = sizes.get(path)
        if size is None:
            size = sizes[path] = path.stat().st_size
        found.append(_checked_range(tensor, entries, location, path, size))
    return found


def _checked_range(tensor: onnx.TensorProto, entries: dict[str, str], location: str,
                   path: Path, size: int) -> ExternalRange:
    """The range of `tensor`'s external data in `path` (of `size` bytes), which must hold
    it; see `external_ranges`."""
    offset = entry_int(tensor, entries, "offset", path) or 0
    length = entry_int(tensor, entries, "length", path)
    if length is not None:
        want = length
        problem = external_length_problem(tensor, want)
        if problem is not None:
            raise ExternalDataError(f"{problem} (in {path.name})", path=str(path))
    else:  # what the dims need, as onnxruntime reads it; of no fixed size: the rest
        need = payload_nbytes(tensor.data_type, tensor.dims)
        want = size - offset if need is None else need
    if offset < 0 or want < 0 or offset + want > size:
        why = ("its offset is negative" if offset < 0 else
               "the file is too short (truncated, or not the data file of this model)")
        raise ExternalDataError(
            f"tensor {tensor.name!r}: external data asks for bytes "
            f"{offset}..{offset + want} of {path.name}, which has {size}: {why}",
            path=str(path),
        )
    return ExternalRange(tensor, location, path, offset, want, size)


def read_external_data(model: onnx.ModelProto,
                       base_dir: str | os.PathLike[str] | None,
                       measured: dict[int, tuple[onnx.TensorProto, int]] | None = None
                       ) -> list[str]:
    """Replace every external reference of `model` by the bytes it points to (in place),
    once all are checked (`external_ranges`: nothing is read of a model one of whose
    references is wrong); returns the resolved paths of the data files read. Each tensor
    read is entered in `measured` (`ge.graph.payload_checks.MeasuredRaw`): its length is
    known, uncopied."""
    handles: dict[Path, BinaryIO] = {}
    try:
        for where in external_ranges(model, base_dir):
            handle = handles.get(where.path)
            if handle is None:
                handle = handles[where.path] = open(where.path, "rb")  # noqa: SIM115 (closed below)
            handle.seek(where.offset)
            tensor = where.tensor
            tensor.raw_data = handle.read(where.length)
            tensor.data_location = onnx.TensorProto.DEFAULT
            del tensor.external_data[:]
            if measured is not None:
                measured[id(tensor)] = (tensor, where.length)
    finally:
        for handle in handles.values():
            handle.close()
    return [os.path.realpath(p) for p in handles]


def tensor_nbytes(tensor: onnx.TensorProto) -> int:
    """Bytes of a tensor's payload as stored in the proto (raw or typed fields)."""
    if tensor.HasField("raw_data"):
        return len(tensor.raw_data)
    return tensor.ByteSize()


class ExternalDataWriter:
    """Appends tensor payloads to one data file and points tensor protos at them."""

    def __init__(self, out: BinaryIO, location: str, size_threshold: int) -> None:
        self.out = out
        self.location = location
        self.size_threshold = size_threshold

    def place(self, tensor: onnx.TensorProto, payload: bytes | memoryview) -> None:
        """Write `payload` (aligned: `MAPPED_FROM`) and make `tensor` (without payload)
        refer to it."""
        self._refer(tensor, self._append(payload), memoryview(payload).nbytes)

    def place_from(self, tensor: onnx.TensorProto, origin: object,
                   payload_of: Callable[[], bytes | memoryview]) -> None:
        """`place` the payload `payload_of()` gives, which is the data of `origin` (an
        unchanging object: a source proto, a read-only array). A writer that may have
        written that data before (`SharedExternalData`) is spared reading and hashing it."""
        self.place(tensor, payload_of())

    def _append(self, payload: bytes | memoryview) -> int:
        """Write `payload` at the next offset aligned for its size (`MAPPED_FROM`); returns
        that offset."""
        offset = self.out.tell()
        size = memoryview(payload).nbytes
        pad = (-offset) % (PAGE_ALIGNMENT if size >= MAPPED_FROM else PACKED_ALIGNMENT)
        if pad:
            self.out.write(b"\0" * pad)
            offset += pad
        self.out.write(payload)
        return offset

    def _refer(self, tensor: onnx.TensorProto, offset: int, length: int) -> None:
        tensor.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", self.location), ("offset", str(offset)),
                           ("length", str(length))):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value

    def move(self, tensor: onnx.TensorProto) -> None:
        """Move an in-proto payload of at least the threshold out into the data file."""
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            return
        if tensor.data_type == onnx.TensorProto.STRING:
            return  # strings have no raw form
        if tensor_nbytes(tensor) < self.size_threshold:
            return
        if tensor.HasField("raw_data"):
            payload: bytes | memoryview = tensor.raw_data
        else:
            payload = packed_bytes(numpy_helper.to_array(tensor))
        for field in _PAYLOAD_FIELDS:
            tensor.ClearField(field)
        self.place(tensor, payload)


# Element types whose numpy buffer is exactly their raw_data (not complex, not ml_dtypes').
_BUFFER_TYPECODES = np.typecodes["AllInteger"] + "efd?"


def packed_bytes(array: np.ndarray) -> bytes | memoryview:
    """The bytes of `array` as an ONNX `raw_data` holds them (little-endian; sub-byte types
    packed two or more to a byte, which numpy's own bytes are not)."""
    dtype = array.dtype
    if np.little_endian and dtype.isnative and dtype.char in _BUFFER_TYPECODES:
        return memoryview(np.ascontiguousarray(array).reshape(-1)).cast("B")  # type: ignore[arg-type]
    return numpy_helper.from_array(array).raw_data


class SharedExternalData(ExternalDataWriter):
    """One data file that several models written into its folder point into, each payload
    stored once: the graph dumps of a compilation, whose weights mostly stay the same from
    one dump to the next (a copy per dump made `--dump` write about twelve times the
    model). A payload is known again by its digest (BLAKE2b of its bytes, with its length),
    and a payload placed from an origin object (`place_from`) by that object, so a weight
    that stays from one dump to the next is neither copied out of its proto nor hashed
    again (about 1 ms per MiB each). The file is opened for each model (`writing()`), so no
    handle outlives a save."""

    def __init__(self, path: Path, size_threshold: int = 1024) -> None:
        super().__init__(None, path.name, size_threshold)  # type: ignore[arg-type]
        self.path = path
        self._written: dict[bytes, tuple[int, int]] = {}  # digest -> (offset, length)
        # id(origin) -> (the origin, or a weak reference to it; offset; length). An origin
        # is held so that its id is not reused: protos (no weak references) strongly,
        # which costs nothing while the graph holds them and at most their sizes after.
        self._by_origin: dict[int, tuple[object, int, int]] = {}

    @contextmanager
    def writing(self) -> Iterator[SharedExternalData]:
        """The file open for appending while one model is written."""
        with open(self.path, "ab") as out:
            self.out = out
            try:
                yield self
            finally:
                self.out = None  # type: ignore[assignment]

    def place(self, tensor: onnx.TensorProto, payload: bytes | memoryview) -> None:
        self._refer(tensor, *self._stored(payload))

    def place_from(self, tensor: onnx.TensorProto, origin: object,
                   payload_of: Callable[[], bytes | memoryview]) -> None:
        known = self._by_origin.get(id(origin))
        if known is not None:
            held, offset, length = known
            if (held() if isinstance(held, weakref.ref) else held) is origin:
                self._refer(tensor, offset, length)
                return
        offset, length = self._stored(payload_of())
        try:
            held = weakref.ref(origin)
        except TypeError:  # a proto
            held = origin
        self._by_origin[id(origin)] = (held, offset, length)
        self._refer(tensor, offset, length)

    def _stored(self, payload: bytes | memoryview) -> tuple[int, int]:
        """(offset, length) of `payload` in the file, appending it if not there yet."""
        view = memoryview(payload)
        digest = hashlib.blake2b(view, digest_size=16).digest()
        found = self._written.get(digest)
        if found is None or found[1] != view.nbytes:
            found = self._written[digest] = (self._append(payload), view.nbytes)
        return found


def write_external_data(model: onnx.ModelProto, writer: ExternalDataWriter,
                        payloads: PayloadStore | None = None) -> None:
    """Move every tensor of at least the writer's threshold into its data file (in place);
    a placeholder of `payloads` (see ge.graph.payloads) moves as the tensor it stands for.

    The model must be a private copy: its tensors are changed to point into the data file.
    Sparse tensors stay in the model, as onnx's own writer leaves them: onnx's checker and
    `onnx.load` do not read a sparse tensor's parts from a data file.
    """
    for tensor in iter_tensors(model, sparse=False):
        index = payloads.index_of(tensor) if payloads is not None else None
        if index is None:
            writer.move(tensor)
        elif payloads is not None and payloads.length(index) >= writer.size_threshold:
            for field in _PAYLOAD_FIELDS:
                tensor.ClearField(field)
            writer.place(tensor, payloads.take(index))
