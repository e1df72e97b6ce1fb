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
            check=False)
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
