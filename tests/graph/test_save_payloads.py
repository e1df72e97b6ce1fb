"""`save` writes large tensors from the graph's own bytes (ge.graph.payloads), and the file is
byte for byte what serializing the whole model proto gives, as `save` wrote it before: the
reference here is that older path, `graph_to_model` without placeholders serialized (and
for external data, the tensors moved into the data file as they were)."""

from __future__ import annotations

import io
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as nh
from tests.model_paths import all_shared_models

import ge.graph
from ge.errors import ModelSaveError
from ge.graph import model_io
from ge.graph.external_data import ExternalDataWriter, iter_tensors, write_external_data
from ge.graph.graph import Graph
from ge.graph.onnx_export import graph_to_model
from ge.graph.payloads import MIN_SPLICED_BYTES
from ge.graph.tensor import Tensor
from ge.graph.types import DataType

SIDE = 64  # 64x64 float32: 16 KiB, over MIN_SPLICED_BYTES
VENDORED = all_shared_models()


def _floats(seed: int, shape=(SIDE, SIDE)) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _raw(name: str, array: np.ndarray, data_type: int = TP.FLOAT) -> TP:
    return oh.make_tensor(name, data_type, list(array.shape), array.tobytes(), raw=True)


def _vi(name: str, elem: int = TP.FLOAT, shape=(SIDE, SIDE)) -> onnx.ValueInfoProto:
    return oh.make_tensor_value_info(name, elem, list(shape))


def _constant(output: str, tensor: TP) -> onnx.NodeProto:
    return oh.make_node("Constant", [], [output], name=f"make_{output}", value=tensor)


def _branch(name: str, source: str, seed: int, nested: onnx.GraphProto | None) -> onnx.GraphProto:
    """A body with a large initializer and a large Constant (and a body of its own)."""
    weight = _raw(f"{name}_w", _floats(seed))
    nodes = [_constant(f"{name}_c", _raw(f"{name}_cv", _floats(seed + 1))),
             oh.make_node("Add", [source, f"{name}_w"], [f"{name}_a"], name=f"{name}_add"),
             oh.make_node("Add", [f"{name}_a", f"{name}_c"], [f"{name}_y"], name=f"{name}_add2")]
    out = f"{name}_y"
    if nested is not None:
        nodes.append(oh.make_node("If", ["cond"], [f"{name}_z"], name=f"{name}_if",
                                  then_branch=nested, else_branch=nested))
        out = f"{name}_z"
    return oh.make_graph(nodes, name, [], [_vi(out)], [weight])


def weights_model() -> onnx.ModelProto:
    """Large tensors in every place a model keeps them: raw and typed initializers (float16,
    bfloat16, float_data, int64_data, strings), a Constant with a named, documented large
    value, and bodies (an If in an If) with large initializers and Constants."""
    cv = _raw("cv", _floats(2))
    cv.doc_string = "a documented constant"
    half = _floats(3).astype(np.float16)
    brain = _floats(4).astype(ml_dtypes.bfloat16)
    typed = oh.make_tensor("typed", TP.FLOAT, [SIDE, SIDE], _floats(5).reshape(-1).tolist())
    ids = oh.make_tensor("ids", TP.INT64, [2048], list(range(2048)))
    words = oh.make_tensor("words", TP.STRING, [600], [f"w{i}".encode() for i in range(600)])
    initializers = [_raw("w", _floats(1)), _raw("half", half, TP.FLOAT16),
                    _raw("brain", brain, TP.BFLOAT16), typed, ids, words]
    inner = _branch("inner", "b5", 20, None)
    nodes = [
        oh.make_node("Add", ["x", "w"], ["b1"], name="add_w"),
        _constant("c", cv),
        oh.make_node("Add", ["b1", "c"], ["b2"], name="add_c"),
        oh.make_node("Add", ["b2", "typed"], ["b3"], name="add_typed"),
        oh.make_node("Cast", ["half"], ["half32"], name="cast_half", to=TP.FLOAT),
        oh.make_node("Cast", ["brain"], ["brain32"], name="cast_brain", to=TP.FLOAT),
        oh.make_node("Add", ["b3", "half32"], ["b4"], name="add_half"),
        oh.make_node("Add", ["b4", "brain32"], ["b5"], name="add_brain"),
        oh.make_node("If", ["cond"], ["y"], name="branch",
                     then_branch=_branch("then", "b5", 10, inner),
                     else_branch=_branch("else", "b5", 30, None)),
        oh.make_node("Identity", ["ids"], ["ids_out"], name="ids_id"),
        oh.make_node("Identity", ["words"], ["words_out"], name="words_id"),
    ]
    graph = oh.make_graph(nodes, "weights", [_vi("x"), _vi("cond", TP.BOOL, [])],
                          [_vi("y"), _vi("ids_out", TP.INT64, [2048]),
                           _vi("words_out", TP.STRING, [600])], initializers)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def defaults_model() -> onnx.ModelProto:
    """IR version 3: the large initializer is also a graph input (its default value)."""
    graph = oh.make_graph([oh.make_node("Add", ["x", "w"], ["y"], name="add")], "defaults",
                          [_vi("x"), _vi("w")], [_vi("y")], [_raw("w", _floats(7))])
    return oh.make_model(graph, ir_version=3, opset_imports=[oh.make_opsetid("", 9)])


def _touched(graph: Graph) -> Graph:
    """Every node written anew: metadata on each (a constant's initializer is then copied
    with it), a constant renamed, and constants replaced by tensors made in memory."""
    for node in graph.get_all_nodes():
        if node.type not in ("Data", "NetOutput"):
            node.set_metadata("touched", node.name)
    for node in graph.get_all_nodes():
        if node.type != "Const" or not node.has_attr("value"):
            continue
        value = node.get_attr("value")
        if value.data_type == DataType.DT_FLOAT and value.size >= SIDE * SIDE:
            node.set_attr("value", Tensor(value.numpy() * 2))
        elif value.data_type == DataType.DT_FLOAT16:
            node.set_attr("value", Tensor(value.numpy() + 1, data_type=DataType.DT_FLOAT16))
        elif value.data_type == DataType.DT_BF16:
            node.set_attr("value", Tensor(value.numpy().astype(np.float32) + 1,
                                          data_type=DataType.DT_BF16))
    return graph


def _reference(graph: Graph, data_name: str, *, external: bool, threshold: int,
               value_info: bool, lift: bool) -> tuple[bytes, bytes]:
    """The model and data file as the save wrote them with the whole model proto."""
    if not external:
        model = graph_to_model(graph, value_info=value_info, lift_constants=lift)
        return model.SerializeToString(), b""
    data = io.BytesIO()
    writer = ExternalDataWriter(data, data_name, threshold)
    model = graph_to_model(graph, tensor_sink=model_io._external_sink(writer),
                           value_info=value_info, lift_constants=lift)
    write_external_data(model, writer)
    return model.SerializeToString(), data.getvalue()


def _assert_saves_as_before(graph: Graph, folder: Path, *, external: bool = False,
                            threshold: int = 1024, value_info: bool = True,
                            lift: bool = False, full_check: bool = False) -> bytes:
    target = folder / "m.onnx"
    model, data = _reference(graph, "m.onnx.data", external=external, threshold=threshold,
                             value_info=value_info, lift=lift)
    written = graph.save(target, external_data=external, size_threshold=threshold,
                         value_info=value_info, lift_constants=lift, full_check=full_check,
                         overwrite_input=True)
    assert target.read_bytes() == model
    assert (written.read_bytes() if written is not None else b"") == data
    onnx.checker.check_model(str(target))
    if written is not None:
        written.unlink()
    return model


SAVES = [
    pytest.param({}, id="inline"),
    pytest.param({"lift": True, "value_info": False}, id="inline-lifted"),
    pytest.param({"full_check": True, "lift": True}, id="inline-checked"),
    pytest.param({"external": True}, id="external"),
    pytest.param({"external": True, "threshold": 16}, id="external-small-threshold"),
    pytest.param({"external": True, "threshold": SIDE * SIDE * 4}, id="external-at-threshold"),
    pytest.param({"external": True, "threshold": 1 << 20}, id="external-nothing-out"),
    pytest.param({"external": True, "threshold": 10_000, "lift": True}, id="external-lifted"),
]


@pytest.mark.parametrize("options", SAVES)
@pytest.mark.parametrize("touch", [False, True], ids=["as-read", "touched"])
def test_helper_models_save_as_before(tmp_path: Path, options: dict, touch: bool) -> None:
    for model in (weights_model(), defaults_model()):
        graph = ge.graph.load(model)
        if touch:
            _touched(graph)
        _assert_saves_as_before(graph, tmp_path, **options)


def test_an_untouched_model_saves_as_the_file_it_was_read_from(tmp_path: Path) -> None:
    for model in (weights_model(), defaults_model()):
        assert _assert_saves_as_before(ge.graph.load(model), tmp_path) == \
            model.SerializeToString()


@pytest.mark.parametrize("path", VENDORED, ids=[p.stem for p in VENDORED])
@pytest.mark.parametrize("options", SAVES)
def test_vendored_models_save_as_before(tmp_path: Path, path: Path, options: dict) -> None:
    graph = ge.graph.load(path)
    _assert_saves_as_before(graph, tmp_path, **options)
    _assert_saves_as_before(_touched(graph), tmp_path, **options)


def _large_payloads(model: onnx.ModelProto) -> list[str]:
    """The tensors of `model` holding a raw payload of MIN_SPLICED_BYTES or more."""
    return [t.name for t in iter_tensors(model)
            if t.HasField("raw_data") and len(t.raw_data) >= MIN_SPLICED_BYTES]


@pytest.mark.parametrize("external", [False, True])
def test_the_model_proto_holds_no_large_payload(tmp_path: Path, external: bool,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The proto `save` builds (and serializes) holds placeholders, not the weights: inline,
    those of initializers, Constants and bodies; with external data, the Constants', which
    used to be copied into it before being moved out."""
    found: list[list[str]] = []
    export = model_io.graph_to_model

    def inspected(*args, **kwargs) -> onnx.ModelProto:
        model = export(*args, **kwargs)
        found.append(_large_payloads(model))
        return model

    monkeypatch.setattr(model_io, "graph_to_model", inspected)
    graph = ge.graph.load(weights_model())
    assert _large_payloads(graph.to_onnx())  # the model has them
    graph.save(tmp_path / "m.onnx", external_data=external)
    assert found == [[]]


def sub_byte_model() -> onnx.ModelProto:
    """Large int4 (an odd count: the last byte half used) and float8 weights in raw_data,
    and int4 in int32_data, each dequantized (opset 21)."""
    rng = np.random.default_rng(8)
    q = rng.integers(-8, 8, size=(65, 129))
    # (from_array packs the int4 into raw_data; make_tensor(raw=True) does only from onnx 1.20)
    int4 = nh.from_array(q.astype(ml_dtypes.int4), "int4")
    typed = oh.make_tensor("int4_typed", TP.INT4, [65, 129], q.reshape(-1).tolist())
    f8 = nh.from_array(rng.standard_normal((65, 129)).astype(ml_dtypes.float8_e4m3fn), "f8")
    scale = oh.make_tensor("s", TP.FLOAT, [], [0.5])
    names = ["int4", "int4_typed", "f8"]
    nodes = [oh.make_node("DequantizeLinear", [n, "s"], [f"{n}_y"], name=f"dq_{n}")
             for n in names]
    graph = oh.make_graph(nodes, "sub_byte", [], [_vi(f"{n}_y", shape=(65, 129))
                                                  for n in names], [int4, typed, f8, scale])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)])


@pytest.mark.parametrize("options", SAVES)
def test_sub_byte_and_float8_weights_save_as_before(tmp_path: Path, options: dict,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """`payload_nbytes` knows int4 (packed) and float8: their raw weights are written from
    the graph's bytes too (placeholders), and the file is the same; the typed int4 stays
    typed, in the proto."""
    found: list[list[str]] = []
    export = model_io.graph_to_model

    def inspected(*args, **kwargs) -> onnx.ModelProto:
        model = export(*args, **kwargs)
        found.append(_large_payloads(model))
        return model

    graph = ge.graph.load(sub_byte_model())
    assert sorted(_large_payloads(graph.to_onnx())) == ["f8", "int4"]
    _assert_saves_as_before(graph, tmp_path, **options)
    monkeypatch.setattr(model_io, "graph_to_model", inspected)
    graph.save(tmp_path / "m.onnx", external_data=options.get("external", False),
               overwrite_input=True)
    assert found == [[]]


def test_a_file_over_the_protobuf_limit_is_refused_inline(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """Over the limit once its payloads are in: GE1104, nothing written (the small model
    proto itself serializes fine, so the size is checked on the file)."""
    graph = ge.graph.load(defaults_model())  # 16 KiB of weights, the file a little more
    monkeypatch.setattr(model_io, "SERIALIZED_LIMIT", SIDE * SIDE * 4 + 64)
    with pytest.raises(ModelSaveError, match="larger than protobuf's 2 GB limit") as err:
        graph.save(tmp_path / "m.onnx", external_data=False)
    assert err.value.code == "GE1104"
    assert list(tmp_path.iterdir()) == []
