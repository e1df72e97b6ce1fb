"""Discovery from ASCEND_GE_PY_PASS_PATH: one test per rule of GE's documentation and D6-D9."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from ge.errors import (
    DuplicatePassNameError,
    PassPathWarning,
    PassRegisterErrors,
    PassRegisterTypeError,
    PluginLoadError,
    PluginLoadErrors,
    PluginLoadWarning,
    PluginPathNotFoundError,
    PluginPathSuffixError,
)
from ge.passes import clear_registered_passes, get_registered_passes
from ge.passes.bootstrap import (
    ENV_PY_PASS_PATH,
    discover_plugins,
    load_pass_plugins,
    normalize_path_list,
    scan_modules_from_path,
)
from ge.passes.discovery import module_name_for


def _names() -> list[str]:
    return [d.pass_name for d in get_registered_passes()]


# --- parsing -------------------------------------------------------------------------------


def test_normalize_path_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert normalize_path_list("") == []
    assert normalize_path_list(None) == []
    assert normalize_path_list(" : ::") == []
    assert normalize_path_list(" b.py :/x/a.py::rel/d ") == [
        tmp_path / "b.py",
        Path("/x/a.py"),
        tmp_path / "rel" / "d",
    ]


def test_env_paths_are_separated_by_colons_and_loaded_in_order(
    write, pass_source, monkeypatch: pytest.MonkeyPatch
) -> None:
    second = write("z_second.py", pass_source("Second"))
    first = write("a_first.py", pass_source("First"))
    monkeypatch.setenv(ENV_PY_PASS_PATH, f"{second}:{first}")
    modules = load_pass_plugins()
    assert _names() == ["Second", "First"]
    assert [m.__file__ for m in modules] == [str(second), str(first)]


@pytest.mark.parametrize("value", [None, ""])
def test_unset_or_empty_env_loads_nothing(value, monkeypatch: pytest.MonkeyPatch) -> None:
    if value is not None:
        monkeypatch.setenv(ENV_PY_PASS_PATH, value)
    assert load_pass_plugins() == []
    assert get_registered_passes() == []


# --- per-item rules ----------------------------------------------------------------------------


def test_a_py_file_loads_as_a_standalone_module_named_stably(write, pass_source) -> None:
    path = write("my-pass.v2.py", pass_source("Standalone"))
    (module,) = scan_modules_from_path(path)
    assert module.__name__ == module_name_for(path)
    assert module.__name__.startswith("_ge_py_pass_my_pass_v2_")
    assert module.__name__.isidentifier()
    assert len(module.__name__.rsplit("_", 1)[1]) == 16
    assert sys.modules[module.__name__] is module
    assert _names() == ["Standalone"]


def test_a_single_files_directory_is_not_put_on_sys_path(write) -> None:
    write("_sibling.py", "VALUE = 1\n")
    path = write(
        "alone.py",
        """
        import sys, os
        SEEN = os.path.dirname(__file__) in sys.path
        """,
    )
    (module,) = scan_modules_from_path(path)
    assert module.SEEN is False
    assert str(path.parent) not in sys.path


@pytest.mark.parametrize("relative", ["missing.py", "missing_dir"])
def test_a_missing_path_raises_file_not_found(tmp_path: Path, relative: str) -> None:
    target = tmp_path / relative
    with pytest.raises(FileNotFoundError) as info:
        scan_modules_from_path(target)
    err = info.value
    assert isinstance(err, PluginPathNotFoundError)
    assert err.code == "E13029"
    assert err.message == f"python pass path does not exist: {target}"
    assert err.path == str(target)
    assert get_registered_passes() == []


def test_a_non_py_file_raises_value_error(write) -> None:
    path = write("notes.txt", "hello")
    with pytest.raises(ValueError) as info:
        scan_modules_from_path(path)
    assert isinstance(info.value, PluginPathSuffixError)
    assert info.value.code == "E13029"
    assert info.value.message == f"python pass file must end with .py: {path}"
    assert get_registered_passes() == []


def test_path_errors_are_raised_before_any_plugin_is_imported(
    write, pass_source, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = write("good.py", pass_source("Good"))
    monkeypatch.setenv(ENV_PY_PASS_PATH, f"{good}:{tmp_path / 'nope'}")
    with pytest.raises(FileNotFoundError):
        load_pass_plugins()
    assert get_registered_passes() == []
    assert not any(name.startswith("_ge_py_pass_good_") for name in sys.modules)


def test_directory_rules(write, pass_source, tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    write("plugins/b_module.py", pass_source("BModule"))
    write("plugins/a_module.py", pass_source("AModule"))
    write("plugins/_private.py", pass_source("Private"))
    write("plugins/.hidden.py", pass_source("Hidden"))
    write("plugins/__init__.py", pass_source("DirInit"))
    write("plugins/readme.txt", "not python")
    write("plugins/c_pkg/__init__.py", "from c_pkg.impl import CPkg\n")
    write("plugins/c_pkg/impl.py", pass_source("CPkg"))
    write("plugins/c_pkg/not_scanned.py", pass_source("NotScanned"))
    write("plugins/_private_pkg/__init__.py", pass_source("PrivatePkg"))
    write("plugins/no_init/deep.py", pass_source("Deep"))
    modules = scan_modules_from_path(plugins)
    # name order; `_`/dot names skipped; packages imported under their own name
    assert _names() == ["AModule", "BModule", "CPkg"]
    assert [m.__name__ for m in modules][2] == "c_pkg"
    assert sys.modules["c_pkg.impl"].__file__ == str(plugins / "c_pkg" / "impl.py")
    assert "c_pkg.not_scanned" not in sys.modules


def test_directory_is_on_sys_path_only_during_the_scan(write, pass_source, tmp_path) -> None:
    write("plugins/_shared.py", "FACTOR = 3\n")
    write(
        "plugins/uses_helper.py",
        """
        import _shared
        from ge.passes import FusionBasePass, register_fusion_pass
        @register_fusion_pass(name="UsesHelper" + str(_shared.FACTOR), stage="BeforeInferShape")
        class UsesHelper(FusionBasePass):
            pass
        """,
    )
    before = list(sys.path)
    scan_modules_from_path(tmp_path / "plugins")
    assert _names() == ["UsesHelper3"]
    assert sys.path == before


def test_sys_path_is_restored_when_a_plugin_fails(write, tmp_path: Path) -> None:
    write("plugins/boom.py", "raise RuntimeError('boom')\n")
    before = list(sys.path)
    with pytest.raises(PluginLoadError):
        scan_modules_from_path(tmp_path / "plugins")
    assert sys.path == before


# --- de-duplication ----------------------------------------------------------------------------


def _counting_plugin(write, pass_source, tmp_path: Path, name: str = "Counted") -> Path:
    counter = tmp_path / "executions.txt"
    return write(
        "counted.py",
        pass_source(name, body=f"open({str(counter)!r}, 'a').write('x')\n"),
    )


def test_a_file_reached_twice_loads_and_registers_once(
    write, pass_source, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _counting_plugin(write, pass_source, tmp_path)
    link = tmp_path / "link.py"
    link.symlink_to(path)
    linked_dir = tmp_path / "linked_dir"
    linked_dir.mkdir()
    (linked_dir / "again.py").symlink_to(path)
    monkeypatch.chdir(tmp_path)
    value = os.pathsep.join([str(path), str(path), "counted.py", str(link), str(linked_dir)])
    monkeypatch.setenv(ENV_PY_PASS_PATH, value)
    modules = load_pass_plugins()
    assert len(modules) == 1
    assert _names() == ["Counted"]
    assert (tmp_path / "executions.txt").read_text() == "x"
    load_pass_plugins()  # a second load of the same value is a no-op
    assert (tmp_path / "executions.txt").read_text() == "x"


def test_after_clear_a_cached_plugin_registers_again_without_re_executing(
    write, pass_source, tmp_path: Path
) -> None:
    path = _counting_plugin(write, pass_source, tmp_path)
    scan_modules_from_path(path)
    clear_registered_passes()
    scan_modules_from_path(path)
    assert _names() == ["Counted"]
    assert (tmp_path / "executions.txt").read_text() == "x"


def test_a_plugin_removed_from_sys_modules_is_executed_again(
    write, pass_source, tmp_path: Path
) -> None:
    path = _counting_plugin(write, pass_source, tmp_path)
    (module,) = scan_modules_from_path(path)
    del sys.modules[module.__name__]
    scan_modules_from_path(path)
    assert _names() == ["Counted"]
    assert (tmp_path / "executions.txt").read_text() == "xx"


def test_module_names_are_identical_across_processes_with_different_hash_seeds(
    write, pass_source
) -> None:
    path = write("seeded.py", pass_source("Seeded"))
    code = (
        "from ge.passes.bootstrap import scan_modules_from_path\n"
        "from ge.passes import get_registered_passes\n"
        f"print(scan_modules_from_path({str(path)!r})[0].__name__)\n"
        "print(get_registered_passes()[0].descriptor_key)\n"
    )
    outputs = []
    for seed in ("1", "2", "random"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1] == outputs[2]
    assert outputs[0].splitlines()[0] == module_name_for(path)


# --- modules, packages, isolation --------------------------------------------------------------


def test_a_module_that_registers_nothing_loads_without_effect(write) -> None:
    path = write("empty_plugin.py", "X = 42\n")
    (module,) = scan_modules_from_path(path)
    assert module.X == 42
    assert get_registered_passes() == []


def test_a_package_name_already_imported_from_elsewhere_is_an_error(
    write, pass_source, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write("elsewhere/clashing/__init__.py", "ORIGIN = 'elsewhere'\n")
    monkeypatch.syspath_prepend(str(tmp_path / "elsewhere"))
    import clashing  # noqa: F401 - the module the plugin package would be shadowed by

    write("plugins/clashing/__init__.py", pass_source("ClashingPass"))
    with pytest.raises(PluginLoadError) as info:
        scan_modules_from_path(tmp_path / "plugins")
    message = info.value.message
    assert info.value.code == "E13029"
    assert str(tmp_path / "plugins" / "clashing") in message
    assert str(tmp_path / "elsewhere" / "clashing" / "__init__.py") in message
    assert sys.modules["clashing"].ORIGIN == "elsewhere"
    assert get_registered_passes() == []


def test_a_stdlib_module_name_is_not_silently_reused(write, pass_source, tmp_path: Path) -> None:
    write("plugins/json/__init__.py", pass_source("JsonPass"))
    with pytest.raises(PluginLoadError, match="a module named json is already imported from"):
        scan_modules_from_path(tmp_path / "plugins")
    assert get_registered_passes() == []


def test_a_package_already_imported_from_the_same_place_is_reused(
    write, pass_source, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write("plugins/samepkg/__init__.py", pass_source("SamePkg") + "from samepkg import sub\n")
    write("plugins/samepkg/sub.py", pass_source("SamePkgSub"))
    monkeypatch.syspath_prepend(str(tmp_path / "plugins"))
    import samepkg

    clear_registered_passes()
    modules = scan_modules_from_path(tmp_path / "plugins")
    assert modules == [samepkg]
    assert sorted(_names()) == ["SamePkg", "SamePkgSub"]


def test_partial_registrations_are_rolled_back(write, pass_source, tmp_path: Path) -> None:
    path = write(
        "partial.py",
        pass_source("RegisteredFirst", body="raise KeyError('after registering')\n"),
    )
    with pytest.raises(PluginLoadError) as info:
        scan_modules_from_path(path)
    err = info.value
    assert err.code == "E13029"
    assert err.message == (
        f"Failed to load custom fusion pass lib {path}. Reason: KeyError: 'after registering'."
    )
    assert err.location is not None
    assert (err.location.file, err.location.line) == (str(path), 6)
    assert isinstance(err.__cause__, KeyError)
    assert get_registered_passes() == []
    assert module_name_for(path) not in sys.modules


def test_a_syntax_error_points_at_its_line(write) -> None:
    path = write("broken.py", "x = 1\ndef f(:\n")
    with pytest.raises(PluginLoadError) as info:
        scan_modules_from_path(path)
    assert info.value.location is not None
    assert (info.value.location.file, info.value.location.line) == (str(path), 2)


def test_a_failing_package_is_rolled_back_with_its_submodules(write, tmp_path: Path) -> None:
    write("plugins/halfpkg/__init__.py", "from halfpkg import good\nraise ValueError('bad')\n")
    write(
        "plugins/halfpkg/good.py",
        """
        from ge.passes import FusionBasePass, register_fusion_pass
        @register_fusion_pass(name="HalfGood", stage="BeforeInferShape")
        class HalfGood(FusionBasePass):
            pass
        """,
    )
    with pytest.raises(PluginLoadError, match="ValueError: bad") as info:
        scan_modules_from_path(tmp_path / "plugins")
    assert info.value.location.file == str(tmp_path / "plugins" / "halfpkg" / "__init__.py")
    assert "halfpkg" not in sys.modules and "halfpkg.good" not in sys.modules
    assert get_registered_passes() == []


@pytest.mark.parametrize("decorator, said", [
    ('register_fusion_pass("P", "AfterInferShape")',
     "above the class (it was given 2 positional argument(s))"),
    ("register_fusion_pass", "above the class (it is used bare, without arguments)"),
    ('register_fusion_pass(name="P")', "above the class (stage missing)"),
    ('register_decompose_pass(name="P", stage="AfterInferShape", op_type="Conv")',
     "got unknown keyword argument(s) 'op_type'; it takes name, stage, op_types: "),
])
def test_a_decorator_called_in_another_form_is_e13030_saying_the_form(
    write, tmp_path: Path, decorator: str, said: str
) -> None:
    """Trial O: GE authors write `@register_fusion_pass("P", stage)` or the decorator bare;
    Python's TypeError loaded as a bare E13029 that did not say which form it takes."""
    write("plugins/ok.py", "x = 1\n")
    plugin = write("plugins/form.py", f"""
        from ge.passes import FusionBasePass, register_decompose_pass, register_fusion_pass
        @{decorator}
        class P(FusionBasePass):
            pass
        """)
    with pytest.raises(PassRegisterTypeError) as info:
        scan_modules_from_path(tmp_path / "plugins")
    err = info.value
    api = decorator.partition("(")[0]
    assert err.code == "E13030" and isinstance(err, TypeError)
    form = f'@{api}(name="MyPass", stage=PassStage.AFTER_INFER_SHAPE'
    assert err.message.startswith(f"{api} is called with keyword arguments, as GE's is: {form}"
                                  if "unknown" not in said else f"{api} got unknown")
    assert said in err.message and form in err.message
    assert err.pass_name == ("P" if "name=" in decorator else None)
    # (Python 3.10 reports a bare decorator at the class statement below it)
    line = 3 if "(" in decorator or sys.version_info >= (3, 11) else 4
    assert (err.location.file, err.location.line) == (str(plugin), line)
    assert get_registered_passes() == [] and module_name_for(plugin) not in sys.modules


def test_a_list_separated_by_semicolons_is_told_the_separator(
    write, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trial P: ASCEND_GE_PY_PASS_PATH="a;b" is one path that does not exist; the error
    says the separator is ':' (its parts exist), and nothing is loaded."""
    first = write("a/one.py", "x = 1\n")
    second = write("b/two.py", "x = 2\n")
    monkeypatch.setenv(ENV_PY_PASS_PATH, f"{first.parent};{second.parent}")
    with pytest.raises(PluginPathNotFoundError) as info:
        load_pass_plugins()
    assert info.value.code == "E13029"
    assert info.value.message.startswith(
        f"python pass path does not exist: {first.parent};{second.parent} (the paths of a "
        f"list are separated by ':', as in PATH, not ';': {first.parent}:{second.parent})")
    assert get_registered_passes() == []


def test_a_duplicate_pass_name_across_two_files_names_both(
    write, pass_source, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = write("first.py", pass_source("Dup"))
    second = write("second.py", pass_source("Dup"))
    monkeypatch.setenv(ENV_PY_PASS_PATH, f"{first}:{second}")
    with pytest.raises(DuplicatePassNameError) as info:
        load_pass_plugins()
    err = info.value
    assert err.code == "E13030"
    assert err.message.startswith("python pass name already exists: Dup")
    assert str(first) in err.message and str(second) in err.message
    assert (err.location.file, err.previous_location.file) == (str(second), str(first))
    assert [d.cls.__module__ for d in get_registered_passes()] == [module_name_for(first)]
    assert module_name_for(second) not in sys.modules


def test_every_plugin_is_tried_and_failures_are_reported_together(
    write, pass_source, tmp_path: Path
) -> None:
    write("plugins/a_bad.py", "raise RuntimeError('first')\n")
    write("plugins/b_good.py", pass_source("Good"))
    write("plugins/c_bad.py", pass_source("Good"))  # duplicate name: E13030
    with pytest.raises(PluginLoadErrors) as info:
        scan_modules_from_path(tmp_path / "plugins")
    errors = info.value.errors
    assert info.value.code == "E13029"
    assert [e.code for e in errors] == ["E13029", "E13030"]
    assert "RuntimeError: first" in errors[0].message
    assert _names() == ["Good"]


def test_failures_to_register_alone_are_e13030_together(
    write, pass_source, tmp_path: Path
) -> None:
    """Trial T: three name clashes were E13029 ("failed to load") together and E13030
    alone; a CI dashboard keyed on the code saw two kinds of one mistake."""
    write("plugins/a.py", pass_source("One"))
    write("plugins/b.py", pass_source("One"))
    write("plugins/c.py", pass_source("Two"))
    write("plugins/d.py", pass_source("Two"))
    with pytest.raises(PassRegisterErrors) as info:
        scan_modules_from_path(tmp_path / "plugins")
    err = info.value
    assert err.code == "E13030" and isinstance(err, PluginLoadErrors)
    assert [e.code for e in err.errors] == ["E13030", "E13030"]
    assert err.message.startswith("2 python pass plugins failed to register:\n  - [E13030] "
                                  "python pass name already exists: One")
    assert _names() == ["One", "Two"]


def test_continue_on_error_warns_once_per_failed_plugin(
    write, pass_source, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write("plugins/a_bad.py", "raise RuntimeError('first')\n")
    write("plugins/b_good.py", pass_source("Good"))
    write("plugins/c_bad.py", "import not_a_module_anywhere\n")
    monkeypatch.setenv(ENV_PY_PASS_PATH, str(tmp_path / "plugins"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        modules = load_pass_plugins(continue_on_error=True)
    messages = [str(w.message) for w in caught if issubclass(w.category, PluginLoadWarning)]
    assert len(messages) == 2
    assert "RuntimeError: first" in messages[0]
    assert "ModuleNotFoundError" in messages[1]
    assert {w.filename for w in caught} == {__file__}
    assert len(modules) == 1 and _names() == ["Good"]


def test_discover_plugins_reports_origins(write, pass_source, tmp_path: Path) -> None:
    path = write("origin.py", pass_source("Origin"))
    report = discover_plugins([path], entry_points=False)
    (plugin,) = report.plugins
    assert plugin.origin.kind == "module" and plugin.origin.path == str(path)
    assert [d.pass_name for d in plugin.descriptors] == ["Origin"]
    assert report.failures == [] and report.error() is None


@pytest.mark.parametrize(("layout", "note"), [
    ({"fusions/add_zero.py": ""},
     " (fusions/ holds .py files but no __init__.py: add one to load it as a package, or put "
     "the folder itself on the path)"),
    ({"_helpers.py": "", "README.md": ""},
     " (_helpers.py starts with '_', which marks files not to load)"),
    ({}, ""),
    ({"__init__.py": ""},
     " (it is a package (passes/__init__.py): put the folder holding it on the path, or name "
     "its modules)"),
])
def test_a_folder_naming_no_plugin_is_told_why(tmp_path: Path, layout: dict[str, str],
                                               note: str) -> None:
    """Trial X: plugins in a sub-folder without `__init__.py` loaded nothing and nothing
    said so (GE's rule, which stays: only the folder's `*.py` files and packages load)."""
    folder = tmp_path / "passes"
    folder.mkdir()
    for name, text in layout.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    with pytest.warns(PassPathWarning) as caught:
        report = discover_plugins([folder], entry_points=False)
    assert report.plugins == [] and report.failures == []
    assert [str(w.message) for w in caught] == [
        f"python pass path {folder.resolve()} names no plugin: only its *.py files and its "
        f"sub-folders with an __init__.py are loaded{note}"]
    assert caught[0].filename == str(folder.resolve())


def test_a_folder_with_a_plugin_is_not_told(tmp_path: Path) -> None:
    (tmp_path / "fusions").mkdir()
    (tmp_path / "fusions" / "helper.py").write_text("")
    (tmp_path / "plugin.py").write_text("")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = discover_plugins([tmp_path], entry_points=False)
    assert len(report.plugins) == 1


@pytest.mark.parametrize(("given", "meant"), [("my_pases", "my_passes"),
                                              ("fuse_relu", "fuse_relu.py"),
                                              ("fuse_rleu.py", "fuse_relu.py")])
def test_a_missing_path_names_the_entry_it_likely_means(tmp_path: Path, given: str,
                                                        meant: str) -> None:
    """Trial WW: a typo in a plugin path, or a file named without .py, said only that the
    path does not exist."""
    (tmp_path / "my_passes").mkdir()
    (tmp_path / "fuse_relu.py").write_text("")
    (tmp_path / "_private.py").write_text("")
    with pytest.raises(PluginPathNotFoundError) as info:
        scan_modules_from_path(tmp_path / given)
    assert info.value.code == "E13029"
    assert info.value.message == (f"python pass path does not exist: {tmp_path / given} "
                                  f"(did you mean {tmp_path / meant}?)")
    with pytest.raises(PluginPathNotFoundError) as info:  # nothing close: nothing guessed
        scan_modules_from_path(tmp_path / "attention")
    assert info.value.message == f"python pass path does not exist: {tmp_path / 'attention'}"
    assert get_registered_passes() == []
