"""Saving never loses the user's files: modes as `open(path, "wb")` leaves them, atomic
replacement (an existing model and its data file survive any failure), no write over the
files a graph was loaded from unless asked, and no empty external data file.

Failures are checked for their type, code and message, and for leaving the folder exactly
as it was: same names, bytes and modes, no temporary file."""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ge.graph
from ge.errors import GeError, GraphError, ModelSaveError
from ge.graph import model_io, save_target
from ge.graph.external_data import iter_tensors


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
    """Restores the process umask the test changes."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def _content(path: Path) -> bytes | str:
    if path.is_symlink():
        return "symlink to " + os.readlink(path)
    return "folder" if path.is_dir() else path.read_bytes()


def _listing(folder: Path) -> dict[str, tuple[bytes | str, int]]:
    """Every entry of `folder`: its bytes (a symlink: its target) and its mode."""
    return {p.name: (_content(p), _mode(p)) for p in sorted(folder.iterdir())}


def _check(err: GeError, kind: type[GeError], code: str, *fragments: str) -> None:
    assert type(err) is kind
    assert err.code == code
    for fragment in fragments:
        assert fragment in err.message
    assert str(err).startswith(f"[{code}] ")


def _save_fails(graph: ge.graph.Graph, target: Path, kind: type[GeError], code: str,
                *fragments: str, **kwargs) -> GeError:
    """Save fails with that error and leaves `target`'s folder as it was."""
    before = _listing(target.parent)
    with pytest.raises(kind) as info:
        graph.save(target, **kwargs)
    _check(info.value, kind, code, *fragments)
    assert _listing(target.parent) == before, "a failed save changed or left files"
    return info.value


@pytest.fixture
def previous(tmp_path: Path) -> Path:
    """An existing model `m.onnx` (mode 0640) with its data file `m.onnx.data` (0604)."""
    target = tmp_path / "m.onnx"
    target.write_bytes(b"previous model")
    target.chmod(0o640)
    data = tmp_path / "m.onnx.data"
    data.write_bytes(b"previous data")
    data.chmod(0o604)
    return target


# -- modes ----------------------------------------------------------------------------------

@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077])
def test_new_files_honour_the_umask(tmp_path: Path, umask: None, mask: int) -> None:
    """A new model and a new data file get 0666 & ~umask, as open(path, "wb") gives."""
    os.umask(mask)
    ge.graph.load(_model(big=True)).save(tmp_path / "m.onnx", external_data=True)
    assert _mode(tmp_path / "m.onnx") == 0o666 & ~mask
    assert _mode(tmp_path / "m.onnx.data") == 0o666 & ~mask
    assert os.umask(mask) == mask  # saving left the umask alone


@pytest.mark.parametrize("mask", [0o022, 0o002])
def test_overwritten_files_keep_their_mode(previous: Path, umask: None, mask: int) -> None:
    """Overwriting keeps the existing model's and data file's modes, whatever the umask."""
    os.umask(mask)
    ge.graph.load(_model(big=True)).save(previous, external_data=True)
    assert (_mode(previous), _mode(previous.parent / "m.onnx.data")) == (0o640, 0o604)
    reloaded = ge.graph.load(previous)
    assert reloaded.find_node_by_name("w").get_attr("value").numpy().shape == (4096,)


def test_umask_without_proc(tmp_path: Path, umask: None,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Where /proc/self/status cannot be read, the umask is read (and restored) under a lock."""
    os.umask(0o027)

    def no_proc(*args, **kwargs):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))

    monkeypatch.setattr(model_io, "open", no_proc, raising=False)
    assert save_target._umask() == 0o027
    ge.graph.load(_model()).save(tmp_path / "m.onnx")
    assert _mode(tmp_path / "m.onnx") == 0o640
    assert os.umask(0o022) == 0o027


# -- atomic replacement ---------------------------------------------------------------------

@pytest.mark.parametrize("external", [False, True])
def test_failed_export_keeps_the_previous_files(previous: Path, external: bool) -> None:
    """A graph that cannot be exported leaves the old model and data file byte-identical."""
    graph = ge.graph.load(_model(big=True))
    graph.remove_node(graph.find_node_by_name("add"))  # the output is now unconnected
    _save_fails(graph, previous, GraphError, "GE1001", "is not connected",
                external_data=external)


class _Unserialisable:
    """An exported model whose serialisation fails as protobuf's does over 2 GB."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self._model = model

    def __getattr__(self, name: str):
        return getattr(self._model, name)

    def SerializeToString(self) -> bytes:
        raise ValueError("Message onnx.ModelProto exceeds maximum protobuf size of 2GB")


@pytest.mark.parametrize("external", [False, True])
def test_failed_serialisation_keeps_the_previous_files(previous: Path, external: bool,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A model protobuf cannot serialise: ModelSaveError, the old files byte-identical."""
    export = model_io.graph_to_model
    monkeypatch.setattr(model_io, "graph_to_model",
                        lambda *args, **kwargs: _Unserialisable(export(*args, **kwargs)))
    err = _save_fails(ge.graph.load(_model(big=True)), previous, ModelSaveError, "GE1104",
                      f"cannot save to {previous}: the model is larger than protobuf's 2 GB "
                      "limit; save with external_data=True", external_data=external)
    assert err.path == str(previous)


def test_disk_full_keeps_the_previous_files(previous: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A write error on the new model file: ModelSaveError, the old files byte-identical."""
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, fd: int, mode: str) -> None:
            self.file = real_fdopen(fd, mode)

        def __enter__(self):
            return self

        def __exit__(self, *exc: object) -> None:
            self.file.close()

        def write(self, data: bytes) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(model_io.os, "fdopen", Full)
    _save_fails(ge.graph.load(_model()), previous, ModelSaveError, "GE1104",
                f"cannot save to {previous}: {os.strerror(errno.ENOSPC)}")


def _refuse_renaming_onto(target: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the rename of the model into place fail with EIO (other renames go through)."""
    real_replace = os.replace

    def refuse_the_model(src, dst):
        if Path(dst) == target:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_replace(src, dst)

    monkeypatch.setattr(model_io.os, "replace", refuse_the_model)


@pytest.mark.parametrize("with_previous_data", [True, False])
def test_failed_model_rename_puts_the_previous_data_back(
        previous: Path, monkeypatch: pytest.MonkeyPatch, with_previous_data: bool) -> None:
    """The data file is renamed into place first; when the model's rename then fails, the
    old data file is put back (or the new one removed), so the old model still loads."""
    if not with_previous_data:
        (previous.parent / "m.onnx.data").unlink()
    _refuse_renaming_onto(previous, monkeypatch)
    _save_fails(ge.graph.load(_model(big=True)), previous, ModelSaveError, "GE1104",
                os.strerror(errno.EIO), external_data=True)


def test_a_symlinked_data_file_is_put_back_as_a_symlink(
        previous: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A data file that is a symlink is set aside and put back as the symlink it was."""
    data = previous.parent / "m.onnx.data"
    data.rename(previous.parent / "real.data")
    data.symlink_to("real.data")
    _refuse_renaming_onto(previous, monkeypatch)
    _save_fails(ge.graph.load(_model(big=True)), previous, ModelSaveError, "GE1104",
                os.strerror(errno.EIO), external_data=True)


# -- the files a graph was loaded from --------------------------------------------------------

def _refusal(role: str, source: Path) -> str:
    return (f"would replace {os.path.realpath(source)}, the {role} this graph was loaded "
            "from; save elsewhere, or pass overwrite_input=True (ge compile: "
            "--overwrite-input) to replace it")


def test_saving_onto_the_loaded_model_is_refused(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The loaded model's path, another spelling of it, a symlink or a hard link to it:
    refused, whether the graph or a clone of it is saved, unless overwrite_input=True."""
    source = tmp_path / "m.onnx"
    onnx.save(_model(), source)
    source.chmod(0o640)
    (tmp_path / "link.onnx").symlink_to("m.onnx")
    os.link(source, tmp_path / "hard.onnx")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    graph = ge.graph.load(Path("..") / "m.onnx")  # loaded through a relative path
    for spelling in (source, Path("../m.onnx"), tmp_path / "sub" / ".." / "m.onnx",
                     tmp_path / "link.onnx", tmp_path / "hard.onnx"):
        err = _save_fails(graph, spelling, ModelSaveError, "GE1104",
                          f"cannot save to {spelling}: it " + _refusal("model file", source))
        assert err.path == str(spelling)
    _save_fails(graph.clone(), source, ModelSaveError, "GE1104", "the model file this graph")

    graph.save(source, overwrite_input=True)
    assert _mode(source) == 0o640
    assert ge.graph.load(source).to_onnx() == graph.to_onnx()


@pytest.fixture
def with_data(tmp_path: Path) -> Path:
    """`m.onnx` whose weight is in `weights.bin` beside it."""
    source = tmp_path / "m.onnx"
    onnx.save_model(_model(big=True), source, save_as_external_data=True,
                    location="weights.bin", size_threshold=256)
    return source


def test_saving_onto_a_loaded_data_file_is_refused(with_data: Path) -> None:
    """Neither the model nor the new data file may replace a data file the graph was loaded
    from, nor may the new data file replace the loaded model."""
    folder = with_data.parent
    graph = ge.graph.load(with_data)
    _save_fails(graph, folder / "weights.bin", ModelSaveError, "GE1104",
                "it " + _refusal("external data file", folder / "weights.bin"))
    _save_fails(graph, folder / "other.onnx", ModelSaveError, "GE1104",
                f"cannot save to {folder / 'other.onnx'}: its external data file weights.bin "
                + _refusal("external data file", folder / "weights.bin"),
                external_data=True, external_data_name="weights.bin")
    _save_fails(graph, folder / "other.onnx", ModelSaveError, "GE1104",
                "its external data file m.onnx " + _refusal("model file", with_data),
                external_data=True, external_data_name="m.onnx")
    # the model's own default data file name is no file it was loaded from
    graph.save(with_data, external_data=True, overwrite_input=True,
               external_data_name="weights.bin")
    assert ge.graph.load(with_data).to_onnx() == graph.to_onnx()


def test_saved_over_its_model_file_a_model_keeps_its_data_file(tmp_path: Path) -> None:
    """Trial JJ: saved over the file it was loaded from (overwrite_input), a model whose
    weights were in a data file named after it wrote them inline and left that file behind,
    unread; it keeps them in that file, written anew (external_data=None decides so here),
    unless external_data=False or another external_data_name is asked for."""
    source = tmp_path / "m.onnx"
    onnx.save_model(_model(big=True), source, save_as_external_data=True,
                    location="m.onnx_data", size_threshold=256)
    graph = ge.graph.load(source)
    assert graph.save(source, overwrite_input=True) == tmp_path / "m.onnx_data"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "m.onnx_data"]
    assert ge.graph.load(source).to_onnx() == graph.to_onnx()
    assert save_target.replaced_data_files(graph, source) == [
        Path(os.path.realpath(tmp_path / "m.onnx_data"))]
    assert save_target.replaced_data_files(graph, tmp_path / "other.onnx") == []

    graph = ge.graph.load(source)
    assert graph.save(source, overwrite_input=True, external_data=True,
                      external_data_name="new.bin") == tmp_path / "new.bin"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "m.onnx_data", "new.bin"]
    graph = ge.graph.load(source)
    assert graph.save(source, overwrite_input=True, external_data=False) is None
    assert ge.graph.load(source).to_onnx() == graph.to_onnx()


@pytest.mark.parametrize("location", ["m.onnx.data", "m.onnx_data", "m.data"])
def test_each_data_file_name_after_the_model_is_kept(tmp_path: Path, location: str) -> None:
    source = tmp_path / "m.onnx"
    onnx.save_model(_model(big=True), source, save_as_external_data=True,
                    location=location, size_threshold=256)
    assert ge.graph.load(source).save(source, overwrite_input=True) == tmp_path / location


@pytest.mark.parametrize("location", ["m_weights.bin", "m.weights.bin", "m.onnx.data.bak"])
def test_a_data_file_whose_name_only_begins_like_the_model_is_not_written_over(
        tmp_path: Path, location: str) -> None:
    """Trial NN: `m_weights.bin` counted as m.onnx's own and was written over while
    m2.onnx read it too; only the three names above are the model's."""
    source = tmp_path / "m.onnx"
    onnx.save_model(_model(big=True), source, save_as_external_data=True,
                    location=location, size_threshold=256)
    weights = (tmp_path / location).read_bytes()
    assert ge.graph.load(source).save(source, overwrite_input=True) is None  # (small: inline)
    assert (tmp_path / location).read_bytes() == weights


def test_saved_over_its_model_file_a_model_leaves_a_data_file_named_otherwise(
        with_data: Path) -> None:
    """Trial LL: `weights.bin`, not named after the model, may be read by other models
    too: it is never written over; the weights go where any save puts them."""
    folder = with_data.parent
    weights = (folder / "weights.bin").read_bytes()
    graph = ge.graph.load(with_data)
    assert graph.save(with_data, overwrite_input=True) is None  # (small: inline)
    assert (folder / "weights.bin").read_bytes() == weights
    assert ge.graph.load(with_data).to_onnx() == graph.to_onnx()


def test_a_proto_loaded_with_its_folder_remembers_the_data_file(with_data: Path) -> None:
    """load(proto, base_dir=...) reads (and so protects) the data file, not a model file."""
    proto = onnx.load(with_data, load_external_data=False)
    graph = ge.graph.load(proto, base_dir=with_data.parent)
    assert graph.model.source_files == {
        os.path.realpath(with_data.parent / "weights.bin"): "external data file"}
    _save_fails(graph, with_data.parent / "weights.bin", ModelSaveError, "GE1104",
                "the external data file this graph was loaded from")
    graph.save(with_data)  # the model file itself was not read: allowed


def test_graphs_not_loaded_from_files_save_anywhere(tmp_path: Path) -> None:
    """A graph loaded from bytes read no file and may be saved over any."""
    target = tmp_path / "m.onnx"
    onnx.save(_model(), target)
    graph = ge.graph.load(target.read_bytes())
    assert graph.model.source_files == {}
    graph.save(target)


def test_the_data_file_may_not_be_the_model_itself(tmp_path: Path) -> None:
    """external_data_name equal to the model's own name would lose the data: refused."""
    _save_fails(ge.graph.load(_model(big=True)), tmp_path / "m.onnx", ModelSaveError,
                "GE1104", "external data name 'm.onnx' is the model file's own name",
                external_data=True, external_data_name="m.onnx")


# -- no empty data file ----------------------------------------------------------------------

def test_external_data_without_large_tensors_writes_no_data_file(tmp_path: Path) -> None:
    """external_data=True with nothing over the threshold: one model file, no reference to a
    data file, no temporary file left."""
    graph = ge.graph.load(_model())
    graph.save(tmp_path / "m.onnx", external_data=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]
    saved = onnx.load(tmp_path / "m.onnx", load_external_data=False)
    assert all(t.data_location == TensorProto.DEFAULT for t in iter_tensors(saved))
    assert ge.graph.load(tmp_path / "m.onnx").to_onnx() == graph.to_onnx()


def test_no_data_file_leaves_an_existing_one_alone(previous: Path) -> None:
    """With nothing to put in it, an existing data file of that name is not touched."""
    data = previous.parent / "m.onnx.data"
    ge.graph.load(_model()).save(previous, external_data=True)
    assert (data.read_bytes(), _mode(data)) == (b"previous data", 0o604)
    assert sorted(p.name for p in previous.parent.iterdir()) == ["m.onnx", "m.onnx.data"]


# -- targets that are not regular files ---------------------------------------------------------


def _read_fifo(path: Path, into: list[bytes]) -> threading.Thread:
    def read() -> None:
        with open(path, "rb") as stream:
            into.append(stream.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader


def test_a_pipe_is_written_through_not_replaced(tmp_path: Path) -> None:
    """A device or pipe (`-o /dev/null`) is written to, never replaced by a regular file."""
    graph = ge.graph.load(_model())
    expected = tmp_path / "file.onnx"
    graph.save(expected)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = _read_fifo(fifo, received)
    graph.save(fifo)
    reader.join(timeout=10)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert received == [expected.read_bytes()]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.onnx", "pipe"]


def test_a_pipe_cannot_take_external_data(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ModelSaveError, match=r"it is not a regular file, and external data is "
                                              r"written into a file beside the model") as info:
        ge.graph.load(_model(big=True)).save(fifo, external_data=True)
    assert info.value.code == "GE1104"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


def test_a_symbolic_link_keeps_pointing_at_the_saved_file(tmp_path: Path) -> None:
    real, link = tmp_path / "real.onnx", tmp_path / "link.onnx"
    real.write_bytes(b"old")
    link.symlink_to(real.name)
    ge.graph.load(_model()).save(link)
    assert link.is_symlink() and os.readlink(link) == "real.onnx"
    onnx.checker.check_model(onnx.load(real))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.onnx", "real.onnx"]


def test_a_link_s_data_file_goes_beside_the_file_it_names(tmp_path: Path) -> None:
    """Saved through a link to a file in another folder (`current.onnx` -> `v1/model.onnx`),
    the data file goes beside the file written, named after it, and the model refers to it
    by that name; `save` and `CompileResult.save` return it. ge once wrote
    `current.onnx.data` beside the link, which the model in `v1` could not read."""
    (tmp_path / "v1").mkdir()
    real = tmp_path / "v1" / "model.onnx"
    real.touch()
    link = tmp_path / "current.onnx"
    link.symlink_to(Path("v1") / "model.onnx")
    graph = ge.graph.load(_model(big=True))
    for save in (lambda: graph.save(link, external_data=True),
                 lambda: ge.compile(_model(big=True)).save(link, external_data=True)):
        assert save() == real.resolve().parent / "model.onnx.data"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["current.onnx", "v1"]
        assert sorted(p.name for p in real.parent.iterdir()) == ["model.onnx",
                                                                 "model.onnx.data"]
        (w,) = onnx.load(real, load_external_data=False).graph.initializer
        assert {e.key: e.value for e in w.external_data}["location"] == "model.onnx.data"
        np.testing.assert_array_equal(
            onnx.numpy_helper.to_array(onnx.load(real).graph.initializer[0]),
            np.ones(4096, np.float32))
        assert os.readlink(link) == os.path.join("v1", "model.onnx")
    # `external_data_name` names a file beside the file written too
    assert graph.save(link, external_data=True, external_data_name="w.bin") == \
        real.resolve().parent / "w.bin"


def test_a_data_file_that_is_a_folder_is_refused(tmp_path: Path) -> None:
    """`m.onnx.data` a folder: refused before anything is written, naming it (ge once wrote
    the model, then failed renaming the data file: 'Not a directory')."""
    (tmp_path / "m.onnx.data").mkdir()
    target = tmp_path / "m.onnx"
    graph = ge.graph.load(_model(big=True))
    _save_fails(graph, target, ModelSaveError, "GE1104",
                f"cannot save to {target}: its external data file {target}.data is a folder; "
                "remove or rename it, or save elsewhere", external_data=True)
    with pytest.raises(ModelSaveError, match="is a folder"):
        ge.compile(_model(big=True)).save(target, external_data=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx.data"]
    graph.save(target)  # inline: the folder is not in the way
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "m.onnx.data"]
