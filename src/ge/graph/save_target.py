"""Where a save writes: the checks of its target before anything is written, the mode a
new file gets, the files a graph was loaded from (which a save never replaces unless
asked), and the renames that put a finished save into place."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import threading
from pathlib import Path

from ge._signals import held_signals
from ge.errors import GraphTypeError, ModelSaveError
from ge.graph.graph import Graph

__all__ = ["check_data_target", "check_save_target", "check_target_path",
           "check_target_spelling", "data_file_of", "folder_spelling_problem",
           "kept_data_name", "new_file_mode", "rename_into_place", "replaced_data_files",
           "write_destination", "write_target_problem"]


_UMASK_LOCK = threading.Lock()


def _umask() -> int:
    """The process umask, read without changing it where Linux allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def new_file_mode(target: Path | None = None) -> int:
    """The mode `open(target, "wb")` would leave: the existing file's, else (and for no
    `target`: a file of a new name) 0666 & ~umask."""
    try:
        return stat.S_IMODE(target.stat().st_mode) if target is not None else 0o666 & ~_umask()
    except OSError:
        return 0o666 & ~_umask()


def _loaded_from(graph: Graph, path: Path) -> tuple[str, str] | None:
    """The file `graph` was loaded from that `path` names (resolved path and its role), if
    any: the same resolved path (symlinks, `..`, relative spellings) or the same inode."""
    sources: dict[str, str] = graph.root_graph().model.source_files
    real = os.path.realpath(path)
    if real in sources:
        return real, sources[real]
    if os.path.exists(path):  # hard links, case-insensitive file systems
        for source, role in sources.items():
            with contextlib.suppress(OSError):
                if os.path.samefile(path, source):
                    return source, role
    return None


def replaced_data_files(graph: Graph, target: str | os.PathLike[str]) -> list[Path]:
    """The external data files of the model `graph` was loaded from, when `target` is that
    model's file (a save with `overwrite_input` replacing it): what the model it replaces
    read its weights from. Empty for any other target."""
    found = _loaded_from(graph, Path(target))
    if found is None or found[1] != "model file":
        return []
    sources = graph.root_graph().model.source_files
    return [Path(file) for file, role in sources.items() if role == "external data file"]


def kept_data_name(graph: Graph, target: Path) -> str | None:
    """The name of the one data file, beside `target`, of the model `graph` was loaded
    from when `target` is that model's file and the data file is named after it
    (`model.onnx.data`, `model.onnx_data`, `model.data` for `model.onnx`): saved over it,
    the model keeps its weights in that file (written anew, renamed into place with the
    model) instead of leaving it behind, unread. A data file of another name
    (`weights.bin`) may be read by other models too: it is never written over (the weights
    go where any save puts them, and the former file is left, with a warning)."""
    files = replaced_data_files(graph, target)
    folder = target.parent if str(target.parent) else Path(".")
    if len(files) != 1 or files[0].parent != Path(os.path.realpath(folder)):
        return None
    name = files[0].name
    owned = {f"{target.name}.data", f"{target.name}_data", f"{target.stem}.data"}
    return name if name in owned else None


def write_destination(target: Path) -> tuple[Path, bool]:
    """Where writing `target` lands, and whether it is written in place rather than through
    a temporary file renamed over it: a symbolic link is followed (the file it names is
    replaced, the link stays), and a device or pipe (`-o /dev/null`) is written through,
    never replaced by a regular file."""
    real = Path(os.path.realpath(target)) if os.path.islink(target) else target
    try:
        mode = os.stat(real).st_mode
    except OSError:
        return real, False
    return real, not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def data_file_of(target: Path, name: str | None = None) -> Path:
    """The external data file a save to `target` writes: `name` (default: the model file's
    name + `.data`) beside the model file written, which for a symbolic link is the file it
    names (`write_destination`), not the link: the model refers to its data file by a name
    in its own folder, so the data file must sit beside, and be named after, the file
    actually written (ge once wrote `current.onnx.data` beside the link while the model went
    to `v1/model.onnx`, which then read no weights, or a later version's)."""
    destination, _ = write_destination(target)
    return destination.parent / (name or f"{destination.name}.data")


def write_target_problem(target: Path) -> str | None:
    """Why a file cannot be written at `target` (its folder missing, `target` a folder, no
    permission, a name the system refuses: "File name too long"), or None: asked before any
    work is done, by `save` and by the CLI for each file it writes."""
    try:
        return _target_problem(target)
    except OSError as exc:  # (ENAMETOOLONG, ELOOP...: what the system says, said once)
        return exc.strerror or str(exc)


def _target_problem(target: Path) -> str | None:
    target, in_place = write_destination(target)
    if in_place:
        return None if os.access(target, os.W_OK) else "permission denied"
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        return f"{folder} is not an existing folder"
    if target.is_dir():
        return "it is a folder"
    if not os.access(folder, os.W_OK | os.X_OK) or (target.exists()
                                                    and not os.access(target, os.W_OK)):
        return "permission denied"
    return None


def folder_spelling_problem(path: str | os.PathLike[str]) -> str | None:
    """Why `path`, as given, cannot name a file to write: it is empty (a `Path` of it is the
    current folder), or it ends with a path separator ("out/"), so it names a folder, which
    `Path` hides by dropping the separator (the file would have been written as "out");
    None otherwise."""
    text = os.fspath(path)
    if isinstance(text, str) and not text.strip():
        return "no file is named (the path is empty); give a file name"
    if isinstance(text, str) and text.endswith(tuple(filter(None, ("/", os.sep, os.altsep)))):
        return "it names a folder (it ends with a path separator); give a file name"
    return None


def check_target_spelling(path: str | os.PathLike[str]) -> None:
    """Refuse (ModelSaveError, GE1104) a path that names no file (`folder_spelling_problem`),
    before a `Path` of it hides that; a path of another type than str or os.PathLike is
    GraphTypeError (GE1002; trial AF: `save(123)` was os.fspath's raw TypeError)."""
    if not isinstance(path, (str, os.PathLike)):
        raise GraphTypeError(f"the path to save to must be a str or an os.PathLike, got "
                             f"{type(path).__name__} {path!r}")
    problem = folder_spelling_problem(path)
    if problem is not None:
        text = os.fspath(path)
        raise ModelSaveError(f"cannot save to {text!r}: {problem}, such as {text}model.onnx",
                             path=text)


def check_target_path(target: Path) -> None:
    """Refuse (ModelSaveError) a target no file can be written at (`write_target_problem`)."""
    problem = write_target_problem(target)
    if problem is not None:
        raise ModelSaveError(f"cannot save to {target}: {problem}", path=str(target))


def check_data_target(target: Path, data_file: Path) -> None:
    """Refuse (ModelSaveError, GE1104) to save to `target` when its external data file
    `data_file` cannot be written: it is a folder (which a rename of a file cannot replace;
    ge found that only after the whole compilation). Asked before any work is done when
    the data file is sure to be written (`external_data=True`)."""
    if os.path.isdir(data_file) and not os.path.islink(data_file):
        raise ModelSaveError(
            f"cannot save to {target}: its external data file {data_file} is a folder; "
            "remove or rename it, or save elsewhere", path=str(target))


def check_save_target(
    graph: Graph,
    path: str | os.PathLike[str],
    *,
    external_data: bool | None = None,
    external_data_name: str | None = None,
    overwrite_input: bool = False,
) -> None:
    """Refuse (ModelSaveError) a target `save` could not write: in a missing folder, a
    folder itself, or (unless `overwrite_input`) a file `graph` was loaded from, the model or
    its external data. `ge compile` asks before compiling; `save` asks again.

    The data file is checked only when `external_data` is True (None decides at save time).
    A path ending with a separator ("out/") names a folder: refused too, and so is a data
    file that is a folder (`check_data_target`). Of a symbolic link, the data file is the
    one beside the file it names (`data_file_of`).
    """
    check_target_spelling(path)
    target = Path(path)
    check_target_path(target)
    data_file = data_file_of(target, external_data_name)
    if external_data:
        check_data_target(target, data_file)
    if overwrite_input:
        return
    written = [target]
    if external_data:
        written.append(data_file)
    for file in written:
        found = _loaded_from(graph, file)
        if found is None:
            continue
        source, role = found
        what = "it" if file is target else f"its external data file {file.name}"
        raise ModelSaveError(
            f"cannot save to {target}: {what} would replace {source}, the {role} this graph "
            "was loaded from; save elsewhere, or pass overwrite_input=True "
            "(ge compile: --overwrite-input) to replace it",
            path=str(target))


def rename_into_place(tmp_model: Path, target: Path, tmp_data: Path | None,
                       data_target: Path) -> None:
    """Rename the data file, then the model, into place. Should either rename fail, the
    previous data file (set aside first) goes back, so the previous model keeps its tensors.
    Ctrl-C and SIGTERM wait until the renames are done (`held_signals`): between the two,
    the previous model read the new weights."""
    if tmp_data is None:
        os.replace(tmp_model, target)
        return
    with held_signals():
        _rename_pair(tmp_model, target, tmp_data, data_target)


def _rename_pair(tmp_model: Path, target: Path, tmp_data: Path, data_target: Path) -> None:
    previous: Path | None = None
    if os.path.lexists(data_target):
        fd, name = tempfile.mkstemp(dir=data_target.parent, prefix=f".{data_target.name}.",
                                    suffix=".old")
        os.close(fd)
        previous = Path(name)
        try:
            os.replace(data_target, previous)
        except OSError:
            previous.unlink()
            raise
    try:
        os.replace(tmp_data, data_target)
        os.replace(tmp_model, target)
    except BaseException:  # (a signal is held, but a thread's interrupt is not)
        if previous is not None:
            os.replace(previous, data_target)
        else:
            data_target.unlink(missing_ok=True)
        raise
    if previous is not None:
        with contextlib.suppress(OSError):
            previous.unlink()
