"""Bad inputs to `ge.graph.load` and `Graph.save`: the error type, its code, a message that
says what is wrong, and nothing written (folders listed before and after; no model, data or
temporary file left by a failed save)."""

from __future__ import annotations

import errno
import os
import random
from pathlib import Path

import numpy as np
import onnx
import pytest
from model_corpus import loop_nested, model_with_external_data
from onnx import TensorProto as TP
from onnx import helper as oh

import ge.graph
from ge.errors import (
    ExternalDataError,
    GeError,
    GraphError,
    GraphTypeError,
    ModelLoadError,
    ModelNotFoundError,
    ModelSaveError,
)
from ge.graph import model_io
from ge.graph.external_data import iter_tensors
from model_paths import shared_model
from versions import onnx_at_least


def _snapshot(*folders: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder below `folders` with its size and modification time."""
    out: dict[str, tuple[int, int]] = {}
    for folder in folders:
        for root, dirs, files in os.walk(folder):
            for name in dirs + files:
                path = os.path.join(root, name)
                stat = os.lstat(path)
                out[path] = (stat.st_size, stat.st_mtime_ns)
    return out


def _check(err: GeError, kind: type[GeError], code: str, fragment: str) -> None:
    assert type(err) is kind
    assert err.code == code
    assert fragment in err.message
    assert str(err).startswith(f"[{code}] ")


def _load_fails(source, kind: type[GeError], code: str, fragment: str, *watch: Path,
                **kwargs) -> GeError:
    before = _snapshot(*watch)
    with pytest.raises(kind) as info:
        ge.graph.load(source, **kwargs)
    _check(info.value, kind, code, fragment)
    assert _snapshot(*watch) == before, "a failed load changed files"
    return info.value


# -- files that are not (whole) ONNX models -------------------------------------------------

def test_missing_file(tmp_path: Path) -> None:
    """A path that does not exist: ModelNotFoundError (a FileNotFoundError too) naming it."""
    path = tmp_path / "missing.onnx"
    err = _load_fails(path, ModelNotFoundError, "GE1102", "model file not found", tmp_path)
    assert isinstance(err, FileNotFoundError) and isinstance(err, ModelLoadError)
    assert err.path == str(path) and str(path) in err.message
    assert not path.exists()


def test_directory_instead_of_file(tmp_path: Path) -> None:
    """A folder is not a model file."""
    folder = tmp_path / "model.onnx"
    folder.mkdir()
    err = _load_fails(folder, ModelLoadError, "GE1101", "is not a file", tmp_path)
    assert err.path == str(folder)


@pytest.mark.parametrize("content", [
    pytest.param(b"this is a text file, not an ONNX model\n" * 4, id="text"),
    pytest.param(np.random.default_rng(0).bytes(4096), id="random-bytes"),
    pytest.param(loop_nested().graph.initializer[0].SerializeToString(), id="tensor-proto"),
])
def test_not_onnx(tmp_path: Path, content: bytes) -> None:
    """Text, random bytes or another protobuf message are refused as not ONNX."""
    path = tmp_path / "model.onnx"
    path.write_bytes(content)
    err = _load_fails(path, ModelLoadError, "GE1101", "(the file is truncated or not ONNX)",
                      tmp_path)
    assert err.path == str(path) and str(path) in err.message


def test_graph_proto_is_not_a_model(tmp_path: Path) -> None:
    """A serialized GraphProto parses as protobuf but is no model: it has no graph."""
    path = tmp_path / "graph.onnx"
    path.write_bytes(loop_nested().graph.SerializeToString())
    _load_fails(path, ModelLoadError, "GE1101", "is not an ONNX model: it has no graph",
                tmp_path)


def test_empty_file(tmp_path: Path) -> None:
    """An empty file is an empty message: no graph."""
    path = tmp_path / "empty.onnx"
    path.touch()
    _load_fails(path, ModelLoadError, "GE1101", "it has no graph", tmp_path)


def test_truncated_real_model(tmp_path: Path, shared_models: Path) -> None:
    """A real model cut at half is refused as truncated."""
    data = (shared_models / "vit_tiny.onnx").read_bytes()
    path = tmp_path / "vit_tiny.onnx"
    path.write_bytes(data[: len(data) // 2])
    _load_fails(path, ModelLoadError, "GE1101", "is not a readable ONNX model (the file is "
                "truncated or not ONNX)", tmp_path)


def test_bad_bytes_and_bad_argument() -> None:
    """Serialized bytes get the same check as files; other argument types are a TypeError."""
    _load_fails(b"\x08\x07garbage", ModelLoadError, "GE1101", "not a readable ONNX model")
    with pytest.raises(GraphTypeError, match="load\\(\\) takes a path"):
        ge.graph.load(42)  # type: ignore[arg-type]


def _broken_graph(nodes: list[onnx.NodeProto]) -> onnx.ModelProto:
    g = oh.make_graph(nodes, "broken", [oh.make_tensor_value_info("x", TP.FLOAT, [2])],
                      [oh.make_tensor_value_info("y", TP.FLOAT, [2])])
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)], ir_version=8)


def test_undefined_value(tmp_path: Path) -> None:
    """A node reading a value nothing produces is named in the error."""
    model = _broken_graph([oh.make_node("Add", ["x", "nowhere"], ["y"], name="adder")])
    err = _load_fails(model, ModelLoadError, "GE1101", "'nowhere', which no node, graph input "
                      "or initializer produces", tmp_path)
    assert err.nodes == ("adder",)


def test_undefined_graph_output(tmp_path: Path) -> None:
    """A graph output nothing produces is named as the graph output it is."""
    model = _broken_graph([oh.make_node("Relu", ["x"], ["r"], name="relu")])
    _load_fails(model, ModelLoadError, "GE1101", "graph 'broken': graph output 0 ('y') is "
                "produced by no node, graph input or initializer", tmp_path)


@pytest.mark.parametrize("op_type", ["Data", "NetOutput"])
@pytest.mark.parametrize("in_body", [False, True], ids=["main graph", "If body"])
def test_an_operator_named_like_graph_inputs_or_outputs(op_type: str, in_body: bool,
                                                        tmp_path: Path) -> None:
    """A custom domain's `Data` or `NetOutput` operator was loaded as the IR's graph input or
    output node and left out of the model written (and refused by validation): refused
    when loaded, naming it, with what to do."""
    custom = oh.make_node(op_type, ["x"], ["r"], name="mine", domain="my.domain")
    if in_body:
        body = oh.make_graph([custom], "then", [], [oh.make_tensor_value_info("r", TP.FLOAT,
                                                                              [2])])
        other = oh.make_graph([oh.make_node("Neg", ["x"], ["n"])], "else", [],
                              [oh.make_tensor_value_info("n", TP.FLOAT, [2])])
        nodes = [oh.make_node("If", ["c"], ["y"], then_branch=body, else_branch=other)]
        inputs = [oh.make_tensor_value_info("x", TP.FLOAT, [2]),
                  oh.make_tensor_value_info("c", TP.BOOL, [])]
    else:
        nodes = [custom, oh.make_node("Relu", ["r"], ["y"])]
        inputs = [oh.make_tensor_value_info("x", TP.FLOAT, [2])]
    model = oh.make_model(
        oh.make_graph(nodes, "g", inputs, [oh.make_tensor_value_info("y", TP.FLOAT, [2])]),
        opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("my.domain", 1)])
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    # (a body by the node holding it: here an If of no name, by its index and its output)
    graph_name = ("'then', then_branch of unnamed If node (index 0 in the node list, "
                  "computing 'y')") if in_body else "'g'"
    err = _load_fails(path, ModelLoadError, "GE1101", f"graph {graph_name}: node 'mine' is an "
                      f"operator {op_type!r} of domain 'my.domain'; ge names its graph inputs "
                      "'Data' and its graph outputs 'NetOutput' and cannot hold an operator of "
                      "either name", tmp_path)
    assert err.nodes == ("mine",)
    assert "rename the operator (op_type)" in str(err)


def test_an_ir_version_onnx_does_not_read(tmp_path: Path) -> None:
    """A model stamped with a newer IR version than onnx knows is refused when loaded (it
    was refused by onnx.checker only when saving, after every pass ran)."""
    model = _broken_graph([oh.make_node("Relu", ["x"], ["y"], name="relu")])
    model.ir_version = onnx.IR_VERSION + 85
    path = tmp_path / "new.onnx"
    path.write_bytes(model.SerializeToString())
    _load_fails(path, ModelLoadError, "GE1101",
                f"the model's IR version is {onnx.IR_VERSION + 85}; onnx {onnx.__version__} "
                f"reads up to {onnx.IR_VERSION} (a newer exporter wrote it, or the file is "
                "damaged): nothing can check it, and runtimes refuse it", tmp_path)


def test_strings_that_are_not_utf8(tmp_path: Path) -> None:
    """ONNX strings are UTF-8: bytes that are not failed later, in ConstantFolding (blamed on
    that pass), ge diff or ge run; the load names the tensor."""
    strings = oh.make_tensor("strs", TP.STRING, [2], [b"ok", b"\xff\xfe"])
    g = oh.make_graph([oh.make_node("Identity", ["strs"], ["y"], name="id")], "s", [],
                      [oh.make_tensor_value_info("y", TP.STRING, [2])], [strings])
    model = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    _load_fails(model, ModelLoadError, "GE1101", "graph 's': initializer 'strs' holds a "
                "string that is not UTF-8 text (element 1: b'\\xff\\xfe'); ONNX strings are "
                "UTF-8", tmp_path)
    constant = oh.make_node("Constant", [], ["y"], name="c", value_strings=[b"\xc3"])
    g = oh.make_graph([constant], "s", [], [oh.make_tensor_value_info("y", TP.STRING, [1])])
    model = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    _load_fails(model, ModelLoadError, "GE1101", "Constant node 'c' holds a string that is "
                "not UTF-8 text (element 0: b'\\xc3')", tmp_path)


def test_value_defined_twice(tmp_path: Path) -> None:
    """Two nodes producing one value name are refused."""
    model = _broken_graph([oh.make_node("Relu", ["x"], ["y"]), oh.make_node("Neg", ["x"], ["y"])])
    _load_fails(model, ModelLoadError, "GE1101", "value 'y' is defined twice", tmp_path)


def test_load_leaves_the_proto_alone(tmp_path: Path) -> None:
    """load(ModelProto) does not modify the proto, not even when it resolves external data or
    when the graph is edited and exported afterwards."""
    model = loop_nested()
    before = model.SerializeToString()
    graph = ge.graph.load(model)
    graph.nodes_of_type("Loop")[0].get_subgraphs()[0].nodes_of_type("Mul")[0].set_attr("x", 1)
    graph.remove_node(graph.find_node_by_name("w"))
    graph.to_onnx()
    assert model.SerializeToString() == before

    path = tmp_path / "model.onnx"
    onnx.save_model(model_with_external_data(), path, save_as_external_data=True,
                    location="weights.bin", size_threshold=0)
    on_disk = onnx.load(path, load_external_data=False)
    before = on_disk.SerializeToString()
    graph = ge.graph.load(on_disk, base_dir=tmp_path)
    exported = graph.to_onnx()
    assert on_disk.SerializeToString() == before
    assert not any(t.data_location == TP.EXTERNAL for t in iter_tensors(exported))
    exported.graph.node[0].name = "changed"  # the export is the caller's own copy
    exported.graph.initializer[0].raw_data = b"\0" * len(exported.graph.initializer[0].raw_data)
    assert graph.to_onnx() == ge.graph.load(on_disk, base_dir=tmp_path).to_onnx()


# -- external data --------------------------------------------------------------------------

@pytest.fixture
def external(tmp_path: Path) -> Path:
    """A model folder `tmp_path/model` whose weights are in `weights.bin` beside the model,
    with a folder `tmp_path/outside` holding a copy of the weights."""
    folder = tmp_path / "model"
    folder.mkdir()
    path = folder / "model.onnx"
    onnx.save_model(model_with_external_data(), path, save_as_external_data=True,
                    location="weights.bin", size_threshold=256)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "weights.bin").write_bytes((folder / "weights.bin").read_bytes())
    ge.graph.load(path)  # loads while intact
    return path


def _point_to(path: Path, **entries: str) -> None:
    """Rewrite the external data entries (location, offset, length) of the model's tensors."""
    model = onnx.load(path, load_external_data=False)
    for tensor in iter_tensors(model):
        for entry in tensor.external_data:
            if entry.key in entries:
                entry.value = entries[entry.key]
    path.write_bytes(model.SerializeToString())


def test_missing_external_data_file(external: Path) -> None:
    """A referenced data file that does not exist is named in the error."""
    (external.parent / "weights.bin").unlink()
    err = _load_fails(external, ExternalDataError, "GE1103", "external data file "
                      "'weights.bin' does not exist", external.parent.parent)
    assert isinstance(err, ModelLoadError)


def test_external_data_too_short(external: Path) -> None:
    """A data file shorter than offset + length of a tensor is refused."""
    data = external.parent / "weights.bin"
    data.write_bytes(data.read_bytes()[:100])
    _load_fails(external, ExternalDataError, "GE1103", "external data asks for bytes",
                external.parent.parent)


def test_external_data_negative_offset(external: Path) -> None:
    """A negative offset is refused like a short file."""
    _point_to(external, offset="-8")
    _load_fails(external, ExternalDataError, "GE1103", "asks for bytes -8..",
                external.parent.parent)


def test_external_data_without_location(external: Path) -> None:
    """An external reference without a location is refused."""
    _point_to(external, location="")
    _load_fails(external, ExternalDataError, "GE1103", "has external data without a location",
                external.parent.parent)


def test_external_data_with_dotdot(external: Path) -> None:
    """`../outside/weights.bin` exists but is outside the model's folder: refused."""
    _point_to(external, location="../outside/weights.bin")
    _load_fails(external, ExternalDataError, "GE1103", "outside the model's folder",
                external.parent.parent)


def test_external_data_absolute_location(external: Path) -> None:
    """An absolute location is refused even when it points at an existing file."""
    target = external.parent.parent / "outside" / "weights.bin"
    _point_to(external, location=str(target))
    _load_fails(external, ExternalDataError, "GE1103", "is an absolute path",
                external.parent.parent)


def test_external_data_symlink_escaping(external: Path) -> None:
    """A symlink inside the folder pointing outside it is refused."""
    link = external.parent / "weights.bin"
    link.unlink()
    link.symlink_to(external.parent.parent / "outside" / "weights.bin")
    _load_fails(external, ExternalDataError, "GE1103", "outside the model's folder",
                external.parent.parent)


def _hub_cache_snapshot(tmp_path: Path) -> Path:
    """A model laid out as the Hugging Face hub cache lays it out: the snapshot's files are
    symbolic links into ../../blobs, named by their hashes. Returns the model's path."""
    repo = tmp_path / "models--org--model"
    snapshot, blobs = repo / "snapshots" / "0123abcd", repo / "blobs"
    snapshot.mkdir(parents=True)
    blobs.mkdir()
    onnx.save_model(model_with_external_data(), snapshot / "model.onnx",
                    save_as_external_data=True, location="model.onnx_data",
                    size_threshold=256)
    for name, blob in (("model.onnx", "9f86d081"), ("model.onnx_data", "60303ae2")):
        (snapshot / name).rename(blobs / blob)
        (snapshot / name).symlink_to(Path("..", "..", "blobs", blob))
    return snapshot / "model.onnx"


def test_a_hub_cache_snapshot_is_refused_saying_what_to_do(tmp_path: Path) -> None:
    """onnx.load refuses the data file linked out of the folder, and so does ge (the folder
    is the boundary of what a model may make ge read); the error says how to get a folder
    every tool reads, and that advice works."""
    import shutil

    model = _hub_cache_snapshot(tmp_path)
    snapshot = model.parent.resolve()
    blob = (snapshot.parent.parent / "blobs" / "60303ae2").resolve()
    err = _load_fails(model, ExternalDataError, "GE1103", "", tmp_path)
    assert err.message == (  # (the model file first: a batch's log says which model)
        f"{model}: tensor 'w1': external data location 'model.onnx_data' resolves to {blob}, "
        "outside "
        f"the model's folder {snapshot}; refusing to read it: 'model.onnx_data' is, or "
        "passes through, a symbolic link out of the folder (as in a Hugging Face cache, "
        "whose snapshot files link into ../../blobs), which onnx refuses too; copy the "
        f"folder with its links dereferenced, cp -rL {snapshot} NEW_FOLDER, and load the "
        "model from NEW_FOLDER")
    assert err.path == str(blob)
    if onnx_at_least("1.21"):  # (older onnx follows the link)
        with pytest.raises(onnx.checker.ValidationError):
            onnx.load(model)

    copy = tmp_path / "copy"
    shutil.copytree(snapshot, copy, symlinks=False)  # what cp -rL does
    assert not any(p.is_symlink() for p in copy.iterdir())
    loaded = ge.graph.load(copy / "model.onnx").to_onnx()
    read = onnx.load(copy / "model.onnx")  # onnx reads it too
    assert {t.name: t.raw_data for t in loaded.graph.initializer} == {
        t.name: t.raw_data for t in read.graph.initializer}


def test_a_hub_cache_snapshot_compiled_writes_nothing(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ge.cli import cli

    model = _hub_cache_snapshot(tmp_path)
    out = tmp_path / "out.onnx"
    before = _snapshot(tmp_path)
    result = CliRunner().invoke(cli, ["compile", str(model), "-o", str(out)])
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"ge: [GE1103] {model}: tensor 'w1': external data "
                                    "location ")
    assert "cp -rL " in result.stderr and "Traceback" not in result.stderr
    assert _snapshot(tmp_path) == before


def test_a_location_leading_out_itself_gets_no_link_advice(external: Path) -> None:
    """`..` in the location: nothing is a link, copying the folder would not help."""
    _point_to(external, location="../outside/weights.bin")
    err = _load_fails(external, ExternalDataError, "GE1103", "outside the model's folder",
                      external.parent.parent)
    assert err.message.endswith("; refusing to read it")


def test_external_data_symlinked_folder_escaping(external: Path) -> None:
    """A location through a symlinked folder that leads outside is refused."""
    (external.parent / "data").symlink_to(external.parent.parent / "outside")
    _point_to(external, location="data/weights.bin")
    _load_fails(external, ExternalDataError, "GE1103", "outside the model's folder",
                external.parent.parent)


@pytest.mark.parametrize("through_folder", [False, True])
def test_external_data_symlink_inside_is_refused_as_onnx_refuses_it(
        external: Path, through_folder: bool) -> None:
    """A symlink that stays inside the model's folder, as the location or a folder it passes
    through, was followed; onnx.load refuses every link in a location (from 1.21; trial UU:
    ge accepted what onnx refuses, though its own docstring said links stay refused), so ge
    refuses it too, saying where it points and what works (a copy without links)."""
    import shutil

    expected = onnx.load(external)
    folder = external.parent
    (folder / "real").mkdir()
    (folder / "weights.bin").rename(folder / "real" / "weights.bin")
    if through_folder:
        (folder / "linked").symlink_to("real")
        _point_to(external, location="linked/weights.bin")
        said = ("external data location 'linked/weights.bin' passes through 'linked', a "
                f"symbolic link (to 'real' in the model's folder {folder.resolve()})")
    else:
        (folder / "weights.bin").symlink_to(folder / "real" / "weights.bin")
        said = ("external data location 'weights.bin' is a symbolic link (to "
                f"'real/weights.bin' in the model's folder {folder.resolve()})")
    err = _load_fails(external, ExternalDataError, "GE1103", "", external.parent.parent)
    assert err.message == (
        f"{external}: tensor 'w1': {said}: onnx refuses every link in a location (onnxruntime "
        f"follows one that stays in the folder); copy the folder with its links dereferenced, "
        f"cp -rL {folder.resolve()} NEW_FOLDER, and load the model from NEW_FOLDER")
    if onnx_at_least("1.23" if through_folder else "1.21"):  # (as run; older ones follow)
        with pytest.raises(onnx.checker.ValidationError):
            onnx.load(external)
    copy = external.parent.parent / "copy"
    shutil.copytree(folder, copy, symlinks=False)  # what cp -rL does
    assert ge.graph.load(copy / external.name).to_onnx() == expected


def test_external_data_of_a_proto_needs_its_folder(external: Path) -> None:
    """A proto with external references loaded without base_dir says where to look."""
    model = onnx.load(external, load_external_data=False)
    _load_fails(model, ExternalDataError, "GE1103", "load it from its path or pass base_dir",
                external.parent.parent)


# -- save -----------------------------------------------------------------------------------

@pytest.fixture
def graph() -> ge.graph.Graph:
    return ge.graph.load(model_with_external_data())


def _save_fails(graph: ge.graph.Graph, target: Path, kind: type[GeError], code: str,
                fragment: str, watch: Path, **kwargs) -> GeError:
    before = _snapshot(watch)
    with pytest.raises(kind) as info:
        graph.save(target, **kwargs)
    _check(info.value, kind, code, fragment)
    assert _snapshot(watch) == before, "a failed save left files behind or changed some"
    return info.value


def test_save_into_missing_folder(graph: ge.graph.Graph, tmp_path: Path) -> None:
    """Saving into a folder that does not exist fails and creates no folder."""
    target = tmp_path / "missing" / "model.onnx"
    err = _save_fails(graph, target, ModelSaveError, "GE1104", "is not an existing folder",
                      tmp_path)
    assert isinstance(err, OSError) and err.path == str(target)
    assert not target.parent.exists()


def test_save_below_a_regular_file(graph: ge.graph.Graph, tmp_path: Path) -> None:
    """Saving to `file/model.onnx` where `file` is a regular file fails; the file stays."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    _save_fails(graph, blocker / "model.onnx", ModelSaveError, "GE1104",
                "is not an existing folder", tmp_path, external_data=True)
    assert blocker.read_text() == "not a folder"


def test_save_onto_a_folder(graph: ge.graph.Graph, tmp_path: Path) -> None:
    """Saving to a path that is a folder fails and leaves the folder as it was."""
    target = tmp_path / "model.onnx"
    target.mkdir()
    (target / "keep.txt").write_text("keep")
    _save_fails(graph, target, ModelSaveError, "GE1104", "it is a folder", tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write a read-only folder")
def test_save_into_a_read_only_folder(graph: ge.graph.Graph, tmp_path: Path) -> None:
    """A folder the user may not write is refused before anything is written."""
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        _save_fails(graph, folder / "model.onnx", ModelSaveError, "GE1104",
                    "permission denied", tmp_path)
    finally:
        folder.chmod(0o700)


def test_save_with_a_bad_data_file_name(graph: ge.graph.Graph, tmp_path: Path) -> None:
    """The external data file is written beside the model: a name with a folder is refused."""
    _save_fails(graph, tmp_path / "model.onnx", ModelSaveError, "GE1104",
                "must be a plain file name", tmp_path, external_data=True,
                external_data_name=os.path.join("sub", "weights.bin"))


def test_save_a_graph_that_cannot_be_exported(tmp_path: Path) -> None:
    """A graph whose output is unconnected fails before anything is written (GraphError)."""
    graph = ge.graph.load(loop_nested())
    out = graph.get_net_output()
    src, index = out.get_in_data_nodes_and_port_indexes(0)
    graph.remove_edge(src, index, out, 0)
    _save_fails(graph, tmp_path / "model.onnx", GraphError, "GE1001", "is not connected",
                tmp_path)


def test_disk_full_while_writing_external_data(graph: ge.graph.Graph, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A write error half-way through the data file: ModelSaveError, and neither the model,
    nor the data file, nor a temporary file is left."""
    real_place = model_io.ExternalDataWriter.place

    def place_then_fail(self, tensor, payload):
        real_place(self, tensor, payload)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(model_io.ExternalDataWriter, "place", place_then_fail)
    _save_fails(graph, tmp_path / "model.onnx", ModelSaveError, "GE1104",
                os.strerror(errno.ENOSPC), tmp_path, external_data=True)


def test_failed_save_keeps_the_previous_model(graph: ge.graph.Graph, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """When the final rename fails, the model already at the path is left as it was and the
    temporary files are removed."""
    target = tmp_path / "model.onnx"
    target.write_bytes(b"previous model")
    (tmp_path / "model.onnx.data").write_bytes(b"previous data")

    def refuse(src, dst):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(model_io.os, "replace", refuse)
    _save_fails(graph, target, ModelSaveError, "GE1104", os.strerror(errno.EIO), tmp_path,
                external_data=True)
    monkeypatch.undo()
    assert target.read_bytes() == b"previous model"
    graph.save(target)  # and a later save works
    assert target.read_bytes() == graph.to_onnx().SerializeToString()


def test_corrupted_bytes_give_ge_errors_only() -> None:
    """Random byte flips and cuts of a real model either load or fail with a GeError (never
    a raw Python exception), and what loads also validates, saves and dumps or says why not.
    Names that are not UTF-8 text are named as a corrupt file."""
    data = shared_model("control_flow").read_bytes()
    outcomes: set[str] = set()
    for seed in range(400):
        rng = random.Random(seed)
        corrupt = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            corrupt[rng.randrange(len(corrupt))] = rng.randrange(256)
        if rng.random() < 0.3:
            corrupt = corrupt[: rng.randrange(len(corrupt))]
        try:
            graph = ge.graph.load(bytes(corrupt))
            graph.validate()
            graph.to_onnx().SerializeToString()
            str(graph)
            outcomes.add("ok")
        except GeError as err:
            outcomes.add(type(err).__name__)
    assert {"ok", "ModelLoadError"} <= outcomes


def test_a_name_that_is_not_utf8_is_reported_as_corruption() -> None:
    graph = oh.make_graph([oh.make_node("Relu", ["x"], ["y"], name="QQQQ")], "g",
                          [oh.make_tensor_value_info("x", TP.FLOAT, [1])],
                          [oh.make_tensor_value_info("y", TP.FLOAT, [1])])
    data = oh.make_model(graph).SerializeToString().replace(b"QQQQ", b"Q\xffQQ")
    with pytest.raises(ModelLoadError,
                       match=r"is not valid UTF-8 text .* the model file is corrupt") as info:
        ge.graph.load(data)
    assert info.value.code == "GE1101"


@pytest.mark.parametrize(("flag", "value"), [("external_data", "false"),
                                              ("external_data", "weights.bin"),
                                              ("overwrite_input", "yes"),
                                              ("value_info", 0),
                                              ("strip_metadata", "no")])
def test_save_flags_must_be_bools(tmp_path: Path, flag: str, value: object) -> None:
    """Trial Z: `external_data="false"` wrote a data file (a str is true), and
    `external_data="weights.bin"` one named after the model, not weights.bin."""
    from ge.errors import GraphTypeError
    from ge.graph import Graph

    graph = Graph("g")
    with pytest.raises(GraphTypeError) as info:
        graph.save(tmp_path / "m.onnx", **{flag: value})
    assert info.value.code == "GE1002"
    assert str(info.value.args[0]).startswith(f"{flag} must be True or False")
    if value == "weights.bin":
        assert str(info.value.args[0]).endswith("the data file is named by external_data_name")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("path", [123, None, ["m.onnx"], b"m.onnx"])
def test_a_path_of_another_type_is_a_graph_type_error(tmp_path: Path, path: object) -> None:
    """Trial AF: `save(123)` raised os.fspath's TypeError, which a service catching GeError
    let through; CompileResult.save too, with overwrite_input before anything."""
    import ge
    from ge.errors import GraphTypeError
    from model_paths import shared_model

    result = ge.compile(shared_model("control_flow"))
    for save in (result.graph.save, result.save,
                 lambda p: result.save(p, overwrite_input=True)):
        with pytest.raises(GraphTypeError) as info:
            save(path)
        assert info.value.code == "GE1002"
        assert info.value.message.startswith("the path to save to must be a str or an "
                                             f"os.PathLike, got {type(path).__name__} ")
    assert list(tmp_path.iterdir()) == []
