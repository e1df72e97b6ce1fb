"""External tensor data: reading it safely on load, writing it on save.

On load every external reference must resolve, after following symlinks, to a regular file
inside the model's folder; `..`, absolute locations and links that escape are refused. On
save, large tensors go into one data file beside the model, which is how models over
protobuf's 2 GB limit are written.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import onnx
from onnx import AttributeProto, numpy_helper

from ge.errors import ExternalDataError

__all__ = ["iter_tensors", "read_external_data", "write_external_data"]

A = AttributeProto
_ALIGNMENT = 4096  # offsets aligned so the data file can be memory-mapped
_PAYLOAD_FIELDS = ("raw_data", "float_data", "int32_data", "string_data", "int64_data",
                   "double_data", "uint64_data")


def _attr_tensors(attrs) -> Iterator[onnx.TensorProto]:
    for attr in attrs:
        if attr.type == A.TENSOR:
            yield attr.t
        elif attr.type == A.TENSORS:
            yield from attr.tensors
        elif attr.type == A.SPARSE_TENSOR:
            yield attr.sparse_tensor.values
            yield attr.sparse_tensor.indices
        elif attr.type == A.GRAPH:
            yield from _graph_tensors(attr.g)
        elif attr.type == A.GRAPHS:
            for g in attr.graphs:
                yield from _graph_tensors(g)


def _graph_tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        if node.attribute:
            yield from _attr_tensors(node.attribute)


def iter_tensors(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Every tensor of a model: initializers and tensor attributes, in subgraphs and functions."""
    yield from _graph_tensors(model.graph)
    for function in model.functions:
        for node in function.node:
            yield from _attr_tensors(node.attribute)


def _entries(tensor: onnx.TensorProto) -> dict[str, str]:
    return {e.key: e.value for e in tensor.external_data}


def _resolve(base_dir: Path, location: str, tensor_name: str) -> Path:
    if not location:
        raise ExternalDataError(f"tensor {tensor_name!r} has external data without a location")
    if os.path.isabs(location) or Path(location).is_absolute():
        raise ExternalDataError(
            f"tensor {tensor_name!r}: external data location {location!r} is an absolute path; "
            "only files inside the model's folder are read",
            path=location,
        )
    base = base_dir.resolve()
    target = (base / location).resolve()
    if target != base and base not in target.parents:
        raise ExternalDataError(
            f"tensor {tensor_name!r}: external data location {location!r} resolves to {target}, "
            f"outside the model's folder {base}; refusing to read it",
            path=str(target),
        )
    if not target.is_file():
        raise ExternalDataError(
            f"tensor {tensor_name!r}: external data file {location!r} does not exist "
            f"in {base}",
            path=str(target),
        )
    return target


def read_external_data(model: onnx.ModelProto, base_dir: str | os.PathLike[str] | None) -> None:
    """Replace every external reference of `model` by the bytes it points to (in place)."""
    base = Path(base_dir) if base_dir is not None else None
    handles: dict[Path, BinaryIO] = {}
    try:
        for tensor in iter_tensors(model):
            if tensor.data_location != onnx.TensorProto.EXTERNAL:
                continue
            entries = _entries(tensor)
            if base is None:
                raise ExternalDataError(
                    f"tensor {tensor.name!r} has external data, but the model was given without "
                    "its folder; load it from its path or pass base_dir"
                )
            path = _resolve(base, entries.get("location", ""), tensor.name)
            offset = int(entries.get("offset", 0) or 0)
            length = entries.get("length")
            handle = handles.get(path)
            if handle is None:
                handle = handles[path] = open(path, "rb")  # noqa: SIM115 (closed below)
            size = os.fstat(handle.fileno()).st_size
            want = int(length) if length not in (None, "") else size - offset
            if offset < 0 or want < 0 or offset + want > size:
                raise ExternalDataError(
                    f"tensor {tensor.name!r}: external data asks for bytes "
                    f"{offset}..{offset + want} of {path.name}, which has {size}",
                    path=str(path),
                )
            handle.seek(offset)
            tensor.raw_data = handle.read(want)
            tensor.data_location = onnx.TensorProto.DEFAULT
            del tensor.external_data[:]
    finally:
        for handle in handles.values():
            handle.close()


def tensor_nbytes(tensor: onnx.TensorProto) -> int:
    """Bytes of a tensor's payload as stored in the proto (raw or typed fields)."""
    if tensor.HasField("raw_data"):
        return len(tensor.raw_data)
    return tensor.ByteSize()


def write_external_data(model: onnx.ModelProto, data_path: Path, location: str,
                        size_threshold: int) -> int:
    """Move tensors of at least `size_threshold` bytes into `data_path`; returns bytes written.

    The model must be a private copy: its tensors are changed to point into the data file.
    """
    written = 0
    with open(data_path, "wb") as out:
        for tensor in iter_tensors(model):
            if tensor.data_location == onnx.TensorProto.EXTERNAL:
                continue
            if tensor.data_type == onnx.TensorProto.STRING:
                continue  # strings have no raw form
            if tensor_nbytes(tensor) < size_threshold:
                continue
            if tensor.HasField("raw_data"):
                payload: bytes | memoryview = tensor.raw_data
            else:
                # from_array packs 4-bit (and smaller) types the way raw_data holds them;
                # numpy's own bytes would hold one element per byte.
                payload = numpy_helper.from_array(numpy_helper.to_array(tensor)).raw_data
            offset = out.tell()
            pad = (-offset) % _ALIGNMENT
            if pad:
                out.write(b"\0" * pad)
                offset += pad
            out.write(payload)
            length = len(payload)
            written = offset + length
            for field in _PAYLOAD_FIELDS:
                tensor.ClearField(field)
            tensor.data_location = onnx.TensorProto.EXTERNAL
            for key, value in (("location", location), ("offset", str(offset)),
                               ("length", str(length))):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, value
    return written
