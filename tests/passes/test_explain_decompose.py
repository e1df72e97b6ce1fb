"""`ge.passes.explain_decompose`: what a DecomposePass would decompose, node by node, and
what its `meet_requirements` answered for the rest.

The passes are plugin files written to a temporary folder and loaded as the compiler loads
them; the graphs are a vendored model and ONNX models built with onnx.helper. Where it
matters, the explanation is checked against the engine running the pass
(`ge.testing.apply_pass`)."""

from __future__ import annotations

import inspect

import onnx
import pytest
from onnx import TensorProto, helper

import ge.graph
from ge.compiler.options import parse_options
from ge.compiler.plugin_loader import PluginLoader
from ge.errors import GraphError
from ge.passes.explain import infer_shapes_for_explain
from ge.passes.explain_decompose import DecomposeExplanation, explain_decompose
from ge.passes.explain_text import format_decompositions, undecided
from ge.testing import apply_pass
from model_paths import shared_model

GELU_MLP = shared_model("gelu_mlp_opset20")  # /act1/Gelu (erf), /act2/Gelu (tanh)
F32 = TensorProto.FLOAT

PASSES = """
import ge.es.all as es
from ge.es import GraphBuilder
from ge.graph import DataType
from ge.passes import DecomposePass, PassStage, infer_shape, register_decompose_pass


def _erf_gelu(node):
    builder = GraphBuilder("replacement")
    (x,) = builder.create_inputs(1)
    y = x * 0.5 * (es.Erf(x / 1.4142135623730951) + 1.0)
    graph = builder.build_and_reset([y])
    infer_shape(graph, node)
    return graph


@register_decompose_pass(name="GeluErfOnly", stage=PassStage.AFTER_INFER_SHAPE,
                         op_types=["Gelu"])
class GeluErfOnly(DecomposePass):
    def meet_requirements(self, node, context):
        if node.get_attr("approximate") != "none":
            context.set_error_message("only the erf form")
            return False
        return node.get_input_desc(0).get_data_type() == DataType.DT_FLOAT

    def replacement(self, node):
        return _erf_gelu(node)


@register_decompose_pass(name="EarlyGelu", stage=PassStage.BEFORE_INFER_SHAPE,
                         op_types=["Gelu"])
class EarlyGelu(DecomposePass):
    def meet_requirements(self, node):
        return node.get_input_desc(0).get_data_type() == DataType.DT_FLOAT

    def replacement(self, node):
        return _erf_gelu(node)


@register_decompose_pass(name="RowsOfEight", stage=PassStage.AFTER_INFER_SHAPE,
                         op_types=["Relu", "Neg"])
class RowsOfEight(DecomposePass):
    def meet_requirements(self, node):
        rows = node.get_input_desc(0).get_shape().get_dims()[0]
        return rows % 8 == 0

    def replacement(self, node):
        raise NotImplementedError


@register_decompose_pass(name="NoAnswer", stage=PassStage.AFTER_INFER_SHAPE,
                         op_types=["Relu"])
class NoAnswer(DecomposePass):
    def meet_requirements(self, node):
        node.get_input_desc(0)

    def replacement(self, node):
        raise NotImplementedError


@register_decompose_pass(name="Scribbles", stage=PassStage.AFTER_INFER_SHAPE,
                         op_types=["Relu"])
class Scribbles(DecomposePass):
    def meet_requirements(self, node):
        node.set_attr("seen", 1)
        return True

    def replacement(self, node):
        raise NotImplementedError


@register_decompose_pass(name="EveryRelu", stage=PassStage.AFTER_INFER_SHAPE,
                         op_types=["Relu"])
class EveryRelu(DecomposePass):
    def replacement(self, node):
        raise NotImplementedError
"""


@pytest.fixture
def passes(write) -> dict[str, type]:
    """Every pass of PASSES, loaded from a plugin file as the compiler loads it."""
    path = write("plugins/decompose_passes.py", PASSES)
    report = PluginLoader().load_paths([path], parse_options({}))
    assert not report.failures, report.failures
    return {d.pass_name: d.cls for p in report.plugins for d in p.descriptors}


def _before(location: str) -> str:
    """The `file:line` of the line before `location` (a hook's `def`, above its body)."""
    path, line = location.rsplit(":", 1)
    return f"{path}:{int(line) - 1}"


def _line(cls: type, text: str) -> str:
    """`file:line` of the first line holding `text` in the plugin file defining `cls`."""
    path = inspect.getsourcefile(cls)
    assert path is not None
    with open(path) as f:
        number = next(i for i, line in enumerate(f, 1) if text in line)
    return f"{path}:{number}"


def _gelu_mlp(infer: bool = True) -> ge.graph.Graph:
    graph = ge.graph.load(GELU_MLP)
    if infer:
        assert infer_shapes_for_explain(graph) is None
    return graph


def _relu_neg(rows: int | str = 2) -> onnx.ModelProto:
    """x -> Relu 'relu' -> Neg 'neg' -> y, no value_info."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Neg", ["r"], ["y"], name="neg")]
    return helper.make_model(
        helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F32, [rows, 4])],
                          [helper.make_tensor_value_info("y", F32, [rows, 4])]),
        opset_imports=[helper.make_opsetid("", 17)])


def test_the_refused_gelu_says_what_meet_requirements_returned_and_where(passes) -> None:
    """The trial's reproducer: two Gelus, the tanh one refused; explained, not GE1701."""
    (explained,) = explain_decompose(passes["GeluErfOnly"], _gelu_mlp())
    assert isinstance(explained, DecomposeExplanation)
    assert (explained.graph, explained.op_types) == ("main_graph", ["Gelu"])
    assert [c.candidate for c in explained.candidates] == ["/act1/Gelu", "/act2/Gelu"]
    assert [c.candidate for c in explained.rewrites] == ["/act1/Gelu"]
    (refused,) = explained.refused
    returned_at = _line(passes["GeluErfOnly"], "return False")
    assert refused.reason is not None and refused.reason.kind == "meet_requirements"
    assert refused.reason.message == (
        f"meet_requirements returned False (at {returned_at}): the pass refuses this node (the "
        "pass says: only the erf form); its inputs: input_0 float[4, 64]")
    assert refused.reason.details == {"inputs": {"input_0": "float[4, 64]"},
                                      "error_message": "only the erf form",
                                      "location": returned_at}
    assert refused.warnings == []
    # the engine agrees: two nodes asked about (its M), one decomposed
    application = apply_pass(passes["GeluErfOnly"], GELU_MLP)
    assert (application.matches, application.rewrites) == (2, 1)


def test_the_explanation_as_text_and_data(passes) -> None:
    (explained,) = explain_decompose(passes["GeluErfOnly"], _gelu_mlp())
    returned_at = _line(passes["GeluErfOnly"], "return False")
    assert format_decompositions([explained]) == [
        "op types Gelu (graph main_graph): 2 candidate(s), 1 would be rewritten",
        "  rewrite at '/act1/Gelu' (Gelu)",
        "  refused (top 1 of 1):",
        f"    1. '/act2/Gelu' (Gelu): meet_requirements returned False (at {returned_at}): "
        "the pass refuses this node (the pass says: only the erf form); its inputs: input_0 "
        "float[4, 64]",
    ]
    data = explained.as_dict(top=1)
    assert data["candidates"] == 2 and data["rewrite_count"] == 1
    assert data["not_rewritten"] == 1 and data["note"] is None and data["node"] is None
    assert data["rewrites"] == [{"graph": "main_graph", "candidate": "/act1/Gelu",
                                 "type": "Gelu", "rewritten": True, "reason": None,
                                 "warnings": []}]
    assert [c["candidate"] for c in data["refused"]] == ["/act2/Gelu"]
    assert data["refused"][0]["reason"]["kind"] == "meet_requirements"


def test_a_before_infer_shape_pass_refuses_on_the_model_as_loaded_and_says_why(passes) -> None:
    """At BeforeInferShape the Gelus' inputs are untyped in a compilation too: both refused,
    each with the stage's warning; the engine run at that stage agrees (nothing decomposed)."""
    explained = explain_decompose(passes["EarlyGelu"], _gelu_mlp(infer=False))
    (graph,) = explained
    assert graph.rewrites == [] and len(graph.refused) == 2
    first = graph.refused[0]
    assert first.reason is not None
    assert first.reason.message.endswith(
        "the pass refuses this node; its inputs: input_0 unknown type[unknown rank]")
    assert first.warnings == [
        "meet_requirements returned False while shape or type information is missing (input 0 "
        "of '/act1/Gelu', output 0 of '/act1/Gelu' unknown): the pass runs at "
        "BeforeInferShape, before shape inference, so a compilation gives it these values "
        "untyped too (only the types and shapes the model file declares are known then); a "
        "hook that reads them belongs at AfterInferShape"]
    (line,) = undecided(explained)
    assert line.startswith("op types Gelu (graph main_graph): 2 check(s) made while shape, "
                           "type or schema information was missing (first: meet_requirements "
                           "returned False while")
    assert apply_pass(passes["EarlyGelu"], GELU_MLP).rewrites == 0
    (told,) = explain_decompose(passes["EarlyGelu"], _gelu_mlp(infer=False),
                                stage="AfterInferShape")
    assert told.refused[0].warnings[0].endswith("the check may not have been decidable "
                                                "(ge.ops.infer_shapes types a graph, as `ge "
                                                "passes explain` does first; what stays "
                                                "unknown after it, inference could not type)")


def test_a_raising_hook_is_named_at_its_line_with_the_symbolic_dim_hint(passes) -> None:
    graph = ge.graph.load(_relu_neg("batch"))
    assert infer_shapes_for_explain(graph) is None
    (explained,) = explain_decompose(passes["RowsOfEight"], graph)
    assert [c.candidate for c in explained.candidates] == ["relu", "neg"]  # graph order
    raised_at = _line(passes["RowsOfEight"], "return rows % 8 == 0")
    for cand in explained.candidates:
        assert cand.reason is not None and cand.reason.kind == "meet_requirements_raised"
        assert cand.reason.details["location"] == raised_at
    assert explained.candidates[0].reason is not None
    assert explained.candidates[0].reason.message == (
        "meet_requirements raised TypeError: not all arguments converted during string "
        f"formatting (at {raised_at}); its inputs: input_0 float[batch, 4] (a dim may be a "
        "symbol, a str such as 'batch', where the hook expects an int: see docs/graph.md on "
        "dims)")
    sized = ge.graph.load(_relu_neg(8))
    assert infer_shapes_for_explain(sized) is None
    (explained,) = explain_decompose(passes["RowsOfEight"], sized)
    assert [c.candidate for c in explained.rewrites] == ["relu", "neg"]


def test_a_missing_return_counts_as_false(passes) -> None:
    graph = ge.graph.load(_relu_neg())
    assert infer_shapes_for_explain(graph) is None
    (explained,) = explain_decompose(passes["NoAnswer"], graph)
    (cand,) = explained.refused
    assert cand.reason is not None
    fell_off = _line(passes["NoAnswer"], "        node.get_input_desc(0)\n")
    assert cand.reason.message == (
        f"meet_requirements returned None (at {fell_off}): the pass refuses this node (None "
        "counts as False: a missing return?); its inputs: input_0 float[2, 4]")


def test_the_default_meet_requirements_accepts_every_node(passes) -> None:
    graph = ge.graph.load(_relu_neg())
    (explained,) = explain_decompose(passes["EveryRelu"], graph)
    assert [c.candidate for c in explained.rewrites] == ["relu"]


def test_one_node_asked_about(passes) -> None:
    graph = _gelu_mlp()
    (explained,) = explain_decompose(passes["GeluErfOnly"], graph, node="/act2/Gelu")
    assert explained.node == "/act2/Gelu" and explained.note is None
    assert [c.candidate for c in explained.candidates] == ["/act2/Gelu"]
    (explained,) = explain_decompose(passes["GeluErfOnly"], graph, node="/fc1/Gemm")
    assert explained.candidates == []
    assert explained.note == ("'/fc1/Gemm' (Gemm) is not a candidate: the pass decomposes "
                              "Gelu nodes")
    assert format_decompositions([explained]) == [
        "op types Gelu (graph main_graph): 0 candidate(s), 0 would be rewritten",
        "  note: '/fc1/Gemm' (Gemm) is not a candidate: the pass decomposes Gelu nodes"]
    with pytest.raises(GraphError, match="no node named 'nope'"):
        explain_decompose(passes["GeluErfOnly"], graph, node="nope")


def test_an_operator_of_the_name_in_another_domain_is_named_in_the_note(passes) -> None:
    """`Relu` names ONNX's Relu; the graph's is another domain's, which op_types names
    with its domain."""
    proto = _relu_neg()
    proto.graph.node[0].domain = "my.ops"
    proto.opset_import.append(helper.make_opsetid("my.ops", 1))
    graph = ge.graph.load(proto)
    (explained,) = explain_decompose(passes["EveryRelu"], graph)
    assert explained.candidates == []
    assert explained.note == (
        "no candidate: graph 'g' has no Relu node (the pass's op types); it has 'my.ops.Relu' "
        "node(s), an operator of that name in another domain, which op_types names as "
        "'my.ops.Relu'")
    (explained,) = explain_decompose(passes["EveryRelu"], graph, op_types=["my.ops.Relu"])
    assert [c.candidate for c in explained.rewrites] == ["relu"]


def _if_model() -> onnx.ModelProto:
    """y = If(c, then: Relu(x) 'inner', else: x) + Relu(x) 'outer'."""
    vi = helper.make_tensor_value_info
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="inner")], "then_g",
                               [], [vi("t", F32, [2])])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], name="same")],
                               "else_g", [], [vi("e", F32, [2])])
    nodes = [helper.make_node("If", ["c"], ["b"], name="if", then_branch=then_g,
                              else_branch=else_g),
             helper.make_node("Relu", ["x"], ["o"], name="outer"),
             helper.make_node("Add", ["b", "o"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "main", [vi("x", F32, [2]), vi("c", TensorProto.BOOL, [])],
                              [vi("y", F32, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_every_live_subgraph_is_explained_as_the_engine_runs_it(passes) -> None:
    graph = ge.graph.load(_if_model())
    assert infer_shapes_for_explain(graph) is None
    explained = explain_decompose(passes["EveryRelu"], graph)
    assert [(e.graph, [c.candidate for c in e.rewrites]) for e in explained] == [
        ("main", ["outer"]), ("then_g", ["inner"]), ("else_g", [])]
    assert explained[2].note == ("no candidate: graph 'else_g' has no Relu node (the pass's op "
                                 "types)")
    assert format_decompositions(explained)[-1] == (
        "op types Relu (graph else_g, else_branch of If node 'if'): no candidate: graph "
        "'else_g' has no Relu node (the pass's op types)")
    assert [e.graph for e in explain_decompose(passes["EveryRelu"], graph,
                                               subgraphs=False)] == ["main"]
    (inner,) = explain_decompose(passes["EveryRelu"], graph, node="inner")
    assert inner.graph == "then_g" and [c.candidate for c in inner.rewrites] == ["inner"]


def test_a_hook_that_changes_the_graph_is_refused_as_a_compilation_fails_it(passes) -> None:
    """A meet_requirements that writes to the graph fails the pass in a compilation
    (RewriteError, E13028); the explanation says the same at the hook's line and undoes the
    change."""
    graph = ge.graph.load(_relu_neg())
    before = graph.mutation_count
    defined = _before(_line(passes["Scribbles"], 'set_attr("seen", 1)'))
    (explained,) = explain_decompose(passes["Scribbles"], graph)
    assert explained.rewrites == []
    (refused,) = explained.refused
    assert refused.reason is not None and refused.reason.kind == "meet_requirements_raised"
    changed_at = _line(passes["Scribbles"], 'set_attr("seen", 1)')
    assert refused.reason.message.startswith(
        "meet_requirements raised RewriteError: [GE1502] meet_requirements changed graph 'g': "
        f"first, it set attribute 'seen' of Relu node 'relu', at {changed_at}; it may "
        "only read the graph (the engine makes the change from what replacement returns) (at "
        f"{defined}")
    assert not graph.find_node_by_name("relu").has_attr("seen")
    assert graph.mutation_count == before


def test_what_is_not_a_registered_decompose_pass_is_refused(passes) -> None:
    from ge.passes import DecomposePass, PatternFusionPass, pattern

    graph = ge.graph.load(_relu_neg())

    class Pattern(PatternFusionPass):
        @pattern
        def relu(self, inputs):
            import ge.es.all as es

            return es.Relu(inputs[0])

    with pytest.raises(TypeError) as caught:
        explain_decompose(Pattern, graph)
    assert str(caught.value) == (
        "explain_decompose takes a DecomposePass subclass or instance, got Pattern (explain a "
        "PatternFusionPass with ge.passes.explain.explain)")

    class Unregistered(DecomposePass):
        pass

    with pytest.raises(TypeError) as caught:
        explain_decompose(Unregistered, graph)
    assert str(caught.value) == (
        "Unregistered has no op types: register it with @register_decompose_pass(..., "
        "op_types=[...]) or give op_types=")
    (explained,) = explain_decompose(Unregistered, graph, op_types=["Neg"])
    assert [c.candidate for c in explained.rewrites] == ["neg"]
    with pytest.raises(TypeError) as caught:
        explain_decompose(passes["EveryRelu"], "g")
    assert str(caught.value) == "explain_decompose takes a ge.graph.Graph, got str"
    from ge.passes.explain import explain

    with pytest.raises(TypeError) as caught:
        explain(passes["EveryRelu"], graph)
    assert str(caught.value) == (
        "explain takes a PatternFusionPass subclass or instance, got EveryRelu (explain a "
        "DecomposePass with ge.passes.explain_decompose.explain_decompose)")
