"""Which candidates a sweep tries: the landmark filter narrows them without changing what
is rewritten, also when rewrites of the same sweep bring a landmark closer (D14)."""

from __future__ import annotations

import pytest
from matcher_helpers import assert_same_outputs, load, model, op_counts, rewrite
from onnx import helper

import ge.es.all as es
import ge.passes.candidates
from ge.passes import PatternFusionPass, pattern
from ge.passes.candidates import LandmarkFilter
from ge.passes.matcher import Matcher

X = [("x", [2, 4])]


class SwapNeg(PatternFusionPass):
    """Identity(Neg(a)) -> Neg(Identity(a)): each rewrite moves the Neg one step down, so the
    next Identity of a chain matches only after the rewrite before it (D14)."""

    @pattern
    def identity_of_neg(self, inputs):
        return es.Identity(es.Neg(inputs[0]))

    def replacement(self, inputs):
        return es.Neg(es.Identity(inputs[0]))


def _chain(length: int):
    """x -> Neg -> Identity x length -> y, and beside it Identity nodes no Neg is near."""
    nodes = [helper.make_node("Neg", ["x"], ["v0"], name="neg")]
    for i in range(length):
        nodes.append(helper.make_node("Identity", [f"v{i}"], [f"v{i + 1}"], name=f"id{i}"))
    nodes.append(helper.make_node("Identity", [f"v{length}"], ["y"], name="last"))
    nodes += [helper.make_node("Relu", ["x"], ["r0"], name="relu")]
    for i in range(6):
        nodes.append(helper.make_node("Identity", [f"r{i}"], [f"r{i + 1}"], name=f"far{i}"))
    return model(nodes, X, [("y", [2, 4]), ("r6", [2, 4])])


def _tried(monkeypatch) -> list[str]:
    """The candidates the sweeps try, by name (Matcher.matches_at recorded)."""
    tried: list[str] = []
    original = Matcher.matches_at

    def recording(self, candidate):
        tried.append(candidate.name)
        return original(self, candidate)

    monkeypatch.setattr(Matcher, "matches_at", recording)
    return tried


def test_rewrites_that_bring_the_landmark_closer_are_followed(monkeypatch) -> None:
    proto = _chain(4)
    graph = load(proto)
    tried = _tried(monkeypatch)
    run = rewrite(SwapNeg(), graph)
    assert run.rewrites == 5  # the Neg moved through all five Identity nodes of the chain
    assert op_counts(graph) == {"Identity": 11, "Neg": 1, "Relu": 1}
    (neg,) = graph.nodes_of_type("Neg")
    assert neg.get_out_data_nodes_and_port_indexes(0)[0][0].type == "NetOutput"
    assert not any(name.startswith("far") for name in tried)  # no Neg upstream of those
    assert_same_outputs(proto, graph)


def test_the_filter_changes_nothing_but_the_candidates_tried(monkeypatch) -> None:
    """The same sweep without the filter: the same graph, byte for byte, more candidates."""
    filtered = load(_chain(4))
    tried = _tried(monkeypatch)
    rewrite(SwapNeg(), filtered)
    with_filter = len(tried)
    monkeypatch.setattr(ge.passes.candidates.LandmarkFilter, "for_sweep",
                        classmethod(lambda cls, *args: None))
    plain = load(_chain(4))
    tried.clear()
    rewrite(SwapNeg(), plain)
    assert plain.to_onnx().SerializeToString() == filtered.to_onnx().SerializeToString()
    assert with_filter < len(tried)
    assert {n for n in tried if n.startswith("far")} == {f"far{i}" for i in range(6)}


@pytest.mark.parametrize(("depth", "allowed"), [(0, set()), (1, {"id0"}),
                                                (3, {"id0", "id1", "id2"})])
def test_the_filter_lets_through_the_root_nodes_within_its_depth(depth, allowed) -> None:
    graph = load(_chain(4))
    landmarks = graph.nodes_of_type("Neg")
    found = LandmarkFilter(("Identity", ""), depth, landmarks)
    assert {n.name for n in graph.nodes_of_type("Identity") if found.allows(n)} == allowed


def test_a_pass_invocation_keeps_what_a_landmark_lets_through_until_the_graph_changes(
        monkeypatch) -> None:
    """Patterns of one pass sharing their root and landmark (LayerNormFusion's written-out forms)
    spread from the landmarks once while nothing is rewritten; after a change of the graph
    they spread again and see it."""
    from ge.passes import PatternMatcherConfig
    from ge.passes.matcher import compile_pattern
    from ge.passes.pass_patterns import collect_patterns

    (compiled,) = [compile_pattern(p, PatternMatcherConfig())
                   for p in collect_patterns(SwapNeg())]
    graph = load(_chain(4))
    spreads: list[str] = []
    original = LandmarkFilter._spread

    def counting(self, node):
        spreads.append(node.name)
        return original(self, node)

    monkeypatch.setattr(LandmarkFilter, "_spread", counting)
    kept: dict = {}
    allowed = []
    for _ in range(2):
        found = LandmarkFilter.for_sweep(compiled, graph, 12, kept)
        assert found is not None
        allowed.append({n.name for n in graph.nodes_of_type("Identity") if found.allows(n)})
    assert allowed == [{"id0"}, {"id0"}] and spreads == ["neg"]  # the second one kept
    # move the Neg two steps down: x -> id0 -> id1 -> neg -> id2 -> ...
    neg, id1, id2 = (graph.find_node_by_name(n) for n in ("neg", "id1", "id2"))
    (data,) = graph.get_data_nodes()
    graph.replace_all_uses(neg, 0, data, 0)
    graph.remove_edge(data, 0, neg, 0)
    graph.remove_edge(id1, 0, id2, 0)
    graph.add_data_edge(id1, 0, neg, 0)
    graph.add_data_edge(neg, 0, id2, 0)
    found = LandmarkFilter.for_sweep(compiled, graph, 12, kept)
    assert found is not None and spreads == ["neg", "neg"]  # spread again, in the new graph
    assert {n.name for n in graph.nodes_of_type("Identity") if found.allows(n)} == {"id2"}
