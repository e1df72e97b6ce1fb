"""`ge.passes.explain`: why a pattern does or does not match, one failure kind per test.

The passes are plugin files written to a temporary folder and loaded as the compiler loads
them; the graphs are ONNX models built with onnx.helper."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from matcher_helpers import F32, const, load, model
from onnx import helper

import ge.graph
from ge.compiler.options import parse_options
from ge.compiler.plugin_loader import PluginLoader
from ge.errors import GraphError
from ge.passes import find_matches
from ge.passes.explain import (
    CandidateExplanation,
    PatternExplanation,
    explain,
    infer_shapes_for_explain,
)
from ge.passes.explain_text import format_explanations

HEADER = """
import ge.es.all as es
from ge.graph import DataType
from ge.passes import (PassStage, PatternFusionPass, PatternMatcherConfigBuilder, pattern,
                       register_fusion_pass)
"""

PASSES = HEADER + """

@register_fusion_pass(name="ReluNeg", stage=PassStage.AFTER_INFER_SHAPE)
class ReluNeg(PatternFusionPass):
    @pattern
    def relu_neg(self, inputs):
        return es.Relu(es.Neg(inputs[0]))

    def replacement(self, inputs):
        return es.Relu(inputs[0])


@register_fusion_pass(name="ReluNegAbs", stage=PassStage.AFTER_INFER_SHAPE)
class ReluNegAbs(PatternFusionPass):
    @pattern
    def chain(self, inputs):
        return es.Relu(es.Neg(es.Abs(inputs[0])))

    def replacement(self, inputs):
        return es.Relu(inputs[0])


@register_fusion_pass(name="ClipMaxOnly", stage=PassStage.AFTER_INFER_SHAPE)
class ClipMaxOnly(PatternFusionPass):
    @pattern
    def clip_max(self, inputs):
        return es.Clip(inputs[0], None, inputs[1])

    def replacement(self, inputs):
        return es.Min(inputs[0], inputs[1])


@register_fusion_pass(name="SumTwo", stage=PassStage.AFTER_INFER_SHAPE)
class SumTwo(PatternFusionPass):
    @pattern
    def sum_two(self, inputs):
        return es.Sum(inputs[0], inputs[1])

    def replacement(self, inputs):
        return inputs[0] + inputs[1]


@register_fusion_pass(name="MatMulAdd", stage=PassStage.AFTER_INFER_SHAPE)
class MatMulAdd(PatternFusionPass):
    @pattern
    def matmul_add(self, inputs):
        return es.MatMul(inputs[0], inputs[1]) + inputs[2]

    def replacement(self, inputs):
        return es.Gemm(inputs[0], inputs[1], inputs[2])


@register_fusion_pass(name="AddZero", stage=PassStage.AFTER_INFER_SHAPE)
class AddZero(PatternFusionPass):
    def __init__(self):
        super().__init__(PatternMatcherConfigBuilder().enable_const_value_match().build())

    @pattern
    def add_zero(self, inputs):
        return inputs[0] + 0.0

    def replacement(self, inputs):
        return inputs[0]


@register_fusion_pass(name="SoftmaxLast", stage=PassStage.AFTER_INFER_SHAPE)
class SoftmaxLast(PatternFusionPass):
    def __init__(self):
        super().__init__(PatternMatcherConfigBuilder().enable_ir_attr_match().build())

    @pattern
    def softmax(self, inputs):
        return es.Softmax(inputs[0])          # axis unset: its default, -1

    def replacement(self, inputs):
        return es.Softmax(inputs[0], axis=-1)


@register_fusion_pass(name="AddSelf", stage=PassStage.AFTER_INFER_SHAPE)
class AddSelf(PatternFusionPass):
    @pattern
    def add_self(self, inputs):
        return inputs[0] + inputs[0]

    def replacement(self, inputs):
        return inputs[0] * 2.0


@register_fusion_pass(name="Refused", stage=PassStage.AFTER_INFER_SHAPE)
class Refused(PatternFusionPass):
    @pattern
    def relu_neg(self, inputs):
        return es.Relu(es.Neg(inputs[0]))

    def meet_requirements(self, match_result):
        return False

    def replacement(self, inputs):
        return es.Relu(inputs[0])


@register_fusion_pass(name="ForgotReturn", stage=PassStage.AFTER_INFER_SHAPE)
class ForgotReturn(PatternFusionPass):
    @pattern
    def relu_neg(self, inputs):
        return es.Relu(es.Neg(inputs[0]))

    def meet_requirements(self, match_result):
        match_result.get_matched_nodes()

    def replacement(self, inputs):
        return es.Relu(inputs[0])


@register_fusion_pass(name="Raises", stage=PassStage.AFTER_INFER_SHAPE)
class Raises(PatternFusionPass):
    @pattern
    def relu_neg(self, inputs):
        return es.Relu(es.Neg(inputs[0]))

    def meet_requirements(self, match_result):
        raise ValueError("no rank here")

    def replacement(self, inputs):
        return es.Relu(inputs[0])


@register_fusion_pass(name="TwoRefusals", stage=PassStage.AFTER_INFER_SHAPE)
class TwoRefusals(PatternFusionPass):
    @pattern
    def relu_neg(self, inputs):
        return es.Relu(es.Neg(inputs[0]))

    def meet_requirements(self, match_result):
        tensor = match_result.get_captured_tensor(0)
        shape = tensor.node.get_output_desc(tensor.index).get_shape()
        if shape.get_dim_num() != 2:
            return False
        if shape.get_dims()[1] == 4:
            return False  # the second refusal
        return True

    def replacement(self, inputs):
        return es.Relu(inputs[0])


@register_fusion_pass(name="EarlyFloatOnly", stage=PassStage.BEFORE_INFER_SHAPE)
class EarlyFloatOnly(PatternFusionPass):
    @pattern
    def relu_neg(self, inputs):
        return es.Relu(es.Neg(inputs[0]))

    def meet_requirements(self, match_result):
        relu = match_result.get_captured_tensor(1).node
        return relu.get_input_desc(0).get_data_type() == DataType.DT_FLOAT

    def replacement(self, inputs):
        return es.Relu(inputs[0])


@register_fusion_pass(name="LateFloatOnly", stage=PassStage.AFTER_INFER_SHAPE)
class LateFloatOnly(EarlyFloatOnly):
    pass


@register_fusion_pass(name="EightWide", stage=PassStage.AFTER_INFER_SHAPE)
class EightWide(PatternFusionPass):
    @pattern
    def relu_neg(self, inputs):
        return es.Relu(es.Neg(inputs[0]))

    def meet_requirements(self, match_result):  # a dim may be a symbol: a TypeError
        tensor = match_result.get_captured_tensor(0)
        last = list(tensor.node.get_output_desc(tensor.index).get_shape())[-1]
        return last % 8 == 0

    def replacement(self, inputs):
        return es.Relu(inputs[0])


@register_fusion_pass(name="NeedsRank2", stage=PassStage.AFTER_INFER_SHAPE)
class NeedsRank2(PatternFusionPass):
    @pattern
    def matmul_add(self, inputs):
        return es.MatMul(inputs[0], inputs[1]) + inputs[2]

    def meet_requirements(self, match_result):
        mm = next(n for n in match_result.get_matched_nodes() if n.type == "MatMul")
        return mm.get_output_desc(0).get_shape().get_dim_num() == 2

    def replacement(self, inputs):
        return es.Gemm(inputs[0], inputs[1], inputs[2])


@register_fusion_pass(name="NegSlice", stage=PassStage.AFTER_INFER_SHAPE)
class NegSlice(PatternFusionPass):
    @pattern
    def neg_slice(self, inputs):
        return es.Neg(es.Slice(inputs[0], [4], [8], [-1]))

    def replacement(self, inputs):
        return es.Identity(inputs[0])


@register_fusion_pass(name="NegFirstHalf", stage=PassStage.AFTER_INFER_SHAPE)
class NegFirstHalf(PatternFusionPass):
    @pattern
    def neg_first(self, inputs):
        first, _ = es.Split(inputs[0], inputs[1], num_outputs=2, axis=-1)
        return es.Neg(first)

    def replacement(self, inputs):
        return es.Identity(inputs[0])


@register_fusion_pass(name="TwoOutputs", stage=PassStage.AFTER_INFER_SHAPE)
class TwoOutputs(PatternFusionPass):
    @pattern
    def relu_and_neg(self, inputs):
        return [es.Relu(inputs[0]), es.Neg(inputs[1])]

    def replacement(self, inputs):
        return [es.Relu(inputs[0]), es.Neg(inputs[1])]
"""

CUSTOM = """
from ge.graph import Graph
from ge.passes import (PassStage, PatternFusionPass, PatternMatcherConfigBuilder,
                       register_fusion_pass)


@register_fusion_pass(name="CustomK", stage=PassStage.AFTER_INFER_SHAPE)
class CustomK(PatternFusionPass):
    def __init__(self):
        super().__init__(PatternMatcherConfigBuilder().enable_ir_attr_match().build())

    def patterns(self):
        graph = Graph("custom_k")
        data = graph.add_node("Data", name="x", attrs={"index": 0})
        op = graph.add_node("MyOp", name="my", domain="my.ops", num_inputs=1, attrs={"k": 1})
        out = graph.add_node("NetOutput", num_inputs=1, num_outputs=0)
        graph.add_data_edge(data, 0, op, 0)
        graph.add_data_edge(op, 0, out, 0)
        return [graph]
"""

X = [("x", [2, 4])]


@pytest.fixture
def passes(write) -> dict[str, type]:
    """Every pass of PASSES, loaded from a plugin file as the compiler loads it."""
    path = write("plugins/explain_passes.py", PASSES)
    report = PluginLoader().load_paths([path], parse_options({}))
    assert not report.failures, report.failures
    return {d.pass_name: d.cls for p in report.plugins for d in p.descriptors}


def _one(explanations: list[PatternExplanation], candidate: str) -> CandidateExplanation:
    (pattern,) = explanations
    found = [c for c in pattern.candidates if c.candidate == candidate]
    assert len(found) == 1, [c.candidate for c in pattern.candidates]
    return found[0]


def _line(cls: type, text: str) -> str:
    """`file:line` of the first line holding `text` in the plugin file defining `cls`."""
    import inspect

    path = inspect.getsourcefile(cls)
    assert path is not None
    with open(path) as f:
        number = next(i for i, line in enumerate(f, 1) if text in line)
    return f"{path}:{number}"


def _graph(nodes, outputs, inits=(), inputs=X):
    """The model's graph, typed as the engine types it before AfterInferShape passes."""
    graph = load(model(nodes, inputs, outputs, inits))
    assert infer_shapes_for_explain(graph) is None
    return graph


def test_op_type_mismatch_names_both_op_types_and_nodes(passes) -> None:
    graph = _graph([helper.make_node("Abs", ["x"], ["a"], name="abs"),
                    helper.make_node("Relu", ["a"], ["y"], name="relu")], [("y", [2, 4])])
    cand = _one(explain(passes["ReluNeg"], graph), "relu")
    assert cand.reason is not None and cand.reason.kind == "op_type"
    assert (cand.depth, cand.size) == (1, 3)
    assert cand.reason.pattern_node == "Neg" and cand.reason.target_node == "abs"
    assert cand.reason.message == ("op type: pattern node 'Neg' (Neg) wants Neg, target node "
                                   "'abs' is Abs (input 0 of 'relu')")
    assert [str(b) for b in cand.bindings] == ["Relu=relu"]


def test_target_nodes_the_model_gives_no_name_are_named_by_what_they_compute(passes) -> None:
    """ge's names for them ('Abs', 'Relu') are in no file: the reason names them as the model
    does; the candidate and the reason's data keep ge's names (dumps and --node use them)."""
    graph = _graph([helper.make_node("Abs", ["x"], ["a"]),
                    helper.make_node("Relu", ["a"], ["y"])], [("y", [2, 4])])
    cand = _one(explain(passes["ReluNeg"], graph), "Relu")
    assert cand.reason is not None and cand.reason.kind == "op_type"
    assert cand.reason.pattern_node == "Neg" and cand.reason.target_node == "Abs"
    assert cand.reason.message == (
        "op type: pattern node 'Neg' (Neg) wants Neg, target unnamed Abs node (computing 'a') "
        "is Abs (input 0 of unnamed Relu node (computing 'y'))")


def test_input_count_mismatch_gives_both_counts(passes) -> None:
    graph = _graph([helper.make_node("Sum", ["x", "x", "x"], ["y"], name="sum3")],
                   [("y", [2, 4])])
    cand = _one(explain(passes["SumTwo"], graph), "sum3")
    assert cand.reason is not None and cand.reason.kind == "input_count"
    assert cand.depth == 0
    assert cand.reason.details == {"expected": 2, "found": 3}
    assert cand.reason.message == ("input count: pattern node 'Sum' (Sum) has 2 input(s), "
                                   "target node 'sum3' has 3 connected")


def test_an_input_at_another_position_names_both_positions(passes) -> None:
    lo = const("lo", np.array(-0.5, np.float32))
    graph = _graph([helper.make_node("Clip", ["x", "lo"], ["y"], name="min_only")],
                   [("y", [2, 4])], [lo])
    cand = _one(explain(passes["ClipMaxOnly"], graph), "min_only")
    assert cand.reason is not None and cand.reason.kind == "input_position"
    assert cand.reason.details == {"expected": [0, 2], "found": [0, 1]}
    assert cand.reason.message == (
        "input positions: pattern node 'Clip' (Clip) has inputs at [0, 2], target node "
        "'min_only' at [0, 1] (an absent optional input must be absent in both)")


def test_outside_consumer_of_an_intermediate_is_named(passes) -> None:
    graph = _graph([helper.make_node("MatMul", ["x", "w"], ["mm"], name="mm"),
                    helper.make_node("Add", ["mm", "b"], ["y"], name="add"),
                    helper.make_node("Relu", ["mm"], ["r"], name="relu")],
                   [("y", [2, 4]), ("r", [2, 4])],
                   [const("w", np.eye(4)), const("b", [0.5, 1, 2, 3])])
    cand = _one(explain(passes["MatMulAdd"], graph), "add")
    reason = cand.reason
    assert reason is not None and reason.kind == "outside_consumer"
    assert reason.pattern_node == "MatMul" and reason.target_node == "mm"
    assert reason.details["outside"] == ["relu"]
    assert set(reason.nodes) == {"mm", "relu"}
    assert "output 0 of target node 'mm'" in reason.message
    assert "also read by 'relu' (Relu), outside the match" in reason.message
    assert "an intermediate" in reason.message


def test_a_graph_output_reading_an_intermediate_is_an_outside_consumer(passes) -> None:
    graph = _graph([helper.make_node("Neg", ["x"], ["n"], name="neg"),
                    helper.make_node("Relu", ["n"], ["y"], name="relu")],
                   [("y", [2, 4]), ("n", [2, 4])])
    reason = _one(explain(passes["ReluNeg"], graph), "relu").reason
    assert reason is not None and reason.kind == "outside_consumer"
    assert "also read by the graph output" in reason.message


def test_const_value_mismatch_shows_both_values(passes) -> None:
    graph = _graph([helper.make_node("Add", ["x", "one"], ["y"], name="add")],
                   [("y", [2, 4])], [const("one", 1.0)])
    cand = _one(explain(passes["AddZero"], graph), "add")
    reason = cand.reason
    assert reason is not None and reason.kind == "const_value"
    assert reason.target_node == "one"
    assert reason.details == {"expected": "float32[] [0]", "found": "float32[] [1]"}
    assert "pattern constant" in reason.message and "const-value match" in reason.message


def test_a_constant_differing_in_the_seventh_digit_shows_the_difference(passes) -> None:
    """float32 0.7978846 and 0.797885 printed alike to six digits (trial EE): a float is
    shown with the digits that tell it from its neighbours in its type."""
    graph = _graph([helper.make_node("Add", ["x", "c"], ["y"], name="add")],
                   [("y", [2, 4])], [const("c", 0.7978846)])
    reason = _one(explain(passes["AddZero"], graph), "add").reason
    assert reason is not None and reason.details["found"] == "float32[] [0.7978846]"
    graph = _graph([helper.make_node("Add", ["x", "c"], ["y"], name="add")],
                   [("y", [2, 4])], [const("c", [1e-7, 2.5e9, 1.0, 0.5])])
    reason = _one(explain(passes["AddZero"], graph), "add").reason
    assert reason is not None
    assert reason.details["found"] == "float32[4] [1e-07, 2.5e+09, 1, 0.5]"


def test_a_commutative_operator_in_the_other_order_is_hinted(passes) -> None:
    """`x + 0.0` builds Add(x, 0) (as GE's ES does): a model's Add(0, x) does not match, and
    explain says the other order may be meant (trial EE's `0.5 * x` never matched)."""
    graph = _graph([helper.make_node("Add", ["zero", "x"], ["y"], name="add")],
                   [("y", [2, 4])], [const("zero", 0.0)])
    reason = _one(explain(passes["AddZero"], graph), "add").reason
    assert reason is not None and reason.message.endswith(
        "(input 1 of 'add'); 'add' may hold the same inputs in the other order: "
        "PatternMatcherConfigBuilder().enable_commutative_match() tries both, or write them "
        "in its order (ES builds Add(x, c) for `c + x`, as GE does)")


def test_long_constants_are_abbreviated(passes) -> None:
    graph = _graph([helper.make_node("Add", ["x", "c"], ["y"], name="add")],
                   [("y", [2, 4])], [const("c", [1.0, 2.0, 3.0, 4.0])])
    reason = _one(explain(passes["AddZero"], graph), "add").reason
    assert reason is not None and reason.details["found"] == "float32[4] [1, 2, 3, 4]"
    graph = _graph([helper.make_node("Add", ["x", "c"], ["y"], name="add")],
                   [("y", [2, 4])], [const("c", np.arange(8, dtype=np.float32).reshape(2, 4))])
    reason = _one(explain(passes["AddZero"], graph), "add").reason
    assert reason is not None and reason.details["found"] == "float32[2, 4] [0, 1, 2, 3, ...]"


def test_attribute_mismatch_under_ir_attribute_match(passes) -> None:
    graph = _graph([helper.make_node("Softmax", ["x"], ["y"], name="softmax", axis=0)],
                   [("y", [2, 4])])
    reason = _one(explain(passes["SoftmaxLast"], graph), "softmax").reason
    assert reason is not None and reason.kind == "attribute"
    assert reason.details == {"name": "axis", "expected": -1, "found": 0}
    assert reason.message == ("attribute 'axis': pattern node 'Softmax' (Softmax) has -1, "
                              "target node 'softmax' has 0 (IR attribute match)")
    # the default filled in: an explicit axis=-1 matches
    graph = _graph([helper.make_node("Softmax", ["x"], ["y"], name="softmax", axis=-1)],
                   [("y", [2, 4])])
    assert _one(explain(passes["SoftmaxLast"], graph), "softmax").rewritten


def test_data_bound_twice_names_both_producers(passes) -> None:
    graph = _graph([helper.make_node("Neg", ["x"], ["a"], name="neg"),
                    helper.make_node("Abs", ["x"], ["b"], name="abs"),
                    helper.make_node("Add", ["a", "b"], ["y"], name="add")], [("y", [2, 4])])
    cand = _one(explain(passes["AddSelf"], graph), "add")
    reason = cand.reason
    assert reason is not None and reason.kind == "data_twice"
    assert reason.pattern_node == "input_0"
    assert reason.details == {"bound": ["neg", 0], "found": ["abs", 0]}
    assert set(reason.nodes) == {"neg", "abs"}
    assert reason.message == (
        "pattern input used twice: pattern input 'input_0' (index 0) is bound to output 0 "
        "of 'neg' (Neg), but output 0 of 'abs' (Abs) is read at an input of target node "
        "'add' (pattern node 'Add'); one pattern input binds one producer")


def _neg_of_split_output_1():
    return _graph([helper.make_node("Split", ["x", "sp"], ["a", "b"], name="split", axis=-1),
                   helper.make_node("Neg", ["b"], ["y"], name="neg")],
                  [("y", [2, 2]), ("a", [2, 2])], [const("sp", [2, 2], np.int64)])


def test_another_op_type_read_at_another_output_is_an_op_type_mismatch(passes) -> None:
    """A pattern wanting Slice meets a Split read at its output 1: the operator is what
    differs, not the output index (a user trial read "output index" and looked for the
    wrong mistake)."""
    reason = _one(explain(passes["NegSlice"], _neg_of_split_output_1()), "neg").reason
    assert reason is not None and reason.kind == "op_type"
    assert reason.pattern_node == "Slice" and reason.target_node == "split"
    assert reason.details == {"expected": "Slice", "found": "Split", "output": 1,
                              "expected_output": 0}
    assert reason.message == (
        "op type: pattern node 'Slice' (Slice) wants Slice, target node 'split' is Split "
        "(input 0 of 'neg'); the target reads its output 1, the pattern output 0")


def test_the_same_op_type_read_at_another_output_is_an_output_index_mismatch(passes) -> None:
    reason = _one(explain(passes["NegFirstHalf"], _neg_of_split_output_1()), "neg").reason
    assert reason is not None and reason.kind == "output_index"
    assert reason.details == {"expected": 0, "found": 1}
    assert reason.message == (
        "output index: the pattern reads output 0 of pattern node 'Split' (Split), the "
        "target reads output 1 of 'split' (Split)")


def test_meet_requirements_false_and_raising(passes) -> None:
    graph = _graph([helper.make_node("Neg", ["x"], ["n"], name="neg"),
                    helper.make_node("Relu", ["n"], ["y"], name="relu")], [("y", [2, 4])])
    cand = _one(explain(passes["Refused"], graph), "relu")
    assert cand.matched and not cand.rewritten
    assert cand.reason is not None and cand.reason.kind == "meet_requirements"
    assert cand.reason.message.startswith("meet_requirements returned False")
    assert "input_0 float[2, 4]" in cand.reason.message
    assert cand.matched_nodes == ["neg", "relu"] and cand.warnings == []
    cand = _one(explain(passes["ForgotReturn"], graph), "relu")
    assert cand.reason is not None and cand.reason.kind == "meet_requirements"
    fell_off = _line(passes["ForgotReturn"], "match_result.get_matched_nodes()")
    assert cand.reason.message.startswith(
        f"meet_requirements returned None (at {fell_off}): the pass refuses this match (None "
        "counts as False: a missing return?)")
    cand = _one(explain(passes["Raises"], graph), "relu")
    assert cand.reason is not None and cand.reason.kind == "meet_requirements_raised"
    raised = _line(passes["Raises"], 'raise ValueError("no rank here")')
    assert cand.reason.message == (f"meet_requirements raised ValueError: no rank here (at "
                                   f"{raised}); its inputs: input_0 float[2, 4]")
    assert cand.reason.details["location"] == raised


def test_a_refusal_names_the_return_statement_that_refused(passes) -> None:
    """A hook with several `return False` says which one answered; one that accepts after a
    refusal elsewhere is rewritten. The user's profiler, if one runs, is left alone (and
    the refusal then names no line)."""
    import sys

    graph = _graph([helper.make_node("Neg", ["x"], ["n"], name="neg"),
                    helper.make_node("Relu", ["n"], ["y"], name="relu")], [("y", [2, 4])])
    cand = _one(explain(passes["TwoRefusals"], graph), "relu")
    second = _line(passes["TwoRefusals"], "return False  # the second refusal")
    assert cand.reason is not None
    assert cand.reason.message.startswith(
        f"meet_requirements returned False (at {second}): the pass refuses this match")
    assert cand.reason.details["location"] == second
    calls: list[str] = []

    def profiler(frame, event, arg):
        calls.append(event)

    sys.setprofile(profiler)
    try:
        cand = _one(explain(passes["TwoRefusals"], graph), "relu")
    finally:
        sys.setprofile(None)
    assert calls  # still installed while explain ran
    assert cand.reason is not None and cand.reason.details["location"] is None
    assert cand.reason.message.startswith(
        "meet_requirements returned False: the pass refuses this match")
    # a built-in pass's hook is ge's own code: no location
    from ge.compiler.builtin.fusion_gemm import MatMulAddFusion

    three_d = _graph([helper.make_node("MatMul", ["x", "w"], ["mm"], name="mm"),
                      helper.make_node("Add", ["mm", "b"], ["y"], name="add")],
                     [("y", [1, 2, 4])], [const("w", np.eye(4)), const("b", [0.5, 1, 2, 3])],
                     inputs=[("x", [1, 2, 4])])
    (pattern,) = explain(MatMulAddFusion, three_d)
    (cand,) = pattern.candidates
    assert cand.reason is not None and cand.reason.kind == "meet_requirements"
    assert cand.reason.details["location"] is None
    assert cand.reason.message.startswith("meet_requirements returned False: the pass refuses")


def test_a_hook_raising_a_type_error_on_symbolic_dims_is_told_why(passes) -> None:
    """`dim % 8` on a symbol (a str) raises: the message shows the inputs and says a dim may
    be a symbol; with sizes the same hook works."""
    nodes = [helper.make_node("Neg", ["x"], ["n"], name="neg"),
             helper.make_node("Relu", ["n"], ["y"], name="relu")]
    graph = _graph(nodes, [("y", ["batch", "hidden"])], inputs=[("x", ["batch", "hidden"])])
    cand = _one(explain(passes["EightWide"], graph), "relu")
    assert cand.reason is not None and cand.reason.kind == "meet_requirements_raised"
    assert cand.reason.message.startswith("meet_requirements raised TypeError: ")
    assert cand.reason.message.endswith(
        "; its inputs: input_0 float[batch, hidden] (a dim may be a symbol, a str such as "
        "'batch', where the hook expects an int: see docs/graph.md on dims)")
    sized = _graph(nodes, [("y", [2, 16])], inputs=[("x", [2, 16])])
    cand = _one(explain(passes["EightWide"], sized), "relu")
    assert cand.reason is None and cand.rewritten


def test_a_rewrite_that_would_create_a_cycle_is_skipped(passes) -> None:
    # relu -> abs (outside) -> neg: fusing {relu, neg} into one node would read its own output
    graph = _graph([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                    helper.make_node("Abs", ["r"], ["a"], name="abs"),
                    helper.make_node("Neg", ["a"], ["y"], name="neg")], [("y", [2, 4])])
    cand = _one(explain(passes["TwoOutputs"], graph), "relu")
    assert cand.matched
    assert cand.reason is not None and cand.reason.kind == "cycle"
    assert cand.reason.details == {"consumer": "abs", "producer": "abs"}
    assert "would create a cycle" in cand.reason.message
    assert find_matches(passes["TwoOutputs"], graph) == []


def test_a_full_match_would_be_rewritten(passes) -> None:
    graph = _graph([helper.make_node("MatMul", ["x", "w"], ["mm"], name="mm"),
                    helper.make_node("Add", ["mm", "b"], ["y"], name="add")],
                   [("y", [2, 4])], [const("w", np.eye(4)), const("b", [0.5, 1, 2, 3])])
    (pattern,) = explain(passes["MatMulAdd"], graph)
    (cand,) = pattern.candidates
    assert cand.rewritten and cand.reason is None
    assert (cand.depth, cand.size) == (5, 5)
    assert cand.matched_nodes == ["mm", "add"]
    assert [c.candidate for c in pattern.rewrites] == ["add"]
    assert {str(b) for b in cand.bindings} == {"input_0=x:0", "input_1=w:0", "MatMul=mm",
                                              "input_2=b:0", "Add=add"}
    lines = format_explanations([pattern])
    assert "  rewrite at 'add': mm, add" in lines
    assert [m.nodes for m in find_matches(passes["MatMulAdd"], graph)] == [
        [graph.find_node_by_name("mm"), graph.find_node_by_name("add")]]


def test_partial_matches_are_ranked_by_depth(passes) -> None:
    # relu1 fails at its input (depth 1), relu2 one node deeper (depth 2), relu3 matches
    graph = _graph([helper.make_node("Sigmoid", ["x"], ["s"], name="sigmoid"),
                    helper.make_node("Relu", ["s"], ["r1"], name="relu1"),
                    helper.make_node("Exp", ["x"], ["e"], name="exp"),
                    helper.make_node("Neg", ["e"], ["n2"], name="neg2"),
                    helper.make_node("Relu", ["n2"], ["r2"], name="relu2"),
                    helper.make_node("Abs", ["x"], ["a"], name="abs"),
                    helper.make_node("Neg", ["a"], ["n3"], name="neg3"),
                    helper.make_node("Relu", ["n3"], ["r3"], name="relu3")],
                   [("r1", [2, 4]), ("r2", [2, 4]), ("r3", [2, 4])])
    (pattern,) = explain(passes["ReluNegAbs"], graph)
    assert [c.candidate for c in pattern.candidates] == ["relu1", "relu2", "relu3"]
    assert [(c.candidate, c.depth) for c in pattern.closest] == [("relu2", 2), ("relu1", 1)]
    assert [c.candidate for c in pattern.rewrites] == ["relu3"]
    assert pattern.closest[0].reason is not None
    assert pattern.closest[0].reason.target_node == "exp"
    lines = format_explanations([pattern], top=1)
    assert any("1. 'relu2': depth 2/4: op type" in line for line in lines)
    assert not any("relu1" in line for line in lines)
    data = pattern.as_dict(top=1)
    assert [c["candidate"] for c in data["closest"]] == ["relu2"]
    assert data["not_rewritten"] == 2 and data["rewrite_count"] == 1


def test_node_as_anchor_and_as_non_anchor(passes) -> None:
    graph = _graph([helper.make_node("Abs", ["x"], ["a"], name="abs"),
                    helper.make_node("Neg", ["a"], ["n"], name="neg"),
                    helper.make_node("Relu", ["n"], ["y"], name="relu"),
                    helper.make_node("Relu", ["x"], ["z"], name="other")],
                   [("y", [2, 4]), ("z", [2, 4])])
    (pattern,) = explain(passes["ReluNeg"], graph, node="relu")
    assert pattern.node == "relu" and pattern.note is None
    assert [(c.candidate, c.role) for c in pattern.candidates] == [("relu", "anchor")]
    (pattern,) = explain(passes["ReluNeg"], graph, node="neg")
    assert [(c.candidate, c.role) for c in pattern.candidates] == [("relu", "non-anchor")]
    assert pattern.note is not None and "'neg' (Neg) is not a candidate" in pattern.note
    assert "1 candidate(s) bind it" in pattern.note
    (pattern,) = explain(passes["ReluNeg"], graph, node="abs")
    assert pattern.candidates == []  # a pattern input's producer is not part of a match
    assert pattern.note is not None and "no candidate's closest match binds it" in pattern.note
    with pytest.raises(GraphError, match="no node named 'nope'"):
        explain(passes["ReluNeg"], graph, node="nope")


def test_missing_shapes_make_meet_requirements_undecided(passes) -> None:
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"], name="mm"),
             helper.make_node("Add", ["mm", "b"], ["y"], name="add")]
    proto = helper.make_model(
        helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F32, [2, 4])],
                          [helper.make_tensor_value_info("y", F32, None)],
                          [const("w", np.eye(4)), const("b", [0.5, 1, 2, 3])]),
        opset_imports=[helper.make_opsetid("", 17)])
    graph = ge.graph.load(proto)  # no shape inference: the MatMul's output is unknown
    cand = _one(explain(passes["NeedsRank2"], graph), "add")
    assert cand.reason is not None and cand.reason.kind == "meet_requirements"
    (warning,) = cand.warnings
    assert "shape or type information is missing" in warning
    assert "output 0 of 'mm'" in warning
    # typed, the same check is decided (and passes): no warning
    typed = load(onnx.shape_inference.infer_shapes(proto))
    assert infer_shapes_for_explain(typed) is None
    assert _one(explain(passes["NeedsRank2"], typed), "add").rewritten


def test_no_candidate_and_the_graph_is_unchanged(passes) -> None:
    graph = _graph([helper.make_node("Abs", ["x"], ["y"], name="abs")], [("y", [2, 4])])
    before = graph.mutation_count
    (pattern,) = explain(passes["ReluNeg"](), graph)
    assert pattern.candidates == []
    assert pattern.note is not None and "has no Relu node" in pattern.note
    assert graph.mutation_count == before


def test_rejects_what_is_not_a_pattern_pass() -> None:
    from ge.passes import FusionBasePass

    class Plain(FusionBasePass):
        def run(self, graph, context):
            return True

    with pytest.raises(TypeError, match="PatternFusionPass"):
        explain(Plain, ge.graph.Graph("g"))


@pytest.mark.builtin_passes
@pytest.mark.parametrize("name", ["vit_tiny", "distilbert_tiny", "t5_encoder_tiny",
                                  "mobilenet_like_bn", "gelu_mlp_opset20"])
def test_builtin_passes_on_real_models_agree_with_find_matches(name: str) -> None:
    """Every refusal of the matcher is explained by a named check, and the explained rewrites
    are exactly what `find_matches` finds."""
    from ge.compiler.builtin import BUILTIN_PASSES
    from ge.es.opset import opset_scope
    from ge.passes.base import PatternFusionPass
    from model_paths import shared_model

    graph = ge.graph.load(shared_model(name))
    assert infer_shapes_for_explain(graph) is None
    for cls in BUILTIN_PASSES:
        if not issubclass(cls, PatternFusionPass):
            continue
        explained = explain(cls, graph, subgraphs=False)
        kinds = {c.reason.kind for e in explained for c in e.candidates if c.reason}
        assert "unexplained" not in kinds, (cls.__name__, kinds)
        rewrites = [c.matched_nodes for e in explained for c in e.rewrites]
        with opset_scope(graph.opset_imports):
            found = [[n.name for n in m.nodes] for m in find_matches(cls, graph)]
        assert rewrites == found, cls.__name__


def test_an_attribute_default_without_a_schema_is_a_warning(write) -> None:
    path = write("plugins/custom_k.py", CUSTOM)
    report = PluginLoader().load_paths([path], parse_options({}))
    (plugin,) = report.plugins
    (descriptor,) = plugin.descriptors
    nodes = [helper.make_node("MyOp", ["x"], ["y"], name="target", domain="my.ops")]
    proto = helper.make_model(
        helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F32, [2])],
                          [helper.make_tensor_value_info("y", F32, [2])]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("my.ops", 1)])
    graph = ge.graph.load(proto)
    cand = _one(explain(descriptor.cls, graph), "target")
    assert cand.reason is not None and cand.reason.kind == "attribute"
    assert cand.reason.details == {"name": "k", "expected": 1, "found": None}
    assert "target node 'target' has it unset" in cand.reason.message
    (warning,) = cand.warnings
    assert "the schema of my.ops.MyOp is not known" in warning


def test_a_refusal_on_untyped_values_says_how_to_type_them(passes) -> None:
    """explain() on a graph nobody typed (the Python API; the CLI infers first): a refusal
    reading unknown descs is flagged, naming the values and ge.ops.infer_shapes; one that
    read none (it refuses for a reason of its own) is not."""
    nodes = [helper.make_node("Neg", ["x"], ["n"], name="neg"),
             helper.make_node("Relu", ["n"], ["y"], name="relu")]
    graph = ge.graph.load(helper.make_model(  # no value_info: 'n' is untyped
        helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F32, [2, 4])],
                          [helper.make_tensor_value_info("y", F32, [2, 4])]),
        opset_imports=[helper.make_opsetid("", 17)]))
    assert _one(explain(passes["Refused"], graph), "relu").warnings == []
    cand = _one(explain(passes["LateFloatOnly"], graph), "relu")
    assert cand.warnings and cand.warnings[0].startswith(
        "meet_requirements returned False while shape or type information is missing "
        "(output 0 of ")
    assert cand.warnings[0].endswith(
        "the check may not have been decidable (ge.ops.infer_shapes types a graph, as `ge "
        "passes explain` does first; what stays unknown after it, inference could not type)")


def test_a_before_infer_shape_refusal_on_untyped_values_says_a_compilation_sees_them_so(
        passes) -> None:
    """A BeforeInferShape pass reading a dtype nobody has inferred yet refuses in a
    compilation too: explained on the model as loaded, the refusal's warning says so (and
    not that the check was undecidable); ge.testing.find_matches, which runs the pass on the
    model as loaded, agrees. Inferred first, the same hook would accept: what explain
    wrongly showed before it followed the pass's stage."""
    from ge.testing import find_matches as testing_find_matches

    nodes = [helper.make_node("Neg", ["x"], ["n"], name="neg"),
             helper.make_node("Relu", ["n"], ["y"], name="relu")]
    proto = helper.make_model(  # no value_info: 'n' is untyped until inference
        helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F32, [2, 4])],
                          [helper.make_tensor_value_info("y", F32, [2, 4])]),
        opset_imports=[helper.make_opsetid("", 17)])
    cand = _one(explain(passes["EarlyFloatOnly"], ge.graph.load(proto)), "relu")
    assert cand.reason is not None and cand.reason.kind == "meet_requirements"
    (warning,) = cand.warnings
    assert warning == (
        "meet_requirements returned False while shape or type information is missing "
        "(output 0 of 'neg', input 0 of 'relu', output 0 of 'relu' unknown): the pass runs at "
        "BeforeInferShape, before shape inference, so a compilation gives it these values "
        "untyped too (only the types and shapes the model file declares are known then); a "
        "hook that reads them belongs at AfterInferShape")
    assert testing_find_matches(passes["EarlyFloatOnly"], proto) == []
    # told another stage (a class registered at two), the warning is that stage's
    cand = _one(explain(passes["EarlyFloatOnly"], ge.graph.load(proto),
                        stage="AfterInferShape"), "relu")
    (warning,) = cand.warnings
    assert warning.endswith("unknown): the check may not have been decidable "
                            "(ge.ops.infer_shapes types a graph, as `ge passes explain` does "
                            "first; what stays unknown after it, inference could not type)")
    inferred = ge.graph.load(proto)
    assert infer_shapes_for_explain(inferred) is None
    assert _one(explain(passes["EarlyFloatOnly"], inferred), "relu").rewritten
    # the model's value_info types 'n' as loaded: a compilation's pass reads it there too
    declared = ge.graph.load(onnx.shape_inference.infer_shapes(proto))
    assert _one(explain(passes["EarlyFloatOnly"], declared), "relu").rewritten
    assert len(testing_find_matches(passes["EarlyFloatOnly"], declared)) == 1


def test_a_node_of_an_enclosing_graph_is_said_to_be_outside_the_matched_graph(passes) -> None:
    """Trial C: Relu in an If branch reading a Neg of the main graph; the matcher refuses
    the Neg (a pattern matches within one graph), which was "no check explains it"."""
    vi = helper.make_tensor_value_info
    then = helper.make_graph([helper.make_node("Relu", ["n"], ["t"], name="inner_relu")],
                             "then_g", [], [vi("t", F32, [2, 4])])
    other = helper.make_graph([helper.make_node("Abs", ["n"], ["e"], name="inner_abs")],
                              "else_g", [], [vi("e", F32, [2, 4])])
    proto = helper.make_model(helper.make_graph(
        [helper.make_node("Neg", ["x"], ["n"], name="root_neg"),
         helper.make_node("If", ["c"], ["y"], name="cond_if", then_branch=then,
                          else_branch=other)], "g",
        [vi("x", F32, [2, 4]), vi("c", onnx.TensorProto.BOOL, [])], [vi("y", F32, [2, 4])]),
        opset_imports=[helper.make_opsetid("", 17)])
    graph = load(proto)
    assert infer_shapes_for_explain(graph) is None
    body = [e for e in explain(passes["ReluNeg"], graph) if e.graph == "then_g"]
    (cand,) = body[0].candidates
    assert cand.reason is not None and cand.reason.kind == "enclosing_graph"
    assert cand.reason.message == (
        "target node 'root_neg' is a node of graph 'g', which encloses the graph matched "
        "(graph 'then_g', then_branch of If node 'cond_if'), read by it from there (input 0 "
        "of 'inner_relu'): a pattern matches within one graph, so pattern node 'Neg' (Neg) "
        "cannot stand for it; such a value can only be an input of the pattern")
    assert cand.reason.details == {"graph": "g", "matched_graph": "then_g"}
