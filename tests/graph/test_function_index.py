"""`ModelInfo.function(key)` finds a model-local function by (domain, name, overload) from
an index (a scan per node made CSE quadratic in the functions: trial DD), and the index
follows the list: a function added, a list replaced, a slice or an item assigned; of two
functions of one key the first is found, as the scan found it."""

from __future__ import annotations

import onnx
from onnx import helper

from ge.graph import load


def _function(name: str, domain: str = "local") -> onnx.FunctionProto:
    return helper.make_function(domain, name, ["x"], ["y"],
                                [helper.make_node("Neg", ["x"], ["y"])],
                                [helper.make_opsetid("", 17)])


def _model() -> onnx.ModelProto:
    graph = helper.make_graph([helper.make_node("F", ["x"], ["y"], domain="local")], "g",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])])
    return helper.make_model(graph, functions=[_function("F")],
                             opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("local", 1)])


def test_the_index_follows_the_function_list() -> None:
    info = load(_model()).model
    assert info.function(("local", "F", "")) is info.functions[0]
    assert info.function(("local", "G", "")) is None
    info.functions.append(_function("G"))  # added in place
    assert info.function(("local", "G", "")) is info.functions[1]
    info.functions = [_function("H")]  # another list
    assert info.function(("local", "F", "")) is None
    assert info.function(("local", "H", "")) is info.functions[0]
    info.functions[1:] = [_function("K")]  # grown by a slice
    assert info.function(("local", "K", "")) is info.functions[1]
    info.functions.append(_function("L"))
    info.functions[1] = _function("M")  # replaced in place, the length and ends kept
    assert info.function(("local", "K", "")) is None  # (trial FF: the index kept K)
    assert info.function(("local", "M", "")) is info.functions[1]
    info.functions.append(_function("M"))  # a second of one key: the first is the one
    assert info.function(("local", "M", "")) is info.functions[1]


def test_a_call_finds_its_function() -> None:
    from ge.ops.functions import called_function

    graph = load(_model())
    (call,) = [n for n in graph.get_direct_nodes() if n.type == "F"]
    assert called_function(call) is graph.model.functions[0]


def test_a_new_list_at_a_freed_lists_address_is_indexed_anew() -> None:
    """The index was keyed on the list's id: a list made where a freed one was, at the same
    version, was answered from the old index (trial HH, 1 in 200 tries); it now holds the
    list it indexed."""
    info = load(_model()).model
    for _ in range(200):
        info.functions = [_function("A")]
        assert info.function(("local", "A", "")) is info.functions[0]
        info.functions = [_function("B")]  # (A's list freed: B's may take its address)
        info.functions = [_function("C")]
        assert info.function(("local", "A", "")) is None
        assert info.function(("local", "C", "")) is info.functions[0]
