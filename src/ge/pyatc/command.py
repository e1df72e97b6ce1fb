"""`pyatc`'s command line (`ge.pyatc`): GE's `atc` over `ge.compile`, for scripts written
for atc.

    pyatc --model=net.onnx --framework=5 --output=out [--input_shape="x:1,3,224,224"]
          [--log=error|warning|info|debug|null] [--fusion_switch_file=PATH]

compiles the ONNX model `net.onnx` with the built-in passes and the plugins of
`ASCEND_GE_PY_PASS_PATH` (and entry points) and writes `out.onnx`. Only ONNX is compiled
(`--framework=5`); another framework is an error. `--input_shape` sets input shapes
before compiling (static dims too, as atc does). Errors are one line, `pyatc: [CODE]
message`, with a non-zero exit status, and nothing is written.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from ge.pyatc.atc_flags import add_atc_flags, atc_argv, check_atc_flags
from ge.pyatc.input_shapes import parse_input_shape

__all__ = ["FRAMEWORK_ONNX", "main", "parse_input_shape"]

#: atc's framework numbers: 0 Caffe, 1 MindSpore, 3 TensorFlow, 5 ONNX.
FRAMEWORK_ONNX = "5"
#: The --input_format values atc takes for an ONNX model (the layout of its inputs; ge keeps
#: the model's own layout whatever is given, but a typo is refused as atc refuses it).
ONNX_INPUT_FORMATS = ("NCHW", "ND", "NCDHW")
_LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
               "error": logging.ERROR, "null": None}


class _AtcParser(argparse.ArgumentParser):
    """argparse reading the command line as atc does (`atc_argv`), whose messages quote the
    arguments as the user typed them (`-Model=x`, not the `--Model=x` it read)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.typed: dict[str, str] = {}  # (an argument as read -> as typed, if they differ)

    def parse_typed(self, args: Sequence[str]) -> argparse.Namespace:
        read = atc_argv(args)
        self.typed = {r: a for r, a in zip(read, args, strict=True) if r != a}
        return self.parse_args(read)

    def error(self, message: str) -> NoReturn:
        for read in sorted(self.typed, key=len, reverse=True):
            message = message.replace(read, self.typed[read])
        super().error(message)


def _parser(prog: str) -> _AtcParser:
    parser = _AtcParser(
        prog=prog,
        allow_abbrev=True,  # as atc's getopt_long: `--soc=` is `--soc_version=`
        description="Compile an ONNX model with ge (atc-style flags) and write PREFIX.onnx.",
        epilog="Errors print as one line `pyatc: [CODE] message` with exit status 1.")
    parser.add_argument("--model", default=None, metavar="PATH",  # (required: `main`)
                        help="The ONNX model to compile (required).")
    parser.add_argument("--framework", default=FRAMEWORK_ONNX, metavar="N",
                        help="The model's framework; only 5 (ONNX) is supported (default 5).")
    parser.add_argument("--output", default=None, metavar="PREFIX",
                        help="Write the compiled model to PREFIX.onnx (a trailing .onnx is "
                             "not doubled; missing folders are made). Without it the model "
                             "is compiled, not written.")
    parser.add_argument("--input_shape", default=None, metavar='"NAME:D1,D2,...;NAME2:..."',
                        help="Set input shapes before compiling, as atc does: a size fixes "
                             "a dim, dynamic or static (re-batching); -1 keeps a dynamic dim "
                             "and makes a static one dynamic.")
    parser.add_argument("--log", default="warning", choices=sorted(_LOG_LEVELS),
                        help="What to print on stderr besides errors (default warning; null "
                             "prints no warnings or log).")
    parser.add_argument("--soc_version", default=None, metavar="SOC",
                        help="Accepted for atc compatibility and ignored.")
    parser.add_argument("--input_format", default=None, metavar="FORMAT",
                        help=f"The inputs' layout, one of {', '.join(ONNX_INPUT_FORMATS)} "
                             "as atc takes for ONNX; checked, then ignored: an ONNX model "
                             "keeps its own layout.")
    parser.add_argument("--fusion_switch_file", default=None, metavar="PATH",
                        help='GE\'s fusion switch file: {"Switch": {"GraphFusion": '
                             '{"PassName": "off"}}} ("on" runs a pass off by default).')
    add_atc_flags(parser)
    return parser


def _check_output(graph: object, model: Path, output: Path) -> list[Path]:
    """Refuse (ModelSaveError, GE1104) an output pyatc could not write: a folder, the model
    itself, or in a folder that neither exists nor can be made. The folders missing above
    it are returned, outermost first: pyatc makes them once the model is compiled, as atc
    makes its output's folder (`--output=build/om/model` in a fresh checkout). The model
    itself is said in pyatc's terms: `ge compile`'s `--overwrite-input` has no pyatc
    counterpart: pyatc never overwrites its input."""
    from ge.errors import ModelSaveError
    from ge.graph import Graph
    from ge.graph.save_target import check_save_target

    assert isinstance(graph, Graph)
    missing = _missing_folders(output)
    if missing:
        _check_creatable(output, missing[0])
        return missing  # (nothing there yet: neither a folder nor the model)
    check_save_target(graph, output, overwrite_input=True)  # the folder: ge's own message
    try:
        check_save_target(graph, output)
    except ModelSaveError as err:
        raise ModelSaveError(
            f"cannot save to {output}: it is the model being compiled ({model}); pyatc "
            "never overwrites its input, give --output another prefix",
            path=str(output)) from err
    return []


def _missing_folders(output: Path) -> list[Path]:
    """The folders above `output` that do not exist, outermost first (none for a file in
    an existing folder, or in the current one). `..` is read as `mkdir -p` reads it, after
    the folder before it: `new/x/../m` makes `new` and `new/x`."""
    missing: list[Path] = []
    folder = output.parent
    while str(folder) not in ("", ".") and folder != folder.parent and not os.path.lexists(
            folder):
        missing.append(folder)
        folder = folder.parent
    return [f for f in reversed(missing) if f.name != ".."]


def _check_creatable(output: Path, outermost: Path) -> None:
    """Refuse (ModelSaveError, GE1104) folders that cannot be made: the existing path they
    would be made in is not a folder, or one pyatc may not write to, or a name is longer
    than the file system takes."""
    from ge.errors import ModelSaveError

    parent = outermost.parent if str(outermost.parent) else Path(".")
    why = None
    if not parent.is_dir():  # (a file, or a link to nothing)
        why = f"{parent} is not a folder"
    elif not os.access(parent, os.W_OK | os.X_OK):
        why = f"permission denied to make folder {outermost}"
    else:
        try:
            longest = os.pathconf(parent, "PC_NAME_MAX")
        except (OSError, ValueError):
            longest = 255
        too_long = [part for part in (*output.relative_to(parent).parts,) if
                    len(os.fsencode(part)) > longest]
        if too_long:
            why = f"File name too long ({too_long[0][:24]}...: over {longest} bytes)"
    if why is not None:
        raise ModelSaveError(f"cannot save to {output}: {why}", path=str(output))


def _save_making_folders(result: Any, output: Path, missing: list[Path]) -> None:
    """Save `result` to `output`, first making the `missing` folders; if that or saving
    fails, the folders made are removed again (nothing is left of a failed run), and a
    folder the system refuses to make is ModelSaveError (GE1104), as saving's own are."""
    from ge.errors import ModelSaveError

    made: list[Path] = []
    try:
        for folder in missing:
            if os.path.lexists(folder):  # (made as the parent of a `..` before it)
                continue
            try:
                folder.mkdir()
            except OSError as exc:
                raise ModelSaveError(f"cannot save to {output}: cannot make folder {folder}: "
                                     f"{exc.strerror or exc}", path=str(output)) from exc
            made.append(folder)
        result.save(output)
    except BaseException:
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()  # (only while empty)
        raise


def _check_output_prefix(prefix: str) -> None:
    """Refuse (CommandLineError, GE1701, before any work) an --output prefix that names no
    file: one ending with a path separator (`--output=out/` wrote the hidden file
    `out/.onnx`), an existing folder, `.` or `..`, or nothing (`--output=`, `out/.onnx`)."""
    from ge.errors import CommandLineError

    separators = tuple(filter(None, ("/", os.sep, os.altsep)))
    name = prefix
    for separator in separators:
        name = name.rsplit(separator, 1)[-1]  # the last part, as written
    stem = name.removesuffix(".onnx")
    if stem in ("", ".", ".."):
        folder = prefix[:len(prefix) - len(name)] + (stem if stem else "")
        why = ("ends with a path separator" if not name and prefix
               else "names a folder" if stem else "names no file")
    elif os.path.isdir(prefix):  # (False for a name too long)
        folder, why = prefix, "is an existing folder"
    else:
        return
    example = (folder if not folder or folder.endswith(separators) else folder + os.sep) + \
        "model"
    raise CommandLineError(
        f"--output={prefix} {why}: pyatc writes the compiled model to PREFIX.onnx; give a "
        f"file prefix such as {example} (writes {example}.onnx)")


@contextmanager
def _logging(level: int | None) -> Iterator[None]:
    """Log records of `ge` on stderr at `level` (none for None) while compiling."""
    logger = logging.getLogger("ge")
    saved = (logger.level, logger.propagate)
    handler: logging.Handler = (logging.StreamHandler(sys.stderr) if level is not None
                                else logging.NullHandler())
    handler.setFormatter(logging.Formatter("pyatc: %(levelname)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level if level is not None else logging.CRITICAL + 1)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def _run(ns: argparse.Namespace, log: logging.Logger) -> None:
    from ge.errors import CommandLineError, CompileWarning, GeError, model_file_named
    from ge.passes.source import warn_user
    from ge.pyatc.input_shapes import (
        ShapeChange,
        check_recomputed,
        compile_error,
        refine_output_shapes,
        set_input_shapes,
    )

    framework = str(ns.framework).strip()
    if framework != FRAMEWORK_ONNX:
        raise CommandLineError(f"framework {framework} is not supported: ge compiles ONNX "
                               "models (--framework=5)")
    if ns.input_format and ns.input_format not in ONNX_INPUT_FORMATS:  # (empty: the default)
        raise CommandLineError(  # (atc's E10001, in its words; case counts, as in atc)
            f"invalid value {ns.input_format!r} for --input_format: the value must be "
            f"{', '.join(ONNX_INPUT_FORMATS[:-1])} or {ONNX_INPUT_FORMATS[-1]} in an ONNX "
            "model")
    if ns.output is not None:
        _check_output_prefix(str(ns.output))
    shapes = parse_input_shape(ns.input_shape) if ns.input_shape is not None else None
    import ge
    import ge.graph
    from ge.cli.progress import compile_progress
    from ge.compiler.fusion_switch import OPTION_FUSION_SWITCH_FILE
    from ge.compiler.report import node_counts

    model = Path(ns.model)
    output = None
    if ns.output is not None:
        prefix = str(ns.output)
        output = Path(prefix if prefix.endswith(".onnx") else f"{prefix}.onnx")
    # Closed once written (`Graph.close`; else the cyclic collector frees it at the end of
    # the process, after the command); compiled in place: `result.graph` is this graph.
    with contextlib.closing(ge.graph.load(model)) as graph:
        log.info("loaded %s: %s", model, node_counts(graph).text())
        change = ShapeChange()
        if shapes:
            change = set_input_shapes(graph, shapes)
            log.info("input shapes set: %s", shapes)
        missing: list[Path] = []
        if output is not None:
            missing = _check_output(graph, model, output)  # refused before compiling
        with compile_progress(str(model)) as progress:
            options = ({OPTION_FUSION_SWITCH_FILE: ns.fusion_switch_file}
                       if ns.fusion_switch_file is not None else None)
            with model_file_named(model):  # (given the graph: the errors name MODEL here)
                try:
                    result = ge.compile(graph, observers=progress.observers, options=options)
                except GeError as err:
                    raise compile_error(err, change, model, options)  # noqa: B904
        if shapes:
            refine_output_shapes(result.graph, change)
            unchecked = check_recomputed(model, result.graph, change)
            if unchecked is not None:
                warn_user(CompileWarning(unchecked))
        report = result.report
        for record in report.records:
            log.debug("pass %s (%s) on %s: %s, nodes %d -> %d", record.pass_name, record.stage,
                      record.graph_name, record.outcome.value, record.nodes_before,
                      record.nodes_after)
        counts = report.counts_before.change(report.counts_after)  # as `ge compile` says them
        log.info("compiled in %.1f ms: %d pass run(s); %s", report.seconds * 1000,
                 len(report.records), counts)
        if output is not None:
            _save_making_folders(result, output, missing)
    if output is not None:
        print(f"pyatc: run success: wrote {output}; {counts}")
    else:
        print(f"pyatc: run success: compiled {model}; {counts}; no --output, nothing written")


#: What compiling imports, imported with SIGINT and SIGTERM held before any work (onnx's
#: and numpy's native inits among them: a signal inside crashed the process or was lost,
#: trial A; `ge._signals.imported_held`).
_IMPORTS = ("numpy", "onnx", "ge.cli.output", "ge.cli.progress", "ge.session.compilation",
            "ge.compiler.builtin")


def main(cmdline_argv0: str | None = None, args: Sequence[str] | None = None) -> int:
    """Run pyatc with `args` (default: sys.argv[1:]); `cmdline_argv0` names the program in
    messages. Returns the exit status: 0 on success, 1 for an error, 2 for bad usage, 130 or
    143 ended by Ctrl-C or SIGTERM."""
    from ge._signals import ended_unwritten, held_signals, imported_held, terminated_as_interrupt

    prog = Path(cmdline_argv0).name if cmdline_argv0 else "pyatc"
    try:
        with terminated_as_interrupt():
            with held_signals():  # from the start to the imports' end: delivered after
                parser = _parser(prog)
                ns = parser.parse_typed(list(args) if args is not None else sys.argv[1:])
                imported_held(_IMPORTS)
            from ge.cli.output import command_output

            level = _LOG_LEVELS[ns.log]
            show_warnings = level is not None and level <= logging.WARNING
            with _logging(level), command_output(prog, debug=False,
                                                 show_warnings=show_warnings):
                check_atc_flags(ns)  # (`--mode=1` needs no --model: said first)
                if ns.model is None:
                    parser.error("the following arguments are required: --model")
                _run(ns, logging.getLogger("ge.pyatc"))
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
    except KeyboardInterrupt as interrupt:  # before the command's output handling began
        return ended_unwritten(prog, interrupt)
    return 0
