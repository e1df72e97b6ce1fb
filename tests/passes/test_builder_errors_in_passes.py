"""The ES builder's refusal of an operator inference proves invalid (GE1405) in passes: the
patterns of both styles are built quietly (`pattern_scope`), a replacement refused while it
is built fails its pass at the plugin's line, and compiling a model is unaffected."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from matcher_helpers import const, load, model
from onnx import helper

import ge
from ge.compiler import compile_graph
from ge.errors import PassRunError
from ge.graph import Graph

Write = Callable[[str, str], Path]


PATTERNS = """
import ge.es.all as es
from ge.es import GraphBuilder
from ge.passes import PatternFusionPass, pattern, register_fusion_pass


@register_fusion_pass(name="Methods", stage="AfterInferShape")
class Methods(PatternFusionPass):
    @pattern
    def shaped(self, inputs):
        a, b = inputs[:2]
        a.set_shape([2, 3])
        b.set_shape([4, 5])
        return es.MatMul(a, b) + 0  # ill typed twice, on inputs given shapes

    def replacement(self, inputs):
        return es.Identity(inputs[0])


@register_fusion_pass(name="Legacy", stage="AfterInferShape")
class Legacy(PatternFusionPass):
    def patterns(self):  # a generator: its patterns are built as they are collected
        builder = GraphBuilder("legacy")
        a = builder.create_input(0, shape=[2, 3])
        yield builder.build_and_reset([es.Add(a, builder.create_input(1, shape=[4]))])

    def replacement(self, graph, match_result):
        builder = GraphBuilder("r")
        return builder.build_and_reset([es.Identity(builder.create_input(0))])
"""


def _relu_model() -> Graph:
    return load(model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                      [("x", [2, 4])], [("y", [2, 4])]))


def test_patterns_of_both_styles_are_built_quietly_in_a_compile(write: Write) -> None:
    graph = _relu_model()
    report = compile_graph(graph, pass_paths=[write("plugin.py", PATTERNS)])
    assert report.rewrites_by_pass() == {}
    assert [n.type for n in graph.get_direct_nodes()] == ["Data", "Relu", "NetOutput"]


REPLACEMENT = """
import numpy as np

import ge.es.all as es
from ge.es import GraphBuilder
from ge.passes import DecomposePass, register_decompose_pass


@register_decompose_pass(name="Broken", stage="AfterInferShape", op_types=["Relu"])
class Broken(DecomposePass):
    def replacement(self, node):
        builder = GraphBuilder("r")
        x = builder.create_input(0, shape=[2, 4])
        w = builder.create_const(np.ones((3, 3), dtype=np.float32))
        return builder.build_and_reset([es.MatMul(x, w)])  # [2, 4] @ [3, 3]
"""


def test_a_replacement_refused_while_built_fails_its_pass_at_the_plugins_line(write: Write) -> None:
    path = write("plugin.py", REPLACEMENT)
    with pytest.raises(PassRunError) as caught:
        compile_graph(_relu_model(), pass_paths=[path])
    err = caught.value
    line = next(i for i, text in enumerate(REPLACEMENT.splitlines(), 1) if "es.MatMul" in text)
    assert str(err.location) == f"{path}:{line}", err
    assert "BuilderInferenceError: [GE1405] MatMul node 'MatMul' is invalid for its inputs " \
           "(A float32[2,4], B float32[3,3])" in err.message
    assert str(err).count(f"{path}:{line}") == 1, err  # (said once: trial U saw it twice)


def test_a_compile_of_a_model_is_unaffected() -> None:
    graph = load(model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                       [("x", [2, 3])], [("y", [2, 3])], [const("w", np.eye(3))]))
    ge.compile(graph)
