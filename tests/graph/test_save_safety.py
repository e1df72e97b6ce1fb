"""Saving never loses the user's files: umask-honouring modes, atomic replacement, no write
over the model being read unless asked, no empty external data file."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper

import ge.graph
from ge.cli import cli
from ge.errors import GeError, ModelSaveError


def _model(big: bool = False) -> onnx.ModelProto:
    """y = x + w, with w of 4 floats (or 4096 when `big`, over the external threshold)."""
    n = 4096 if big else 4
    w = helper.make_tensor("w", TensorProto.FLOAT, [n], np.ones(n, np.float32).tobytes(),
                           raw=True)
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _listing(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), _mode(p)) for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077])
def test_new_files_honour_the_umask(tmp_path: Path, umask: None, mask: int) -> None:
    os.umask(mask)
    graph = ge.graph.load(_model(big=True))
    graph.save(tmp_path / "m.onnx", external_data=True)
    assert _mode(tmp_path / "m.onnx") == 0o666 & ~mask
    assert _mode(tmp_path / "m.onnx.data") == 0o666 & ~mask


def test_an_overwritten_file_keeps_its_mode(tmp_path: Path, umask: None) -> None:
    target = tmp_path / "m.onnx"
    target.write_bytes(b"old")
    target.chmod(0o640)
    ge.graph.load(_model()).save(target)
    assert _mode(target) == 0o640
    assert ge.graph.load(target).find_node_by_name("add").type == "Add"


def test_a_failed_save_leaves_the_existing_file_byte_identical(tmp_path: Path) -> None:
    target = tmp_path / "m.onnx"
    target.write_bytes(b"precious")
    graph = ge.graph.load(_model())
    graph.remove_node(graph.find_node_by_name("add"))  # output 0 is now unconnected
    before = _listing(tmp_path)
    with pytest.raises(GeError, match="not connected"):
        graph.save(target)
    assert _listing(tmp_path) == before


def test_saving_onto_the_loaded_model_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "m.onnx"
    onnx.save(_model(), source)
    (tmp_path / "link.onnx").symlink_to(source)
    before = _listing(tmp_path)
    graph = ge.graph.load(source)
    for spelling in (source, tmp_path / "." / "m.onnx", tmp_path / "link.onnx"):
        with pytest.raises(ModelSaveError) as info:
            graph.save(spelling)
        assert info.value.code == "GE1104"
        assert "it is a file the model was loaded from" in str(info.value)
        assert "overwrite_input=True" in str(info.value)
    assert _listing(tmp_path) == before
    clone = graph.clone()  # a copy of the loaded graph is refused too
    with pytest.raises(ModelSaveError):
        clone.save(source)
    graph.save(source, overwrite_input=True)
    assert ge.graph.load(source).find_node_by_name("add").type == "Add"


def test_saving_over_the_loaded_external_data_file_is_refused(tmp_path: Path) -> None:
    first = tmp_path / "m.onnx"
    ge.graph.load(_model(big=True)).save(first, external_data=True)
    graph = ge.graph.load(first)
    before = _listing(tmp_path)
    with pytest.raises(ModelSaveError, match="loaded from"):
        graph.save(tmp_path / "other.onnx", external_data=True, external_data_name="m.onnx.data")
    assert _listing(tmp_path) == before


def test_external_data_without_large_tensors_writes_no_data_file(tmp_path: Path) -> None:
    graph = ge.graph.load(_model())
    graph.save(tmp_path / "m.onnx", external_data=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]
    saved = onnx.load(tmp_path / "m.onnx", load_external_data=False)
    assert all(t.data_location == TensorProto.DEFAULT for t in saved.graph.initializer)


def test_ge_compile_onto_its_input_fails_and_keeps_it(tmp_path: Path) -> None:
    source = tmp_path / "m.onnx"
    onnx.save(_model(), source)
    before = _listing(tmp_path)
    result = CliRunner().invoke(cli, ["compile", str(source), "-o", str(source)])
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "GE1104" in lines[0] and "--overwrite-input" in lines[0]
    assert _listing(tmp_path) == before
    result = CliRunner().invoke(cli, ["compile", str(source), "-o", str(source),
                                      "--overwrite-input"])
    assert result.exit_code == 0, result.output
