"""initialize / finalize: the environment is read once (D13), failures and continue (D9)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

import ge
import ge.compiler
from ge.compiler import (
    ENV_DISABLE_PLUGIN_AUTOLOAD,
    OPTION_CONTINUE_ON_PLUGIN_ERROR,
    OPTION_DISABLE_PLUGIN_AUTOLOAD,
    OPTION_DISABLED_PLUGINS,
    PassOrigin,
    PassRegistry,
    RegisteredPass,
    compile_graph,
    current_pass_registry,
)
from ge.compiler.options import parse_options
from ge.errors import (
    CompilerOptionError,
    CompilerStateError,
    CompileWarning,
    DuplicatePassNameError,
    PluginLoadError,
    PluginLoadWarning,
)
from ge.passes import get_registered_passes
from ge.passes.bootstrap import ENV_PY_PASS_PATH
from ge.passes.discovery import module_name_for
from ge.passes.registry import build_descriptor
from plugin_fixtures import insert_identity, small_graph


def plugin_names() -> list[str]:
    return sorted(p.name for p in current_pass_registry() if p.origin.kind != "builtin")


def test_ge_initialize_and_finalize_are_the_compilers() -> None:
    assert ge.initialize is ge.compiler.initialize
    assert ge.finalize is ge.compiler.finalize


def test_unset_or_empty_env_loads_no_python_pass(
    write, pass_source, monkeypatch: pytest.MonkeyPatch
) -> None:
    write("never.py", pass_source("Never"))
    for value in (None, "", " : "):
        if value is not None:
            monkeypatch.setenv(ENV_PY_PASS_PATH, value)
        ge.initialize()
        assert plugin_names() == []
        assert get_registered_passes() == []
        ge.finalize()


def test_env_is_read_once_until_finalize(
    write, pass_source, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = write("first.py", pass_source("FirstPass"))
    second = write("second.py", pass_source("SecondPass"))
    monkeypatch.setenv(ENV_PY_PASS_PATH, str(first))
    ge.initialize()
    monkeypatch.setenv(ENV_PY_PASS_PATH, str(second))
    assert plugin_names() == ["FirstPass"]
    report = compile_graph(small_graph())
    assert [r.pass_name for r in report.records] == ["FirstPass"]
    monkeypatch.delenv(ENV_PY_PASS_PATH)
    assert plugin_names() == ["FirstPass"]
    ge.finalize()
    assert get_registered_passes() == []
    assert module_name_for(first) not in sys.modules
    monkeypatch.setenv(ENV_PY_PASS_PATH, str(second))
    ge.initialize()
    assert plugin_names() == ["SecondPass"]


def test_the_first_compilation_initialises(
    write, pass_source, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write("implicit.py", pass_source("Implicit"))
    monkeypatch.setenv(ENV_PY_PASS_PATH, str(path))
    assert not ge.compiler.is_initialized()
    report = compile_graph(small_graph())
    assert ge.compiler.is_initialized()
    assert [r.pass_name for r in report.records] == ["Implicit"]
    monkeypatch.setenv(ENV_PY_PASS_PATH, "")
    assert [r.pass_name for r in compile_graph(small_graph()).records] == ["Implicit"]


def test_editing_a_plugin_takes_effect_after_finalize(
    write, pass_source, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write("edited.py", pass_source("OldName"))
    monkeypatch.setenv(ENV_PY_PASS_PATH, str(path))
    ge.initialize()
    path.write_text(pass_source("NewName"))
    with pytest.warns(CompileWarning, match=r"changed \(or went\) since the compiler loaded it"):
        assert plugin_names() == ["OldName"]  # (and says so)
    ge.finalize()
    ge.initialize()
    assert plugin_names() == ["NewName"]


def test_initialize_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    ge.initialize({"a": "1"})
    ge.initialize()
    ge.initialize({"a": "1"})
    with pytest.raises(CompilerStateError, match=r"call ge\.finalize\(\) first") as info:
        ge.initialize({"a": "2"})
    assert info.value.code == "GE1201"
    ge.finalize()
    ge.finalize()  # a second finalize is harmless
    ge.initialize({"a": "2"})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("a=1", "options must be a mapping"),
        ({"a": 1}, "options must map str to str"),
        ({1: "a"}, "options must map str to str"),
        ({OPTION_CONTINUE_ON_PLUGIN_ERROR: "maybe"}, "must be true or false, got 'maybe'"),
    ],
)
def test_bad_options(options: object, message: str) -> None:
    with pytest.raises(CompilerOptionError, match=message) as info:
        ge.initialize(options)  # type: ignore[arg-type]
    assert info.value.code == "GE1202"
    assert not ge.compiler.is_initialized()


def test_option_parsing() -> None:
    parsed = parse_options(
        {OPTION_CONTINUE_ON_PLUGIN_ERROR: " Yes ", OPTION_DISABLED_PLUGINS: "a, dist:b,,"}
    )
    assert parsed.continue_on_plugin_error is True
    assert parsed.disabled_plugins == frozenset({"a", "dist:b"})
    assert parse_options(None).continue_on_plugin_error is False


def test_a_failing_plugin_stops_initialisation_and_leaves_nothing_loaded(
    write, pass_source, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = write("plugins/a_good.py", pass_source("Good"))
    write("plugins/b_bad.py", "raise OSError('disk on fire')\n")
    monkeypatch.setenv(ENV_PY_PASS_PATH, str(tmp_path / "plugins"))
    with pytest.raises(PluginLoadError, match="OSError: disk on fire") as info:
        ge.initialize()
    assert info.value.location.line == 1
    assert not ge.compiler.is_initialized()
    assert get_registered_passes() == []
    assert module_name_for(good) not in sys.modules


def test_continue_on_plugin_error_warns_and_skips_the_plugin(
    write, pass_source, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write("plugins/a_good.py", pass_source("Good"))
    write("plugins/b_bad.py", "raise OSError('disk on fire')\n")
    monkeypatch.setenv(ENV_PY_PASS_PATH, str(tmp_path / "plugins"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ge.initialize({OPTION_CONTINUE_ON_PLUGIN_ERROR: "true"})
    (warning,) = [w for w in caught if issubclass(w.category, PluginLoadWarning)]
    assert "OSError: disk on fire" in str(warning.message)
    assert warning.filename == __file__
    assert plugin_names() == ["Good"]
    report = compile_graph(small_graph())
    assert [e.code for e in report.skipped_plugins] == ["E13029"]


def test_pass_paths_of_one_compilation_do_not_leak_into_the_next(write, pass_source) -> None:
    path = write("extra.py", pass_source("Extra"))
    first = compile_graph(small_graph(), pass_paths=[path])
    second = compile_graph(small_graph())
    assert [r.pass_name for r in first.records] == ["Extra"]
    assert second.records == []


def test_registry_holds_builtin_and_plugin_passes_side_by_side(write, pass_source) -> None:
    from ge.passes import FusionBasePass

    class BuiltinLike(FusionBasePass):
        pass

    builtin = RegisteredPass(
        build_descriptor(BuiltinLike, name="Shared", stage="BeforeInferShape"),
        PassOrigin("builtin"),
    )
    loader = ge.compiler.plugin_loader.PluginLoader()
    clashing = write("clashing.py", pass_source("PluginPass") + pass_source("Shared"))
    only = write("only.py", pass_source("Only"))
    (clashing_plugin,) = loader.load_paths([clashing], parse_options(None)).plugins
    (only_plugin,) = loader.load_paths([only], parse_options(None)).plugins

    registry = PassRegistry([builtin])
    with pytest.raises(DuplicatePassNameError) as info:
        registry.add_plugin(clashing_plugin)
    assert info.value.code == "E13030"
    assert "(built-in)" in info.value.message and str(clashing) in info.value.message
    assert [p.name for p in registry] == ["Shared"]  # all of the plugin's passes, or none

    registry.add_plugin(only_plugin)
    registry.add_plugin(only_plugin)  # the same plugin twice is a no-op
    assert [(p.name, str(p.origin)) for p in registry] == [
        ("Shared", "built-in"),
        ("Only", f"{only}:3"),
    ]
    assert [p.name for p in registry.for_stage(builtin.stage)] == ["Only", "Shared"]
    loader.unload()


def test_builtin_passes_run_whether_or_not_python_passes_load(
    write, pass_source, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ge.compiler import builtin
    from ge.compiler.pass_registry import builtin_pass
    from ge.passes import FusionBasePass

    @builtin_pass(name="BuiltinTagger", step="AfterInferShape")
    class BuiltinTagger(FusionBasePass):
        def run(self, graph, context):
            insert_identity(graph, "builtin_was_here")

    monkeypatch.setattr(builtin, "BUILTIN_PASSES", (BuiltinTagger,))

    assert get_registered_passes() == []  # built-ins stay out of the plugin registry
    graph = small_graph()
    report = compile_graph(graph)
    assert [r.pass_name for r in report.records] == ["BuiltinTagger"]
    assert current_pass_registry().get("BuiltinTagger").origin.kind == "builtin"
    ge.finalize()

    monkeypatch.setenv(ENV_PY_PASS_PATH, str(write("plugin.py", pass_source("Plugin"))))
    report = compile_graph(small_graph())
    assert [r.pass_name for r in report.records] == ["Plugin", "BuiltinTagger"]
    ge.finalize()

    monkeypatch.setenv(ENV_PY_PASS_PATH, str(write("clash.py", pass_source("BuiltinTagger"))))
    with pytest.raises(DuplicatePassNameError, match="python pass name already exists"):
        ge.initialize()


def test_entry_points_load_with_the_environment_and_can_be_disabled_by_option(
    write, pass_source, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    write("site/geplug_gamma/__init__.py", pass_source("GammaPass"))
    info = site / "geplug_gamma-3.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: geplug-gamma\nVersion: 3.0\n")
    (info / "entry_points.txt").write_text("[ge.passes.plugins]\ngamma = geplug_gamma\n")
    monkeypatch.syspath_prepend(str(site))
    local = write("local.py", pass_source("LocalPass"))

    monkeypatch.setenv(ENV_DISABLE_PLUGIN_AUTOLOAD, "1")
    ge.initialize()  # environment unset and autoload disabled: nothing is loaded
    assert plugin_names() == []
    assert "geplug_gamma" not in sys.modules
    ge.finalize()
    monkeypatch.delenv(ENV_DISABLE_PLUGIN_AUTOLOAD)

    ge.initialize({OPTION_DISABLE_PLUGIN_AUTOLOAD: "true"})  # the option does the same
    assert plugin_names() == []
    assert "geplug_gamma" not in sys.modules
    ge.finalize()


    monkeypatch.setenv(ENV_PY_PASS_PATH, str(local))
    ge.initialize({OPTION_DISABLED_PLUGINS: "gamma"})
    assert plugin_names() == ["LocalPass"]
    assert "geplug_gamma" not in sys.modules
    ge.finalize()

    ge.initialize()
    assert plugin_names() == ["GammaPass", "LocalPass"]
    gamma = current_pass_registry().get("GammaPass")
    assert str(gamma.origin).startswith("entry point gamma = geplug_gamma (geplug-gamma 3.0)")
    ge.finalize()
    assert get_registered_passes() == []
    ge.initialize()  # the entry point's module stays imported; its passes register again
    assert plugin_names() == ["GammaPass", "LocalPass"]
    ge.finalize()
    monkeypatch.delenv(ENV_PY_PASS_PATH)
    ge.initialize()  # environment unset: installed plugins still load (D13, revised)
    assert plugin_names() == ["GammaPass"]
