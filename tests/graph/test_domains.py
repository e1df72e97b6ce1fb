"""`ge.graph.domains`: which domains a model uses (bodies and model-local functions too),
dropping and adding opset imports as a transaction undoes it, and `Graph.copy_in` bringing
the imports of the domains a replacement's nodes use."""

from __future__ import annotations

import pytest
from onnx import TensorProto, helper

from ge.errors import GraphError
from ge.graph import Graph, load
from ge.graph.domains import drop_opset_imports, normalize_domain, used_domains

_F = TensorProto.FLOAT


def _branch(domain: str, name: str) -> object:
    return helper.make_graph([helper.make_node("Op", [], ["o"], domain=domain, name=name)],
                             name, [], [helper.make_tensor_value_info("o", _F, [1])])


def _model():
    """An If whose branches hold nodes of `then.ops` and `else.ops`; a function of domain
    `my.funcs` importing `imported.ops`, whose If holds a node of `deep.ops`."""
    branch_if = helper.make_node("If", ["c"], ["y"], name="if",
                                 then_branch=_branch("then.ops", "t"),
                                 else_branch=_branch("else.ops", "e"))
    graph = helper.make_graph([branch_if], "g",
                              [helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("y", _F, [1])])
    body_if = helper.make_node("If", ["c"], ["y"], then_branch=_branch("deep.ops", "t"),
                               else_branch=_branch("", "e"))
    function = helper.make_function("my.funcs", "F", ["c"], ["y"], [body_if],
                                    [helper.make_opsetid("", 17),
                                     helper.make_opsetid("imported.ops", 1)])
    imports = [helper.make_opsetid(d, 1) for d in
               ("then.ops", "else.ops", "my.funcs", "deep.ops", "imported.ops", "gone")]
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), *imports],
                             functions=[function])


def test_normalize_domain() -> None:
    assert (normalize_domain("ai.onnx"), normalize_domain(""), normalize_domain("my.ops")) == (
        "", "", "my.ops")


def test_used_domains_looks_into_bodies_and_functions() -> None:
    assert used_domains(load(_model())) == {"", "then.ops", "else.ops", "my.funcs",
                                            "deep.ops", "imported.ops"}


def test_dropped_imports_come_back_in_their_order_when_a_transaction_fails() -> None:
    graph = load(_model())
    before = list(graph.opset_imports.items())
    with pytest.raises(RuntimeError), graph.transaction():
        drop_opset_imports(graph, ["then.ops", "gone", "never.imported"])
        assert "then.ops" not in graph.opset_imports and "gone" not in graph.opset_imports
        raise RuntimeError
    assert list(graph.opset_imports.items()) == before


def test_direct_changes_of_the_imports_are_undone_when_a_transaction_fails() -> None:
    """`Graph.transaction()` puts the model's opset imports back however they were changed
    once the block asked for them (as a pass does, which gets the graph inside its
    transaction): written into the dict `opset_imports` returns, or the model given another
    dict."""
    graph = load(_model())
    model = graph.model
    original = model.opset_imports
    before = list(original.items())
    with pytest.raises(RuntimeError), graph.transaction():
        imports = graph.opset_imports
        imports["new.ops"] = 3
        imports["then.ops"] = 2
        del imports["gone"]
        model.opset_imports = {"": 18}
        raise RuntimeError
    assert model.opset_imports is original and list(original.items()) == before


# -- copy_in brings the domains of the replacement's nodes --------------------------------------
def _target(imports: dict[str, int]) -> Graph:
    """x -> Relu -> y, importing `imports`."""
    graph = Graph("target")
    graph.opset_imports.clear()
    graph.opset_imports.update(imports)
    x = graph.add_node("Data", name="x", num_outputs=1, attrs={"index": 0})
    relu = graph.add_node("Relu", name="relu", num_inputs=1, num_outputs=1)
    out = graph.add_node("NetOutput", name="out", num_inputs=1)
    graph.add_data_edge(x, 0, relu, 0)
    graph.add_data_edge(relu, 0, out, 0)
    return graph


def _replacement(imports: dict[str, int]) -> Graph:
    """Data -> my.ops::Op -> ml's Binarizer -> NetOutput, its model importing `imports`."""
    graph = Graph("r")
    graph.opset_imports.clear()
    graph.opset_imports.update(imports)
    data = graph.add_node("Data", name="in", num_outputs=1, attrs={"index": 0})
    op = graph.add_node("Op", domain="my.ops", name="op", num_inputs=1, num_outputs=1)
    binarizer = graph.add_node("Binarizer", domain="ai.onnx.ml", name="bin", num_inputs=1,
                               num_outputs=1)
    out = graph.add_node("NetOutput", name="out", num_inputs=1)
    graph.add_data_edge(data, 0, op, 0)
    graph.add_data_edge(op, 0, binarizer, 0)
    graph.add_data_edge(binarizer, 0, out, 0)
    return graph


def test_copy_in_imports_the_domains_the_copied_nodes_use() -> None:
    """At the versions the replacement declares, after the target's own imports; a domain
    the replacement imports that no copied node uses is not brought."""
    target = _target({"": 17})
    relu = target.find_node_by_name("relu")
    target.copy_in(_replacement({"": 17, "ai.onnx.ml": 3, "my.ops": 2, "idle.ops": 1}),
                   [(relu, 0)])
    assert list(target.opset_imports.items()) == [("", 17), ("my.ops", 2), ("ai.onnx.ml", 3)]


def test_copy_in_keeps_the_targets_versions_of_onnx_domains() -> None:
    """ONNX's own domains keep the target's version (a builder outside a compilation builds
    at the newest opset); the validation checks the nodes against the target's schemas."""
    target = _target({"": 17, "ai.onnx.ml": 2, "my.ops": 2})
    relu = target.find_node_by_name("relu")
    target.copy_in(_replacement({"": 21, "ai.onnx.ml": 5, "my.ops": 2}), [(relu, 0)])
    assert target.opset_imports == {"": 17, "ai.onnx.ml": 2, "my.ops": 2}


def test_copy_in_refuses_a_custom_domain_the_target_imports_at_another_version() -> None:
    target = _target({"": 17, "my.ops": 1})
    relu = target.find_node_by_name("relu")
    before = target.to_onnx().SerializeToString()
    with pytest.raises(GraphError) as info:
        target.copy_in(_replacement({"": 17, "my.ops": 2}), [(relu, 0)])
    assert info.value.code == "GE1001" and info.value.nodes == ("op",)
    assert ("replacement 'r' imports domain 'my.ops' at version 2 (node 'op' is of that "
            "domain), the model of graph 'target' imports it at version 1") in str(info.value)
    assert target.to_onnx().SerializeToString() == before  # nothing copied


def test_the_imports_copy_in_adds_are_undone_with_its_nodes() -> None:
    target = _target({"": 17})
    relu = target.find_node_by_name("relu")
    before = target.to_onnx().SerializeToString()
    with pytest.raises(RuntimeError), target.transaction():
        target.copy_in(_replacement({"": 17, "ai.onnx.ml": 3, "my.ops": 2}), [(relu, 0)])
        assert "my.ops" in target.opset_imports
        raise RuntimeError
    assert target.opset_imports == {"": 17}
    assert target.to_onnx().SerializeToString() == before
