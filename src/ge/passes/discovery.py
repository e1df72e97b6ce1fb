"""Which modules a pass path names: GE's rules for the items of `ASCEND_GE_PY_PASS_PATH`.

An item is a `.py` file (one standalone module) or a directory, scanned one level deep in
name order: names starting with `_` (and hidden dot-files) are skipped, `*.py` files are
standalone modules, sub-directories with `__init__.py` are packages imported under their own
name. Nothing is imported here; `ge.passes.loader` does that.
"""

from __future__ import annotations

import difflib
import errno
import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ge.errors import PluginPathNotFoundError, PluginPathSuffixError, PluginPathTypeError

__all__ = [
    "DEFAULT_MODULE_PREFIX",
    "DEFAULT_PLUGIN_KIND",
    "PluginSource",
    "empty_folder_note",
    "given_paths",
    "module_name_for",
    "normalize_path_list",
    "plugin_sources",
]

DEFAULT_MODULE_PREFIX = "_ge_py_pass_"
DEFAULT_PLUGIN_KIND = "python pass"
_DIGEST_LENGTH = 16
_NOT_IDENTIFIER = re.compile(r"[^0-9A-Za-z_]")


@dataclass(frozen=True)
class PluginSource:
    """One importable plugin found on a pass path.

    `kind` is "module" (a standalone `.py` file) or "package" (`path` is its `__init__.py`).
    `search_dir` is the scanned directory, put on `sys.path` while the plugin is imported.
    """

    kind: str
    path: Path
    module_name: str
    search_dir: Path | None = None
    #: how the pass path naming it was given: "environment" (ASCEND_GE_PY_PASS_PATH),
    #: "given" (--pass-path, pass_paths=), or "" (not said)
    reached_as: str = ""


def given_paths(paths: Iterable[str | os.PathLike[str]], what: str = "pass_paths"
                ) -> list[Path]:
    """Pass-path items given as a list (`pass_paths=`, `--pass-path`), as paths; blank
    items are dropped, as in `ASCEND_GE_PY_PASS_PATH` (`--pass-path "$(PLUGINS)"` with the
    variable empty loaded every file of the current folder). One string (or path) given
    where a list belongs is a `PluginPathTypeError`: its characters would be the items; so is
    anything else that is not a list of paths (the rule of `ge.compiler.arguments`)."""
    wanted = f"{what} must be a list of plugin files or folders"
    if isinstance(paths, (str, bytes, os.PathLike)):
        raise PluginPathTypeError(
            f"{wanted}, got the {type(paths).__name__} {os.fsdecode(paths)!r}: write "
            f"[{os.fsdecode(paths)!r}]")
    if not isinstance(paths, Iterable):
        raise PluginPathTypeError(f"{wanted}, got the {type(paths).__name__} {paths!r}")
    items = list(paths)
    for item in items:
        if not isinstance(item, (str, bytes, os.PathLike)):
            raise PluginPathTypeError(
                f"{wanted}, got the {type(item).__name__} {item!r} among them")
    return [Path(os.fsdecode(item)) for item in items if os.fsdecode(item).strip()]


def normalize_path_list(value: str | None) -> list[Path]:
    """Split a pass-path value on `os.pathsep`; strip, drop empty pieces, resolve each one."""
    if not value:
        return []
    pieces = (piece.strip() for piece in value.split(os.pathsep))
    return [Path(piece).resolve() for piece in pieces if piece]


def module_name_for(path: Path, prefix: str = DEFAULT_MODULE_PREFIX) -> str:
    """`{prefix}{stem}_{digest}`: stable across processes (sha256 of the resolved path, D7)."""
    stem = _NOT_IDENTIFIER.sub("_", path.stem) or "module"
    digest = hashlib.sha256(os.fsencode(str(path))).hexdigest()[:_DIGEST_LENGTH]
    return f"{prefix}{stem}_{digest}"


def _skipped(name: str) -> bool:
    return name.startswith(("_", "."))


def empty_folder_note(item: Path) -> str:
    """Why folder `item` names no plugin, for the warning that says so (GE loads nothing
    from it in silence): its sub-folders holding `.py` files without an `__init__.py`, and
    the `.py` files skipped for their leading `_`."""
    if (item / "__init__.py").is_file():  # a package given itself (trial AA)
        return (f"it is a package ({item.name}/__init__.py): put the folder holding it on "
                "the path, or name its modules")
    unpackaged, skipped = [], []
    with os.scandir(item) as entries:
        for entry in sorted(entries, key=lambda entry: entry.name):
            if entry.is_dir() and not _skipped(entry.name) and any(
                    name.endswith(".py") for name in os.listdir(entry.path)):
                unpackaged.append(f"{entry.name}/")
            elif entry.name.endswith(".py") and entry.name.startswith("_"):
                skipped.append(entry.name)
    notes = []
    if unpackaged:
        notes.append(f"{', '.join(unpackaged[:3])}{' ...' if len(unpackaged) > 3 else ''} "
                     f"{'holds' if len(unpackaged) == 1 else 'hold'} .py files but no "
                     "__init__.py: add one to load it as a package, or put the folder "
                     "itself on the path")
    if skipped:
        notes.append(f"{', '.join(skipped[:3])}{' ...' if len(skipped) > 3 else ''} "
                     f"{'starts' if len(skipped) == 1 else 'start'} with '_', which marks "
                     "files not to load")
    return "; ".join(notes)


def _separator_note(item: Path) -> str:
    """For a missing path holding `;` or `,` whose parts exist: the list separator is `:`
    (ASCEND_GE_PY_PASS_PATH="a;b", as on Windows, read as one path)."""
    for separator in (";", ","):
        parts = [part for part in str(item).split(separator) if part.strip()]
        if separator in str(item) and any(Path(part.strip()).exists() for part in parts):
            return (f" (the paths of a list are separated by ':', as in PATH, not "
                    f"{separator!r}: {':'.join(part.strip() for part in parts)})")
    return ""


def _near_note(item: Path) -> str:
    """For a missing path whose folder exists: the entry of that folder it most likely
    means (trial WW: `my_pases` for my_passes, `attention_mha` for attention_mha.py)."""
    try:
        names = [n for n in os.listdir(item.parent) if not _skipped(n)]
    except OSError:
        return ""
    close = ([f"{item.name}.py"] if f"{item.name}.py" in names
             else difflib.get_close_matches(item.name, names, n=1, cutoff=0.8))
    return f" (did you mean {item.parent / close[0]}?)" if close else ""


def plugin_sources(
    item: Path,
    *,
    module_prefix: str = DEFAULT_MODULE_PREFIX,
    plugin_kind: str = DEFAULT_PLUGIN_KIND,
) -> list[PluginSource]:
    """The plugins one pass-path item names, in load order; checks the item exists first."""
    item = Path(item).resolve()
    try:
        item.stat()
    except OSError as exc:  # (a name the system refuses, "File name too long", says so)
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            raise PluginPathNotFoundError(f"{plugin_kind} path cannot be read: {item}: "
                                          f"{exc.strerror or exc}", path=str(item)) from None
        raise PluginPathNotFoundError(f"{plugin_kind} path does not exist: {item}"
                                      f"{_separator_note(item) or _near_note(item)}",
                                      path=str(item)) from None
    if not item.is_dir():
        if item.suffix != ".py":
            raise PluginPathSuffixError(
                f"{plugin_kind} file must end with .py: {item}", path=str(item)
            )
        return [PluginSource("module", item, module_name_for(item, module_prefix))]
    sources: list[PluginSource] = []
    with os.scandir(item) as entries:
        ordered = sorted(entries, key=lambda entry: entry.name)
    for entry in ordered:
        if _skipped(entry.name):
            continue
        path = item / entry.name
        if entry.is_symlink():
            path = path.resolve()
        if entry.name.endswith(".py") and entry.is_file():
            sources.append(PluginSource("module", path, module_name_for(path, module_prefix), item))
        elif entry.is_dir() and (path / "__init__.py").is_file():
            sources.append(PluginSource("package", path / "__init__.py", entry.name, item))
    return sources
