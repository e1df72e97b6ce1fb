"""Moving an If body to a new node keeps its reads of outer values (Node.take_subgraph)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

import ge.graph
from ge.errors import GraphError
from ge.graph import Graph
from model_paths import shared_model


def _run(graph: Graph, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(graph.to_onnx().SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _replace_if(graph: Graph) -> None:
    """A pass's rewrite: a new If node takes over the old one's branches and consumers."""
    old = graph.nodes_of_type("If")[0]
    cond, index = old.get_in_data_nodes_and_port_indexes(0)
    new = graph.add_node("If", name="rebuilt_if", num_inputs=1, num_outputs=1)
    graph.add_data_edge(cond, index, new, 0)
    then_branch = old.take_subgraph("then_branch")
    else_branch = old.take_subgraph("else_branch")
    new.set_attr("then_branch", then_branch)
    new.set_attr("else_branch", else_branch)
    graph.replace_all_uses(old, 0, new, 0)
    graph.remove_node(old)


def test_a_moved_body_still_reads_outer_values_and_computes_the_same() -> None:
    path = shared_model("control_flow")
    graph = ge.graph.load(path)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 8)).astype(np.float32)
    feeds_list = [{"x": x, "n": np.array(3, dtype=np.int64)},
                  {"x": -np.abs(x), "n": np.array(2, dtype=np.int64)}]  # both branches
    before = [_run(graph, feeds) for feeds in feeds_list]
    _replace_if(graph)
    graph.validate()
    new_if = graph.find_node_by_name("rebuilt_if")
    branch = new_if.get_attr("then_branch")
    assert branch.parent_node is new_if
    relu = branch.nodes_of_type("Relu")[0]
    producer, _ = relu.get_in_data_nodes_and_port_indexes(0)
    assert producer.owner_graph is graph  # the outer Gemm, read across the move
    for feeds, expected in zip(feeds_list, before):
        for got, want in zip(_run(graph, feeds), expected):
            np.testing.assert_array_equal(got, want)


def test_the_move_is_undone_with_its_transaction() -> None:
    graph = ge.graph.load(shared_model("control_flow"))
    saved = graph.to_onnx().SerializeToString()
    with pytest.raises(RuntimeError, match="boom"), graph.transaction():
        _replace_if(graph)
        raise RuntimeError("boom")
    assert graph.to_onnx().SerializeToString() == saved
    graph.validate()


def test_a_taken_body_cannot_go_to_an_unrelated_graph() -> None:
    graph = ge.graph.load(shared_model("control_flow"))
    body = graph.nodes_of_type("If")[0].take_subgraph("then_branch")
    other = Graph("other")
    stranger = other.add_node("If", num_inputs=1, num_outputs=1)
    with pytest.raises(GraphError, match="built to read values of graph"):
        stranger.set_attr("then_branch", body)


def test_only_graph_attributes_can_be_taken() -> None:
    graph = ge.graph.load(shared_model("control_flow"))
    gemm = graph.nodes_of_type("Gemm")[0]
    with pytest.raises(GraphError, match="is not a graph"):
        gemm.take_subgraph("alpha")
    with pytest.raises(GraphError, match="has no attribute 'nope'"):
        gemm.take_subgraph("nope")
