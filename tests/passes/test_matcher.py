"""The matcher's semantics (spec §6.1-6.4), each on a graph built for it, checked
structurally and with onnxruntime where numerics apply."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from matcher_helpers import (
    NegNeg,
    assert_same_outputs,
    const,
    load,
    model,
    op_counts,
    rewrite,
)
from onnx import helper

import ge.es.all as es
from ge.es import GraphBuilder
from ge.graph import DataType, Graph
from ge.passes import (
    MatchResult,
    PatternFusionPass,
    PatternMatcherConfigBuilder,
    create_pattern,
    find_matches,
    pattern,
)

pytestmark = pytest.mark.usefixtures("matching")  # by the search and by match plans

X = [("x", [2, 4])]
Y = [("y", [2, 4])]


# -- passes used below --------------------------------------------------------------------------
class MatMulAddToGemm(PatternFusionPass):
    @pattern
    def matmul_add(self, inputs):
        return es.MatMul(inputs[0], inputs[1]) + inputs[2]

    def replacement(self, inputs):
        return es.Gemm(inputs[0], inputs[1], inputs[2])


class SameInputTwice(PatternFusionPass):
    @pattern
    def add_self(self, inputs):
        return inputs[0] + inputs[0]

    def replacement(self, inputs):
        return inputs[0] * 2.0


def _matmul_add_model(extra_consumer: bool = False, swapped: bool = False):
    add_inputs = ["b", "mm"] if swapped else ["mm", "b"]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"], name="mm"),
             helper.make_node("Add", add_inputs, ["y"], name="add")]
    outputs = [("y", [2, 4])]
    if extra_consumer:
        nodes.append(helper.make_node("Relu", ["mm"], ["r"], name="relu"))
        outputs.append(("r", [2, 4]))
    inits = [const("w", np.eye(4) * 2), const("b", [0.5, 1, 2, 3])]
    return model(nodes, X, outputs, inits)


# -- matching -----------------------------------------------------------------------------------
def test_a_match_is_rewritten_and_computes_the_same() -> None:
    proto = _matmul_add_model()
    graph = load(proto)
    run = rewrite(MatMulAddToGemm(), graph)
    assert (run.matches, run.rewrites) == (1, 1)
    assert op_counts(graph) == {"Gemm": 1}
    gemm = graph.nodes_of_type("Gemm")[0]
    assert gemm.get_metadata()["ge.origin_pass"] == "MatMulAddToGemm"
    assert gemm.get_metadata()["ge.origin_nodes"] == "mm,add"
    assert gemm.get_output_desc(0).get_shape().get_dims() == [2, 4]  # inferred
    assert_same_outputs(proto, graph)


def test_pattern_data_is_a_wildcard_for_any_producer_output() -> None:
    """A pattern input binds to any producer output, here a Split's second one."""

    class ReluOfAnything(PatternFusionPass):
        @pattern
        def relu(self, inputs):
            return es.Relu(inputs[0])

        def replacement(self, inputs):
            return es.Max(inputs[0], inputs[0] * 0.0)

    proto = model([helper.make_node("Split", ["x"], ["s0", "s1"], axis=1, num_outputs=2),
                   helper.make_node("Relu", ["s1"], ["y"], name="relu")],
                  X, [("y", [2, 2]), ("s0", [2, 2])], opset=18)
    graph = load(proto)
    found = find_matches(ReluOfAnything, graph)
    assert len(found) == 1 and found[0].captured[0].index == 1
    assert found[0].captured[0].node.type == "Split"
    rewrite(ReluOfAnything(), graph)
    assert "Relu" not in op_counts(graph)
    assert_same_outputs(proto, graph)


def test_one_pattern_input_used_twice_binds_one_producer() -> None:
    same = load(model([helper.make_node("Add", ["x", "x"], ["y"])], X, Y))
    different = load(model([helper.make_node("Add", ["x", "z"], ["y"])], [*X, ("z", [2, 4])],
                           Y))
    assert len(find_matches(SameInputTwice, same)) == 1
    assert find_matches(SameInputTwice, different) == []


def test_inputs_are_compared_positionally() -> None:
    class SubOfRelu(PatternFusionPass):
        @pattern
        def sub(self, inputs):
            return inputs[0] - es.Relu(inputs[1])

        def replacement(self, inputs):
            return inputs[0] - es.Relu(inputs[1])

    wanted = model([helper.make_node("Relu", ["z"], ["r"]),
                    helper.make_node("Sub", ["x", "r"], ["y"])], [*X, ("z", [2, 4])], Y)
    reversed_ = model([helper.make_node("Relu", ["z"], ["r"]),
                       helper.make_node("Sub", ["r", "x"], ["y"])], [*X, ("z", [2, 4])], Y)
    assert len(find_matches(SubOfRelu, load(wanted))) == 1
    assert find_matches(SubOfRelu, load(reversed_)) == []


def test_input_counts_must_be_equal() -> None:
    class SumOfTwo(PatternFusionPass):
        @pattern
        def sum2(self, inputs):
            return es.Sum(inputs[0], inputs[1])

        def replacement(self, inputs):
            return inputs[0] + inputs[1]

    three = load(model([helper.make_node("Sum", ["x", "x", "x"], ["y"])], X, Y))
    two = load(model([helper.make_node("Sum", ["x", "x"], ["y"])], X, Y))
    assert find_matches(SumOfTwo, three) == []
    assert len(find_matches(SumOfTwo, two)) == 1


class ClipMaxOnly(PatternFusionPass):
    """Clip with a max and no min: Min(x, max)."""

    @pattern
    def clip_max(self, inputs):
        return es.Clip(inputs[0], None, inputs[1])

    def replacement(self, inputs):
        return es.Min(inputs[0], inputs[1])


def _clips() -> onnx.ModelProto:
    """Clip(x, max=hi), then Clip(a, lo, hi), then Clip(b, min=lo): only the first has an
    absent min and a max, as the pattern has."""
    return model([helper.make_node("Clip", ["x", "", "hi"], ["a"], name="max_only"),
                  helper.make_node("Clip", ["a", "lo", "hi"], ["b"], name="both"),
                  helper.make_node("Clip", ["b", "lo"], ["y"], name="min_only")], X, Y,
                 [const("lo", np.array(-0.5, np.float32)), const("hi", np.array(0.5, np.float32))])


def test_an_absent_optional_input_is_compared_by_position() -> None:
    proto = _clips()
    found = find_matches(ClipMaxOnly, load(proto))
    assert [[n.name for n in m.nodes] for m in found] == [["max_only"]]
    graph = load(proto)
    run = rewrite(ClipMaxOnly(), graph)
    assert run.rewrites == 1
    assert op_counts(graph) == {"Min": 1, "Clip": 2}
    assert_same_outputs(proto, graph)


def test_absent_trailing_inputs_are_the_same_as_none() -> None:
    class ClipMinOnly(PatternFusionPass):
        @pattern
        def clip_min(self, inputs):
            return es.Clip(inputs[0], inputs[1])

        def replacement(self, inputs):
            return es.Max(inputs[0], inputs[1])

    trailing = model([helper.make_node("Clip", ["x", "lo", ""], ["y"], name="trailing")], X, Y,
                     [const("lo", np.array(-0.5, np.float32))])
    assert [[n.name for n in m.nodes] for m in find_matches(ClipMinOnly, load(trailing))] == [
        ["trailing"]]
    found = find_matches(ClipMinOnly, load(_clips()))  # not max-only: its input 1 is absent
    assert [[n.name for n in m.nodes] for m in found] == [["min_only"]]


def test_a_pattern_constant_matches_any_constant_without_const_value_match() -> None:
    proto = _matmul_add_model()
    graph = load(proto)

    class AddAnyConstant(PatternFusionPass):
        @pattern
        def add(self, inputs):
            return inputs[0] + 7.0  # the model adds [0.5, 1, 2, 3]

        def replacement(self, inputs):
            return inputs[0]

    assert len(find_matches(AddAnyConstant, graph)) == 1


class ScaleThenShift(PatternFusionPass):
    """(x * c1 + c2) with two pattern constants, and c1's value read again as an input."""

    def __init__(self) -> None:
        super().__init__(PatternMatcherConfigBuilder().enable_const_value_match().build())

    @pattern
    def scale_shift(self, inputs):
        return es.Mul(inputs[0], 2.0) + 2.0

    def replacement(self, inputs):
        return es.Mul(inputs[0] + 1.0, 2.0)


def test_two_pattern_constants_may_bind_one_constant() -> None:
    """One 2.0 initializer read by the Mul and the Add (as ConstantDeduplication leaves
    them) matches the pattern's two 2.0 constants; the constant stays while read."""
    proto = model([helper.make_node("Mul", ["x", "two"], ["m"]),
                   helper.make_node("Add", ["m", "two"], ["a"]),
                   helper.make_node("Sub", ["a", "two"], ["y"])],
                  X, Y, [const("two", 2.0, np.float32)])
    graph = load(proto)
    (match,) = find_matches(ScaleThenShift, graph)
    assert [n.type for n in match.nodes].count("Const") == 1  # bound twice, listed once
    rewrite(ScaleThenShift(), graph)
    assert op_counts(graph) == {"Add": 1, "Mul": 1, "Sub": 1}
    assert_same_outputs(proto, graph)


class AddZeroExact(PatternFusionPass):
    def __init__(self) -> None:
        super().__init__(PatternMatcherConfigBuilder().enable_const_value_match().build())

    @pattern
    def add_zero(self, inputs):
        return inputs[0] + 0.0  # float32 scalar 0

    def replacement(self, inputs):
        return inputs[0]


@pytest.mark.parametrize(("value", "dtype", "matches"), [
    (0.0, np.float32, True),
    (0.0, np.float64, False),  # same value, other dtype
    (1.0, np.float32, False),  # other bytes
    ([0.0], np.float32, False),  # other shape
])
def test_const_value_match_compares_dtype_shape_and_bytes(value, dtype, matches) -> None:
    proto = model([helper.make_node("Cast", ["zero"], ["zf"], to=1),
                   helper.make_node("Add", ["x", "zero"] if dtype == np.float32 else
                                    ["x", "zf"], ["y"])],
                  X, Y, [const("zero", value, dtype)])
    graph = load(proto)
    assert bool(find_matches(AddZeroExact, graph)) is matches
    rewrite(AddZeroExact(), graph)
    assert ("Add" not in op_counts(graph)) is matches
    assert_same_outputs(proto, graph)


def test_ir_attribute_match_fills_onnx_defaults() -> None:
    class DefaultLeakyRelu(PatternFusionPass):
        def __init__(self) -> None:
            super().__init__(PatternMatcherConfigBuilder().enable_ir_attr_match().build())

        @pattern
        def leaky(self, inputs):
            return es.LeakyRelu(inputs[0])  # alpha unset: ONNX's default 0.01

        def replacement(self, inputs):
            return es.LeakyRelu(inputs[0], alpha=0.01)

    explicit_default = load(model([helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.01)],
                                  X, Y))
    other = load(model([helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.2)], X, Y))
    unset = load(model([helper.make_node("LeakyRelu", ["x"], ["y"])], X, Y))
    assert len(find_matches(DefaultLeakyRelu, explicit_default)) == 1
    assert len(find_matches(DefaultLeakyRelu, unset)) == 1
    assert find_matches(DefaultLeakyRelu, other) == []


def test_without_ir_attribute_match_attributes_are_ignored() -> None:
    class AnyTranspose(PatternFusionPass):
        @pattern
        def t(self, inputs):
            return es.Transpose(inputs[0], perm=[1, 0])

        def replacement(self, inputs):
            return inputs[0]

    other_perm = load(model([helper.make_node("Transpose", ["x"], ["y"], perm=[0, 1])],
                            X, Y))
    assert len(find_matches(AnyTranspose, other_perm)) == 1


def test_commutative_match_is_opt_in_and_backtracks() -> None:
    class GemmCommutative(MatMulAddToGemm):
        def __init__(self) -> None:
            super().__init__(PatternMatcherConfigBuilder().enable_commutative_match().build())

    proto = _matmul_add_model(swapped=True)  # Add(b, MatMul(x, w))
    assert find_matches(MatMulAddToGemm, load(proto)) == []
    graph = load(proto)
    found = find_matches(GemmCommutative, graph)
    assert len(found) == 1
    assert [c.node.name for c in found[0].captured[:3]] == ["x", "w", "b"]
    rewrite(GemmCommutative(), graph)
    assert op_counts(graph) == {"Gemm": 1}
    assert_same_outputs(proto, graph)


def test_an_intermediate_with_an_outside_consumer_rejects_the_match() -> None:
    graph = load(_matmul_add_model(extra_consumer=True))
    assert find_matches(MatMulAddToGemm, graph) == []
    assert rewrite(MatMulAddToGemm(), graph).rewrites == 0


def test_outside_consumers_of_an_output_are_all_relinked() -> None:
    proto = model([helper.make_node("MatMul", ["x", "w"], ["mm"]),
                   helper.make_node("Add", ["mm", "b"], ["a"]),
                   helper.make_node("Relu", ["a"], ["y"]),
                   helper.make_node("Neg", ["a"], ["n"])],
                  X, [("y", [2, 4]), ("n", [2, 4]), ("a", [2, 4])],
                  [const("w", np.eye(4)), const("b", [1, 2, 3, 4])])
    graph = load(proto)
    rewrite(MatMulAddToGemm(), graph)
    gemm = graph.nodes_of_type("Gemm")[0]
    consumers = {c.type for c, _ in gemm.get_out_data_nodes_and_port_indexes(0)}
    assert consumers == {"Relu", "Neg", "NetOutput"}
    assert_same_outputs(proto, graph)  # graph output "a" keeps its name


def test_a_rewrite_that_would_make_a_cycle_is_skipped() -> None:
    class TwoOutputs(PatternFusionPass):
        @pattern
        def pair(self, inputs):
            return [es.Relu(inputs[0]), es.Neg(inputs[1])]

        def replacement(self, inputs):
            return [es.Relu(inputs[0]), es.Neg(inputs[1])]

    # Neg reads Sigmoid(Relu(x)): fusing Relu and Neg would put Sigmoid inside a cycle.
    proto = model([helper.make_node("Relu", ["x"], ["r"]),
                   helper.make_node("Sigmoid", ["r"], ["s"]),
                   helper.make_node("Neg", ["s"], ["y"])], X, Y)
    graph = load(proto)
    assert find_matches(TwoOutputs, graph) == []
    assert rewrite(TwoOutputs(), graph).rewrites == 0
    assert op_counts(graph) == {"Relu": 1, "Sigmoid": 1, "Neg": 1}


def test_multi_output_patterns_relink_each_output() -> None:
    class ReluAndSigmoid(PatternFusionPass):
        @pattern
        def both(self, inputs):
            return [es.Relu(inputs[0]), es.Sigmoid(inputs[0])]

        def replacement(self, inputs):
            return [es.Max(inputs[0], inputs[0] * 0.0), es.Sigmoid(inputs[0])]

    proto = model([helper.make_node("Exp", ["x"], ["e"]),
                   helper.make_node("Sigmoid", ["e"], ["s"]),
                   helper.make_node("Relu", ["e"], ["r"]),
                   helper.make_node("Sub", ["r", "s"], ["y"])], X, [("y", [2, 4]), ("s", [2, 4])])
    graph = load(proto)
    found = find_matches(ReluAndSigmoid, graph)
    assert len(found) == 1 and {n.type for n in found[0].nodes} == {"Relu", "Sigmoid"}
    rewrite(ReluAndSigmoid(), graph)
    assert "Relu" not in op_counts(graph) and op_counts(graph)["Max"] == 1
    assert_same_outputs(proto, graph)


def test_overlapping_matches_are_resolved_greedily() -> None:
    proto = model([helper.make_node("Neg", ["x"], ["n1"]),
                   helper.make_node("Neg", ["n1"], ["n2"]),
                   helper.make_node("Neg", ["n2"], ["y"])], X, Y)
    graph = load(proto)
    run = rewrite(NegNeg(), graph)
    assert run.rewrites == 1 and op_counts(graph) == {"Neg": 1}
    assert_same_outputs(proto, graph)


def test_nodes_made_in_a_sweep_match_later_in_the_same_sweep() -> None:
    class ReluTwice(PatternFusionPass):
        @pattern
        def twice(self, inputs):
            return es.Relu(es.Relu(inputs[0]))

        def replacement(self, inputs):
            return es.Relu(inputs[0])

    nodes = [helper.make_node("Relu", ["x"], ["r0"])]
    nodes += [helper.make_node("Relu", [f"r{i}"], [f"r{i + 1}"]) for i in range(3)]
    nodes.append(helper.make_node("Identity", ["r3"], ["y"]))
    proto = model(nodes, X, Y)
    graph = load(proto)
    run = rewrite(ReluTwice(), graph)
    assert run.rewrites == 3  # each new Relu is matched again (D14), one sweep
    assert op_counts(graph) == {"Relu": 1, "Identity": 1}
    assert_same_outputs(proto, graph)


def test_a_pass_through_output_keeps_the_graph_output_name() -> None:
    proto = model([helper.make_node("Neg", ["x"], ["n"]),
                   helper.make_node("Neg", ["n"], ["y"])], X, Y)
    graph = load(proto)
    rewrite(NegNeg(), graph)
    assert op_counts(graph) == {"Identity": 1} or op_counts(graph) == {}
    assert_same_outputs(proto, graph)  # output "y" still named y


def test_a_tensor_captured_twice_fills_both_indexes() -> None:
    class CaptureTwice(PatternFusionPass):
        def patterns(self):
            builder = GraphBuilder("capture_twice")
            x = builder.create_input(0)
            relu = es.Relu(x)
            found = create_pattern(builder.build_and_reset([relu]))
            return [found.capture_tensor(relu).capture_tensor(x).capture_tensor(relu)]

        def meet_requirements(self, match_result: MatchResult) -> bool:
            self.seen = [match_result.get_captured_tensor(i) for i in range(3)]
            return False

    graph = load(model([helper.make_node("Relu", ["x"], ["y"], name="r")], X, Y))
    instance = CaptureTwice()
    rewrite(instance, graph)
    assert [(c.node.name, c.index) for c in instance.seen] == [("r", 0), ("x", 0), ("r", 0)]


def test_capture_of_a_split_output_records_its_index() -> None:
    builder = GraphBuilder("split_pattern")
    parts = es.Split(builder.create_input(0), axis=1, num_outputs=2)
    second = parts[1]
    found = create_pattern(builder.build_and_reset([es.Relu(second)]))
    found.capture_tensor(second)
    assert found.get_captured_tensors()[0].index == 1


def test_match_results_expire_after_the_hook() -> None:
    class Keep(NegNeg):
        def meet_requirements(self, match_result):
            self.kept = match_result
            assert [n.type for n in match_result.get_matched_nodes()] == ["Neg", "Neg"]
            assert match_result.get_pattern_graph_name() == "NegNeg_twice_pattern"  # defined there
            assert str(match_result).startswith("[PatternName:NegNeg_twice_pattern]")
            with pytest.raises(RuntimeError, match="Failed to get captured tensor"):
                match_result.get_captured_tensor(5)
            return True

    graph = load(model([helper.make_node("Neg", ["x"], ["n"]),
                        helper.make_node("Neg", ["n"], ["y"])], X, Y))
    instance = Keep()
    rewrite(instance, graph)
    with pytest.raises(RuntimeError, match="MatchResult handle has expired"):
        instance.kept.get_matched_nodes()


@pytest.mark.parametrize(("index", "problem"), [
    (2, "capture index 2 is out of range"),
    (-1, r"capture index -1 is negative \(indexes count from 0, not from the end\)"),
    ("0", "a capture index is an int, not str"),
])
def test_a_capture_index_that_names_no_capture_says_what_the_captures_are(
        index: object, problem: str) -> None:
    """GE's words first, then the index asked for and the pattern's captures in order."""
    class Ask(NegNeg):
        def meet_requirements(self, match_result):
            match_result.get_captured_tensor(index)

    graph = load(model([helper.make_node("Neg", ["x"], ["n"]),
                        helper.make_node("Neg", ["n"], ["y"])], X, Y))
    with pytest.raises(RuntimeError) as caught:
        rewrite(Ask(), graph)
    assert re.fullmatch(
        f"Failed to get captured tensor from MatchResult: {problem}; pattern "
        r"'NegNeg_twice_pattern' has 2 capture\(s\), 0\.\.1 in capture order "
        r"\(0: input 0; 1: Neg 'Neg_1' output 0\)", str(caught.value))


def test_matched_nodes_are_in_topological_order_constants_included() -> None:
    class Keep(MatMulAddToGemm):
        def meet_requirements(self, match_result):
            self.names = [n.name for n in match_result.get_matched_nodes()]
            return False

    graph = load(_matmul_add_model())
    instance = Keep()
    rewrite(instance, graph)
    assert instance.names == ["mm", "add"]


def test_find_matches_does_not_rewrite() -> None:
    graph = load(_matmul_add_model())
    before = graph.mutation_count
    found = find_matches(MatMulAddToGemm(), graph)
    assert [m.pattern_name for m in found] == ["MatMulAddToGemm_matmul_add_pattern"]
    assert [n.name for n in found[0].nodes] == ["mm", "add"]
    assert [c.node.name for c in found[0].captured] == ["x", "w", "b", "add"]
    assert graph.mutation_count == before
    with pytest.raises(TypeError, match="PatternFusionPass"):
        find_matches(object(), graph)


def test_find_matches_on_an_untyped_graph_says_why_it_found_nothing() -> None:
    """Trial U: a pass whose meet_requirements reads the MatMul's output type found nothing
    on a freshly loaded graph (the model declares no value_info: the type is unknown before
    inference), in silence; ge compile and ge passes explain warn of it. After
    ge.ops.infer_shapes it finds the match, and says nothing."""
    import warnings

    from ge.errors import PassDefinitionWarning
    from ge.ops import infer_shapes

    class FloatOnly(MatMulAddToGemm):
        def meet_requirements(self, match_result):
            mm = match_result.get_matched_nodes()[0]
            return mm.get_output_desc(0).get_data_type() == DataType.DT_FLOAT

    proto = _matmul_add_model()
    proto.graph.ClearField("value_info")  # (as an export declaring none)
    graph = load(proto)
    assert graph.find_node_by_name("mm").get_output_desc(0).get_data_type() == (
        DataType.DT_UNDEFINED)
    with pytest.warns(PassDefinitionWarning, match=(
            r"^find_matches: FloatOnly refused all 1 match\(es\), 1 after its "
            r"meet_requirements read a value with no type or rank \(output 0 of "
            r"'mm' first\): the graph was not shape-inferred; ge\.ops\.infer_shapes\(graph\) "
            r"types it, .* \(at .*test_matcher\.py:\d+\)$")):
        assert find_matches(FloatOnly, graph) == []
    infer_shapes(graph)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(find_matches(FloatOnly, graph)) == 1


def test_a_pattern_given_as_a_graph_is_used_as_a_pattern() -> None:
    class GraphPatterns(NegNeg):
        def patterns(self):
            builder = GraphBuilder("as_graph")
            return [builder.build_and_reset([es.Neg(es.Neg(builder.create_input(0)))])]

    graph = load(model([helper.make_node("Neg", ["x"], ["n"]),
                        helper.make_node("Neg", ["n"], ["y"])], X, Y))
    assert [m.pattern_name for m in find_matches(GraphPatterns, graph)] == ["as_graph"]


def test_a_pass_runs_on_the_graph_it_is_given_only() -> None:
    graph = Graph("empty")
    assert rewrite(NegNeg(), graph).matches == 0


def test_find_matches_in_bodies_builds_the_patterns_once() -> None:
    """`bodies=True` finds the matches of every subgraph too, each graph's as its own run
    would; the patterns are built once (per body, opset hints took 36 s for a model of
    7,500 bodies: trial DD)."""
    built = []

    class CountedMatMulAdd(MatMulAddToGemm):
        def patterns(self):
            built.append(1)
            return super().patterns()

    def branch(name: str) -> onnx.GraphProto:
        return helper.make_graph(
            [helper.make_node("MatMul", ["x", "w"], [f"{name}_mm"]),
             helper.make_node("Add", [f"{name}_mm", "b"], [f"{name}_y"])],
            name, [], [helper.make_tensor_value_info(f"{name}_y", onnx.TensorProto.FLOAT,
                                                     [2, 4])])

    proto = model([helper.make_node("MatMul", ["x", "w"], ["mm"]),
                   helper.make_node("Add", ["mm", "b"], ["y"]),
                   helper.make_node("If", ["c"], ["z"], then_branch=branch("then"),
                                    else_branch=branch("else"))],
                  [*X, ("c", [])], [*Y, ("z", [2, 4])],
                  [const("w", np.eye(4)), const("b", [0.5, 1, 2, 3])])
    proto.graph.input[1].type.tensor_type.elem_type = onnx.TensorProto.BOOL
    graph = load(proto)
    assert len(find_matches(CountedMatMulAdd, graph)) == 1 and len(built) == 1
    found = find_matches(CountedMatMulAdd, graph, bodies=True)
    assert len(built) == 2  # once for the root and both branches
    assert sorted(next(n for n in f.nodes if n.type == "Add").owner_graph.name
                  for f in found) == sorted([graph.name, "then", "else"])
