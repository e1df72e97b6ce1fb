"""Plugin options are options of one compilation (`ge.passes.disabled_plugins`,
`ge.passes.disable_plugin_autoload`, `ge.passes.continue_on_plugin_error`).

A real distribution with entry points of group `ge.passes.plugins` is written into a
temporary site folder (a package plus its `.dist-info`) and put on `sys.path`, so
`importlib.metadata` finds it as it finds an installed one; the compiler loads it for real.
The first compilation's options do not become the defaults of the next; `ge.initialize`'s
do. A plugin a compilation disabled is not imported for it, and is imported when a later
compilation wants it.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Mapping
from pathlib import Path

import pytest

import ge
import ge.compiler
from ge.compiler import (
    ENV_DISABLE_PLUGIN_AUTOLOAD,
    OPTION_CONTINUE_ON_PLUGIN_ERROR,
    OPTION_DISABLE_PLUGIN_AUTOLOAD,
    OPTION_DISABLED_PLUGINS,
    compile_graph,
    current_pass_registry,
)
from ge.errors import (
    CompilerStateError,
    CompileWarning,
    DuplicatePassNameError,
    PluginLoadError,
    PluginLoadWarning,
)
from plugin_fixtures import install_distribution, small_graph

pytestmark = pytest.mark.ge_entry_points  # the isolation lets installed plugins autoload

DIST = "geplug-demo"

PASS = """
from ge.passes import FusionBasePass, register_fusion_pass
from plugin_fixtures import insert_identity


@register_fusion_pass(name="{name}", stage="BeforeInferShape")
class {name}(FusionBasePass):
    def run(self, graph, context):
        insert_identity(graph, "{name}_was_here")
"""



@pytest.fixture
def demo(site: Path) -> str:
    """geplug-demo 1.0 with the entry points `alpha` (AlphaPass) and `beta` (BetaPass)."""
    return install_distribution(site, DIST, {"alpha": PASS.format(name="AlphaPass"),
                                             "beta": PASS.format(name="BetaPass")})


def ran(options: Mapping[str, str] | None = None) -> list[str]:
    """The passes one compilation of a small graph ran (the built-in ones are off)."""
    return [r.pass_name for r in compile_graph(small_graph(), options=options).records]


def imported(package: str, name: str) -> bool:
    return f"{package}.{name}" in sys.modules


def test_a_disabled_plugin_is_left_out_of_that_compilation_only(demo: str) -> None:
    assert ran({OPTION_DISABLED_PLUGINS: "alpha"}) == ["BetaPass"]
    assert not imported(demo, "alpha")  # disabled before it is imported (D12)
    # The first compilation's options are not the defaults of the next one: alpha is
    # imported now that a compilation wants it.
    assert ran() == ["AlphaPass", "BetaPass"]
    assert imported(demo, "alpha")


def test_a_later_compilation_can_disable_a_plugin_an_earlier_one_loaded(demo: str) -> None:
    assert ran() == ["AlphaPass", "BetaPass"]
    assert ran({OPTION_DISABLED_PLUGINS: "alpha"}) == ["BetaPass"]
    assert ran({OPTION_DISABLED_PLUGINS: f"{DIST}:beta"}) == ["AlphaPass"]
    assert ran({OPTION_DISABLED_PLUGINS: f" alpha , {DIST}:beta "}) == []
    assert ran() == ["AlphaPass", "BetaPass"]


def test_ge_compile_takes_the_options_per_compilation_too(demo: str) -> None:
    def compiled(**kwargs: object) -> list[str]:
        result = ge.compile(small_graph(), **kwargs)  # type: ignore[arg-type]
        return [r.pass_name for r in result.report.records]

    assert compiled(options={OPTION_DISABLED_PLUGINS: "beta"}) == ["AlphaPass"]
    assert compiled() == ["AlphaPass", "BetaPass"]


def test_disable_plugin_autoload_is_per_compilation(demo: str) -> None:
    assert ran({OPTION_DISABLE_PLUGIN_AUTOLOAD: "true"}) == []
    assert not imported(demo, "alpha") and not imported(demo, "beta")
    assert ran() == ["AlphaPass", "BetaPass"]
    assert ran({OPTION_DISABLE_PLUGIN_AUTOLOAD: "true"}) == []
    assert ran({OPTION_DISABLE_PLUGIN_AUTOLOAD: "false"}) == ["AlphaPass", "BetaPass"]


def test_initialize_options_stay_the_defaults(demo: str) -> None:
    ge.initialize({OPTION_DISABLED_PLUGINS: "alpha"})
    assert not imported(demo, "alpha")
    assert ran() == ["BetaPass"]
    # a compilation's own options go on top of them, for that compilation
    assert ran({OPTION_DISABLED_PLUGINS: ""}) == ["AlphaPass", "BetaPass"]
    assert ran({OPTION_DISABLED_PLUGINS: "beta"}) == ["AlphaPass"]
    assert ran() == ["BetaPass"]
    assert [p.name for p in current_pass_registry()] == ["BetaPass"]
    assert [p.name for p in current_pass_registry({OPTION_DISABLED_PLUGINS: ""})] == [
        "AlphaPass", "BetaPass"]
    with pytest.raises(CompilerStateError) as info:
        ge.initialize({OPTION_DISABLED_PLUGINS: "beta"})
    assert info.value.code == "GE1201"
    assert "already initialized with other options; call ge.finalize() first" in str(info.value)
    ge.finalize()
    assert ran() == ["AlphaPass", "BetaPass"]


def test_initialize_replaces_the_compiler_a_compilation_started(demo: str) -> None:
    """A service's `finalize(); initialize(options)` with a request compiling in between
    (a user trial: the request started the compiler with no options, initialize then
    failed with GE1201 and every later request ran without the service's defaults): the
    compiler a compilation started by itself is replaced; one initialize started is not."""
    assert ran() == ["AlphaPass", "BetaPass"]  # the request: starts the compiler itself
    assert ge.compiler.is_initialized()
    ge.initialize({OPTION_DISABLED_PLUGINS: "alpha"})
    assert ran() == ["BetaPass"]
    ge.initialize({OPTION_DISABLED_PLUGINS: "alpha"})  # the same options: a no-op
    assert ran() == ["BetaPass"]
    with pytest.raises(CompilerStateError) as info:
        ge.initialize({OPTION_DISABLED_PLUGINS: "beta"})  # the user's own choice stays
    assert info.value.code == "GE1201"
    assert ran() == ["BetaPass"]
    ge.finalize()
    assert ran({OPTION_DISABLED_PLUGINS: "beta"}) == ["AlphaPass"]  # starts it: no defaults
    ge.initialize()  # None: the compiler running becomes the user's, as it is
    assert ran() == ["AlphaPass", "BetaPass"]
    with pytest.raises(CompilerStateError):
        ge.initialize({OPTION_DISABLED_PLUGINS: "beta"})
    ge.finalize()


def test_an_unknown_plugin_name_is_a_warning_naming_the_installed_ones(demo: str) -> None:
    with pytest.warns(CompileWarning) as caught:
        assert ran({OPTION_DISABLED_PLUGINS: "alpha,nosuch,other:beta"}) == ["BetaPass"]
    (warning,) = caught
    message = str(warning.message)
    assert message.startswith("cannot disable unknown plugin(s) nosuch, other:beta: no "
                              "installed entry point of group ge.passes.plugins has that name")
    assert f"(installed plugins: {DIST}:alpha, {DIST}:beta)" in message
    assert warning.filename == __file__  # it points at the user's call
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ran({OPTION_DISABLED_PLUGINS: "nosuch"})  # once per name and initialisation
    ge.finalize()
    with pytest.warns(CompileWarning, match="unknown plugin.s. nosuch"):
        ge.initialize({OPTION_DISABLED_PLUGINS: "nosuch"})
    assert ran() == ["AlphaPass", "BetaPass"]


def test_the_environment_variable_is_read_once_and_wins(
    demo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_DISABLE_PLUGIN_AUTOLOAD, "1")
    assert ran() == []
    assert ran({OPTION_DISABLE_PLUGIN_AUTOLOAD: "false"}) == []  # the option cannot undo it
    monkeypatch.delenv(ENV_DISABLE_PLUGIN_AUTOLOAD)
    assert ran() == []  # read once (D13): the change counts after finalize
    ge.finalize()
    assert ran() == ["AlphaPass", "BetaPass"]
    monkeypatch.setenv(ENV_DISABLE_PLUGIN_AUTOLOAD, "1")
    assert ran() == ["AlphaPass", "BetaPass"]


BROKEN = "raise ZeroDivisionError('broken at import')\n"


def test_continue_on_plugin_error_is_per_compilation(site: Path) -> None:
    install_distribution(site, DIST, {"alpha": PASS.format(name="AlphaPass"), "broken": BROKEN})
    with pytest.raises(PluginLoadError) as info:
        ran()
    assert info.value.code == "E13029"
    assert info.value.message.startswith(
        f"Failed to load custom fusion pass lib entry point broken = geplug_demo_pkg.broken "
        f"({DIST} 1.0). Reason: ZeroDivisionError: broken at import.")
    assert not ge.compiler.is_initialized()  # the first compilation's start failed

    with pytest.warns(PluginLoadWarning, match="python pass plugin skipped: .*broken at import"):
        report = compile_graph(small_graph(), options={OPTION_CONTINUE_ON_PLUGIN_ERROR: "true"})
    assert [r.pass_name for r in report.records] == ["AlphaPass"]
    assert [e.code for e in report.skipped_plugins] == ["E13029"]
    # Not the default of the next compilation: without the option the failure fails it.
    with pytest.raises(PluginLoadError, match="broken at import") as again:
        ran()
    assert again.value.code == "E13029"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # disabled: not tried, nothing to warn about
        assert ran({OPTION_DISABLED_PLUGINS: "broken"}) == ["AlphaPass"]


def test_two_plugins_of_one_name_cannot_take_part_in_one_compilation(site: Path) -> None:
    install_distribution(site, DIST, {"alpha": PASS.format(name="AlphaPass"),
                                                   "copy": PASS.format(name="AlphaPass").replace(
                                          "class AlphaPass", "class AlphaCopy")})
    assert ran({OPTION_DISABLED_PLUGINS: "copy"}) == ["AlphaPass"]
    # A compilation that wants both cannot be honoured: E13030 naming both definitions.
    with pytest.raises(DuplicatePassNameError) as info:
        ran()
    assert info.value.code == "E13030"
    assert info.value.message.startswith("python pass name already exists: AlphaPass; "
                                         "AlphaCopy at ")
    assert "reuses the name of AlphaPass at " in info.value.message
    assert ran({OPTION_DISABLED_PLUGINS: "copy"}) == ["AlphaPass"]
