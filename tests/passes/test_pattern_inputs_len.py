"""`inputs` of an expression-style replacement has a length (one per boundary input of the
match) and can be iterated; the lazily created inputs of a `@pattern` method refuse both
with a clear message. A pass with several `@pattern` methods tells them apart by their
documented names `<Class>_<method>_pattern` (docs/passes.md)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from matcher_helpers import assert_same_outputs, const, load, model, op_counts, rewrite
from onnx import helper

import ge.es.all as es
from ge.compiler import compile_graph
from ge.errors import PassRunError, RewriteError
from ge.es import GraphBuilder
from ge.passes import PatternFusionPass, PatternInputs, pattern

Write = Callable[[str, str], Path]

PLUGIN = """\
import ge.es.all as es
from ge.passes import PatternFusionPass, pattern, register_fusion_pass


@register_fusion_pass(name="P", stage="AfterInferShape")
class P(PatternFusionPass):
    @pattern
    def with_bias(self, inputs):
        return es.MatMul(inputs[0], inputs[1]) + inputs[2]

    @pattern
    def without_bias(self, inputs):
        return es.MatMul(inputs[0], inputs[1])
{body}
"""


def _two_matmuls():
    """MatMul + Add, then a MatMul alone: one match of each pattern."""
    return model([helper.make_node("MatMul", ["x", "w"], ["m"], name="mm1"),
                  helper.make_node("Add", ["m", "b"], ["a"], name="add"),
                  helper.make_node("MatMul", ["a", "v"], ["y"], name="mm2")],
                 [("x", [2, 4])], [("y", [2, 4])],
                 [const("w", np.eye(4) * 3), const("b", [1, 2, 3, 4]),
                  const("v", np.eye(4) / 2)])


def test_len_and_iteration_work_in_a_replacement(write: Write) -> None:
    path = write("plugin.py", PLUGIN.format(body="""
    def replacement(self, inputs):
        if len(inputs) == 3:
            a, b, c = inputs
            return es.Gemm(a, b, c)
        assert [t.name for t in inputs] == [t.name for t in inputs[:2]]
        return es.Gemm(*inputs)
"""))
    proto = _two_matmuls()
    graph = load(proto)
    report = compile_graph(graph, pass_paths=[path])
    assert report.records[0].rewrites == 2
    assert op_counts(graph) == {"Gemm": 2}
    assert_same_outputs(proto, graph)


def test_len_of_the_inputs_of_a_pattern_method_is_refused_clearly(write: Write) -> None:
    path = write("plugin.py", """\
import ge.es.all as es
from ge.passes import PatternFusionPass, pattern, register_fusion_pass


@register_fusion_pass(name="P", stage="AfterInferShape")
class P(PatternFusionPass):
    @pattern
    def p(self, inputs):
        return es.MatMul(*inputs[:len(inputs)])

    def replacement(self, inputs):
        return es.Gemm(inputs[0], inputs[1])
""")
    with pytest.raises(PassRunError) as info:
        compile_graph(load(_two_matmuls()), pass_paths=[path])
    err = info.value
    assert err.code == "E13028" and err.pass_name == "P"
    assert err.message == (
        "Failed to run custom fusion pass P. Return code: FAILED. Reason: TypeError: the "
        "inputs of a @pattern method have no length: they are created as they are indexed, "
        "and the pattern has as many as it reads; use inputs[:N] (in a replacement, "
        "len(inputs) is the number of boundary inputs).")
    assert err.location is not None and err.location.line == 9  # the line calling len()


def test_lazily_created_inputs_refuse_len_and_iteration_but_are_true() -> None:
    inputs = PatternInputs(GraphBuilder("p"))
    with pytest.raises(TypeError, match=r"^the inputs of a @pattern method have no length"):
        len(inputs)
    with pytest.raises(TypeError, match=r"^the inputs of a @pattern method cannot be "
                                        r"iterated: .* use inputs\[:N\]$"):
        iter(inputs)
    with pytest.raises(TypeError, match="cannot be iterated"):
        _a, _b = inputs
    assert bool(inputs)  # as before: truthiness does not ask for a length
    assert inputs.created() == []  # nothing was created by asking


def test_presized_inputs_have_a_length_and_no_more_inputs() -> None:
    inputs = PatternInputs(GraphBuilder("r"))
    inputs._presize(2)
    assert len(inputs) == 2 and bool(inputs)
    assert [h.name for h in inputs] == ["input_0", "input_1"]
    x, w = inputs
    assert (x.name, w.name) == ("input_0", "input_1")
    with pytest.raises(RewriteError) as info:
        inputs[2]
    assert info.value.code == "GE1502"
    assert info.value.message == (
        "replacement 'r' reads input 2 but the region it replaces has 2 input(s) (inputs[:2])")
    empty = PatternInputs(GraphBuilder("r0"))
    empty._presize(0)
    assert len(empty) == 0 and not empty and list(empty) == []


class _Recorder(PatternFusionPass):
    """Two patterns, one replacement recording which pattern matched and its input count."""

    seen: list[tuple[str, int]]

    @pattern
    def with_bias(self, inputs):
        return es.MatMul(inputs[0], inputs[1]) + inputs[2]

    @pattern
    def without_bias(self, inputs):
        return es.MatMul(inputs[0], inputs[1])

    def replacement(self, inputs, match_result):
        self.seen.append((match_result.get_pattern_graph_name(), len(inputs)))
        return es.Gemm(*inputs)


def test_the_pattern_of_a_pattern_method_is_named_class_method_pattern() -> None:
    recorder = _Recorder()
    recorder.seen = []
    assert [p.name for p in recorder.patterns()] == [
        "_Recorder_with_bias_pattern", "_Recorder_without_bias_pattern"]
    graph = load(_two_matmuls())
    rewrite(recorder, graph)
    assert recorder.seen == [("_Recorder_with_bias_pattern", 3),
                             ("_Recorder_without_bias_pattern", 2)]


def test_a_subclass_keeps_the_pattern_names_of_the_class_defining_the_methods() -> None:
    class Child(_Recorder):
        pass

    child = Child()
    child.seen = []
    assert [p.name for p in child.patterns()] == [
        "_Recorder_with_bias_pattern", "_Recorder_without_bias_pattern"]
    rewrite(child, load(_two_matmuls()))
    assert [name for name, _ in child.seen] == [
        "_Recorder_with_bias_pattern", "_Recorder_without_bias_pattern"]
