"""Whether a plugin file changed since it was imported (`ge.passes.file_stamps`): size and
modification time first, the bytes only when those differ or cannot tell (a file written
in the same tick of the file system's clock as it was read).

Real files in a temporary folder; modification times are set with `os.utime`, as an
editor, `touch` or a copy that keeps times (`cp -p`) sets them.
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

import pytest

import ge
import ge.compiler
from ge.errors import CompileWarning
from ge.passes.bootstrap import ENV_PY_PASS_PATH
from ge.passes.file_stamps import RACY_NS, FileStamp
from plugin_fixtures import small_graph

HOUR_NS = 3600 * 10**9


def set_mtime(path: Path, mtime_ns: int) -> None:
    os.utime(path, ns=(mtime_ns, mtime_ns))


def old_file(path: Path, text: str) -> int:
    """Write `text` to `path`, dated an hour ago (a plugin file installed long ago)."""
    path.write_text(text)
    mtime = time.time_ns() - HOUR_NS
    set_mtime(path, mtime)
    return mtime


def test_an_edit_changes_the_stamp_and_an_unchanged_file_does_not(tmp_path: Path) -> None:
    path = tmp_path / "p.py"
    old_file(path, "x = 1\n")
    stamp = FileStamp.take(str(path))
    assert stamp is not None and stamp.path == str(path)
    assert not stamp.changed()
    path.write_text("x = 22\n")  # another size, a new time
    assert stamp.changed()
    path.write_text("x = 1\n")  # the bytes imported, back again
    assert not stamp.changed()


def test_a_file_that_went_has_changed(tmp_path: Path) -> None:
    path = tmp_path / "p.py"
    old_file(path, "x = 1\n")
    stamp = FileStamp.take(str(path))
    assert stamp is not None
    path.unlink()
    assert stamp.changed()
    assert FileStamp.take(str(path)) is None


def test_a_settled_stamp_trusts_size_and_time_without_reading(tmp_path: Path) -> None:
    """A file read long after its last modification: same size and time prove it unchanged,
    so its bytes are not read; this edit, which keeps both (a copy that keeps times), is
    not seen (git's and make's rule). An edit that changes either one is."""
    path = tmp_path / "p.py"
    mtime = old_file(path, "x = 1\n")
    stamp = FileStamp.take(str(path))
    assert stamp is not None
    path.write_text("x = 2\n")
    set_mtime(path, mtime)
    assert not stamp.changed()  # not read: size and time are the stamped ones
    set_mtime(path, mtime + 1)
    assert stamp.changed()  # the time differs: the bytes are compared, and they differ


def test_a_racy_stamp_compares_bytes_until_it_settles(tmp_path: Path) -> None:
    """A file written right before it was read may be edited again within the same tick of
    the file system's clock, keeping size and time: such a stamp compares the bytes, until
    a comparison long enough after the modification finds them unchanged."""
    path = tmp_path / "p.py"
    path.write_text("x = 1\n")
    mtime = path.stat().st_mtime_ns
    assert mtime > time.time_ns() - RACY_NS  # just written: racy
    stamp = FileStamp.take(str(path))
    assert stamp is not None
    path.write_text("x = 2\n")
    set_mtime(path, mtime)  # the same size and time: only the bytes tell
    assert stamp.changed()
    path.write_text("x = 1\n")
    old = time.time_ns() - HOUR_NS
    set_mtime(path, old)  # the imported bytes, dated long ago: compared once, then settled
    assert not stamp.changed()
    path.write_text("x = 3\n")
    set_mtime(path, old)
    assert not stamp.changed()  # settled: size and time are trusted now


def test_the_compiler_warns_about_an_edited_environment_plugin_once_per_compilation(
        tmp_path: Path, pass_source, monkeypatch: pytest.MonkeyPatch) -> None:
    """The staleness warning of every compilation (`ge.compiler.engine._warn_stale`) uses
    the stamps: an old, unchanged plugin gives none; an edit gives one per compilation."""
    plugin = tmp_path / "plugins" / "old_pass.py"
    plugin.parent.mkdir()
    old_file(plugin, pass_source("OldPass"))
    monkeypatch.setenv(ENV_PY_PASS_PATH, str(plugin))
    ge.initialize()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            ge.compiler.compile_graph(small_graph())
    plugin.write_text(pass_source("OldPass") + "# edited\n")
    for _ in range(2):
        with pytest.warns(CompileWarning, match="old_pass.py.*changed .or went. since the "
                          "compiler loaded it"):
            report = ge.compiler.compile_graph(small_graph())
        assert [r.pass_name for r in report.records] == ["OldPass"]
