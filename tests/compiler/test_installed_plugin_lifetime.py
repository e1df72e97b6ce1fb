"""An installed plugin in a running process (user trial B): edited in place (an editable
install) or upgraded while the process holds the compiler. It stays imported for the life
of the process, so each compilation says when it runs an edited plugin's old code, an
E13028 of that code says its file changed, and an entry point first imported after an
upgrade is labelled with the distribution installed then."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import ge
from ge.compiler import compile_graph, current_pass_registry
from ge.errors import CompileWarning, PassRunError
from plugin_fixtures import install_distribution, small_graph

pytestmark = pytest.mark.ge_entry_points  # the isolation lets installed plugins autoload

PASS = """\
from ge.passes import FusionBasePass, register_fusion_pass


@register_fusion_pass(name="TeamB", stage="BeforeInferShape")
class TeamB(FusionBasePass):
    def run(self, graph, context):
        return {result}
"""



def _edit(path: Path, text: str) -> None:
    """Write `text` to `path` as an editor would (another size: the stamp reads it)."""
    path.write_text(text)


def test_an_edited_installed_plugin_is_told_at_each_compilation_finalize_included(
        site: Path) -> None:
    package = install_distribution(site, "teamb-fusions", {"double_neg": PASS.format(
        result="True")}, version="0.3.0")
    source = site / package / "double_neg.py"
    ge.initialize()
    with _no_warning():
        compile_graph(small_graph())
    _edit(source, PASS.format(result="False  # edited: fails"))
    for restarted in (False, True):
        if restarted:
            ge.finalize()
            ge.initialize()
        with pytest.warns(CompileWarning) as caught:
            report = compile_graph(small_graph())  # the old code, which succeeds, runs
        assert [r.pass_name for r in report.records] == ["TeamB"]
        (warning,) = [str(w.message) for w in caught]
        assert warning == (
            "plugin entry point double_neg = teamb_fusions_pkg.double_neg (teamb-fusions "
            f"0.3.0) changed (or went) since the compiler loaded it ({source}): this "
            "compilation runs the code imported then; an installed plugin stays imported "
            "for the life of the process, ge.finalize() included: restart the process to "
            "run the edited code, or give the file as a pass path with the installed plugin "
            "left out (--option ge.passes.disabled_plugins=teamb-fusions:double_neg "
            "(ge.compile's options={'ge.passes.disabled_plugins': 'teamb-fusions:double_neg'}))")


def test_an_e13028_of_an_edited_plugins_old_code_says_its_file_changed(site: Path) -> None:
    package = install_distribution(site, "teamb-fusions", {"double_neg": PASS.format(
        result="False")}, version="0.3.0")
    source = site / package / "double_neg.py"
    graph = small_graph()
    before = [(n.name, n.type) for n in graph.get_all_nodes()]
    with pytest.raises(PassRunError) as first:
        compile_graph(graph)
    assert "changed since it was loaded" not in first.value.message
    _edit(source, "# a\n# b\n# c\n" + source.read_text())
    with pytest.warns(CompileWarning, match="changed \\(or went\\) since the compiler loaded"), \
            pytest.raises(PassRunError) as caught:
        compile_graph(graph)
    assert caught.value.code == "E13028"
    assert caught.value.message == (
        "Failed to run custom fusion pass TeamB. Return code: False. Reason: run() returned "
        "False, which GE reads as a failure (its changes are undone): return "
        "ge.passes.NOT_CHANGED when the pass found nothing to change, True when it changed "
        f"the graph. ({source} changed since it was loaded: the code that ran, and the "
        "line named, are as it was then.)")
    assert caught.value.location == first.value.location  # the old code's line
    assert [(n.name, n.type) for n in graph.get_all_nodes()] == before


def test_an_entry_point_first_imported_after_an_upgrade_has_the_new_version(
        site: Path) -> None:
    """It was labelled `(None None)`: the metadata listed at the start had gone."""
    install_distribution(site, "teama-fusions", {"matmul_add": PASS.format(result="True")},
                         version="1.0.0")
    ge.initialize({"ge.passes.disabled_plugins": "matmul_add"})  # listed, not imported
    assert "TeamB" not in current_pass_registry()
    shutil.rmtree(site / "teama_fusions-1.0.0.dist-info")  # pip install -U, in place
    info = site / "teama_fusions-1.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: teama-fusions\nVersion: 1.1.0\n")
    (info / "entry_points.txt").write_text(
        "[ge.passes.plugins]\nmatmul_add = teama_fusions_pkg.matmul_add\n")
    report = compile_graph(small_graph(), options={"ge.passes.disabled_plugins": ""})
    (record,) = report.records
    assert record.origin.startswith(
        "entry point matmul_add = teama_fusions_pkg.matmul_add (teama-fusions 1.1.0) at ")


class _no_warning:
    """A block that fails on any warning."""

    def __enter__(self) -> None:
        import warnings

        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        warnings.simplefilter("error")

    def __exit__(self, *exc: object) -> None:
        self._catch.__exit__(*exc)
