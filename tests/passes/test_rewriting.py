"""Pattern and decompose passes through the compiler: hook errors and GE's messages (E13028,
graph rolled back), invalid patterns, DecomposePass boundaries, SubgraphRewriter,
infer_shape, can_fuse / report_fuse, the public names."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from matcher_helpers import (
    assert_same_outputs,
    const,
    load,
    model,
    op_counts,
    outputs_of,
    rewrite,
)
from onnx import helper

import ge.es.all as es
import ge.passes
from ge.compiler import compile_graph
from ge.errors import PassRunError, PatternError
from ge.es import GraphBuilder
from ge.graph import DataType, Graph, TensorDesc
from ge.passes import (
    FuseCheckResult,
    PassContext,
    PatternFusionPass,
    SubgraphBoundary,
    SubgraphInput,
    SubgraphOutput,
    SubgraphRewriter,
    can_fuse,
    create_replacement,
    infer_shape,
    pattern,
    report_fuse,
)
from ge.passes.status import FAILED

X = [("x", [2, 4])]
Y = [("y", [2, 4])]

HEADER = """
import ge.es.all as es
from ge.es import GraphBuilder
from ge.passes import (DecomposePass, PatternFusionPass, create_pattern, pattern,
                       register_decompose_pass, register_fusion_pass)
"""


def _neg_neg():
    return model([helper.make_node("Neg", ["x"], ["n"], name="n1"),
                  helper.make_node("Neg", ["n"], ["y"], name="n2")], X, Y)


def _compile_fails(write, source: str, graph: Graph) -> PassRunError:
    path = write("plugin.py", HEADER + source)
    before = graph.to_onnx().SerializeToString()
    with pytest.raises(PassRunError) as info:
        compile_graph(graph, pass_paths=[path])
    assert info.value.code == "E13028"
    assert graph.to_onnx().SerializeToString() == before  # rolled back
    return info.value


# -- hook errors and GE's messages --------------------------------------------------------------
PATTERN_PASS = """
@register_fusion_pass(name="P", stage="BeforeInferShape")
class P(PatternFusionPass):
    @pattern
    def twice(self, inputs):
        return es.Neg(es.Neg(inputs[0]))
{body}
"""


@pytest.mark.parametrize(("body", "message", "line"), [
    ("    def meet_requirements(self, match_result):\n        raise ValueError('bad check')\n",
     "ValueError: bad check", 13),
    # a bad result is blamed on the hook's def line (not the class statement)
    ("    def replacement(self, inputs):\n        return 42\n",
     "Expression-style replacement must return a TensorHolder or a non-empty list/tuple of "
     "TensorHolder, got int.", 12),
    # None is GE users' way to say "skip": the message says how to leave a match alone
    ("    def replacement(self, inputs):\n        return None\n",
     "Reason: TypeError: Expression-style replacement must return a TensorHolder or a "
     "non-empty list/tuple of TensorHolder, got None: a replacement cannot skip its match; "
     "to leave a match alone, return False from meet_requirements(self, match_result), "
     "which is asked first (its MatchResult gives the matched tensors: "
     "match_result.get_captured_tensor(i)).", 12),
    ("    def replacement(self, match_result):\n        return 42\n",
     "TypeError: PatternFusionPass.replacement must return ge.graph.Graph", 12),
    # trial U: a legacy replacement returning its builder's output, not the built graph
    ("    def replacement(self, match_result):\n"
     "        return es.Neg(GraphBuilder('r').create_input(0))\n",
     "TypeError: PatternFusionPass.replacement must return ge.graph.Graph, got TensorHolder, "
     "the output of a GraphBuilder: return the graph it builds, "
     "builder.build_and_reset([output, ...])", 12),
    ("    def replacement(self, match_result):\n        raise KeyError('boom')\n",
     "KeyError: 'boom'", 13),
    # the engine cannot put it in place: blamed on the hook that built it
    ("    def replacement(self, inputs):\n        return es.Neg(inputs[0]), es.Abs(inputs[0])\n",
     "RewriteError: [GE1502] the replacement has 2 output(s) but the region it replaces has 1 "
     "(pattern 'P_twice_pattern', matched at Neg node 'n2')", 12),
    ("    def replacement(self, match_result):\n        pass\n",
     "PatternFusionPass.replacement must return ge.graph.Graph, got None (a missing return?); "
     "a replacement cannot skip its match: to leave a match alone, return False from "
     "meet_requirements, which is asked first.", 12),
    # hooks asked about the graph may only read it: an edit would be neither checked as a
    # rewrite nor counted (the pass reported not_changed and wrote another model)
    ("    def meet_requirements(self, match_result):\n"
     "        neg = match_result.get_matched_nodes()[0]\n"
     "        neg.owner_graph.add_node('Relu', num_inputs=1)\n"
     "        return False\n",
     "RewriteError: [GE1502] meet_requirements changed graph 'g': first, it added Relu node ",
     12),
    ("    def replacement(self, match_result):\n"
     "        match_result.get_matched_nodes()[0].owner_graph.add_node('Relu', num_inputs=1)\n"
     "        return None\n",
     "RewriteError: [GE1502] replacement changed graph 'g': first, it added Relu node ", 12),
])
def test_hook_failures_fail_the_pass_and_roll_back(write, body, message, line) -> None:
    graph = load(_neg_neg())
    err = _compile_fails(write, PATTERN_PASS.format(body=body), graph)
    assert err.pass_name == "P" and err.stage == "BeforeInferShape"
    assert message in err.message
    if line is not None:
        assert err.location.line == line


def test_a_hook_failure_names_the_match_it_failed_on(write) -> None:
    """Of several matches, the one whose hook raised: its nodes are the error's (a user
    trial could not tell which of two Divs a replacement failed on)."""
    body = ("    def meet_requirements(self, match_result):\n"
            "        if match_result.get_matched_nodes()[0].name == 'n3':\n"
            "            raise ValueError('not this one')\n"
            "        return True\n\n"
            "    def replacement(self, inputs):\n"
            "        return inputs[0]\n")
    graph = load(model([helper.make_node("Neg", ["x"], ["n"], name="n1"),
                        helper.make_node("Neg", ["n"], ["a"], name="n2"),
                        helper.make_node("Neg", ["a"], ["b"], name="n3"),
                        helper.make_node("Neg", ["b"], ["y"], name="n4")], X, Y))
    err = _compile_fails(write, PATTERN_PASS.format(body=body), graph)
    assert "ValueError: not this one" in err.message
    assert list(err.nodes) == ["n3", "n4"]
    assert list(err.details()["nodes"]) == ["n3", "n4"]


def test_a_decompose_hook_failure_names_its_node(write) -> None:
    source = """
@register_decompose_pass(name="D", stage="BeforeInferShape", op_types=["Neg"])
class D(DecomposePass):
    def meet_requirements(self, node):
        return True

    def replacement(self, node):
        raise ValueError(f"cannot decompose {node.name}")
"""
    err = _compile_fails(write, source, load(_neg_neg()))
    assert "ValueError: cannot decompose n1" in err.message and list(err.nodes) == ["n1"]


@pytest.mark.parametrize(("patterns", "message"), [
    ("'Neg'", "PatternFusionPass.patterns must return an iterable of Pattern or Graph"),
    ("42", "PatternFusionPass.patterns must return an iterable of Pattern or Graph"),
    ("[1]", "PatternFusionPass.patterns must return Pattern or Graph objects"),
])
def test_patterns_results_are_checked_with_ge_messages(write, patterns, message) -> None:
    source = f"""
@register_fusion_pass(name="P", stage="BeforeInferShape")
class P(PatternFusionPass):
    def patterns(self):
        return {patterns}
"""
    err = _compile_fails(write, source, load(_neg_neg()))
    assert message in err.message
    lines = (HEADER + source).splitlines()
    assert err.location.line == 1 + lines.index("    def patterns(self):")


@pytest.mark.parametrize(("result", "message"), [
    ("'Relu'", "TypeError: Expression-style patterns must return a TensorHolder"),
    ("[]", "TypeError: Expression-style patterns must return a TensorHolder"),
])
def test_a_pattern_methods_bad_result_is_blamed_on_the_method(write, result, message) -> None:
    source = f"""
@register_fusion_pass(name="P", stage="BeforeInferShape")
class P(PatternFusionPass):
    @pattern
    def wrong(self, inputs):
        return {result}
"""
    err = _compile_fails(write, source, load(_neg_neg()))
    assert message in err.message
    lines = (HEADER + source).splitlines()
    assert err.location.line == 1 + lines.index("    @pattern")  # its first decorator


def test_patterns_returning_none_is_no_pattern(write) -> None:
    path = write("plugin.py", HEADER + """
@register_fusion_pass(name="P", stage="BeforeInferShape")
class P(PatternFusionPass):
    def patterns(self):
        return None
""")
    report = compile_graph(load(_neg_neg()), pass_paths=[path])
    assert report.records[0].outcome.value == "not_changed"


@pytest.mark.parametrize(("build", "what"), [
    ("x = b.create_input(0); y = b.create_input(1); out = [es.Neg(x)]",
     "input 'input_1' (Data) does not lead to an output"),
    ("x = b.create_input(0); r = es.Relu(x); n = es.Neg(x); "
     "b.add_control_dependency(n, [r]); out = [n]", "has a control edge"),
    ("x = b.create_input(0); es.Relu(x); out = [es.Neg(x)]", "does not lead to an output"),
])
def test_invalid_patterns_are_rejected_naming_the_pattern(write, build, what) -> None:
    source = f"""
@register_fusion_pass(name="P", stage="BeforeInferShape")
class P(PatternFusionPass):
    def patterns(self):
        b = GraphBuilder("my_pattern")
        {build}
        return [create_pattern(b.build_and_reset(out))]

    def replacement(self, match_result):
        raise AssertionError("never reached")
"""
    err = _compile_fails(write, source, load(_neg_neg()))
    assert "PatternError" in err.message
    assert "pattern 'my_pattern' cannot be matched" in err.message and what in err.message


def test_a_pattern_error_carries_its_code() -> None:
    from ge.passes.config import PatternMatcherConfig
    from ge.passes.matcher import compile_pattern
    from ge.passes.pattern import create_pattern

    builder = GraphBuilder("lonely")
    x = builder.create_input(0)
    pattern = create_pattern(builder.build_and_reset([x]))
    with pytest.raises(PatternError) as info:
        compile_pattern(pattern, PatternMatcherConfig())
    assert info.value.code == "GE1501"
    assert "output 0 is the pattern input 'input_0' itself" in info.value.message


def test_a_replacement_with_too_few_inputs_fails_clearly(write) -> None:
    source = """
@register_fusion_pass(name="P", stage="BeforeInferShape")
class P(PatternFusionPass):
    @pattern
    def add(self, inputs):
        return inputs[0] + inputs[1]

    def replacement(self, match_result):
        b = GraphBuilder("short")
        return b.build_and_reset([es.Neg(b.create_input(0))])
"""
    graph = load(model([helper.make_node("Add", ["x", "z"], ["y"])], [*X, ("z", [2, 4])], Y))
    err = _compile_fails(write, source, graph)
    assert "RewriteError" in err.message
    assert "has 1 input(s) but the region it replaces has 2" in err.message


def test_a_replacement_that_keeps_matching_itself_is_stopped(write) -> None:
    source = """
@register_fusion_pass(name="P", stage="BeforeInferShape")
class P(PatternFusionPass):
    @pattern
    def relu(self, inputs):
        return es.Relu(inputs[0])

    def replacement(self, inputs):
        return es.Relu(inputs[0])
"""
    graph = load(model([helper.make_node("Relu", ["x"], ["y"])], X, Y))
    err = _compile_fails(write, source, graph)
    assert "its replacement keeps matching the pattern" in err.message


def test_the_pass_name_survives_save_and_load(tmp_path, write) -> None:
    path = write("plugin.py", HEADER + PATTERN_PASS.format(
        body="    def replacement(self, inputs):\n        return es.Identity(inputs[0])\n"))
    proto = _neg_neg()
    graph = load(proto)
    report = compile_graph(graph, pass_paths=[path])
    assert report.records[0].rewrites == 1 and report.rewrites_by_pass() == {"P": 1}
    graph.save(tmp_path / "out.onnx")
    again = ge.graph.load(tmp_path / "out.onnx")
    (identity,) = again.nodes_of_type("Identity")
    assert identity.get_metadata()["ge.origin_pass"] == "P"
    assert_same_outputs(proto, again)


# -- DecomposePass ------------------------------------------------------------------------------
DECOMPOSE = """
@register_decompose_pass(name="{name}", stage="BeforeInferShape", op_types={op_types})
class {name}(DecomposePass):
    def replacement(self, node):
        b = GraphBuilder("square")
        x = b.create_input(0)
        return b.build_and_reset([es.Mul(es.Abs(x), es.Abs(x))])
"""


def test_decompose_takes_one_input_per_distinct_producer(write) -> None:
    path = write("plugin.py", HEADER + DECOMPOSE.format(name="D", op_types=["Mul"]))
    proto = model([helper.make_node("Mul", ["x", "x"], ["y"])], X, Y)
    graph = load(proto)
    report = compile_graph(graph, pass_paths=[path])
    assert report.records[0].rewrites == 1  # Mul(x, x) has one boundary input
    assert op_counts(graph) == {"Mul": 1, "Abs": 2}
    assert_same_outputs(proto, graph)


def test_decompose_counts_every_node_asked_about_as_a_match(write) -> None:
    """M counts the matches found, refused ones too (as a pattern pass's): of the two Gelus
    of the exported MLP, meet_requirements refuses the tanh one, so 2 matches, 1 rewrite."""
    from model_paths import shared_model

    source = """
@register_decompose_pass(name="D", stage="AfterOriginGraphOptimize", op_types=["Gelu"])
class D(DecomposePass):
    def meet_requirements(self, node):
        return node.get_attr("approximate") == "none"

    def replacement(self, node):
        b = GraphBuilder("gelu")
        x = b.create_input(0)
        return b.build_and_reset([x * 0.5 * (es.Erf(x / 1.4142135623730951) + 1.0)])
"""
    graph = ge.graph.load(shared_model("gelu_mlp_opset20"))
    report = compile_graph(graph, pass_paths=[write("plugin.py", HEADER + source)])
    (record,) = [r for r in report.records if r.pass_name == "D"]
    assert (record.matches, record.rewrites) == (2, 1)
    (kept,) = graph.nodes_of_type("Gelu")
    assert kept.get_attr("approximate") == "tanh"
    assert len(graph.nodes_of_type("Erf")) == 1


def test_decompose_op_types_belong_to_the_registration(write) -> None:
    source = HEADER + """
class Twice(DecomposePass):
    def replacement(self, node):
        b = GraphBuilder("neg")
        return b.build_and_reset([es.Neg(es.Neg(es.Neg(b.create_input(0))))])

register_decompose_pass(name="OnNeg", stage="BeforeInferShape", op_types=["Neg"])(Twice)
register_decompose_pass(name="OnRelu", stage="BeforeInferShape", op_types=["Relu"])(Twice)
"""
    path = write("plugin.py", source)
    proto = model([helper.make_node("Relu", ["x"], ["r"]),
                   helper.make_node("Neg", ["r"], ["y"])], X, Y)
    graph = load(proto)
    report = compile_graph(graph, pass_paths=[path])
    by_name = {r.pass_name: r.rewrites for r in report.records}
    # OnNeg replaces the one Neg by three; OnRelu (registered second) still sees Relu only.
    assert by_name == {"OnNeg": 1, "OnRelu": 1}


GELU_DECOMPOSE = """
@register_decompose_pass(name="D", stage="BeforeInferShape", op_types={op_types})
class D(DecomposePass):
    def replacement(self, node):
        b = GraphBuilder("gelu")
        x = b.create_input(0)
        return b.build_and_reset([x * 0.5 * (es.Erf(x / 1.4142135623730951) + 1.0)])
"""


def _two_gelus() -> onnx.ModelProto:
    """ONNX's Gelu (opset 20) feeding onnxruntime's com.microsoft Gelu: one name, two
    operators."""
    nodes = [helper.make_node("Gelu", ["x"], ["a"], name="onnx_gelu"),
             helper.make_node("Gelu", ["a"], ["y"], name="ms_gelu", domain="com.microsoft")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [2, 4])],
                              [helper.make_tensor_value_info("y", 1, [2, 4])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20),
                                                    helper.make_opsetid("com.microsoft", 1)])
    proto.ir_version = 9
    return proto


@pytest.mark.parametrize(("op_types", "decomposed", "kept"), [
    (["Gelu"], "onnx_gelu", ("Gelu", "com.microsoft")),  # ONNX's operator of that name
    (["ai.onnx.Gelu"], "onnx_gelu", ("Gelu", "com.microsoft")),
    (["com.microsoft.Gelu"], "ms_gelu", ("Gelu", "")),  # that domain's only
])
def test_decompose_op_types_name_onnx_operators_or_a_domain_s(
        write, op_types: list[str], decomposed: str, kept: tuple[str, str]) -> None:
    proto = _two_gelus()
    graph = load(proto)
    report = compile_graph(graph, pass_paths=[write("plugin.py", HEADER + GELU_DECOMPOSE.format(
        op_types=op_types))])
    (record,) = [r for r in report.records if r.pass_name == "D"]
    assert (record.matches, record.rewrites) == (1, 1)
    assert not graph.has_node(decomposed)
    (left,) = graph.nodes_of_type("Gelu", None)
    assert (left.type, left.domain) == kept
    assert len(graph.nodes_of_type("Erf")) == 1
    assert_same_outputs(proto, graph)


def test_decompose_of_a_custom_operator_finds_it_in_its_domain(write) -> None:
    """GE's samples name a custom operator by its name alone (`AddCustom`); ONNX has no
    operator of that name, so the pass is offered it in whatever domain the model puts it."""
    source = HEADER + """
@register_decompose_pass(name="D", stage="BeforeInferShape", op_types=["AddCustom"])
class D(DecomposePass):
    def replacement(self, node):
        b = GraphBuilder("add")
        x, y = b.create_inputs(2)
        return b.build_and_reset([es.Add(x, y)])
"""
    nodes = [helper.make_node("AddCustom", ["x", "z"], ["s"], name="custom", domain="my.ops"),
             helper.make_node("Relu", ["s"], ["y"])]
    graph_proto = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, 1, [2, 4]) for n in ("x", "z")],
        [helper.make_tensor_value_info("y", 1, [2, 4])])
    proto = helper.make_model(graph_proto, opset_imports=[helper.make_opsetid("", 17),
                                                          helper.make_opsetid("my.ops", 1)])
    graph = load(proto)
    report = compile_graph(graph, pass_paths=[write("plugin.py", source)])
    (record,) = [r for r in report.records if r.pass_name == "D"]
    assert record.rewrites == 1 and not graph.nodes_of_type("AddCustom", None)
    x, z = np.random.default_rng(0).standard_normal([2, 2, 4]).astype(np.float32)
    (got,) = outputs_of(graph.to_onnx(), {"x": x, "z": z})
    np.testing.assert_allclose(got, np.maximum(x + z, 0), rtol=1e-6)


def test_decompose_replacement_must_be_a_graph(write) -> None:
    source = """
@register_decompose_pass(name="D", stage="BeforeInferShape", op_types=["Neg"])
class D(DecomposePass):
    def replacement(self, node):
        return "graph"
"""
    err = _compile_fails(write, source, load(_neg_neg()))
    assert "TypeError: DecomposePass.replacement must return ge.graph.Graph, got str" in (
        err.message)
    assert err.location is not None and err.location.line == 9  # the hook's def line


def test_decompose_replacement_returning_none_says_how_to_skip_a_node(write) -> None:
    source = """
@register_decompose_pass(name="D", stage="BeforeInferShape", op_types=["Neg"])
class D(DecomposePass):
    def replacement(self, node):
        if node.name == "n1":
            return None
        b = GraphBuilder("neg")
        return b.build_and_reset([es.Neg(b.create_input(0))])
"""
    err = _compile_fails(write, source, load(_neg_neg()))
    assert err.message.endswith(
        "Reason: TypeError: DecomposePass.replacement must return ge.graph.Graph, got None (a "
        "missing return?); a replacement cannot skip its node: to leave a node alone, return "
        "False from meet_requirements, which is asked first.")
    assert err.location is not None and err.location.line == 9


def test_a_pattern_that_cannot_match_is_blamed_on_its_method(write) -> None:
    source = """
@register_fusion_pass(name="P", stage="BeforeInferShape")
class P(PatternFusionPass):
    @pattern
    def fine(self, inputs):
        return es.Neg(inputs[0])

    @pattern
    def dangling(self, inputs):
        unused = es.Abs(inputs[0])
        return es.Neg(inputs[0])

    def replacement(self, inputs):
        return es.Neg(inputs[0])
"""
    err = _compile_fails(write, source, load(_neg_neg()))
    assert "PatternError: [GE1501] pattern 'P_dangling_pattern' cannot be matched" in (
        err.message)
    assert err.location is not None and err.location.line == 13  # its @pattern line


def test_find_matches_blames_a_pattern_that_cannot_match_on_its_method(write) -> None:
    """find_matches compiled the patterns itself: the GE1501 named no line, where a
    compilation names the `@pattern` method (stop 51's review)."""
    import importlib.util

    source = HEADER + """
class P(PatternFusionPass):
    @pattern
    def dangling(self, inputs):
        unused = es.Abs(inputs[0])
        return es.Neg(inputs[0])
"""
    spec = importlib.util.spec_from_file_location("dangling_plugin", write("plugin.py", source))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(PatternError) as info:
        ge.passes.find_matches(module.P, load(_neg_neg()))
    err = info.value
    assert "pattern 'P_dangling_pattern' cannot be matched" in err.message
    assert err.location is not None and err.location.line == 8  # its @pattern line
    assert str(err).endswith(f"(at {err.location})")


def test_decompose_hooks_may_only_read_the_graph(write) -> None:
    source = """
@register_decompose_pass(name="D", stage="BeforeInferShape", op_types=["Neg"])
class D(DecomposePass):
    def meet_requirements(self, node):
        node.set_metadata("seen", "yes")
        return False
"""
    graph = load(_neg_neg())
    err = _compile_fails(write, source, graph)
    assert ("meet_requirements changed graph 'g': first, it made a change (of metadata, a "
            "name or an anchor's attribute) at ") in err.message
    assert ".py:10; it may only read the graph" in err.message  # (the set_metadata line)
    assert err.location is not None and err.location.line == 9
    assert all(not n.get_metadata() for n in graph.get_all_nodes())


def test_decompose_with_several_outputs_relinks_each() -> None:
    from ge.passes import DecomposePass

    class SplitByHand(DecomposePass):
        def replacement(self, node, context=None):
            b = GraphBuilder("halves")
            x = b.create_input(0)
            left = es.Slice(x, np.array([0]), np.array([2]), np.array([1]))
            right = es.Slice(x, np.array([2]), np.array([4]), np.array([1]))
            return b.build_and_reset([left, right])

    proto = model([helper.make_node("Split", ["x"], ["a", "b"], axis=1, num_outputs=2),
                   helper.make_node("Sub", ["a", "b"], ["y"])], X, [("y", [2, 2])], opset=18)
    graph = load(proto)
    rewrite(SplitByHand(), graph, kind="decompose", op_types=["Split"])
    assert op_counts(graph) == {"Slice": 2, "Sub": 1}
    assert_same_outputs(proto, graph)


# -- SubgraphRewriter -----------------------------------------------------------------------------
def _concat_relu():
    return model([helper.make_node("Concat", ["x", "z"], ["c"], axis=1, name="concat"),
                  helper.make_node("Relu", ["c"], ["y"], name="relu")],
                 [*X, ("z", [2, 4])], [("y", [2, 8])])


def _relu_then_concat() -> Graph:
    b = GraphBuilder("relus")
    ins = b.create_inputs(2)
    return b.build_and_reset([es.Concat(es.Relu(ins[0]), es.Relu(ins[1]), axis=1)])


def _boundary(graph: Graph) -> SubgraphBoundary:
    concat, relu = graph.find_node_by_name("concat"), graph.find_node_by_name("relu")
    boundary = SubgraphBoundary()
    assert boundary.add_input(0, SubgraphInput([(concat, 0)])) == 0
    assert boundary.add_input(1, SubgraphInput([(concat, 1)])) == 0
    assert boundary.add_output(0, SubgraphOutput(relu, 0)) == 0
    return boundary


def test_subgraph_rewriter_replaces_a_boundary() -> None:
    proto = _concat_relu()
    graph = load(proto)
    assert SubgraphRewriter.replace(_boundary(graph), _relu_then_concat()) == 0
    assert op_counts(graph) == {"Relu": 2, "Concat": 1}
    assert_same_outputs(proto, graph)


def test_subgraph_rewriter_with_context_reports_the_fusion() -> None:
    graph = load(_concat_relu())
    context = PassContext("MoveRelu")
    assert SubgraphRewriter.replace(_boundary(graph), _relu_then_concat(),
                                    context=context) is None
    assert context._fusions == 1
    assert {n.get_metadata().get("ge.origin_pass") for n in graph.nodes_of_type("Relu")} == {
        "MoveRelu"}



def test_replacement_nodes_that_reach_no_output_are_not_copied_in() -> None:
    """A leftover expression of a replacement's builder (computed, never returned) would
    compute nothing the graph reads: dropped, in a copied-in replacement as in one built in
    place, while a pattern holding such a node is refused (GE1501)."""
    proto = _concat_relu()
    graph = load(proto)
    b = GraphBuilder("relus")
    ins = b.create_inputs(2)
    es.Neg(es.Abs(ins[0]))  # a leftover
    replacement = b.build_and_reset([es.Concat(es.Relu(ins[0]), es.Relu(ins[1]), axis=1)])
    assert op_counts(replacement)["Neg"] == 1
    assert SubgraphRewriter.replace(_boundary(graph), replacement) == 0
    assert op_counts(graph) == {"Relu": 2, "Concat": 1}
    assert_same_outputs(proto, graph)

    class LeftoverInPlace(PatternFusionPass):
        @pattern
        def relu_of_concat(self, inputs):
            return es.Relu(es.Concat(inputs[0], inputs[1], axis=1))

        def replacement(self, inputs):
            es.Abs(inputs[1])  # a leftover
            return es.Concat(es.Relu(inputs[0]), es.Relu(inputs[1]), axis=1)

    graph = load(proto)
    assert rewrite(LeftoverInPlace(), graph).rewrites == 1
    assert op_counts(graph) == {"Relu": 2, "Concat": 1}
    assert_same_outputs(proto, graph)


FLATTEN_GEMM = """
import numpy as np
from ge.passes import (FusionBasePass, PassStage, SubgraphBoundary, SubgraphInput,
                       SubgraphOutput, SubgraphRewriter)


@register_fusion_pass(name="FlattenGemm", stage=PassStage.AFTER_INFER_SHAPE)
class FlattenGemm(FusionBasePass):
    \"\"\"MatMul(x, W) + b over [batch, seq, K] as a Gemm of x reshaped to [-1, K], reshaped
    back to Concat(Shape(x)[:-1], [N]): right at every size, its dims unknown to one node's
    inference.\"\"\"

    def run(self, graph, context):
        for matmul in list(graph.nodes_of_type("MatMul")):
            (add, port), = matmul.get_out_data_nodes_and_port_indexes(0)
            k, n = matmul.get_input_desc(1).get_shape().get_dims()
            builder = GraphBuilder("flatten_gemm")
            x, w, b = builder.create_inputs(3)
            gemm = es.Gemm(es.Reshape(x, np.array([-1, k], np.int64)), w, b)
            lead = es.Slice(es.Shape(x), np.array([0], np.int64), np.array([-1], np.int64))
            shape = es.Concat([lead, np.array([n], np.int64)], axis=0)
            boundary = SubgraphBoundary()
            for i, (node, index) in enumerate([(matmul, 0), (matmul, 1), (add, 1 - port)]):
                boundary.add_input(i, SubgraphInput([(node, index)]))
            boundary.add_output(0, SubgraphOutput(add, 0))
            SubgraphRewriter.replace(boundary, builder.build_and_reset([es.Reshape(gemm, shape)]),
                                     context=context)
        return True
"""


def _linear_then_layer_norm() -> onnx.ModelProto:
    """[batch, seq, 8] -> MatMul + Add -> a LayerNorm written out over the last axis."""
    rng = np.random.default_rng(3)
    make = helper.make_node
    nodes = [make("MatMul", ["x", "w"], ["mm"], name="matmul"),
             make("Add", ["mm", "b"], ["h"], name="add"),
             make("ReduceMean", ["h"], ["m"], name="mean", axes=[-1]),
             make("Sub", ["h", "m"], ["d"], name="sub"),
             make("Mul", ["d", "d"], ["d2"], name="square"),
             make("ReduceMean", ["d2"], ["v"], name="var", axes=[-1]),
             make("Add", ["v", "eps"], ["ve"], name="add_eps"),
             make("Sqrt", ["ve"], ["s"], name="sqrt"),
             make("Div", ["d", "s"], ["n"], name="div"),
             make("Mul", ["n", "gamma"], ["ng"], name="mul_gamma"),
             make("Add", ["ng", "beta"], ["y"], name="add_beta")]
    inits = [const(name, rng.standard_normal(shape))
             for name, shape in (("w", (8, 6)), ("b", 6), ("gamma", 6), ("beta", 6))]
    inits.append(const("eps", 1e-5))
    float32 = onnx.TensorProto.FLOAT
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", float32, ["batch", "seq", 8])],
        [helper.make_tensor_value_info("y", float32, ["batch", "seq", 6])], inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(proto)
    return proto


def _assert_same_at_two_sizes(proto: onnx.ModelProto, graph: Graph) -> None:
    """`graph`, saved, passes onnx's full check and computes what `proto` (an
    `_linear_then_layer_norm`) does at two sizes of its symbolic dims (onnxruntime, 1e-4)."""
    exported = graph.to_onnx()
    onnx.checker.check_model(exported, full_check=True)
    for batch, seq in ((1, 1), (3, 5)):
        feeds = {"x": np.random.default_rng(seq).standard_normal((batch, seq, 8)).astype(
            np.float32)}
        (want,), (got,) = outputs_of(proto, feeds), outputs_of(exported, feeds)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.builtin_passes
def test_a_replacements_output_keeps_the_dims_of_the_value_it_replaces(write) -> None:
    """A replacement output whose dims one node's inference cannot settle (a Reshape to a
    shape computed at run time) takes them from the output it replaces, so a later pass
    still matches there: the LayerNorm after the rewritten linear layer fuses."""
    proto = _linear_then_layer_norm()
    path = write("plugin.py", HEADER + FLATTEN_GEMM)
    graph = load(proto)
    report = compile_graph(graph, pass_paths=[path])
    assert report.rewrites_by_pass()["FlattenGemm"] == 1
    counts = op_counts(graph)
    assert counts["Gemm"] == 1 and counts["LayerNormalization"] == 1, counts
    (reshape,) = [n for n in graph.nodes_of_type("Reshape")
                  if n.get_in_data_nodes_and_port_indexes(0)[0].type == "Gemm"]
    assert reshape.get_output_desc(0).get_shape().get_dims() == ["batch", "seq", 6]
    _assert_same_at_two_sizes(proto, graph)


BY_HAND = """
import numpy as np
from ge.ops import infer_node
from ge.passes import FusionBasePass, PassStage


@register_fusion_pass(name="ReshapeByHand", stage=PassStage.AFTER_INFER_SHAPE)
class ReshapeByHand(FusionBasePass):
    \"\"\"Puts `Reshape(h, Concat(Shape(h)[:-1], [N]))` after the linear layer's Add with
    the graph API, typing each new node with infer_node as GE's passes do.\"\"\"

    def run(self, graph, context):
        add = graph.find_node_by_name("add")
        n = add.get_output_desc(0).get_shape().get_dims()[-1]
        def node(op_type, inputs, **attrs):
            made = graph.add_node(op_type, num_inputs=len(inputs), attrs=attrs or None)
            for i, (src, index) in enumerate(inputs):
                graph.add_data_edge(src, index, made, i)
            infer_node(made)
            return made
        const = lambda values: graph.add_const(np.array(values, np.int64))
        shape = node("Shape", [(add, 0)])
        lead = node("Slice", [(shape, 0), (const([0]), 0), (const([-1]), 0)])
        target = node("Concat", [(lead, 0), (const([n]), 0)], axis=0)
        reshape = node("Reshape", [(add, 0), (target, 0)])
        graph.replace_all_uses(add, 0, reshape, 0, exclude={shape, reshape})
        return True
"""


@pytest.mark.builtin_passes
def test_a_reshape_made_by_hand_to_a_computed_shape_keeps_its_dims(write) -> None:
    """One node's inference follows the shape computation (`ge.ops.shape_values`), so a
    pass editing the graph by hand leaves `[batch, seq, 6]`, not `[-1, -1, -1]`: the
    LayerNorm after it still fuses, and NoOpElimination proves the Reshape keeps the shape
    it reads (from those symbolic dims) and removes it."""
    proto = _linear_then_layer_norm()
    graph = load(proto)
    path = write("plugin.py", HEADER + BY_HAND)
    report = compile_graph(graph, pass_paths=[path], disable=["NoOpElimination"])
    assert [r.changed for r in report.records if r.pass_name == "ReshapeByHand"] == [True]
    (reshape,) = graph.nodes_of_type("Reshape")
    assert reshape.get_output_desc(0).get_shape().get_dims() == ["batch", "seq", 6]
    assert op_counts(graph)["LayerNormalization"] == 1, op_counts(graph)
    graph = load(proto)
    compile_graph(graph, pass_paths=[path])
    assert "Reshape" not in op_counts(graph) and op_counts(graph)["LayerNormalization"] == 1
    _assert_same_at_two_sizes(proto, graph)


def test_subgraph_rewriter_refuses_a_region_that_is_not_closed() -> None:
    graph = load(_concat_relu())
    relu = graph.find_node_by_name("relu")
    boundary = SubgraphBoundary()
    boundary.add_output(0, SubgraphOutput(relu, 0))  # no inputs: the region reaches x
    before = graph.to_onnx().SerializeToString()
    assert SubgraphRewriter.replace(boundary, _relu_then_concat()) == FAILED
    context = PassContext("P")
    with pytest.raises(RuntimeError, match=r"SubgraphRewriter::Replace with context failed, "
                       r"pass_name=P, status=\d+: the region reaches Data node"):
        SubgraphRewriter.replace(boundary, _relu_then_concat(), context=context)
    assert "the region reaches Data node" in context.get_error_message()
    assert graph.to_onnx().SerializeToString() == before


def test_boundary_slots_and_anchors_are_checked() -> None:
    graph = load(_concat_relu())
    concat, relu = graph.find_node_by_name("concat"), graph.find_node_by_name("relu")
    boundary = SubgraphBoundary()
    assert boundary.add_input(0, SubgraphInput([(concat, 0)])) == 0
    assert boundary.add_input(0, SubgraphInput([(concat, 1)])) == FAILED  # slot taken
    both = SubgraphInput([(concat, 0)])
    assert both.add_input(concat, 1) == FAILED  # another producer
    assert both.add_input(concat, 9) == FAILED
    with pytest.raises(RuntimeError, match=r"SubgraphInput expects iterable of \(node, index\)"):
        SubgraphInput([concat])
    output = SubgraphOutput(relu, 0)
    assert output.set_output(relu, 0) == FAILED  # set once


def test_a_producer_given_as_a_subgraph_input_pair_is_explained(caplog) -> None:
    """G2 written from GE's API docs, `(node, out_index)`: the pair (x's Data, 0) names no
    input. Built in the constructor it raises saying what a pair is and naming the readers,
    with nothing logged; through add_input (GE's status call) it is FAILED, logged once, and
    the boundary left without an anchor says why when the rewriter uses it."""
    import logging

    graph = load(_concat_relu())
    concat, relu = graph.find_node_by_name("concat"), graph.find_node_by_name("relu")
    x, _ = concat.get_in_data_nodes_and_port_indexes(0)
    readers = ("A SubgraphInput pair is (node, input_index): a node inside the region and "
               "the index of its input that reads the boundary value, not a producer and its "
               "output index (GE's API docs call the index out_index; GE reads it as an "
               "input index, and so does ge); output 0 of 'x' is read by input 0 of "
               "'concat': pass the pair of each reader inside the region, (node 'concat', 0)")
    caplog.set_level(logging.DEBUG, logger="ge")
    with pytest.raises(RuntimeError) as info:
        SubgraphInput([(x, 0)])
    assert str(info.value) == (
        f"SubgraphInput cannot take ('x', 0): node 'x' has no input 0 (it has none). {readers}")
    assert caplog.records == []  # the exception is the report
    slot = SubgraphInput()
    assert slot.add_input(x, 0) == FAILED
    assert [r.getMessage() for r in caplog.records] == [
        f"SubgraphInput.add_input: node 'x' has no input 0 (it has none). {readers}"]
    boundary = SubgraphBoundary()
    assert boundary.add_input(0, slot) == 0
    assert boundary.add_input(1, SubgraphInput([(concat, 1)])) == 0
    assert boundary.add_output(0, SubgraphOutput(relu, 0)) == 0
    before = graph.to_onnx().SerializeToString()
    context = PassContext("P")
    with pytest.raises(RuntimeError, match="SubgraphRewriter::Replace with context failed"):
        SubgraphRewriter.replace(boundary, _relu_then_concat(), context=context)
    assert context.get_error_message() == (
        "boundary input 0 has no anchor: SubgraphInput.add_input refused a pair: node 'x' has "
        f"no input 0 (it has none). {readers}")
    assert graph.to_onnx().SerializeToString() == before


def test_an_unconnected_input_pair_suggests_what_to_pass(caplog) -> None:
    """An input index that exists but reads nothing gets the same explanation; a node whose
    output is not read gets the general fix."""
    graph = load(_concat_relu())
    relu = graph.find_node_by_name("relu")
    graph.remove_edge(*relu.get_in_data_nodes_and_port_indexes(0), relu, 0)
    with pytest.raises(RuntimeError) as info:
        SubgraphInput([(relu, 0)])
    assert str(info.value).startswith(
        "SubgraphInput cannot take ('relu', 0): input 0 of node 'relu' is not connected. A "
        "SubgraphInput pair is (node, input_index): a node inside the region")
    assert str(info.value).endswith(
        "; output 0 of 'relu' is read by input 0 of 'NetOutput': pass the pair of each "
        "reader inside the region, (node 'NetOutput', 0)")
    with pytest.raises(RuntimeError) as info:
        SubgraphInput([(relu, 3)])
    assert str(info.value).endswith(
        "node 'relu' has no input 3 (it has 1 input(s)). A SubgraphInput pair is (node, "
        "input_index): a node inside the region and the index of its input that reads the "
        "boundary value, not a producer and its output index (GE's API docs call the index "
        "out_index; GE reads it as an input index, and so does ge); pass (consumer, i) for "
        "each node of the region whose input i reads the value: "
        "consumer.get_in_data_nodes_and_port_indexes(i) is its producer")
    with pytest.raises(RuntimeError, match=r"^SubgraphOutput cannot take output 4 of 'relu'$"):
        SubgraphOutput(relu, 4)
    assert caplog.records == []


# -- infer_shape, create_replacement ------------------------------------------------------------
def test_infer_shape_takes_descs_from_each_source_kind() -> None:
    proto = _concat_relu()
    graph = load(proto)
    concat = graph.find_node_by_name("concat")
    for source in (concat, _boundary(graph)):
        replacement = _relu_then_concat()
        infer_shape(replacement, source)
        (out,) = replacement.get_net_output().get_in_data_nodes()
        assert out.get_output_desc(0).get_shape().get_dims() == [2, 8]

    class Seen(ge.passes.PatternFusionPass):
        @ge.passes.pattern
        def c(self, inputs):
            return es.Concat(inputs[0], inputs[1], axis=1)

        def meet_requirements(self, match_result):
            replacement = _relu_then_concat()
            infer_shape(replacement, match_result)
            (out,) = replacement.get_net_output().get_in_data_nodes()
            self.dims = out.get_output_desc(0).get_shape().get_dims()
            return False

    instance = Seen()
    rewrite(instance, graph)
    assert instance.dims == [2, 8]


def test_infer_shape_infers_again_what_the_builder_guessed_from_placeholders() -> None:
    graph = load(_concat_relu())
    builder = GraphBuilder("scaled")
    x = builder.create_input(0)  # a float scalar until typed: the builder infers from that
    replacement = builder.build_and_reset([es.Relu(x * 2.0)])
    (out,) = replacement.get_net_output().get_in_data_nodes()
    assert out.get_output_desc(0).get_shape().get_dims() == []
    infer_shape(replacement, graph.find_node_by_name("concat"))  # input 0: x, [2, 4]
    assert out.get_output_desc(0).get_shape().get_dims() == [2, 4]
    assert out.get_output_desc(0).get_data_type() == DataType.DT_FLOAT


GROUPED_CONV = """
from ge.graph import DataType, Format, TensorDesc
from ge.passes import infer_shape


@register_decompose_pass(name="SplitGroupedConv", stage="AfterInferShape", op_types=["Conv"])
class SplitGroupedConv(DecomposePass):
    \"\"\"GE's sample P6 as GE writes it: placeholder descs on each new Conv, then
    infer_shape over the whole replacement.\"\"\"

    def meet_requirements(self, node):
        return node.get_attr("group") != 1

    def replacement(self, node):
        groups = node.get_attr("group")
        builder = GraphBuilder("replacement")
        x, w, b = builder.create_inputs(3)
        outputs = []
        for xs, ws, bs in zip(es.Split(x, axis=1, num_outputs=groups),
                              es.Split(w, axis=0, num_outputs=groups),
                              es.Split(b, axis=0, num_outputs=groups)):
            conv = es.Conv(xs, ws, bs, kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=1)
            placeholder = TensorDesc([], Format.FORMAT_NCHW, DataType.DT_FLOAT)
            snapshot = conv._get_node_snapshot()
            snapshot.update_input_desc(0, placeholder)
            snapshot.update_input_desc(1, placeholder)
            snapshot.update_output_desc(0, placeholder)
            outputs.append(conv)
        replacement = builder.build_and_reset([es.Concat(outputs, axis=1)])
        infer_shape(replacement, node)
        return replacement
"""


def test_infer_shape_drops_the_placeholder_input_descs_ge_samples_set(write) -> None:
    """Trial G: GE's grouped-conv sample sets `TensorDesc([])` on each new Conv's inputs
    before `infer_shape`, which re-infers the whole replacement in GE; ge's kept those
    input descs, and the check after the pass failed on them (E13028)."""
    rng = np.random.default_rng(0)
    proto = helper.make_model(helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", group=2,
                          kernel_shape=[3, 3], pads=[1, 1, 1, 1])], "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4, 6, 6])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4, 6, 6])],
        [const("w", rng.standard_normal((4, 2, 3, 3))), const("b", rng.standard_normal(4))]),
        opset_imports=[helper.make_opsetid("", 18)])
    graph = load(proto)
    report = compile_graph(graph, pass_paths=[write("plugin.py", HEADER + GROUPED_CONV)])
    assert report.rewrites_by_pass() == {"SplitGroupedConv": 1}
    assert op_counts(graph) == {"Split": 3, "Conv": 2, "Concat": 1}
    for conv in graph.nodes_of_type("Conv"):
        assert not conv.has_input_desc(0) and not conv.has_input_desc(1)
        assert conv.get_output_desc(0).get_shape().get_dims() == [1, 2, 6, 6]
    assert_same_outputs(proto, graph)


def test_a_copied_node_reading_untyped_values_keeps_no_placeholder_desc(write) -> None:
    path = write("plugin.py", HEADER + """
from ge.graph import DataType
from ge.passes import FusionBasePass, PassStage


@register_decompose_pass(name="SquareToPow", stage=PassStage.BEFORE_INFER_SHAPE,
                         op_types=["Mul"])
class SquareToPow(DecomposePass):
    def replacement(self, node):
        builder = GraphBuilder("pow")
        return builder.build_and_reset([es.Pow(builder.create_input(0), 2.0)])


@register_fusion_pass(name="ZProbe", stage=PassStage.BEFORE_INFER_SHAPE)
class ZProbe(FusionBasePass):
    def run(self, graph, context):
        for node in graph.nodes_of_type("Pow"):
            desc = node.get_output_desc(0)
            if (desc.get_data_type() != DataType.DT_UNDEFINED
                    or not desc.get_shape().is_unknown_rank()):
                raise AssertionError(f"Pow has desc {desc}")
        return True
""")
    # Relu's output has no value info: before inference the Mul reads an untyped value.
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Mul", ["r", "r"], ["y"], name="square")]
    proto = helper.make_model(
        helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT,
                                                                     [2, 4])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 4])]),
        opset_imports=[helper.make_opsetid("", 17)])
    graph = load(proto)
    report = compile_graph(graph, pass_paths=[path])
    assert report.rewrites_by_pass() == {"SquareToPow": 1}
    assert op_counts(graph)["Pow"] == 1
    assert_same_outputs(proto, graph)


def test_infer_shape_rejects_bad_arguments() -> None:
    graph = load(_concat_relu())
    with pytest.raises(TypeError, match=r"replacement must be a ge\.graph\.Graph"):
        infer_shape("g", graph.find_node_by_name("concat"))
    with pytest.raises(TypeError, match="source must be MatchResult, Node, or SubgraphBoundary"):
        infer_shape(_relu_then_concat(), "node")
    with pytest.raises(RuntimeError, match="replacement graph is empty"):
        infer_shape(Graph("empty"), graph.find_node_by_name("concat"))
    bad = GraphBuilder("bad")
    a, b = bad.create_inputs(2)
    mismatch = bad.build_and_reset([es.MatMul(a, b)])
    desc = TensorDesc([2, 3], data_type=DataType.DT_FLOAT)
    graph.find_node_by_name("concat").update_output_desc(0, desc)
    with pytest.raises(RuntimeError, match="infer_shape failed, replacement_graph=bad, "
                       "source_type=Node, source_name=concat"):
        infer_shape(mismatch, graph.find_node_by_name("concat"))


def test_create_replacement_checks_its_argument() -> None:
    g = _relu_then_concat()
    assert create_replacement(g) is g
    with pytest.raises(TypeError, match=r"replacement graph must be a ge\.graph\.Graph"):
        create_replacement(object())


# -- can_fuse, report_fuse ----------------------------------------------------------------------
def test_can_fuse_reasons() -> None:
    graph = load(model([helper.make_node("Relu", ["x"], ["r"], name="r"),
                        helper.make_node("Sigmoid", ["r"], ["s"], name="s"),
                        helper.make_node("Neg", ["s"], ["y"], name="n")], X, Y))
    r, s, n = (graph.find_node_by_name(k) for k in "rsn")
    assert can_fuse([r, s]) == FuseCheckResult(True, "")
    assert can_fuse(iter([r, s, n])).ok
    assert can_fuse([]) == FuseCheckResult(False, "nodes_before_fuse is empty")
    assert can_fuse([r, n]) == FuseCheckResult(False, "it will create cycle after fuse")
    other = load(_neg_neg()).find_node_by_name("n1")
    assert "different graphs" in can_fuse([r, other]).reason
    r.set_attr("_user_stream_label", "a")
    s.set_attr("_user_stream_label", "b")
    assert "_user_stream_label" in can_fuse([r, s]).reason
    with pytest.raises(TypeError, match=r"nodes must contain only ge\.graph\.Node objects"):
        can_fuse([r, "s"])


def test_report_fuse_stamps_and_counts() -> None:
    graph = load(_neg_neg())
    n1, n2 = graph.find_node_by_name("n1"), graph.find_node_by_name("n2")
    context = PassContext("Fuser")
    report_fuse([n1], [n2], context)
    assert n2.get_metadata() == {"ge.origin_pass": "Fuser", "ge.origin_nodes": "n1"}
    assert context._fusions == 1
    with pytest.raises(RuntimeError, match="Failed to report fusion result, pass_name=Fuser"):
        report_fuse([], [], context)
    assert context.get_error_message() == "nodes_before is empty"
    with pytest.raises(RuntimeError, match="the context has no pass name"):
        report_fuse([n1], [], PassContext(""))


def test_report_fuse_counts_appear_in_the_compile_report(write) -> None:
    path = write("plugin.py", """
from ge.passes import FusionBasePass, can_fuse, register_fusion_pass, report_fuse

@register_fusion_pass(name="DropNegPairs", stage="BeforeInferShape")
class DropNegPairs(FusionBasePass):
    def run(self, graph, context):
        for second in graph.nodes_of_type("Neg"):
            first, _ = second.get_in_data_nodes_and_port_indexes(0)
            if first.type != "Neg" or not can_fuse([first, second]).ok:
                continue
            source = first.get_in_data_nodes_and_port_indexes(0)
            graph.replace_all_uses(second, 0, *source)
            report_fuse([first, second], [], context)
            graph.remove_node(second)
            graph.remove_node(first)
        return True
""")
    proto = _neg_neg()
    graph = load(proto)
    report = compile_graph(graph, pass_paths=[path])
    assert report.records[0].fusions == 1
    assert report.rewrites_by_pass() == {"DropNegPairs": 1}
    assert_same_outputs(proto, graph)


# -- public names -------------------------------------------------------------------------------
def test_every_public_name_resolves() -> None:
    for name in ge.passes.__all__:
        assert getattr(ge.passes, name) is not None
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        _ = ge.passes.Nope
    import importlib

    from ge.passes import base, bootstrap, fuse_inspector, replacement

    # `ge.passes.pattern` is the decorator (GE's __all__); the module is importable by name.
    assert callable(ge.passes.pattern) and ge.passes.pattern.__name__ == "pattern"
    pattern_module = importlib.import_module("ge.passes.pattern")
    assert base.PatternOrGraph is not None and base.StatusLike is not None
    assert pattern_module.NodeIo and pattern_module.PatternInputs
    assert replacement.SubgraphRewriter and fuse_inspector.can_fuse
    assert bootstrap.get_registered_passes() == []


def test_bootstrap_lists_registered_passes_as_dicts(write) -> None:
    import importlib.util

    from ge.passes import bootstrap

    path = write("plugin.py", HEADER + DECOMPOSE.format(name="D", op_types=["Mul"]))

    spec = importlib.util.spec_from_file_location("_decompose_plugin_for_dicts", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (entry,) = bootstrap.get_registered_passes()
    assert isinstance(entry, dict)
    assert entry["pass_name"] == "D" and entry["op_types"] == ["Mul"]


def test_pattern_inputs_indexing_rules() -> None:
    from ge.passes import PatternInputs

    inputs = PatternInputs(GraphBuilder("p"))
    assert inputs[2].name == "input_2" and len(inputs.created()) == 3
    assert [h.name for h in inputs[:4]] == ["input_0", "input_1", "input_2", "input_3"]
    with pytest.raises(ValueError):
        inputs[-1]
    with pytest.raises(ValueError):
        inputs[2:]
    with pytest.raises(ValueError):
        inputs[0:4:2]
    with pytest.raises(TypeError):
        inputs["a"]
    with pytest.raises(TypeError, match=r"use inputs\[:N\]"):
        iter(inputs)


def test_saved_models_with_rewrites_pass_the_checker(tmp_path) -> None:
    from test_matcher import MatMulAddToGemm

    proto = model([helper.make_node("MatMul", ["x", "w"], ["mm"]),
                   helper.make_node("Add", ["mm", "b"], ["y"])], X, Y,
                  [const("w", np.eye(4)), const("b", [1, 2, 3, 4])])
    graph = load(proto)
    rewrite(MatMulAddToGemm(), graph)
    graph.save(tmp_path / "m.onnx")
    onnx.checker.check_model(str(tmp_path / "m.onnx"), full_check=True)


def _neg_neg_in_a_branch() -> onnx.ModelProto:
    """An If whose then-branch computes Neg(Neg(x)) of the outer x (else: Relu(x))."""
    f32 = onnx.TensorProto.FLOAT
    then_branch = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["n1"]), helper.make_node("Neg", ["n1"], ["t"])],
        "then", [], [helper.make_tensor_value_info("t", f32, [2, 4])])
    else_branch = helper.make_graph([helper.make_node("Relu", ["x"], ["e"])], "else", [],
                                    [helper.make_tensor_value_info("e", f32, [2, 4])])
    return model([helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                  helper.make_node("Greater", ["s", "zero"], ["c"]),
                  helper.make_node("If", ["c"], ["y"], then_branch=then_branch,
                                   else_branch=else_branch)],
                 X, Y, [const("zero", 0.0)])


def _rewrite_the_branch(write, body: str) -> tuple[onnx.ModelProto, Graph]:
    """Compile `_neg_neg_in_a_branch` with the Neg-Neg pass replacing by `body`: one
    rewrite, in the then-branch; the compiled model valid and computing the same."""
    proto = _neg_neg_in_a_branch()
    path = write("plugin.py", HEADER + PATTERN_PASS.format(body=body))
    graph = load(proto)
    report = compile_graph(graph, pass_paths=[path])
    assert {r.graph_name: r.rewrites for r in report.records} == {"g": 0, "then": 1, "else": 0}
    exported = graph.to_onnx()
    onnx.checker.check_model(exported, full_check=True)
    for sign in (1.0, -1.0):  # both branches taken
        feeds = {"x": np.full((2, 4), sign, np.float32)}
        np.testing.assert_array_equal(outputs_of(exported, feeds)[0], outputs_of(proto, feeds)[0])
    return proto, graph


def test_a_pattern_pass_rewrites_inside_a_body_reading_an_outer_value(write) -> None:
    """Neg(Neg(x)) in an If branch, x from the outer graph: the branch passes x through."""
    _, graph = _rewrite_the_branch(
        write, "    def replacement(self, inputs):\n        return inputs[0]\n")
    assert [n.type for n in graph.get_subgraph("then").get_direct_nodes()] == ["NetOutput"]


# -- expression-style replacements built in place ------------------------------------------------
def test_an_expression_replacement_reads_the_matched_tensors_and_builds_no_placeholders(
        write) -> None:
    """inputs[i] is the matched producer itself (its desc, not a scalar placeholder); the new
    nodes are typed from it and named after their operator."""
    source = """
SEEN = []

@register_fusion_pass(name="P", stage="BeforeInferShape")
class P(PatternFusionPass):
    @pattern
    def twice(self, inputs):
        return es.Neg(es.Neg(inputs[0]))

    def replacement(self, inputs):
        node = inputs[0]._get_node_snapshot()
        SEEN.append((node.type, inputs[0].output_index,
                     node.get_output_desc(inputs[0].output_index).get_shape().get_dims()))
        return es.Abs(es.Relu(inputs[0]))
"""
    proto = model([helper.make_node("Sigmoid", ["x"], ["s"], name="sig"),
                   helper.make_node("Neg", ["s"], ["n"], name="n1"),
                   helper.make_node("Neg", ["n"], ["y"], name="n2")], X, Y)
    graph = load(proto)
    path = write("plugin.py", HEADER + source)
    import sys

    from ge.testing import load_passes

    # The compilation's pass-path plugins are unloaded after it; a set holding the same file
    # keeps its module (and SEEN) readable.
    with load_passes(path) as passes:
        report = compile_graph(graph, pass_paths=[path])
        seen = sys.modules[passes["P"].__module__].SEEN
    assert report.rewrites_by_pass() == {"P": 1}
    assert seen == [("Sigmoid", 0, [2, 4])]
    assert [n.type for n in graph.topological_order()] == [
        "Data", "Sigmoid", "Relu", "Abs", "NetOutput"]
    assert not graph.nodes_of_type("Data")[0].get_attr("index")  # only the model's input
    relu, absolute = graph.nodes_of_type("Relu")[0], graph.nodes_of_type("Abs")[0]
    assert absolute.get_output_desc(0).get_shape().get_dims() == [2, 4]
    assert relu.get_output_desc(0).get_data_type() == DataType.DT_FLOAT
    assert relu.get_metadata() == {"ge.origin_pass": "P", "ge.origin_nodes": "n1,n2"}
    assert_same_outputs(proto, graph)


def test_an_expression_replacement_reading_past_its_boundary_fails_clearly(write) -> None:
    source = PATTERN_PASS.format(body="""
    def replacement(self, inputs):
        return es.Add(es.Relu(inputs[0]), inputs[1])""")
    err = _compile_fails(write, source, load(_neg_neg()))
    assert "RewriteError" in err.message
    assert "reads input 1 but the region it replaces has 1 input(s) (inputs[:1])" in err.message
    assert err.pass_name == "P"


@pytest.mark.parametrize(("call", "what"), [
    ("inputs[0].set_data_type(DataType.DT_FLOAT16)", "set_data_type"),
    ("inputs[0].get_owner_builder().set_node_attr_int64(inputs[0], 'k', 1)",
     "set_node_attr_int64"),
    ("inputs[0].get_owner_builder().create_input(3)", "create_input"),
    ("inputs[0].get_owner_builder().build_and_reset([inputs[0]])", "build_and_reset"),
])
def test_an_expression_replacement_cannot_change_the_matched_graph(write, call, what) -> None:
    """The replacement's inputs are the matched tensors: changing them (or making the
    builder own inputs or build) is refused, the pass fails and the graph is rolled back."""
    source = "\nfrom ge.graph import DataType\n" + PATTERN_PASS.format(body=f"""
    def replacement(self, inputs):
        relu = es.Relu(inputs[0])
        {call}
        return relu""")
    err = _compile_fails(write, source, load(_neg_neg()))
    assert "BuilderStateError" in err.message and f"Cannot {what}" in err.message
    call_line = (HEADER + source).splitlines().index(f"        {call}") + 1
    assert err.location is not None and err.location.line == call_line  # the author's line


def test_an_expression_replacement_reads_its_inputs_descs(write) -> None:
    """`inputs[i].get_tensor_desc()` is the matched tensor's real desc (a copy): a
    replacement can decide by rank without its match result."""
    path = write("plugin.py", HEADER + """
@register_fusion_pass(name="P", stage="AfterInferShape")
class P(PatternFusionPass):
    @pattern
    def twice(self, inputs):
        return es.Neg(es.Neg(inputs[0]))

    def replacement(self, inputs):
        desc = inputs[0].get_tensor_desc()
        seen = (list(desc.get_shape()), desc.data_type.name)
        assert seen == ([2, 4], "DT_FLOAT"), seen  # (else E13028: the test fails)
        desc.set_shape([7])  # a copy: the graph's desc stays
        return es.Relu(inputs[0]) if len(seen[0]) == 2 else inputs[0]
""")
    graph = load(_neg_neg())
    compile_graph(graph, pass_paths=[path], builtin_passes=False)
    assert [n.type for n in graph.get_direct_nodes()] == ["Data", "Relu", "NetOutput"]
    (relu,) = graph.nodes_of_type("Relu")
    assert list(relu.get_input_desc(0).get_shape()) == [2, 4]


def test_an_expression_replacement_returning_a_graph_leaves_no_stray_nodes(write) -> None:
    """Operators built on the inputs before returning a separately built Graph are dropped;
    the Graph is copied in."""
    source = PATTERN_PASS.format(body="""
    def replacement(self, inputs):
        es.Sigmoid(es.Relu(inputs[0]))  # built, then not used
        b = GraphBuilder("own")
        return b.build_and_reset([es.Identity(b.create_input(0))])""")
    proto = _neg_neg()
    graph = load(proto)
    path = write("plugin.py", HEADER + source)
    report = compile_graph(graph, pass_paths=[path])
    assert report.rewrites_by_pass() == {"P": 1}
    assert op_counts(graph) == {"Identity": 1}
    assert_same_outputs(proto, graph)


def test_an_expression_replacement_of_another_domain_declares_it(write, tmp_path) -> None:
    """An operator of a domain the model does not import yet (ai.onnx.ml), built in place,
    adds the domain to the model's opset imports: the saved model passes onnx.checker and
    runs."""
    source = "\nimport ge.es.ml as ml\n" + PATTERN_PASS.format(body="""
    def replacement(self, inputs):
        return ml.Binarizer(inputs[0], threshold=0.5)""")
    proto = _neg_neg()
    graph = load(proto)
    assert "ai.onnx.ml" not in graph.opset_imports
    compile_graph(graph, pass_paths=[write("plugin.py", HEADER + source)])
    assert graph.opset_imports["ai.onnx.ml"] >= 1
    graph.save(tmp_path / "m.onnx")
    onnx.checker.check_model(str(tmp_path / "m.onnx"), full_check=True)
    feeds = {"x": np.array([[0.2, 0.7, -1.0, 3.0]] * 2, np.float32)}
    np.testing.assert_array_equal(outputs_of(onnx.load(tmp_path / "m.onnx"), feeds)[0],
                                  (feeds["x"] > 0.5).astype(np.float32))


def test_an_expression_replacement_built_in_a_body_reads_the_outer_value(write) -> None:
    """Neg(Neg(x)) in an If branch, x from the outer graph, replaced by Identity(x): the
    Identity is built in the branch (not the root graph) and reads x across the scope."""
    _, graph = _rewrite_the_branch(
        write, "    def replacement(self, inputs):\n        return es.Identity(inputs[0])\n")
    (identity,) = graph.get_subgraph("then").nodes_of_type("Identity")
    assert not graph.nodes_of_type("Identity")
    source, _ = identity.get_input_producer(0)
    assert source.owner_graph is graph and source.type == "Data"


def test_a_named_operator_of_an_expression_replacement_is_renamed_per_match(write) -> None:
    """A replacement that names its operator (`name="fused"`) is built once per match: the
    second and later ones get unique names, as a copied-in replacement would."""
    proto = model([helper.make_node("Neg", ["x"], ["a"], name="n1"),
                   helper.make_node("Neg", ["a"], ["b"], name="n2"),
                   helper.make_node("Relu", ["b"], ["c"], name="relu"),
                   helper.make_node("Neg", ["c"], ["d"], name="n3"),
                   helper.make_node("Neg", ["d"], ["y"], name="n4")], X, Y)
    path = write("plugin.py", HEADER + PATTERN_PASS.format(body="""
    def replacement(self, inputs):
        return es.Identity(inputs[0], name="fused")"""))
    graph = load(proto)
    report = compile_graph(graph, pass_paths=[path])
    assert report.rewrites_by_pass() == {"P": 2}
    assert sorted(n.name for n in graph.nodes_of_type("Identity")) == ["fused", "fused_1"]
    assert_same_outputs(proto, graph)


def test_an_expression_replacement_with_too_many_outputs_fails_clearly(write) -> None:
    source = PATTERN_PASS.format(body="""
    def replacement(self, inputs):
        return [es.Identity(inputs[0]), es.Relu(inputs[0])]""")
    err = _compile_fails(write, source, load(_neg_neg()))
    assert "RewriteError" in err.message
    assert "the replacement has 2 output(s) but the region it replaces has 1" in err.message


def _scoped_neg_neg(first: str = "/block/act/Neg", second: str = "/block/act/Neg_1"):
    return model([helper.make_node("Neg", ["x"], ["n"], name=first),
                  helper.make_node("Neg", ["n"], ["y"], name=second)], X, Y)


def test_an_operator_named_as_a_node_it_replaces_takes_that_name(write) -> None:
    """`name=` naming a matched node: the name is taken while the match is built, so the
    node gets it once the matched nodes are gone (a folded Conv keeps its Conv's name),
    also when the rewrite is undone by a later failure of the same pass (then not at all)."""
    proto = _scoped_neg_neg()
    path = write("plugin.py", HEADER + PATTERN_PASS.format(body="""
    def replacement(self, inputs):
        return es.Identity(inputs[0], name="/block/act/Neg_1")"""))
    graph = load(proto)
    report = compile_graph(graph, pass_paths=[path])
    assert report.rewrites_by_pass() == {"P": 1}
    (node,) = graph.nodes_of_type("Identity")
    assert node.name == "/block/act/Neg_1"
    assert graph.find_node_by_name("/block/act/Neg_1") is node
    saved = graph.to_onnx()
    assert [n.name for n in saved.graph.node] == ["/block/act/Neg_1"]
    onnx.checker.check_model(saved, full_check=True)


def test_an_asked_name_of_no_replaced_node_stays_unique(write) -> None:
    """Only names of nodes the rewrite removes are handed over: a name held by a node that
    stays (here the graph's other Relu) is not taken from it."""
    proto = model([helper.make_node("Neg", ["x"], ["a"], name="n1"),
                   helper.make_node("Neg", ["a"], ["b"], name="n2"),
                   helper.make_node("Relu", ["b"], ["y"], name="keep")], X, Y)
    path = write("plugin.py", HEADER + PATTERN_PASS.format(body="""
    def replacement(self, inputs):
        return es.Identity(inputs[0], name="keep")"""))
    graph = load(proto)
    compile_graph(graph, pass_paths=[path])
    assert graph.find_node_by_name("keep").type == "Relu"
    (node,) = graph.nodes_of_type("Identity")
    assert node.name == "keep_1"


def test_a_taken_over_name_is_given_back_on_rollback(write) -> None:
    """The rename is journaled: a pass failing after a rewrite that took a name over leaves
    the graph as it was, names included (the helper compares the saved bytes)."""
    proto = model([helper.make_node("Neg", ["x"], ["a"], name="/s/Neg"),
                   helper.make_node("Neg", ["a"], ["b"], name="/s/Neg_1"),
                   helper.make_node("Neg", ["b"], ["c"], name="/s/Neg_2"),
                   helper.make_node("Neg", ["c"], ["y"], name="/s/Neg_3")], X, Y)
    source = PATTERN_PASS.format(body="""
    calls = 0

    def replacement(self, inputs):
        P.calls += 1
        if P.calls == 2:
            raise ValueError("second match")
        return es.Identity(inputs[0], name="/s/Neg")""")
    err = _compile_fails(write, source, load(proto))
    assert "ValueError: second match" in err.message


def test_unnamed_operators_are_named_in_the_scope_of_the_nodes_they_replace(write) -> None:
    """Exporters name nodes by module path (`/block/act/Neg`): a replacement's unnamed
    operators are named in the matched nodes' common scope (`/block/act/Identity`), so a fused
    model still says where each operator came from; no common scope, no prefix."""
    body = """
    def replacement(self, inputs):
        return es.Identity(inputs[0])"""
    path = write("plugin.py", HEADER + PATTERN_PASS.format(body=body))
    cases = [(("/block/act/Neg", "/block/act/Neg_1"), "/block/act/Identity"),
             (("/block/a/Neg", "/block/b/Neg"), "/block/Identity"),
             (("/a/Neg", "/b/Neg"), "Identity"),  # only the root scope in common
             (("n1", "/b/Neg"), "Identity")]  # a name that is not a path
    for names, expected in cases:
        proto = _scoped_neg_neg(*names)
        graph = load(proto)
        compile_graph(graph, pass_paths=[path])
        (node,) = graph.nodes_of_type("Identity")
        assert node.name == expected, names
        assert_same_outputs(proto, graph)


def test_a_new_output_takes_the_value_name_of_the_output_it_replaces(write) -> None:
    """Neg(Neg(a)) -> Identity(a): the Identity produces what the second Neg did, under its
    name `b` (the Relu reading it, saved, still reads `b`); undone with a failing pass."""
    proto = model([helper.make_node("Relu", ["x"], ["a"], name="r0"),
                   helper.make_node("Neg", ["a"], ["n"], name="n1"),
                   helper.make_node("Neg", ["n"], ["b"], name="n2"),
                   helper.make_node("Relu", ["b"], ["y"], name="r1")], X, Y)
    body = """
    def replacement(self, inputs):
        return es.Identity(inputs[0])"""
    graph = load(proto)
    compile_graph(graph, pass_paths=[write("plugin.py", HEADER + PATTERN_PASS.format(
        body=body))])
    (identity,) = graph.nodes_of_type("Identity")
    assert identity.get_output_name(0) == "b"
    saved = graph.to_onnx()
    onnx.checker.check_model(saved, full_check=True)
    assert [list(n.input) for n in saved.graph.node if n.name == "r1"] == [["b"]]
    assert_same_outputs(proto, graph)
    failing = PATTERN_PASS.format(body="""
    def replacement(self, inputs):
        P.calls = getattr(P, "calls", 0) + 1
        if P.calls == 2:
            raise ValueError("second match")
        return es.Identity(inputs[0])""")
    chain = model([helper.make_node("Neg", ["x"], ["a"], name="n1"),
                   helper.make_node("Neg", ["a"], ["b"], name="n2"),
                   helper.make_node("Neg", ["b"], ["c"], name="n3"),
                   helper.make_node("Neg", ["c"], ["y"], name="n4")], X, Y)
    _compile_fails(write, failing, load(chain))  # rolled back, names included (bytes)


def test_a_decomposed_nodes_pieces_are_named_in_its_scope(write) -> None:
    """Mul `/blk/act/Mul` decomposed into Mul(Abs(x), Abs(x)): the copied nodes are named in
    its scope (`/blk/act/Abs`...), as an expression replacement's would be, and so are the
    values named after them."""
    path = write("plugin.py", HEADER + DECOMPOSE.format(name="D", op_types=["Mul"]))
    proto = model([helper.make_node("Mul", ["x", "x"], ["y"], name="/blk/act/Mul")], X, Y)
    graph = load(proto)
    compile_graph(graph, pass_paths=[path], builtin_passes=False)
    names = sorted(n.name for n in graph.get_direct_nodes() if n.type in ("Mul", "Abs"))
    assert len(names) == 3 and all(name.startswith("/blk/act/") for name in names), names
    # values named after their node move with it (`Abs:0` was left outside the scope)
    values = [v for n in graph.get_direct_nodes() if n.type == "Abs" for v in n.get_output_names()]
    assert len(values) == 2 and all(v.startswith("/blk/act/Abs") for v in values), values
    assert_same_outputs(proto, graph)
