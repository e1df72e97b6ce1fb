"""`ge.graph.domains`: which domains a model uses (bodies and model-local functions too),
and changes of the opset imports as a transaction undoes them."""

from __future__ import annotations

import pytest
from onnx import TensorProto, helper

from ge.graph import load
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
    """`Graph.transaction()` puts the model's opset imports back however they were changed:
    written into the dict `opset_imports` returns, or the model given another dict."""
    graph = load(_model())
    model = graph.model
    imports = graph.opset_imports
    before = list(imports.items())
    with pytest.raises(RuntimeError), graph.transaction():
        imports["new.ops"] = 3
        imports["then.ops"] = 2
        del imports["gone"]
        model.opset_imports = {"": 18}
        raise RuntimeError
    assert model.opset_imports is imports and list(imports.items()) == before
