"""Two compilations dumping into one folder at once, in two processes or two threads: every
change a run makes to the folder (its check, its takeover, each dump with its listing) is
made holding the folder's lock (`ge.compiler.dump_lock`), so whatever the interleaving the
folder ends holding one run's dumps, all listed in its manifest and pointing into its
weights file, the run that lost the folder says so with a CompileWarning, and a later run
can use the folder; a run killed while writing a dump leaves nothing that refuses it.

The interleavings are forced, not timed: run A pauses inside a dump (its files renamed into
place, its weights file grown, not listed yet: where B's takeover broke the folder before
the lock) and between two dumps, at barriers the test releases once run B has reached the
lock (`_Pause`, barrier files for a child process)."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
import ge.compiler.dump_lock as dump_lock
import ge.compiler.dumping as dumping
from ge.compiler.dump_lock import LOCK_FILE_NAME, locked_folder
from ge.compiler.dump_manifest import MANIFEST_NAME, is_dump_file
from ge.compiler.dumping import GraphDumper
from ge.errors import CompileWarning, PassRunError
from ge.graph.external_data import iter_tensors
from plugin_fixtures import small_graph

TIMEOUT = 120.0  # seconds a barrier waits before the test fails (a hang, not a timing)


def _model(width: int = 64) -> onnx.ModelProto:
    """x [2, width] -> MatMul (a weight of at least 16 KiB: in the shared weights file) ->
    Relu -> y."""
    weight = np.random.default_rng(width).standard_normal((width, width)).astype(np.float32)
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
         helper.make_node("Relu", ["m"], ["y"], name="relu")], "weighted",
        [vi("x", TensorProto.FLOAT, [2, width])], [vi("y", TensorProto.FLOAT, [2, width])],
        [numpy_helper.from_array(weight, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _wait_for(done: Callable[[], bool], what: str, child: subprocess.Popen[str] | None = None
              ) -> None:
    """Poll until `done()`; fail after TIMEOUT, or as soon as `child` exits."""
    deadline = time.monotonic() + TIMEOUT
    while not done():
        if child is not None and child.poll() is not None:
            out, err = child.communicate()
            raise AssertionError(f"the child exited ({child.returncode}) before {what}:\n"
                                 f"{out}\n{err}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def assert_one_runs_dumps(folder: Path, weighted: bool = True) -> dict[str, Any]:
    """The folder holds exactly the dumps its manifest lists, each as listed, none being
    written, every ONNX dump pointing into the run's one weights file (a `weighted` model's
    do), there and holding what they point to; returns the manifest."""
    manifest = json.loads((folder / MANIFEST_NAME).read_text())
    assert manifest["writing"] == []
    listed = {f["name"]: (f["size"], f["mtime_ns"]) for f in manifest["files"]}
    on_disk = {p.name for p in folder.iterdir() if is_dump_file(p.name)}
    assert on_disk == set(listed)
    for name, stamp in listed.items():
        st = (folder / name).lstat()
        assert (st.st_size, st.st_mtime_ns) == stamp, name
    weights = f"ge_weights_{manifest['run'][:16]}.data"
    assert {name for name in listed if name.startswith("ge_weights_")} == (
        {weights} if weighted else set())
    size = (folder / weights).stat().st_size if weighted else 0
    for name in listed:
        if name.endswith(".onnx"):
            model = onnx.load(str(folder / name), load_external_data=False)
            external = [{e.key: e.value for e in t.external_data} for t in iter_tensors(model)
                        if t.data_location == TensorProto.EXTERNAL]
            assert bool(external) == weighted, name
            for entries in external:
                assert entries["location"] == weights
                assert int(entries.get("offset", 0)) + int(entries["length"]) <= size
    return manifest


def _warned(warnings: list[str]) -> list[str]:
    return [w for w in warnings if w.startswith("stopped dumping graphs to ")]


# -- two processes -----------------------------------------------------------------------

CHILD = """
import json, os, sys, time
from pathlib import Path
import onnx
import ge
import ge.compiler.dumping as dumping

model, folder, barriers = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
pause_at = int(sys.argv[4])

def wait(name):
    while not (barriers / name).exists():
        time.sleep(0.005)

saves = []
real_save = dumping.save_model
def save_model(*args, **kwargs):  # inside a dump: the folder's lock held
    result = real_save(*args, **kwargs)
    saves.append(args[1])
    if len(saves) == pause_at:  # written and renamed into place, not listed yet
        (barriers / "inside").touch()
        wait("go")
    return result
dumping.save_model = save_model

writes = []
real_write = dumping.GraphDumper._write
def _write(self, graph, name):  # between two dumps: no lock held
    writes.append(name)
    if len(saves) == pause_at and "between" not in [p.name for p in barriers.iterdir()]:
        (barriers / "between").touch()
        wait("go2")
    return real_write(self, graph, name)
dumping.GraphDumper._write = _write

result = ge.compile(onnx.load(model), dump=folder)
print(json.dumps([str(w) for w in result.warnings]))
"""


@pytest.fixture
def child_a(tmp_path: Path) -> Iterator[Callable[[int], tuple[subprocess.Popen[str], Path]]]:
    """Start run A in a child process, pausing in its `pause_at`-th ONNX dump (barrier
    files `inside` / `go`) and before the dump after it (`between` / `go2`)."""
    children: list[subprocess.Popen[str]] = []
    source = tmp_path / "a.onnx"
    onnx.save(_model(64), source)
    script = tmp_path / "child_a.py"
    script.write_text(CHILD)
    barriers = tmp_path / "barriers"
    barriers.mkdir()

    def start(pause_at: int) -> tuple[subprocess.Popen[str], Path]:
        env = {**os.environ, "GE_DISABLE_PLUGIN_AUTOLOAD": "1"}
        child = subprocess.Popen(
            [sys.executable, str(script), str(source), str(tmp_path / "dumps"),
             str(barriers), str(pause_at)], env=env, text=True, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE)
        children.append(child)
        return child, barriers

    yield start
    for child in children:
        if child.poll() is None:
            child.kill()
            child.communicate()


def _locked_elsewhere(folder: Path) -> bool:
    """Whether another open of `folder` (another process, as the kernel sees it) holds
    its lock now; asked without waiting."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


class _FlockSpy:
    """`fcntl` for `ge.compiler.dump_lock`, telling (`reached`) when this process asks for
    an exclusive lock: run B is about to wait for run A."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.LOCK_EX, self.LOCK_UN, self.LOCK_NB = fcntl.LOCK_EX, fcntl.LOCK_UN, fcntl.LOCK_NB

    def flock(self, fd: int, operation: int) -> None:
        if operation == fcntl.LOCK_EX:
            self.reached.set()
        fcntl.flock(fd, operation)


def test_a_run_taking_the_folder_over_waits_for_the_other_runs_dump_to_be_listed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        child_a: Callable[[int], tuple[subprocess.Popen[str], Path]]) -> None:
    """Run A (a child process) is inside its first dump (Input): its files renamed into place,
    its weights file written, neither listed yet. Run B (this process) then starts: it waits
    for A's dump (before the lock, its check refused the folder for A's unlisted files, or
    its takeover removed A's weights file while A was writing into it, and A then listed
    its dumps in B's place). B takes the folder over while A is between dumps; A, at its
    next dump, warns and writes nothing more. The folder holds B's dumps alone, complete,
    and a third run uses it."""
    folder = tmp_path / "dumps"
    a, barriers = child_a(1)  # (Input)
    _wait_for((barriers / "inside").exists, "run A inside its dump", a)
    assert _locked_elsewhere(folder)
    during = json.loads((folder / MANIFEST_NAME).read_text())
    assert (folder / "ge_0000_Input.onnx").exists() and during["files"] == []
    assert sorted(during["writing"]) == [  # (a run killed now: removable by the next)
        "ge_0000_Input.onnx", "ge_0000_Input.onnx.skipped.txt", "ge_0000_Input.txt",
        f"ge_weights_{during['run'][:16]}.data"]

    spy = _FlockSpy()
    monkeypatch.setattr(dump_lock, "fcntl", spy)
    outcome: dict[str, Any] = {}

    def run_b() -> None:
        try:
            outcome["result"] = ge.compile(_model(32), dump=folder)
        except BaseException as err:  # (reported below)
            outcome["error"] = err

    b = threading.Thread(target=run_b)
    b.start()
    _wait_for(spy.reached.is_set, "run B at the folder's lock")
    (barriers / "go").touch()  # A lists its dump and stops between two: B goes on
    b.join(TIMEOUT)
    assert not b.is_alive() and "error" not in outcome, outcome
    assert outcome["result"].warnings == []
    after_b = assert_one_runs_dumps(folder)
    assert after_b["complete"] is True and after_b["pid"] == os.getpid()

    assert (barriers / "between").exists()
    (barriers / "go2").touch()
    out, err = a.communicate(timeout=TIMEOUT)
    assert a.returncode == 0, err
    (warning,) = _warned(json.loads(out))
    assert warning == (
        f"stopped dumping graphs to {folder}: another compilation (pid {os.getpid()}, started "
        f"{after_b['started']}) dumps into it now and replaced this compilation's dumps; "
        "dump each compilation into its own folder")
    assert assert_one_runs_dumps(folder) == after_b  # A wrote nothing more

    monkeypatch.undo()
    third = ge.compile(_model(16), dump=folder)
    assert third.warnings == []
    assert assert_one_runs_dumps(folder)["complete"] is True


def test_a_run_killed_inside_a_dump_leaves_a_folder_the_next_run_takes_over(
        tmp_path: Path, child_a: Callable[[int], tuple[subprocess.Popen[str], Path]]) -> None:
    """Killed (SIGKILL) with its Input dump and its weights file written, not listed: the
    names were listed as being written first, so the next run
    removes them with the rest (no GE1701 for files no manifest lists), and the kernel's
    lock went with the process."""
    folder = tmp_path / "dumps"
    a, barriers = child_a(1)
    _wait_for((barriers / "inside").exists, "run A inside its dump", a)
    a.send_signal(signal.SIGKILL)
    a.communicate(timeout=TIMEOUT)
    left = json.loads((folder / MANIFEST_NAME).read_text())
    assert left["complete"] is False and "ge_0000_Input.onnx" in left["writing"]
    weights = folder / f"ge_weights_{left['run'][:16]}.data"
    assert (folder / "ge_0000_Input.onnx").exists() and weights.stat().st_size > 0

    result = ge.compile(_model(32), dump=folder)
    assert result.warnings == []
    manifest = assert_one_runs_dumps(folder)
    assert manifest["complete"] is True and manifest["run"] != left["run"]
    assert not any(left["run"][:16] in p.name for p in folder.iterdir())


# -- two threads -------------------------------------------------------------------------

class _Pause:
    """Run A's pauses, in this process: inside its `at`-th ONNX dump, and before the dump
    after it; other threads pass through."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, at: int) -> None:
        self.thread: threading.Thread | None = None
        self.inside, self.go = threading.Event(), threading.Event()
        self.between, self.go2 = threading.Event(), threading.Event()
        self._saves = 0
        real_save, real_write = dumping.save_model, GraphDumper._write

        def save_model(*args: Any, **kwargs: Any) -> Any:
            result = real_save(*args, **kwargs)
            if threading.current_thread() is self.thread:
                self._saves += 1
                if self._saves == at:
                    self.inside.set()
                    assert self.go.wait(TIMEOUT)
            return result

        def _write(dumper: GraphDumper, graph: Any, name: str) -> None:
            if (threading.current_thread() is self.thread and self._saves == at
                    and not self.between.is_set()):
                self.between.set()
                assert self.go2.wait(TIMEOUT)
            real_write(dumper, graph, name)

        monkeypatch.setattr(dumping, "save_model", save_model)
        monkeypatch.setattr(GraphDumper, "_write", _write)


def test_two_threads_dumping_into_one_folder(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """As between two processes: run B (a thread) waits at the folder's lock (the lock of
    this process, which `flock` on NFS would not give) while run A (another thread) is
    inside a dump, takes the folder over while A is between two, and A warns, in its own
    result's warnings."""
    folder = tmp_path / "dumps"
    pause = _Pause(monkeypatch, at=1)  # (Input)
    reached = threading.Event()
    real_thread_lock = dump_lock._thread_lock

    def thread_lock(fd: int) -> threading.Lock:
        if threading.current_thread().name == "run-b":
            reached.set()
        return real_thread_lock(fd)

    monkeypatch.setattr(dump_lock, "_thread_lock", thread_lock)
    outcome: dict[str, Any] = {}

    def run(name: str, model: onnx.ModelProto) -> None:
        try:
            outcome[name] = ge.compile(model, dump=folder)
        except BaseException as err:  # (reported below)
            outcome[name] = err

    a = threading.Thread(target=run, args=("a", _model(64)), name="run-a")
    pause.thread = a
    a.start()
    assert pause.inside.wait(TIMEOUT)
    b = threading.Thread(target=run, args=("b", _model(32)), name="run-b")
    b.start()
    assert reached.wait(TIMEOUT)
    pause.go.set()
    b.join(TIMEOUT)
    assert not b.is_alive() and isinstance(outcome.get("b"), ge.CompileResult), outcome
    assert outcome["b"].warnings == []
    after_b = assert_one_runs_dumps(folder)
    assert after_b["complete"] is True

    assert pause.between.is_set()
    with pytest.warns(CompileWarning, match="^stopped dumping graphs to "):
        pause.go2.set()
        a.join(TIMEOUT)
    assert isinstance(outcome.get("a"), ge.CompileResult), outcome
    assert [type(w) for w in outcome["a"].warnings] == [CompileWarning]
    assert len(_warned([str(w) for w in outcome["a"].warnings])) == 1
    assert assert_one_runs_dumps(folder) == after_b


# -- one thread, step by step ------------------------------------------------------------

def test_a_run_that_fails_after_losing_its_folder_says_so(tmp_path: Path) -> None:
    """Run A's folder was taken over; A then fails before another dump: the folder does not
    show A's failure, and A says so (once) as its next dump would have."""
    folder = tmp_path / "dumps"
    graph = small_graph()
    a = GraphDumper(folder)
    a.step_started(0, "BeforeInferShape", graph)
    b = GraphDumper(folder)
    b.step_started(0, "BeforeInferShape", graph)
    with pytest.warns(CompileWarning, match="^stopped dumping graphs to ") as caught:
        a.compilation_failed(PassRunError("no luck"), graph)
    assert len(caught) == 1
    a.compilation_failed(PassRunError("no luck"), graph)  # (told once)
    b.compilation_failed(PassRunError("no luck"), graph)  # (its own: nothing to say)
    assert len(caught) == 1
    manifest = assert_one_runs_dumps(folder, weighted=False)
    assert manifest["run"] == b._run.run_id


def test_where_the_folder_cannot_be_locked_a_lock_file_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """NFS refuses `flock` on a folder (it locks files open for writing): the lock is then
    on `.ge_dump.lock` in the folder, held as the folder's would be, and left there."""
    class NoFolderLocks:
        LOCK_EX, LOCK_UN, LOCK_NB = fcntl.LOCK_EX, fcntl.LOCK_UN, fcntl.LOCK_NB

        @staticmethod
        def flock(fd: int, operation: int) -> None:
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                raise OSError(errno.EBADF, os.strerror(errno.EBADF))
            fcntl.flock(fd, operation)

    monkeypatch.setattr(dump_lock, "fcntl", NoFolderLocks)
    folder = tmp_path / "dumps"
    ge.compile(_model(16), dump=folder)
    assert_one_runs_dumps(folder)
    assert (folder / LOCK_FILE_NAME).is_file()
    with locked_folder(folder):
        fd = os.open(folder / LOCK_FILE_NAME, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    assert ge.compile(_model(16), dump=folder).warnings == []  # (its own file: not refused)
    assert_one_runs_dumps(folder)
