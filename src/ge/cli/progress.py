"""A progress display for compilations on stderr: what the command is doing around the
pipeline (loading the model, writing the output: `CommandProgress.phase`), and within it
the current step and the last pass that ran, driven by a `PipelineObserver`.

Shown only when stderr is a terminal (never in pipes, files or tests) and removed when the
command's work ends, so what stays on the screen is the command's own output. (A 426k-node
model takes about 16 s to load and save: the display covers that too.)
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import IO, Any

from ge.compiler.report import PassRunRecord
from ge.compiler.scheduler import PIPELINE, PipelineObserver
from ge.graph import Graph

__all__ = ["CommandProgress", "CompileProgress", "compile_progress", "progress_wanted"]


def progress_wanted(stream: IO[str] | None = None) -> bool:
    """Whether to show progress on `stream` (stderr): a terminal, and not TERM=dumb."""
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"


class CompileProgress(PipelineObserver):
    """Updates a rich status line: `step i/N Label · last pass P (graph G)`."""

    def __init__(self, status: Any, model: str) -> None:
        self._status = status
        self._model = model
        self._step = ""
        self._passes = 0

    def _show(self, extra: str = "") -> None:
        from rich.markup import escape

        text = f"compiling {escape(self._model)}: {escape(self._step)}"
        if extra:
            text += f" [dim]· {escape(extra)}[/dim]"
        self._status.update(text)

    def step_started(self, index: int, label: str, graph: Graph) -> None:
        self._step = f"step {index + 1}/{len(PIPELINE)} {label}"
        self._show()

    def pass_finished(self, record: PassRunRecord, graph: Graph) -> None:
        self._passes += 1
        self._show(f"{self._passes} pass run(s), last {record.pass_name} on {record.graph_name}")


class CommandProgress:
    """The display of one command: `observers` to give `ge.compile` (none when nothing is
    shown) and `phase(text)` for the work before and after the pipeline."""

    def __init__(self, status: Any | None, model: str) -> None:
        self._status = status
        self._model = model
        self.observers: list[PipelineObserver] = (
            [CompileProgress(status, model)] if status is not None else [])

    def phase(self, text: str) -> None:
        """Show `text` ("loading", "writing out.onnx") in place of the pipeline's step."""
        if self._status is not None:
            from rich.markup import escape

            self._status.update(f"compiling {escape(self._model)}: {escape(text)}")


@contextlib.contextmanager
def compile_progress(model: str, *, enabled: bool | None = None) -> Iterator[CommandProgress]:
    """The progress of a command compiling `model`: a display when stderr is a terminal (or
    `enabled`), else one that shows nothing."""
    if not (progress_wanted() if enabled is None else enabled):
        yield CommandProgress(None, model)
        return
    from rich.console import Console

    console = Console(file=sys.stderr, highlight=False, emoji=False)
    with console.status(f"compiling {model}", spinner="dots") as status:
        yield CommandProgress(status, model)
