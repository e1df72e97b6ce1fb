"""`ge.compile`: what it accepts, what it gives back, and how failures leave the model."""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

import ge
import ge.graph
from ge.compiler import builtin
from ge.compiler.pass_registry import builtin_pass
from ge.errors import (
    CompileInputError,
    CompilerOptionError,
    CompileWarning,
    GeError,
    PassRunError,
)
from ge.es import GraphBuilder
from ge.es.all import Softmax
from ge.graph import Graph
from ge.passes import FusionBasePass, PatternFusionPass, create_pattern
from ge.testing import make_model
from model_paths import shared_model
from plugin_fixtures import small_graph


def names(graph: Graph) -> list[str]:
    return sorted(f"{n.owner_graph.name}/{n.name}" for n in graph.get_all_nodes())


def relu_model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                              "relu_graph", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


RAISING = """
from ge.passes import FusionBasePass, register_fusion_pass

@register_fusion_pass(name="Raising", stage="AfterInferShape")
class Raising(FusionBasePass):
    def run(self, graph, context):
        graph.add_const(1.0, name="left_behind")
        raise ValueError("boom")
"""


@pytest.mark.parametrize("kind", ["path", "proto", "graph"])
def test_compile_accepts_a_path_a_proto_and_a_graph(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "relu.onnx"
    onnx.save(relu_model(), path)
    model = {"path": path, "proto": relu_model(), "graph": ge.graph.load(path)}[kind]
    result = ge.compile(model)
    assert isinstance(result, ge.CompileResult)
    assert [n.type for n in result.graph.get_direct_nodes()] == ["Data", "Relu", "NetOutput"]
    # a Graph's source is the file ge.graph.load read (resolved); a proto has none
    assert result.source == {"path": path, "proto": None, "graph": path.resolve()}[kind]
    if kind == "graph":
        assert result.graph is model  # compiled in place
    assert [s.name for s in result.report.steps] == [
        "BeforeInferShape", "InferShape", "AfterInferShape", "BuiltinFusion",
        "AfterBuiltinFusionPass", "OriginGraphOptimize", "AfterOriginGraphOptimize",
        "FinalValidation"]
    assert result.report.ops_before == result.report.ops_after == {"Relu": 1}
    out = tmp_path / "out.onnx"
    result.save(out)
    onnx.checker.check_model(onnx.load(out), full_check=True)
    assert [o.name for o in onnx.load(out).graph.output] == ["y"]


@pytest.mark.parametrize("bad", [42, None, ["a.onnx"]])
def test_anything_else_is_a_clear_compile_input_error(bad: object) -> None:
    with pytest.raises(CompileInputError) as info:
        ge.compile(bad)  # type: ignore[arg-type]
    assert info.value.code == "GE1203"
    assert info.value.message.startswith("ge.compile expects a model path, an "
                                         "onnx.ModelProto, its serialized bytes or a "
                                         "ge.graph.Graph, got ")
    assert type(bad).__name__ in info.value.message


@pytest.mark.builtin_passes
@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_serialized_bytes_compile_as_load_reads_them(tmp_path: Path, kind: type) -> None:
    """Trial Z: ge.graph.load took a model's bytes, ge.compile refused them (GE1203)."""
    model = make_model([helper.make_node("Identity", ["x"], ["n"]),
                        helper.make_node("Relu", ["n"], ["y"])], [("x", [2])], [("y", [2])])
    result = ge.compile(kind(model.SerializeToString()), verify=True)
    assert result.report.counts_after.nodes < result.report.counts_before.nodes
    result.save(tmp_path / "out.onnx")
    assert [o.name for o in onnx.load(tmp_path / "out.onnx").graph.output] == ["y"]


def test_bytes_that_are_no_model_are_the_loads_error() -> None:
    with pytest.raises(GeError) as info:
        ge.compile(b"not a model")
    assert "the model given as bytes" in info.value.message


def test_a_failing_pass_gives_a_graph_back_unchanged(write) -> None:
    graph = small_graph()
    before, count = names(graph), graph.mutation_count
    with pytest.raises(PassRunError) as info:
        ge.compile(graph, pass_paths=[write("raising.py", RAISING)])
    err = info.value
    assert (err.code, err.pass_name, err.stage) == ("E13028", "Raising", "AfterInferShape")
    assert "Reason: ValueError: boom." in err.message
    assert err.location is not None and err.location.line == 8  # the raising line
    assert names(graph) == before  # the shape inference before it was rolled back too
    assert graph.mutation_count == count
    assert graph.get_direct_nodes()[1].get_output_desc(0).data_type.name == "DT_UNDEFINED"


def test_skip_rolls_the_failing_pass_back_warns_and_goes_on(write) -> None:
    with pytest.warns(CompileWarning, match=r"pass Raising rolled back and skipped "
                                            r"\(on_pass_failure=skip\): \[E13028\]"):
        result = ge.compile(small_graph(), pass_paths=[write("raising.py", RAISING)],
                            on_pass_failure="skip")
    [record] = [r for r in result.report.records if r.pass_name == "Raising"]
    assert record.outcome.value == "failed" and not record.changed
    assert record.rolled_back is not None and "ValueError: boom" in record.rolled_back
    assert "left_behind" not in names(result.graph)
    assert result.report.by_pass()[0]["rolled_back"] == 1


def test_a_compilations_warnings_point_at_the_users_call_and_come_each_time(write) -> None:
    """Under Python's default filters (shown once per line), a notebook cell compiling
    again must warn again, and the warning names the user's `ge.compile` line, not ge's."""
    plugin = write("raising.py", RAISING)
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        warnings.simplefilter("default")
        for _ in range(2):
            line = sys._getframe().f_lineno + 1
            ge.compile(small_graph(), pass_paths=[plugin], on_pass_failure="skip")
    skipped = [w for w in caught if "rolled back and skipped" in str(w.message)]
    assert len(skipped) == 2
    assert {(w.filename, w.lineno) for w in skipped} == {(__file__, line)}


def test_each_result_keeps_its_own_warnings_while_others_compile_in_threads() -> None:
    """`result.warnings` is the compilation's own, whatever the filters and whatever other
    threads compile meanwhile (`warnings.catch_warnings` is process-wide and mixes them)."""
    import threading

    barrier = threading.Barrier(4)
    results: dict[str, list[list[str]]] = {"typo": [], "clean": []}

    def work(kind: str) -> None:
        options = {"ge.optimise.max_rounds": "3"} if kind == "typo" else {}
        barrier.wait()
        for _ in range(10):
            result = ge.compile(relu_model(), options=options)
            results[kind].append([str(w) for w in result.warnings])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # filters do not decide what a result keeps
        threads = [threading.Thread(target=work, args=(kind,))
                   for kind in ("typo", "clean", "typo", "clean")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert len(results["typo"]) == len(results["clean"]) == 20
    assert all(found == [] for found in results["clean"])
    assert all(len(found) == 1 and "ge.optimise.max_rounds" in found[0]
               for found in results["typo"])


def test_the_result_and_report_read_as_one_line() -> None:
    """What a notebook shows for them: the summary line `ge compile` ends with, not the
    whole graph."""
    result = ge.compile(relu_model(), verify=True)
    summary = result.report.summary()
    assert re.fullmatch(r"nodes 1 → 1 \(\+0\), constants 0 → 0; \d+ pass run\(s\), 0 "
                        r"pass\(es\) changed the graph; \d+\.\d ms", summary), summary
    assert repr(result.report) == f"<CompileReport of graph 'relu_graph': {summary}>"
    assert repr(result) == (f"<CompileResult: {summary}; verification "
                            f"{result.verification.summary()}>")
    assert {"compile", "initialize", "finalize", "CompileResult"} <= set(dir(ge))


def test_bad_choices_are_option_errors() -> None:
    with pytest.raises(CompilerOptionError, match="on_pass_failure must be 'stop' or 'skip'"):
        ge.compile(small_graph(), on_pass_failure="ignore")
    with pytest.raises(CompilerOptionError, match="check must be one of"):
        ge.compile(small_graph(), check="some")
    with pytest.raises(CompilerOptionError, match="verify must be True, False or one of"):
        ge.compile(small_graph(), verify="sometimes")
    with pytest.raises(CompilerOptionError,
                       match=r"cannot disable unknown pass\(es\) NoSuchPass; known passes: "):
        ge.compile(small_graph(), disable=["NoSuchPass"])
    with pytest.raises(CompilerOptionError, match=r"ge\.optimize\.max_rounds must be a positive"):
        ge.compile(small_graph(), options={"ge.optimize.max_rounds": "zero"})


@pytest.mark.builtin_passes
def test_disabling_a_builtin_pass_with_the_builtins_off_is_said_to_do_nothing() -> None:
    from ge.errors import CompileWarning

    with pytest.warns(CompileWarning, match=r"disabling built-in pass\(es\) LayerNormFusion "
                      r"does nothing: the built-in passes are off \(builtin_passes=False, "
                      r"--no-builtin\)"):
        ge.compile(small_graph(), builtin_passes=False, disable=["LayerNormFusion"])


@pytest.mark.builtin_passes
def test_a_misspelt_pass_to_disable_gets_a_guess() -> None:
    with pytest.raises(CompilerOptionError,
                       match=r"cannot disable unknown pass\(es\) LayerNormFusoin \(did you "
                             r"mean LayerNormFusion\?\), Zzz; known passes: "):
        ge.compile(small_graph(), disable=["LayerNormFusoin", "Zzz"])


@pytest.mark.builtin_passes
def test_enable_names_an_off_by_default_builtin_and_bad_names_are_option_errors() -> None:
    """SwishFusion is off by default; `enable=` runs it. A name unknown, or both enabled and
    disabled, is GE1202 before anything runs (the graph is left as it was)."""
    graph = small_graph()
    before = graph.to_onnx().SerializeToString()
    with pytest.raises(CompilerOptionError,
                       match=r"cannot enable unknown pass\(es\) SwishFuson \(did you mean "
                             r"SwishFusion\?\); known passes: ") as info:
        ge.compile(graph, enable=["SwishFuson"])
    assert info.value.code == "GE1202"
    with pytest.raises(CompilerOptionError,
                       match=r"\] pass\(es\) SwishFusion both enabled and disabled$"):
        ge.compile(graph, enable=["SwishFusion"], disable=["SwishFusion"])
    assert graph.to_onnx().SerializeToString() == before
    by_default = ge.compile(small_graph())
    assert "SwishFusion" not in {r.pass_name for r in by_default.report.records}
    enabled = ge.compile(small_graph(), enable=["SwishFusion"])
    assert "SwishFusion" in {r.pass_name for r in enabled.report.records}
    from ge.errors import CompileWarning

    with pytest.warns(CompileWarning, match=r"enabling built-in pass\(es\) SwishFusion does "
                                            r"nothing: the built-in passes are off"):
        ge.compile(small_graph(), builtin_passes=False, enable=["SwishFusion"])


UNKNOWN_OPTION = """
from ge.passes import FusionBasePass, register_fusion_pass

@register_fusion_pass(name="ReadsOption", stage="BeforeInferShape")
class ReadsOption(FusionBasePass):
    def run(self, graph, context):
        self.value = context.get_option_value("my.threshold")
"""


def test_an_unknown_option_key_read_by_a_pass_names_the_key(write) -> None:
    path = write("reads.py", UNKNOWN_OPTION)
    with pytest.raises(PassRunError) as info:
        ge.compile(small_graph(), pass_paths=[path])
    assert "Reason: RuntimeError: Failed to get option value for key: my.threshold." \
        in info.value.message
    assert info.value.location is not None and info.value.location.line == 7
    ge.compile(small_graph(), pass_paths=[path], options={"my.threshold": "0.5"})


CYCLE = """
from ge.passes import FusionBasePass, register_fusion_pass

@register_fusion_pass(name="MakesCycle", stage="AfterInferShape")
class MakesCycle(FusionBasePass):
    def run(self, graph, context):
        data = graph.get_data_nodes()[0]
        first, second = graph.nodes_of_type("Relu")
        add = graph.add_node("Add", name="loop_add", num_inputs=2)
        graph.remove_edge(data, 0, first, 0)
        graph.add_data_edge(second, 0, add, 0)
        graph.add_data_edge(data, 0, add, 1)
        graph.add_data_edge(add, 0, first, 0)
"""

UNTYPED = """
from ge.passes import FusionBasePass, register_fusion_pass

@register_fusion_pass(name="Untyped", stage="AfterInferShape")
class Untyped(FusionBasePass):
    def run(self, graph, context):
        relu = graph.nodes_of_type("Relu")[0]
        custom = graph.add_node("Mystery", domain="my.ops", name="mystery", num_inputs=1)
        graph.replace_all_uses(relu, 0, custom, 0)
        graph.add_data_edge(relu, 0, custom, 0)
"""

TYPED_LATER = """
from ge.passes import FusionBasePass, register_fusion_pass

@register_fusion_pass(name="AddsNeg", stage="AfterInferShape")
class AddsNeg(FusionBasePass):
    def run(self, graph, context):
        if not graph.nodes_of_type("Relu") or graph.has_node("neg"):
            return 1
        relu = graph.nodes_of_type("Relu")[0]
        neg = graph.add_node("Neg", name="neg", num_inputs=1)
        graph.replace_all_uses(relu, 0, neg, 0)
        graph.add_data_edge(relu, 0, neg, 0)
"""


def test_a_pass_that_makes_a_cycle_is_its_own_failure(write) -> None:
    graph = small_graph()
    before = names(graph)
    with pytest.raises(PassRunError) as info:
        ge.compile(graph, pass_paths=[write("cycle.py", CYCLE)])
    assert info.value.pass_name == "MakesCycle"
    assert "the pass left the graph invalid: cycle: " in info.value.message
    assert names(graph) == before


def test_a_value_no_inference_can_type_is_the_pass_failure(write) -> None:
    graph = small_graph()
    with pytest.raises(PassRunError) as info:
        ge.compile(graph, pass_paths=[write("untyped.py", UNTYPED)], builtin_passes=False)
    message = info.value.message
    assert info.value.pass_name == "Untyped"
    # (its domain said: my.ops.Mystery is not ONNX's, ge.graph.domains.qualified_op)
    assert "output 0 ('mystery:0') of my.ops.Mystery node 'mystery' has no known dtype" in message
    assert message.count("untyped:") == 1  # one line for the one value, not one per node


def test_nodes_a_pass_adds_untyped_are_typed_by_the_engine(write) -> None:
    result = ge.compile(small_graph(), pass_paths=[write("neg.py", TYPED_LATER)])
    neg = result.graph.find_node_by_name("neg")
    desc = neg.get_output_desc(0)
    assert (desc.data_type.name, list(desc.shape)) == ("DT_FLOAT", [2, 3])


def test_the_fixed_point_cap_names_the_passes_that_keep_firing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    @builtin_pass(name="Flipper", step="origin_graph_optimize")
    class Flipper(FusionBasePass):
        """Flips a metadata entry: a change every round, forever."""

        def run(self, graph, context):
            relu = graph.nodes_of_type("Relu")[0]
            relu.set_metadata("flip", "0" if relu.get_metadata().get("flip") == "1" else "1")

    @builtin_pass(name="Quiet", step="origin_graph_optimize")
    class Quiet(FusionBasePass):
        def run(self, graph, context):
            return 1  # NOT_CHANGED

    monkeypatch.setattr(builtin, "BUILTIN_PASSES", (Flipper, Quiet))
    ge.finalize()
    with pytest.warns(CompileWarning, match=r"did not reach a fixed point in 3 rounds "
                                            r"\(ge.optimize.max_rounds\); still changing the "
                                            r"graph: Flipper; the model is correct but may "
                                            r"be less optimised than it could be \(--option "
                                            r"ge.optimize.max_rounds=N allows more rounds\)$"):
        result = ge.compile(small_graph(), options={"ge.optimize.max_rounds": "3"},
                            check="none")
    point = result.report.fixed_point
    assert point is not None and (point.rounds, point.converged, point.still_changing) == (
        3, False, ("Flipper",))
    assert [r.round for r in result.report.records if r.pass_name == "Flipper"] == [1, 2, 3]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = ge.compile(small_graph(), disable=["Flipper"])
    assert result.report.fixed_point is not None
    assert (result.report.fixed_point.rounds, result.report.fixed_point.converged) == (1, True)
    assert ge.compile(small_graph(), builtin_passes=False).report.fixed_point is None


def test_the_report_says_what_ran_where_and_how_much(write, pass_source) -> None:
    path = write("neg.py", TYPED_LATER)
    report = ge.compile(shared_model("control_flow"), pass_paths=[path]).report
    [row] = [r for r in report.by_pass() if r["name"] == "AddsNeg"]
    assert row["stage"] == "AfterInferShape" and row["kind"] == "fusion_base"
    assert row["origin"] == f"{path}:5"  # the class line
    assert row["runs"] >= 2  # the root graph and the bodies
    data = report.as_dict()
    assert set(data) >= {"steps", "passes", "invocations", "ops_before", "ops_after",
                         "fixed_point", "nodes_before", "nodes_after", "seconds",
                         "subgraph_nodes_before", "subgraph_nodes_after", "constants_before",
                         "constants_after"}
    assert data["ops_after"]["Neg"] >= 1
    invocation = data["invocations"][0]
    assert set(invocation) >= {"name", "stage", "graph", "kind", "origin", "outcome",
                               "changed", "matches", "rewrites", "nodes_before",
                               "nodes_after", "constants_before", "constants_after",
                               "seconds"}


def _chain_model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"])]
    graph = helper.make_graph(nodes, "chain", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_an_untyped_model_stays_untyped_and_a_typed_one_keeps_its_types(tmp_path: Path) -> None:
    untyped = _chain_model()
    typed = onnx.shape_inference.infer_shapes(untyped)
    assert not untyped.graph.value_info and typed.graph.value_info
    for model, expected in ((untyped, []), (typed, ["r"])):
        result = ge.compile(model)
        result.save(tmp_path / "out.onnx")
        saved = onnx.load(tmp_path / "out.onnx")
        assert [vi.name for vi in saved.graph.value_info] == expected
        assert [vi.name for vi in result.to_onnx().graph.value_info] == expected
        assert saved.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT
    forced = ge.compile(untyped, value_info="all").to_onnx()
    assert [vi.name for vi in forced.graph.value_info] == ["r"]
    assert not ge.compile(typed, value_info="none").to_onnx().graph.value_info


def test_an_unknown_value_info_mode_is_refused_before_compiling() -> None:
    graph = ge.graph.load(_chain_model())
    before = names(graph)
    with pytest.raises(CompilerOptionError) as caught:
        ge.compile(graph, value_info="some")
    assert caught.value.code == "GE1202"
    assert "value_info must be one of ('auto', 'all', 'none'), got 'some'" in str(caught.value)
    assert names(graph) == before


def test_constant_operators_are_saved_as_initializers(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    nodes = [helper.make_node("Constant", [], ["c"], value=two, name="const"),
             helper.make_node("Constant", [], ["k"], value_float=3.0, name="const_float"),
             helper.make_node("Mul", ["x", "c"], ["m"]), helper.make_node("Add", ["m", "k"], ["y"])]
    source = helper.make_model(helper.make_graph(nodes, "g", [x], [y]),
                               opset_imports=[helper.make_opsetid("", 17)])
    result = ge.compile(source, builtin_passes=False)
    result.save(tmp_path / "out.onnx")
    saved = onnx.load(tmp_path / "out.onnx")
    onnx.checker.check_model(saved, full_check=True)
    # each becomes an initializer under its value's name (value_float included)
    assert [i.name for i in saved.graph.initializer] == ["c", "k"]
    assert [n.op_type for n in saved.graph.node] == ["Mul", "Add"]
    assert result.to_onnx() == saved
    # the IR's own export stays lossless
    assert [n.op_type for n in result.graph.to_onnx().graph.node] == \
        ["Constant", "Constant", "Mul", "Add"]


def test_a_builtin_pass_runs_only_where_its_op_types_are_and_builds_its_patterns_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []

    @builtin_pass(name="NeedsSoftmax", step="builtin_fusion", requires=("Softmax",),
                  also_in=("origin_graph_optimize",))
    class NeedsSoftmax(PatternFusionPass):
        """Records that its patterns were built; matches a Softmax of anything."""

        def patterns(self):
            built.append("patterns")
            builder = GraphBuilder("softmax")
            (x,) = builder.create_inputs(1)
            return [create_pattern(builder.build_and_reset([Softmax(x)]))]

        def replacement(self, match_result):
            raise AssertionError("never reached: the test's models have nothing to rewrite")

        def meet_requirements(self, match_result):
            return False

    @builtin_pass(name="Quiet", step="origin_graph_optimize")
    class Quiet(FusionBasePass):
        def run(self, graph, context):
            return 1  # NOT_CHANGED

    monkeypatch.setattr(builtin, "BUILTIN_PASSES", (NeedsSoftmax, Quiet))
    ge.finalize()
    result = ge.compile(small_graph(), check="none")  # Relu nodes only
    records = [r for r in result.report.records if r.pass_name == "NeedsSoftmax"]
    assert [(r.outcome.value, r.seconds) for r in records] == [("not_changed", 0.0)] * 2
    assert built == []
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    softmax = helper.make_model(
        helper.make_graph([helper.make_node("Softmax", ["x"], ["y"])], "g", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17)])
    report = ge.compile(softmax).report
    # run in the fusion step and again in the origin-graph round; its patterns built once
    assert [r.stage for r in report.records if r.pass_name == "NeedsSoftmax"] == [
        "BuiltinFusion", "OriginGraphOptimize"]
    assert built == ["patterns"]


def test_a_builtin_pass_names_only_engine_steps_to_also_run_in() -> None:
    with pytest.raises(ValueError, match=r"unknown engine step\(s\) \['AfterInferShape'\] for "
                                         r"built-in pass 'X'"):
        builtin_pass(name="X", step="builtin_fusion", also_in=("AfterInferShape",))


@pytest.mark.builtin_passes
def test_pass_records_count_nodes_as_the_totals_do() -> None:
    """A trial saw `405→356` in a pass row and `nodes 403 → 354` in the summary of the same
    run: the rows counted Data and NetOutput. Both count nodes as ONNX does, and
    constants apart (`NodeCounts`)."""
    result = ge.compile(shared_model("distilbert_tiny"))
    report = result.report
    totals = report.as_dict()
    assert report.records[0].nodes_before == totals["nodes_before"]
    assert report.records[-1].nodes_after == totals["nodes_after"]
    assert report.records[0].constants_before == totals["constants_before"]
    assert report.records[-1].constants_after == totals["constants_after"]
    rows = report.by_pass()
    assert sum(row["node_delta"] for row in rows) == (
        totals["nodes_after"] - totals["nodes_before"])
    assert sum(row["constant_delta"] for row in rows) == (
        totals["constants_after"] - totals["constants_before"])


def test_saving_over_a_model_with_external_data_names_the_data_file_left(tmp_path: Path
                                                                        ) -> None:
    """Trial Z: `ge compile` warned that `out.onnx.data`, written by an earlier save with
    external data, is not read by a model saved inline over it; `CompileResult.save` said
    nothing. Both say it now (the file is left: another model may read it)."""
    result = ge.compile(shared_model("distilbert_tiny"))
    out = tmp_path / "out.onnx"
    assert result.save(out, external_data=True) == tmp_path / "out.onnx.data"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert result.save(out, external_data=True) is not None  # (rewritten: read)
        assert not caught
        assert result.save(out) is None
    assert [str(w.message) for w in caught] == [
        f"{out}.data is not read by the model written, {out} (its weights are inside it), "
        "and ge left it as it was (an earlier save with external data wrote it, or another "
        "program did); delete it if no other model reads it"]
    assert caught[0].filename == __file__  # (at the user's call)
    assert (tmp_path / "out.onnx.data").exists()
    onnx.checker.check_model(onnx.load(out), full_check=True)
