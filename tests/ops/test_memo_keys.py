"""The memo's signature reads its inputs directly (`ge.ops.memo._input_key`) but gives the
keys it gave before (kept here as the oracle), for loaded and built nodes, protos and
decoded descs alike; `infer_new_node` types a node as `infer_node(quiet=True)` does."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import AttributeProto, TensorProto, helper

import ge.es.all as es
from ge.es import GraphBuilder
from ge.graph import Graph, Node, Tensor, TensorDesc, load
from ge.graph.attributes import GRAPH_KINDS
from ge.graph.keys import hashable_value
from ge.ops import infer_node
from ge.ops.inference import infer_new_node
from ge.ops.memo import (
    _FLOAT_DATA_TYPES,
    _FLOAT_TYPES,
    _FLOAT_VALUE_OPS,
    _VALUE_LIMIT,
    InferenceMemo,
    inference_memo_scope,
    signature,
)

# -- the oracle: the keys as they were computed before ------------------------------------


def _reference_slot_key(source: Node, index: int) -> Hashable:
    descs = source._out_descs
    slot = descs[index] if descs is not None else None
    if slot is None:
        if source._type == "Const" and "value" in source._attrs:
            value = source._attr_value("value")
            if isinstance(value, Tensor):
                return ("t", int(value.data_type), tuple(value.shape))
        return None
    if isinstance(slot, TensorDesc):
        return (slot._key(), slot._format)
    return slot.type.SerializeToString()


def _reference_value_key(source: Node, op_type: str) -> Hashable:
    if source._type != "Const":
        return None
    stored = source._attrs.get("value")
    if stored is None:
        return None
    if isinstance(stored, AttributeProto):
        proto = stored.t
        if op_type not in _FLOAT_VALUE_OPS and proto.data_type in _FLOAT_TYPES:
            return None
        size = 1
        for dim in proto.dims:
            size *= dim
        if size > _VALUE_LIMIT:
            return None
    value = source._attr_value("value")
    if not isinstance(value, Tensor) or value.size > _VALUE_LIMIT:
        return None
    if op_type not in _FLOAT_VALUE_OPS and value.data_type in _FLOAT_DATA_TYPES:
        return None
    return value.tobytes()


def reference_signature(node: Node) -> Hashable | None:
    if node._in_descs is not None and any(d is not None for d in node._in_descs):
        return None
    attrs: list[tuple[Any, ...]] = []
    for name, stored in node._attrs.items():
        if isinstance(stored, AttributeProto):
            if stored.type in GRAPH_KINDS:
                return None
            attrs.append((name, stored.SerializeToString()))
            continue
        kind, value = stored
        if kind in GRAPH_KINDS:
            return None
        try:
            attrs.append((name, kind, hashable_value(value)))
        except TypeError:
            return None
    inputs: list[Hashable] = []
    op_type = node._type
    for producer in node._inputs:
        if producer is None:
            inputs.append(None)
        else:
            source, index = producer
            inputs.append((_reference_slot_key(source, index),
                           _reference_value_key(source, op_type)))
    graph = node._graph
    opsets = tuple(sorted(graph.root_graph().opset_imports.items())) if graph else ()
    return (node._domain, op_type, tuple(sorted(attrs)), tuple(inputs), len(node._out_names),
            opsets)


# -- graphs ---------------------------------------------------------------------------------


def _model() -> onnx.ModelProto:
    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    w = np.arange(16, dtype=np.float32).reshape(4, 4)
    branch = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["branch_out"])], "branch", [],
        [helper.make_tensor_value_info("branch_out", f32, [2, 4])])
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["mm"], name="mm"),
        helper.make_node("Reshape", ["mm", "shape"], ["flat"], name="reshape"),
        helper.make_node("Gemm", ["x", "W", "b"], ["gemm"], name="gemm", alpha=0.5, transB=1),
        helper.make_node("Range", ["start", "limit", "delta"], ["range"], name="range"),
        helper.make_node("Expand", ["b", "big"], ["expanded"], name="expand"),
        helper.make_node("Clip", ["x", "", "hi"], ["clipped"], name="clip"),
        helper.make_node("Cast", ["ids"], ["ids_f"], name="cast", to=f32),
        helper.make_node("If", ["cond"], ["if_out"], name="if", then_branch=branch,
                         else_branch=branch),
        helper.make_node("Constant", [], ["const_node"], name="constant",
                         value=helper.make_tensor("v", i64, [2], [2, 4])),
        helper.make_node("Reshape", ["gemm", "const_node"], ["gemm2"], name="reshape2"),
    ]
    inits = [
        helper.make_tensor("W", f32, [4, 4], w.tobytes(), raw=True),
        helper.make_tensor("b", f32, [4], [0.0, 1.0, 2.0, 3.0]),
        helper.make_tensor("shape", i64, [1], [8]),
        helper.make_tensor("big", i64, [70], [1] * 70),
        helper.make_tensor("start", f32, [], [0.0]),
        helper.make_tensor("limit", f32, [], [5.0]),
        helper.make_tensor("delta", f32, [], [1.0]),
        helper.make_tensor("hi", f32, [], [6.0]),
        helper.make_tensor("ids", i64, [3], [1, 2, 3]),
    ]
    graph = helper.make_graph(
        nodes, "keys",
        [helper.make_tensor_value_info("x", f32, ["batch", 4]),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info(n, f32, None) for n in
         ("flat", "range", "expanded", "clipped", "ids_f", "if_out", "gemm2")],
        inits, value_info=[helper.make_tensor_value_info("mm", f32, ["batch", 4]),
                           helper.make_tensor_value_info("gemm", f32, [2, 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _operators(graph: Graph) -> list[Node]:
    return [n for n in graph.get_direct_nodes() if n.type not in ("Data", "Const", "NetOutput")]


def _assert_same_keys(graph: Graph) -> int:
    keyed = 0
    for node in _operators(graph):
        assert signature(node) == reference_signature(node), node.name
        keyed += signature(node) is not None
    return keyed


def test_the_keys_of_a_loaded_graph_are_unchanged() -> None:
    graph = load(_model())
    assert _assert_same_keys(graph) == 8  # every operator but the If (it owns bodies)
    for node in graph.get_direct_nodes():  # decode every desc the model declares
        for i in range(node.get_outputs_size()):
            node.get_output_desc(i)
    assert _assert_same_keys(graph) == 8
    gemm = next(n for n in graph.get_direct_nodes() if n.name == "gemm")
    gemm.set_attr("alpha", 0.25)  # now stored as a Python value
    graph.get_direct_nodes()[0].update_output_desc(0, TensorDesc([3, 4]))
    assert _assert_same_keys(graph) == 8
    reshape = next(n for n in graph.get_direct_nodes() if n.name == "reshape")
    reshape.update_input_desc(0, TensorDesc([2, 4]))  # an input desc of its own: not keyed
    assert signature(reshape) is None and reference_signature(reshape) is None


def test_the_keys_of_constants_in_every_form_are_unchanged() -> None:
    builder = GraphBuilder("consts", opset=17)
    x = builder.create_input(0, shape=[2, 4])
    made = [
        es.Reshape(x, [8]),  # a small int64 constant: keyed by value
        es.Reshape(x, np.arange(8, dtype=np.int64) * 0 + 8),
        es.Add(x, 1.5),  # a float constant: by type and shape only
        es.Range(0.0, 4.0, 1.0, builder=builder),  # Range: float values too
        es.Expand(x, np.ones(80, dtype=np.int64)),  # too large for its values
        es.Mul(x, np.float32(2.0)),  # (a numpy scalar: its own dtype)
    ]
    graph = builder.graph
    for holder in made:
        node = holder._node
        assert signature(node) == reference_signature(node)
    const = next(n for n in graph.get_direct_nodes() if n.type == "Const")
    consumer = next(iter(const.get_out_data_nodes()))
    tensor = const._attr_value("value")
    for stored in (helper.make_attribute("value", tensor.to_proto()),  # a proto, as loaded
                   (AttributeProto.INTS, [1, 2])):  # not a tensor at all
        const._attrs["value"] = stored
        assert signature(consumer) == reference_signature(consumer)
    const._out_slots()[0] = TensorDesc([1])  # a desc of its own besides its value
    assert signature(consumer) == reference_signature(consumer)
    del const._attrs["value"]
    assert signature(consumer) == reference_signature(consumer)


# -- infer_new_node -------------------------------------------------------------------------


def _typed(node: Node) -> list[Any]:
    return [(node.has_output_desc(i), repr(node.get_output_desc(i)))
            for i in range(node.get_outputs_size())]


def _matmul(shape_a: list[int], shape_b: list[int]) -> Node:
    graph = Graph("g")
    a = graph.add_node("Data", attrs={"index": 0})
    a.update_output_desc(0, TensorDesc(shape_a))
    b = graph.add_node("Data", attrs={"index": 1})
    b.update_output_desc(0, TensorDesc(shape_b))
    node = graph.add_node("MatMul", num_inputs=2)
    graph.add_data_edge(a, 0, node, 0)
    graph.add_data_edge(b, 0, node, 1)
    return node


@pytest.mark.parametrize("memo", [False, True])
def test_infer_new_node_types_as_infer_node_does(memo: bool) -> None:
    pairs = [([2, 3], [3, 5]), ([2, 3], [3, 5]), ([2, 3], [4, 5]), ([2, 3], [4, 5]),
             ([4, 3], [3, 6])]
    scope = InferenceMemo()
    for shape_a, shape_b in pairs:
        old, new = _matmul(shape_a, shape_b), _matmul(shape_a, shape_b)
        if memo:
            with inference_memo_scope(scope):
                infer_node(old, quiet=True)
                infer_new_node(new)
        else:
            infer_node(old, quiet=True)
            infer_new_node(new)  # a failure is quiet too
        assert _typed(new) == _typed(old)
    if memo:
        assert scope.misses == 3 and scope.hits == 7


def test_a_memo_hit_without_copies_writes_the_descs() -> None:
    memo = InferenceMemo()
    first, second = _matmul([2, 3], [3, 5]), _matmul([2, 3], [3, 5])
    with inference_memo_scope(memo):
        infer_node(first)
    assert memo.infer(second, lambda n: None, lambda n, i, d: n.update_output_desc(i, d),
                      copies=False) == []
    assert _typed(second) == _typed(first) and memo.hits == 1


def test_a_memo_keys_the_opset_imports_as_they_are_now() -> None:
    """The memo remembers the imports' key only while the imports stay as they were."""
    graph = load(_model())
    memo = InferenceMemo()
    gemm = next(n for n in graph.get_direct_nodes() if n.name == "gemm")
    first = signature(gemm, memo)
    assert first == signature(gemm) == reference_signature(gemm)
    graph.opset_imports["com.example"] = 1  # changed in place
    assert signature(gemm, memo) == reference_signature(gemm) != first
    graph.model.opset_imports = {"": 16}  # replaced
    assert signature(gemm, memo) == reference_signature(gemm)
    assert signature(gemm, memo)[-1] == (("", 16),)  # type: ignore[index]


@pytest.mark.parametrize("op, build", [
    ("Resize", lambda x, v: es.Resize(x, None, v, mode="nearest")),
    ("Upsample", lambda x, v: es.Upsample(x, v, mode="nearest")),
    ("OneHot", lambda x, v: es.OneHot(es.Cast(x, to=7), v,
                                      np.array([0, 1], np.float32))),
])
def test_float_values_that_decide_a_shape_key_the_memo(op: str, build: Any) -> None:
    """Two operators whose float constants differ get their own shapes inside one memo
    (trial U: a Resize by 0.5 got the shape of the one by 2 built first)."""
    firsts, seconds = (([1, 1, 2, 2], [1, 1, 0.5, 0.5]) if op != "OneHot" else (4, 7))
    with inference_memo_scope(InferenceMemo()):
        builder = GraphBuilder("g", opset=9 if op == "Upsample" else 17)
        x = builder.create_input(0, shape=[1, 3, 4, 4])
        one = build(x, builder.create_const(np.array(firsts, np.float32)))
        two = build(x, builder.create_const(np.array(seconds, np.float32)))
    want = {"OneHot": ([1, 3, 4, 4, 4], [1, 3, 4, 4, 7])}.get(
        op, ([1, 3, 8, 8], [1, 3, 2, 2]))
    assert one.get_tensor_desc().shape.get_dims() == want[0]
    assert two.get_tensor_desc().shape.get_dims() == want[1]
