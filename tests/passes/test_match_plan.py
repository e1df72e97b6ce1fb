"""Match plans (`ge.passes.match_plan`) find exactly what the search finds.

Differential property: on random graphs of elementwise operators, constants, a two-output
Split and LeakyRelus with two alphas, patterns cut out of the graph itself (so most of them
match somewhere) and then often changed (an operator swapped, a constant's value changed,
two pattern inputs merged into one, an intermediate given a second consumer) are matched at
every candidate both ways, under every matcher configuration: the plan yields the matches
`Matcher`'s search yields, in the same order (commutative input orders included), with the
same bindings in the same order and the same boundary inputs and outputs. Then the cases
left to the search, and the switch-over after `PLAN_AFTER` candidates.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import event, given, note, settings
from hypothesis import strategies as st

import ge.passes.matcher as matcher_module
from ge.graph import Graph, Node, Tensor
from ge.passes import Pattern, PatternMatcherConfigBuilder
from ge.passes.match_plan import PLAN_AFTER, plan_for
from ge.passes.matcher import CompiledPattern, Match, Matcher, compile_pattern
from ge.passes.tracing import TracingMatcher

#: (op type, inputs, outputs) of the random graphs.
OPS = [("Relu", 1, 1), ("Neg", 1, 1), ("Add", 2, 1), ("Mul", 2, 1), ("Split", 1, 2),
       ("LeakyRelu", 1, 1)]
VALUES = [np.array([1.0, 2.0], dtype=np.float32), np.array([0.0, 0.0], dtype=np.float32)]


class _SearchOnly(Matcher):
    uses_plans = False


def _search(pattern: CompiledPattern, graph: Graph, node: Node) -> Match | None:
    return next(_SearchOnly(pattern, graph).matches_at(node), None)


def _all_searched(pattern: CompiledPattern, graph: Graph, node: Node) -> list[Any]:
    return [_key(m) for m in _SearchOnly(pattern, graph).matches_at(node)]


def _all_planned(pattern: CompiledPattern, graph: Graph, node: Node) -> list[Any]:
    plan = plan_for(pattern)
    assert plan is not None
    return [_key(m) for m in plan(Matcher(pattern, graph), node)]


def _planned(pattern: CompiledPattern, graph: Graph, node: Node) -> Match | None:
    plan = plan_for(pattern)
    assert plan is not None
    return next(plan(Matcher(pattern, graph), node), None)


def _key(match: Match | None) -> Any:
    if match is None:
        return None
    return ([(p.node.name, n.name) for p, n in match.bindings.items()],
            [(n.name, i) for n, i in match.inputs], [(n.name, i) for n, i in match.outputs])


def _const(graph: Graph, value: np.ndarray, name: str | None = None) -> Node:
    return graph.add_node("Const", name=name, attrs={"value": Tensor(value)})


@st.composite
def target_graphs(draw: st.DrawFn) -> Graph:
    graph = Graph("target")
    values: list[tuple[Node, int]] = []
    for i in range(draw(st.integers(1, 3))):
        values.append((graph.add_node("Data", name=f"x{i}", attrs={"index": i}), 0))
    for i in range(draw(st.integers(0, 2))):
        values.append((_const(graph, VALUES[draw(st.integers(0, 1))], f"c{i}"), 0))
    for i in range(draw(st.integers(2, 14))):
        op, arity, outs = draw(st.sampled_from(OPS))
        attrs = {"alpha": draw(st.sampled_from([0.1, 0.2]))} if op == "LeakyRelu" else {}
        node = graph.add_node(op, name=f"n{i}", num_inputs=arity, num_outputs=outs,
                              attrs=attrs)
        for k in range(arity):
            src, index = draw(st.sampled_from(values))
            graph.add_data_edge(src, index, node, k)
        values.extend((node, j) for j in range(outs))
    reads = draw(st.lists(st.sampled_from(values), min_size=1, max_size=2, unique=True))
    out = graph.add_node("NetOutput", num_inputs=len(reads), num_outputs=0)
    for k, (src, index) in enumerate(reads):
        graph.add_data_edge(src, index, out, k)
    return graph


def _cut_pattern(draw: st.DrawFn, graph: Graph) -> Pattern | None:
    """A pattern copied from a region of `graph` ending at a random operator, often changed."""
    ops = [n for n in graph.get_direct_nodes() if n.type not in ("Data", "Const", "NetOutput")]
    if not ops:
        return None
    root = draw(st.sampled_from(ops))
    region: list[Node] = [root]
    frontier = [root]
    while frontier:
        node = frontier.pop()
        for i in range(node.get_inputs_size()):
            producer = node.get_input_producer(i)
            if producer is None or producer[0] in region or producer[0].type in ("Data",):
                continue
            if draw(st.booleans()):
                region.append(producer[0])
                frontier.append(producer[0])
    pattern_graph = Graph(f"cut_{root.name}")
    copies: dict[Node, Node] = {}
    wildcards: dict[tuple[Node, int], tuple[Node, int]] = {}
    merge = draw(st.booleans())  # all wildcards read one pattern input
    for node in sorted(region, key=lambda n: n._seq):
        if node.type == "Const":
            value = VALUES[draw(st.integers(0, 1))]
            copies[node] = _const(pattern_graph, value, node.name)
            continue
        op_type = node.type
        if draw(st.integers(0, 9)) == 0:  # a changed operator: usually no match
            op_type = {"Relu": "Neg", "Neg": "Relu", "Add": "Mul", "Mul": "Add"}.get(op_type,
                                                                                     op_type)
        attrs = ({"alpha": draw(st.sampled_from([0.1, 0.2]))} if op_type == "LeakyRelu"
                 else {})
        copies[node] = pattern_graph.add_node(op_type, name=node.name,
                                              num_inputs=node.get_inputs_size(),
                                              num_outputs=node.get_outputs_size(), attrs=attrs)
    for node in sorted(region, key=lambda n: n._seq):
        for i in range(node.get_inputs_size()):
            producer = node.get_input_producer(i)
            if producer is None:
                continue
            if producer[0] in copies:
                pattern_graph.add_data_edge(copies[producer[0]], producer[1], copies[node], i)
                continue
            key = (producer[0], 0) if merge and wildcards else producer
            if merge and wildcards:
                src = next(iter(wildcards.values()))
            elif key in wildcards:
                src = wildcards[key]
            else:
                data = pattern_graph.add_node("Data", attrs={"index": len(wildcards)})
                src = wildcards[key] = (data, 0)
            pattern_graph.add_data_edge(src[0], src[1], copies[node], i)
    if draw(st.integers(0, 5)) == 0 and len(region) > 1:  # an extra reader of an intermediate
        inner = copies[draw(st.sampled_from(region[1:]))]
        if inner.type != "Const":
            extra = pattern_graph.add_node("Relu", name="extra", num_inputs=1)
            pattern_graph.add_data_edge(inner, 0, extra, 0)
            out_index = draw(st.integers(0, root.get_outputs_size() - 1))
            out = pattern_graph.add_node("NetOutput", num_inputs=2, num_outputs=0)
            pattern_graph.add_data_edge(copies[root], out_index, out, 0)
            pattern_graph.add_data_edge(extra, 0, out, 1)
            return Pattern(pattern_graph)
    out = pattern_graph.add_node("NetOutput", num_inputs=1, num_outputs=0)
    out_index = draw(st.integers(0, root.get_outputs_size() - 1))
    pattern_graph.add_data_edge(copies[root], out_index, out, 0)
    return Pattern(pattern_graph)


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_a_plan_finds_what_the_search_finds(data: st.DataObject) -> None:
    graph = data.draw(target_graphs())
    pattern = _cut_pattern(data.draw, graph)
    if pattern is None:
        return
    builder = PatternMatcherConfigBuilder()
    if data.draw(st.booleans()):
        builder.enable_const_value_match()
    if data.draw(st.booleans()):
        builder.enable_ir_attr_match()
    if data.draw(st.booleans()):
        builder.enable_commutative_match()
    compiled = compile_pattern(pattern, builder.build())
    plan = plan_for(compiled)
    if len(compiled.outputs) > 1:
        assert plan is None  # several outputs: left to the search
        return
    assert plan is not None
    note(plan.__doc__ or "")
    found = 0
    for node in graph.get_direct_nodes():
        if node.type == compiled.root.type:
            expected = _all_searched(compiled, graph, node)
            assert [_key(m) for m in plan(Matcher(compiled, graph), node)] == expected, node.name
            found = max(found, len(expected))
    event({0: "no match", 1: "one match at a node"}.get(found, "several matches at a node"))


# -- cases --------------------------------------------------------------------------------------
def _chain_graph() -> tuple[Graph, Node, Node]:
    graph = Graph("g")
    x = graph.add_node("Data", name="x", attrs={"index": 0})
    neg1 = graph.add_node("Neg", name="neg1", num_inputs=1)
    neg2 = graph.add_node("Neg", name="neg2", num_inputs=1)
    graph.add_data_edge(x, 0, neg1, 0)
    graph.add_data_edge(neg1, 0, neg2, 0)
    out = graph.add_node("NetOutput", num_inputs=1, num_outputs=0)
    graph.add_data_edge(neg2, 0, out, 0)
    return graph, neg1, neg2


def _neg_neg() -> Pattern:
    graph, _, _ = _chain_graph()
    return Pattern(graph)


def test_a_plan_matches_and_refuses_like_the_search() -> None:
    graph, neg1, neg2 = _chain_graph()
    compiled = compile_pattern(_neg_neg(), PatternMatcherConfigBuilder().build())
    found = _planned(compiled, graph, neg2)
    assert _key(found) == _key(_search(compiled, graph, neg2)) == (
        [("neg2", "neg2"), ("neg1", "neg1")], [("x", 0)], [("neg2", 0)])
    assert _planned(compiled, graph, neg1) is None  # its producer is a Data, not a Neg
    extra = graph.add_node("Relu", name="extra", num_inputs=1)  # neg1 read outside
    graph.add_data_edge(neg1, 0, extra, 0)
    assert _planned(compiled, graph, neg2) is None is _search(compiled, graph, neg2)


def test_commutative_orders_come_in_the_search_order() -> None:
    """Add(MatMul(x, w), MatMul(x2, w)) against Add(MatMul(a, b), c): both input orders of
    the Add match, first as given, then swapped (a pass refusing one takes the other)."""
    import ge.es.all as es
    from ge.es import GraphBuilder

    builder = GraphBuilder("target")
    x, x2, w = (builder.create_input(i, name=n) for i, n in enumerate(("x", "x2", "w")))
    total = es.Add(es.MatMul(x, w, name="mm1"), es.MatMul(x2, w, name="mm2"), name="add")
    target = builder.build_and_reset([total])
    builder = GraphBuilder("pattern")
    a, b, c = (builder.create_input(i) for i in range(3))
    pattern = Pattern(builder.build_and_reset([es.Add(es.MatMul(a, b), c)]))
    config = PatternMatcherConfigBuilder().enable_commutative_match().build()
    compiled = compile_pattern(pattern, config)
    add = target.find_node_by_name("add")
    planned = _all_planned(compiled, target, add)
    assert planned == _all_searched(compiled, target, add)
    assert [[t for _, t in bindings] for bindings, _, _ in planned] == [
        ["add", "mm1"], ["add", "mm2"]]


def test_multi_output_patterns_keep_the_search() -> None:
    graph = Graph("p")
    a = graph.add_node("Data", name="a", attrs={"index": 0})
    split = graph.add_node("Split", name="split", num_inputs=1, num_outputs=2)
    graph.add_data_edge(a, 0, split, 0)
    out = graph.add_node("NetOutput", num_inputs=2, num_outputs=0)
    graph.add_data_edge(split, 0, out, 0)
    graph.add_data_edge(split, 1, out, 1)
    assert plan_for(compile_pattern(Pattern(graph), PatternMatcherConfigBuilder().build())) is None


def test_the_plan_is_written_after_plan_after_candidates() -> None:
    graph, _, neg2 = _chain_graph()
    compiled = compile_pattern(_neg_neg(), PatternMatcherConfigBuilder().build())
    matcher = Matcher(compiled, graph)
    for _ in range(PLAN_AFTER * len(compiled.nodes)):  # the search
        assert next(matcher.matches_at(neg2)) is not None
        assert compiled._plan is None
    assert _key(next(matcher.matches_at(neg2))) == _key(_search(compiled, graph, neg2))
    assert compiled._plan is not None
    tracing = TracingMatcher(compiled, graph)  # explains with the search, step by step
    assert tracing.match_at(graph.find_node_by_name("neg1")) is None
    assert tracing.deepest is not None and tracing.deepest.kind == "op_type"


@pytest.fixture
def plans_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every pattern uses its plan from its first candidate."""
    monkeypatch.setattr(matcher_module, "PLAN_AFTER", 0)


def test_a_sweep_with_plans_rewrites_as_with_the_search(plans_at_once: None) -> None:
    from matcher_helpers import NegNeg

    from ge.passes import find_matches

    graph = Graph("long")
    previous = graph.add_node("Data", name="x", attrs={"index": 0})
    for i in range(9):
        neg = graph.add_node("Neg", name=f"neg{i}", num_inputs=1)
        graph.add_data_edge(previous, 0, neg, 0)
        previous = neg
    out = graph.add_node("NetOutput", num_inputs=1, num_outputs=0)
    graph.add_data_edge(previous, 0, out, 0)
    found = find_matches(NegNeg, graph)
    assert [[n.name for n in f.nodes] for f in found] == [
        ["neg0", "neg1"], ["neg2", "neg3"], ["neg4", "neg5"], ["neg6", "neg7"]]
