"""The files a command writes: the options naming them checked before any work is done (a
missing folder, a folder named as a file, a file the command reads), and the writing itself,
atomic: readers see the old file or the new one, and a failure leaves nothing behind."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import click

from ge.cli.output import dumps_json
from ge.errors import CommandLineError

__all__ = ["DASH_IS_NO_STDOUT", "check_not_read", "check_output_folder", "file_target",
           "files_read", "same_file", "write_atomically", "write_json_atomically"]


#: Why "-" names no output: ge writes files only, where many tools would write to stdout
#: (trial AG: `-o -` wrote a file called "-").
DASH_IS_NO_STDOUT = ("'-' is not standard output here: ge writes its outputs to files only; "
                     "give a file name")


def file_target(ctx: click.Context, param: click.Parameter, value: str | None) -> Path | None:
    """A click callback for an option naming a file to write (`--report`, `--html`, `ge run
    --output`; the option's type a plain `click.Path()`, which keeps what was typed): the file
    as a Path. One ending with a path separator names a folder, which a Path would hide by
    dropping the separator (a file named like the folder was written): a usage error."""
    from ge.graph.save_target import folder_spelling_problem

    if value is None:
        return None
    if value == "-":
        raise click.BadParameter(DASH_IS_NO_STDOUT, ctx=ctx, param=param)
    problem = folder_spelling_problem(value)
    if problem is not None:
        raise click.BadParameter(f"{value!r}: {problem}, such as "
                                 f"{value}{param.metavar or 'FILE'}", ctx=ctx, param=param)
    return Path(value)


def check_output_folder(path: Path, what: str) -> None:
    """Refuse (CommandLineError) to write `what` to `path` when its folder does not exist or
    it is a folder, before any work is done."""
    from ge.graph.save_target import write_target_problem

    problem = write_target_problem(path)
    if problem is not None:
        raise CommandLineError(f"cannot write {what} to {path}: {problem}", path=str(path))


def files_read(*, inputs: Path | None = None, pass_paths: Sequence[str | os.PathLike[str]] = ()
               ) -> list[tuple[Path, str]]:
    """The files besides MODEL a command reads, with what each is: the `--inputs` file and
    the pass plugins it loads (`--pass-path` items and `ASCEND_GE_PY_PASS_PATH`'s, a
    folder's plugin files). An output naming one would replace it (`check_not_read`); a
    path that names nothing is left to the loader's own error."""
    from ge.errors import GeError
    from ge.passes.bootstrap import ENV_PY_PASS_PATH
    from ge.passes.discovery import normalize_path_list, plugin_sources

    found: list[tuple[Path, str]] = []
    if inputs is not None:
        found.append((Path(inputs), "the --inputs file"))
    items = [Path(item) for item in pass_paths if str(item).strip()]
    items += normalize_path_list(os.environ.get(ENV_PY_PASS_PATH, ""))
    for item in items:
        try:
            sources = plugin_sources(item)
        except GeError:
            continue
        found += [(source.path, f"the pass plugin {source.path}") for source in sources]
    return found


def check_not_read(target: Path, what: str, read: Sequence[tuple[Path | None, str]]) -> None:
    """Refuse (CommandLineError, GE1701) to write `what` to `target` when it is a file the
    command reads (`read`: path and what it is), before anything is done: writing it would
    lose that file (an --inputs file replaced by the outputs, a plugin by the model)."""
    for other, role in read:
        if other is not None and same_file(target, other):
            raise CommandLineError(f"cannot write {what} to {target}: it is {role}",
                                   path=str(target))


def same_file(a: Path, b: Path) -> bool:
    """Whether `a` and `b` name the same file (resolved spellings, or the same inode)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def write_atomically(path: Path, write: Callable[[IO[bytes]], None], what: str) -> None:
    """Write `path` through a temporary file in its folder renamed into place: readers see
    the old file or the new one, never a part; a failure leaves nothing behind. The file
    gets the mode `open()` would give it (an existing file's, else the umask's). A symbolic
    link's file is replaced (the link stays); a device or pipe is written through."""
    from ge.graph.save_target import new_file_mode, write_destination

    shown = path
    path, in_place = write_destination(path)  # a link's file; a device written through
    if in_place:
        try:
            with open(path, "wb") as stream:
                write(stream)
        except OSError as err:
            raise CommandLineError(f"cannot write {what} to {shown}: {err.strerror or err}",
                                   path=str(shown)) from None
        return
    folder = path.parent if str(path.parent) else Path(".")
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:
        raise CommandLineError(f"cannot write {what} to {shown}: {err.strerror or err}",
                               path=str(shown)) from None
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as stream:
            write(stream)
        os.chmod(tmp, new_file_mode(path))
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise CommandLineError(f"cannot write {what} to {shown}: {err.strerror or err}",
                               path=str(shown)) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json_atomically(path: Path, data: Any, what: str = "the report") -> None:
    """`data` as indented JSON, written atomically (see `write_atomically`)."""
    text = (dumps_json(data) + "\n").encode("utf-8")

    def write(stream: IO[bytes]) -> None:
        stream.write(text)

    write_atomically(path, write, what)
