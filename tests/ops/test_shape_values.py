"""One node's inference follows shapes computed at run time (`ge.ops.shape_values`): a
Reshape, Expand or ConstantOfShape whose shape input is built from `Shape`, `Gather`,
`Slice`, `Concat`, `Unsqueeze`, arithmetic on sizes... gets the dims whole-model inference
would give it, so a pass that builds one leaves later passes the dims they match on
(trial P: a LayerNorm after such a Reshape stopped fusing)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import ge.es.all as es
import ge.graph
from ge.es import GraphBuilder
from ge.ops import infer_node
from ge.ops.shape_values import shape_value

I64 = np.int64


def _dims(graph: ge.graph.Graph, name: str) -> list[int | str]:
    return graph.find_node_by_name(name).get_output_desc(0).get_shape().get_dims()


def _built() -> ge.graph.Graph:
    """Shape computations as passes write them, each node typed as the builder made it."""
    b = GraphBuilder("g")
    x = b.create_input(0, shape=["batch", "seq", 8])
    shape = es.Shape(x)
    lead = es.Slice(shape, np.array([0], I64), np.array([-1], I64))
    first = es.Slice(shape, np.array([0], I64), np.array([1], I64))
    seq = es.Unsqueeze(es.Gather(shape, np.array(1, I64)), np.array([0], I64))
    outputs = [
        # [batch, seq, 2, 4]
        es.Reshape(es.Reshape(x, np.array([-1, 8], I64)),
                   es.Concat([lead, np.array([2, 4], I64)], axis=0), name="split_last"),
        # 0 keeps seq, -1 is 8 / 4
        es.Reshape(x, es.Concat([first, np.array([0, -1, 4], I64)], axis=0), name="kept"),
        # [batch, seq * 8]: no single dim says it
        es.Reshape(x, es.Concat([first, np.array([-1], I64)], axis=0), name="rest"),
        es.Expand(np.ones((1, 1, 8), np.float32), shape, name="wide"),
        es.ConstantOfShape(es.Concat([seq, np.array([3], I64)], axis=0), name="filled"),
        # sizes computed, a symbol plus 0 kept: [batch, seq, 8]
        es.Reshape(x, es.Add(shape, np.array([0, 0, 0], I64)), name="summed"),
        # heads: the static hidden size over 4, [batch, seq, 2, 4]
        es.Reshape(x, es.Concat([es.Slice(shape, np.array([0], I64), np.array([2], I64)),
                                 es.Div(es.Slice(shape, np.array([2], I64),
                                                 np.array([3], I64)), np.array([4], I64)),
                                 np.array([4], I64)], axis=0), name="heads"),
        # batch * seq is no dim of its own: [-1, 8]
        es.Reshape(x, es.Concat([es.Mul(first, es.Slice(shape, np.array([1], I64),
                                                         np.array([2], I64))),
                                 np.array([8], I64)], axis=0), name="rows"),
    ]
    return b.build_and_reset(outputs)


def test_a_computed_shape_gives_the_dims_whole_model_inference_would() -> None:
    graph = _built()
    assert _dims(graph, "split_last") == ["batch", "seq", 2, 4]
    assert _dims(graph, "kept") == ["batch", "seq", 2, 4]
    assert _dims(graph, "wide") == ["batch", "seq", 8]
    assert _dims(graph, "filled") == ["seq", 3]
    assert _dims(graph, "summed") == ["batch", "seq", 8]
    assert _dims(graph, "heads") == ["batch", "seq", 2, 4]


def test_what_cannot_be_told_stays_unknown() -> None:
    graph = _built()
    assert _dims(graph, "rest") == ["batch", -1]  # seq * 8 is no dim of its own
    assert _dims(graph, "rows") == [-1, 8]
    assert shape_value(graph.find_node_by_name("rows"), 1) == [None, 8]


def test_the_dims_agree_with_onnxruntime_at_two_sizes() -> None:
    graph = _built()
    proto = graph.to_onnx()
    onnx.checker.check_model(proto, full_check=True)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in proto.graph.output]
    for batch, seq in ((1, 3), (4, 5)):
        x = np.zeros((batch, seq, 8), np.float32)
        sizes = {"batch": batch, "seq": seq}
        for name, value in zip(names, session.run(None, {proto.graph.input[0].name: x}),
                               strict=True):
            producer = graph.find_value(name)
            assert producer is not None
            dims = producer[0].get_output_desc(producer[1]).get_shape().get_dims()
            want = [sizes.get(d, d) if isinstance(d, str) else d for d in dims]
            assert all(w == -1 or w == got for w, got in zip(want, value.shape, strict=True))


@pytest.mark.parametrize(("opset", "slice_by_attributes"), [(9, True), (17, False)])
def test_infer_node_follows_the_chain_of_a_loaded_model(opset: int,
                                                        slice_by_attributes: bool) -> None:
    """A model without value_info for the chain, typed node by node as passes do."""
    make = helper.make_node
    if slice_by_attributes:  # Slice-1 takes starts and ends as attributes
        cut = make("Slice", ["s"], ["lead"], starts=[0], ends=[2], axes=[0])
    else:
        cut = make("Slice", ["s", "zero", "two"], ["lead"])
    nodes = [make("Shape", ["x"], ["s"]), cut,
             make("Concat", ["lead", "tail"], ["target"], axis=0),
             make("Reshape", ["x", "target"], ["y"], name="reshape")]
    inits = [onnx.numpy_helper.from_array(np.array(v, I64), n)
             for n, v in (("zero", [0]), ("two", [2]), ("tail", [4, 2]))]
    graph_proto = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    graph = ge.graph.load(helper.make_model(
        graph_proto, opset_imports=[helper.make_opsetid("", opset)]))
    for node in graph.topological_order():
        infer_node(node)
    assert _dims(graph, "reshape") == ["b", "s", 4, 2]
