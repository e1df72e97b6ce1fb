"""Entry points of group `ge.passes.plugins` (D12), from real distributions in a temp dir.

The distributions are written the way `pip install --target` lays them out (a package plus
`<name>-<version>.dist-info` with METADATA and entry_points.txt) and found by the real
`importlib.metadata` through `sys.path`; nothing is mocked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ge.errors import CompileWarning, PluginLoadError
from ge.passes import get_registered_passes
from ge.passes.bootstrap import ENV_PY_PASS_PATH, discover_plugins, load_pass_plugins

PASS_MODULE = """
from ge.passes import FusionBasePass, register_fusion_pass

@register_fusion_pass(name="{name}", stage="AfterInferShape")
class {name}(FusionBasePass):
    def run(self, graph, context):
        return True
"""


def make_distribution(
    site: Path, dist: str, version: str, entry_points: dict[str, str], files: dict[str, str]
) -> None:
    """Install a tiny distribution into `site` as pip --target would."""
    for relative, source in files.items():
        path = site / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[ge.passes.plugins]\n{lines}")
    (info / "RECORD").write_text("")


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A site directory holding two plugin distributions (not yet on sys.path)."""
    root = tmp_path / "site"
    make_distribution(
        root,
        "geplug-beta",
        "1.2.3",
        {
            "beta": "geplug_beta.passes",
            "beta_callable": "geplug_beta.hooks:plugin",
            "a_broken": "geplug_beta.broken",
        },
        {
            "geplug_beta/__init__.py": "",
            "geplug_beta/passes.py": PASS_MODULE.format(name="BetaPass"),
            "geplug_beta/more.py": PASS_MODULE.format(name="BetaMore"),
            "geplug_beta/hooks.py": """
                def plugin():
                    from geplug_beta import more
                    return [more.BetaMore]
            """,
            "geplug_beta/broken.py": "X = 1\nraise RuntimeError('broken entry point')\n",
        },
    )
    make_distribution(
        root,
        "geplug-alpha",
        "0.1",
        {"zeta": "geplug_alpha"},
        {"geplug_alpha/__init__.py": PASS_MODULE.format(name="AlphaPass")},
    )
    return root


def _names() -> list[str]:
    return [d.pass_name for d in get_registered_passes()]


def test_entry_points_load_sorted_by_distribution_then_name_each_isolated(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(site))
    report = discover_plugins(entry_points=True)
    assert _names() == ["AlphaPass", "BetaPass", "BetaMore"]
    (failure,) = report.failures
    assert isinstance(failure, PluginLoadError) and failure.code == "E13029"
    assert "RuntimeError: broken entry point" in failure.message
    assert "entry point a_broken = geplug_beta.broken (geplug-beta 1.2.3)" in failure.message
    assert failure.location is not None
    assert failure.location.file == str(site / "geplug_beta" / "broken.py")
    assert failure.location.line == 2
    assert "geplug_beta.broken" not in sys.modules
    origins = {p.origin.entry_point: p.origin for p in report.plugins}
    beta = origins["beta = geplug_beta.passes"]
    assert (beta.kind, beta.distribution, beta.version) == ("entry_point", "geplug-beta", "1.2.3")
    assert beta.path == str(site / "geplug_beta" / "passes.py")
    assert str(beta) == "entry point beta = geplug_beta.passes (geplug-beta 1.2.3)"


@pytest.mark.parametrize("disabled", ["beta", "geplug-beta:beta"])
def test_an_entry_point_can_be_disabled_by_name_before_it_is_imported(
    site: Path, monkeypatch: pytest.MonkeyPatch, disabled: str
) -> None:
    monkeypatch.syspath_prepend(str(site))
    report = discover_plugins(entry_points=True, disabled={disabled, "a_broken"})
    assert "geplug_beta.passes" not in sys.modules
    assert "geplug_beta.broken" not in sys.modules
    assert _names() == ["AlphaPass", "BetaMore"]
    assert report.disabled == ["geplug-beta:a_broken", "geplug-beta:beta"]
    assert report.failures == []


def test_env_paths_come_before_entry_points(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(site))
    plugin = tmp_path / "first.py"
    plugin.write_text(PASS_MODULE.format(name="FromEnv"))
    monkeypatch.setenv(ENV_PY_PASS_PATH, str(plugin))
    load_pass_plugins(disabled={"a_broken"})
    assert _names() == ["FromEnv", "AlphaPass", "BetaPass", "BetaMore"]


def test_a_callable_entry_point_must_return_registered_pass_classes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "badsite"
    make_distribution(
        site,
        "geplug-bad",
        "2.0",
        {"returns_text": "geplug_bad:text", "returns_plain": "geplug_bad:plain"},
        {
            "geplug_bad/__init__.py": """
                from ge.passes import FusionBasePass
                class NotRegistered(FusionBasePass):
                    pass
                def text():
                    return "NotAPass"
                def plain():
                    return [NotRegistered]
            """
        },
    )
    monkeypatch.syspath_prepend(str(site))
    report = discover_plugins(entry_points=True)
    messages = sorted(f.message for f in report.failures)
    assert [f.code for f in report.failures] == ["E13030", "E13030"]
    assert "provides class NotRegistered, which is not a registered pass" in messages[0]
    assert "returned str; expected None or an iterable of registered pass classes" in messages[1]
    assert get_registered_passes() == []


def test_an_entry_point_naming_nothing_is_not_located_in_importlib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A missing module or attribute fails inside importlib: the error names the entry
    point and its distribution, and points at no line of importlib's (audit)."""
    site = tmp_path / "gonesite"
    make_distribution(
        site, "geplug-gone", "1.0",
        {"no_module": "geplug_gone.nope", "no_attribute": "geplug_gone:missing"},
        {"geplug_gone/__init__.py": ""},
    )
    monkeypatch.syspath_prepend(str(site))
    report = discover_plugins(entry_points=True)
    by_entry = {f.message.split(" entry point ")[1].split(" = ")[0]: f for f in report.failures}
    assert sorted(by_entry) == ["no_attribute", "no_module"]
    for name, failure in by_entry.items():
        assert failure.code == "E13029" and "(geplug-gone 1.0)" in failure.message, name
        assert failure.location is None, failure.location
    assert "ModuleNotFoundError: No module named 'geplug_gone.nope'" in (
        by_entry["no_module"].message)


def _ge_env(site: Path, plugin_dir: Path) -> dict[str, str]:
    env = {**os.environ, ENV_PY_PASS_PATH: str(plugin_dir)}
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


@pytest.mark.ge_entry_points  # the `ge` subprocess inherits the isolation's environment
def test_ge_passes_list_shows_entry_points_of_an_installed_distribution(
    site: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "no_plugins"
    empty.mkdir()
    command = [sys.executable, "-m", "ge.cli", "passes", "list", "--json", "--disable", "a_broken"]
    result = subprocess.run(command, env=_ge_env(site, empty), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    by_name = {p["name"]: p for p in payload["passes"] if not p["builtin"]}
    assert set(by_name) == {"AlphaPass", "BetaPass", "BetaMore"}
    assert {p["origin"]["kind"] for p in payload["passes"] if p["builtin"]} == {"builtin"}
    origin = by_name["BetaMore"]["origin"]
    assert origin["kind"] == "entry_point"
    assert (origin["distribution"], origin["version"]) == ("geplug-beta", "1.2.3")
    assert origin["entry_point"] == "beta_callable = geplug_beta.hooks:plugin"
    assert origin["file"] == str(site / "geplug_beta" / "more.py")
    assert payload["disabled"] == ["geplug-beta:a_broken"]

    failing = subprocess.run(command[:-2], env=_ge_env(site, empty), capture_output=True, text=True)
    assert failing.returncode == 1
    assert json.loads(failing.stdout)["failures"][0]["code"] == "E13029"


def test_what_a_callable_entry_point_returns_that_is_no_pass_is_located_at_its_def(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """E13030 for junk a callable returned points at the callable's `def` line (a decorated
    one at its first decorator, a partial at its function's, a callable object at its
    `__call__`), for an unregistered class at its `class` line, and for an attribute that
    is no callable at its module's file (it has no line); it had no location at all
    (audit)."""
    site = tmp_path / "junksite"
    make_distribution(
        site,
        "geplug-junk",
        "1.0",
        {
            "number": "geplug_junk:number",
            "items": "geplug_junk:items",
            "decorated": "geplug_junk:decorated",
            "unregistered": "geplug_junk:unregistered",
            "value": "geplug_junk:VALUE",
            "instance": "geplug_junk:INSTANCE",
            "partial": "geplug_junk:PARTIAL",
        },
        {
            "geplug_junk/__init__.py": """\
                import functools
                from ge.passes import FusionBasePass

                VALUE = 3


                class NotRegistered(FusionBasePass):
                    pass


                def number():
                    return 42


                def items():
                    return [NotRegistered, "junk"][1:]


                @functools.lru_cache(maxsize=None)
                def decorated():
                    return 1.5


                def unregistered():
                    return [NotRegistered]


                class Factory:
                    def __call__(self):
                        return "junk"


                INSTANCE = Factory()
                PARTIAL = functools.partial(items)
            """,
        },
    )
    monkeypatch.syspath_prepend(str(site))
    report = discover_plugins(entry_points=True)
    by_entry = {f.message.split(" ", 3)[2]: f for f in report.failures}
    assert sorted(by_entry) == ["decorated", "instance", "items", "number", "partial",
                                "unregistered", "value"]
    assert {f.code for f in report.failures} == {"E13030"}
    module = str(site / "geplug_junk" / "__init__.py")
    expected = {"number": (module, 11), "items": (module, 15), "decorated": (module, 19),
                "unregistered": (module, 7), "value": (module, None),
                "instance": (module, 29), "partial": (module, 15)}
    for name, failure in by_entry.items():
        assert failure.location is not None, name
        assert (failure.location.file, failure.location.line) == expected[name], name
    assert "returned int; expected None or an iterable" in by_entry["number"].message
    assert "returned 'junk'; expected registered pass classes" in by_entry["items"].message
    assert str(by_entry["number"]).endswith(f"(at {module}:11)")
    assert get_registered_passes() == []


def test_a_package_entry_point_is_not_credited_with_its_siblings_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trial E: `pkgonly = weird` (an empty __init__) loaded after `p1 = weird.p1` and
    `p2 = weird.p2` was credited with W1 and W2 (the submodules imported by the siblings,
    found by module-name prefix): it got no "registers no pass" warning, and leaving p2 out
    still ran W2 through it. A registration belongs to the entry point whose import made it."""
    site = tmp_path / "weirdsite"
    make_distribution(
        site, "weird-eps", "0.1",
        {"p1": "weird.p1", "p2": "weird.p2", "pkgonly": "weird"},
        {"weird/__init__.py": "", "weird/p1.py": PASS_MODULE.format(name="W1"),
         "weird/p2.py": PASS_MODULE.format(name="W2")},
    )
    monkeypatch.syspath_prepend(str(site))
    with pytest.warns(CompileWarning) as caught:
        report = discover_plugins(entry_points=True)
    assert report.failures == []
    credited = {p.origin.entry_point: [d.pass_name for d in p.descriptors]
                for p in report.plugins}
    assert credited == {"p1 = weird.p1": ["W1"], "p2 = weird.p2": ["W2"],
                        "pkgonly = weird": []}
    assert [str(w.message) for w in caught] == [
        "entry point pkgonly = weird (weird-eps 0.1) registers no pass: importing module "
        f"weird ({site / 'weird' / '__init__.py'}) registered none, so ge runs nothing of it; "
        "an entry point of group ge.passes.plugins names the module whose import registers "
        "passes (@register_fusion_pass, @register_decompose_pass), or a callable that "
        "registers or returns them (or registers custom operators)"]
    again = discover_plugins(entry_points=True, disabled={"weird-eps:p2"})
    assert sorted(d.pass_name for d in again.descriptors()) == ["W1"]


def test_disabled_plugins_names_are_trimmed_around_the_colon_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trial E: " Team.A-Fusions : matmul_add " was an unknown plugin (only the spaces
    around commas were trimmed), and `weird-eps:a:b` (entry point `a:b`) never matched: the
    distribution was read up to the last colon."""
    from ge.compiler.options import parse_options
    from ge.passes.plugin_names import disabled_names

    site = tmp_path / "colonsite"
    make_distribution(
        site, "Team.A-Fusions", "1.0",
        {"a:b": "colon_pkg.p1", "has space": "colon_pkg.p2", "matmul_add": "colon_pkg.p3"},
        {"colon_pkg/__init__.py": "", "colon_pkg/p1.py": PASS_MODULE.format(name="C1"),
         "colon_pkg/p2.py": PASS_MODULE.format(name="C2"),
         "colon_pkg/p3.py": PASS_MODULE.format(name="C3")},
    )
    monkeypatch.syspath_prepend(str(site))
    value = " Team.A-Fusions : matmul_add , team_a_fusions:a:b,  has space "
    assert disabled_names(value) == {"Team.A-Fusions:matmul_add", "team_a_fusions:a:b",
                                     "has space"}
    options = parse_options({"ge.passes.disabled_plugins": value})
    assert options.disabled_plugins == disabled_names(value)
    report = discover_plugins(entry_points=True, disabled=options.disabled_plugins)
    assert report.failures == [] and _names() == []
    assert sorted(report.disabled) == ["Team.A-Fusions:a:b", "Team.A-Fusions:has space",
                                       "Team.A-Fusions:matmul_add"]
