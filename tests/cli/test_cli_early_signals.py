"""Ctrl-C and SIGTERM in the first moments of `pyatc` and `ge compile`, while they import
onnx and numpy: held until those imports are done, then the command's one line, status 130
or 143 and nothing written. Delivered inside onnx's native module init, a Ctrl-C crashed the
process (SIGSEGV, SIGABRT), was lost (exit 0, the model written) or printed a traceback
(trial A).

Each case runs the command in a process of its own whose timer thread sends the signal some
time after the command started; whatever the machine's speed, the outcome must be one of
those a signal can have: ended before anything was written, or after the model was in place
(named), or after the command had already succeeded (the timer too late)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import DISTILBERT, process_env

pytestmark = pytest.mark.builtin_passes

#: The child: runs the command (pyatc's `main`, or the `ge` process entry point) with a timer
#: sending the signal. One handled outside ge's code (before the command began, or once it
#: had returned) prints OUTSIDE; one the command let out is a traceback.
_CHILD = """\
import os, signal, sys, threading
import ge
delay, name, which, model, prefix = sys.argv[1:]
GE = os.path.dirname(ge.__file__) + os.sep
class Outside(BaseException):
    pass
def interrupt(signum, frame):  # (as Python's own handler, within ge's code)
    while frame is not None:
        if frame.f_code.co_filename.startswith(GE):
            raise KeyboardInterrupt
        frame = frame.f_back
    raise Outside
signal.signal(signal.SIGINT, interrupt)
signal.signal(signal.SIGTERM, interrupt)
if which == "ge":
    from ge.cli.process_exit import run
    sys.argv = ["ge", "compile", model, "-o", prefix + ".onnx", "-q"]
else:
    from ge.pyatc import main
timer = threading.Timer(float(delay), os.kill, (os.getpid(), getattr(signal, name)))
try:
    try:
        timer.start()
        if which == "ge":
            try:
                run()
                status = 0
            except SystemExit as exit_:
                status = exit_.code
        else:
            status = main(args=["--model", model, "--output", prefix])
    finally:
        timer.cancel()
        timer.join()
except Outside:
    sys.stderr.write("OUTSIDE\\n")
    sys.exit(99)
sys.exit(status)
"""


def _default_ctrl_c() -> None:
    """The child starts with Ctrl-C's default action: a shell without job control starts a
    background job (a suite run in one) with SIGINT ignored, which ge keeps ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


#: Seconds after the command started: in its imports (about 0.1-0.5 s here), in its work,
#: and past its end on a fast machine.
_DELAYS = (0.0, 0.01, 0.03, 0.06, 0.1, 0.2, 0.4)


@pytest.mark.parametrize("which", ["pyatc", "ge"])
@pytest.mark.parametrize(("signal_name", "status", "word", "delays"), [
    ("SIGINT", 130, "interrupted", _DELAYS), ("SIGTERM", 143, "terminated", (0.02, 0.1))])

def test_an_early_signal_ends_the_command_with_its_line_or_comes_too_late(
        tmp_path: Path, which: str, signal_name: str, status: int, word: str,
        delays: tuple[float, ...]) -> None:
    prog = "ge" if which == "ge" else "pyatc"
    for delay in delays:
        out = tmp_path / f"out_{delay}"
        out.mkdir()
        model = out.parent / f"m_{delay}.onnx"
        model.write_bytes(DISTILBERT.read_bytes())
        result = subprocess.run(
            [sys.executable, "-c", _CHILD, str(delay), signal_name, which, str(model),
             str(out / "m")], capture_output=True, text=True, env=process_env(), timeout=300,
            check=False, preexec_fn=_default_ctrl_c)
        case = f"{which} {signal_name} at {delay} s: {result.returncode}\n{result.stderr}"
        assert "Traceback" not in result.stderr, case
        written = sorted(p.name for p in out.iterdir())
        if result.returncode == status and written == []:
            assert result.stderr == f"{prog}: {word}; nothing was written\n", case
        elif result.returncode == status:  # as the command ended: the model named
            assert written == ["m.onnx"], case
            assert result.stderr in (f"{prog}: {word}; {out / 'm.onnx'} had been written\n",
                                     f"ge: {word} after the command had ended (status 0)\n"
                                     ), case
        elif result.returncode == 99:  # before the command began or once it had returned
            assert result.stderr == "OUTSIDE\n", case
        else:  # never sent: the command was done before the timer
            assert (result.returncode, result.stderr, written) == (0, "", ["m.onnx"]), case
        assert model.read_bytes() == DISTILBERT.read_bytes(), case


def test_the_entries_import_nothing_but_the_standard_library_before_holding() -> None:
    """Trial D: a Ctrl-C while `ge.cli` imported click or `ge.pyatc` argparse (before their
    code could hold a signal) printed a traceback. What the console scripts' targets and the
    `python -m` entries import before `run` holds the signals is ge's light package inits,
    `ge.cli.process_exit` and `ge._signals`: no click, argparse, numpy, onnx, not even
    typing."""
    code = ("import sys\nimport ge.cli.process_exit, ge.pyatc\n"
            "print(sorted({'click', 'argparse', 'numpy', 'onnx', 'logging', 'typing', "
            "'ge.errors', 'ge.cli.command_line', 'ge.pyatc.command'} & set(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=process_env(), timeout=120, check=True)
    assert result.stdout == "[]\n", result.stderr


#: A child running a command as its process (`-m`), which sends itself `signal` at `when`:
#: "help" as `ge`'s help is formatted, "exit" from an atexit callback (the command has ended
#: and the interpreter is shutting down).
_SELF_SIGNAL = """\
import atexit, os, runpy, signal, sys, time
when, name, module, *args = sys.argv[1:]
def send():
    os.kill(os.getpid(), getattr(signal, name))
    time.sleep(0.5)  # (the handler runs before this ends, or is held)
if when == "help":
    import click
    original = click.Command.format_help
    def format_help(self, ctx, formatter):
        send()
        return original(self, ctx, formatter)
    click.Command.format_help = format_help
else:
    atexit.register(send)
sys.argv = [module, *args]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize(("signal_name", "status", "word"), [
    ("SIGINT", 130, "interrupted"), ("SIGTERM", 143, "terminated")])
@pytest.mark.parametrize("args", [["--help"], []])
def test_a_signal_during_ge_s_help_is_its_line_not_aborted(
        signal_name: str, status: int, word: str, args: list[str]) -> None:
    """Trial D: a Ctrl-C during `ge --help` or a bare `ge` was click's "Aborted!" with status
    1 (a failure to a script), or lost (status 0); SIGTERM "Aborted!" and 143. The help is
    held whole (it writes nothing) and the signal then ends it with ge's line, which names
    the status the help ended with (a bare `ge`: 2 from click 8.2, 0 before)."""
    ended = subprocess.run([sys.executable, "-m", "ge", *args], capture_output=True,
                           env=process_env(), timeout=120, check=False).returncode
    result = subprocess.run([sys.executable, "-c", _SELF_SIGNAL, "help", signal_name, "ge",
                             *args], capture_output=True, text=True, env=process_env(),
                            timeout=120, check=False, preexec_fn=_default_ctrl_c)
    assert (result.returncode, result.stderr.splitlines()[-1]) == (
        status, f"ge: {word} after the command had ended (status {ended})"), result.stderr
    assert "Aborted" not in result.stderr and "Traceback" not in result.stderr
    assert "Commands:" in result.stdout + result.stderr  # (the help was printed whole)


@pytest.mark.parametrize("which", ["ge", "pyatc"])
@pytest.mark.parametrize(("signal_name", "status", "word"), [
    ("SIGINT", 130, "interrupted"), ("SIGTERM", 143, "terminated")])
def test_a_signal_after_the_command_ended_says_so(
        tmp_path: Path, which: str, signal_name: str, status: int, word: str) -> None:
    """Trial D: pyatc said "run success: wrote out.onnx" and a SIGTERM in its shutdown ended
    it with -15 and no word (SIGINT: -2); `ge` has said since trial QQ that the signal came
    after the command had ended. Both now share it (`ge.cli.process_exit.run_command`)."""
    model = tmp_path / "m.onnx"
    model.write_bytes(DISTILBERT.read_bytes())
    args = (["ge.pyatc", f"--model={model}", f"--output={tmp_path / 'out'}"]
            if which == "pyatc" else ["ge", "compile", str(model), "-o",
                                      str(tmp_path / "out.onnx"), "-q"])
    result = subprocess.run([sys.executable, "-c", _SELF_SIGNAL, "exit", signal_name, *args],
                            capture_output=True, text=True, env=process_env(), timeout=300,
                            check=False, preexec_fn=_default_ctrl_c)
    assert result.returncode == status, result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"{which}: {word} after the command had ended (status 0)"), result.stderr
    assert (tmp_path / "out.onnx").is_file() and "Traceback" not in result.stderr
