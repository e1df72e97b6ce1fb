"""Plugin loading in a service that compiles in several threads (trial "a service compiling
in threads"): a plugin import blocks only the compilations that need that plugin; nothing
of a plugin is seen before it is loaded as a whole; a `ge.finalize()` never leaves a
compilation loading into the finalized compiler; a development copy of an installed pass
runs when autoloading is off.

Plugins are real files (pass paths) and real installed distributions (entry points, a
site folder on `sys.path`, as in test_plugin_options_per_compilation.py). A plugin holds
its import open on a gate, a module of events the test puts into `sys.modules`: the order
of events is fixed by the test, never by timing. A compilation expected not to wait runs
in a thread the test joins while the other import is still held: the join's limit only
keeps a broken build from hanging (it is never reached when the compilation does not
wait, however slow the machine).
"""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

import onnx
import pytest
from onnx import TensorProto, helper

import ge
import ge.compiler
import ge.compiler.engine
import ge.passes
import ge.passes.plugin_cache as plugin_cache
from ge.compiler import (
    ENV_DISABLE_PLUGIN_AUTOLOAD,
    OPTION_DISABLE_PLUGIN_AUTOLOAD,
    OPTION_DISABLED_PLUGINS,
    compile_graph,
    current_pass_registry,
)
from ge.compiler.options import parse_options
from ge.compiler.plugin_loader import PluginLoader, PluginLoaderClosedError
from ge.errors import PluginLoadError
from ge.passes.bootstrap import load_pass_plugins
from ge.passes.discovery import module_name_for
from ge.passes.loader import in_process_plugin, loaded_plugins
from plugin_fixtures import install_distribution, small_graph

#: How long a join waits before the test calls a compilation stuck: never reached unless
#: the compilation waits for the held import (a regression), which this makes a failure
#: rather than a hang.
STUCK = 30

GATED_PASS = """
import ge_test_gate
from ge.passes import FusionBasePass, register_fusion_pass
from plugin_fixtures import insert_identity


@register_fusion_pass(name="{name}", stage="BeforeInferShape")
class {name}(FusionBasePass):
    def run(self, graph, context):
        insert_identity(graph, "{name}_ran")


ge_test_gate.executions.append(__name__)
ge_test_gate.importing.set()  # registered, still importing
assert ge_test_gate.go_on.wait(60), "the test never let the import finish"
"""

#: An installed plugin registering a custom operator and holding its import open.
GATED_OP = """
import ge_test_gate
from ge.ops import register_op

register_op("AddTwo", domain="com.trial", inputs=["x"], outputs=["y"],
            infer=lambda ctx: [ctx.input_descs[0]], kernel=lambda x: x + 2)
ge_test_gate.importing.set()
assert ge_test_gate.go_on.wait(60), "the test never let the import finish"
"""

#: A pass path's own operator of that name, and a pass telling which one it sees.
OWN_OP = """
import ge_test_gate
from ge.ops import get_custom_op, register_op
from ge.passes import FusionBasePass, register_fusion_pass

register_op("AddTwo", domain="com.trial", inputs=["x"], outputs=["y"],
            infer=lambda ctx: [ctx.input_descs[0]], kernel=lambda x: x + 3)


@register_fusion_pass(name="OwnAddTwo", stage="BeforeInferShape")
class OwnAddTwo(FusionBasePass):
    def run(self, graph, context):
        ge_test_gate.seen.append(get_custom_op("AddTwo", "com.trial"))
"""

#: A pass that holds its compilation open while it runs (and so the plugin it came from).
HELD_PASS = """
import ge_test_gate
from ge.passes import FusionBasePass, register_fusion_pass
from plugin_fixtures import insert_identity


@register_fusion_pass(name="{name}", stage="BeforeInferShape")
class {name}(FusionBasePass):
    def run(self, graph, context):
        insert_identity(graph, "{marker}")
        ge_test_gate.running.set()
        assert ge_test_gate.go_on.wait(60), "the test never let the pass end"
"""

PASS = """
from ge.passes import FusionBasePass, register_fusion_pass
from plugin_fixtures import insert_identity


@register_fusion_pass(name="{name}", stage="BeforeInferShape")
class {name}(FusionBasePass):
    def run(self, graph, context):
        insert_identity(graph, "{marker}")
"""


@pytest.fixture
def gate() -> Iterator[types.SimpleNamespace]:
    """`ge_test_gate`: `importing` is set once a gated plugin registered its pass (`running`
    once a held pass runs), the import (or the run) goes on when the test sets `go_on`;
    `executions` lists the modules executed, `seen` what passes report."""
    gate = types.SimpleNamespace(importing=threading.Event(), go_on=threading.Event(),
                                 running=threading.Event(), executions=[], seen=[])
    sys.modules["ge_test_gate"] = gate  # type: ignore[assignment]
    try:
        yield gate
    finally:
        gate.go_on.set()
        sys.modules.pop("ge_test_gate", None)



class Worker:
    """`fn()` in a thread of its own; `result()` is its return value (or raises its error)."""

    def __init__(self, fn: Callable[[], Any], name: str | None = None) -> None:
        self._outcome: list[tuple[bool, Any]] = []
        self.thread = threading.Thread(target=self._run, args=(fn,), name=name, daemon=True)
        self.thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self._outcome.append((True, fn()))
        except BaseException as exc:  # handed to the test by result()
            self._outcome.append((False, exc))

    def finished(self, limit: float = STUCK) -> bool:
        self.thread.join(limit)
        return not self.thread.is_alive()

    def result(self) -> Any:
        assert self.finished(), "the thread is stuck"
        ok, value = self._outcome[0]
        if not ok:
            raise value
        return value


def ran(report: Any) -> list[str]:
    return [r.pass_name for r in report.records]


def relu_model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def registered() -> list[str]:
    return [d.pass_name for d in ge.passes.get_registered_passes()]


# -- 1. an import blocks only the compilations that need it --------------------------------

def test_a_compilation_does_not_wait_for_another_ones_pass_path_import(write, gate) -> None:
    """While one compilation imports its pass path's plugin, a compilation without pass
    paths runs to its end, and sees nothing of that plugin (trial: 2.7 s instead of 3 ms);
    so does one with a plugin file of its own. One with a plugin folder (first on
    `sys.path` while its plugins import) runs once the import ended."""
    slow = write("slow/slow_pass.py", GATED_PASS.format(name="SlowPass"))
    mine = write("mine/my_pass.py", PASS.format(name="MyPass", marker="mine"))
    folder = write("folder/folder_pass.py", PASS.format(name="FolderPass", marker="f")).parent
    model = relu_model()
    ge.compile(model)  # the compiler runs
    importing = Worker(lambda: ge.compile(model, pass_paths=[slow]))
    assert gate.importing.wait(STUCK)
    plain = Worker(lambda: ge.compile(model))
    own_file = Worker(lambda: ge.compile(model, pass_paths=[mine]))
    try:
        assert plain.finished(), "a compilation without pass paths waited for the import"
        assert ran(plain.result().report) == []
        assert own_file.finished(), "a compilation with another plugin file waited for it"
        assert ran(own_file.result().report) == ["MyPass"]
        own_folder = Worker(lambda: ge.compile(model, pass_paths=[folder]))
    finally:
        gate.go_on.set()
    assert ran(importing.result().report) == ["SlowPass"]
    assert ran(own_folder.result().report) == ["FolderPass"]
    assert gate.executions == [gate.executions[0]]
    assert registered() == [] and loaded_plugins() == []


@pytest.mark.ge_entry_points
def test_an_installed_plugin_importing_is_invisible_until_it_is_loaded(site, gate) -> None:
    """While a compilation imports an installed plugin it wants: its pass is nowhere to be
    seen (not in `ge.passes`, not as a pass of the process), and a compilation that leaves
    the plugin out neither waits for it nor runs its pass."""
    install_distribution(site, "geplug-slow", {"alpha": GATED_PASS.format(name="AlphaPass")})
    ge.initialize({OPTION_DISABLED_PLUGINS: "alpha"})  # running, alpha not imported
    wanting = Worker(lambda: compile_graph(small_graph(), options={OPTION_DISABLED_PLUGINS: ""}))
    assert gate.importing.wait(STUCK)
    seen = Worker(lambda: (registered(), in_process_plugin(),
                           [p.name for p in current_pass_registry()],
                           ran(compile_graph(small_graph()))))
    try:
        assert seen.finished(), "a compilation leaving the plugin out waited for its import"
        assert seen.result() == ([], None, [], [])
    finally:
        gate.go_on.set()
    assert ran(wanting.result()) == ["AlphaPass"]
    assert registered() == ["AlphaPass"]  # loaded as a whole now
    assert ran(compile_graph(small_graph())) == []  # still left out by initialize's options


@pytest.mark.ge_entry_points
def test_compilations_that_want_the_plugin_importing_wait_for_it_and_share_it(
        site, gate, write) -> None:
    """A compilation that wants the plugin being imported waits for that import: the same
    installed plugin is then the one imported (its module runs once); the same pass path
    is that plugin, or, when the other compilation ended meanwhile, imported afresh."""
    install_distribution(site, "geplug-slow", {"alpha": GATED_PASS.format(name="AlphaPass")})
    ge.initialize({OPTION_DISABLED_PLUGINS: "alpha"})
    wanted = {OPTION_DISABLED_PLUGINS: ""}
    first = Worker(lambda: compile_graph(small_graph(), options=wanted))
    assert gate.importing.wait(STUCK)
    second = Worker(lambda: compile_graph(small_graph(), options=wanted))
    gate.go_on.set()
    assert ran(first.result()) == ran(second.result()) == ["AlphaPass"]
    assert gate.executions == ["geplug_slow_pkg.alpha"]

    gate.importing.clear()
    gate.go_on.clear()
    path = write("slow/beta.py", GATED_PASS.format(name="BetaPass"))
    first = Worker(lambda: compile_graph(small_graph(), pass_paths=[path]))
    assert gate.importing.wait(STUCK)
    second = Worker(lambda: compile_graph(small_graph(), pass_paths=[path]))
    gate.go_on.set()
    assert ran(first.result()) == ran(second.result()) == ["BetaPass"]
    assert loaded_plugins() == [p for p in loaded_plugins() if p.origin.kind == "entry_point"]
    assert not [m for m in sys.modules if m.startswith("_ge_py_pass_beta")]


@pytest.mark.ge_entry_points
def test_the_custom_operators_of_a_plugin_importing_are_not_seen_before_it_is_loaded(
        site, gate, write) -> None:
    """The operators an installed plugin registers while it imports are published with it:
    meanwhile nobody sees them, not even a compilation that leaves the plugin out (its
    view of the operators is taken while the plugin imports), which may bring its own
    operator of that name (no GE1301)."""
    from ge.ops import get_custom_op, unregister_op
    from ge.passes import FusionBasePass, PassStage, register_fusion_pass

    @register_fusion_pass(name="SeesAddTwo", stage=PassStage.BEFORE_INFER_SHAPE)
    class SeesAddTwo(FusionBasePass):  # of the process: it runs in every compilation
        def run(self, graph, context):
            gate.seen.append(get_custom_op("AddTwo", "com.trial"))

    try:
        install_distribution(site, "geplug-ops", {"alpha": GATED_OP})
        own = write("own/add_two.py", OWN_OP)
        ge.initialize({OPTION_DISABLED_PLUGINS: "alpha"})
        wanted = {OPTION_DISABLED_PLUGINS: ""}
        wanting = Worker(lambda: compile_graph(small_graph(), options=wanted))
        assert gate.importing.wait(STUCK)
        meanwhile = Worker(lambda: (get_custom_op("AddTwo", "com.trial"),
                                    ran(compile_graph(small_graph()))))
        try:
            assert meanwhile.finished(), "a compilation leaving the plugin out waited for it"
            assert meanwhile.result() == (None, ["SeesAddTwo"])
            assert gate.seen == [None]
            with_own = Worker(lambda: ran(compile_graph(small_graph(), pass_paths=[own])))
            assert with_own.finished(), "a compilation with its own plugin file waited"
            assert with_own.result() == ["OwnAddTwo", "SeesAddTwo"]
            assert gate.seen[1] is gate.seen[2] and gate.seen[1].location.file == str(own)
            del gate.seen[1:]
        finally:
            gate.go_on.set()
        assert ran(wanting.result()) == ["SeesAddTwo"]
        assert gate.seen[1] is not None and gate.seen[1].module == "geplug_ops_pkg.alpha"
        assert get_custom_op("AddTwo", "com.trial") is gate.seen[1]
        ran(compile_graph(small_graph()))  # left out by initialize's options: not seen
        assert gate.seen[2] is None
    finally:  # an installed plugin's module stays imported, and so its operator
        if get_custom_op("AddTwo", "com.trial") is not None:
            unregister_op("AddTwo", "com.trial")


@pytest.mark.ge_entry_points
def test_an_installed_plugins_operator_appears_with_the_plugin_not_before(
        site, gate, monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator the module of an installed plugin registers (its own, or a library's
    it imports: they stay registered as long as it stays imported) enters the table in
    the step that publishes the plugin, not at the end of its import, before it."""
    from ge.ops import get_custom_op, unregister_op

    install_distribution(site, "geplug-ops", {"alpha": GATED_OP})
    gate.go_on.set()  # (the import does not wait here)
    publishing, published = threading.Event(), threading.Event()
    original = plugin_cache.CACHE.publish

    def in_order(*args: Any) -> None:  # orders the threads, changes nothing
        publishing.set()
        assert published.wait(STUCK)
        original(*args)

    monkeypatch.setattr(plugin_cache.CACHE, "publish", in_order)
    try:
        loading = Worker(lambda: compile_graph(small_graph()))
        assert publishing.wait(STUCK)
        try:
            assert get_custom_op("AddTwo", "com.trial") is None
            assert loaded_plugins() == []
        finally:
            published.set()
        loading.result()
        op = get_custom_op("AddTwo", "com.trial")
        assert op is not None and op.module == "geplug_ops_pkg.alpha"
    finally:
        if get_custom_op("AddTwo", "com.trial") is not None:
            unregister_op("AddTwo", "com.trial")


# -- 3. a development copy of an installed pass, autoloading off ----------------------------

@pytest.mark.ge_entry_points
def test_a_dev_copy_runs_when_autoloading_is_off_by_option(site, write) -> None:
    """Autoloading off leaves every installed plugin out, as disabling it by name does: a
    pass path's copy of an installed pass is no E13030 clash then."""
    install_distribution(site, "geplug-marks", {"marks": PASS.format(name="Marks",
                                                                    marker="installed")})
    copy = write("dev/marks_dev.py", PASS.format(name="Marks", marker="dev"))
    assert ran(compile_graph(small_graph())) == ["Marks"]  # the installed one is loaded
    for options in ({OPTION_DISABLE_PLUGIN_AUTOLOAD: "true"}, {OPTION_DISABLED_PLUGINS: "marks"}):
        report = compile_graph(small_graph(), pass_paths=[copy], options=options)
        assert ran(report) == ["Marks"]
        assert [n.name for n in report.graph.nodes_of_type("Identity")] == ["dev"]
    report = compile_graph(small_graph())  # and the installed one, for the others
    assert [n.name for n in report.graph.nodes_of_type("Identity")] == ["installed"]
    assert registered() == ["Marks"]


@pytest.mark.ge_entry_points
def test_a_dev_copy_runs_when_autoloading_is_off_by_the_environment(
        site, write, monkeypatch: pytest.MonkeyPatch) -> None:
    """`GE_DISABLE_PLUGIN_AUTOLOAD` leaves out the installed plugins the process loaded
    otherwise (GE's `load_pass_plugins`, which loads them with the paths it is given)."""
    install_distribution(site, "geplug-marks", {"marks": PASS.format(name="Marks",
                                                                    marker="installed")})
    copy = write("dev/marks_dev.py", PASS.format(name="Marks", marker="dev"))
    other = write("other/other.py", PASS.format(name="Other", marker="other"))
    load_pass_plugins(str(other))  # registers Other and the installed Marks
    assert sorted(registered()) == ["Marks", "Other"]
    monkeypatch.setenv(ENV_DISABLE_PLUGIN_AUTOLOAD, "1")
    report = compile_graph(small_graph(), pass_paths=[copy])
    assert [n.name for n in report.graph.nodes_of_type("Identity")] == ["dev"]
    assert sorted(registered()) == ["Marks", "Other"]  # unchanged


# -- 4. a finalize() while a compilation chooses its plugins ---------------------------------

@pytest.mark.ge_entry_points
def test_finalize_between_taking_the_compiler_and_loading_its_plugins(
        site, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compilation that took the running compiler, which `ge.finalize()` closes before
    it loads its installed plugins, loads them into the compiler running then, not into
    the finalized one: after the last finalize, nothing stays registered."""
    install_distribution(site, "geplug-marks", {"marks": PASS.format(name="Marks",
                                                                    marker="installed")})
    ge.initialize()
    assert registered() == ["Marks"]
    took, finalized = threading.Event(), threading.Event()
    original = ge.compiler.engine._registry_for

    def in_order(engine: Any, options: Any) -> Any:  # orders the threads, changes nothing
        if threading.current_thread().name == "compiling" and not took.is_set():
            took.set()
            assert finalized.wait(STUCK)
        return original(engine, options)

    monkeypatch.setattr(ge.compiler.engine, "_registry_for", in_order)
    compiling = Worker(lambda: compile_graph(small_graph()), name="compiling")
    assert took.wait(STUCK)
    finalized_loader = ge.compiler.engine._engine.loader  # type: ignore[union-attr]
    ge.finalize()
    assert registered() == []
    finalized.set()
    assert ran(compiling.result()) == ["Marks"]
    assert finalized_loader.plugins == []  # nothing loaded into it after it was finalized
    assert ge.compiler.is_initialized()  # it started the compiler anew, as a first one does
    ge.finalize()
    assert registered() == []
    assert finalized_loader.closed


@pytest.mark.ge_entry_points
def test_finalize_while_a_compilation_imports_an_installed_plugin(site, gate) -> None:
    """`ge.finalize()` does not wait for an import in progress; the import, done, does not
    stay registered for the finalized compiler, and its compilation runs with the compiler
    running then."""
    install_distribution(site, "geplug-slow", {"alpha": GATED_PASS.format(name="AlphaPass")})
    ge.initialize({OPTION_DISABLED_PLUGINS: "alpha"})
    wanting = Worker(lambda: compile_graph(small_graph(), options={OPTION_DISABLED_PLUGINS: ""}))
    assert gate.importing.wait(STUCK)
    finalizing = Worker(ge.finalize)
    try:
        assert finalizing.finished(), "finalize waited for the import"
    finally:
        gate.go_on.set()
    assert ran(wanting.result()) == ["AlphaPass"]
    assert ge.compiler.is_initialized()
    ge.finalize()
    assert registered() == []
    assert [p.origin.kind for p in loaded_plugins()] == ["entry_point"]  # stays imported


def test_a_finalized_loader_refuses_to_load(write) -> None:
    """A loader `unload()` closed loads nothing more: GE1201, saying why; nothing loaded."""
    plugin = write("p/tagger.py", PASS.format(name="Tagger", marker="t"))
    options = parse_options({})
    loader = PluginLoader()
    loader.unload()
    assert loader.closed
    calls: list[Callable[[], object]] = [
        lambda: loader.start(options),
        lambda: loader.entry_points_for(parse_options({OPTION_DISABLED_PLUGINS: "x"})),
        lambda: loader.load_paths([plugin], options),
        lambda: loader.lease_paths([plugin], options),
    ]
    for call in calls:
        with pytest.raises(PluginLoaderClosedError) as info:
            call()
        assert info.value.code == "GE1201"
        assert info.value.message == (
            "the compiler was finalized (ge.finalize(), in another thread) while this "
            "compilation chose its plugins; it loads nothing more: start the compilation "
            "again")
    assert loaded_plugins() == [] and registered() == [] and loader.plugins == []
    assert not [m for m in sys.modules if m.startswith("_ge_py_pass_tagger")]


# -- 5. a pass-path file edited while another compilation holds it ---------------------------

def identities(report: Any) -> list[str]:
    return sorted(node.name for node in report.graph.nodes_of_type("Identity"))


def plugin_modules(stem: str) -> list[str]:
    return [name for name in sys.modules if name.startswith(f"_ge_py_pass_{stem}_")]


def test_an_edited_pass_path_file_runs_at_once_beside_a_compilation_holding_it(
        write, gate) -> None:
    """A plugin file edited while a compilation running now holds it (given as its pass
    path) is, for the next compilation, a plugin of its own beside that one: a copy under a
    module name of its content. Both run their code; nothing stays loaded after them."""
    plugin = write("dev/marks.py", HELD_PASS.format(name="Marks", marker="old"))
    holding = Worker(lambda: compile_graph(small_graph(), pass_paths=[plugin]))
    try:
        assert gate.running.wait(STUCK)
        plugin.write_text(PASS.format(name="Marks", marker="new"))
        assert identities(compile_graph(small_graph(), pass_paths=[plugin])) == ["new"]
        # The held one keeps its path's module name; the copy, unloaded after its
        # compilation, had one of its content.
        assert plugin_modules("marks") == [module_name_for(plugin.resolve())]
        both = Worker(lambda: [identities(compile_graph(small_graph(), pass_paths=[plugin]))
                               for _ in range(2)])
        assert both.result() == [["new"], ["new"]]
    finally:
        gate.go_on.set()
    assert identities(holding.result()) == ["old"]
    assert plugin_modules("marks") == [] and loaded_plugins() == [] and registered() == []
    assert identities(compile_graph(small_graph(), pass_paths=[plugin])) == ["new"]


def test_a_held_plugin_of_a_folder_shares_its_helper_with_a_copy_until_that_changes(
        write, gate) -> None:
    """The copy of a folder's edited plugin file shares the helper the held plugin
    imported (one name, one file). With the helper edited too, a copy would run the old
    helper: asking for the file is E13029 until the compilation holding it ends; nothing
    changes for that one."""
    plugin = write("dev/marks.py", "import _marks_text\n" + HELD_PASS.format(
        name="Marks", marker="old"))
    folder = plugin.parent
    helper = write("dev/_marks_text.py", "TEXT = 'old'\n")
    holding = Worker(lambda: compile_graph(small_graph(), pass_paths=[folder]))
    try:
        assert gate.running.wait(STUCK)
        plugin.write_text("import _marks_text\n" + PASS.format(name="Marks", marker="new"))
        assert identities(compile_graph(small_graph(), pass_paths=[folder])) == ["new"]
        helper.write_text("TEXT = 'new, longer'\n")
        with pytest.raises(PluginLoadError) as info:
            compile_graph(small_graph(), pass_paths=[folder])
        assert info.value.code == "E13029"
        assert info.value.message == (
            f"Failed to load custom fusion pass lib {plugin}. Reason: {plugin}, {helper} "
            "changed (or went) since it was imported, and it is still loaded: by "
            "the compiler, from ASCEND_GE_PY_PASS_PATH when it started (call ge.finalize() "
            "first), by another compilation running now that was given it as a pass path, "
            "or by an open ge.testing.load_passes block (load it again when they have "
            "ended); ge would run the old code.")
        assert registered() == [] and plugin_modules("marks") == [
            module_name_for(plugin.resolve())]
    finally:
        gate.go_on.set()
    assert identities(holding.result()) == ["old"]
    assert plugin_modules("marks") == [] and loaded_plugins() == []
    assert "_marks_text" not in sys.modules
