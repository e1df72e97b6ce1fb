"""The built-in passes' shortcuts decide exactly what the plain computations decide:
constants read from their raw TensorProto bytes (`raw_bytes`, `first_element`) against
their decoded arrays, deduplication of constants held in different TensorProto fields,
no-op decisions on raw constants, and constant folding's cheap candidate test."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from builtin_helpers import assert_sound, histogram, init, load, model, run_pass, vi, x_feeds
from onnx import TensorProto, helper, numpy_helper

from ge.compiler.builtin import ConstantDeduplication, ConstantFolding, NoOpElimination
from ge.compiler.builtin._support import first_element, raw_bytes
from ge.compiler.builtin.constant_folding import _may_fold
from ge.compiler.builtin.noop import passthrough_input
from ge.graph import Graph, Node, Tensor
from ge.graph.keys import value_key

pytestmark = pytest.mark.builtin_passes

node = helper.make_node
DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64,
          np.uint8, np.uint16, np.uint32, np.uint64, np.bool_]


def _values(dtype: Any) -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    if dtype is np.bool_:
        return [np.array([True, False, True]), np.array(False), np.zeros((0,), bool)]
    base = [rng.normal(size=(2, 3)) * 50, np.array(7.0), np.zeros((0, 2)), np.array([-0.0, 1])]
    if np.dtype(dtype).kind == "f":
        base.append(np.array([np.nan, np.inf, -np.inf, 1e-30]))
    return [np.asarray(v).astype(dtype) for v in base]


def _typed_fields(array: np.ndarray) -> TensorProto:
    """The same value in the TensorProto's typed fields (float_data, int32_data...)."""
    elem = helper.np_dtype_to_tensor_dtype(array.dtype)
    proto = helper.make_tensor("t", elem, array.shape, array.flatten().tolist(), raw=False)
    assert numpy_helper.to_array(proto).tobytes() == array.tobytes()
    return proto


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_raw_bytes_and_first_element_are_what_decoding_gives(dtype: Any) -> None:
    for array in _values(dtype):
        raw_tensor = Tensor.from_proto(numpy_helper.from_array(array, "t"))
        decoded = raw_tensor.numpy()
        assert raw_bytes(Tensor.from_proto(numpy_helper.from_array(array, "t"))) == \
            decoded.tobytes()
        first = first_element(Tensor.from_proto(numpy_helper.from_array(array, "t")))
        if decoded.size:
            assert first.dtype == decoded.dtype
            assert np.array(first).tobytes() == decoded.flat[0:1].tobytes()
        else:
            assert first is None
        raw = raw_bytes(raw_tensor)
        assert raw is not None
        assert value_key(raw_tensor, raw) == value_key(raw_tensor) == value_key(
            Tensor(array))
        # other representations are not raw bytes: the callers decode them
        assert raw_bytes(Tensor.from_proto(_typed_fields(array))) is None
        assert raw_bytes(Tensor(array)) is None


def test_raw_bytes_refuses_what_is_not_plain_numeric_raw_data() -> None:
    strings = numpy_helper.from_array(np.array([b"a", b"b"], dtype=object), "s")
    assert raw_bytes(Tensor.from_proto(strings)) is None
    short = numpy_helper.from_array(np.arange(4, dtype=np.float32), "short")
    short.raw_data = short.raw_data[:-1]  # corrupt: decoding must report it, not us
    assert raw_bytes(Tensor.from_proto(short)) is None
    bf16 = helper.make_tensor("b", TensorProto.BFLOAT16, [2], [1.0, 2.0])
    assert raw_bytes(Tensor.from_proto(bf16)) is None


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_dedup_merges_equal_constants_whatever_their_tensorproto_fields(dtype: Any) -> None:
    """Constants of equal value merge whether read from raw bytes, typed fields or made in
    memory; their keys are `value_key`'s."""
    array = _values(dtype)[0]
    other = array.copy()
    if dtype is np.bool_:
        other.flat[-1] = not other.flat[-1]
    else:  # one bit flipped: another value in every type (`+ 1` overflows a large uint64)
        bits = other.view(f"u{other.itemsize}")
        bits.flat[-1] ^= bits.dtype.type(1)
    graph = Graph("g")
    graph.model.opset_imports = {"": 17}
    consts = [graph.add_const(Tensor.from_proto(numpy_helper.from_array(array, "a"))),
              graph.add_const(Tensor.from_proto(_typed_fields(array))),
              graph.add_const(Tensor(array)),
              graph.add_const(Tensor.from_proto(numpy_helper.from_array(other, "b")))]
    out = graph.add_node("NetOutput", num_inputs=len(consts) + 1, num_outputs=0)
    for k, const in enumerate(consts):
        ident = graph.add_node("Identity", num_inputs=1)
        graph.add_data_edge(const, 0, ident, 0)
        graph.add_data_edge(ident, 0, out, k)
    graph.add_data_edge(consts[0], 0, out, len(consts))
    keys = [value_key(c.get_attr("value")) for c in consts]
    assert keys[0] == keys[1] == keys[2] != keys[3]
    assert run_pass(ConstantDeduplication, graph, typed=False)
    kept = graph.nodes_of_type("Const")
    assert kept == [consts[0], consts[3]]


def _weights_read_by_outputs(arrays: dict[str, np.ndarray]) -> tuple[Graph, list[Node]]:
    """A graph of one constant per array (read from its TensorProto, named by its key), each
    read through an Identity by the graph's output."""
    graph = Graph("g")
    graph.model.opset_imports = {"": 17}
    consts = [graph.add_const(Tensor.from_proto(numpy_helper.from_array(a, name)))
              for name, a in arrays.items()]
    out = graph.add_node("NetOutput", num_inputs=len(consts), num_outputs=0)
    for k, const in enumerate(consts):
        ident = graph.add_node("Identity", num_inputs=1)
        graph.add_data_edge(const, 0, ident, 0)
        graph.add_data_edge(ident, 0, out, k)
    return graph, consts


def _recorded_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the constants ConstantDeduplication reads the raw bytes of, in order."""
    import ge.compiler.builtin.const_dedup as const_dedup

    reads: list[str] = []

    def counting(tensor: Tensor) -> bytes | None:
        proto = tensor._source_proto()
        reads.append(proto.name if proto is not None else "")
        return raw_bytes(tensor)

    monkeypatch.setattr(const_dedup, "raw_bytes", counting)
    return reads


def test_dedup_reads_each_weights_bytes_once_per_compilation(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading a proto's raw bytes copies them: on BERT-base (437 MB of weights, all of
    one of a few shapes) that was done once per run of the pass (0.52 s of a 0.86 s
    compile). The samples are kept for the compilation (one pass instance): a second run
    reads no weight again, and still merges what the first left (none) and nothing else."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((4, 4)).astype(np.float32) for _ in range(3)]
    graph, consts = _weights_read_by_outputs(
        {f"w{i}": a for i, a in enumerate([*arrays, arrays[0]])})  # w3 equals w0
    reads = _recorded_reads(monkeypatch)
    dedup = ConstantDeduplication()
    from ge.passes.context import PassContext

    assert dedup.run(graph, PassContext()) in (None, True, 0)
    assert graph.nodes_of_type("Const") == consts[:3]
    # one sample read per weight, plus the digests of the one shared sample (w0 and w3)
    assert sorted(reads) == ["w0", "w0", "w1", "w2", "w3", "w3"]
    reads.clear()
    from ge.passes import NOT_CHANGED

    assert dedup.run(graph, PassContext()) is NOT_CHANGED
    assert reads == []


def test_dedup_never_reads_a_weight_of_a_shape_of_its_own(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An embedding table (the only [8, 3] weight) cannot equal another constant: it is not
    read at all (reading copies it: BERT's compile peaked there). Two [4, 4] weights that
    are equal are read and merged, a third of that shape read and kept."""
    rng = np.random.default_rng(0)
    square = rng.standard_normal((4, 4)).astype(np.float32)
    graph, consts = _weights_read_by_outputs({
        "table": rng.standard_normal((8, 3)).astype(np.float32), "a": square,
        "b": rng.standard_normal((4, 4)).astype(np.float32), "c": square.copy()})
    reads = _recorded_reads(monkeypatch)
    from ge.passes.context import PassContext

    ConstantDeduplication().run(graph, PassContext())
    assert graph.nodes_of_type("Const") == consts[:3]  # c merged into a
    assert "table" not in reads and {"a", "b", "c"} <= set(reads)


@pytest.mark.parametrize("value", [0.0, -0.0, 1.0, float("nan"), 1e-30, -1.0])
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Pow"])
@pytest.mark.parametrize("raw", [True, False], ids=["raw", "typed-fields"])
def test_noop_decisions_on_raw_constants_are_the_decoded_ones(op: str, value: float,
                                                              raw: bool) -> None:
    array = np.array([value, 0.0 if op in ("Add", "Sub") else 1.0], np.float32)
    proto = numpy_helper.from_array(array, "c") if raw else _typed_fields(array)
    proto.name = "c"
    m = model([node(op, ["x", "c"], ["y"], name="op")], [vi("x", shape=[3, 2])],
              [vi("y", shape=[3, 2])], [proto])
    graph = load(m)
    op_node = graph.find_node_by_name("op")
    neutral = 0.0 if op in ("Add", "Sub") else 1.0
    decoded = op_node.get_in_data_nodes()[1].get_attr("value").numpy()
    # (a two-element scale of ones is a weight NoOpElimination keeps; see noop.py)
    expected = 0 if bool(np.all(decoded == neutral)) and op not in ("Mul", "Div") else None
    assert passthrough_input(op_node) == expected
    changed = run_pass(NoOpElimination, graph)
    assert changed is (expected is not None)
    assert_sound(graph, m, x_feeds([3, 2]))


def test_folding_candidates_are_exactly_the_nodes_that_can_fold() -> None:
    """`_may_fold` is a necessary condition: every node the pass folds passes it, among
    them a Shape of a non-constant input and an operator without inputs."""
    m = model([node("Shape", ["x"], ["s"], name="shape"),
               node("Cast", ["s"], ["sf"], name="cast", to=TensorProto.FLOAT),
               node("EyeLike", ["k"], ["eye"], name="eye"),
               node("Add", ["k", "eye"], ["k2"], name="add"),
               node("ReduceSum", ["k2"], ["r"], name="sum", keepdims=0),
               node("Relu", ["x"], ["xr"], name="relu"),
               node("Mul", ["xr", "r"], ["y0"], name="mul"),
               node("Add", ["y0", "sf"], ["y"], name="out")],
              [vi("x", shape=[2, 2])], [vi("y", shape=[2, 2])],
              [init("k", np.eye(2) * 3)])
    graph = load(m)
    candidates = {n.name for n in graph.get_direct_nodes() if _may_fold(n)}
    assert candidates == {"shape", "eye"}  # the others once their inputs have folded
    assert run_pass(ConstantFolding, graph)
    assert histogram(graph)["Const"] >= 2
    assert {n.type for n in graph.get_direct_nodes()} == {"Data", "Const", "Relu", "Mul",
                                                          "Add", "NetOutput"}
    assert_sound(graph, m, x_feeds([2, 2]))
