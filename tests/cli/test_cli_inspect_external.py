"""`ge inspect` of a model whose tensors are in an external data file: it reported every
size from the entries the model records and read none of them, so a missing data file was
a table row ("MISSING", exit status 0), a truncated one or a recorded length its tensor's
dims disagree with went unseen (loading refuses all three: GE1103), and tensors outside
the initializers and `Constant` values (a sparse initializer's values) were not listed.
Now each reference is checked as loading checks it, against the data file's size (no data
is read), and refused in loading's words; the table gives the bytes the tensors take of
each file beside its size."""

from __future__ import annotations

import builtins
import io
import json
import os
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_helpers import listing, run_ge
from onnx import TensorProto, helper, numpy_helper

import ge.graph
from ge.errors import ExternalDataError
from ge.graph.external_data import iter_tensors
from sparse_models import node, sparse, sparse_model, vi

W_BYTES, B_BYTES = 64 * 64 * 4, 64 * 4


def _matmul_add() -> onnx.ModelProto:
    """y = x @ w + b, w float [64, 64] and b float [64]."""
    w = numpy_helper.from_array(np.arange(64 * 64, dtype=np.float32).reshape(64, 64), "w")
    b = numpy_helper.from_array(np.arange(64, dtype=np.float32), "b")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
                               helper.make_node("Add", ["m", "b"], ["y"], name="add")], "g",
                              [vi("x", [2, 64])], [vi("y", [2, 64])], [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _saved_by_onnx(folder: Path) -> Path:
    """`_matmul_add` saved as onnx saves external data: both tensors in `m.data`, one after
    the other."""
    folder.mkdir()
    path = folder / "m.onnx"
    onnx.save(_matmul_add(), path, save_as_external_data=True, all_tensors_to_one_file=True,
              location="m.data", size_threshold=0)
    return path


def _inspect_json(path: Path) -> dict:
    code, stdout, stderr = run_ge("inspect", str(path), "--json")
    assert code == 0, stderr
    return json.loads(stdout)


def test_inspect_reports_external_tensors_as_inline_ones(tmp_path: Path) -> None:
    path = _saved_by_onnx(tmp_path / "m")
    data = _inspect_json(path)
    assert data["initializers"] == {"count": 2, "in_subgraphs": 0, "bytes": W_BYTES + B_BYTES}
    assert data["external_data"] == [{"file": "m.data", "tensors": 2, "exists": True,
                                      "bytes": W_BYTES + B_BYTES,
                                      "tensor_bytes": W_BYTES + B_BYTES}]
    inline = tmp_path / "inline.onnx"
    onnx.save(_matmul_add(), inline)
    assert _inspect_json(inline)["initializers"] == data["initializers"]
    code, stdout, _ = run_ge("inspect", str(path))
    assert code == 0
    assert "2 initializer(s), 16.2 KiB (16640 B)" in stdout
    row = next(line for line in stdout.splitlines() if "m.data" in line)
    assert row.split("│")[1:-1] == [" m.data ", "       2 ", "        16640 ", "      16640 "]


def test_inspect_reports_what_ge_compile_external_data_writes(tmp_path: Path) -> None:
    """ge packs tensors under 1 MiB in its data file at 16-byte offsets (these two of
    15 KiB: the file holds their bytes and no more); a sparse initializer's values and
    indices stay in the model, as onnx's own writer leaves them (onnx's checker and
    `onnx.load` do not read them from a data file), and inspect counts them apart."""
    from onnx import numpy_helper

    source = tmp_path / "m.onnx"
    big = np.zeros((60, 64), np.float32)
    big[::3, ::5] = 1.0
    first = numpy_helper.from_array(np.full((60, 64), 2.0, np.float32), "w1")
    second = numpy_helper.from_array(np.full((60, 64), 3.0, np.float32), "w2")
    onnx.save(sparse_model([node("Add", ["x", "s"], ["t"], name="add"),
                            node("Mul", ["t", "w1"], ["u"], name="mul"),
                            node("Add", ["u", "w2"], ["y"], name="add2")],
                           [vi("x", [60, 64])], [vi("y", [60, 64])], [sparse("s", big)],
                           [first, second]), source)
    values, indices = int(np.count_nonzero(big)) * 4, int(np.count_nonzero(big)) * 8
    target = tmp_path / "out.onnx"
    code, _, stderr = run_ge("compile", str(source), "-o", str(target), "--external-data", "-q")
    assert code == 0, stderr
    stored = onnx.load(target, load_external_data=False).graph.sparse_initializer[0]
    assert stored.values.data_location != TensorProto.EXTERNAL
    data = _inspect_json(target)
    dense = 2 * 60 * 64 * 4
    assert data["external_data"] == [
        {"file": "out.onnx.data", "tensors": 2, "exists": True,
         "bytes": (tmp_path / "out.onnx.data").stat().st_size, "tensor_bytes": dense}]
    assert data["external_data"][0]["bytes"] == dense  # (packed: 15,360 is 16 x 960)
    assert data["sparse_initializers"]["bytes"] == values + indices


def _damaged(tmp_path: Path, how: str) -> tuple[Path, str]:
    """A model saved by onnx with its data file damaged `how`, and what the error says."""
    path = _saved_by_onnx(tmp_path / "m")
    data = path.parent / "m.data"
    if how == "missing":
        data.unlink()
        return path, (f"tensor 'w': external data file 'm.data' does not exist in "
                      f"{path.parent.resolve()}")
    if how == "short":
        data.write_bytes(data.read_bytes()[:W_BYTES + 100])
        return path, (f"tensor 'b': external data asks for bytes {W_BYTES}..{W_BYTES + B_BYTES}"
                      f" of m.data, which has {W_BYTES + 100}: the file is too short "
                      "(truncated, or not the data file of this model)")
    model = onnx.load(path, load_external_data=False)
    if how == "recorded length":
        entry = next(e for e in model.graph.initializer[1].external_data if e.key == "length")
        entry.value = "100"
        expected = ("tensor 'b': its external data is recorded as 100 bytes, but its dims "
                    "[64] of FLOAT need 256 (in m.data)")
    else:  # "outside": a data file beside the model's folder
        (tmp_path / "m.data").write_bytes(data.read_bytes())
        for tensor in iter_tensors(model):
            entry = next(e for e in tensor.external_data if e.key == "location")
            entry.value = "../m.data"
        expected = ("tensor 'w': external data location '../m.data' resolves to "
                    f"{(tmp_path / 'm.data').resolve()}, outside the model's folder "
                    f"{path.parent.resolve()}; refusing to read it")
    path.write_bytes(model.SerializeToString())
    return path, expected


@pytest.mark.parametrize("how", ["missing", "short", "recorded length", "outside"])
def test_inspect_refuses_what_loading_refuses_in_its_words(tmp_path: Path, how: str) -> None:
    path, expected = _damaged(tmp_path, how)
    before = listing(tmp_path)
    code, stdout, stderr = run_ge("inspect", str(path))
    assert (code, stdout) == (1, "")
    assert stderr == f"ge: [GE1103] {path}: {expected}\n"
    code, stdout, _ = run_ge("inspect", str(path), "--json")
    error = json.loads(stdout)
    assert (code, error["code"], error["type"]) == (1, "GE1103", "ExternalDataError")
    assert error["message"] == f"{path}: {expected}"
    with pytest.raises(ExternalDataError) as caught:  # the same words as loading's
        ge.graph.load(path)
    assert caught.value.message == error["message"]
    assert listing(tmp_path) == before  # nothing written


def test_inspect_reads_no_data_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ranges are checked against the file's size: the data file is never opened (a
    model of many GB is inspected as fast as a small one)."""
    path = _saved_by_onnx(tmp_path / "m")
    opened: list[str] = []

    def recording(original):
        def open_(file, *args, **kwargs):
            if isinstance(file, (str, os.PathLike)):
                opened.append(os.path.basename(os.fspath(file)))
            return original(file, *args, **kwargs)
        return open_

    monkeypatch.setattr(builtins, "open", recording(builtins.open))
    monkeypatch.setattr(io, "open", recording(io.open))
    data = _inspect_json(path)
    assert data["external_data"][0]["tensors"] == 2
    # (Python 3.10's pathlib opens through an accessor bound at import, which the patch
    # cannot see: the recording is checked where it records)
    assert "m.data" not in opened
    if sys.version_info >= (3, 11):
        assert "m.onnx" in opened


def test_a_string_tensor_in_a_data_file_is_refused_as_loading_refuses_it(
        tmp_path: Path) -> None:
    """A STRING tensor stored externally without a `length` counted 0 bytes in inspect's
    total (helper C) and exited 0, while loading refused it after reading (GE1101 "holds
    raw_data") and onnxruntime refuses it ("External data type cannot be ... STRING"):
    strings live in string_data only. Both refuse it now, before reading, naming it."""
    strings = TensorProto(name="s", data_type=TensorProto.STRING, dims=[2],
                          data_location=TensorProto.EXTERNAL)
    entry = strings.external_data.add()
    entry.key, entry.value = "location", "s.data"
    graph = helper.make_graph([helper.make_node("Identity", ["s"], ["y"], name="id")], "g", [],
                              [helper.make_tensor_value_info("y", TensorProto.STRING, [2])],
                              [strings])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    (tmp_path / "s.data").write_bytes(b"abcdef")
    expected = (f"{path}: tensor 's' is a STRING tensor stored in external data ('s.data'): "
                "ONNX keeps strings in string_data, never in a data file (onnxruntime refuses "
                "it; onnx reads the bytes into raw_data, which a STRING tensor cannot hold)")
    before = listing(tmp_path)
    assert run_ge("inspect", str(path)) == (1, "", f"ge: [GE1103] {expected}\n")
    with pytest.raises(ExternalDataError) as caught:
        ge.graph.load(path)
    assert caught.value.message == expected
    code, _, stderr = run_ge("compile", str(path), "-o", str(tmp_path / "out.onnx"))
    assert (code, stderr) == (1, f"ge: [GE1103] {expected}\n")
    assert listing(tmp_path) == before


def test_inspect_counts_the_initializers_of_bodies(tmp_path: Path) -> None:
    """Only the main graph's initializers were counted (helper C): a body's, dense or
    sparse, inline or in a data file, count too, and how many are in bodies is said."""
    weight = numpy_helper.from_array(np.arange(64, dtype=np.float32), "bw")
    then = helper.make_graph([helper.make_node("Add", ["x", "bw"], ["a"], name="b_add"),
                              helper.make_node("Add", ["a", "bs"], ["t"], name="b_add2")],
                             "then", [], [vi("t", [64])], [weight],
                             sparse_initializer=[sparse("bs", np.eye(8, dtype=np.float32)
                                                        .reshape(64))])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="neg")], "else", [],
                              [vi("e", [64])])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["i"], name="if", then_branch=then, else_branch=other),
         helper.make_node("Mul", ["i", "w"], ["y"], name="mul")], "g",
        [vi("x", [64]), helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [vi("y", [64])], [numpy_helper.from_array(np.ones(64, np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    inline, external = tmp_path / "inline.onnx", tmp_path / "ext" / "m.onnx"
    onnx.save(model, inline)
    external.parent.mkdir()
    onnx.save(model, external, save_as_external_data=True, location="m.data",
              size_threshold=0, convert_attribute=True)
    stored = {a.name: a.g for a in onnx.load(external, load_external_data=False).graph.node[0]
              .attribute}
    assert stored["then_branch"].initializer[0].data_location == TensorProto.EXTERNAL
    for path in (inline, external):
        data = _inspect_json(path)
        assert data["initializers"] == {"count": 2, "in_subgraphs": 1, "bytes": 2 * 64 * 4}
        assert data["sparse_initializers"] == {"count": 1, "in_subgraphs": 1,
                                               "bytes": 8 * 4 + 8 * 8, "values": 8,
                                               "elements": 64}
        code, stdout, _ = run_ge("inspect", str(path))
        assert code == 0
        assert ("2 initializer(s) (1 in subgraphs), 512 B; 1 sparse initializer(s) (1 in "
                "subgraphs), 96 B as stored") in stdout


def test_inspect_reads_a_large_file_in_pieces_as_loading_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """inspect read the whole file into memory (`path.read_bytes()`, helper C): a file of
    many GB held twice at once. It reads it as loading does (`ge.graph.model_io`), a large
    one a piece at a time, and says the same of it."""
    from ge.graph import model_file

    path = tmp_path / "m.onnx"
    onnx.save(_matmul_add(), path)
    whole = _inspect_json(path)
    monkeypatch.setattr(model_file, "PIECEWISE_FROM_BYTES", 1)  # (every file is large)
    monkeypatch.setattr(model_file, "MEASURED_RAW_BYTES", 1, raising=False)

    def whole_read(self: Path) -> bytes:
        raise AssertionError(f"{self} read whole")

    monkeypatch.setattr(Path, "read_bytes", whole_read)
    assert _inspect_json(path) == whole
