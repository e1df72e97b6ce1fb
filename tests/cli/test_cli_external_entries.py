"""External-data entries a model gets wrong are the model's error, said at load and by
`ge inspect` (trial UU): an external tensor naming no location was read as if it had no
external data (loading looks for the word 'location' first) and failed later inside a pass
as "a bug in ge"; an offset that is no integer was a raw ValueError."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_helpers import listing, run_ge
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper

import ge
import ge.graph
from ge.errors import ExternalDataError, ModelLoadError


def _model(folder: Path, entries: list[tuple[str, str]]) -> Path:
    weight = numpy_helper.from_array(np.arange(4, dtype=np.float32), "w")
    weight.ClearField("raw_data")
    weight.data_location = TP.EXTERNAL
    for key, value in entries:
        entry = weight.external_data.add()
        entry.key, entry.value = key, value
    graph = oh.make_graph([oh.make_node("Add", ["x", "w"], ["y"], name="add")], "g",
                          [oh.make_tensor_value_info("x", TP.FLOAT, [4])],
                          [oh.make_tensor_value_info("y", TP.FLOAT, [4])], [weight])
    path = folder / "m.onnx"
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]), path)
    (folder / "d.data").write_bytes(bytes(256))
    return path


@pytest.mark.parametrize(("entries", "error", "code", "message"), [
    ([("offset", "0")], ModelLoadError, "GE1101",
     "graph 'g': initializer 'w' is marked as stored in an external data file but names "
     "none (no 'location' entry): the model is malformed"),
    ([("location", "d.data"), ("offset", "abc")], ExternalDataError, "GE1103",
     "tensor 'w': external data offset 'abc' is not an integer (in d.data)"),
    ([("location", "d.data"), ("length", "16.0")], ExternalDataError, "GE1103",
     "tensor 'w': external data length '16.0' is not an integer (in d.data)"),
])
def test_bad_external_entries_are_the_models_error(
        tmp_path: Path, entries: list[tuple[str, str]], error: type, code: str,
        message: str) -> None:
    path = _model(tmp_path, entries)
    listed = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(error) as caught:
        ge.graph.load(path)
    assert caught.value.code == code and message in caught.value.message
    with pytest.raises(error):
        ge.compile(path)
    for command in (["inspect", str(path)], ["compile", str(path), "-o",
                                             str(tmp_path / "out.onnx")]):
        status, _, err = run_ge(*command)
        assert status == 1 and f"[{code}]" in err and message in err
    assert sorted(p.name for p in tmp_path.iterdir()) == listed  # nothing written


def test_a_functions_attribute_default_in_external_data_is_read(tmp_path: Path) -> None:
    """A model-local function's default for an attribute (`attribute_proto`) may point into
    the data file: it was never read, and the model written elsewhere pointed at a data file
    that is not there (trial UU)."""
    import onnxruntime as ort

    (tmp_path / "m.data").write_bytes(np.full(4, 10, np.float32).tobytes())
    default = onnx.TensorProto(name="dv", data_type=TP.FLOAT, dims=[4],
                               data_location=TP.EXTERNAL)
    for key, value in (("location", "m.data"), ("offset", "0"), ("length", "16")):
        entry = default.external_data.add()
        entry.key, entry.value = key, value
    constant = oh.make_node("Constant", [], ["k"])
    ref = constant.attribute.add()
    ref.name, ref.ref_attr_name, ref.type = "value", "w", onnx.AttributeProto.TENSOR
    function = oh.make_function("loc", "F", ["a"], ["b"],
                                [constant, oh.make_node("Add", ["a", "k"], ["b"])],
                                [oh.make_opsetid("", 17)])
    attribute = onnx.AttributeProto(name="w", type=onnx.AttributeProto.TENSOR)
    attribute.t.CopyFrom(default)
    function.attribute_proto.append(attribute)
    graph = oh.make_graph([oh.make_node("F", ["x"], ["y"], domain="loc")], "g",
                          [oh.make_tensor_value_info("x", TP.FLOAT, [4])],
                          [oh.make_tensor_value_info("y", TP.FLOAT, [4])])
    path = tmp_path / "m.onnx"
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17),
                                                  oh.make_opsetid("loc", 1)],
                            functions=[function]), path)
    elsewhere = tmp_path / "out"
    elsewhere.mkdir()
    for extra in ([], ["--inline-functions"]):
        out = elsewhere / f"o{len(extra)}.onnx"
        status, _, err = run_ge("compile", str(path), "-o", str(out), *extra)
        assert status == 0, err
        got = ort.InferenceSession(str(out)).run(None, {"x": np.ones(4, np.float32)})[0]
        np.testing.assert_array_equal(got, np.full(4, 11, np.float32))
    assert sorted(p.name for p in elsewhere.iterdir()) == ["o0.onnx", "o1.onnx"]


def test_external_data_leaves_sparse_tensors_in_the_model(tmp_path: Path) -> None:
    """`--external-data` moved a sparse initializer's values and indices into the data file,
    which onnx's checker and `onnx.load` do not read back (trial UU); they stay in the model,
    as onnx's own writer leaves them, and a dense weight beside them still moves."""
    import onnxruntime as ort

    indices = np.sort(np.random.default_rng(0).permutation(1000)[:600]).astype(np.int64)
    sparse = oh.make_sparse_tensor(
        numpy_helper.from_array(np.arange(600, dtype=np.float32) + 1, "s"),
        numpy_helper.from_array(indices, "s_indices"), [1000])
    dense = numpy_helper.from_array(np.linspace(0, 1, 1000, dtype=np.float32), "d")
    graph = oh.make_graph([oh.make_node("Add", ["x", "s"], ["t"], name="add_s"),
                           oh.make_node("Mul", ["t", "d"], ["y"], name="mul_d")], "g",
                          [oh.make_tensor_value_info("x", TP.FLOAT, [1000])],
                          [oh.make_tensor_value_info("y", TP.FLOAT, [1000])], [dense],
                          sparse_initializer=[sparse])
    source = tmp_path / "in.onnx"
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]), source)
    out = tmp_path / "out" / "o.onnx"
    out.parent.mkdir()
    status, _, err = run_ge("compile", str(source), "-o", str(out), "--external-data")
    assert status == 0, err
    assert sorted(p.name for p in out.parent.iterdir()) == ["o.onnx", "o.onnx.data"]
    onnx.checker.check_model(str(out))
    loaded = onnx.load(str(out))
    onnx.checker.check_model(loaded)
    written = onnx.load(str(out), load_external_data=False)
    (kept,) = written.graph.sparse_initializer
    assert kept.values.data_location != TP.EXTERNAL and kept.indices.data_location != TP.EXTERNAL
    assert written.graph.initializer[0].data_location == TP.EXTERNAL
    x = np.ones(1000, np.float32)
    np.testing.assert_array_equal(
        ort.InferenceSession(str(out)).run(None, {"x": x})[0],
        ort.InferenceSession(str(source)).run(None, {"x": x})[0])


def _linked(folder: Path, link: str, to: str) -> None:
    (folder / link).symlink_to(to)


#: (location or entries, how the folder is laid out, what loading says after the tensor):
#: the references trial UU found ge inspect (and loading) passing while onnx or onnxruntime
#: refuse them (UU #8), and a folder given as the location ("does not exist" before).
_REFUSED = {
    "climbs out and back in": (
        [("location", "../m/d.data")], None,
        "external data location '../m/d.data' climbs out of the model's folder {base} and "
        "back into it ('d.data' in it): onnx refuses a location whose '..' leads above the "
        "folder (onnxruntime reads it)"),
    "a link to a file inside": (
        [("location", "link.data")], lambda f: _linked(f, "link.data", "d.data"),
        "external data location 'link.data' is a symbolic link (to 'd.data' in the model's "
        "folder {base}): onnx refuses every link in a location (onnxruntime follows one that "
        "stays in the folder); copy the folder with its links dereferenced, cp -rL {base} "
        "NEW_FOLDER, and load the model from NEW_FOLDER"),
    "through a linked folder inside": (
        [("location", "sub/d.data")],
        lambda f: ((f / "real").mkdir(), (f / "real" / "d.data").write_bytes(bytes(16)),
                   _linked(f, "sub", "real")),
        "external data location 'sub/d.data' passes through 'sub', a symbolic link (to "
        "'real' in the model's folder {base}): onnx refuses every link in a location "
        "(onnxruntime follows one that stays in the folder); copy the folder with its links "
        "dereferenced, cp -rL {base} NEW_FOLDER, and load the model from NEW_FOLDER"),
    "a link out": (
        [("location", "out.data")],
        lambda f: ((f.parent / "o.data").write_bytes(bytes(16)),
                   _linked(f, "out.data", "../o.data")),
        "external data location 'out.data' resolves to {base.parent}/o.data, outside the "
        "model's folder {base}; refusing to read it: 'out.data' is, or passes through, a "
        "symbolic link out of the folder (as in a Hugging Face cache, whose snapshot files "
        "link into ../../blobs), which onnx refuses too; copy the folder with its links "
        "dereferenced, cp -rL {base} NEW_FOLDER, and load the model from NEW_FOLDER"),
    "two locations": (
        [("location", "d.data"), ("location", "d.data")], None,
        "tensor 'w' names more than one external data file ('d.data', 'd.data'): "
        "onnxruntime refuses a tensor with two 'location' entries (onnx reads the last)"),
    "offset with a leading space": (
        [("location", "d.data"), ("offset", " 16")], None,
        "external data offset ' 16' is not an integer (in d.data): onnxruntime refuses it "
        "(its integers are the digits 0-9 alone), onnx reads it as 16"),
    "length in other digits": (
        [("location", "d.data"), ("length", "１６")], None,
        "external data length '１６' is not an integer (in d.data): onnxruntime refuses it "
        "(its integers are the digits 0-9 alone), onnx reads it as 16"),
    "empty offset": (
        [("location", "d.data"), ("offset", "")], None,
        "external data offset '' is not an integer (in d.data): an empty entry, which "
        "onnxruntime refuses"),
    "a folder": (
        [("location", "sub")], lambda f: (f / "sub").mkdir(),
        "external data location 'sub' is a folder in {base}, not a file"),
    "through a missing folder": (
        [("location", "nosub/../d.data")], None,
        "external data location 'nosub/../d.data' passes through 'nosub', which does not "
        "exist in {base}"),
    "through a file": (
        [("location", "d.data/")], None,
        "external data location 'd.data/' passes through 'd.data', which is a file, not a "
        "folder, in {base}"),
}


@pytest.mark.parametrize("case", list(_REFUSED))
def test_references_onnx_or_onnxruntime_refuse_are_refused(tmp_path: Path, case: str) -> None:
    """Loading, `ge inspect` and `ge compile` refuse them alike (GE1103, exit status 1), in
    words naming the tensor, the file and what is wrong, and write nothing."""
    entries, lay_out, said = _REFUSED[case]
    folder = tmp_path / "m"
    folder.mkdir()
    path = _model(folder, entries)
    if lay_out is not None:
        lay_out(folder)
    base = folder.resolve()
    said = said.format(base=base)
    expected = f"{path}: " + (said if said.startswith("tensor") else f"tensor 'w': {said}")
    before = listing(tmp_path)
    with pytest.raises(ExternalDataError) as caught:
        ge.graph.load(path)
    assert (caught.value.code, caught.value.message) == ("GE1103", expected)
    status, out, err = run_ge("inspect", str(path))
    assert (status, out, err) == (1, "", f"ge: [GE1103] {expected}\n")
    status, out, _ = run_ge("inspect", str(path), "--json")
    assert status == 1 and json.loads(out)["code"] == "GE1103"
    assert json.loads(out)["message"] == expected
    status, _, err = run_ge("compile", str(path), "-o", str(tmp_path / "out.onnx"))
    assert (status, err) == (1, f"ge: [GE1103] {expected}\n")
    assert listing(tmp_path) == before  # nothing written


def test_a_hard_linked_data_file_is_read(tmp_path: Path) -> None:
    """onnx 1.23 refuses a data file with more than one hard link, onnxruntime reads it;
    ge reads it: it is the file itself, not a path out of the folder, and hard-linked
    copies of model folders (cp -al, deduplicating caches) are what users have."""
    folder = tmp_path / "m"
    folder.mkdir()
    path = _model(folder, [("location", "h.data")])
    os.link(folder / "d.data", folder / "h.data")
    np.testing.assert_array_equal(
        ge.graph.load(path).to_onnx().graph.initializer[0].raw_data, bytes(16))
    status, out, err = run_ge("inspect", str(path), "--json")
    assert status == 0, err
    assert json.loads(out)["external_data"][0]["file"] == "h.data"


@pytest.mark.parametrize(("extra", "keys"), [
    ([("basepath", "/models/m")], ["basepath"]),  # (what onnx's set_external_data may write)
    ([("foo", "bar"), ("basepath", ""), ("foo", "baz")], ["foo", "basepath"]),
    ([("checksum", "abc")], []),  # (onnxruntime reads past a checksum: nothing to note)
], ids=["basepath", "two-keys", "checksum"])
def test_a_key_onnxruntime_refuses_is_noted_by_inspect_and_dropped_by_compile(
        tmp_path: Path, extra: list[tuple[str, str]], keys: list[str]) -> None:
    """onnx ignores an external data key beside location, offset, length and checksum, and
    so does loading; onnxruntime 1.32 refuses the model for it, so `ge inspect` (exit 0)
    notes it for each tensor, and `ge compile` writes a model onnxruntime loads."""
    import onnxruntime as ort

    folder = tmp_path / "m"
    folder.mkdir()
    path = _model(folder, [("location", "d.data"), ("offset", "0"), ("length", "16"), *extra])
    (folder / "d.data").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    listed = sorted(p.name for p in folder.iterdir())
    if keys:
        with pytest.raises(Exception, match="model format error!"):
            ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    status, out, err = run_ge("inspect", str(path))
    assert status == 0 and err == ""
    notes = [" ".join(note.split()) for note in ("\n" + out).split("\nnote: ")[1:]]
    said, it = ((f"key {keys[0]!r}", "it") if len(keys) == 1
                else ("keys " + ", ".join(map(repr, keys)), "them"))
    assert notes == ([] if not keys else [
        f"tensor 'w' (in d.data) has external data {said}, which onnxruntime refuses: it does "
        f"not load the model (\"model format error!\"); onnx ignores {it}, and ge's output "
        f"drops {it}"])
    status, out, _ = run_ge("inspect", "--json", str(path))
    assert status == 0
    assert json.loads(out)["external_data_keys"] == (
        [{"tensor": "w", "file": "d.data", "keys": keys}] if keys else [])
    assert sorted(p.name for p in folder.iterdir()) == listed  # inspect wrote nothing
    for external in ("--no-external-data", "--external-data"):
        output = tmp_path / f"out{external}.onnx"
        status, _, err = run_ge("compile", str(path), "-o", str(output), external)
        assert status == 0, err
        written = onnx.load(str(output), load_external_data=False)
        assert all(e.key in ("location", "offset", "length")
                   for t in written.graph.initializer for e in t.external_data)
        session = ort.InferenceSession(str(output), providers=["CPUExecutionProvider"])
        (result,) = session.run(None, {"x": np.ones(4, np.float32)})
        np.testing.assert_array_equal(result, np.arange(1, 5, dtype=np.float32))
