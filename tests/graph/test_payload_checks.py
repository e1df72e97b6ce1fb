"""A tensor whose stored data disagrees with its dims and element type is refused when the
model is loaded (`ge.graph.payload_checks`): GE1101 naming the file (when there is one),
where the tensor is and what disagrees, with nothing written; in raw_data (sub-byte types
packed, strings refused), in the typed fields (int32_data's packing of 16-, 8-, 4- and 2-bit
types), in external data (GE1103), in the main graph, bodies, Constant and other tensor
attributes, sparse initializers and functions. Every well-formed tensor still loads, and a
large file read in pieces measures its large tensors without copying them."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from model_corpus import CORPUS
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as nh

import ge.graph
from ge.errors import ExternalDataError, ModelLoadError
from ge.graph import model_file
from ge.graph.model_file import read_model_pieces
from ge.graph.payload_checks import (
    ITEM_BITS,
    check_model_payloads,
    payload_nbytes,
    payload_problem,
)

MALFORMED = ("the model is malformed (a damaged file, or an exporter that wrote the tensor "
             "wrong)")


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def _model(initializers: list[onnx.TensorProto] = (), nodes: list[onnx.NodeProto] = (),
           opset: int = 21, **graph_fields) -> onnx.ModelProto:
    """A model reading every initializer (through Identity), plus `nodes`."""
    nodes = [*nodes, *(oh.make_node("Identity", [t.name], [f"{t.name}_out"])
                       for t in initializers)]
    outputs = [oh.make_tensor_value_info(f"{t.name}_out", t.data_type or TP.FLOAT, None)
               for t in initializers] or [oh.make_tensor_value_info("y", TP.FLOAT, None)]
    graph = oh.make_graph(nodes, "g", [oh.make_tensor_value_info("x", TP.FLOAT, [4])],
                          outputs, list(initializers), **graph_fields)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)], ir_version=10)


def _refused(model: onnx.ModelProto, tmp_path: Path, fragment: str) -> ModelLoadError:
    """Load `model` from a file: refused with GE1101 naming the file, the tensor's place and
    `fragment`, nothing in the folder changed; the same from the proto, without a path."""
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    before = _snapshot(tmp_path)
    with pytest.raises(ModelLoadError) as info:
        ge.graph.load(path)
    err = info.value
    assert type(err) is ModelLoadError and err.code == "GE1101"
    assert err.path == str(path) and err.message.startswith(f"{path}: ")
    assert fragment in err.message and err.message.endswith(MALFORMED), err.message
    assert _snapshot(tmp_path) == before
    with pytest.raises(ModelLoadError) as info:
        ge.graph.load(model)
    assert info.value.path is None and info.value.message == err.message[len(f"{path}: "):]
    return err


# -- raw_data -------------------------------------------------------------------------------

def test_raw_data_shorter_than_the_dims_the_trial_repro(tmp_path: Path) -> None:
    """The trial's model: 8 bytes for 4 floats. Refused on load, naming the initializer."""
    bad = TP(name="c", data_type=TP.FLOAT, dims=[4], raw_data=b"\0" * 8)
    graph = oh.make_graph([oh.make_node("Add", ["x", "c"], ["y"])], "g",
                          [oh.make_tensor_value_info("x", TP.FLOAT, [4])],
                          [oh.make_tensor_value_info("y", TP.FLOAT, [4])], [bad])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    err = _refused(model, tmp_path, "graph 'g': initializer 'c' holds 8 bytes of raw_data, "
                   "but its dims [4] of FLOAT need 16 (4 elements of 4 bytes)")
    assert err.nodes == ()


@pytest.mark.parametrize(("data_type", "dims", "size", "need"), [
    (TP.FLOAT, [2, 3], 28, 24),  # longer than needed
    (TP.DOUBLE, [], 4, 8),  # a scalar
    (TP.INT4, [5], 5, 3),  # one byte per element: int4 is packed two to a byte
    (TP.UINT4, [4], 1, 2),
    (TP.FLOAT4E2M1, [3], 3, 2),
    (TP.BOOL, [3], 1, 3),
    (TP.COMPLEX64, [2], 8, 16),
    (TP.BFLOAT16, [3], 3, 6),
    (TP.FLOAT8E4M3FN, [0], 1, 0),  # an empty tensor holds no bytes
], ids=["float-long", "double-scalar", "int4-unpacked", "uint4", "float4", "bool",
        "complex64", "bfloat16", "float8-empty"])
def test_raw_data_of_the_wrong_size(tmp_path: Path, data_type: int, dims: list[int],
                                    size: int, need: int) -> None:
    bad = TP(name="w", data_type=data_type, dims=dims, raw_data=b"\1" * size)
    assert payload_nbytes(data_type, dims) == need
    _refused(_model([bad]), tmp_path, f"initializer 'w' holds {size} byte")
    assert f"need {need} (" in payload_problem(bad)


@pytest.mark.skipif(not (hasattr(TP, "INT2") and hasattr(TP, "FLOAT6E2M3")),
                    reason="an onnx without int2 and float6")
def test_two_and_six_bit_types_are_packed() -> None:
    """int2: four to a byte; float6: four to three bytes (the last group padded)."""
    assert payload_nbytes(TP.INT2, [5]) == 2 and payload_nbytes(TP.FLOAT6E2M3, [5]) == 4
    assert payload_problem(TP(name="a", data_type=TP.INT2, dims=[5], raw_data=b"\0\0")) is None
    assert "need 2 (5 elements of 2 bits, packed)" in payload_problem(
        TP(name="a", data_type=TP.UINT2, dims=[5], raw_data=b"\0" * 5))
    assert "need 4" in payload_problem(
        TP(name="a", data_type=TP.FLOAT6E3M2, dims=[5], raw_data=b"\0" * 5))


def test_a_string_tensor_in_raw_data(tmp_path: Path) -> None:
    """Strings have no fixed size: raw_data cannot hold them (onnx's checker says so too)."""
    bad = TP(name="s", data_type=TP.STRING, dims=[1], raw_data=b"abc")
    _refused(_model([bad]), tmp_path, "initializer 's' holds raw_data, which a STRING tensor "
             "cannot: its strings go in string_data")


def test_negative_dims(tmp_path: Path) -> None:
    bad = TP(name="n", data_type=TP.FLOAT, dims=[-1, -4], raw_data=b"\0" * 16)
    _refused(_model([bad]), tmp_path, "initializer 'n' has dims [-1, -4]: a dim of a tensor "
             "cannot be negative")


# -- the typed fields -------------------------------------------------------------------------

@pytest.mark.parametrize(("tensor", "fragment"), [
    (TP(name="t", data_type=TP.FLOAT, dims=[4], float_data=[1, 2, 3]),
     "holds 3 values in float_data, but its dims [4] of FLOAT need 4"),
    (TP(name="t", data_type=TP.INT64, dims=[2], int64_data=[1, 2, 3]),
     "holds 3 values in int64_data, but its dims [2] of INT64 need 2"),
    (TP(name="t", data_type=TP.FLOAT16, dims=[2, 2], int32_data=[1, 2]),
     "holds 2 values in int32_data, but its dims [2, 2] of FLOAT16 need 4"),
    (TP(name="t", data_type=TP.BOOL, dims=[3], int32_data=[1]), "need 3"),
    (TP(name="t", data_type=TP.UINT8, dims=[2], int32_data=[1, 2, 3]), "need 2"),
    (TP(name="t", data_type=TP.FLOAT8E5M2, dims=[1], int32_data=[1, 2]), "need 1"),
    (TP(name="t", data_type=TP.INT4, dims=[5], int32_data=[1, 2, 3, 4, 5]),
     "need 3 (2 elements to an entry)"),
    (TP(name="t", data_type=TP.COMPLEX64, dims=[2], float_data=[1, 2]),
     "need 4 (a real and an imaginary part each)"),
    (TP(name="t", data_type=TP.COMPLEX128, dims=[1], double_data=[1]), "need 2"),
    (TP(name="t", data_type=TP.UINT32, dims=[2], uint64_data=[1]), "of UINT32 need 2"),
    (TP(name="t", data_type=TP.STRING, dims=[2], string_data=[b"a"]),
     "holds 1 value in string_data, but its dims [2] of STRING need 2"),
    (TP(name="t", data_type=TP.FLOAT, dims=[2], int64_data=[1, 2]),
     "holds its values in int64_data, which a tensor of FLOAT does not use: its dims [2] of "
     "FLOAT need 2 values in float_data"),
    (TP(name="t", data_type=TP.DOUBLE, dims=[3]),
     "holds no data, but its dims [3] of DOUBLE need 3 values in double_data"),
], ids=lambda v: v.data_type if isinstance(v, TP) else None)
def test_typed_fields_of_the_wrong_length(tmp_path: Path, tensor: TP, fragment: str) -> None:
    err = _refused(_model([tensor]), tmp_path, fragment)
    assert "graph 'g': initializer 't' holds " in err.message


def test_the_typed_fields_agree_with_onnx() -> None:
    """The field each element type keeps its values in is the one onnx says."""
    from ge.graph.payload_checks import _TYPED_FIELD

    for data_type, (field, _, _) in _TYPED_FIELD.items():
        assert oh.tensor_dtype_to_field(data_type) == field, TP.DataType.Name(data_type)
    known = {v for v in TP.DataType.values() if v != TP.UNDEFINED}
    assert set(_TYPED_FIELD) == known
    assert set(ITEM_BITS) == known - {TP.STRING}


def _every_tensor() -> list[TP]:
    """A tensor of every element type onnx makes, in raw_data and in its typed field, of
    odd sizes (sub-byte padding), empty and scalar."""
    tensors = []
    for data_type in TP.DataType.values():
        if data_type in (TP.UNDEFINED, TP.STRING):
            continue
        np_type = oh.tensor_dtype_to_np_dtype(data_type)
        for dims in ([], [0], [5], [3, 3]):
            count = int(np.prod(dims))
            values = np.zeros(count, np_type).reshape(dims)
            tensors.append(nh.from_array(values, f"raw_{data_type}_{dims}"))
            typed = oh.make_tensor(f"typed_{data_type}_{dims}", data_type, dims,
                                   values.reshape(-1).tolist() if count else [])
            tensors.append(typed)
    tensors.append(oh.make_tensor("strings", TP.STRING, [2], [b"a", b"bc"]))
    return tensors


def test_every_well_formed_tensor_loads() -> None:
    """No false refusal: every element type in either storage, as onnx writes it (and
    decodes it: the same arrays back)."""
    tensors = _every_tensor()
    for tensor in tensors:
        assert payload_problem(tensor) is None, (tensor.name, tensor.data_type, tensor.dims)
    graph = ge.graph.load(_model(tensors))
    for tensor in tensors:
        value = graph.find_node_by_name(tensor.name).get_attr("value")
        expected = nh.to_array(tensor)
        assert value.numpy().dtype == expected.dtype and value.shape == list(tensor.dims)
        assert value.tobytes() == (expected.tobytes() if tensor.data_type != TP.STRING
                                   else value.tobytes())


@pytest.mark.parametrize("case", CORPUS, ids=lambda c: c.name)
def test_the_corpus_loads_and_inspects(case, tmp_path: Path) -> None:
    """Every corpus model (sparse, functions, bodies, every attribute type) passes."""
    model = case.build()
    check_model_payloads(model)
    ge.graph.load(model)


# -- where the tensor is -----------------------------------------------------------------------

_SHORT = TP(name="w", data_type=TP.FLOAT, dims=[2], raw_data=b"\0" * 4)


def _if_with(body_node: onnx.NodeProto | None, body_init: TP | None) -> onnx.ModelProto:
    then = oh.make_graph([body_node or oh.make_node("Identity", ["x"], ["t"])], "then", [],
                         [oh.make_tensor_value_info("t", TP.FLOAT, None)],
                         [body_init] if body_init is not None else [])
    other = oh.make_graph([oh.make_node("Neg", ["x"], ["e"])], "else", [],
                          [oh.make_tensor_value_info("e", TP.FLOAT, None)])
    node = oh.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", TP.FLOAT, [2]),
                                        oh.make_tensor_value_info("c", TP.BOOL, [])],
                          [oh.make_tensor_value_info("y", TP.FLOAT, None)])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def test_in_an_if_body(tmp_path: Path) -> None:
    body = oh.make_node("Add", ["x", "w"], ["t"])
    _refused(_if_with(body, _SHORT), tmp_path,
             "graph 'then', then_branch of If node 'if': initializer 'w' holds 4 bytes")


def test_a_constant_nodes_value(tmp_path: Path) -> None:
    node = oh.make_node("Constant", [], ["y"], name="c", value=_SHORT)
    err = _refused(_model(nodes=[node]), tmp_path, "graph 'g': Constant node 'c': attribute "
                   "'value' holds 4 bytes of raw_data, but its dims [2] of FLOAT need 8")
    assert err.nodes == ("c",)


def test_a_constant_node_in_a_loop_body(tmp_path: Path) -> None:
    const = oh.make_node("Constant", [], ["k"], name="k", value=_SHORT)
    body = oh.make_graph(
        [const, oh.make_node("Identity", ["cond"], ["cond_out"]),
         oh.make_node("Add", ["acc", "k"], ["acc_out"])], "body",
        [oh.make_tensor_value_info("i", TP.INT64, []),
         oh.make_tensor_value_info("cond", TP.BOOL, []),
         oh.make_tensor_value_info("acc", TP.FLOAT, [2])],
        [oh.make_tensor_value_info("cond_out", TP.BOOL, []),
         oh.make_tensor_value_info("acc_out", TP.FLOAT, [2])])
    loop = oh.make_node("Loop", ["n", "", "x"], ["y"], name="loop", body=body)
    graph = oh.make_graph([loop], "g", [oh.make_tensor_value_info("x", TP.FLOAT, [2]),
                                        oh.make_tensor_value_info("n", TP.INT64, [])],
                          [oh.make_tensor_value_info("y", TP.FLOAT, [2])])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    _refused(model, tmp_path, "graph 'body', body of Loop node 'loop': Constant node 'k': "
             "attribute 'value' holds 4")


def test_another_operators_tensor_attribute(tmp_path: Path) -> None:
    """ConstantOfShape's value: decoded when the pass or runtime reads it."""
    fill = TP(name="", data_type=TP.FLOAT, dims=[1], float_data=[])
    node = oh.make_node("ConstantOfShape", ["s"], ["y"], name="fill", value=fill)
    shape = nh.from_array(np.array([2], np.int64), "s")
    _refused(_model([shape], nodes=[node]), tmp_path, "graph 'g': ConstantOfShape node 'fill': "
             "attribute 'value' holds no data, but its dims [1] of FLOAT need 1 value")


def test_a_sparse_initializer(tmp_path: Path) -> None:
    """Its values and indices are tensors of their own; and they must agree."""
    values = TP(name="sp", data_type=TP.FLOAT, dims=[3], raw_data=b"\0" * 8)
    indices = nh.from_array(np.array([1, 5, 10], np.int64), "sp_i")
    sparse = oh.make_sparse_tensor(values, indices, [3, 4])
    _refused(_model(sparse_initializer=[sparse]), tmp_path, "graph 'g': sparse initializer "
             "'sp' (its values) holds 8 bytes of raw_data, but its dims [3] of FLOAT need 12")
    values = nh.from_array(np.array([1, 2, 3], np.float32), "sp")
    indices = nh.from_array(np.array([1, 5], np.int64), "sp_i")
    sparse = oh.make_sparse_tensor(values, indices, [3, 4])
    _refused(_model(sparse_initializer=[sparse]), tmp_path, "'sp' has values of dims [3] and "
             "indices of dims [2]: a sparse tensor of rank 2 holds values of dims [NNZ] and "
             "indices of dims [NNZ] or [NNZ, 2]")


def test_a_functions_constant(tmp_path: Path) -> None:
    const = oh.make_node("Constant", [], ["k"], name="k", value=_SHORT)
    function = oh.make_function("my.fn", "AddK", ["a"], ["b"],
                                [const, oh.make_node("Add", ["a", "k"], ["b"])],
                                [oh.make_opsetid("", 17)])
    call = oh.make_node("AddK", ["x"], ["y"], domain="my.fn")
    graph = oh.make_graph([call], "g", [oh.make_tensor_value_info("x", TP.FLOAT, [2])],
                          [oh.make_tensor_value_info("y", TP.FLOAT, [2])])
    model = oh.make_model(graph, functions=[function], opset_imports=[
        oh.make_opsetid("", 17), oh.make_opsetid("my.fn", 1)])
    _refused(model, tmp_path, "function 'AddK' (domain 'my.fn'): Constant node 'k': "
             "attribute 'value' holds 4 bytes")


def test_inspect_says_what_loading_says(tmp_path: Path) -> None:
    """`check_model_payloads` (ge inspect) and loading name a tensor alike, wherever it is."""
    for model in (_model([_SHORT]), _if_with(oh.make_node("Add", ["x", "w"], ["t"]), _SHORT),
                  _model(nodes=[oh.make_node("Constant", [], ["y"], name="c", value=_SHORT)])):
        with pytest.raises(ModelLoadError) as loaded:
            ge.graph.load(model)
        with pytest.raises(ModelLoadError) as inspected:
            check_model_payloads(model)
        assert inspected.value.message == loaded.value.message


# -- external data ----------------------------------------------------------------------------

def _external(tmp_path: Path, length: str | None, data: bytes) -> Path:
    """A model whose initializer 'w' (4 floats) is in w.bin (`data`), `length` recorded."""
    tensor = TP(name="w", data_type=TP.FLOAT, dims=[4], data_location=TP.EXTERNAL)
    entries = {"location": "w.bin", "offset": "0", **({"length": length} if length else {})}
    for key, value in entries.items():
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    (tmp_path / "w.bin").write_bytes(data)
    path = tmp_path / "model.onnx"
    path.write_bytes(_model([tensor]).SerializeToString())
    return path


def test_external_data_whose_recorded_length_disagrees(tmp_path: Path) -> None:
    """GE1103 before reading: the length recorded is not what the dims need."""
    path = _external(tmp_path, "24", bytes(range(24)))
    before = _snapshot(tmp_path)
    with pytest.raises(ExternalDataError) as info:
        ge.graph.load(path)
    err = info.value
    assert err.code == "GE1103" and err.path == str(tmp_path / "w.bin")
    assert err.message == (f"{path}: tensor 'w': its external data is recorded as 24 bytes, "
                           "but its dims [4] of FLOAT need 16 (in w.bin)")
    assert _snapshot(tmp_path) == before


def test_external_data_too_short(tmp_path: Path) -> None:
    path = _external(tmp_path, "16", bytes(8))
    with pytest.raises(ExternalDataError, match=r"external data asks for bytes 0\.\.16 of "
                       r"w\.bin, which has 8") as info:
        ge.graph.load(path)
    assert info.value.message.startswith(f"{path}: ")


def test_external_data_without_a_length_reads_what_the_dims_need(tmp_path: Path) -> None:
    """No length recorded: the bytes the tensor needs, as onnxruntime reads them (onnx reads
    the rest of the file, then cannot decode it); a file shorter than that is refused."""
    values = np.arange(6, dtype=np.float32)
    path = _external(tmp_path, None, values.tobytes())
    graph = ge.graph.load(path)
    np.testing.assert_array_equal(graph.find_node_by_name("w").get_attr("value").numpy(),
                                  values[:4])
    (tmp_path / "w.bin").write_bytes(values[:3].tobytes())
    with pytest.raises(ExternalDataError, match=r"asks for bytes 0\.\.16 of w\.bin, which has 12"):
        ge.graph.load(path)


# -- a large file, read in pieces ----------------------------------------------------------------

@pytest.fixture
def measuring(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file read in pieces, and every raw_data of 16 bytes or more measured from its
    header (`model_file._measure_raw`), not by a copy."""
    monkeypatch.setattr(model_file, "PIECE_BYTES", 256)
    monkeypatch.setattr(model_file, "PIECEWISE_FROM_BYTES", 0)
    monkeypatch.setattr(model_file, "MEASURED_RAW_BYTES", 16)


@pytest.mark.parametrize("case", CORPUS, ids=lambda c: c.name)
def test_measured_lengths_are_the_raw_datas(case, tmp_path: Path, measuring: None) -> None:
    """What the headers say of each large raw_data is its length; the model loads."""
    path = tmp_path / "model.onnx"
    path.write_bytes(case.build().SerializeToString())
    pieces = read_model_pieces(path)
    assert pieces is not None
    for tensor, length in pieces.measured.values():
        assert length == len(tensor.raw_data) >= 16
    ge.graph.load(path)


def test_a_large_tensor_measured_and_refused(tmp_path: Path, measuring: None) -> None:
    """In a body, in a Constant's value, among initializers: found through the headers."""
    big = nh.from_array(np.zeros(64, np.float32), "w")
    short = TP(name="s", data_type=TP.FLOAT, dims=[64], raw_data=b"\0" * 200)
    body_init = TP(name="w", data_type=TP.FLOAT, dims=[2], raw_data=b"\0" * 40)
    for model, fragment in (
            (_model([big, short]), "initializer 's' holds 200 bytes of raw_data, but its dims "
                                   "[64] of FLOAT need 256"),
            (_model(nodes=[oh.make_node("Constant", [], ["y"], name="c", value=short)]),
             "Constant node 'c': attribute 'value' holds 200 bytes"),
            (_if_with(oh.make_node("Add", ["x", "w"], ["t"]), body_init),
             "graph 'then', then_branch of If node 'if': initializer 'w' holds 40 bytes")):
        path = tmp_path / "model.onnx"
        onnx.save(model, path)
        pieces = read_model_pieces(path)
        assert pieces is not None
        assert sorted(length for _, length in pieces.measured.values()) == sorted(
            len(t.raw_data) for t in _raw_tensors(pieces.model) if len(t.raw_data) >= 16)
        with pytest.raises(ModelLoadError, match=re.escape(fragment)):
            ge.graph.load(path)


def _raw_tensors(model: onnx.ModelProto) -> list[TP]:
    from ge.graph.external_data import iter_tensors

    return [t for t in iter_tensors(model) if t.HasField("raw_data")]


def _field(number: int, content: bytes) -> bytes:
    """A length-delimited protobuf field (tag, length, content)."""
    def varint(value: int) -> bytes:
        out = bytearray()
        while value > 0x7F:
            out.append(value & 0x7F | 0x80)
            value >>= 7
        return bytes([*out, value])

    return varint(number << 3 | 2) + varint(len(content)) + content


def test_a_raw_data_written_twice_is_copied_to_be_measured(tmp_path: Path,
                                                          measuring: None) -> None:
    """A tensor's raw_data written twice is merged (the last kept): its headers are not
    trusted, and the tensor is measured by a copy, which is right either way."""
    tensor = nh.from_array(np.zeros(8, np.float32), "w")  # 32 bytes, as its dims need
    doubled = tensor.SerializeToString() + _field(9, b"\0" * 40)  # then 40: kept
    model = _model([tensor])
    del model.graph.initializer[:]
    graph = model.graph.SerializeToString() + _field(5, doubled)  # 5: GraphProto.initializer
    model.ClearField("graph")
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString() + _field(7, graph))  # 7: ModelProto.graph
    pieces = read_model_pieces(path)
    assert pieces is not None and not pieces.measured
    assert len(pieces.model.graph.initializer[0].raw_data) == 40
    with pytest.raises(ModelLoadError, match="initializer 'w' holds 40 bytes of raw_data, but "
                       r"its dims \[8\] of FLOAT need 32"):
        ge.graph.load(path)


def test_loading_takes_the_measured_lengths_not_a_copy(tmp_path: Path, measuring: None,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The lengths the headers gave are those the check compares (a copy of raw_data would
    say otherwise): one short by a byte in each of them is what the refusal says, for an
    initializer, a body's initializer and a Constant's value alike."""
    from ge.graph import model_io

    real = model_io.read_model_pieces

    def one_byte_more(path: Path, words=()):
        pieces = real(path, words)
        for key, (tensor, length) in list(pieces.measured.items()):
            pieces.measured[key] = (tensor, length + 1)
        return pieces

    monkeypatch.setattr(model_io, "read_model_pieces", one_byte_more)
    big = nh.from_array(np.zeros(16, np.float32), "w")
    for model, fragment in (
            (_model([big]), "initializer 'w' holds 65 bytes of raw_data"),
            (_if_with(oh.make_node("Add", ["x", "w"], ["t"]), big),
             "graph 'then', then_branch of If node 'if': initializer 'w' holds 65 bytes"),
            (_model(nodes=[oh.make_node("Constant", [], ["y"], name="c", value=big)]),
             "Constant node 'c': attribute 'value' holds 65 bytes")):
        path = tmp_path / "model.onnx"
        onnx.save(model, path)
        with pytest.raises(ModelLoadError, match=re.escape(fragment)):
            ge.graph.load(path)
