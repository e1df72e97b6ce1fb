"""Two installed distributions bringing a pass of one name (user trial B): the E13030 names
each side (distribution, version, entry point, file:line) and gives, for each, the option
that leaves out exactly the other one, which then compiles; `distribution:name` is accepted
in any spelling of the distribution that pip and importlib.metadata normalise alike."""

from __future__ import annotations

import json
import re
from pathlib import Path

import onnx
import pytest
from cli_helpers import run_ge

import ge
from plugin_fixtures import install_distribution
from sample_models import relu_model

pytestmark = pytest.mark.ge_entry_points  # the isolation lets installed plugins autoload

PASS = """
from ge.passes import FusionBasePass, register_fusion_pass


@register_fusion_pass(name="FuseIt", stage="BeforeInferShape")
class {cls}(FusionBasePass):
    def run(self, graph, context):
        graph.find_node_by_name("relu").set_metadata("by", "{cls}")
        return True
"""


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "relu.onnx"
    onnx.save(relu_model(), path)
    return path


def _install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, second_name: str) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    install_distribution(site, "teama-fusions", {"matmul_add": PASS.format(cls="TeamA")},
                         version="1.0.0")
    install_distribution(site, "teamc-fusions", {second_name: PASS.format(cls="TeamC")},
                         version="0.1.0")
    monkeypatch.syspath_prepend(str(site))
    return site


def _refused(model: Path, out: Path) -> str:
    """`ge compile --json` refused with E13030: its message, after checking nothing was
    written and the model is as it was."""
    before = model.read_bytes()
    code, stdout, _ = run_ge("compile", str(model), "-o", str(out), "--json")
    assert code == 1
    error = json.loads(stdout)
    assert (error["code"], error["type"]) == ("E13030", "DuplicatePassNameError")
    assert error["message"].startswith("python pass name already exists: FuseIt; ")
    assert not out.exists() and model.read_bytes() == before
    return str(error["message"])


def _ran_by(model: Path, out: Path, disabled: str, *given: str) -> str:
    """Compile leaving `disabled` out: which class's FuseIt ran (the mark it left). As a
    `ge compile` process of its own: the two plugins are never loaded in one lifetime."""
    ge.finalize()
    code, stdout, err = run_ge("compile", str(model), "-o", str(out), "--no-builtin", "--json",
                               "--option", f"ge.passes.disabled_plugins={disabled}", *given)
    assert code == 0, stdout + err
    assert json.loads(stdout)["warnings"] == []
    (relu,) = onnx.load(out).graph.node
    return {p.key: p.value for p in relu.metadata_props}["by"]


@pytest.mark.parametrize("second_name", ["matmul_add", "fuse"])
def test_the_clash_names_each_side_and_the_option_that_runs_each(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: Path, second_name: str) -> None:
    site = _install(tmp_path, monkeypatch, second_name)
    err = _refused(model, tmp_path / "out.onnx")
    a_file = site / "teama_fusions_pkg" / "matmul_add.py"
    c_file = site / "teamc_fusions_pkg" / f"{second_name}.py"
    assert (f"TeamC at {c_file}:6 reuses the name of TeamA at {a_file}:6; TeamC is entry point "
            f"{second_name} = teamc_fusions_pkg.{second_name} (teamc-fusions 0.1.0), TeamA is "
            "entry point matmul_add = teama_fusions_pkg.matmul_add (teama-fusions 1.0.0); ") in err
    ways = re.findall(r"to run (\w+) \(([\w-]+)\), leave the other out: --option "
                      r"ge\.passes\.disabled_plugins=(\S+) ", err)
    assert ways == [("TeamC", "teamc-fusions", "teama-fusions:matmul_add"),
                    ("TeamA", "teama-fusions", f"teamc-fusions:{second_name}")]
    assert "leave the installed plugin out" not in err  # (no unqualified hint, twice or once)
    for cls, _, disabled in ways:  # each option leaves out exactly one: the other's runs
        assert _ran_by(model, tmp_path / f"{cls}.onnx", disabled) == cls


@pytest.mark.parametrize("spelling", ["teamc_fusions:matmul_add", "TeamC.Fusions:matmul_add"])
def test_a_distribution_is_named_in_any_spelling_that_normalises_alike(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: Path, spelling: str) -> None:
    """`teamc_fusions:matmul_add` gave "unknown plugin ... ignored" and then the E13030."""
    _install(tmp_path, monkeypatch, "matmul_add")
    assert _ran_by(model, tmp_path / "out.onnx", spelling) == "TeamA"
    code, stdout, _ = run_ge("passes", "list", "--json", "--option",
                             f"ge.passes.disabled_plugins={spelling}")
    assert code == 0
    payload = json.loads(stdout)
    assert payload["disabled"] == ["teamc-fusions:matmul_add"] and payload["warnings"] == []
    # the bare name still leaves out both (it names both entry points), as documented
    code, _, err = run_ge("compile", str(model), "-o", str(tmp_path / "none.onnx"), "-q",
                          "--no-builtin", "--option", "ge.passes.disabled_plugins=matmul_add")
    assert code == 0 and "warning" not in err


def test_a_skipped_plugin_is_told_once_and_its_helper_import_names_both_lines(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: Path) -> None:
    """An ImportError raised in a plugin's helper module named only `_helper.py:1`: the
    E13029 names the plugin's importing line as its location and the helper's as
    `raised_in`, as E13028 does. Under continue_on_plugin_error it is told once (a stderr
    warning), not also as a stdout "skipped plugin:" line."""
    site = tmp_path / "site"
    site.mkdir()
    package = install_distribution(site, "teamd-broken", {
        "innerimp": PASS.format(cls="TeamD") + "\nfrom teamd_broken_pkg._helper import x\n"})
    (site / package / "_helper.py").write_text("from ge.passes import no_such_name_in_ge\n")
    monkeypatch.syspath_prepend(str(site))
    own, helper = site / package / "innerimp.py", site / package / "_helper.py"

    before = model.read_bytes()
    code, stdout, _ = run_ge("compile", str(model), "-o", str(tmp_path / "no.onnx"), "--json")
    assert code == 1
    error = json.loads(stdout)
    assert (error["code"], error["type"]) == ("E13029", "PluginLoadError")
    assert error["message"].startswith(
        "Failed to load custom fusion pass lib entry point innerimp = teamd_broken_pkg.innerimp "
        "(teamd-broken 1.0). Reason: ImportError: cannot import name 'no_such_name_in_ge'")
    assert (error["location"], error["raised_in"]) == (f"{own}:11", f"{helper}:1")
    assert not (tmp_path / "no.onnx").exists() and model.read_bytes() == before

    ge.finalize()
    code, stdout, err = run_ge("compile", str(model), "-o", str(tmp_path / "out.onnx"), "-q",
                               "--option", "ge.passes.continue_on_plugin_error=true")
    assert code == 0, err
    assert err.count("python pass plugin skipped: [E13029]") == 1, err
    assert f"(at {own}:11, raised in {helper}:1)" in err
    assert "skipped plugin" not in stdout and "E13029" not in stdout


def test_what_a_callable_entry_point_returned_names_its_distribution(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    package = install_distribution(site, "teamh-odd", {"hooks": "CONST = 42\n"
                                                       "def returns_str():\n"
                                                       "    return 'TeamHSomething'\n"})
    (site / "teamh_odd-1.0.dist-info" / "entry_points.txt").write_text(
        f"[ge.passes.plugins]\nretstr = {package}.hooks:returns_str\n"
        f"notcallable = {package}.hooks:CONST\n")
    monkeypatch.syspath_prepend(str(site))
    for name, value, what in [
            ("notcallable", f"{package}.hooks:CONST", "names neither a module nor a callable"),
            ("retstr", f"{package}.hooks:returns_str",
             "returned str; expected None or an iterable of registered pass classes")]:
        ge.finalize()
        before = model.read_bytes()
        code, stdout, _ = run_ge("compile", str(model), "-o", str(tmp_path / "no.onnx"),
                                 "--json", "--option", "ge.passes.disabled_plugins="
                                 + ("retstr" if name == "notcallable" else "notcallable"))
        assert code == 1
        error = json.loads(stdout)
        assert (error["code"], error["type"]) == ("E13030", "PassRegisterTypeError")
        assert error["message"] == f"entry point {name} = {value} (teamh-odd 1.0) {what}"
        assert not (tmp_path / "no.onnx").exists() and model.read_bytes() == before


def test_an_entry_point_registering_no_pass_is_told_as_a_pass_path_file_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: Path) -> None:
    """An entry point naming a package whose `__init__` registers nothing, or a module whose
    pass class lacks its decorator, loaded in silence, while the same file given as a pass
    path warned "... is never run"."""
    site = tmp_path / "site"
    site.mkdir()
    package = install_distribution(site, "teamh-odd", {"undecorated": """\
        from ge.passes import FusionBasePass


        class ForgotDecorator(FusionBasePass):
            def run(self, graph, context):
                return True
        """})
    (site / "teamh_odd-1.0.dist-info" / "entry_points.txt").write_text(
        f"[ge.passes.plugins]\npkgonly = {package}\nundecorated = {package}.undecorated\n")
    monkeypatch.syspath_prepend(str(site))
    undecorated = site / package / "undecorated.py"
    code, stdout, err = run_ge("compile", str(model), "-o", str(tmp_path / "out.onnx"),
                               "--json", "--no-builtin")
    assert code == 0, err
    assert [(w["category"], w["message"]) for w in json.loads(stdout)["warnings"]] == [
        ("CompileWarning", "entry point pkgonly = teamh_odd_pkg (teamh-odd 1.0) registers no "
         f"pass: importing module teamh_odd_pkg ({site / package / '__init__.py'}) registered "
         "none, so ge runs nothing of it; an entry point of group ge.passes.plugins names the "
         "module whose import registers passes (@register_fusion_pass, "
         "@register_decompose_pass), or a callable that registers or returns them (or "
         "registers custom operators)"),
        ("PassDefinitionWarning", f"ForgotDecorator in {undecorated} is never run: the plugin "
         "(entry point undecorated = teamh_odd_pkg.undecorated (teamh-odd 1.0)) registers no "
         "pass, and ForgotDecorator has no @register_fusion_pass(name=..., stage=...) (at "
         f"{undecorated}:4)")]

    ge.finalize()  # the same file as a pass path, the installed plugin left out: as before
    code, stdout, err = run_ge("compile", str(model), "-o", str(tmp_path / "out.onnx"),
                               "--json", "--no-builtin", "--pass-path", str(undecorated),
                               "--option", "ge.passes.disable_plugin_autoload=true")
    assert code == 0, err
    assert [w["message"] for w in json.loads(stdout)["warnings"]] == [
        f"ForgotDecorator in {undecorated} is never run: the plugin registers no pass, and "
        f"ForgotDecorator has no @register_fusion_pass(name=..., stage=...) (at {undecorated}:4)"]


@pytest.mark.parametrize("how", ["environment", "pass path"])
def test_one_file_reached_as_an_entry_point_and_a_pass_path_is_said_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: Path, how: str) -> None:
    """It read "TeamA at f.py:6 reuses the name of TeamA at f.py:6", the same line twice."""
    site = tmp_path / "site"
    site.mkdir()
    package = install_distribution(site, "teama-fusions", {"matmul_add": PASS.format(
        cls="TeamA")}, version="1.0.0")
    monkeypatch.syspath_prepend(str(site))
    source = site / package / "matmul_add.py"
    given = ["--pass-path", str(source)] if how == "pass path" else []
    if how == "environment":
        monkeypatch.setenv("ASCEND_GE_PY_PASS_PATH", str(source))
    out = tmp_path / "out.onnx"
    before = model.read_bytes()
    code, stdout, _ = run_ge("compile", str(model), "-o", str(out), "--json", *given)
    assert code == 1
    error = json.loads(stdout)
    assert (error["code"], error["type"]) == ("E13030", "DuplicatePassNameError")
    # (trial T: it said "(ASCEND_GE_PY_PASS_PATH or --pass-path)" though ge knew which)
    reached, off = {
        "environment": ("a pass path in ASCEND_GE_PY_PASS_PATH", "ASCEND_GE_PY_PASS_PATH"),
        "pass path": ("a pass path given (--pass-path, pass_paths=)",
                      "the pass paths given")}[how]
    assert error["message"] == (
        f"python pass name already exists: FuseIt; TeamA at {source}:6 reuses the name of "
        f"TeamA at {source}:6; that is one file, reached both as entry point matmul_add = "
        f"teama_fusions_pkg.matmul_add (teama-fusions 1.0.0) and as {reached}, and imported "
        f"for each: give it one way, taking the file off {off} or leaving the installed "
        "plugin out: --option "
        "ge.passes.disabled_plugins=teama-fusions:matmul_add (ge.compile's "
        "options={'ge.passes.disabled_plugins': 'teama-fusions:matmul_add'})")
    assert not out.exists() and model.read_bytes() == before
    ge.finalize()  # the way out given works
    assert _ran_by(model, out, "teama-fusions:matmul_add", *given) == "TeamA"


def _install_three(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site3"
    site.mkdir()
    for dist, cls in (("teama-fusions", "TeamA"), ("teamb-fusions", "TeamB"),
                      ("teamc-fusions", "TeamC")):
        install_distribution(site, dist, {"matmul_add": PASS.format(cls=cls)})
    monkeypatch.syspath_prepend(str(site))


def _ways(message: str) -> dict[str, str]:
    return dict(re.findall(r"to run (\w+) \([\w-]+\), leave the others? out: --option "
                           r"ge\.passes\.disabled_plugins=(\S+) ", message))


def test_a_three_way_clash_gives_each_side_the_value_leaving_out_all_others(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: Path) -> None:
    """Trial E: three distributions registering FuseIt failed twice (E13029 of two E13030),
    each hint leaving out one other side and dropping what disabled_plugins held already:
    following them went in a circle. Now one E13030 names the three, and each side's value
    (the option is given once) leaves out both others, and runs it."""
    _install_three(tmp_path, monkeypatch)
    message = _refused(model, tmp_path / "out.onnx")
    assert "TeamC at " in message and "reuses it too" in message
    assert _ways(message) == {
        "TeamB": "teama-fusions:matmul_add,teamc-fusions:matmul_add",
        "TeamA": "teamb-fusions:matmul_add,teamc-fusions:matmul_add",
        "TeamC": "teamb-fusions:matmul_add,teama-fusions:matmul_add"}
    for cls, value in _ways(message).items():
        assert _ran_by(model, tmp_path / f"{cls}.onnx", value) == cls
    # what the option holds already is kept in each value
    before = model.read_bytes()
    out = tmp_path / "given.onnx"
    code, stdout, _ = run_ge("compile", str(model), "-o", str(out), "--json", "--option",
                             "ge.passes.disabled_plugins=teamb-fusions:matmul_add")
    assert code == 1 and not out.exists() and model.read_bytes() == before
    error = json.loads(stdout)
    assert error["code"] == "E13030", error["message"]
    assert _ways(error["message"]) == {
        "TeamC": "teamb-fusions:matmul_add,teama-fusions:matmul_add",
        "TeamA": "teamb-fusions:matmul_add,teamc-fusions:matmul_add"}
