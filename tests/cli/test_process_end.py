"""How a `ge` process ends: the two renames of a save with external data are never cut in two
by Ctrl-C or SIGTERM, and the process ends once its command has, without the interpreter's
teardown, yet as a normal exit would (atexit callbacks run, a plugin's thread is waited for)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from cli_helpers import DISTILBERT, process_env, run_process
from onnx import TensorProto, helper, numpy_helper

from ge._signals import held_signals
from ge.cli.process_exit import exit_status


def _linear(path: Path, seed: int, bias: bool) -> None:
    """x[1, 64] @ w (+ b): two versions of one model, weights of different layouts."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32), "w")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"])]
    if bias:
        inits.insert(0, numpy_helper.from_array(np.full(64, 100, np.float32), "b"))
        nodes.append(helper.make_node("Add", ["m", "b"], ["y"]))
    else:
        nodes.append(helper.make_node("Neg", ["m"], ["y"]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 64])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 64])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def _run(path: Path) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": np.ones((1, 64), np.float32)})[0]


@pytest.mark.parametrize("signal_name,status,word", [("SIGTERM", 143, "terminated"),
                                                      ("SIGINT", 130, "interrupted")])
def test_a_signal_between_the_two_renames_waits_for_the_second(
        tmp_path: Path, signal_name: str, status: int, word: str) -> None:
    """The signal comes right after the new data file was renamed into place: the model is
    renamed too before it is handled, so the pair on disk is the new one (it was the previous
    model reading the new weights: a model computing what neither version did; trial QQ),
    and the last line names the model as written."""
    old, new, out = tmp_path / "v1.onnx", tmp_path / "v2.onnx", tmp_path / "out.onnx"
    _linear(old, 0, bias=False)
    _linear(new, 1, bias=True)
    first = run_process("-m", "ge", "compile", str(old), "-o", str(out), "--external-data",
                        "-q")
    assert first.returncode == 0, first.stderr
    code = (
        "import os, signal\n"
        # (a background job of a shell without job control starts with SIGINT ignored)
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "real = os.replace\n"
        "def replace(src, dst):\n"
        "    real(src, dst)\n"
        "    if str(dst).endswith('.data'):\n"
        f"        os.kill(os.getpid(), signal.{signal_name})\n"
        "os.replace = replace\n"
        "import ge.cli\n"
        f"ge.cli.main(['compile', {str(new)!r}, '-o', {str(out)!r}, '--external-data', "
        "'-q'])\n")
    result = run_process("-c", code)
    assert result.returncode == status, result.stderr
    assert result.stderr.endswith(f"ge: {word}; {out} had been written\n"), result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "out.onnx", "out.onnx.data", "v1.onnx", "v2.onnx"]  # (no set-aside data file left)
    np.testing.assert_allclose(_run(out), _run(new), rtol=1e-5)


def test_held_signals_deliver_each_one_after_the_block() -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    mine = signal.getsignal(signal.SIGTERM)
    try:
        with held_signals():
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)
            assert seen == []
            with held_signals():  # nested: delivered when the outer block ends
                os.kill(os.getpid(), signal.SIGTERM)
            assert seen == []
        assert seen == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGTERM) is mine  # (put back)
    finally:
        signal.signal(signal.SIGTERM, previous)
    # the default Ctrl-C handler (a background job may have started with SIGINT ignored)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt), held_signals():
            os.kill(os.getpid(), signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, previous)


PLUGIN_AT_EXIT = '''\
import atexit, os, pathlib, tempfile, threading, time
from ge.passes import FusionBasePass, PassStage, register_fusion_pass

MARK = pathlib.Path({mark!r})
LOG = open(MARK / "unclosed.log", "w")  # buffered, never closed
LOG.write("plugin loaded\\n")
TEMPORARY = tempfile.NamedTemporaryFile(dir=MARK, prefix="ntf_")  # removed when freed


class Reporter:
    def __del__(self):
        (MARK / "del").write_text("ran")


REPORTER = Reporter()


def _late():
    time.sleep(3)  # (still running when the command ends)
    (MARK / "thread").write_text("done")


def _at_exit():
    (MARK / "atexit").write_text("ran")
    if os.environ.get("HANG_AT_EXIT"):
        (MARK / "hanging").write_text("")
        time.sleep(60)


atexit.register(_at_exit)
if os.environ.get("START_THREAD"):
    threading.Thread(target=_late, daemon=False).start()


@register_fusion_pass(name="Idle", stage=PassStage.AFTER_INFER_SHAPE)
class Idle(FusionBasePass):
    def run(self, graph, context):
        return None
'''


def test_the_process_ends_as_a_normal_exit_would(tmp_path: Path) -> None:
    """A plugin's atexit callback runs, its non-daemon thread is waited for, its open file
    is flushed, its temporary file removed and its objects finalized (trial RR: a quicker
    end through os._exit lost them). The plugin's module, unloaded when its compilation
    ended, is cleared by the shutdown as modules are: freed only by its last collection,
    the file lost what it buffered."""
    mark = tmp_path / "mark"
    mark.mkdir()
    plugin = tmp_path / "at_exit.py"
    plugin.write_text(PLUGIN_AT_EXIT.format(mark=str(mark)))
    out = tmp_path / "m.onnx"
    for thread in ("", "1"):
        result = run_process("-m", "ge", "compile", str(DISTILBERT), "-o", str(out),
                             "--pass-path", str(plugin), "-q",
                             env_vars={"START_THREAD": thread})
        assert result.returncode == 0, result.stderr
        assert out.exists() and result.stdout.endswith(f"wrote {out}\n")
        assert sorted(p.name for p in mark.iterdir()) == sorted(
            ["atexit", "del", "unclosed.log"] + (["thread"] if thread else []))
        assert (mark / "unclosed.log").read_text() == "plugin loaded\n"
        for made in mark.iterdir():
            made.unlink()
    failed = run_process("-m", "ge", "compile", str(tmp_path / "absent.onnx"), "-o",
                         str(tmp_path / "x.onnx"))
    assert failed.returncode == 1 and failed.stderr.startswith("ge: [GE1102]")


def _signalled_while_an_atexit_callback_hangs(tmp_path: Path, signum: int, hang_s: int,
                                              sigint_ignored: bool = False) -> tuple[int, str]:
    """(status, stderr) of `ge compile` sent `signum` once the command has ended and a
    plugin's atexit callback sleeps `hang_s` seconds; with `sigint_ignored`, started as a
    shell's background job is (SIGINT ignored)."""
    mark = tmp_path / "mark"
    mark.mkdir()
    plugin = tmp_path / "at_exit.py"
    plugin.write_text(PLUGIN_AT_EXIT.format(mark=str(mark)).replace(
        "time.sleep(60)", f"time.sleep({hang_s})"))
    process = subprocess.Popen(
        [sys.executable, "-m", "ge", "compile", str(DISTILBERT), "-o", str(tmp_path / "m.onnx"),
         "--pass-path", str(plugin), "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=process_env({"HANG_AT_EXIT": "1"}),
        preexec_fn=((lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored
                    else None))
    deadline = time.monotonic() + 120
    while not (mark / "hanging").exists():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=30)
    return process.returncode, stderr


def test_a_signal_after_the_command_ended_ends_the_process_with_a_line(
        tmp_path: Path) -> None:
    """SIGTERM while an atexit callback hangs ends the process at once, 143, one line (it
    was the default handler's silent end, or, while ignored, a wait for the callback)."""
    status, stderr = _signalled_while_an_atexit_callback_hangs(tmp_path, signal.SIGTERM, 60)
    assert status == 143
    assert stderr.endswith("ge: terminated after the command had ended (status 0)\n"), stderr


def test_a_program_calling_main_gets_system_exit_and_keeps_its_handlers() -> None:
    """`ge.cli.main()` called from a program (sys.argv its own) raises SystemExit and leaves
    the program's SIGINT handler as it was (trial RR: a test runner calling
    it ended at once with status 0)."""
    code = (
        "import signal, sys\n"
        "import ge.cli\n"
        "sys.argv = ['ge', '--version']\n"
        "handler = signal.getsignal(signal.SIGINT)\n"
        "try:\n"
        "    ge.cli.main()\n"
        "except SystemExit as exit_:\n"
        "    print('caught', exit_.code)\n"
        "print('after', signal.getsignal(signal.SIGINT) is handler)\n"
        "sys.exit(3)\n")
    result = run_process("-c", code)
    assert result.returncode == 3, result.stderr
    assert result.stdout.endswith("caught 0\nafter True\n"), result.stdout


def test_exit_status_of_system_exit_codes() -> None:
    assert [exit_status(c) for c in (None, 0, 2, 143, "a message")] == [0, 0, 2, 143, 1]


def test_a_signal_the_parent_ignores_stays_ignored_after_the_command(tmp_path: Path) -> None:
    """A background job of a shell script runs with SIGINT ignored: after the command, ge
    left it ignored while a callback hangs, and ends with the command's status (trial SS:
    130 and 'interrupted')."""
    status, stderr = _signalled_while_an_atexit_callback_hangs(
        tmp_path, signal.SIGINT, 3, sigint_ignored=True)
    assert status == 0, stderr
    assert "interrupted" not in stderr
