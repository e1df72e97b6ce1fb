"""Whether a node with bodies is random looks at each node inside once (trial Q): it looked
at every node at any depth of each body and again from each of them, so Ifs nested 22
deep took 118 s to compile (time doubling per level), 30 deep never ended."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ge
import ge.graph
import ge.ops.randomness as randomness


def _nested_ifs(depth: int, random_leaf: bool = False) -> onnx.ModelProto:
    """Ifs nested `depth` deep through their then-branches; the innermost branch reads x
    (or draws a random value like x, `random_leaf`); every else-branch is that leaf."""
    leaf_node = (helper.make_node("RandomUniformLike", ["x"], ["o0"], name="draw") if random_leaf
                 else helper.make_node("Identity", ["x"], ["o0"]))
    leaf = helper.make_graph([leaf_node], "leaf", [],
                             [helper.make_tensor_value_info("o0", TensorProto.FLOAT, [2, 3])])
    inner = leaf
    for k in range(1, depth + 1):
        node = helper.make_node("If", ["c"], [f"o{k}"], name=f"if{k}",
                                then_branch=inner, else_branch=leaf)
        inner = helper.make_graph([node], f"b{k}", [], [
            helper.make_tensor_value_info(f"o{k}", TensorProto.FLOAT, [2, 3])])
    graph = helper.make_graph(list(inner.node), "g", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
        helper.make_tensor_value_info("c", TensorProto.BOOL, [])], list(inner.output))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # (onnxruntime 1.19 reads up to 10)
    return model


def test_each_node_inside_is_looked_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    graph = ge.graph.load(_nested_ifs(16))
    inside = sum(len(g.get_direct_nodes()) for g in graph.get_all_subgraphs())
    looked: list[str] = []
    real = randomness._random_itself

    def counted(node: ge.graph.Node) -> bool:
        looked.append(node.name)
        return real(node)

    monkeypatch.setattr(randomness, "_random_itself", counted)
    top = graph.nodes_of_type("If")[0]
    assert randomness.random_source(top) is None
    assert len(looked) == inside + 1  # (262,141 before)


def test_a_random_node_deep_inside_is_still_found() -> None:
    graph = ge.graph.load(_nested_ifs(12, random_leaf=True))
    top = graph.nodes_of_type("If")[0]
    assert randomness.random_source(top) == (
        "the random operator RandomUniformLike 'draw' in a body of 'if1' in a "
        "body of 'if2' in a body of 'if3' in a body of 'if4' in a body of 'if5' in a body of "
        "'if6' in a body of 'if7' in a body of 'if8' in a body of 'if9' in a body of 'if10' "
        "in a body of 'if11' in a body of 'if12'")


@pytest.mark.builtin_passes
def test_ifs_nested_deep_compile_and_run_as_the_original() -> None:
    result = ge.compile(_nested_ifs(24))  # (minutes before)
    onnx.checker.check_model(result.graph.to_onnx(), full_check=True)
    # run shallower: onnxruntime 1.19 takes minutes to load Ifs nested 24 deep
    result = ge.compile(_nested_ifs(6))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for c in (True, False):
        got = ge.session.run_model(result.graph, {"x": x, "c": np.array(c)})
        np.testing.assert_array_equal(got["o6"], x)
