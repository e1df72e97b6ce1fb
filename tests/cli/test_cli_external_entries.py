"""External-data entries a model gets wrong are the model's error, said at load and by
`ge inspect` (trial UU): an external tensor naming no location was read as if it had no
external data (loading looks for the word 'location' first) and failed later inside a pass
as "a bug in ge"; an offset that is no integer was a raw ValueError."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_helpers import run_ge
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
