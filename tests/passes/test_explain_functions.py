"""`ge.passes.explain_functions`: the model-local functions whose bodies hold what a pass
looks for, on the explanations of the root graph; from Python the text names no command's
flag (only a command that has one to give advises it)."""

from __future__ import annotations

import pytest

import ge.graph
from function_models import SILU_PASS, silu_model
from ge.compiler.options import parse_options
from ge.compiler.plugin_loader import PluginLoader
from ge.passes.explain import explain, infer_shapes_for_explain
from ge.passes.explain_functions import function_ops
from ge.passes.explain_text import format_explanations


@pytest.fixture
def fast_silu(write) -> type:
    report = PluginLoader().load_paths([write("plugins/silu.py", SILU_PASS)],
                                       parse_options({}))
    assert not report.failures, report.failures
    (descriptor,) = report.plugins[0].descriptors
    return descriptor.cls


def test_the_root_graph_explanation_names_the_function(fast_silu: type) -> None:
    graph = ge.graph.load(silu_model())
    assert infer_shapes_for_explain(graph) is None
    (explained,) = explain(fast_silu, graph)
    (held,) = explained.functions
    assert (held.function, held.counts, held.called_by) == ("local.F", {"Mul": 1}, ["call"])
    lines = format_explanations([explained])
    assert lines[1] == ("  function local.F (called by node 'call') has 1 Mul node: the pass "
                        "does not see function bodies")
    assert "--inline-functions" not in "\n".join(lines)
    advised = format_explanations([explained], inline_advice="inline_functions=True inlines them")
    assert advised[1].endswith("bodies; inline_functions=True inlines them")
    # asked about one node, the explanation is of its graph alone
    assert explain(fast_silu, graph, "sigmoid")[0].functions == []


def test_an_operator_named_without_a_domain_is_no_call_of_a_function() -> None:
    """A decompose pass's `F` (no domain: a custom operator wherever the model puts it) is
    not the call of local.F, as its candidates leave such calls out."""
    graph = ge.graph.load(silu_model())
    assert function_ops(graph, [("F", None)]) == []
    assert [f.counts for f in function_ops(graph, [("Sigmoid", ""), ("Add", "")])] == [
        {"Add": 1, "Sigmoid": 1}]
