"""Running passes on real graphs: stage order, D2 results, transactions and E13028."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

import ge.graph
from ge.compiler import compile_graph
from ge.errors import PassDefinitionWarning, PassRunError
from ge.graph import Graph
from ge.passes import NOT_CHANGED
from ge.passes.status import ACCEPTED_RESULTS, FAILED, RunOutcome
from model_paths import shared_model
from plugin_fixtures import small_graph

CONTROL_FLOW = shared_model("control_flow")


def node_names(graph: Graph) -> list[str]:
    return [n.name for n in graph.get_direct_nodes()]


def structure(graph: Graph) -> list[tuple[str, str, list[tuple[str, int] | None]]]:
    """Nodes with their input producers, sorted: equal iff the graphs have the same edges."""
    rows = []
    for node in graph.get_direct_nodes():
        producers = []
        for index in range(node.get_inputs_size()):
            producer = node.get_input_producer(index)
            producers.append(None if producer is None else (producer[0].name, producer[1]))
        rows.append((node.name, node.type, producers))
    return sorted(rows)


RESULT_PASS = """
from ge.passes import FusionBasePass, register_fusion_pass, FAILED, NOT_CHANGED, SUCCESS
from plugin_fixtures import insert_identity
@register_fusion_pass(name="ResultPass", stage="BeforeInferShape")
class ResultPass(FusionBasePass):
    def run(self, graph, context):
        insert_identity(graph, "added_by_pass")
        return {result}
"""


@pytest.mark.parametrize(
    ("result", "outcome"),
    [
        ("None", RunOutcome.SUCCESS),
        ("True", RunOutcome.SUCCESS),
        ("0", RunOutcome.SUCCESS),
        ("SUCCESS", RunOutcome.SUCCESS),
        ("NOT_CHANGED", RunOutcome.SUCCESS),  # the graph changed: recorded so (and warned)
    ],
)
def test_successful_results_keep_the_change(write, result: str, outcome: RunOutcome) -> None:
    path = write("result_pass.py", RESULT_PASS.format(result=result))
    graph = small_graph()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = compile_graph(graph, pass_paths=[path])
    told = [w for w in caught if issubclass(w.category, PassDefinitionWarning)]
    assert len(told) == (result == "NOT_CHANGED")  # it did change the graph
    (record,) = report.records
    assert (record.pass_name, record.stage, record.graph_name) == (
        "ResultPass",
        "BeforeInferShape",
        "g",
    )
    assert record.outcome is outcome
    assert record.changed is True
    assert "added_by_pass" in node_names(graph)
    assert report.passes_that_changed() == ["ResultPass"]


LIAR = """
from ge.passes import NOT_CHANGED, FusionBasePass, register_fusion_pass


@register_fusion_pass(name="Liar", stage="AfterInferShape")
class Liar(FusionBasePass):
    def run(self, graph, context):
        for node in graph.nodes_of_type("Relu") + graph.nodes_of_type("Tanh"):
            source, index = node.get_in_data_nodes_and_port_indexes(0)
            graph.replace_all_uses(node, 0, source, index)
            graph.remove_node(node)
        return NOT_CHANGED
"""


def test_not_changed_after_changing_the_graph_is_a_change_and_a_warning(write) -> None:
    """A run() returning NOT_CHANGED after removing nodes (in both If branches of the
    exported model) is recorded as the change it was, and warned about once, at its def
    line; where it changed nothing (the main graph) it stays not_changed."""
    path = write("liar.py", LIAR)
    graph = ge.graph.load(CONTROL_FLOW)
    with pytest.warns(PassDefinitionWarning) as caught:
        report = compile_graph(graph, pass_paths=[path])
    outcomes = {r.graph_name: (r.outcome, r.changed, r.nodes_before, r.nodes_after)
                for r in report.records if r.pass_name == "Liar"}
    assert outcomes == {
        "main_graph": (RunOutcome.NOT_CHANGED, False, 6, 6),
        "sub_graph": (RunOutcome.SUCCESS, True, 2, 1),
        "sub_graph1": (RunOutcome.SUCCESS, True, 2, 1),
        "sub_graph2": (RunOutcome.NOT_CHANGED, False, 6, 6),
    }
    assert "Liar" in report.passes_that_changed()
    assert not [n for n in graph.get_all_nodes() if n.type in ("Relu", "Tanh")]
    (warning,) = [w for w in caught if issubclass(w.category, PassDefinitionWarning)]
    assert str(warning.message) == (
        "pass Liar returned NOT_CHANGED from run() but changed graph 'sub_graph', "
        "then_branch of If node '/If' (nodes 2 -> 1; removed '/Relu'; changed '/Mul'): ge "
        "records the run as changed; return True, None or SUCCESS when run() changes the "
        f"graph, NOT_CHANGED only when it leaves the graph as it was (at {path}:7)")
    assert (warning.filename, warning.lineno) == (str(path), 7)


@pytest.mark.parametrize(
    ("result", "code", "reason"),
    [
        ("False", "False", "run() returned False, which GE reads as a failure (its changes "
         "are undone): return ge.passes.NOT_CHANGED when the pass found nothing to change, "
         "True when it changed the graph"),
        ("7", "7", "run() returned status 7; " + ACCEPTED_RESULTS),
        # GE C++'s GRAPH_NOT_CHANGED, returned by a port: named, with what to return
        ("1343242304", "1343242304", "run() returned status 1343242304, which is GE C++'s "
         "GRAPH_NOT_CHANGED (graph/ge_error_codes.h): return ge.passes.NOT_CHANGED instead; "
         + ACCEPTED_RESULTS),
        ("FAILED", str(FAILED), f"run() returned FAILED ({FAILED})"),
        ("'done'", "FAILED", "python pass returned unsupported type: str"),
        ("[1]", "FAILED", "python pass returned unsupported type: list"),
    ],
)
def test_failing_results_roll_back_and_raise_e13028_at_the_return(
    write, result: str, code: str, reason: str
) -> None:
    """At the `return` that gave the result when its source says which (trial C: the
    class line sent the author through the whole run()); at the class for a value no
    return statement spells (a list)."""
    path = write("result_pass.py", RESULT_PASS.format(result=result))
    graph = small_graph()
    before = structure(graph)
    with pytest.raises(PassRunError) as info:
        compile_graph(graph, pass_paths=[path])
    err = info.value
    assert err.code == "E13028"
    assert err.message == (
        f"Failed to run custom fusion pass ResultPass. Return code: {code}. Reason: {reason}."
    )
    assert (err.pass_name, err.stage) == ("ResultPass", "BeforeInferShape")
    line = 5 if result == "[1]" else 8
    assert err.location is not None and (err.location.file, err.location.line) == (str(path),
                                                                                  line)
    assert structure(graph) == before


def test_a_failing_result_two_returns_could_give_is_placed_at_the_class(write) -> None:
    """Two `return False`, or a computed result: the source does not say which returned,
    so the E13028 stays at the class line; the one `return FAILED` of a run with others is
    found by its name, a nested function's return aside."""
    path = write("two_returns.py", '''
from ge.passes import FusionBasePass, register_fusion_pass, FAILED
@register_fusion_pass(name="TwoReturns", stage="BeforeInferShape")
class TwoReturns(FusionBasePass):
    def run(self, graph, context):
        if graph.name == "nothing":
            return False
        if len(graph.get_all_nodes()) > 1000:
            return True
        return False
''')
    with pytest.raises(PassRunError) as info:
        compile_graph(small_graph(), pass_paths=[path])
    assert info.value.location is not None and info.value.location.line == 4
    named = write("named_return.py", '''
from ge.passes import FusionBasePass, register_fusion_pass, FAILED
@register_fusion_pass(name="NamedReturn", stage="BeforeInferShape")
class NamedReturn(FusionBasePass):
    def run(self, graph, context):
        def inner():
            return FAILED
        result = FAILED if inner() else 0
        if graph.name == "nothing":
            return True
        return result
''')
    with pytest.raises(PassRunError) as info:  # (a computed result: not read)
        compile_graph(small_graph(), pass_paths=[named])
    assert info.value.location is not None and info.value.location.line == 4
    found = write("found_return.py", '''
from ge.passes import FusionBasePass, register_fusion_pass, FAILED
@register_fusion_pass(name="FoundReturn", stage="BeforeInferShape")
class FoundReturn(FusionBasePass):
    def run(self, graph, context):
        def inner():
            return FAILED
        if graph.name == "nothing":
            return True
        return FAILED
''')
    with pytest.raises(PassRunError) as info:  # (the nested function's return is not run's)
        compile_graph(small_graph(), pass_paths=[found])
    assert info.value.location is not None and (
        info.value.location.file, info.value.location.line) == (str(found), 10)


def test_an_exception_rolls_back_and_points_at_the_raising_line(write) -> None:
    path = write(
        "raising.py",
        """
        from ge.passes import FusionBasePass, register_fusion_pass

        def helper(graph):
            graph.remove_node(graph.nodes_of_type("Relu")[0])
            raise ValueError("no good")

        @register_fusion_pass(name="Raising", stage="AfterInferShape")
        class Raising(FusionBasePass):
            def run(self, graph, context):
                graph.add_node("Identity")
                helper(graph)
        """,
    )
    graph = small_graph()
    before = structure(graph)
    with pytest.raises(PassRunError) as info:
        compile_graph(graph, pass_paths=[path])
    err = info.value
    assert err.message == (
        "Failed to run custom fusion pass Raising. Return code: FAILED. "
        "Reason: ValueError: no good."
    )
    assert err.stage == "AfterInferShape"
    assert (err.location.file, err.location.line) == (str(path), 6)
    assert isinstance(err.__cause__, ValueError)
    assert structure(graph) == before


def test_the_context_error_message_is_the_reason(write) -> None:
    path = write(
        "explains.py",
        """
        from ge.passes import FusionBasePass, register_fusion_pass

        @register_fusion_pass(name="Explains", stage="BeforeInferShape")
        class Explains(FusionBasePass):
            def run(self, graph, context):
                context.set_error_message("shape of " + context.get_pass_name() + " is wrong")
                return False
        """,
    )
    with pytest.raises(PassRunError, match=r"Reason: shape of Explains is wrong\.") as info:
        compile_graph(small_graph(), pass_paths=[path])
    assert info.value.location.line == 8  # (its `return False`)


ORDER_PASS = """
from ge.passes import FusionBasePass, register_fusion_pass
import builtins

@register_fusion_pass(name="{name}", stage="{stage}")
class {name}(FusionBasePass):
    def run(self, graph, context):
        builtins.GE_TEST_LOG.append(("{name}", graph.name, id(self)))
        return {result}
"""


@pytest.fixture
def run_log(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, int]]:
    import builtins

    log: list[tuple[str, str, int]] = []
    monkeypatch.setattr(builtins, "GE_TEST_LOG", log, raising=False)
    return log


def _order_plugins(write: Callable[..., Path], specs: list[tuple[str, str, str]]) -> Path:
    for name, stage, result in specs:
        write(
            f"ordered/{name.lower()}.py", ORDER_PASS.format(name=name, stage=stage, result=result)
        )
    return write("ordered/.keep", "").parent


def test_stages_in_pipeline_order_and_passes_by_name_within_a_stage(write, run_log) -> None:
    plugins = _order_plugins(
        write,
        [
            ("Zeta", "BeforeInferShape", "True"),
            ("Alpha", "AfterOriginGraphOptimize", "True"),
            ("Beta", "BeforeInferShape", "True"),
            ("Gamma", "AfterBuiltinFusionPass", "True"),
            ("Delta", "AfterInferShape", "True"),
            ("Abc", "BeforeInferShape", "True"),
        ],
    )
    report = compile_graph(small_graph(), pass_paths=[plugins])
    expected = ["Abc", "Beta", "Zeta", "Delta", "Gamma", "Alpha"]
    assert [name for name, _, _ in run_log] == expected
    assert [r.pass_name for r in report.records] == expected
    assert all(r.changed is False for r in report.records)


def test_the_first_failure_aborts_the_compilation(write, run_log) -> None:
    plugins = _order_plugins(
        write,
        [("First", "BeforeInferShape", "False"), ("Second", "BeforeInferShape", "True")],
    )
    with pytest.raises(PassRunError, match="pass First"):
        compile_graph(small_graph(), pass_paths=[plugins])
    assert [name for name, _, _ in run_log] == ["First"]


def test_each_pass_runs_on_the_root_then_every_subgraph(write, run_log) -> None:
    plugins = _order_plugins(write, [("Walker", "BeforeInferShape", "True")])
    graph = ge.graph.load(CONTROL_FLOW)
    report = compile_graph(graph, pass_paths=[plugins])
    visited = [graph_name for _, graph_name, _ in run_log]
    assert visited == [graph.name] + [sub.name for sub in graph.get_all_subgraphs()]
    assert len(visited) == 4
    assert len({instance for _, _, instance in run_log}) == 1  # one instance per compilation
    assert [r.graph_name for r in report.records] == visited


def test_a_failure_in_a_subgraph_rolls_back_only_that_invocation(write) -> None:
    path = write(
        "sub_fail.py",
        """
        from ge.passes import FusionBasePass, register_fusion_pass

        @register_fusion_pass(name="SubFail", stage="BeforeInferShape")
        class SubFail(FusionBasePass):
            def run(self, graph, context):
                graph.add_const(0.0, name="marker")
                if graph.parent_graph is not None:
                    raise RuntimeError("in " + graph.name)
        """,
    )
    graph = ge.graph.load(CONTROL_FLOW)
    first_sub = graph.get_all_subgraphs()[0]
    sub_before = structure(first_sub)
    with pytest.raises(PassRunError, match=f"RuntimeError: in {first_sub.name}"):
        compile_graph(graph, pass_paths=[path])
    assert "marker" in node_names(graph)  # the root invocation had succeeded
    assert structure(first_sub) == sub_before


def test_a_fresh_instance_per_compilation(write, run_log) -> None:
    plugins = _order_plugins(write, [("Fresh", "BeforeInferShape", "True")])
    compile_graph(small_graph(), pass_paths=[plugins])
    compile_graph(small_graph(), pass_paths=[plugins])
    assert len(run_log) == 2
    # ids may be reused once the first instance is garbage; the stateful test covers state
    assert run_log[0][0] == run_log[1][0] == "Fresh"


def test_instances_do_not_share_state_between_compilations(write) -> None:
    path = write(
        "stateful.py",
        """
        from ge.passes import FusionBasePass, register_fusion_pass
        from plugin_fixtures import insert_identity

        @register_fusion_pass(name="Stateful", stage="BeforeInferShape")
        class Stateful(FusionBasePass):
            def __init__(self):
                self.calls = 0

            def run(self, graph, context):
                self.calls += 1
                insert_identity(graph, f"call_{self.calls}")
        """,
    )
    first, second = small_graph(), small_graph()
    compile_graph(first, pass_paths=[path])
    compile_graph(second, pass_paths=[path])
    assert "call_1" in node_names(first) and "call_1" in node_names(second)
    assert "call_2" not in node_names(second)


def test_a_pass_that_cannot_be_created_is_e13028(write) -> None:
    path = write(
        "needs_args.py",
        """
        from ge.passes import FusionBasePass, register_fusion_pass

        @register_fusion_pass(name="NeedsArgs", stage="BeforeInferShape")
        class NeedsArgs(FusionBasePass):
            def __init__(self, required):
                self.required = required
        """,
    )
    with pytest.raises(PassRunError, match="could not create the pass: TypeError") as info:
        compile_graph(small_graph(), pass_paths=[path])
    assert info.value.location.line == 5


def test_a_pattern_pass_without_patterns_fails_clearly(write) -> None:
    path = write(
        "pattern_kind.py",
        """
        from ge.passes import PatternFusionPass, register_fusion_pass

        @register_fusion_pass(name="PatternKind", stage="BeforeInferShape")
        class PatternKind(PatternFusionPass):
            pass
        """,
    )
    with pytest.raises(PassRunError, match=r"PatternKind\.patterns\(\) is not implemented"):
        compile_graph(small_graph(), pass_paths=[path])


def test_engine_steps_run_between_the_stages(write, run_log) -> None:
    plugins = _order_plugins(
        write, [("Before", "BeforeInferShape", "True"), ("After", "AfterInferShape", "True")]
    )
    steps = {"infer_shape": lambda graph, options: run_log.append(("infer_shape", graph.name, 0)),
             "final_validation": None}
    with pytest.raises(ValueError, match="unknown engine step 'nope'"):
        compile_graph(small_graph(), steps={"nope": lambda graph, options: None})
    compile_graph(small_graph(), pass_paths=[plugins], steps=steps)
    assert [name for name, _, _ in run_log] == ["Before", "infer_shape", "After"]


def test_options_reach_the_pass_context(write) -> None:
    path = write(
        "reads_option.py",
        """
        from ge.passes import FusionBasePass, register_fusion_pass
        from plugin_fixtures import insert_identity

        @register_fusion_pass(name="ReadsOption", stage="BeforeInferShape")
        class ReadsOption(FusionBasePass):
            def run(self, graph, context):
                insert_identity(graph, context.get_option_value("my.node.name"))
        """,
    )
    graph = small_graph()
    compile_graph(graph, pass_paths=[path], options={"my.node.name": "from_option"})
    assert "from_option" in node_names(graph)
    with pytest.raises(PassRunError, match="RuntimeError: Failed to get option value for key"):
        compile_graph(small_graph(), pass_paths=[path])


def test_not_changed_constant_is_reported_as_not_changed(write, recwarn) -> None:
    """NOT_CHANGED from a run() that only read the graph is what it says: not_changed,
    and no warning."""
    path = write("nc.py", """
        from ge.passes import NOT_CHANGED, FusionBasePass, register_fusion_pass

        @register_fusion_pass(name="Reader", stage="BeforeInferShape")
        class Reader(FusionBasePass):
            def run(self, graph, context):
                self.seen = len(graph.nodes_of_type("Relu"))
                return NOT_CHANGED
        """)
    graph = small_graph()
    before = structure(graph)
    (record,) = compile_graph(graph, pass_paths=[path]).records
    assert record.outcome is RunOutcome.NOT_CHANGED and record.changed is False
    assert structure(graph) == before
    assert not recwarn.list
    assert NOT_CHANGED == 1


def test_builders_in_a_pass_use_the_opset_of_the_compiled_graph(write) -> None:
    """Issue 3, point 6: a replacement built inside a pass follows the model's opset."""
    path = write(
        "builds.py",
        """
        from ge.es import GraphBuilder
        from ge.es.onnx import ReduceSum
        from ge.passes import FusionBasePass, register_fusion_pass

        @register_fusion_pass(name="Builds", stage="BeforeInferShape")
        class Builds(FusionBasePass):
            def run(self, graph, context):
                builder = GraphBuilder("replacement")
                x = builder.create_input(0, shape=[2, 3])
                ReduceSum(x, builder.create_vector_int64([1]))  # axes is an input since 13
                graph.set_attr("builder_opset", builder.opset_version(""))
        """,
    )
    for version in (13, 17):
        graph = small_graph()
        graph.model.opset_imports = {"": version}
        compile_graph(graph, pass_paths=[path])
        assert graph.get_attr("builder_opset") == version
