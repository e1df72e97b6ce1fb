"""Graph dumps during a compilation: GE's `DUMP_GE_GRAPH` variables, or `--dump DIR`.

`DUMP_GE_GRAPH` 1 writes each dump as ONNX and as readable text; 2 and 3 write the readable
text only (it carries no weight values). `DUMP_GRAPH_FORMAT` (GE's `|`-separated
`ge_proto|onnx|readable`; ONNX replaces GE's proto, so `ge_proto` and `onnx` both mean the
ONNX file) chooses among the two when set. `DUMP_GRAPH_PATH` is the folder (default: the
current one). `DUMP_GRAPH_LEVEL` picks what is dumped: 1 the input and every step, plus the
graph after every pass that changed it; 2 (the default) the input and every step; 3 only the
final graph; 4 only the input; or `|`-separated substrings of step and pass names. Files are
named `ge_<seq>_<step>[_<pass>]` so that they sort in pipeline order.

A substring that is part of no step's name ("Input" included) nor of any pass's of the
compilation (built-in or plugin: checked once the plugins are loaded, `check_level_names`)
is a `CompilerOptionError` (GE1202) listing what a level may be, not a compilation that
dumps nothing: `--dump-level abc` (a typo) dumped nothing and said nothing.

The folder is checked when the dumper is made, before anything is compiled: an existing
file in its place, a path through a file, or a folder that cannot be created or written is
a `CommandLineError` (GE1701, the code of every unusable dump target), not an OSError from
the middle of the pipeline. The check creates what `--dump` would create (the missing
folders and one file) and removes it again, so a refused or failing compilation leaves
nothing behind.

One run's dumps never mix with another's: each run lists the files it writes in the
folder's manifest, and replaces the previous run's dumps when its pipeline starts, never a
file ge did not write (`ge.compiler.dump_manifest`, which says why a manifest and not a
subfolder per run). Each dump is written holding the folder's lock, after checking that
the folder is still this run's (`DumpRun.writing`): two compilations dumping into one
folder at once never interleave their changes to it (`ge.compiler.dump_lock`).

A snapshot of a graph that has not changed since the previous snapshot of the compilation
(`dumped_state`: the hierarchy's mutation count and the model fields around it, which
change without one) is not serialised again: its files are hard links to the previous
snapshot's (a copy where the filesystem refuses links), so every step still has its file,
as users and GE's tools expect, at no cost in time or disk (a 150,001-node model spent 55 s
of a 95 s compilation writing four snapshots identical to the one before). Every file is
written under a temporary name and renamed into place, never written through an existing
name, which may be a link shared with another file. The time spent dumping is
`GraphDumper.seconds` (the report's `dump_seconds`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ge.compiler.arguments import described
from ge.compiler.dump_manifest import DumpRun, warn_taken_over
from ge.compiler.scheduler import PIPELINE, PipelineObserver, step_label
from ge.errors import CommandLineError, CompilerOptionError, CompilerOptionTypeError, GeError
from ge.graph.external_data import SharedExternalData
from ge.graph.model_io import save_model
from ge.graph.save_target import new_file_mode
from ge.graph.types import DumpFormat

if TYPE_CHECKING:
    from ge.compiler.report import PassRunRecord
    from ge.graph import Graph

__all__ = ["DUMP_STEP_NAMES", "ENV_DUMP_GE_GRAPH", "ENV_DUMP_GRAPH_FORMAT", "ENV_DUMP_GRAPH_LEVEL",
           "ENV_DUMP_GRAPH_PATH",
           "GraphDumper", "check_dump_target", "dump_target_problem", "dumped_state",
           "environment_dump_folder"]

ENV_DUMP_GE_GRAPH = "DUMP_GE_GRAPH"
ENV_DUMP_GRAPH_PATH = "DUMP_GRAPH_PATH"
ENV_DUMP_GRAPH_LEVEL = "DUMP_GRAPH_LEVEL"
ENV_DUMP_GRAPH_FORMAT = "DUMP_GRAPH_FORMAT"
#: GE's dump formats, and whether each is the ONNX file (else the readable text).
_FORMATS = {"ge_proto": True, "onnx": True, "readable": False}

_LEVELS = ("1", "2", "3", "4")
_LEVEL_MEANINGS = ("1 (the input, every step, and every pass that changed the graph), 2 (the "
                   "input and every step), 3 (the final graph), 4 (the input)")
#: The names of what level 1 and 2 dump besides the passes, in pipeline order.
DUMP_STEP_NAMES = ("Input", *(step_label(step) for step in PIPELINE))


#: The files one snapshot may consist of, by suffix after its stem.
_SUFFIXES = (".txt", ".onnx", ".onnx.skipped.txt")


def dumped_state(graph: Graph) -> tuple[object, ...]:
    """What a dump of `graph`'s model is made of, as a value equal for two calls exactly
    when nothing a dump writes changed in between.

    The hierarchy's `mutation_count` covers the nodes, edges, attributes, descs (inferred
    shapes and types, hence the value_info written) and names of the root graph and every
    body. The model's fields around the graph change without it (`ModelInfo`: a pass may
    write `graph.opset_imports`, and the scheduler drops the imports the passes emptied
    before final validation), so they are part of the value; the model-local functions
    by their bytes, as a `FunctionProto` may be changed in place.
    """
    root = graph.root_graph()
    model = root.model
    return (
        root.mutation_count, root.name, tuple(model.opset_imports.items()),
        tuple((o.domain, o.version) for o in model.opset_source), model.ir_version,
        model.producer_name, model.producer_version, model.domain, model.model_version,
        model.doc_string, tuple(model.metadata_props.items()), model.typed_values,
        tuple(f.SerializeToString() for f in model.functions),
        None if model.extras is None else model.extras.SerializeToString(),
    )


@dataclass(frozen=True)
class _Snapshot:
    """The last snapshot written: the graph and its `dumped_state` then, its file stem, and
    the identity (device, inode) of each of its files by suffix, so that a link is only
    ever made to the file this run wrote."""

    graph: Graph
    state: tuple[object, ...]
    stem: str
    files: dict[str, tuple[int, int]]


def _link_or_copy(source: Path, target: Path) -> None:
    """Make `target` the file `source` is: a hard link, else (a filesystem without them,
    or at its limit of links) a copy; put in place by a rename, so that an existing
    `target` is replaced, never written through."""
    temp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        try:
            os.link(source, temp)
        except OSError:
            shutil.copyfile(source, temp)
            os.chmod(temp, new_file_mode())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _write_text(target: Path, text: str) -> None:
    """Write `text` to `target` under a temporary name, then rename it into place."""
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(name, new_file_mode())  # (mkstemp: 0600 whatever the umask)
        os.replace(name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise


def _probe(directory: Path, missing: list[Path]) -> str | None:
    """Create the `missing` folders (outermost first) and a file in `directory`, then
    remove them again; the OSError's reason when one of those cannot be done."""
    created: list[Path] = []
    try:
        for folder in reversed(missing):
            folder.mkdir()
            created.append(folder)
        fd, name = tempfile.mkstemp(dir=directory, prefix=".ge_dump_probe_")
        os.close(fd)
        os.unlink(name)
    except OSError as err:
        reason = err.strerror or type(err).__name__
        if len(created) < len(missing):
            return f"the folder cannot be created ({reason})"
        return f"the folder cannot be written ({reason})"
    finally:
        for folder in reversed(created):
            with contextlib.suppress(OSError):
                folder.rmdir()
    return None


def dump_target_problem(directory: str | os.PathLike[str]) -> str | None:
    """Why graphs cannot be dumped into `directory`, or None when they can.

    The folder may be missing (it is created with its parents, as the dumper does); it may
    not be an existing file, lie under a file, or be a folder that cannot be created or
    written. Asked by trying it: nothing created by the check is left behind.
    """
    target = Path(directory)
    if os.path.lexists(target) and not target.is_dir():
        return "it exists and is not a folder"
    missing: list[Path] = []
    existing = target
    while not os.path.lexists(existing):
        missing.append(existing)
        if existing.parent == existing:
            break
        existing = existing.parent
    if existing not in missing and not existing.is_dir():
        return f"{existing} is not a folder"
    return _probe(target, missing)


def check_dump_target(directory: str | os.PathLike[str], *, source: str | None = None) -> None:
    """Refuse (`CommandLineError`, GE1701) a dump folder graphs cannot be written to;
    `source` names where the folder was given (an environment variable) in the message."""
    problem = dump_target_problem(directory)
    if problem is not None:
        given = f" ({source})" if source else ""
        raise CommandLineError(f"cannot dump graphs to {directory}{given}: {problem}",
                               path=str(directory))


def _environment_formats(mode: str, value: str) -> tuple[bool, bool]:
    """(ONNX files, readable text) for `DUMP_GE_GRAPH` `mode` and `DUMP_GRAPH_FORMAT`
    `value`: unset, both at mode 1 and the text only at 2 and 3. ONNX files hold the
    weights, which modes 2 and 3 leave out: asked for there beside the text, the text is
    dumped alone (with a warning); asked for alone, it is a `CompilerOptionError`."""
    value = value.strip()
    if not value:
        return mode == "1", True
    parts = [part.strip() for part in value.split("|") if part.strip()]
    unknown = [part for part in parts if part not in _FORMATS]
    if unknown or not parts:
        raise CompilerOptionError(
            f"{ENV_DUMP_GRAPH_FORMAT} must be '|'-separated formats among ge_proto, onnx and "
            f"readable (ge_proto and onnx both dump ONNX files: ONNX replaces GE's formats), "
            f"got {value!r}")
    with_onnx = any(_FORMATS[part] for part in parts)
    with_text = any(not _FORMATS[part] for part in parts)
    if with_onnx and mode != "1":
        why = (f"{ENV_DUMP_GRAPH_FORMAT} {value!r} asks for ONNX files, which hold the "
               f"weights, but {ENV_DUMP_GE_GRAPH}={mode} dumps without them")
        if not with_text:
            raise CompilerOptionError(f"{why}: set {ENV_DUMP_GE_GRAPH}=1, or add readable to "
                                      f"{ENV_DUMP_GRAPH_FORMAT}")
        import warnings

        from ge.errors import CompileWarning

        warnings.warn(CompileWarning(f"{why}: only the readable text is dumped"),
                      stacklevel=3)
        with_onnx = False
    return with_onnx, with_text


def environment_dump_folder(environ: Mapping[str, str] | None = None) -> str | None:
    """The folder GE's variables dump into (`DUMP_GRAPH_PATH`, else the current one), or
    None when `DUMP_GE_GRAPH` is unset or 0."""
    env = os.environ if environ is None else environ
    if env.get(ENV_DUMP_GE_GRAPH, "").strip() in ("", "0"):
        return None
    return env.get(ENV_DUMP_GRAPH_PATH) or "."


class GraphDumper(PipelineObserver):
    """Writes the graph after pipeline steps (and passes) into one folder.

    Making one checks the level (CompilerOptionError, GE1202), then the folder
    (`check_dump_target`, GE1701) and what earlier runs left in it (`DumpRun.check`, GE1701:
    a file named like a dump that no manifest lists as ge's), so that a dump that could not
    be written, or would mix with other files, is refused before the compilation starts;
    `source` names where the folder came from in those errors, `level_source` where the
    level came from (an environment variable). The names of a level
    are checked against the compilation's passes with `check_level_names` once its plugins
    are loaded.
    """

    def __init__(self, directory: str | os.PathLike[str], *, level: str = "2",
                 with_onnx: bool = True, with_text: bool = True, source: str | None = None,
                 level_source: str | None = None) -> None:
        if not isinstance(level, str):  # `.strip()` of an int: an AttributeError
            raise CompilerOptionTypeError(
                "dump level must be a str ('1' to '4' or '|'-separated names), got "
                f"{described(level)}")
        level = level.strip() or "2"
        if not level or ("|" not in level and level.isdigit() and level not in _LEVELS):
            raise CompilerOptionError(
                f"{level_source or 'dump level'} must be 1, 2, 3, 4 or '|'-separated names, "
                f"got {level!r}")
        # (a name never holds a blank: "InferShape | MyPass" means what it says)
        names = [] if level in _LEVELS else [p.strip() for p in level.split("|") if p.strip()]
        self._what = f"{level_source} {level!r}" if level_source else f"dump level {level!r}"
        if level not in _LEVELS and not names:
            raise CompilerOptionError(
                f"{self._what} names nothing: a level is {_LEVEL_MEANINGS}, or '|'-separated "
                f"parts of the names of steps ({', '.join(DUMP_STEP_NAMES)}) and passes")
        check_dump_target(directory, source=source)
        self._run = DumpRun(Path(directory), source=source)
        self._run.check()
        self.directory = Path(directory)
        self.level = level
        self.with_onnx = with_onnx
        self.with_text = with_text
        self.written: list[Path] = []
        self._names = names
        self._seq = 0
        self._shared: SharedExternalData | None = None
        self._stopped = False  # another run took the folder over: this one dumps no more
        self._last: _Snapshot | None = None  # the snapshot an unchanged graph links to
        #: Seconds spent dumping (writing, linking, replacing the previous run's dumps):
        #: the report's `dump_seconds`.
        self.seconds = 0.0
        #: Snapshots made as links to the previous one's files (the graph had not changed).
        self.linked = 0

    def check_level_names(self, pass_names: Iterable[str]) -> None:
        """Refuse (CompilerOptionError, GE1202) a level naming something that is part of
        no step's name nor of any of `pass_names` (the compilation's passes, plugins
        included): it would dump nothing. The error lists what a level may be, with the
        closest name to each unknown one."""
        passes = sorted(set(pass_names))
        names = [*DUMP_STEP_NAMES, *passes]
        unknown = [part for part in self._names if not any(part in name for name in names)]
        if not unknown:
            return
        import difflib

        guesses = []
        for part in unknown:
            close = difflib.get_close_matches(part, names, n=1, cutoff=0.6)
            guesses.append(f"{part!r} (did you mean {close[0]}?)" if close else repr(part))
        raise CompilerOptionError(
            f"{self._what}: {', '.join(guesses)} {'is' if len(unknown) == 1 else 'are'} part "
            "of no step or pass name, so nothing would be dumped for "
            f"{'it' if len(unknown) == 1 else 'them'}; a level is {_LEVEL_MEANINGS}, or "
            "'|'-separated parts of these names: steps "
            f"{', '.join(DUMP_STEP_NAMES)}; passes {', '.join(passes) or 'none'}")

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> GraphDumper | None:
        """The dumper `DUMP_GE_GRAPH` asks for, or None when it is unset or 0."""
        env = os.environ if environ is None else environ
        folder = environment_dump_folder(env)
        if folder is None:
            return None
        mode = env[ENV_DUMP_GE_GRAPH].strip()
        if mode not in ("1", "2", "3"):
            raise CompilerOptionError(f"{ENV_DUMP_GE_GRAPH} must be 1, 2 or 3 (0 or unset: no "
                                      f"dumps), got {mode!r}")
        with_onnx, with_text = _environment_formats(mode, env.get(ENV_DUMP_GRAPH_FORMAT, ""))
        return cls(folder, level=env.get(ENV_DUMP_GRAPH_LEVEL, "2"), with_onnx=with_onnx,
                   with_text=with_text,
                   source=ENV_DUMP_GRAPH_PATH if env.get(ENV_DUMP_GRAPH_PATH) else None,
                   level_source=ENV_DUMP_GRAPH_LEVEL)

    def _wanted(self, name: str) -> bool:
        return any(part in name for part in self._names)

    @contextlib.contextmanager
    def _timed(self) -> Iterator[None]:
        """Add the time the block takes to `seconds`."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds += time.perf_counter() - start

    def step_started(self, index: int, label: str, graph: Graph) -> None:
        with self._timed():
            if index == 0:  # the previous run's dumps go, whatever this one will dump
                self._take_over()
            if index == 0 and (self.level in ("1", "2", "4") or self._wanted("Input")):
                self._write(graph, "Input")

    def step_finished(self, index: int, label: str, graph: Graph) -> None:
        with self._timed():
            final = index == len(PIPELINE) - 1
            if self.level in ("1", "2") or (self.level == "3" and final) or self._wanted(label):
                self._write(graph, label)
            if final and self._run.taken and not self._stopped:
                with self._guarded():
                    other = self._run.finish()
                if other is not None:
                    self._stop(other)

    def pass_done(self, records: Sequence[PassRunRecord], graph: Graph) -> None:
        """The model after a pass that changed it, once the pass ran on every graph (a dump
        per body it changed made a model of many If nodes quadratic to dump)."""
        changed = [r for r in records if r.changed]
        if not changed:
            return
        record = changed[0]
        name = f"{record.stage}_{record.pass_name}"
        if record.round:
            name += f"_round{record.round}"
        if len(changed) == 1 and record.graph_path:
            name += f"_{record.graph_path}"  # the one body it changed (its path: unique)
        if self.level == "1" or self._wanted(record.pass_name):
            with self._timed():
                self._write(graph, name)

    def compilation_failed(self, error: BaseException, graph: Graph) -> None:
        """A run that failed after another took its folder over says so, as it would have
        at its next dump: the folder does not show its failure."""
        if self._run.taken and not self._stopped:
            other = None
            with contextlib.suppress(OSError):  # (the failure is what to report)
                other = self._run.lost_to()
            if other is not None:
                self._stop(other)

    def _take_over(self) -> None:
        """Make the folder this run's (`DumpRun.take_over`), once."""
        if not self._run.taken:
            with self._guarded():
                self._run.take_over()

    def _stop(self, owner: dict[str, Any]) -> None:
        """Another compilation (its manifest: `owner`) took the folder over: dump no more
        there, and say so, once."""
        self._stopped = True
        warn_taken_over(self.directory, owner)

    def _write(self, graph: Graph, name: str) -> None:
        """Dump `graph` as `name`, holding the folder, unless another run took it over."""
        self._take_over()
        if self._stopped:
            return
        stem = f"ge_{self._seq:04d}_{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}"
        names = [f"{stem}{suffix}" for suffix in _SUFFIXES]
        if self.with_onnx:
            names.append(self._run.weights_name)
        with self._guarded(), self._run.writing(names) as other:
            if other is not None:
                self._stop(other)
                return
            self._seq += 1
            self._snapshot(graph, stem)

    @contextlib.contextmanager
    def _guarded(self) -> Iterator[None]:
        """The block, an OSError of which is GE1701 (checked up front; the folder changed
        since, or a full disk)."""
        try:
            yield
        except OSError as err:
            reason = err.strerror or type(err).__name__
            raise CommandLineError(f"cannot dump graphs to {self.directory}: {reason}",
                                   path=str(self.directory)) from err

    def _snapshot(self, graph: Graph, stem: str) -> None:
        """The files of one snapshot: links to the previous snapshot's when the graph has
        not changed since (`dumped_state`), else written."""
        last = self._last
        if (last is not None and last.graph is graph and last.state == dumped_state(graph)
                and self._link_files(last, stem)):
            self.linked += 1
            return
        self._last = None  # (a write failing half way leaves nothing to link to)
        self._write_files(graph, stem)
        files: dict[str, tuple[int, int]] = {}
        for suffix in _SUFFIXES:
            with contextlib.suppress(FileNotFoundError):
                st = (self.directory / f"{stem}{suffix}").lstat()
                files[suffix] = (st.st_dev, st.st_ino)
        # (as of after the write: were writing to reorder the node list, the files hold
        # the graph so reordered)
        self._last = _Snapshot(graph, dumped_state(graph), stem, files)

    def _link_files(self, last: _Snapshot, stem: str) -> bool:
        """Make the files of snapshot `stem` links to those of `last`; False (nothing
        made) when one of them is no longer the file this run wrote (removed or replaced:
        another run took the folder over), so that it is written instead."""
        pairs: list[tuple[Path, Path]] = []
        for suffix, identity in last.files.items():
            source = self.directory / f"{last.stem}{suffix}"
            try:
                st = source.lstat()
            except FileNotFoundError:
                return False
            if (st.st_dev, st.st_ino) != identity:
                return False
            pairs.append((source, self.directory / f"{stem}{suffix}"))
        for source, target in pairs:
            _link_or_copy(source, target)
            self.written.append(target)
        return True

    def _write_files(self, graph: Graph, stem: str) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.with_text:
            text = self.directory / f"{stem}.txt"
            _write_text(text, graph.dump_to_stream(DumpFormat.kReadable))
            self.written.append(text)
        if self.with_onnx:
            target = self.directory / f"{stem}.onnx"
            weights = self._weights()
            try:
                save_model(graph, target, shared_data=weights)
            except GeError as err:  # an intermediate graph ONNX cannot hold: say so beside it
                note = self.directory / f"{stem}.onnx.skipped.txt"
                _write_text(note, f"not written as ONNX: {err}\n")
                self.written.append(note)
            else:
                self.written.append(target)
            if weights.path.exists() and weights.path.stat().st_size == 0:
                weights.path.unlink()  # no tensor large enough to go there (yet)
            elif weights.path.exists() and weights.path not in self.written:
                self.written.append(weights.path)

    def _weights(self) -> SharedExternalData:
        """The one data file the ONNX dumps of this compilation share: each weight is
        written there once (a copy per dump made `--dump` about twelve times the model),
        named for this compilation (`DumpRun.weights_name`), so that it is never another
        run's file; made by the first dump that puts a weight there."""
        if self._shared is None:
            self._shared = SharedExternalData(self.directory / self._run.weights_name)
        return self._shared
