"""Plugins of `pass_paths` belong to one compilation: loaded for it, unloaded after it
(unregistered, modules dropped) whether it succeeds or fails, invisible to compilations
running at the same time in other threads; the environment's plugins are unaffected."""

from __future__ import annotations

import sys
import threading
import warnings
from pathlib import Path

import pytest

import ge
from ge.compiler import OPTION_CONTINUE_ON_PLUGIN_ERROR, compile_graph
from ge.errors import DuplicatePassNameError, PassRunError, PluginLoadError, PluginLoadWarning
from ge.passes import get_registered_passes
from ge.passes.bootstrap import ENV_PY_PASS_PATH
from ge.passes.loader import loaded_plugins
from ge.testing import load_passes
from plugin_fixtures import small_graph

TAGGER = """
from ge.passes import FusionBasePass, register_fusion_pass
from plugin_fixtures import insert_identity


@register_fusion_pass(name="Tagger", stage="BeforeInferShape")
class Tagger(FusionBasePass):
    def run(self, graph, context):
        insert_identity(graph, "tag_{tag}")
"""


def tags(graph: ge.graph.Graph) -> list[str]:
    return sorted(n.name for n in graph.get_direct_nodes() if n.name.startswith("tag_"))


def plugin_modules() -> list[str]:
    return [m for m in sys.modules if m.startswith("_ge_py_pass_")]


@pytest.fixture
def two_taggers(write) -> tuple[Path, Path]:
    """Folders A and B, each with a plugin registering a pass named Tagger."""
    a = write("A/tagger.py", TAGGER.format(tag="A"))
    b = write("B/tagger.py", TAGGER.format(tag="B"))
    return a.parent, b.parent


def test_two_compilations_may_each_bring_a_pass_of_the_same_name(two_taggers) -> None:
    a, b = two_taggers
    first, second = small_graph(), small_graph()
    compile_graph(first, pass_paths=[a])
    assert get_registered_passes() == [] and plugin_modules() == []  # unloaded after it
    compile_graph(second, pass_paths=[b])  # no E13030 "name already exists: Tagger"
    assert (tags(first), tags(second)) == (["tag_A"], ["tag_B"])
    third = small_graph()
    assert compile_graph(third).records == [] and tags(third) == []
    assert loaded_plugins() == []


def test_ge_compile_with_pass_paths_twice(two_taggers, ge_model) -> None:
    a, b = two_taggers
    model = ge_model([], [("x", [2, 3])], [("x", [2, 3])])
    first = ge.compile(model, pass_paths=[a])
    second = ge.compile(model, pass_paths=[b])
    assert [r.pass_name for r in first.report.records] == ["Tagger"]
    assert (tags(first.graph), tags(second.graph)) == (["tag_A"], ["tag_B"])
    assert get_registered_passes() == []


def test_the_plugins_are_unloaded_after_a_failing_compilation(write, two_taggers) -> None:
    failing = write("failing.py", """
        from ge.passes import FusionBasePass, register_fusion_pass

        @register_fusion_pass(name="Failing", stage="BeforeInferShape")
        class Failing(FusionBasePass):
            def run(self, graph, context):
                raise KeyError("axis")
        """)
    with pytest.raises(PassRunError) as info:
        compile_graph(small_graph(), pass_paths=[failing, two_taggers[0]])
    assert info.value.code == "E13028"
    assert "Failed to run custom fusion pass Failing. Return code: FAILED. Reason: KeyError: " \
           "'axis'." in info.value.message
    assert get_registered_passes() == [] and plugin_modules() == [] and loaded_plugins() == []
    graph = small_graph()
    compile_graph(graph, pass_paths=[two_taggers[1]])
    assert tags(graph) == ["tag_B"]


def test_a_plugin_file_runs_again_in_the_next_compilation(write) -> None:
    path = write("tagger.py", TAGGER.format(tag="old"))
    first = small_graph()
    compile_graph(first, pass_paths=[path])
    path.write_text(TAGGER.format(tag="new"))  # an edit counts at the next compilation
    second = small_graph()
    compile_graph(second, pass_paths=[path])
    assert (tags(first), tags(second)) == (["tag_old"], ["tag_new"])


def test_a_failing_plugin_of_the_paths_leaves_nothing_loaded(write, pass_source) -> None:
    good = write("plugins/a_good.py", pass_source("Good"))
    write("plugins/b_bad.py", "raise ZeroDivisionError('division by zero')\n")
    with pytest.raises(PluginLoadError) as info:
        compile_graph(small_graph(), pass_paths=[good.parent])
    assert info.value.code == "E13029"
    assert info.value.message.startswith(
        f"Failed to load custom fusion pass lib {good.parent / 'b_bad.py'}. "
        "Reason: ZeroDivisionError: division by zero.")
    assert get_registered_passes() == [] and plugin_modules() == [] and loaded_plugins() == []

    with pytest.warns(PluginLoadWarning, match="python pass plugin skipped: .*b_bad.py"):
        report = compile_graph(small_graph(), pass_paths=[good.parent],
                               options={OPTION_CONTINUE_ON_PLUGIN_ERROR: "true"})
    assert [r.pass_name for r in report.records] == ["Good"]
    assert [e.code for e in report.skipped_plugins] == ["E13029"]
    assert get_registered_passes() == [] and plugin_modules() == []


def test_a_path_pass_clashing_with_an_environment_pass_is_e13030(
    write, two_taggers, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = two_taggers
    monkeypatch.setenv(ENV_PY_PASS_PATH, str(a))
    with pytest.raises(DuplicatePassNameError) as info:
        compile_graph(small_graph(), pass_paths=[b])
    assert info.value.code == "E13030"
    assert info.value.message.startswith("python pass name already exists: Tagger; Tagger at "
                                         f"{b / 'tagger.py'}:")
    assert f"reuses the name of Tagger at {a / 'tagger.py'}:" in info.value.message
    # the environment's plugin is unaffected, the failed path plugin gone
    assert [d.pass_name for d in get_registered_passes()] == ["Tagger"]
    graph = small_graph()
    compile_graph(graph)
    assert tags(graph) == ["tag_A"]


def test_environment_plugins_stay_loaded_when_a_compilation_names_them_too(
    write, pass_source, two_taggers, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = two_taggers
    extra = write("extra.py", pass_source("Extra"))
    monkeypatch.setenv(ENV_PY_PASS_PATH, str(a))
    report = compile_graph(small_graph(), pass_paths=[a, extra])
    assert [r.pass_name for r in report.records] == ["Extra", "Tagger"]
    assert [d.pass_name for d in get_registered_passes()] == ["Tagger"]
    graph = small_graph()
    assert [r.pass_name for r in compile_graph(graph).records] == ["Tagger"]
    assert tags(graph) == ["tag_A"]


def test_a_test_set_of_the_same_file_is_not_unloaded_by_a_compilation(two_taggers) -> None:
    a, _ = two_taggers
    with load_passes(a) as passes:
        module = passes["Tagger"].__module__
        graph = small_graph()
        compile_graph(graph, pass_paths=[a])
        assert tags(graph) == ["tag_A"]
        assert module in sys.modules  # the set loaded it first: it is the set's
        assert get_registered_passes() == []  # and still outside the global registry
    assert module not in sys.modules


THREADS = 8


def test_threads_with_different_pass_paths_do_not_see_each_others_passes(
    two_taggers,
) -> None:
    folders = two_taggers
    barrier = threading.Barrier(THREADS)
    results: dict[int, list[list[str]]] = {}
    errors: list[BaseException] = []

    def compile_some(index: int) -> None:
        try:
            barrier.wait()
            seen = []
            for _ in range(4):
                graph = small_graph()
                report = compile_graph(graph, pass_paths=[folders[index % 2]])
                assert [r.pass_name for r in report.records] == ["Tagger"]
                seen.append(tags(graph))
            results[index] = seen
        except BaseException as exc:  # collected: pytest sees thread failures only this way
            errors.append(exc)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        threads = [threading.Thread(target=compile_some, args=(i,)) for i in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []
    for index, seen in results.items():
        assert seen == [[f"tag_{'AB'[index % 2]}"]] * 4
    assert get_registered_passes() == [] and plugin_modules() == [] and loaded_plugins() == []
