"""A pass author's edit loop in one Python process (a notebook, a REPL): a pass defined in
the process runs like a plugin's, a definition run again says how to redo it, a plugin
file imported by the user's own code is the plugin the loader uses, and a plugin file
edited while it stays loaded is never run old without a word (trial I)."""

from __future__ import annotations

import os
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

import ge
import ge.compiler
import ge.passes
import ge.passes.registry
from ge.compiler import compile_graph, current_pass_registry
from ge.errors import (
    CompileWarning,
    DuplicatePassNameError,
    PassRegisterError,
    PluginLoadError,
)
from ge.passes import FusionBasePass, PassStage, register_fusion_pass
from ge.testing import run_pass
from plugin_fixtures import insert_identity, install_distribution, small_graph

#: A plugin that puts an Identity named `marker` after the graph's input, so a compilation
#: shows which version of the file ran.
PLUGIN = """
from ge.passes import FusionBasePass, register_fusion_pass
from plugin_fixtures import insert_identity


@register_fusion_pass(name="Marks", stage="BeforeInferShape")
class Marks(FusionBasePass):
    def run(self, graph, context):
        insert_identity(graph, "{marker}")
"""


def identities(graph: ge.graph.Graph) -> list[str]:
    return sorted(node.name for node in graph.nodes_of_type("Identity"))


def define_in_cell(cell: str) -> type:
    """Run the definition of pass `Celled` as a notebook cell would: source compiled under
    the cell's own file name, executed in `__main__`'s namespace."""
    source = textwrap.dedent("""
        from ge.passes import FusionBasePass, register_fusion_pass
        from plugin_fixtures import insert_identity

        @register_fusion_pass(name="Celled", stage="BeforeInferShape")
        class Celled(FusionBasePass):
            def run(self, graph, context):
                insert_identity(graph, "from_cell")
        """)
    namespace = {"__name__": "__main__"}
    exec(compile(source, cell, "exec"), namespace)
    return namespace["Celled"]  # type: ignore[return-value]


def test_a_pass_registered_in_the_process_runs_in_every_compilation() -> None:
    """GE runs every registered pass: one decorated by the user's own code (a script, a
    cell) takes part like a plugin's, named by its definition; disabled by name, left out
    once unregistered."""
    @register_fusion_pass(name="InProcess", stage=PassStage.BEFORE_INFER_SHAPE)
    class InProcess(FusionBasePass):
        def run(self, graph, context):
            insert_identity(graph, "in_process")

    report = compile_graph(small_graph())
    [record] = [r for r in report.records if r.pass_name == "InProcess"]
    assert record.changed and record.origin == f"{__file__}:{InProcess.__ge_pass_source__.line}"
    assert identities(report.graph) == ["in_process"]
    entry = next(p for p in current_pass_registry() if p.name == "InProcess")
    assert entry.origin.kind == "in_process"
    assert not identities(compile_graph(small_graph(), disable=["InProcess"]).graph)
    ge.passes.registry.unregister_passes([InProcess.__ge_pass_descriptor__])
    assert "InProcess" not in [r.pass_name for r in compile_graph(small_graph()).records]


def test_a_cell_run_again_says_where_the_first_definition_is_and_how_to_redo_it(
        tmp_path: Path) -> None:
    """GE's rule stands (a descriptor key registered twice is E13030), and the error says
    which definition came first and how to replace it; done as it says, the next
    compilation runs the new class."""
    first = define_in_cell(str(tmp_path / "cell1.py"))
    with pytest.raises(PassRegisterError) as caught:
        define_in_cell(str(tmp_path / "cell2.py"))
    err = caught.value
    key = "__main__:Celled:Celled"
    assert err.code == "E13030"
    assert err.message == (
        f"python pass descriptor_key already exists: {key}; first registered by the "
        f"definition at {tmp_path / 'cell1.py'}:6; running a definition again (a notebook "
        "cell, importlib.reload) registers it again: unregister the first before, with "
        "ge.passes.registry.unregister_passes("
        f"[ge.passes.get_registered_pass_by_descriptor_key({key!r})])")
    assert err.location is not None and err.location.file == str(tmp_path / "cell2.py")
    assert ge.passes.get_registered_pass_by_descriptor_key(key).cls is first

    ge.passes.registry.unregister_passes(
        [ge.passes.get_registered_pass_by_descriptor_key(key)])
    second = define_in_cell(str(tmp_path / "cell2.py"))
    assert second is not first
    [record] = [r for r in compile_graph(small_graph()).records if r.pass_name == "Celled"]
    assert record.location is not None and record.location.file == str(tmp_path / "cell2.py")


def test_the_same_class_registered_twice_is_still_refused_as_such() -> None:
    class Twice(FusionBasePass):
        pass

    register_fusion_pass(name="Twice", stage=PassStage.BEFORE_INFER_SHAPE)(Twice)
    with pytest.raises(PassRegisterError) as caught:
        register_fusion_pass(name="Twice", stage=PassStage.BEFORE_INFER_SHAPE)(Twice)
    assert caught.value.message == (
        f"python pass descriptor_key already exists: {Twice.__module__}:Twice:Twice; class "
        "Twice is registered under this name already")


def test_a_plugin_file_the_user_imported_is_the_plugin_pass_paths_load(
        write, monkeypatch: pytest.MonkeyPatch) -> None:
    """`import my_pass` (to try it with run_pass), then a compilation with its folder as a
    pass path: the loader uses the module imported (no second copy, no duplicate-name
    error), and the user's registration outlives the compilation."""
    folder = write("plugins/marks.py", PLUGIN.format(marker="imported")).parent
    monkeypatch.syspath_prepend(str(folder))
    import marks  # type: ignore[import-not-found]

    assert identities(run_pass(marks.Marks, small_graph())) == ["imported"]
    report = compile_graph(small_graph(), pass_paths=[folder])
    assert [r.pass_name for r in report.records] == ["Marks"]
    assert identities(report.graph) == ["imported"]
    assert ge.passes.registry.get_registered_pass_by_name("Marks").cls is marks.Marks
    assert identities(run_pass(marks.Marks, small_graph())) == ["imported"]
    sys.modules.pop("marks", None)


def _edit(path: Path, source: str) -> None:
    path.write_text(textwrap.dedent(source))


def test_a_plugin_edited_while_the_compiler_holds_it_is_never_run_old_silently(
        write, monkeypatch: pytest.MonkeyPatch) -> None:
    """The variable's plugins are read once (D13). Edited afterwards: a compilation warns
    that it runs the code loaded at the start; one naming the file as a pass path (asking
    for it afresh) is E13029 and changes nothing; after ge.finalize() the new code runs."""
    plugin = write("env/marks.py", PLUGIN.format(marker="old"))
    monkeypatch.setenv("ASCEND_GE_PY_PASS_PATH", str(plugin.parent))
    ge.initialize()
    assert identities(compile_graph(small_graph()).graph) == ["old"]
    _edit(plugin, PLUGIN.format(marker="new"))

    with pytest.warns(CompileWarning) as caught:
        report = compile_graph(small_graph())
    assert identities(report.graph) == ["old"]
    assert [str(w.message) for w in caught] == [
        f"plugin {plugin} changed (or went) since the compiler loaded it ({plugin}): this "
        "compilation runs the code imported then; ge.finalize() makes the next compilation "
        "load it afresh"]

    graph = small_graph()
    before = graph.to_onnx().SerializeToString()
    with pytest.raises(PluginLoadError) as failed, pytest.warns(CompileWarning):
        compile_graph(graph, pass_paths=[plugin.parent])
    assert failed.value.code == "E13029"
    assert failed.value.message == (
        f"Failed to load custom fusion pass lib {plugin}. Reason: it changed (or went) since "
        "it was imported, and it is still loaded: by the compiler, from "
        "ASCEND_GE_PY_PASS_PATH when it started (call ge.finalize() first), by another "
        "compilation running now that was given it as a pass path, or by an open "
        "ge.testing.load_passes block (load it again when they have ended); ge would run the "
        "old code.")
    assert graph.to_onnx().SerializeToString() == before

    ge.finalize()
    assert identities(compile_graph(small_graph()).graph) == ["new"]


def test_a_plugin_file_added_to_the_variables_folder_is_named_until_finalize(
        write, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file added to an ASCEND_GE_PY_PASS_PATH folder after the compiler loaded it is not
    loaded (D13) and was not mentioned either (trial R): a compilation now names it."""
    plugin = write("env/marks.py", PLUGIN.format(marker="first"))
    monkeypatch.setenv("ASCEND_GE_PY_PASS_PATH", str(plugin.parent))
    ge.initialize()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (nothing new: no warning)
        assert identities(compile_graph(small_graph()).graph) == ["first"]
    added = write("env/later.py", PLUGIN.format(marker="later").replace('"Marks"', '"Later"'))

    with pytest.warns(CompileWarning) as caught:
        report = compile_graph(small_graph())
    assert identities(report.graph) == ["first"]
    assert [str(w.message) for w in caught] == [
        f"{added} appeared in ASCEND_GE_PY_PASS_PATH's folders since the compiler loaded its "
        "plugins: this compilation does not load it; ge.finalize() makes the next compilation "
        "load the path afresh"]

    ge.finalize()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sorted(identities(compile_graph(small_graph()).graph)) == ["first", "later"]


@pytest.mark.ge_entry_points
def test_a_copy_of_an_installed_pass_names_the_option_that_leaves_the_installed_out(
        tmp_path: Path, write, monkeypatch: pytest.MonkeyPatch) -> None:
    """A development copy of an installed pass, given as a pass path, clashes by name; the
    error names the option that leaves the installed plugin out, which then works."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    install_distribution(site, "geplug-marks", {"marks": PLUGIN.format(marker="installed")})
    copy = write("dev/marks_dev.py", PLUGIN.format(marker="dev"))
    with pytest.raises(DuplicatePassNameError) as caught:
        compile_graph(small_graph(), pass_paths=[copy])
    assert caught.value.message.endswith(
        "; to run the other one, leave the installed plugin out: --option "
        "ge.passes.disabled_plugins=geplug-marks:marks (ge.compile's "
        "options={'ge.passes.disabled_plugins': 'geplug-marks:marks'})")
    report = compile_graph(small_graph(), pass_paths=[copy],
                           options={"ge.passes.disabled_plugins": "marks"})
    assert identities(report.graph) == ["dev"]


@pytest.mark.ge_entry_points
def test_an_installed_pass_loaded_after_a_path_copy_names_the_option_too(
        tmp_path: Path, write, monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial P: the copy on ASCEND_GE_PY_PASS_PATH loads first, the installed plugin's
    pass then clashes with it: the error named both but not the way out."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    install_distribution(site, "geplug-marks", {"marks": PLUGIN.format(marker="installed")})
    copy = write("dev/marks_dev.py", PLUGIN.format(marker="dev"))
    monkeypatch.setenv("ASCEND_GE_PY_PASS_PATH", str(copy))
    with pytest.raises(DuplicatePassNameError) as caught:
        compile_graph(small_graph())
    assert str(copy) in caught.value.message
    assert caught.value.message.endswith(
        "; to run the other one, leave the installed plugin out: --option "
        "ge.passes.disabled_plugins=geplug-marks:marks (ge.compile's "
        "options={'ge.passes.disabled_plugins': 'geplug-marks:marks'})")
    report = compile_graph(small_graph(), options={"ge.passes.disabled_plugins": "marks"})
    assert identities(report.graph) == ["dev"]


def test_a_pass_of_the_process_and_one_of_a_pass_path_clash_with_the_way_out(write) -> None:
    """A pass path bringing a pass of the name of one the user's code registered is E13030
    (as with the environment's), saying how to take the process's one out; done so, the
    compilation runs the plugin's."""
    @register_fusion_pass(name="Marks", stage=PassStage.BEFORE_INFER_SHAPE)
    class Marks(FusionBasePass):
        def run(self, graph, context):
            insert_identity(graph, "service")

    plugin = write("team/marks.py", PLUGIN.format(marker="team"))
    with pytest.raises(DuplicatePassNameError) as caught:
        compile_graph(small_graph(), pass_paths=[plugin])
    key = Marks.__ge_pass_descriptor__.descriptor_key
    assert caught.value.message.endswith(
        "; Marks is registered by code of this process: ge.passes.registry.unregister_passes("
        f"[ge.passes.get_registered_pass_by_descriptor_key({key!r})]) takes it out")
    ge.passes.registry.unregister_passes(
        [ge.passes.get_registered_pass_by_descriptor_key(key)])
    assert identities(compile_graph(small_graph(), pass_paths=[plugin]).graph) == ["team"]


def test_a_pass_paths_plugin_is_never_in_the_process_registry_even_while_it_imports(
        write) -> None:
    """While one compilation imports its pass path's plugin, another thread sees nothing of
    it in `ge.passes` and may register a pass of the same name itself."""
    import threading
    import types

    gate = types.SimpleNamespace(importing=threading.Event(), go_on=threading.Event())
    sys.modules["marks_gate"] = gate  # type: ignore[assignment]
    plugin = write("slow/marks.py", PLUGIN.format(marker="slow") + (
        "\nimport marks_gate\nmarks_gate.importing.set()\nmarks_gate.go_on.wait(10)\n"))
    outcome: list[object] = []
    compiling = threading.Thread(target=lambda: outcome.append(
        identities(compile_graph(small_graph(), pass_paths=[plugin]).graph)))
    compiling.start()
    try:
        assert gate.importing.wait(10)
        assert "Marks" not in [d.pass_name for d in ge.passes.get_registered_passes()]

        @register_fusion_pass(name="Marks", stage=PassStage.BEFORE_INFER_SHAPE)
        class Marks(FusionBasePass):
            def run(self, graph, context):
                return True

        ge.passes.registry.unregister_passes([Marks.__ge_pass_descriptor__])
    finally:
        gate.go_on.set()
        compiling.join(20)
        sys.modules.pop("marks_gate", None)
    assert outcome == [["slow"]]


def test_the_layers_are_attributes_of_ge() -> None:
    """`ge.compiler.current_pass_registry()` as the docs write it, after `import ge` alone."""
    import subprocess

    code = ("import ge; print(type(ge.compiler.current_pass_registry()).__name__, "
            "'compiler' in dir(ge))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env={**os.environ, "GE_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert done.stdout.split() == ["PassRegistry", "True"]
