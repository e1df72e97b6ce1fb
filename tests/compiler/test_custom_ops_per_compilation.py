"""A compilation sees exactly the custom operators of the plugins it runs with (and those
registered outside plugins), for its whole duration, whatever other threads compile and
whether or not another thread calls `ge.finalize()` meanwhile (`ge.ops.registry.CustomOpView`).

Found by a user trial, each timing-dependent then: a compilation without the plugin that
registers `com.trial::AddTwo` sometimes ran with another thread's copy; two concurrent
compilations bringing their own copy of it failed GE1301 in whichever imported second; and
`ge.finalize()` in a third thread unregistered the environment plugin's operator under a
running compilation (GE1601). Here every interleaving is forced with events: a pass of the
plugin (or an observer) stops the compilation where the test acts, then lets it go on.
"""

from __future__ import annotations

import contextvars
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ge
from ge.compiler import OPTION_DISABLE_PLUGIN_AUTOLOAD, OPTION_DISABLED_PLUGINS
from ge.compiler.scheduler import PipelineObserver
from ge.errors import (
    OpRegisterError,
    PluginLoadError,
    SessionError,
    ShapeInferenceError,
)
from ge.ops import get_custom_op, list_custom_ops, register_op, unregister_op
from ge.ops.registry import CustomOp, custom_domains
from ge.passes.bootstrap import ENV_PY_PASS_PATH
from ge.testing import load_passes
from plugin_fixtures import install_distribution

DOMAIN = "com.trial"
TIMEOUT = 60  # seconds any one wait may take before the test fails (never reached when green)

#: A plugin registering com.trial::AddTwo (x + {step}) at import, with no guard, and a
#: pass that records the AddTwo its compilation sees, pauses (`Gates.pause`), and records
#: it again. The kernel records which copy ran, in which thread.
PLUGIN = '''
import threading

import numpy as np

import _ge_test_gates as gates
from ge.ops import get_custom_op, list_custom_ops, register_op
from ge.ops.registry import custom_domains
from ge.passes import FusionBasePass, register_fusion_pass


def add(x):
    gates.calls.append(("{tag}", threading.get_ident()))
    return (np.asarray(x) + {step}).astype(x.dtype)


register_op("AddTwo", domain="com.trial", inputs=["x"], outputs=["y"],
            infer=lambda ctx: [ctx.input_descs[0]], kernel=add)


@register_fusion_pass(name="Gate{tag}", stage="BeforeInferShape")
class Gate{tag}(FusionBasePass):
    def run(self, graph, context):
        gates.record("{tag}", get_custom_op("AddTwo", "com.trial"), list_custom_ops(),
                     custom_domains())
        gates.pause("{tag}")
        gates.record("{tag}", get_custom_op("AddTwo", "com.trial"))
'''


class Gates:
    """What the plugins' passes report to the test, and where they wait for it (importable
    by the plugins as `_ge_test_gates`: in `sys.modules` already, so importing it adds no
    module to the plugin)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: dict[str, list[CustomOp | None]] = {}
        self.listed: dict[str, list[tuple[list[CustomOp], set[str]]]] = {}
        self.calls: list[tuple[str, int]] = []
        self.on_pause: dict[str, Callable[[], Any]] = {}

    def record(self, tag: str, op: CustomOp | None, listed: list[CustomOp] | None = None,
               domains: set[str] | None = None) -> None:
        with self.lock:
            self.seen.setdefault(tag, []).append(op)
            if listed is not None and domains is not None:
                self.listed.setdefault(tag, []).append((listed, domains))

    def pause(self, tag: str) -> None:
        action = self.on_pause.get(tag)
        if action is not None:
            action()

    def calls_in(self, thread: int) -> list[str]:
        return [tag for tag, ident in self.calls if ident == thread]


@pytest.fixture
def gates() -> Iterator[Gates]:
    made = Gates()
    sys.modules["_ge_test_gates"] = made  # type: ignore[assignment]
    try:
        yield made
    finally:
        del sys.modules["_ge_test_gates"]


class Worker:
    """A thread running `fn`; `result()` joins it and returns what it returned or raises
    what it raised (pytest sees a thread's failure only this way)."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._fn = fn
        self._value: Any = None
        self._error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self._value = self._fn()
        except BaseException as exc:  # handed to result()
            self._error = exc

    @property
    def ident(self) -> int:
        assert self.thread.ident is not None
        return self.thread.ident

    def result(self) -> Any:
        self.thread.join(TIMEOUT)
        assert not self.thread.is_alive(), "the compilation did not end"
        if self._error is not None:
            raise self._error
        return self._value


def hold() -> tuple[threading.Event, threading.Event, Callable[[], None]]:
    """(reached, release, the pause action): the action says it was reached and waits."""
    reached, release = threading.Event(), threading.Event()

    def action() -> None:
        reached.set()
        assert release.wait(TIMEOUT), "the test never released the compilation"

    return reached, release, action


def model() -> onnx.ModelProto:
    """y = Relu(com.trial::AddTwo(x)), x float [2, 3]: the AddTwo's output is typed by
    inference only (a compilation that does not see the operator fails GE1305)."""
    graph = helper.make_graph(
        [helper.make_node("AddTwo", ["x"], ["t"], domain=DOMAIN, name="add_two"),
         helper.make_node("Relu", ["t"], ["y"], name="relu")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid(DOMAIN, 1)])


def plugin(write: Callable[[str, str], Path], folder: str, tag: str, step: int = 2) -> Path:
    return write(f"{folder}/addtwo.py", PLUGIN.format(tag=tag, step=step))


def computes(op: CustomOp | None) -> float:
    """What `op` adds (its kernel on 0)."""
    assert op is not None and op.kernel is not None
    return float(op.kernel(np.zeros(1, np.float32))[0])


# -- 1: a compilation without the plugin ---------------------------------------------------
def test_a_compilation_without_the_plugin_never_sees_a_running_ones_op(write, gates) -> None:
    """While A (with the plugin) runs, B (without) fails as it does alone, every time:
    GE1601 when it verifies, GE1305 when it does not; nothing of A's is process-wide."""
    path = plugin(write, "a", "A")
    reached, release, gates.on_pause["A"] = hold()
    a = Worker(lambda: ge.compile(model(), pass_paths=[path], verify=True))
    try:
        assert reached.wait(TIMEOUT)
        assert get_custom_op("AddTwo", DOMAIN) is None
        assert DOMAIN not in custom_domains() and list_custom_ops() == []
        with pytest.raises(SessionError) as info:
            ge.compile(model(), verify=True)
        assert info.value.code == "GE1601"
        assert "com.trial::AddTwo, which no loaded plugin registers" in info.value.message
        with pytest.raises(ShapeInferenceError) as inferred:
            ge.compile(model())
        assert inferred.value.code == "GE1305"
    finally:
        release.set()
    result = a.result()
    assert result.verification is not None and result.verification.ok
    assert gates.calls_in(a.ident) and set(gates.calls_in(a.ident)) == {"A"}  # A's kernel ran
    assert [op is not None and op.where.startswith(str(path)) for op in gates.seen["A"]] == [
        True, True]
    assert get_custom_op("AddTwo", DOMAIN) is None


class PauseBeforeTheFirstStep(PipelineObserver):
    def __init__(self) -> None:
        self.reached, self.release, self.action = hold()

    def step_started(self, index: int, label: str, graph: ge.graph.Graph) -> None:
        if index == 0:
            self.action()


def test_a_running_compilation_does_not_see_the_op_of_one_that_starts_later(
        write, gates) -> None:
    """B started first (no plugin), A loads its plugin while B waits: B's inference still
    finds no AddTwo (GE1305), A compiles with its own."""
    path = plugin(write, "a", "A")
    pause = PauseBeforeTheFirstStep()
    b = Worker(lambda: ge.compile(model(), observers=[pause]))
    reached, release, gates.on_pause["A"] = hold()
    try:
        assert pause.reached.wait(TIMEOUT)
        a = Worker(lambda: ge.compile(model(), pass_paths=[path], verify=True))
        assert reached.wait(TIMEOUT)  # A holds its AddTwo now
        pause.release.set()
        with pytest.raises(ShapeInferenceError) as inferred:
            b.result()
        assert inferred.value.code == "GE1305" and "AddTwo" in inferred.value.message
    finally:
        pause.release.set()
        release.set()
    assert a.result().verification.ok


# -- 2: two copies of one operator ---------------------------------------------------------
def test_two_concurrent_compilations_each_run_their_own_copy_of_an_op(write, gates) -> None:
    """A development copy (x + 2) and the team's (x + 3), one per compilation: no GE1301;
    each compilation builds, infers and verifies with its own copy, A also after B ended
    and unloaded the team's."""
    dev = plugin(write, "dev", "dev", step=2)
    team = plugin(write, "team", "team", step=3)
    reached, release, gates.on_pause["dev"] = hold()
    a = Worker(lambda: ge.compile(model(), pass_paths=[dev.parent], verify=True))
    try:
        assert reached.wait(TIMEOUT)
        b = ge.compile(model(), pass_paths=[team.parent], verify=True)  # A holds its copy
        assert b.verification is not None and b.verification.ok
    finally:
        release.set()
    result = a.result()
    assert result.verification is not None and result.verification.ok
    assert [computes(op) for op in gates.seen["dev"]] == [2.0, 2.0]
    assert [computes(op) for op in gates.seen["team"]] == [3.0, 3.0]
    assert set(gates.calls_in(a.ident)) == {"dev"}  # (`computes` above calls from here)
    assert set(gates.calls_in(threading.get_ident())) == {"team", "dev"}
    assert get_custom_op("AddTwo", DOMAIN) is None


def test_two_concurrent_compilations_of_one_plugin_share_its_op(write, gates) -> None:
    """The same plugin in two running compilations is imported once; each holds its
    operator (the second, loading it from the cache, too), and neither puts it in the
    process-wide table, where the one ending first would leave it or take it."""
    path = plugin(write, "a", "A")
    reached, release, gates.on_pause["A"] = hold()
    a = Worker(lambda: ge.compile(model(), pass_paths=[path], verify=True))
    try:
        assert reached.wait(TIMEOUT)
        del gates.on_pause["A"]
        b = ge.compile(model(), pass_paths=[path], verify=True)
        assert b.verification is not None and b.verification.ok
        assert get_custom_op("AddTwo", DOMAIN) is None
    finally:
        release.set()
    assert a.result().verification.ok
    first, *others = gates.seen["A"]
    assert first is not None and all(op is first for op in others) and len(others) == 3
    assert get_custom_op("AddTwo", DOMAIN) is None


def test_two_copies_in_one_compilation_are_GE1301_located_once(write, gates) -> None:
    """Within one compilation the copies still clash (GE1301 inside E13029), and the
    message says where once: the E13029's location, not the GE1301's again."""
    dev = plugin(write, "dev", "dev", step=2)
    team = plugin(write, "team", "team", step=3)
    with pytest.raises(PluginLoadError) as info:
        ge.compile(model(), pass_paths=[dev.parent, team.parent])
    err = info.value
    assert err.code == "E13029" and isinstance(err.__cause__, OpRegisterError)
    line = next(i for i, text in enumerate(team.read_text().splitlines(), 1)
                if text.startswith("register_op("))
    assert str(err).count(f"(at {team}:{line})") == 1, str(err)
    assert f"already registered by {dev}:{line}; {team}:{line} registers it again" in str(err)


def test_a_copy_of_an_op_user_code_registered_is_still_GE1301(write, gates) -> None:
    """A compilation's plugins are checked against what it sees: the process-wide table
    (here the user's operator) and its own."""
    spec = register_op("AddTwo", domain=DOMAIN, inputs=["x"], outputs=["y"],
                       infer=lambda ctx: [ctx.input_descs[0]], kernel=lambda x: x + 2)
    try:
        with pytest.raises(PluginLoadError) as info:
            ge.compile(model(), pass_paths=[plugin(write, "dev", "dev")])
        assert isinstance(info.value.__cause__, OpRegisterError)
        assert info.value.__cause__.code == "GE1301"
        mine = get_custom_op("AddTwo", DOMAIN)
        assert mine is not None and mine.spec is spec
    finally:
        unregister_op("AddTwo", DOMAIN)


# -- 3: finalize under running compilations ------------------------------------------------
def test_finalize_does_not_take_the_op_from_running_compilations(
        write, gates, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two compilations running with the environment's plugin while another thread
    finalizes, initializes again (a new registration of AddTwo) and finalizes: each keeps
    the AddTwo of the compiler it started with, and verifies with it."""
    path = plugin(write, "env", "env")
    monkeypatch.setenv(ENV_PY_PASS_PATH, str(path.parent))
    ge.initialize()
    first = get_custom_op("AddTwo", DOMAIN)
    assert first is not None
    both = threading.Barrier(3)
    release = threading.Event()

    def action() -> None:
        both.wait(TIMEOUT)
        assert release.wait(TIMEOUT)

    gates.on_pause["env"] = action
    workers = [Worker(lambda: ge.compile(model(), verify=True)) for _ in range(2)]
    try:
        both.wait(TIMEOUT)
        ge.finalize()
        assert get_custom_op("AddTwo", DOMAIN) is None
        ge.initialize()
        second = get_custom_op("AddTwo", DOMAIN)
        assert second is not None and second is not first
        ge.finalize()
    finally:
        release.set()
    for worker in workers:
        result = worker.result()
        assert result.verification is not None and result.verification.ok
        assert gates.calls_in(worker.ident)  # the kernel ran, in its own thread
    assert gates.seen["env"] == [first] * 4
    assert get_custom_op("AddTwo", DOMAIN) is None  # finalized


# -- what stays as it was ------------------------------------------------------------------
def test_a_compilation_sees_its_plugins_op_and_leaves_nothing_behind(write, gates) -> None:
    path = plugin(write, "a", "A")
    for _ in range(2):  # (the second load executes the file again)
        result = ge.compile(model(), pass_paths=[path], verify=True)
        assert result.verification is not None and result.verification.ok
        assert get_custom_op("AddTwo", DOMAIN) is None and list_custom_ops() == []
    listed, domains = gates.listed["A"][-1]
    assert [op.spec.op_type for op in listed] == ["AddTwo"] and DOMAIN in domains
    assert listed[0] is gates.seen["A"][-1]


def test_a_pass_set_registers_its_op_process_wide_while_it_is_open(write, gates) -> None:
    """`ge.testing.load_passes` keeps its documented behaviour: the set's operator is in the
    process-wide table while it is open (other threads and compilations see it, a model
    using it runs), and a compilation given the same plugin shares it."""
    path = plugin(write, "a", "A")
    with load_passes(path):
        op = get_custom_op("AddTwo", DOMAIN)
        assert op is not None
        seen: list[CustomOp | None] = []
        other = threading.Thread(target=lambda: seen.append(get_custom_op("AddTwo", DOMAIN)))
        other.start()
        other.join(TIMEOUT)
        assert seen == [op]
        result = ge.compile(model(), verify=True)  # no pass path: the set's op runs
        assert result.verification is not None and result.verification.ok
        result = ge.compile(model(), pass_paths=[path], verify=True)  # the same plugin
        assert result.verification is not None and result.verification.ok
        assert gates.seen["A"][-1] is op
        assert get_custom_op("AddTwo", DOMAIN) is op
    assert get_custom_op("AddTwo", DOMAIN) is None


HOOK_PLUGIN = '''
import numpy as np

import _ge_test_gates as gates
from ge.ops import get_custom_op, register_op
from ge.passes import FusionBasePass, register_fusion_pass

register_op("AddTwo", domain="com.trial", inputs=["x"], outputs=["y"],
            infer=lambda ctx: [ctx.input_descs[0]], kernel=lambda x: x + 2)


@register_fusion_pass(name="Hook", stage="BeforeInferShape")
class Hook(FusionBasePass):
    def run(self, graph, context):
        if get_custom_op("Halve", "com.trial") is None:  # the documented guard
            register_op("Halve", domain="com.trial", inputs=["x"], outputs=["y"],
                        infer=lambda ctx: [ctx.input_descs[0]], kernel=lambda x: x / 2)
        gates.record("halve", get_custom_op("Halve", "com.trial"))
        try:
            register_op("AddTwo", domain="com.trial", inputs=["x"], outputs=["y"],
                        infer=lambda ctx: [ctx.input_descs[0]], kernel=lambda x: x + 3)
        except Exception as err:
            gates.record("clash " + str(err), None)
'''


def test_an_op_a_pass_registers_while_it_runs_is_user_code(write, gates) -> None:
    """Registered from a pass's hook (not at the plugin's import), an operator is not the
    plugin's: the compilation sees it at once, and it stays process-wide until
    `unregister_op`; registering one of the name of the compilation's plugin's operator
    is GE1301 naming both, as it would be process-wide."""
    path = write("hook/hook.py", HOOK_PLUGIN)
    try:
        ge.compile(model(), pass_paths=[path])
        halve = get_custom_op("Halve", DOMAIN)
        assert halve is not None and gates.seen["halve"] == [halve]
        (clash,) = [key for key in gates.seen if key.startswith("clash ")]
        assert "[GE1301] custom operator com.trial::AddTwo is already registered by " \
               f"{path}:" in clash
        assert get_custom_op("AddTwo", DOMAIN) is None
    finally:
        if get_custom_op("Halve", DOMAIN) is not None:
            unregister_op("Halve", DOMAIN)


THREADS_PLUGIN = '''
import contextvars
import threading

import numpy as np

import _ge_test_gates as gates
from ge.ops import get_custom_op, register_op
from ge.passes import FusionBasePass, register_fusion_pass

register_op("AddTwo", domain="com.trial", inputs=["x"], outputs=["y"],
            infer=lambda ctx: [ctx.input_descs[0]], kernel=lambda x: x + 2)


def look(tag):
    gates.record(tag, get_custom_op("AddTwo", "com.trial"))


@register_fusion_pass(name="Spawns", stage="BeforeInferShape")
class Spawns(FusionBasePass):
    def run(self, graph, context):
        plain = threading.Thread(target=look, args=("plain",))
        context_copy = contextvars.copy_context()
        copied = threading.Thread(target=context_copy.run, args=(look, "copied"))
        for thread in (plain, copied):
            thread.start()
            thread.join()
'''


def test_a_thread_a_pass_starts_sees_the_ops_in_a_copy_of_its_context(
        write, gates) -> None:
    """The view is a context variable: a thread a pass starts sees the compilation's
    operators when it runs in `contextvars.copy_context()`, as docs/ops.md says."""
    ge.compile(model(), pass_paths=[write("spawns/spawns.py", THREADS_PLUGIN)])
    assert gates.seen["plain"] == [None]
    (copied,) = gates.seen["copied"]
    assert copied is not None and copied.spec.op_type == "AddTwo"
    assert contextvars.copy_context().run(get_custom_op, "AddTwo", DOMAIN) is None


INSTALLED = '''
import numpy as np

from ge.ops import register_op
from ge.passes import FusionBasePass, register_fusion_pass

register_op("AddTwo", domain="com.trial", inputs=["x"], outputs=["y"],
            infer=lambda ctx: [ctx.input_descs[0]], kernel=lambda x: x + 2)


@register_fusion_pass(name="Installed", stage="BeforeInferShape")
class Installed(FusionBasePass):
    def run(self, graph, context):
        return None
'''


@pytest.mark.ge_entry_points
def test_a_compilation_leaving_an_installed_plugin_out_does_not_see_its_op(
        write, gates, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The installed plugin's module registers AddTwo at import (it stays with the module,
    which stays imported). A compilation that leaves the plugin out (by name, or all
    installed plugins) does not see it (GE1601 when it verifies) and may bring a development
    copy of it in its pass paths."""
    site = tmp_path / "site"
    site.mkdir()
    package = install_distribution(site, "trialops", {"trial": INSTALLED})
    monkeypatch.syspath_prepend(str(site))
    left_out = {OPTION_DISABLED_PLUGINS: "trial"}
    try:
        assert ge.compile(model(), verify=True).verification.ok  # loads it
        installed = get_custom_op("AddTwo", DOMAIN)
        assert installed is not None and installed.module == f"{package}.trial"
        for leaving_out in (left_out, {OPTION_DISABLE_PLUGIN_AUTOLOAD: "true"}):
            with pytest.raises(SessionError) as info:
                ge.compile(model(), options=leaving_out, verify=True)
            assert "com.trial::AddTwo, which no loaded plugin registers" in info.value.message
        dev = plugin(write, "dev", "dev", step=3)
        result = ge.compile(model(), options=left_out, pass_paths=[dev], verify=True)
        assert result.verification is not None and result.verification.ok
        assert [computes(op) for op in gates.seen["dev"]] == [3.0, 3.0]
        assert get_custom_op("AddTwo", DOMAIN) is installed
    finally:
        ge.finalize()
        if get_custom_op("AddTwo", DOMAIN) is not None:
            unregister_op("AddTwo", DOMAIN)
        for name in [m for m in sys.modules if m.startswith(package)]:
            del sys.modules[name]
