"""Copy-in, and random rewrite sequences (insert, copy-in, replace uses, remove one node or
several at once) checked as a property: the topological order stays valid, rollback restores
the serialized graph byte for byte, and every export passes onnx.checker and loads back."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from builders import add_data, add_op, add_output
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ge.graph
from ge.errors import GraphError, GraphTypeError
from ge.graph import DataType, Graph, Node, TensorDesc
from ge.ops import infer_shapes


class Boom(Exception):
    pass


def _base(width: int = 3) -> Graph:
    """x[2,4] -> a chain of Relu/Neg nodes; output "y"."""
    graph = Graph("base")
    graph.model.opset_imports = {"": 17}
    x = add_data(graph, 0, "x")
    x.update_output_desc(0, TensorDesc([2, 4], data_type=DataType.DT_FLOAT))
    prev: Node = x
    for i in range(width):
        prev = add_op(graph, "Relu" if i % 2 else "Neg", prev, name=f"n{i}")
    add_output(graph, prev)
    return graph


def _gemm_replacement() -> Graph:
    """Data0, Data1 -> Add -> Abs; outputs (Abs, Data1): a pass-through output."""
    rep = Graph("rep")
    a = add_data(rep, 0, "a")
    b = add_data(rep, 1, "b")
    add = add_op(rep, "Add", a, b, name="sum")
    add.update_output_desc(0, TensorDesc([2, 4], data_type=DataType.DT_FLOAT))
    absn = add_op(rep, "Abs", add, name="abs")
    add_output(rep, absn, b)
    return rep


def test_copy_in_maps_inputs_and_returns_outputs() -> None:
    graph = _base()
    n0 = graph.find_node_by_name("n0")
    n1 = graph.find_node_by_name("n1")
    rep = _gemm_replacement()
    before = rep.to_onnx().SerializeToString()
    nodes, outputs = graph.copy_in(rep, [(n0, 0), (n1, 0)])
    assert [n.type for n in nodes] == ["Add", "Abs"]
    assert nodes[0].get_in_data_nodes_and_port_indexes(0) == (n0, 0)
    assert nodes[0].get_in_data_nodes_and_port_indexes(1) == (n1, 0)
    assert outputs == [(nodes[1], 0), (n1, 0)]
    assert list(nodes[0].get_output_desc(0).shape) == [2, 4]
    assert rep.to_onnx().SerializeToString() == before  # the replacement is untouched
    again, _ = graph.copy_in(rep, [(n0, 0), (n1, 0)])
    names = [n.name for n in graph.get_direct_nodes()]
    assert len(names) == len(set(names))
    values = [v for n in graph.get_direct_nodes() for v in n.get_output_names() if v]
    assert len(values) == len(set(values))
    assert {n.name for n in again}.isdisjoint(n.name for n in nodes)


def test_copy_in_rejects_bad_arguments_and_changes_nothing() -> None:
    graph = _base()
    n0 = graph.find_node_by_name("n0")
    count = graph.mutation_count
    with pytest.raises(GraphTypeError, match=r"replacement must be a ge\.graph\.Graph"):
        graph.copy_in("not a graph", [(n0, 0)])  # type: ignore[arg-type]
    with pytest.raises(GraphTypeError, match=r"inputs\[0\] must be a \(Node, output index\)"):
        graph.copy_in(_gemm_replacement(), [n0, n0])  # type: ignore[list-item]
    with pytest.raises(GraphError, match=r"reads input 1 .* but 1 input"):
        graph.copy_in(_gemm_replacement(), [(n0, 0)])
    with pytest.raises(GraphError, match="has no output 3"):
        graph.copy_in(_gemm_replacement(), [(n0, 0), (n0, 3)])
    assert graph.mutation_count == count


# -- random rewrite sequences ------------------------------------------------------------

def _check_order(graph: Graph) -> None:
    """The maintained order (the node list, never re-sorted here) is a topological one."""
    assert graph._order_ok
    position = {node: i for i, node in enumerate(graph.get_direct_nodes())}
    assert graph.topological_order() == list(position)
    assert len(position) == len(graph)
    for node in position:
        for i in range(node.get_inputs_size()):
            producer = node.get_input_producer(i)
            if producer is not None:
                assert position[producer[0]] < position[node]


def _operators(graph: Graph) -> list[Node]:
    return [n for n in graph.get_direct_nodes() if n.type not in ("Data", "NetOutput")]


def _step(graph: Graph, rep: Graph, choice: int, pick: int) -> None:
    """One rewrite, chosen by `choice`, on the operator at index `pick` (modulo)."""
    ops = _operators(graph)
    x = graph.find_node_by_name("x")
    if not ops:
        target: Node = x
    else:
        target = ops[pick % len(ops)]
    if choice == 0:  # insert a Relu after target, moving its other uses to it
        new = add_op(graph, "Relu", target)
        graph.replace_all_uses(target, 0, new, 0)
    elif choice == 1:  # copy in Add+Abs over (target, x) and move target's uses
        nodes, outputs = graph.copy_in(rep, [(target, 0), (x, 0)])
        graph.replace_all_uses(target, 0, outputs[0][0], outputs[0][1], exclude=nodes)
    elif choice == 2 and target is not x:  # bypass and remove a single-input operator
        producer = target.get_input_producer(0)
        if producer is not None and target.get_inputs_size() == 1:
            graph.replace_all_uses(target, 0, producer[0], producer[1])
            graph.remove_node(target)
    elif choice == 3 and target is not x:  # fold target into a fresh Neg of its producer
        producer = target.get_input_producer(0)
        if producer is not None:
            neg = add_op(graph, "Neg", producer)
            graph.replace_all_uses(target, 0, neg, 0)
            graph.remove_node(target)
    elif choice == 5 and target is not x:  # target and its only-used producer -> one Neg
        producer = target.get_input_producer(0)
        inner = producer[0] if producer is not None else None
        source = inner.get_input_producer(0) if inner is not None and inner is not x else None
        if source is not None and inner.get_out_data_nodes() == [target]:  # type: ignore[union-attr]
            neg = add_op(graph, "Neg", source)
            graph.replace_all_uses(target, 0, neg, 0)
            graph.remove_nodes([target, inner])  # type: ignore[list-item]  # an edge between
    elif choice == 4 and target is not x:  # move target right after x (valid or refused)
        try:
            graph.insert_after(x, target)
        except GraphError as err:
            assert "cannot be placed after 'x'" in str(err)


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 50), st.booleans()),
                min_size=1, max_size=12))
def test_random_rewrites_keep_the_graph_valid_and_rollback_exact(steps) -> None:
    graph = _base()
    rep = _gemm_replacement()
    x = np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4)
    for choice, pick, fail in steps:
        before = graph.to_onnx().SerializeToString()
        names_before = [n.name for n in graph.get_direct_nodes()]
        if fail:
            with pytest.raises(Boom), graph.transaction():
                _step(graph, rep, choice, pick)
                raise Boom
            assert graph.to_onnx().SerializeToString() == before
            assert [n.name for n in graph.get_direct_nodes()] == names_before
        else:
            _step(graph, rep, choice, pick)
        _check_order(graph)
        graph.validate()
        typed = graph.clone()
        infer_shapes(typed)  # as a compilation does before it saves: outputs get types
        model = typed.to_onnx()
        onnx.checker.check_model(model, full_check=True)
        again = ge.graph.load(model)
        assert again.to_onnx().SerializeToString() == model.SerializeToString()
        _run(model, x)  # onnxruntime accepts it
