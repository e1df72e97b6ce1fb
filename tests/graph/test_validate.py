"""`Graph.validate()`: each class of defect is reported, with the offending node names.

Some defects can't be made through the public API (it refuses duplicate names and keeps both
ends of an edge in step); those tests poke private fields to build the broken state and say
so where they do.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from builders import add_data, add_op, add_output, attach_branch, chain, diamond, if_graph

import ge.graph
from ge.errors import GraphValidationError
from ge.graph import DataType, Graph, Tensor, TensorDesc
from ge.graph.validation import find_node_problems
from model_paths import all_shared_models

MODELS = all_shared_models()


def _invalid(graph: Graph) -> GraphValidationError:
    with pytest.raises(GraphValidationError) as info:
        graph.validate()
    err = info.value
    assert isinstance(err, RuntimeError) and err.code == "GE1003"
    assert str(err).startswith("[GE1003]")
    assert err.problems == graph.find_problems()
    return err


def _expect(graph: Graph, kind: str, *names: str) -> GraphValidationError:
    """validate() fails with a `kind` problem naming `names` (in the problem, message, .nodes)."""
    err = _invalid(graph)
    matching = [p for p in err.problems if p.kind == kind and set(names) <= set(p.nodes)]
    assert matching, f"no {kind} problem naming {names}: {err.problems}"
    for name in names:
        assert name in err.nodes
        assert name in matching[0].message and name in str(err)
    return err


# -- valid graphs ------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [chain, diamond, if_graph])
def test_built_graphs_validate_clean(make) -> None:
    """Graphs built through the API validate without problems."""
    graph = make()
    graph.validate()
    assert graph.find_problems() == []


@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_every_shared_model_validates_clean(path: Path) -> None:
    """Every model of the shared corpus loads into a valid graph (subgraphs included)."""
    graph = ge.graph.load(path)
    assert graph.find_problems() == []
    graph.validate()


def test_a_custom_op_without_schema_is_not_an_arity_error() -> None:
    """Operators of an imported custom domain have no schema to check against."""
    graph = chain()
    graph.model.opset_imports["my.ops"] = 1
    custom = graph.add_node("FusedThing", domain="my.ops", num_inputs=5, num_outputs=3)
    graph.add_data_edge(graph.find_node_by_name("x"), 0, custom, 4)
    graph.validate()


# -- dangling edges ----------------------------------------------------------------------------


def test_edge_from_a_node_taken_out_without_its_edges() -> None:
    """An input still reading a node that left the graph is a dangling edge."""
    graph = chain()
    n0 = graph.find_node_by_name("n0")
    graph._erase(n0)  # private: takes the node out but leaves its edges (remove_node wouldn't)
    err = _expect(graph, "dangling-edge", "n1", "n0")
    assert "removed" in str(err)


def test_half_edge_missing_on_the_producer_side() -> None:
    """An input whose producer does not list it as a consumer is a dangling edge."""
    graph = chain()
    n0, n1 = graph.find_node_by_name("n0"), graph.find_node_by_name("n1")
    del n0._consumers[0][(n1, 0)]  # private: the public API always updates both ends
    err = _expect(graph, "dangling-edge", "n1", "n0")
    assert "producer side" in str(err)


def test_half_edge_missing_on_the_consumer_side() -> None:
    """A consumer entry whose input does not point back is a dangling edge."""
    graph = chain()
    x, n2 = graph.find_node_by_name("x"), graph.find_node_by_name("n2")
    x._consumers[0][(n2, 0)] = None  # private: n2's input 0 reads n1, not x
    err = _expect(graph, "dangling-edge", "x", "n2")
    assert "consumer side" in str(err)


def test_edge_from_a_graph_that_does_not_enclose() -> None:
    """An input read from a node of an unrelated graph is a dangling edge."""
    graph, other = chain(), diamond()
    n1, a = graph.find_node_by_name("n1"), other.find_node_by_name("a")
    graph.remove_edge(graph.find_node_by_name("n0"), 0, n1, 0)
    n1._inputs[0] = (a, 0)  # private: add_data_edge refuses nodes of other graphs
    a._consumers[0][(n1, 0)] = None
    err = _expect(graph, "dangling-edge", "n1", "a")
    assert "does not enclose" in str(err)


def test_edge_from_a_sibling_subgraph() -> None:
    """A subgraph node reading a value of a sibling subgraph is a dangling edge."""
    graph = if_graph()
    then, other = graph.get_subgraph("then"), graph.get_subgraph("else")
    relu, neg = then.find_node_by_name("then_relu"), other.find_node_by_name("else_neg")
    then.remove_edge(graph.find_node_by_name("h"), 0, relu, 0)
    relu._inputs[0] = (neg, 0)  # private: add_data_edge only reads enclosing graphs
    neg._consumers[0] = {(relu, 0): None}
    err = _expect(graph, "dangling-edge", "then_relu", "else_neg")
    assert any(p.graph == "then" for p in err.problems)


def test_consumer_in_a_graph_outside_the_hierarchy() -> None:
    """An output still feeding a node of a subgraph that was cut off is a dangling edge."""
    graph = if_graph()
    if_node, then = graph.find_node_by_name("if"), graph.get_subgraph("then")
    then._parent_node = None  # private: cut the subgraph off but keep its read of h
    if_node._attrs.pop("then_branch")
    _expect(graph, "dangling-edge", "h", "then_relu")


def test_control_edge_to_another_graph() -> None:
    """A control edge to a node that is not in the graph is a dangling edge."""
    graph, other = chain(), chain("other")
    n0, foreign = graph.find_node_by_name("n0"), other.find_node_by_name("n1")
    n0._ctrl_out = {foreign: None}  # private: add_control_edge refuses foreign nodes
    foreign._ctrl_in = {n0: None}
    _expect(graph, "dangling-edge", "n0", "n1")


# -- cycles ------------------------------------------------------------------------------------


def test_cycle_through_data_edges() -> None:
    """A cycle made with add_data_edge (the API allows it) is reported with its nodes."""
    graph = chain()
    x, n0, n2 = (graph.find_node_by_name(n) for n in ("x", "n0", "n2"))
    graph.remove_edge(x, 0, n0, 0)
    graph.add_data_edge(n2, 0, n0, 0)
    err = _expect(graph, "cycle", "n0", "n1", "n2")
    assert "x" not in next(p for p in err.problems if p.kind == "cycle").nodes


def test_cycle_through_a_control_edge() -> None:
    """A control edge against the data flow closes a cycle."""
    graph = diamond()
    graph.add_control_edge(graph.find_node_by_name("d"), graph.find_node_by_name("a"))
    _expect(graph, "cycle", "a", "c", "d")


def test_cycle_through_a_subgraph_read() -> None:
    """A subgraph reading a value computed from its owner's output closes a cycle."""
    graph = if_graph()
    if_node = graph.find_node_by_name("if")
    after = add_op(graph, "Relu", if_node, name="after")
    attach_branch(after, "body", "Relu", if_node, "unused")  # keeps `after` a plain reader
    then = graph.get_subgraph("then")
    reader = then.add_node("Identity", name="reads_after", num_inputs=1)
    then.add_data_edge(after, 0, reader, 0)
    _expect(graph, "cycle", "if", "after")


# -- duplicate names ---------------------------------------------------------------------------


def test_duplicate_node_names() -> None:
    """Two direct nodes with one name are reported with that name."""
    graph = chain()
    graph.find_node_by_name("n1")._name = "n0"  # private: add_node refuses a taken name
    err = _expect(graph, "duplicate-name", "n0")
    assert "2 nodes" in str(err)


def test_duplicate_value_names() -> None:
    """Two outputs producing one ONNX value name are a duplicate name."""
    graph = chain()
    n0, n1 = graph.find_node_by_name("n0"), graph.find_node_by_name("n1")
    n1._out_names[0] = n0.get_output_name(0)  # private: add_node refuses a taken value name
    _expect(graph, "duplicate-name", n0.get_output_name(0))


def test_subgraph_value_shadowing_an_outer_value() -> None:
    """A subgraph value with the name of an enclosing graph's value is a duplicate name."""
    graph = if_graph()
    h_value = graph.find_node_by_name("h").get_output_name(0)
    then = graph.get_subgraph("then")
    then.find_node_by_name("then_relu")._out_names[0] = h_value  # private, as above
    err = _expect(graph, "duplicate-name", h_value)
    assert "shadows" in str(err)


# -- arity -------------------------------------------------------------------------------------


def test_add_with_three_inputs() -> None:
    """An Add with 3 inputs breaks the ONNX schema (2..2)."""
    graph = diamond()
    c = graph.find_node_by_name("c")
    graph.set_inputs_size(c, 3)
    graph.add_data_edge(graph.find_node_by_name("x"), 0, c, 2)
    err = _expect(graph, "arity", "c")
    assert "3 inputs" in str(err)


def test_relu_with_unconnected_required_input() -> None:
    """A Relu whose required input is not connected is an arity problem."""
    graph = chain()
    graph.remove_edge(graph.find_node_by_name("x"), 0, graph.find_node_by_name("n0"), 0)
    err = _expect(graph, "arity", "n0")
    assert "required input 0" in str(err)


def test_relu_without_input_anchor() -> None:
    """A Relu created with no input anchor at all is an arity problem."""
    graph = chain()
    graph.add_node("Relu", name="bare", num_inputs=0)
    _expect(graph, "arity", "bare")


# -- attributes against the schema ---------------------------------------------------------------


def test_an_attribute_the_schema_does_not_define() -> None:
    """A private attribute on an ONNX operator is what onnx.checker and runtimes reject."""
    graph = chain()
    graph.find_node_by_name("n0").set_attr("tagged", 1)
    err = _expect(graph, "attribute", "n0")
    assert re.search(r"Relu node 'n0' has attribute 'tagged', which Relu \(opset \d+\) does "
                     r"not define; ONNX runtimes reject it \(keep private data in node "
                     r"metadata: Node.set_metadata\)", str(err))


def test_an_attribute_of_another_type() -> None:
    graph = chain()
    leaky = graph.add_node("LeakyRelu", name="leaky", num_inputs=1)
    graph.add_data_edge(graph.find_node_by_name("n0"), 0, leaky, 0)
    leaky.set_attr("alpha", [1.0])  # a list: LeakyRelu's alpha is a float (an int reads so)
    err = _expect(graph, "attribute", "leaky")
    assert re.search(r"attribute 'alpha' of LeakyRelu node 'leaky' is FLOATS; LeakyRelu "
                     r"\(opset \d+\) takes FLOAT", str(err))


def test_a_required_attribute_missing() -> None:
    graph = chain()
    cast = graph.add_node("Cast", name="cast", num_inputs=1)
    graph.add_data_edge(graph.find_node_by_name("n0"), 0, cast, 0)
    err = _expect(graph, "attribute", "cast")
    assert "required attribute 'to' of Cast node 'cast' is not set" in str(err)


def _typed_chain() -> Graph:
    graph = chain()
    graph.find_node_by_name("x").update_output_desc(0, TensorDesc([2], data_type=DataType.DT_FLOAT))
    for name in ("n0", "n1", "n2"):
        graph.find_node_by_name(name).update_output_desc(
            0, TensorDesc([2], data_type=DataType.DT_FLOAT))
    return graph


def _type_problems(graph: Graph) -> list[str]:
    return [p.message for p in find_node_problems(list(graph.get_direct_nodes()), typed=True)
            if p.kind == "type"]


def test_types_of_a_consistently_typed_graph_are_fine() -> None:
    assert _type_problems(_typed_chain()) == []


def test_a_type_the_operator_does_not_take() -> None:
    graph = _typed_chain()
    graph.find_node_by_name("n0").update_output_desc(0, TensorDesc([2],
                                                                   data_type=DataType.DT_STRING))
    problems = _type_problems(graph)  # n0 writes a string (its input is float); n1 reads it
    assert any(re.match(r"input 0 \('X'\) of Relu node 'n1' is tensor\(string\), which Relu "
                        r"\(opset \d+\) does not take \(T: .*float.*\)", m) for m in problems)
    assert any(m.startswith("output 0 ('Y') of Relu node 'n0' is tensor(string)")
               for m in problems)


def test_a_fixed_input_type() -> None:
    graph = _typed_chain()
    shape = graph.add_node("Const", name="shape", num_inputs=0,
                           attrs={"value": Tensor(np.array([2.0], np.float32))})
    shape.update_output_desc(0, TensorDesc([1], data_type=DataType.DT_FLOAT))
    reshape = graph.add_node("Reshape", name="reshape", num_inputs=2)
    graph.add_data_edge(graph.find_node_by_name("n2"), 0, reshape, 0)
    graph.add_data_edge(shape, 0, reshape, 1)
    reshape.update_output_desc(0, TensorDesc([2], data_type=DataType.DT_FLOAT))
    assert [m for m in _type_problems(graph) if "'reshape'" in m] == [
        f"input 1 ('shape') of Reshape node 'reshape' is tensor(float); Reshape (opset "
        f"{graph.get_opset_version('')}) takes tensor(int64)"]


def test_data_node_with_an_input() -> None:
    """A Data node must have no input and one output."""
    graph = chain()
    x = graph.find_node_by_name("x")
    graph.set_inputs_size(x, 1)
    err = _expect(graph, "arity", "x")
    assert "expected 0 and 1" in str(err)


def test_const_without_a_tensor_value() -> None:
    """A Const node needs a Tensor `value`."""
    graph = diamond()
    graph.add_node("Const", name="empty")
    k = graph.find_node_by_name("k")
    k.remove_attr("value")
    k.set_attr("value", "not a tensor")
    err = _invalid(graph)
    assert {"empty", "k"} <= set(err.nodes)
    assert {p.kind for p in err.problems} == {"arity"}


def test_net_output_with_unconnected_input() -> None:
    """Every NetOutput input is a graph output and must be connected."""
    graph = chain()
    out = graph.find_node_by_name("out")
    graph.set_inputs_size(out, 2)
    err = _expect(graph, "arity", "out")
    assert "graph output 1" in str(err)


def test_operator_of_an_unimported_domain() -> None:
    """A node of a domain the model does not import is reported."""
    graph = chain()
    graph.add_node("Thing", domain="not.imported", name="thing")
    err = _expect(graph, "opset-import", "thing")
    assert "node 'thing' uses domain 'not.imported', which the model does not import" in str(err)


def test_arity_problem_inside_a_subgraph() -> None:
    """Problems of subgraphs are found too, and say which graph they are in."""
    graph = if_graph()
    then = graph.get_subgraph("then")
    then.remove_edge(graph.find_node_by_name("h"), 0, then.find_node_by_name("then_relu"), 0)
    err = _expect(graph, "arity", "then_relu")
    assert [p.graph for p in err.problems] == ["then"] and "graph then" in str(err)


# -- structure ---------------------------------------------------------------------------------


def test_two_net_outputs() -> None:
    """A graph has exactly one NetOutput."""
    graph = chain()
    add_output(graph, graph.find_node_by_name("n1"), name="second_out")
    _expect(graph, "structure", "out", "second_out")


def test_no_net_output() -> None:
    """A graph without NetOutput is reported."""
    graph = chain()
    graph.remove_node(graph.find_node_by_name("out"))
    err = _invalid(graph)
    assert [p.kind for p in err.problems] == ["structure"] and "found 0" in str(err)


def test_data_indexes_with_a_gap() -> None:
    """Data indexes must be 0..n-1; a gap names the Data nodes."""
    graph = chain()
    add_data(graph, 2, "x2")
    err = _expect(graph, "structure", "x", "x2")
    assert "[0, 2]" in str(err)


def test_data_without_index() -> None:
    """A Data node without an int `index` attribute is reported."""
    graph = chain()
    graph.find_node_by_name("x").remove_attr("index")
    _expect(graph, "arity", "x")


def test_every_problem_is_reported_at_once() -> None:
    """validate() lists all problems, not only the first one."""
    graph = diamond()
    graph.add_node("Relu", name="r0", num_inputs=1)
    add_data(graph, 3, "x3")
    graph.add_control_edge(graph.find_node_by_name("d"), graph.find_node_by_name("a"))
    err = _invalid(graph)
    assert {p.kind for p in err.problems} == {"arity", "structure", "cycle"}
    assert {"r0", "x3", "a", "d"} <= set(err.nodes)
    assert str(err).count("\n  - ") == len(err.problems) >= 3


def test_validate_checks_the_types_a_node_reads(tmp_path: Path) -> None:
    """A float constant as Reshape's shape passed validate() (the type check ran only after
    a pass, on the region it changed) and failed at a checked save or in onnxruntime."""
    graph = chain(ops=("Relu",))
    shape = graph.add_const(np.array([2.0], np.float32), name="shape")
    reshape = graph.add_node("Reshape", name="reshape", num_inputs=2)
    net_output = graph.nodes_of_type("NetOutput")[0]
    relu = graph.find_node_by_name("n0")
    graph.remove_edge(relu, 0, net_output, 0)
    graph.add_data_edge(relu, 0, reshape, 0)
    graph.add_data_edge(shape, 0, reshape, 1)
    graph.add_data_edge(reshape, 0, net_output, 0)
    err = _expect(graph, "type", "reshape")
    assert [p.message for p in err.problems] == [
        f"input 1 ('shape') of Reshape node 'reshape' is tensor(float); Reshape (opset "
        f"{graph.get_opset_version('')}) takes tensor(int64)"]
    with pytest.raises(GraphValidationError):
        graph.save(tmp_path / "out.onnx", full_check=True)
    assert list(tmp_path.iterdir()) == []
    shape.set_attr("value", Tensor(np.array([2], np.int64)))
    shape.update_output_desc(0, TensorDesc([1], data_type=DataType.DT_INT64))
    graph.validate()
