"""An unknown plugin name given to disable is a warning naming the installed plugins, not an
error (a shared configuration may name a plugin this environment does not have): for
`ge passes list --disable NAME` and for the option `ge.passes.disabled_plugins`, with
`ge compile --option` too. `ge compile --disable NAME` names *passes* and stays GE1202."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from cli_helpers import run_ge
from onnx import TensorProto, helper

from plugin_fixtures import install_distribution

pytestmark = pytest.mark.ge_entry_points  # the isolation lets installed plugins autoload

PASS = """
from ge.passes import FusionBasePass, register_fusion_pass


@register_fusion_pass(name="{name}", stage="BeforeInferShape")
class {name}(FusionBasePass):
    def run(self, graph, context):
        return True
"""

UNKNOWN = ("cannot disable unknown plugin(s) nosuch: no installed entry point of group "
           "ge.passes.plugins has that name (installed plugins: geplug-cli:alpha, "
           "geplug-cli:beta); the name is ignored")


@pytest.fixture(autouse=True)
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    install_distribution(folder, "geplug-cli", {"alpha": PASS.format(name="AlphaPass"),
                                                "beta": PASS.format(name="BetaPass")})
    monkeypatch.syspath_prepend(str(folder))
    return folder


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "relu.onnx"
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_passes_list_warns_about_an_unknown_name_and_disables_the_known_one() -> None:
    code, out, _ = run_ge("passes", "list", "--json", "--disable", "nosuch",
                          "--disable", "alpha")
    assert code == 0
    payload = json.loads(out)
    assert [p["name"] for p in payload["passes"] if not p["builtin"]] == ["BetaPass"]
    assert payload["disabled"] == ["geplug-cli:alpha"]
    assert [(w["category"], w["message"]) for w in payload["warnings"]] == [
        ("CompileWarning", UNKNOWN)]

    code, _, err = run_ge("passes", "list", "--disable", "nosuch")
    assert code == 0
    assert f"ge: warning: {UNKNOWN}" in err


def test_the_option_in_passes_list_and_compile_warns_too(model: Path, tmp_path: Path) -> None:
    code, out, _ = run_ge("passes", "list", "--json", "--option",
                          "ge.passes.disabled_plugins=nosuch")
    assert code == 0
    assert [w["message"] for w in json.loads(out)["warnings"]] == [UNKNOWN]

    code, out, _ = run_ge("compile", str(model), "-o", str(tmp_path / "out.onnx"), "--json",
                          "--no-builtin", "--option", "ge.passes.disabled_plugins=nosuch,beta")
    assert code == 0
    report = json.loads(out)
    assert [p["name"] for p in report["passes"]] == ["AlphaPass"]
    assert [(w["category"], w["message"]) for w in report["warnings"]] == [
        ("CompileWarning", UNKNOWN)]


def test_compile_disable_names_passes_and_an_unknown_one_is_an_error(
    model: Path, tmp_path: Path
) -> None:
    code, out, _ = run_ge("compile", str(model), "-o", str(tmp_path / "out.onnx"), "--json",
                          "--no-builtin", "--disable", "nosuch")
    assert code == 1
    error = json.loads(out)
    assert error["code"] == "GE1202"
    assert error["message"].startswith("cannot disable unknown pass(es) nosuch; known passes: ")
    assert not (tmp_path / "out.onnx").exists()


@pytest.mark.parametrize("name", ["alpha", "geplug-cli:alpha"])
def test_compile_disable_of_an_entry_point_name_says_how_to_leave_the_plugin_out(
    model: Path, tmp_path: Path, name: str
) -> None:
    """`--disable alpha` where alpha is an installed entry point, not a pass: GE1202 says so
    and gives the option that leaves the plugin out (a user trial gave `--disable qkv`)."""
    out = tmp_path / "out.onnx"
    code, stdout, err = run_ge("compile", str(model), "-o", str(out), "--disable", name)
    assert code == 1 and stdout == ""
    assert err.startswith(
        f"ge: [GE1202] cannot disable unknown pass(es) {name} (the entry point "
        "geplug-cli:alpha of an installed plugin (group ge.passes.plugins), not a pass: "
        f"leave it out with --option ge.passes.disabled_plugins={name} (ge.compile's "
        f"options={{'ge.passes.disabled_plugins': '{name}'}})); known passes: ")
    assert "AlphaPass" in err and "\n" not in err.rstrip("\n")
    assert not out.exists()

    code, stdout, _ = run_ge("compile", str(model), "-o", str(out), "--no-builtin",
                             "--json", "--option", f"ge.passes.disabled_plugins={name}")
    assert code == 0
    assert [p["name"] for p in json.loads(stdout)["passes"]] == ["BetaPass"]


@pytest.mark.parametrize("how", ["environment", "option"])
def test_compile_disable_of_a_plugin_pass_with_autoloading_off_says_plugins_were_not_loaded(
    model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """Trial B: `GE_DISABLE_PLUGIN_AUTOLOAD=1 ge compile --disable AlphaPass` was a bare
    "unknown pass": the GE1202 says the installed plugins were not loaded, and why."""
    options = ["--option", "ge.passes.disable_plugin_autoload=true"] if how == "option" else []
    if how == "environment":
        monkeypatch.setenv("GE_DISABLE_PLUGIN_AUTOLOAD", "1")
    out = tmp_path / "out.onnx"
    before = model.read_bytes()
    code, stdout, _ = run_ge("compile", str(model), "-o", str(out), "--json",
                             "--disable", "AlphaPass", *options)
    assert code == 1
    error = json.loads(stdout)
    assert (error["code"], error["type"]) == ("GE1202", "CompilerOptionError")
    why = ("GE_DISABLE_PLUGIN_AUTOLOAD is set" if how == "environment"
           else "the option ge.passes.disable_plugin_autoload is true")
    assert error["message"].startswith(
        "cannot disable unknown pass(es) AlphaPass (installed plugins were not loaded, as "
        f"{why}: a pass of one is not known); known passes: ")
    assert not out.exists() and model.read_bytes() == before


def test_disable_of_a_pass_of_a_plugin_left_out_says_so(model: Path, tmp_path: Path) -> None:
    """Trial E: `--disable AlphaPass` with alpha's plugin left out read as a misspelt pass
    ("cannot disable unknown pass(es) AlphaPass; known passes: ..."); it says the plugins
    the option leaves out were not loaded, as the autoload-off case says."""
    out = tmp_path / "out.onnx"
    code, stdout, err = run_ge("compile", str(model), "-o", str(out), "--disable", "AlphaPass",
                               "--option", "ge.passes.disabled_plugins=alpha")
    assert code == 1 and stdout == "" and not out.exists()
    assert err.startswith(
        "ge: [GE1202] cannot disable unknown pass(es) AlphaPass (the installed plugins that "
        "ge.passes.disabled_plugins=alpha leaves out were not loaded: a pass of one is not "
        "known); known passes: ")


def test_with_autoload_off_an_entry_point_name_is_not_advised_to_be_left_out(
        model: Path, tmp_path: Path) -> None:
    """Trial E: with installed plugins not loaded at all, `--disable alpha` advised leaving
    the entry point out with disabled_plugins, which does nothing then."""
    out = tmp_path / "out.onnx"
    code, stdout, err = run_ge("compile", str(model), "-o", str(out), "--disable", "alpha",
                               "--option", "ge.passes.disable_plugin_autoload=true")
    assert code == 1 and stdout == "" and not out.exists()
    assert err.startswith(
        "ge: [GE1202] cannot disable unknown pass(es) alpha (the entry point "
        "geplug-cli:alpha of an installed plugin (group ge.passes.plugins), not a pass: "
        "installed plugins are not loaded, as the option ge.passes.disable_plugin_autoload "
        "is true); known passes:")
    assert "disabled_plugins" not in err


def _odd_names(site: Path) -> None:
    """Distribution odd-names: entry points `a:b`, `has space` and `p3,comma` (names pip
    takes)."""
    (site / "odd_pkg").mkdir()
    (site / "odd_pkg" / "__init__.py").write_text("")
    (site / "odd_pkg" / "p2.py").write_text(PASS.format(name="OddTwo"))
    (site / "odd_pkg" / "p3.py").write_text(PASS.format(name="OddThree"))
    (site / "odd_pkg" / "p1.py").write_text(PASS.format(name="OddOne"))
    info = site / "odd_names-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: odd-names\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[ge.passes.plugins]\na:b = odd_pkg.p1\nhas space = odd_pkg.p2\np3,comma = odd_pkg.p3\n")


def test_odd_entry_point_names_are_quoted_or_said_unnameable(
        model: Path, tmp_path: Path, site: Path) -> None:
    """Trial E: the option value given for `has space` was not quoted for a shell, and one
    for `p3,comma` named two plugins (`p3` and `comma`), neither of them it."""
    _odd_names(site)
    out = tmp_path / "out.onnx"
    code, _, err = run_ge("compile", str(model), "-o", str(out), "--disable", "has space")
    assert code == 1 and not out.exists()
    assert ("not a pass: leave it out with --option 'ge.passes.disabled_plugins=has space' "
            "(ge.compile's options={'ge.passes.disabled_plugins': 'has space'})") in err
    code, _, err = run_ge("compile", str(model), "-o", str(out), "--disable", "p3,comma")
    assert code == 1 and not out.exists()
    assert ("not a pass: entry point 'p3,comma' of odd-names cannot be left out: "
            "ge.passes.disabled_plugins separates names by commas, and its name holds one; "
            "uninstall odd-names") in err
    assert "--option ge.passes.disabled_plugins=p3" not in err
    # the quoted value, as a shell hands it over, leaves `has space` out
    code, stdout, _ = run_ge("compile", str(model), "-o", str(out), "--no-builtin", "--json",
                             "--option", "ge.passes.disabled_plugins=has space")
    assert code == 0
    assert "OddTwo" not in [p["name"] for p in json.loads(stdout)["passes"]]


def test_passes_list_prints_names_as_they_are(site: Path) -> None:
    """Trial E: rich read `:a:` of `odd-names:a:b` as an emoji (`odd-names🅰b`)."""
    _odd_names(site)
    code, out, _ = run_ge("passes", "list", "--disable", "odd-names:a:b")
    assert code == 0
    assert "Disabled entry points: odd-names:a:b" in out and "\U0001f170" not in out
    assert "OddOne" not in out and "OddTwo" in out
