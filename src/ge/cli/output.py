"""What every command of `ge` (and `pyatc`) shows the same way: errors as one line (or as
JSON with `--json`), warnings as `ge: warning: ...` lines instead of Python's warning
output, JSON payloads and rich consoles. The files commands write are
`ge.cli.output_files`'.

A command runs its body inside `command_output(...)`; a `GeError` escaping it is printed
(`ge: [CODE] message (pass P, stage S, at file:line)`) and ends the process with status 1,
unless debugging, when it propagates with its traceback.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import functools
import io
import json
import logging
import os
import signal
import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from ge._signals import (
    BROKEN_PIPE_STATUS,
    INTERRUPTED_STATUS,
    TERMINATED_STATUS,
    Terminated,
    ending_word,
)
from ge._text import printable
from ge.errors import (
    CompileWarning,
    GeError,
    OutOfMemoryError,
    PassDefinitionWarning,
    PassPathWarning,
    PluginLoadWarning,
)

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "CommandOutput",
    "command_output",
    "console",
    "dumps_json",
    "fitting_columns",
    "left_out_note",
    "one_line",
]

# Warnings of ge itself say everything in their text; where they were raised is internal.
_GE_WARNINGS = (CompileWarning, PassDefinitionWarning, PassPathWarning, PluginLoadWarning)


class _LogAsWarnings(logging.Handler):
    """Records of ge's loggers as `PassDefinitionWarning`s: a status-returning pass API
    that refuses a call logs why, as GE does (`SubgraphInput.add_input` of an input the
    node lacks), and a command prints it as its other warnings (`ge: warning: ...`, in
    `--json`'s warnings), not as a bare stderr line without a handler."""

    def emit(self, record: logging.LogRecord) -> None:
        warnings.warn(PassDefinitionWarning(record.getMessage()), stacklevel=2)


@contextlib.contextmanager
def _logs_as_warnings() -> Iterator[None]:
    """While a `ge` command runs, `ge`'s log records of warning level and above are
    warnings (`_LogAsWarnings`); what the logger was is restored after."""
    logger = logging.getLogger("ge")
    handler = _LogAsWarnings(logging.WARNING)
    saved = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = saved


def one_line(text: str) -> str:
    """`text` on one line: a heading with its `  - item` lines joined by "; ", any other
    character that is not printable escaped (a pass's `set_error_message` may hold an
    escape sequence, which a terminal would obey: trial NN)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) <= 1:
        return printable(lines[0]) if lines else ""
    head, items = lines[0], [line.removeprefix("- ") for line in lines[1:]]
    return printable(f"{head} {'; '.join(items)}")


def _warning_data(caught: warnings.WarningMessage) -> dict[str, Any]:
    """A caught warning as the JSON report has it: a warning of ge's has the location of
    the user's code it is about (a pass's hook, a plugin's line: `warn_user`'s), or None
    (it is about the model or the options); another module's, where it was issued."""
    category = caught.category
    if issubclass(category, _GE_WARNINGS):
        location = getattr(caught.message, "ge_location", None)
    else:
        location = f"{caught.filename}:{caught.lineno}"
    return {
        "category": category.__name__,
        "message": one_line(str(caught.message)),
        "location": location,
    }


def _warning_text(data: dict[str, Any]) -> str:
    """A warning as its `warning:` line: ge's by their message, which says where they
    are about; another module's with its category and location, as Python prints it."""
    if data["category"] in {category.__name__ for category in _GE_WARNINGS}:
        return data["message"]
    return f"{data['category']}: {data['message']} (at {data['location']})"


class CommandOutput:
    """The output side of one command run: JSON or text, and the warnings caught so far."""

    def __init__(self, prog: str, *, as_json: bool, debug: bool,
                 show_warnings: bool = True) -> None:
        self.prog = prog
        self.as_json = as_json
        self.debug = debug
        self.show_warnings = show_warnings
        self._caught: list[warnings.WarningMessage] = []
        self._shown = 0  # how many of the distinct warnings (`warnings`) were printed
        self._payload: dict[str, Any] | None = None
        # The files the command put in place so far (`wrote`): an interrupt after them says so.
        self.written: list[Path] = []
        # The folder graph dumps go to as the command works (`ge compile --dump`), whose
        # files stay when it is interrupted.
        self.dumps: Path | None = None

    def wrote(self, path: Path | None) -> None:
        """Record a file the command has put in place (renamed into place: complete)."""
        if path is not None:
            self.written.append(path)

    @contextlib.contextmanager
    def writing(self, path: Path) -> Iterator[None]:
        """Around a save of `path`: an interrupt that comes once the file was renamed into
        place (a Ctrl-C held while the renames ran is delivered as they end, before the save
        returns) records it as written, so the command's last line names it."""
        before = _file_identity(path)
        try:
            yield
        except KeyboardInterrupt:
            if _file_identity(path) != before:
                self.wrote(path)
            raise

    @property
    def warnings(self) -> list[dict[str, Any]]:
        """The warnings caught so far, as data (category, message, location or None); one
        said again word for word (a skipped pass's, once per graph it ran on) once."""
        return _distinct([_warning_data(w) for w in self._caught])

    def result(self, payload: dict[str, Any]) -> None:
        """The command's JSON result, printed (with the warnings) when the command ends."""
        self._payload = payload

    def flush_warnings(self) -> None:
        """Print the warnings not printed yet, one `prog: warning: ...` line each (text mode)."""
        if self.as_json or not self.show_warnings:
            return
        distinct = self.warnings  # (the same words again add nothing)
        for data in distinct[self._shown:]:
            click.echo(f"{self.prog}: warning: {_warning_text(data)}", err=True)
        self._shown = len(distinct)

    def _finish(self) -> None:
        if self.as_json and self._payload is not None:
            echo_json({**self._payload, "warnings": self.warnings})
        self.flush_warnings()

    def failure(self, err: GeError) -> dict[str, Any]:
        """What `--json` prints for `err`: its details, the warnings so far, and the
        verification report of a GE1603."""
        data = {**err.details(), "warnings": self.warnings}
        report = getattr(err, "report", None)
        if report is not None and hasattr(report, "as_dict"):
            data["verification"] = report.as_dict()
        return data

    def _fail(self, err: GeError) -> None:
        if self.as_json:
            echo_json(self.failure(err))
        else:
            self.flush_warnings()
            click.echo(f"{self.prog}: {one_line(str(err))}", err=True)


def _distinct(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`items` without repeats, in order."""
    seen: set[str] = set()
    kept = []
    for item in items:
        key = json.dumps(item, sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            kept.append(item)
    return kept


#: Lists longer than this are written one compact item per line (see `dumps_json`).
_COMPACT_ITEMS_OVER = 64


def dumps_json(data: Any) -> str:
    """Indented JSON, except that the items of a long list are written one per line,
    each compact: `json.dumps(indent=...)` runs the pure-Python encoder, which took 8 s
    for the 94,000 pass runs of a model of 1,000 If nodes (the C encoder writes each
    item)."""
    return _dumps(data, "")


def _dumps(data: Any, pad: str) -> str:
    inner = pad + "  "
    if isinstance(data, dict) and data:
        items = [f"{inner}{json.dumps(str(k))}: {_dumps(v, inner)}" for k, v in data.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(data, (list, tuple)) and data:
        if len(data) > _COMPACT_ITEMS_OVER:
            items = [inner + json.dumps(v, default=str) for v in data]
        else:
            items = [inner + _dumps(v, inner) for v in data]
        return "[\n" + ",\n".join(items) + f"\n{pad}]"
    return json.dumps(data, default=str)


def echo_json(data: Any) -> None:
    click.echo(dumps_json(data))


def _debugging() -> bool:
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.find_root().params.get("debug"))


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Everything written to stdout goes to stderr for the block: Python's prints, and
    (when stdout is a real file descriptor) what a subprocess or native code a plugin runs
    writes to descriptor 1, so that `--json` leaves stdout to the JSON alone."""
    with contextlib.redirect_stdout(sys.stderr):
        try:
            out_fd, err_fd = sys.__stdout__.fileno(), sys.__stderr__.fileno()  # type: ignore[union-attr]
        except (AttributeError, OSError, ValueError):  # not a descriptor (a test's buffer)
            yield
            return
        sys.__stdout__.flush()  # type: ignore[union-attr]
        saved = os.dup(out_fd)
        try:
            os.dup2(err_fd, out_fd)
            yield
        finally:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                sys.__stdout__.flush()  # type: ignore[union-attr]
            os.dup2(saved, out_fd)
            os.close(saved)


@contextlib.contextmanager
def command_output(prog: str = "ge", *, as_json: bool = False, debug: bool | None = None,
                   show_warnings: bool = True) -> Iterator[CommandOutput]:
    """Run a command's body: warnings caught (and printed as lines at the end unless
    `show_warnings` is false), a GeError printed as one line or as JSON and turned into exit
    status 1 (re-raised when `debug`; by default the `--debug` flag of the `ge` group). With
    `as_json` the body's own prints go to stderr: stdout is the JSON alone. Ctrl-C (SIGINT)
    and SIGTERM end it as a shell would, with status 130 or 143 and one line saying so on
    stderr (outputs are written atomically, so none was left half-written). Running out of
    memory where ge has no more precise error is one line too (`OutOfMemoryError`, GE1801)."""
    out = CommandOutput(prog, as_json=as_json,
                        debug=_debugging() if debug is None else debug,
                        show_warnings=show_warnings)
    with _encodable_streams(), warnings.catch_warnings(record=True) as caught:
        # The inherited filters decide about others' warnings (a DeprecationWarning inside
        # a library stays hidden); every warning of ge's own is shown.
        for category in _GE_WARNINGS:
            warnings.simplefilter("always", category)
        out._caught = caught
        # With --json, stdout carries the JSON alone: what the body prints (a pass's print())
        # goes to stderr.
        body_stdout = (_stdout_to_stderr() if as_json else contextlib.nullcontext())
        # pyatc logs ge's records itself (--log); the ge command makes them warnings
        logs = _logs_as_warnings() if prog == "ge" else contextlib.nullcontext()
        try:
            with body_stdout, logs, _interrupts_unwrapped():
                yield out
        except KeyboardInterrupt as interrupt:
            if out.debug:
                raise
            out.flush_warnings()
            end_interrupted(prog, interrupt, out.written, out.dumps)
        except GeError as err:
            if out.debug:
                out.flush_warnings()
                if out.as_json:  # stdout keeps its JSON; the traceback goes to stderr
                    out._fail(err)
                raise
            out._fail(err)
            raise SystemExit(1) from None
        except BrokenPipeError:
            if out.debug:
                raise
            _silence_stdout()
            raise SystemExit(BROKEN_PIPE_STATUS) from None
        except MemoryError as exc:
            if out.debug:
                raise
            detail = f" ({exc})" if str(exc) else ""
            where = " (ge --debug shows where)" if prog == "ge" else ""
            out._fail(OutOfMemoryError(
                f"out of memory{detail}: the command needed more memory than this machine "
                f"could give; nothing was written{where}"))
            raise SystemExit(1) from None
        out._finish()


def _silence_stdout() -> None:
    """Point stdout at the null device: its reader stopped reading (`| head`), and the
    interpreter's flush of what is left would fail again at exit."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


@contextlib.contextmanager
def _interrupts_unwrapped() -> Iterator[None]:
    """An error raised from a Ctrl-C or SIGTERM (`ge._signals.interrupt_behind`: onnxruntime's
    `ImportError: initialization failed` of a SIGTERM during its import) raised as that
    interrupt, so that the command ends as on the signal (one line, status 130 or 143)."""
    from ge._signals import interrupt_behind

    try:
        yield
    except Exception as exc:
        interrupt = interrupt_behind(exc)
        if interrupt is None:
            raise
        raise _same_signal(interrupt) from exc


def _same_signal(interrupt: KeyboardInterrupt) -> KeyboardInterrupt:
    """A new interrupt of `interrupt`'s kind (raising that one from the error it caused
    would make a cycle of causes)."""
    try:
        return type(interrupt)(*interrupt.args)
    except Exception:  # (a subclass of other arguments)
        return Terminated() if isinstance(interrupt, Terminated) else KeyboardInterrupt()


#: ASCII for the symbols ge's own lines and tables use, where the output cannot encode
#: them; only those: a user's `×` or `µ` (in a dim or value name) is escaped, not made a
#: letter the model does not have.
_ASCII_FOR = {"→": "->", "←": "<-", "—": "--", "≤": "<=", "≥": ">=", "…": "...", "·": "-"}
_ASCII_HANDLER = "ge.ascii"


def _ascii_for(err: UnicodeError) -> tuple[str, int]:
    """The codec error handler of `_encodable_streams`: ASCII for ge's symbols, a Python
    escape (`\\xe9`, `\\u2202`) for anything else."""
    if not isinstance(err, UnicodeEncodeError):
        raise err
    return "".join(map(_ascii_char, err.object[err.start:err.end])), err.end


def _ascii_char(ch: str) -> str:
    """A character as an ASCII stream writes it: ge's symbol's ASCII form, an ASCII
    character itself, anything else its Python escape."""
    if ch.isascii():
        return ch
    return _ASCII_FOR.get(ch) or ch.encode("ascii", "backslashreplace").decode()


def encodable(text: str) -> str:
    """`text` as the streams will write it when stdout or stderr cannot encode it (ge's
    symbols in ASCII, anything else escaped, as `_ascii_for` does): for a table cell, which
    rich measures before the stream's error handler would widen `→` to `->` or a plugin
    path's `融` to `\\u878d` (the columns would then be off)."""
    if text.isascii() or all(_can_encode(stream) for stream in (sys.stdout, sys.stderr)):
        return text
    return "".join(map(_ascii_char, text))


def fitting_columns(headers: Sequence[str], rows: Iterable[Sequence[str]], width: int | None,
                    drops: Sequence[str], caps: Mapping[str, int] | None = None) -> list[int]:
    """The indexes of a table's columns to show in a terminal of `width` columns: all when
    they fit at their widest cell (a column of `caps` at most that wide: one that folds well,
    a path at its separators), else without the columns `drops` names, the first first,
    until the rest do (None: any width). Nine columns at 80 folded every name of ge
    compile's pass table over three lines (trial V): fewer, whole, read better."""
    shown = list(range(len(headers)))
    if width is None:
        return shown
    widest = [len(h) for h in headers]
    for row in rows:
        widest = [max(w, len(text)) for w, text in zip(widest, row, strict=True)]
    for i, header in enumerate(headers):
        if caps and header in caps:
            widest[i] = min(widest[i], max(caps[header], len(header)))
    pending = [headers.index(name) for name in drops]
    while pending and sum(widest[i] for i in shown) + 3 * len(shown) + 1 > width:
        shown.remove(pending.pop(0))
    return shown


def left_out_note(headers: Sequence[str], shown: Sequence[int], width: int | None) -> str:
    """What a table's caption says of the columns `fitting_columns` left out ("" if none)."""
    left_out = [h for i, h in enumerate(headers) if i not in shown]
    if not left_out:
        return ""
    return (f"columns {', '.join(left_out)} left out for the terminal's width ({width}; a "
            "wider terminal, or --json, has them)")


def cell(text: str) -> str:
    """A table cell of text from the model or a plugin: `encodable`, then escaped for
    rich's markup."""
    from rich.markup import escape

    return escape(encodable(text))


def _can_encode(stream: object) -> bool:
    """Whether `stream` writes ge's symbols as they are (a stream without an encoding, a
    test's capture, is taken to)."""
    encoding = getattr(stream, "encoding", None)
    if not isinstance(encoding, str):
        return True
    try:
        "→…·".encode(encoding)
    except UnicodeEncodeError:
        return False
    except LookupError:
        return True
    return True


@contextlib.contextmanager
def _encodable_streams() -> Iterator[None]:
    """For a command's length, make stdout and stderr write `→` as `->` (and escape what has
    no ASCII form) where their encoding cannot encode it (an ASCII locale: LC_ALL=C with
    PYTHONUTF8=0, or PYTHONIOENCODING=ascii), instead of failing with a traceback once the
    work is done and the model written."""
    changed: list[tuple[io.TextIOWrapper, str | None]] = []
    for stream in (sys.stdout, sys.stderr):
        if not isinstance(stream, io.TextIOWrapper) or _can_encode(stream):
            continue  # (a test's capture, a pipe set up by the caller: theirs to encode)
        codecs.register_error(_ASCII_HANDLER, _ascii_for)
        changed.append((stream, stream.errors))
        stream.reconfigure(errors=_ASCII_HANDLER)
    try:
        yield
    finally:
        for stream, errors in changed:
            stream.reconfigure(errors=errors)


def console(*, stderr: bool = False) -> Console:
    """A rich console for tables: no colours when not a terminal, and wide enough for the
    tables when writing to a pipe or file (unless COLUMNS says otherwise). Written to a
    pipe or file, lines of text are not wrapped, only tables fit the width: a path or a
    message stays one line for grep (trial AG: "wrote PATH" was cut inside the file name
    in a CI log); a terminal gets them wrapped at word boundaries. No `:name:` is read as
    an emoji: ge prints none, and user-given names hold colons (entry point `a:b` printed
    as `weird-eps🅰b`); their markup is escaped where printed (`cell`)."""
    stream = sys.stderr if stderr else sys.stdout
    terminal = hasattr(stream, "isatty") and stream.isatty()
    width = None if terminal or "COLUMNS" in os.environ else 160
    return _console_class()(file=stream, soft_wrap=not terminal, width=width, highlight=False,
                            emoji=False)


@functools.cache
def _console_class() -> type[Console]:
    """rich's Console, a broken pipe raised as BrokenPipeError (rich 13.x ends the process
    with status 1 itself), which `command_output` ends as a pipe's reader expects."""
    from rich.console import Console

    class PipeConsole(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError(errno.EPIPE, "the reader of the output stopped reading")

    return PipeConsole


def _file_identity(path: Path) -> tuple[int, int, int] | None:
    """What tells a file from the one that replaced it (inode, change time, size), or None."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_ino, found.st_ctime_ns, found.st_size


def end_interrupted(prog: str, interrupt: KeyboardInterrupt,
                    written: Sequence[Path] = (), dumps: Path | None = None) -> NoReturn:
    """End a command stopped by Ctrl-C (SIGINT) or SIGTERM (`Terminated`) as a shell would:
    one line saying so on stderr and status 130 or 143. Outputs are written atomically, so
    none was left half-written; those already in place when it came (`written`: the signal
    arrived as the command was ending) are named, not denied, and so is a folder of graph
    dumps (`dumps`) holding the ones made so far, which stay (as after a failure)."""
    terminated = isinstance(interrupt, Terminated)
    what = ("nothing was written" if not written
            else f"{', '.join(str(p) for p in written)} had been written")
    if dumps is not None and _holds_dumps(dumps):
        what += f"{' but' if not written else ';'} the graph dumps made so far stay in {dumps}"
    word = ending_word(signal.SIGTERM if terminated else signal.SIGINT)
    click.echo(f"{prog}: {word}; {what}", err=True)
    raise SystemExit(TERMINATED_STATUS if terminated else INTERRUPTED_STATUS) from None


def _holds_dumps(folder: Path) -> bool:
    """Whether `folder` holds graph dump files."""
    from ge.compiler.dump_manifest import is_dump_file

    try:
        return any(is_dump_file(p.name) for p in folder.iterdir())
    except OSError:
        return False


