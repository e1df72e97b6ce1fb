"""`ge.graph.load` reads a model file a piece at a time (`ge.graph.model_file`): never as one
bytes object, into the same model a whole parse gives, and with the same errors for files
that are empty, truncated (mid-field, mid-tensor, mid-header) or not protobuf."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from model_corpus import CORPUS, loop_nested, model_with_external_data
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as nh

import ge.graph
from ge.errors import ModelLoadError
from ge.graph import model_file, model_io
from ge.graph.model_file import read_model_pieces


@pytest.fixture
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pieces of a few hundred bytes: the test models' graphs are read field by field, and
    `load` reads every file in pieces, however small."""
    monkeypatch.setattr(model_file, "PIECE_BYTES", 256)
    monkeypatch.setattr(model_file, "PIECEWISE_FROM_BYTES", 0)


def _weights_model(count: int = 4, size: int = 64) -> onnx.ModelProto:
    """A chain of MatMuls over `count` float weights of `size`x`size` (16 KiB each at 64)."""
    rng = np.random.default_rng(0)
    nodes, inits, last = [], [], "x"
    for i in range(count):
        inits.append(nh.from_array(rng.standard_normal((size, size)).astype(np.float32),
                                   f"w{i}"))
        nodes.append(oh.make_node("MatMul", [last, f"w{i}"], [f"h{i}"], name=f"mm{i}"))
        last = f"h{i}"
    graph = oh.make_graph(nodes, "weights", [oh.make_tensor_value_info("x", TP.FLOAT, [2, size])],
                          [oh.make_tensor_value_info(last, TP.FLOAT, [2, size])], inits)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)], ir_version=8)


def _whole_parse_error(data: bytes, where: str) -> str:
    """The message a whole parse of `data` (as `load` did before) gives."""
    with pytest.raises(ModelLoadError) as info:
        model_io._parse(data, where)
    return info.value.message


@pytest.mark.parametrize("case", CORPUS, ids=lambda c: c.name)
def test_pieces_give_the_whole_parse(tmp_path: Path, small_pieces: None, case) -> None:
    """Every corpus model (subgraphs, functions, sparse and typed initializers, metadata)
    read in pieces equals the whole parse of its file, field for field and byte for byte."""
    path = tmp_path / "model.onnx"
    data = case.build().SerializeToString()
    path.write_bytes(data)
    read = read_model_pieces(path)
    assert read is not None
    whole = onnx.ModelProto.FromString(data)
    assert read[0] == whole and read[0].SerializeToString() == data


def test_load_never_reads_the_file_whole(tmp_path: Path, small_pieces: None,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A well-formed file is never read into one bytes object: the largest read is one
    weight (16 KiB here) or a piece, not the file (64 KiB of weights)."""
    path = tmp_path / "model.onnx"
    onnx.save_model(_weights_model(), path)
    reads: list[int] = []
    real_read = model_file._read

    def recording_read(file, start: int, end: int) -> bytes:
        reads.append(end - start)
        return real_read(file, start, end)

    def no_whole_read(self: Path) -> bytes:
        raise AssertionError(f"{self} was read whole")

    monkeypatch.setattr(model_file, "_read", recording_read)
    monkeypatch.setattr(Path, "read_bytes", no_whole_read)
    graph = ge.graph.load(path)
    assert len(reads) > 4 and max(reads) < 20_000 < path.stat().st_size // 3
    assert graph.to_onnx().graph.initializer[3].raw_data == \
        onnx.load(path).graph.initializer[3].raw_data


def test_loaded_model_does_not_hold_the_file(tmp_path: Path, small_pieces: None) -> None:
    """Nothing of the model keeps its file open: it can be replaced and deleted, and the
    graph saved over it (with overwrite_input) and elsewhere keeps every weight."""
    path = tmp_path / "model.onnx"
    model = _weights_model()
    onnx.save_model(model, path)
    graph = ge.graph.load(path)
    if os.path.isdir("/proc/self/fd"):
        opened = {os.path.realpath(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")}
        assert os.path.realpath(path) not in opened
    graph.save(path, overwrite_input=True)
    graph.save(tmp_path / "copy.onnx")
    path.unlink()
    again = onnx.load(tmp_path / "copy.onnx")
    assert [t.raw_data for t in again.graph.initializer] == \
        [t.raw_data for t in model.graph.initializer]


def test_external_data_is_found_in_a_piece(tmp_path: Path, small_pieces: None) -> None:
    """The external references of a file read in pieces are resolved (the key `location`
    is looked for in every piece, bodies' tensors included)."""
    path = tmp_path / "model.onnx"
    model = model_with_external_data()
    onnx.save_model(model, path, save_as_external_data=True, location="weights.bin",
                    size_threshold=0)
    read = read_model_pieces(path)
    assert read is not None and read[1]
    graph = ge.graph.load(path)
    saved = graph.to_onnx()
    assert sorted(t.name for t in saved.graph.initializer) == ["small", "w1", "zero"]
    assert all(t.data_location != TP.EXTERNAL for t in saved.graph.initializer)


def _cut(tmp_path: Path, data: bytes, at: int) -> Path:
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[:at])
    return path


def test_truncated_files_fail_as_before(tmp_path: Path, small_pieces: None) -> None:
    """A file cut mid-tensor, mid-header, at a field boundary inside the graph, or to its
    first byte is refused with the message a whole parse gives (GE1101)."""
    data = _weights_model().SerializeToString()
    third_weight = data.index(_weights_model().graph.initializer[2].raw_data[:64])
    cuts = {"mid-tensor": third_weight + 100, "mid-header": third_weight - 2,
            "first-byte": 1, "last-byte-missing": len(data) - 1}
    graph_field = onnx.ModelProto.FromString(data).graph
    inner = graph_field.initializer[1].SerializeToString()
    cuts["field-boundary"] = data.index(inner) + len(inner)
    for name, at in cuts.items():
        path = _cut(tmp_path, data, at)
        expected = _whole_parse_error(data[:at], str(path))
        assert read_model_pieces(path) is None, name
        with pytest.raises(ModelLoadError) as info:
            ge.graph.load(path)
        assert info.value.code == "GE1101" and info.value.message == expected, name
        assert "the file is truncated or not ONNX" in expected, name


def test_empty_and_garbled_files_fail_as_before(tmp_path: Path, small_pieces: None) -> None:
    """An empty file (no graph), a tensor whose bytes are garbled inside well-formed fields,
    and a file of another message fail with the whole parse's message."""
    data = bytearray(loop_nested().SerializeToString())
    graph = onnx.ModelProto.FromString(bytes(data)).graph
    node = graph.node[0].SerializeToString()
    start = data.index(node)
    data[start:start + len(node)] = b"\xff" * len(node)  # a field whose content is no NodeProto
    cases = {"empty": b"", "garbled-node": bytes(data),
             "graph-only": loop_nested().graph.SerializeToString()}
    for name, content in cases.items():
        path = tmp_path / f"{name}.onnx"
        path.write_bytes(content)
        expected = _whole_parse_error(content, str(path))
        with pytest.raises(ModelLoadError) as info:
            ge.graph.load(path)
        assert info.value.code == "GE1101" and info.value.message == expected, name


def test_a_field_overrunning_the_graph_fails_as_before(tmp_path: Path,
                                                        small_pieces: None) -> None:
    """The graph's last field (its output) claims bytes past the graph's end, into the
    model's next field: a whole parse refuses it, and so does the piecewise read (the
    graph's fields are bounded by the graph, not by the file)."""
    model = _weights_model()
    data = bytearray(model.SerializeToString())
    output = model.graph.output[0].SerializeToString()
    length_at = data.rindex(output) - 1
    after_graph = len(data) - (length_at + 1 + len(output))  # opset_import, after the graph
    assert data[length_at] == len(output) and after_graph > 0
    data[length_at] += after_graph
    path = tmp_path / "overrun.onnx"
    path.write_bytes(bytes(data))
    assert read_model_pieces(path) is None
    with pytest.raises(ModelLoadError) as info:
        ge.graph.load(path)
    assert info.value.message == _whole_parse_error(bytes(data), str(path))
