"""Which code is the user's: ge's own files, the import machinery, the standard library and
installed packages are not. Errors and warnings name the user's file and line, never one of
ge's; these helpers find them in a traceback. Here, beneath every layer, so that `ge.ops`
(a custom operator's functions, where it was registered) and `ge.passes` (a pass's hooks)
judge frames alike (`ge.passes.source` builds its locations on them)."""

from __future__ import annotations

import functools
import importlib
import os
import sys
import sysconfig
from collections.abc import Iterable
from pathlib import Path
from types import FrameType, TracebackType

from ge.errors import SourceLocation

__all__ = ["caller_location", "innermost_user_location", "is_internal_file", "is_library_file",
           "outermost_user_location", "traceback_location", "within"]

_GE_ROOT = os.path.dirname(os.path.abspath(__file__))
#: The standard library's import machinery (`importlib` and `importlib.metadata`).
_IMPORTLIB_ROOT = os.path.dirname(os.path.abspath(importlib.__file__))
#: The names of the folders installed packages go in: code in them is no user's helper
#: (`innermost_user_location`), nor is the standard library's (`_library_roots`).
_PACKAGE_FOLDERS = frozenset({"site-packages", "dist-packages"})


@functools.lru_cache(maxsize=1024)
def is_internal_file(filename: str) -> bool:
    """True for frames of `ge` itself and of the import machinery (never the user's code):
    frozen modules and the standard library's `importlib` (an entry point's missing module
    or attribute fails there, and is the entry point's to name, not a line of importlib)."""
    if filename.startswith("<"):
        return True
    path = os.path.abspath(filename)
    return path.startswith(_GE_ROOT + os.sep) or path.startswith(_IMPORTLIB_ROOT + os.sep)


def caller_location() -> SourceLocation | None:
    """The innermost frame on the stack that is not `ge`'s own: the user's call site."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not is_internal_file(filename):
            return SourceLocation(filename, frame.f_lineno)
        frame = frame.f_back
    return None


def within(filename: str, roots: list[str]) -> bool:
    """Whether `filename` is one of `roots` (real paths of files or folders) or inside one."""
    real = os.path.realpath(filename)
    return any(real == root or real.startswith(root + os.sep) for root in roots)


def traceback_location(
    tb: TracebackType | None, roots: Iterable[str | Path] = (), *, only_within: bool = False
) -> SourceLocation | None:
    """The innermost traceback frame in one of `roots` (files or directories), else (unless
    `only_within`) the innermost frame that is not `ge`'s own."""
    real_roots = [os.path.realpath(str(root)) for root in roots]
    in_roots: SourceLocation | None = None
    outside: SourceLocation | None = None
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if real_roots and within(filename, real_roots):
            in_roots = SourceLocation(filename, tb.tb_lineno)
        if not is_internal_file(filename):
            outside = SourceLocation(filename, tb.tb_lineno)
        tb = tb.tb_next
    return in_roots if only_within else in_roots or outside


def outermost_user_location(tb: TracebackType | None) -> SourceLocation | None:
    """The outermost traceback frame that is neither `ge`'s nor the import machinery's:
    in a plugin's failed import, the plugin's own line (its module body's, or its entry
    point's callable's) that raised or imported what raised."""
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not is_internal_file(filename):
            return SourceLocation(filename, tb.tb_lineno)
        tb = tb.tb_next
    return None


@functools.cache
def _library_roots() -> tuple[str, ...]:
    """The standard library's folders (asked only once an error needs them)."""
    paths = sysconfig.get_paths()
    return tuple(dict.fromkeys(os.path.realpath(paths[key]) for key in ("stdlib", "platstdlib")
                               if paths.get(key)))


@functools.lru_cache(maxsize=1024)
def is_library_file(filename: str) -> bool:
    """Whether `filename` is the standard library's or an installed package's."""
    path = os.path.realpath(filename)
    return (any(path.startswith(root + os.sep) for root in _library_roots())
            or not _PACKAGE_FOLDERS.isdisjoint(Path(path).parts))


def innermost_user_location(tb: TracebackType | None, plugin_file: str | None = None
                            ) -> SourceLocation | None:
    """The innermost traceback frame in the user's code: neither `ge`'s nor the standard
    library's nor an installed package's, unless it is in the folder of `plugin_file` (a
    plugin installed as a package has its helpers beside it). The line that raised, or that
    called the library that raised: a pass's hook calling a helper module of its own
    (`_helpers.py` beside it) names the helper's line there. None when no frame is the
    user's (ge raised about what a hook returned)."""
    folder = os.path.dirname(os.path.realpath(plugin_file)) if plugin_file else None
    found: SourceLocation | None = None
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not is_internal_file(filename) and (
                not is_library_file(filename)
                or (folder is not None and within(filename, [folder]))):
            found = SourceLocation(filename, tb.tb_lineno)
        tb = tb.tb_next
    return found
