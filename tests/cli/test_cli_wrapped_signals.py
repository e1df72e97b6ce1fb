"""A Ctrl-C or SIGTERM that native code wraps in an error of its own is still that signal
(trial VV): SIGTERM during `import onnxruntime` (which `--verify` imports lazily) came back
from pybind11's module init as `ImportError: initialization failed`, raised from ge's
`Terminated`, and `ge compile` ended with a 60-line traceback and status 1. The import is
simulated here: the function on that path raises what pybind11 raised."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from click.testing import CliRunner

from ge._signals import Terminated, interrupt_behind
from ge.cli import cli
from sample_models import double_negation_model


def _wrapping(signal_error: type[KeyboardInterrupt], how: str):
    """A stand-in for onnxruntime's import that fails as pybind11 does when the signal
    comes: an ImportError raised from the interrupt (`cause`) or while handling it
    (`context`), as a second wrapper around that (`twice`)."""

    def fail(*args: object, **kwargs: object) -> None:
        try:
            raise signal_error()
        except KeyboardInterrupt as interrupt:
            if how == "context":
                raise ImportError("initialization failed")  # noqa: B904 (as native code does)
            error = ImportError("initialization failed")
            if how == "twice":
                try:
                    raise error from interrupt
                except ImportError as inner:
                    raise RuntimeError("could not load onnxruntime") from inner
            raise error from interrupt

    return fail


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model.onnx"
    onnx.save(double_negation_model(), path)
    return path


@pytest.mark.parametrize("how", ["cause", "context", "twice"])
@pytest.mark.parametrize(("signal_error", "status", "word"),
                         [(Terminated, 143, "terminated"),
                          (KeyboardInterrupt, 130, "interrupted")])
def test_a_signal_wrapped_by_an_import_ends_the_command_as_the_signal(
        model: Path, monkeypatch: pytest.MonkeyPatch, signal_error: type[KeyboardInterrupt],
        status: int, word: str, how: str) -> None:
    monkeypatch.setattr("ge.session.runner.check_ort_values", _wrapping(signal_error, how))
    out = model.parent / "out.onnx"
    for json_flag in ([], ["--json"]):
        result = CliRunner().invoke(cli, ["compile", str(model), "-o", str(out), "-q",
                                          "--verify", *json_flag])
        assert result.exit_code == status, result.output
        assert (result.stdout, result.stderr) == ("", f"ge: {word}; nothing was written\n")
    assert sorted(p.name for p in model.parent.iterdir()) == ["model.onnx"]


def test_a_signal_wrapped_in_a_pass_is_not_a_failure_to_skip(
        model: Path, write, tmp_path: Path) -> None:
    """A pass whose import of native code got the signal (an ImportError from it) is not a
    failing pass that `--on-pass-failure skip` rolls back and goes on after: the command
    ends as on the signal."""
    plugin = write("passes/native.py", '''
from ge.passes import FusionBasePass, PassStage, register_fusion_pass

@register_fusion_pass(name="Native", stage=PassStage.BEFORE_INFER_SHAPE)
class Native(FusionBasePass):
    def run(self, graph, context):
        try:
            raise KeyboardInterrupt()
        except KeyboardInterrupt as interrupt:
            raise ImportError("initialization failed") from interrupt
''')
    out = tmp_path / "out.onnx"
    result = CliRunner().invoke(cli, ["compile", str(model), "-o", str(out), "--pass-path",
                                      str(plugin), "--on-pass-failure", "skip"])
    assert result.exit_code == 130, result.output
    assert result.stderr == "ge: interrupted; nothing was written\n"
    assert not out.exists()


def test_an_import_error_of_no_signal_is_not_one(
        model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ImportError that no signal caused stays an error (it is no signal)."""
    def fail(*args: object, **kwargs: object) -> None:
        try:
            raise OSError("libonnxruntime.so: cannot open shared object file")
        except OSError as err:
            raise ImportError("initialization failed") from err

    monkeypatch.setattr("ge.session.runner.check_ort_values", fail)
    result = CliRunner().invoke(cli, ["compile", str(model), "-o",
                                      str(model.parent / "out.onnx"), "--verify"])
    assert isinstance(result.exception, ImportError)
    assert result.exit_code == 1


def test_interrupt_behind_follows_causes_and_contexts_not_suppressed_ones() -> None:
    interrupt = Terminated()
    cause = ImportError("initialization failed")
    cause.__cause__ = interrupt
    assert interrupt_behind(cause) is interrupt
    assert interrupt_behind(interrupt) is interrupt
    context = ValueError("x")
    context.__context__ = interrupt
    assert interrupt_behind(context) is interrupt
    context.__suppress_context__ = True  # (`raise ... from None`: chosen not to be it)
    assert interrupt_behind(context) is None
    loop = ValueError("a")
    loop.__cause__ = other = ValueError("b")
    other.__cause__ = loop
    assert interrupt_behind(loop) is None
