"""The per-compilation inference memo: a hit gives what onnx would, values that decide a
shape are part of the key, failures replay, and nothing is memoised outside a scope."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import ge.es.all as es
from ge.errors import ShapeInferenceError
from ge.es import GraphBuilder
from ge.graph import DataType, Format, Graph, TensorDesc
from ge.graph.allocation import no_full_collections
from ge.ops import infer_node
from ge.ops.memo import InferenceMemo, inference_memo_scope


def _input(graph: Graph, index: int, shape: list[int]):
    node = graph.add_node("Data", attrs={"index": index})
    node.update_output_desc(0, TensorDesc(shape, Format.FORMAT_ND, DataType.DT_FLOAT))
    return node


def _matmul(shape_a: list[int], shape_b: list[int]):
    graph = Graph("g")
    a, b = _input(graph, 0, shape_a), _input(graph, 1, shape_b)
    node = graph.add_node("MatMul", num_inputs=2)
    graph.add_data_edge(a, 0, node, 0)
    graph.add_data_edge(b, 0, node, 1)
    return node


def _dims(node) -> list[int]:
    return node.get_output_desc(0).get_shape().get_dims()


def test_a_hit_gives_what_onnx_gives_and_input_shapes_are_keyed() -> None:
    memo = InferenceMemo()
    with inference_memo_scope(memo):
        first, same, other = _matmul([2, 3], [3, 5]), _matmul([2, 3], [3, 5]), _matmul(
            [4, 3], [3, 6])
        for node in (first, same, other):
            infer_node(node)
    assert (memo.misses, memo.hits) == (2, 1)
    assert _dims(first) == _dims(same) == [2, 5] and _dims(other) == [4, 6]


def test_integer_constants_are_keyed_by_value() -> None:
    memo = InferenceMemo()
    shapes = []
    with inference_memo_scope(memo):
        for target in ([4, 6], [6, 4], [4, 6]):
            builder = GraphBuilder("reshape")
            x = builder.create_input(0, shape=[2, 12])
            shapes.append(_dims(es.Reshape(x, np.array(target, dtype=np.int64))._node))
    assert shapes == [[4, 6], [6, 4], [4, 6]]
    assert memo.hits >= 1


def test_failures_replay_loudly_or_quietly() -> None:
    memo = InferenceMemo()
    with inference_memo_scope(memo):
        for _ in range(2):
            with pytest.raises(ShapeInferenceError, match="MatMul"):
                infer_node(_matmul([2, 3], [4, 5]))
        assert infer_node(_matmul([2, 3], [4, 5]), quiet=True) is None
    assert memo.misses == 1 and memo.hits == 2


def test_without_a_scope_nothing_is_memoised() -> None:
    memo = InferenceMemo()
    with inference_memo_scope(memo):
        pass
    infer_node(_matmul([2, 3], [3, 5]))
    assert (memo.misses, memo.hits) == (0, 0)


def test_full_collections_are_held_off_and_restored_on_failure() -> None:
    before = gc.get_threshold()
    with pytest.raises(KeyError), no_full_collections():
        assert gc.get_threshold()[:2] == before[:2]
        assert gc.get_threshold()[2] > before[2]
        raise KeyError("boom")
    assert gc.get_threshold() == before


def test_concurrent_holds_restore_the_thresholds_once_all_leave() -> None:
    import threading

    before = gc.get_threshold()
    entered, release = threading.Barrier(3), threading.Event()

    def hold() -> None:
        with no_full_collections():
            entered.wait()
            release.wait()

    threads = [threading.Thread(target=hold) for _ in range(2)]
    for thread in threads:
        thread.start()
    entered.wait()
    assert gc.get_threshold()[2] > before[2]
    release.set()
    for thread in threads:
        thread.join()
    assert gc.get_threshold() == before
