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
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from ge.pyatc.atc_flags import add_atc_flags, atc_argv, check_atc_flags

if TYPE_CHECKING:
    from ge.graph import TensorDesc

__all__ = ["FRAMEWORK_ONNX", "main", "parse_input_shape"]

#: atc's framework numbers: 0 Caffe, 1 MindSpore, 3 TensorFlow, 5 ONNX.
FRAMEWORK_ONNX = "5"
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
                        help="Accepted for atc compatibility and ignored: an ONNX model "
                             "keeps its own layout (NCHW, NHWC, ND...).")
    parser.add_argument("--fusion_switch_file", default=None, metavar="PATH",
                        help='GE\'s fusion switch file: {"Switch": {"GraphFusion": '
                             '{"PassName": "off"}}} ("on" runs a pass off by default).')
    add_atc_flags(parser)
    return parser


#: The largest dim ONNX holds (dims are int64).
_MAX_DIM = 2**63 - 1


def parse_input_shape(text: str) -> dict[str, list[int]]:
    """`"x:1,3,224,224;y:2"` as `{"x": [1, 3, 224, 224], "y": [2]}` (CommandLineError for
    anything else: an empty dim, one that is no integer >= -1 or beyond int64, atc's range
    `n1~n2`). The name is what precedes the last `:`; an empty dim list is a scalar."""
    from ge.errors import CommandLineError

    shapes: dict[str, list[int]] = {}
    for item in (part.strip() for part in text.split(";")):
        if not item:
            continue
        name, sep, dims_text = item.rpartition(":")
        if not sep or not name:
            raise CommandLineError(f"--input_shape: {item!r} is not NAME:D1,D2,...")
        parts = [d.strip() for d in dims_text.split(",")] if dims_text.strip() else []
        dims = [_dim(dim, i, name, dims_text) for i, dim in enumerate(parts)]
        if name in shapes:
            raise CommandLineError(f"--input_shape: input {name!r} is given twice")
        shapes[name] = dims
    if not shapes:
        raise CommandLineError(f"--input_shape: {text!r} names no input")
    return shapes


def _dim(dim: str, index: int, name: str, dims_text: str) -> int:
    """Dim `index` of input `name` (`dims_text`) as given, or CommandLineError saying why
    it is none."""
    from ge.errors import CommandLineError

    where = f"dim {index} of input {name!r} ({dims_text.strip()!r})"
    if not dim:
        raise CommandLineError(f"--input_shape: {where} is empty: give every dim, -1 to keep "
                               "one dynamic")
    if "~" in dim:
        raise CommandLineError(
            f"--input_shape: {where} is {dim!r}, a range (atc's n1~n2), which ge does not "
            "support: give -1 to keep the dim dynamic (as the model declares it), or a size "
            "to fix it")
    if not re.fullmatch(r"-?[0-9]+", dim) or int(dim) < -1:
        raise CommandLineError(f"--input_shape: {where} is {dim!r}, not an integer >= -1 "
                               "(-1 keeps a dim dynamic)")
    if int(dim) > _MAX_DIM:
        raise CommandLineError(f"--input_shape: {where} is {dim}, beyond the int64 range of "
                               f"ONNX's dims (at most {_MAX_DIM})")
    return int(dim)


def _set_input_shapes(graph: object, shapes: dict[str, list[int]]
                      ) -> tuple[list[str], list[TensorDesc]]:
    """Set the shapes of the graph's inputs as atc does: a size fixes a dim, static or not
    (re-batching a batch-1 export), and `-1` keeps a dynamic dim as the model declares it
    and makes a static one dynamic. An unknown name or another rank is a CommandLineError.
    Returns the static dims changed, in words (`dim 0 of input 'x' from 1 to 4`), and the
    graph outputs' declarations it set aside: when a static dim changed, they were computed
    from the old shapes, so the compilation gets them without a shape (their element types
    kept) and `_refine_output_shapes` declares what inference gives (or the old one back
    where it gives no rank)."""
    from ge.errors import CommandLineError
    from ge.graph import Graph, Shape, TensorDesc

    assert isinstance(graph, Graph)
    nodes = {node.get_output_names()[0]: node for node in graph.get_data_nodes()}
    unknown = [name for name in shapes if name not in nodes]
    if unknown:
        # "x:1,3 y:4" reads as the input "x:1,3 y": inputs are separated by ';'
        hint = ("; inputs are separated by ';' (\"x:1,3;y:4\")"
                if any(":" in n or n != n.strip() or " " in n for n in unknown) else "")
        raise CommandLineError(
            f"--input_shape: {', '.join(repr(n) for n in unknown)} "
            f"{'is not an input' if len(unknown) == 1 else 'are not inputs'} of the model "
            f"(inputs: {', '.join(nodes) or 'none'}){hint}")
    changed: list[str] = []
    planned: dict[str, list[int | str]] = {}
    for name, dims in shapes.items():
        current = nodes[name].get_output_desc(0).shape
        if current.is_unknown_rank():
            planned[name] = list(dims)
            continue
        if len(current) != len(dims):
            raise CommandLineError(
                f"--input_shape: input {name!r} has rank {len(current)} "
                f"({list(current)}), the shape given has rank {len(dims)} ({dims})")
        planned[name] = []
        for i, (old, new) in enumerate(zip(current, dims)):
            static = isinstance(old, int) and old >= 0
            if static and new != old:
                changed.append(f"dim {i} of input {name!r} from {old} to "
                               f"{'a dynamic dim' if new == -1 else new}")
            planned[name].append(old if new == -1 and not static else new)
    sizes = _named_sizes(nodes, shapes)
    for name, node in nodes.items():  # a named dim fixed in one input is fixed in all
        dims_now = planned.get(name)
        if dims_now is None:
            shape = node.get_output_desc(0).shape
            dims_now = [] if shape.is_unknown_rank() else list(shape)
        if any(isinstance(d, str) and d in sizes for d in dims_now):
            planned[name] = [sizes[d][0] if isinstance(d, str) and d in sizes else d
                             for d in dims_now]
    for name, new_dims in planned.items():
        node = nodes[name]
        desc = node.get_output_desc(0)
        desc.set_shape(new_dims)
        desc.set_origin_shape(new_dims)
        node.update_output_desc(0, desc)
    net_output = graph.get_net_output()
    aside: list[TensorDesc] = []
    if changed and net_output is not None:
        for i in range(net_output.get_inputs_size()):
            declared = net_output.get_input_desc(i)
            aside.append(declared)
            net_output.update_input_desc(i, TensorDesc(Shape.unknown_rank(),
                                                        data_type=declared.data_type))
    return changed, aside


def _named_sizes(nodes: dict[str, Any], shapes: dict[str, list[int]]
                 ) -> dict[str, tuple[int, str]]:
    """The size `shapes` gives each named dim of the inputs (`nodes`), with the input it is
    given in: the model declares one size by one name, so fixing `N` in `x` fixes it in `y`
    too (y stayed `['N', 8]` beside an x of 4, trial A of stop 47). Two sizes for one name
    are a CommandLineError."""
    from ge.errors import CommandLineError

    sizes: dict[str, tuple[int, str]] = {}
    for name, dims in shapes.items():
        current = nodes[name].get_output_desc(0).shape
        if current.is_unknown_rank():
            continue
        for old, new in zip(current, dims):
            if not isinstance(old, str) or new < 0:
                continue
            if old in sizes and sizes[old][0] != new:
                size, where = sizes[old]
                raise CommandLineError(
                    f"--input_shape: dim {old!r} is {size} in input {where!r} and {new} in "
                    f"input {name!r}: the model declares one size by one name")
            sizes.setdefault(old, (new, name))
    return sizes


def _static_dims_note(changed: list[str]) -> str:
    """What to add to a compilation's error after --input_shape changed static dims."""
    return (f"; --input_shape changed {'; '.join(changed)}: the model may compute with the "
            "shape it declares (an export without dynamic axes writes it into Reshape "
            "targets and constants, which then contradict the new one): give the shape it "
            "declares, or export it with dynamic axes")


def _refine_output_shapes(graph: object, aside: Sequence[TensorDesc] = ()) -> None:
    """After fixing input shapes, declare the graph outputs with the shapes inferred for
    them (the model's declared output shapes would keep the old symbolic dims; `aside`, the
    declarations `_set_input_shapes` set aside, are compared instead, and one is declared
    again where inference gives no rank: a typed output without a shape fails onnx's
    checker). A dim
    inference could not tell (-1, or a name it made up: `unk__0`) keeps the declared name
    when the inputs still have it: `-1` keeps an input's dim as declared, so an output
    [N, 8, H, W] stays so, not [4, 8, unk__0, unk__1] (trial A)."""
    from ge.graph import Graph

    assert isinstance(graph, Graph)
    net_output = graph.get_net_output()
    if net_output is None:
        return
    names = {dim for node in graph.get_data_nodes()
             for dim in node.get_output_desc(0).shape if isinstance(dim, str)}
    for i in range(net_output.get_inputs_size()):
        producer, index = net_output.get_in_data_nodes_and_port_indexes(i)
        inferred = producer.get_output_desc(index)
        if inferred.shape.is_unknown_rank():
            if aside:
                net_output.update_input_desc(i, aside[i])
            continue
        declared = aside[i].shape if aside else net_output.get_input_desc(i).shape
        if not declared.is_unknown_rank() and len(declared) == len(inferred.shape):
            dims = [old if isinstance(old, str) and old in names and (
                new == -1 or (isinstance(new, str) and new not in names)) else new
                for old, new in zip(declared, inferred.shape)]
            inferred.set_shape(dims)
            inferred.set_origin_shape(dims)
        net_output.update_input_desc(i, inferred)


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
    an existing folder, or in the current one)."""
    missing: list[Path] = []
    folder = output.parent
    while str(folder) not in ("", ".") and folder != folder.parent and not os.path.lexists(
            folder):
        missing.append(folder)
        folder = folder.parent
    return missing[::-1]


def _check_creatable(output: Path, outermost: Path) -> None:
    """Refuse (ModelSaveError, GE1104) folders that cannot be made: the existing path they
    would be made in is a file, or a folder pyatc may not write to."""
    from ge.errors import ModelSaveError

    parent = outermost.parent if str(outermost.parent) else Path(".")
    if not parent.is_dir():  # (a file, or a link to nothing)
        why = f"{parent} is not a folder"
    elif not os.access(parent, os.W_OK | os.X_OK):
        why = f"permission denied to make folder {outermost}"
    else:
        return
    raise ModelSaveError(f"cannot save to {output}: {why}", path=str(output))


def _save_making_folders(result: Any, output: Path, missing: list[Path]) -> None:
    """Save `result` to `output`, first making the `missing` folders; if saving fails, the
    folders made are removed again (nothing is left of a failed run)."""
    made: list[Path] = []
    try:
        for folder in missing:
            folder.mkdir()
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
    from ge.errors import CommandLineError, GeError, model_file_named

    framework = str(ns.framework).strip()
    if framework != FRAMEWORK_ONNX:
        raise CommandLineError(f"framework {framework} is not supported: ge compiles ONNX "
                               "models (--framework=5)")
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
        changed: list[str] = []
        aside: list[TensorDesc] = []
        if shapes:
            changed, aside = _set_input_shapes(graph, shapes)
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
                    if changed:
                        err.message += _static_dims_note(changed)
                    raise
        if shapes:
            _refine_output_shapes(result.graph, aside)
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
