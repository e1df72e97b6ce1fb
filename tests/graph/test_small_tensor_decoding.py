"""A small tensor attribute is decoded once per node, never stale, and reading it changes
nothing that is saved; a large one is decoded only when its data is asked for."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx import numpy_helper

import ge.graph
import ge.graph.tensor
from ge.errors import GraphError, ModelLoadError
from ge.graph import Tensor
from ge.graph.node import SMALL_TENSOR_ELEMENTS


def _model() -> onnx.ModelProto:
    fill = numpy_helper.from_array(np.array([0.5], np.float32))
    nodes = [oh.make_node("Add", ["x", "eps"], ["a"], name="add"),
             oh.make_node("Mul", ["a", "big"], ["m"], name="mul"),
             oh.make_node("ConstantOfShape", ["shape"], ["y"], name="fill", value=fill)]
    inits = [numpy_helper.from_array(np.array(1e-5, np.float32), "eps"),
             numpy_helper.from_array(np.arange(SMALL_TENSOR_ELEMENTS + 1, dtype=np.float32),
                                     "big"),
             numpy_helper.from_array(np.array([2, 3], np.int64), "shape")]
    n = SMALL_TENSOR_ELEMENTS + 1
    vi = [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [n]),
          oh.make_tensor_value_info("m", onnx.TensorProto.FLOAT, [n]),
          oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])]
    return oh.make_model(oh.make_graph(nodes, "g", vi[:1], vi[1:], inits),
                         opset_imports=[oh.make_opsetid("", 17)])


@pytest.fixture
def decodes(monkeypatch):
    """The names of the tensors decoded from their protos, in order."""
    seen: list[str] = []
    real = numpy_helper.to_array

    def counting(proto, *args, **kwargs):
        seen.append(proto.name)
        return real(proto, *args, **kwargs)

    monkeypatch.setattr(ge.graph.tensor.numpy_helper, "to_array", counting)
    return seen


def _const(graph: ge.graph.Graph, name: str) -> ge.graph.Node:
    return next(n for n in graph.get_all_nodes() if n.type == "Const" and n.name == name)


def test_a_small_constant_is_decoded_once(decodes) -> None:
    graph = ge.graph.load(_model())
    eps = _const(graph, "eps")
    values = [eps.get_attr("value").numpy() for _ in range(5)]
    assert decodes == ["eps"]
    assert all(v.item() == pytest.approx(1e-5) for v in values)
    with pytest.raises(ValueError):
        values[0][...] = 2.0  # read-only: no caller can change what the others read


def test_a_large_constant_is_decoded_only_when_asked(decodes) -> None:
    graph = ge.graph.load(_model())
    big = _const(graph, "big").get_attr("value")
    assert big.size == SMALL_TENSOR_ELEMENTS + 1 and decodes == []
    assert big.numpy()[-1] == SMALL_TENSOR_ELEMENTS
    assert decodes == ["big"]


def test_a_tensor_attribute_read_as_stored_follows_changes_and_rollbacks(decodes) -> None:
    graph = ge.graph.load(_model())
    fill = graph.find_node_by_name("fill")
    assert [fill.get_attr("value").numpy().item() for _ in range(3)] == [0.5] * 3
    assert len(decodes) == 1
    try:
        with graph.transaction():
            fill.set_attr("value", Tensor(np.array([7.0], np.float32)))
            assert fill.get_attr("value").numpy().item() == 7.0
            raise RuntimeError("undo")
    except RuntimeError:
        pass
    assert fill.get_attr("value").numpy().item() == 0.5
    fill.set_attr("value", Tensor(np.array([3.0], np.float32)))
    assert fill.get_attr("value").numpy().item() == 3.0


def test_reading_constants_keeps_an_untouched_model_byte_identical(tmp_path) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(_model(), path)
    graph = ge.graph.load(path)
    for node in graph.get_all_nodes():
        if node.has_attr("value"):
            node.get_attr("value").numpy()
    graph.save(tmp_path / "out.onnx")
    assert (tmp_path / "out.onnx").read_bytes() == path.read_bytes()


def test_an_undecodable_small_tensor_fails_when_its_data_is_asked() -> None:
    """Loading refuses it (tests/graph/test_payload_checks.py); a graph read without that
    check (a model ge converted itself) fails only when the data is asked for."""
    from ge.graph.onnx_import import model_to_graph

    model = _model()
    model.graph.initializer[0].raw_data = b"\x00\x01"  # 2 bytes for one float32
    with pytest.raises(ModelLoadError, match="initializer 'eps' holds 2 bytes of raw_data"):
        ge.graph.load(model)
    graph = model_to_graph(model, check_payloads=False)
    value = _const(graph, "eps").get_attr("value")  # reading the attribute still works
    with pytest.raises(GraphError, match="cannot be decoded"):
        value.numpy()
