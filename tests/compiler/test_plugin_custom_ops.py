"""Custom operators a pass plugin registers while it is imported belong to the plugin: they
are unregistered when it is unloaded (after the compilation of its `pass_paths`, at
`ge.finalize()`, when a `ge.testing` set closes) and registered afresh when it loads again,
so a plugin calling `ge.ops.register_op` at import without a guard works for every
compilation of a process. Another plugin, or user code, registering the same operator is
still GE1301, naming both call sites; an operator user code registers is never touched."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

import ge
import ge.compiler
from ge.errors import CompileWarning, OpRegisterError, PluginLoadError
from ge.ops import get_custom_op, list_custom_ops, register_op, unregister_op
from ge.passes.bootstrap import ENV_PY_PASS_PATH
from ge.testing import load_passes, make_model, reset_plugin_state
from plugin_fixtures import install_distribution

DOMAIN = "test.plugops"

# No `if get_custom_op(...) is None` guard: the op is registered at every import.
DOUBLE_PLUGIN = '''
import numpy as np

from ge.es.custom import operator
from ge.ops import register_op
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass

register_op("Double", domain="test.plugops", inputs=["x"], outputs=["y"],
            infer=lambda ctx: [ctx.input_descs[0]],
            kernel=lambda x: (np.asarray(x) * 2).astype(x.dtype))
Double = operator("Double", "test.plugops")


@register_fusion_pass(name="FuseDouble", stage=PassStage.AFTER_INFER_SHAPE)
class FuseDouble(PatternFusionPass):
    """x + x -> test.plugops::Double(x)."""

    @pattern
    def add_self(self, inputs):
        return inputs[0] + inputs[0]

    def replacement(self, inputs):
        return Double(inputs[0])
'''


def _model() -> onnx.ModelProto:
    return make_model([helper.make_node("Add", ["x", "x"], ["y"], name="add")],
                      [("x", [2, 3])], [("y", [2, 3])])


def _plugin(folder: Path, source: str = DOUBLE_PLUGIN, name: str = "double.py") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(source))
    return path


def _op_types(result: ge.CompileResult) -> list[str]:
    return [f"{n.domain}::{n.type}" if n.domain else n.type
            for n in result.graph.get_direct_nodes() if n.type not in ("Data", "NetOutput")]


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_two_compilations_of_an_unguarded_plugin_in_one_process(tmp_path: Path) -> None:
    plugin = _plugin(tmp_path)
    for _ in range(2):
        result = ge.compile(_model(), pass_paths=[plugin], verify=True)  # runs the kernel
        assert _op_types(result) == [f"{DOMAIN}::Double"]
        assert result.verification is not None and result.verification.ok
        assert get_custom_op("Double", DOMAIN) is None  # unloaded with the plugin


def test_an_edited_plugin_registers_its_new_definition(tmp_path: Path) -> None:
    """The op is the one the file defines now, not the first load's."""
    plugin = _plugin(tmp_path)
    ge.compile(_model(), pass_paths=[plugin], verify=True)
    plugin.write_text(textwrap.dedent(DOUBLE_PLUGIN).replace("* 2)", "* 3)"))
    with pytest.raises(ge.errors.VerificationError):  # the new kernel computes 3x
        ge.compile(_model(), pass_paths=[plugin], verify=True)


def test_the_environments_plugin_op_lives_until_finalize(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = _plugin(tmp_path)
    monkeypatch.setenv(ENV_PY_PASS_PATH, str(plugin))
    for _ in range(2):  # the second initialisation executes the file again: no GE1301
        ge.initialize()
        first = get_custom_op("Double", DOMAIN)
        assert first is not None and first.where == f"{plugin}:{_line_of(plugin, 'register_op(')}"
        for _ in range(2):
            assert _op_types(ge.compile(_model(), verify=True)) == [f"{DOMAIN}::Double"]
            assert get_custom_op("Double", DOMAIN) is first  # one registration per lifetime
        ge.finalize()
        assert get_custom_op("Double", DOMAIN) is None


def test_a_pass_set_owns_the_op_while_it_is_open(tmp_path: Path) -> None:
    plugin = _plugin(tmp_path)
    for _ in range(2):
        with load_passes(plugin) as passes:
            assert get_custom_op("Double", DOMAIN) is not None
            graph = passes.run("FuseDouble", _model())
            assert [n.type for n in graph.get_direct_nodes()].count("Double") == 1
        assert get_custom_op("Double", DOMAIN) is None


def test_a_plugin_failing_after_registering_an_op_leaves_no_op(tmp_path: Path) -> None:
    plugin = _plugin(tmp_path, DOUBLE_PLUGIN + "\nraise RuntimeError('half written')\n")
    with pytest.raises(PluginLoadError) as info:
        ge.compile(_model(), pass_paths=[plugin])
    assert info.value.code == "E13029"
    assert "RuntimeError: half written" in info.value.message  # not GE1301 on the retry
    assert get_custom_op("Double", DOMAIN) is None
    plugin.write_text(textwrap.dedent(DOUBLE_PLUGIN))  # fixed: loads
    assert _op_types(ge.compile(_model(), pass_paths=[plugin])) == [f"{DOMAIN}::Double"]


def test_two_plugins_registering_one_op_is_GE1301_naming_both(tmp_path: Path) -> None:
    first = _plugin(tmp_path / "a")
    second = _plugin(tmp_path / "b", DOUBLE_PLUGIN.replace('"FuseDouble"', '"FuseDoubleB"'))
    line = _line_of(first, "register_op(")
    with pytest.raises(PluginLoadError) as info:
        ge.compile(_model(), pass_paths=[first, second])
    err = info.value
    assert err.code == "E13029" and err.path == str(second)
    assert err.location is not None and (err.location.file, err.location.line) == (
        str(second), line)
    cause = err.__cause__
    assert isinstance(cause, OpRegisterError) and cause.code == "GE1301"
    assert cause.message == (
        f"custom operator {DOMAIN}::Double is already registered by {first}:{line}; "
        f"{second}:{line} registers it again (give one of them another op type or domain, "
        "or unregister_op the first)")
    assert f"[GE1301] {cause.message}" in err.message
    assert str(err).count(f"(at {second}:{line})") == 1  # the E13029's location, said once
    assert get_custom_op("Double", DOMAIN) is None  # the failed compilation unloaded both
    # each of them alone still loads
    for plugin in (first, second):
        assert _op_types(ge.compile(_model(), pass_paths=[plugin])) == [f"{DOMAIN}::Double"]


def test_an_op_of_user_code_is_never_unregistered_by_plugins(tmp_path: Path) -> None:
    """User code's op clashes with the plugin's (GE1301 naming both) and survives the failed
    load, compilations of other plugins, `ge.finalize()` and the plugin-state reset."""
    line = sys._getframe().f_lineno + 1
    spec = register_op("Double", domain=DOMAIN, inputs=["x"], outputs=["y"],
                       infer=lambda ctx: [ctx.input_descs[0]], kernel=lambda x: x + x)
    try:
        mine = get_custom_op("Double", DOMAIN)
        assert mine is not None and mine.where == f"{__file__}:{line}" and mine.spec is spec
        plugin = _plugin(tmp_path)
        with pytest.raises(PluginLoadError) as info:
            ge.compile(_model(), pass_paths=[plugin])
        cause = info.value.__cause__
        assert isinstance(cause, OpRegisterError) and cause.code == "GE1301"
        assert cause.message.startswith(
            f"custom operator {DOMAIN}::Double is already registered by {__file__}:{line}; "
            f"{plugin}:{_line_of(plugin, 'register_op(')} registers it again")
        other = _plugin(tmp_path / "other", DOUBLE_PLUGIN.replace('"Double"', '"Triple"'))
        ge.compile(_model(), pass_paths=[other])
        ge.compile(_model(), pass_paths=[other])
        ge.finalize()
        reset_plugin_state()
        assert get_custom_op("Double", DOMAIN) is mine
        assert [op.spec.op_type for op in list_custom_ops() if op.spec.domain == DOMAIN] == [
            "Double"]
    finally:
        unregister_op("Double", DOMAIN)


LIBRARY = '''
import numpy as np

from ge.ops import register_op

register_op("Halve", domain="test.plugops", inputs=["x"], outputs=["y"],
            infer=lambda ctx: [ctx.input_descs[0]], kernel=lambda x: np.asarray(x) / 2)
'''


def test_an_op_a_library_registers_at_its_import_lives_with_the_library(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin that imports a library (outside its folder) for the first time does not own
    the op the library registers: the library stays imported, so unloading the plugin
    leaves the op, and the next load of the plugin (which does not execute the library
    again) still has it."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "halve_lib_for_plugins.py").write_text(LIBRARY)
    monkeypatch.syspath_prepend(str(site))
    plugin = _plugin(tmp_path / "plugin", DOUBLE_PLUGIN.replace(
        "import numpy as np", "import numpy as np\nimport halve_lib_for_plugins"))
    try:
        for _ in range(2):
            ge.compile(_model(), pass_paths=[plugin])
            assert get_custom_op("Halve", DOMAIN) is not None
            assert get_custom_op("Double", DOMAIN) is None
    finally:
        if get_custom_op("Halve", DOMAIN) is not None:
            unregister_op("Halve", DOMAIN)
        sys.modules.pop("halve_lib_for_plugins", None)


ENTRY_MODULE = '''
import numpy as np

from ge.ops import register_op

register_op("Halve", domain="test.plugops", inputs=["x"], outputs=["y"],
            infer=lambda ctx: [ctx.input_descs[0]], kernel=lambda x: np.asarray(x) / 2)
'''

ENTRY_CALLABLE = '''
import numpy as np

from ge.ops import register_op


def plugin():
    register_op("Triple", domain="test.plugops", inputs=["x"], outputs=["y"],
                infer=lambda ctx: [ctx.input_descs[0]], kernel=lambda x: np.asarray(x) * 3)
'''


@pytest.mark.ge_entry_points
def test_entry_point_ops_across_finalize(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """An installed module that registers an op at import stays imported across
    `ge.finalize()`, and so does its op; an op a callable entry point registers is the
    plugin's: gone at finalize, registered again (by calling it again) at the next
    initialisation."""
    package = install_distribution(tmp_path, "opdist", {"halve": ENTRY_MODULE})
    (tmp_path / package / "triple.py").write_text(ENTRY_CALLABLE)
    info = next(tmp_path.glob("opdist-*.dist-info")) / "entry_points.txt"
    info.write_text(info.read_text() + f"triple = {package}.triple:plugin\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        for _ in range(2):
            ge.initialize()
            assert get_custom_op("Halve", DOMAIN) is not None
            assert get_custom_op("Triple", DOMAIN) is not None
            ge.finalize()
            assert get_custom_op("Halve", DOMAIN) is not None  # its module is still imported
            assert get_custom_op("Triple", DOMAIN) is None
        reset_plugin_state()  # forgets the entry points: the callable runs again
        ge.initialize()
        assert get_custom_op("Triple", DOMAIN) is not None
        ge.finalize()
    finally:
        for op_type in ("Halve", "Triple"):
            if get_custom_op(op_type, DOMAIN) is not None:
                unregister_op(op_type, DOMAIN)
        for name in [m for m in sys.modules if m.startswith(package)]:
            del sys.modules[name]


FIXTURE_TESTS = '''
import pytest

from ge.ops import get_custom_op
from ge.testing import assert_rewrites, make_model
from onnx import helper


@pytest.fixture
def passes(ge_isolated, ge_passes):
    return ge_passes("plugins")


@pytest.mark.parametrize("i", [1, 2, 3])
def test_loads(passes, i):
    model = make_model([helper.make_node("Add", ["x", "x"], ["y"])], [("x", [2, 3])],
                       [("y", [2, 3])])
    assert get_custom_op("Double", "test.plugops") is not None
    assert_rewrites("FuseDouble", model, 1, passes=passes)


def test_after_them(ge_isolated):
    assert get_custom_op("Double", "test.plugops") is None
'''


@pytest.mark.slow
def test_the_pytest_fixtures_reload_an_unguarded_plugin(tmp_path: Path) -> None:
    """`ge_isolated` + `ge_passes` in consecutive tests of a pass author's pytest run."""
    _plugin(tmp_path / "plugins")
    (tmp_path / "test_double.py").write_text(FIXTURE_TESTS)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_ADDOPTS", ENV_PY_PASS_PATH)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--rootdir", ".",
         "test_double.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "4 passed" in run.stdout


def test_the_compiled_model_runs_with_the_plugin_loaded(tmp_path: Path) -> None:
    """Verification ran inside the compilation; afterwards the model runs wherever the
    plugin is loaded again (a `ge.testing` set, `ge run --pass-path`)."""
    plugin = _plugin(tmp_path)
    result = ge.compile(_model(), pass_paths=[plugin])
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with load_passes(plugin):
        from ge.session.runner import ModelRunner

        assert np.array_equal(ModelRunner(result.graph).run({"x": x})["y"], x * 2)


def _custom_model() -> onnx.ModelProto:
    """x -> test.plugops::Double -> Relu -> y, the custom output declared float [2, 3]."""
    floats = onnx.TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node("Double", ["x"], ["t"], domain=DOMAIN, name="double"),
         helper.make_node("Relu", ["t"], ["y"], name="relu")], "g",
        [helper.make_tensor_value_info("x", floats, [2, 3])],
        [helper.make_tensor_value_info("y", floats, [2, 3])],
        value_info=[helper.make_tensor_value_info("t", floats, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid(DOMAIN, 1)])


def test_an_operator_nothing_defines_is_a_warning_one_a_plugin_defines_is_not(
        tmp_path: Path) -> None:
    """A user trial compiled a model using an operator of a custom domain that no plugin
    registers, and got no word of it (only --verify refused it, GE1601): the compilation
    says so; with the plugin that registers it, it does not."""
    model = _custom_model()
    with pytest.warns(CompileWarning) as caught:
        result = ge.compile(model)
    messages = [str(w.message) for w in caught if issubclass(w.category, CompileWarning)]
    assert messages == [
        f"graph 'g' uses {DOMAIN}::Double, which nothing ge sees defines (no plugin "
        "registers it with ge.ops.register_op, no function of the model, not "
        "onnxruntime's): ge compiles around it, its outputs typed as the model types "
        "them, but cannot check its types, verify or run it (load the plugin that defines "
        "it: --pass-path, ASCEND_GE_PY_PASS_PATH, pass_paths=)"]
    assert [str(w) for w in result.warnings] == messages
    assert _op_types(result) == [f"{DOMAIN}::Double", "Relu"]  # compiled around it
    plugin = _plugin(tmp_path / "plugins")
    with_plugin = ge.compile(model, pass_paths=[plugin])
    assert with_plugin.warnings == []


def test_onnx_preview_operators_are_defined_and_a_bodys_undefined_one_is_placed() -> None:
    """`ai.onnx.preview.training` is ONNX's (Adagrad has a schema): no warning for it (a
    user trial's false positive); an undefined operator in a Loop body is named with the
    body's path."""
    from ge.compiler.steps import undefined_operators

    floats, longs = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64
    body = helper.make_graph(
        [helper.make_node("Mystery", ["v_in"], ["v_out"], domain="acme", name="mystery"),
         helper.make_node("Identity", ["c_in"], ["c_out"])], "body",
        [helper.make_tensor_value_info("i", longs, []),
         helper.make_tensor_value_info("c_in", onnx.TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", floats, [2])],
        [helper.make_tensor_value_info("c_out", onnx.TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", floats, [2])])
    graph = helper.make_graph(
        [helper.make_node("Adagrad", ["r", "t", "x", "g", "h"], ["x2", "h2"],
                          domain="ai.onnx.preview.training", name="adagrad"),
         helper.make_node("Loop", ["", "c", "x"], ["y"], body=body, name="loop")], "g",
        [helper.make_tensor_value_info(n, floats, [2]) for n in ("x", "g", "h")]
        + [helper.make_tensor_value_info("r", floats, []),
           helper.make_tensor_value_info("t", longs, []),
           helper.make_tensor_value_info("c", onnx.TensorProto.BOOL, [])],
        [helper.make_tensor_value_info(n, floats, [2]) for n in ("x2", "h2", "y")])
    model = helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.preview.training", 1),
        helper.make_opsetid("acme", 1)])
    assert undefined_operators(ge.graph.load(model)) == ["acme::Mystery (in loop.body)"]
