"""Which files one compilation's graph dumps wrote into their folder: the folder's manifest.

A run dumping into a folder an earlier run dumped into must not leave a mix of both (a run
that failed after `ge_0005` beside the earlier run's `ge_0006` to `ge_0020` reads as one
run), nor ever remove a file ge did not write. So each run lists the files it writes, as it
writes them, in `ge_dump_manifest.json` beside them (its pid, its start, whether it got
through the last step), and a new run, when its pipeline starts, first removes exactly the
files the previous manifest lists, each only if unchanged since (same size and modification
time) and named like a dump, then writes its own. A file named like a dump that no manifest
lists so (an older ge's dump, a dump edited since, a user's file) makes the folder refused
(GE1701) when the dumper is made, before anything runs, naming it: this run's files would
mix with it, or overwrite it.

Rather than a subfolder per run (GE's `pid_<pid>_deviceid_<id>` under `DUMP_GRAPH_PATH`):
the dumps stay where the docs and tools (`ge passes explain`'s hint, `DIR/ge_*_<stage>_*`)
say they are, with GE's `DUMP_GE_GRAPH` file names, and dumping the same model again
replaces the last run's dumps instead of adding another copy (a model with 1 GiB of
weights dumps 1.2 GB per run).

Two compilations dumping into one folder at once: the later one takes the folder over (as a
sequential run would), and the earlier one, finding another run's manifest before its next
dump, stops dumping with a `CompileWarning` instead of writing among the other's files.
Every look at the folder and every change to it (the check, the takeover, a dump with its
listing, the mark of completion) is made holding the folder's lock (`ge.compiler.dump_lock`),
so that the other run sees the folder only between them, every dump in it listed. A run
lists the files of a dump as being written (`writing`) before it writes them: a run killed
while writing one leaves its names in the manifest, and the next run removes those files
too, where it would otherwise refuse the folder for files no manifest lists.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from ge._text import first_and_more
from ge.compiler.dump_lock import locked_folder
from ge.errors import CommandLineError, CompileWarning
from ge.graph.save_target import new_file_mode
from ge.passes.source import warn_user

__all__ = ["MANIFEST_NAME", "DumpRun", "is_dump_file", "warn_taken_over"]

#: The manifest's file name, in the dump folder.
MANIFEST_NAME = "ge_dump_manifest.json"
_FORMAT = 1
# What the dumper writes: ge_<seq>_<step>[_<pass>].txt/.onnx/.onnx.skipped.txt, and the
# shared weights file of a run's ONNX dumps.
_DUMP_FILE = re.compile(r"ge_[0-9]{4,}_[A-Za-z0-9_.-]+|ge_weights_[A-Za-z0-9_]+\.data")


def is_dump_file(name: str) -> bool:
    """Whether `name` (a file name, no folder) is one the dumper writes."""
    return _DUMP_FILE.fullmatch(name) is not None


def _stamp(path: Path) -> tuple[int, int]:
    """(size, modification time in ns) of `path` itself (a symlink's own)."""
    st = path.lstat()
    return st.st_size, st.st_mtime_ns


class DumpRun:
    """One compilation's dumps in `directory`: checked (`check`), taking the folder over
    from the previous run (`take_over`), and listing each file it writes (`writing`), each
    holding the folder's lock."""

    def __init__(self, directory: Path, *, source: str | None = None) -> None:
        """`source` names where the folder was given (an environment variable) in errors."""
        self.directory = directory
        self._where = f"{directory} ({source})" if source else str(directory)
        self.manifest = directory / MANIFEST_NAME
        self.run_id = uuid.uuid4().hex
        #: The name of the one weights file this run's ONNX dumps share: fixed up front, so
        #: that it is listed as being written before the file exists.
        self.weights_name = f"ge_weights_{self.run_id[:16]}.data"
        self.started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self.complete = False
        self.taken = False  # whether this run took the folder over (and owned it then)
        self._files: dict[str, tuple[int, int]] = {}
        self._writing: list[str] = []

    def check(self) -> None:
        """Refuse (`CommandLineError`, GE1701) a folder this run cannot take over without
        mixing its dumps with files of unknown origin; changes nothing (a missing folder
        is not made)."""
        if self.directory.is_dir():
            with locked_folder(self.directory):
                self._previous_files()

    def take_over(self) -> None:
        """Remove the previous run's dumps (those its manifest lists, unchanged since, or
        as being written) and make the manifest this run's. The folder is checked again:
        it may have changed since `check`."""
        with locked_folder(self.directory):
            removable = self._previous_files()
            for path in removable:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            self.taken = True
            self._write_manifest()

    @contextlib.contextmanager
    def writing(self, names: Sequence[str]) -> Iterator[dict[str, Any] | None]:
        """Hold the folder for writing the files `names` (in it): gives None while this
        run owns the folder, the names then listed as being written until the block ends,
        when those that exist are listed with their size and modification time as of then;
        else gives the manifest found there (`owner`) and lists nothing."""
        with locked_folder(self.directory):
            other = self.owner()
            if other is not None:
                yield other
                return
            self._writing = list(names)
            self._write_manifest()
            try:
                yield None
            finally:  # (what was written, if only in part, is listed)
                self._writing = []
                for name in names:
                    try:
                        self._files[name] = _stamp(self.directory / name)
                    except FileNotFoundError:
                        self._files.pop(name, None)
                self._write_manifest()

    def finish(self) -> dict[str, Any] | None:
        """The run dumped through the pipeline's last step: say so in the manifest. None
        when it did; else the manifest found there (`owner`), left as it is."""
        with locked_folder(self.directory):
            other = self.owner()
            if other is None:
                self.complete = True
                self._write_manifest()
            return other

    def lost_to(self) -> dict[str, Any] | None:
        """`owner`, read holding the folder's lock."""
        with locked_folder(self.directory):
            return self.owner()

    def owner(self) -> dict[str, Any] | None:
        """None while this run owns the folder (its manifest, or none: removed by hand, it
        is written again); else the manifest found there, another run's (or an unreadable
        one, as `{}`)."""
        try:
            found = json.loads(self.manifest.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return {}
        if isinstance(found, dict) and found.get("run") == self.run_id:
            return None
        return found if isinstance(found, dict) else {}

    def _write_manifest(self) -> None:
        """The manifest, replaced atomically (a reader never sees half of one)."""
        data = {
            "ge_dump_manifest": _FORMAT,
            "run": self.run_id,
            "pid": os.getpid(),
            "started": self.started,
            "complete": self.complete,
            "files": [{"name": name, "size": size, "mtime_ns": mtime}
                      for name, (size, mtime) in self._files.items()],
            "writing": self._writing,
        }
        fd, name = tempfile.mkstemp(dir=self.directory, prefix=f".{MANIFEST_NAME}.",
                                    suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(data, out, indent=1)
                out.write("\n")
            os.chmod(name, new_file_mode(self.manifest))  # (mkstemp: 0600 whatever the umask)
            os.replace(name, self.manifest)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(name)
            raise

    def _previous_files(self) -> list[Path]:
        """The files the folder's manifest lists that are still as that run left them, or
        as being written (by a run killed while writing them: a live one holds the lock
        while it writes); `CommandLineError` (GE1701) for a manifest ge cannot read, or a
        file named like a dump that it does not list so."""
        if not self.directory.is_dir():
            return []
        listed, written = self._listed()
        removable: list[Path] = []
        foreign: list[str] = []
        with os.scandir(self.directory) as entries:
            for entry in entries:
                if not is_dump_file(entry.name):
                    continue
                path = self.directory / entry.name
                if entry.is_file(follow_symlinks=False) and (
                        entry.name in written or listed.get(entry.name) == _stamp(path)):
                    removable.append(path)
                else:
                    foreign.append(entry.name)
        if foreign:
            foreign.sort()
            raise CommandLineError(
                f"cannot dump graphs to {self._where}: it holds {len(foreign)} file(s) "
                f"named like ge's dumps that no dump manifest there ({MANIFEST_NAME}) lists "
                f"as written by ge and unchanged since ({first_and_more(foreign)}): this "
                "run's dumps would mix with them, or overwrite them; move them (an older "
                "ge's dumps, or dumps changed since, can be deleted), or dump into another "
                "folder", path=str(self.directory))
        return removable

    def _listed(self) -> tuple[dict[str, tuple[int, int]], set[str]]:
        """What the folder's manifest lists (file name -> size and modification time), and
        the names it lists as being written; nothing when there is none."""
        try:
            text = self.manifest.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}, set()
        except OSError as err:
            return self._unreadable(err.strerror or type(err).__name__)
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("ge_dump_manifest") != _FORMAT:
                raise ValueError("it is not ge's")
            listed: dict[str, tuple[int, int]] = {}
            for item in data["files"]:
                name, size, mtime = item["name"], item["size"], item["mtime_ns"]
                if not (isinstance(name, str) and is_dump_file(name)
                        and isinstance(size, int) and isinstance(mtime, int)):
                    raise ValueError(f"it lists {name!r}")
                listed[name] = (size, mtime)
            written = data.get("writing", [])  # (absent: a ge from before it was written)
            if not isinstance(written, list):
                raise ValueError(f"its writing is {written!r}")
            for name in written:
                if not (isinstance(name, str) and is_dump_file(name)):
                    raise ValueError(f"it lists {name!r}")
        except (ValueError, KeyError, TypeError) as err:
            return self._unreadable(str(err) or type(err).__name__)
        return listed, set(written)

    def _unreadable(self, reason: str) -> NoReturn:
        raise CommandLineError(
            f"cannot dump graphs to {self._where}: {self.manifest} is not a dump manifest "
            f"ge can read ({reason}), so ge cannot tell which files there an earlier run "
            "wrote; move it, or dump into another folder", path=str(self.directory))


def warn_taken_over(directory: Path, owner: dict[str, Any]) -> None:
    """The `CompileWarning` of a run whose folder another run took over: it stops dumping."""
    other = (f"another compilation (pid {owner.get('pid')}, started {owner.get('started')})"
             if owner else f"something else (its {MANIFEST_NAME} is not this run's)")
    warn_user(CompileWarning(
        f"stopped dumping graphs to {directory}: {other} dumps into it now and replaced this "
        "compilation's dumps; dump each compilation into its own folder"))
