"""`ge compile` and `ge dump`: compile a model file with the passes, or look at one.

`ge compile MODEL -o OUT` runs `ge.compile` (built-in passes, plugins from
`ASCEND_GE_PY_PASS_PATH`, entry points and `--pass-path`), verifies the result when asked,
and writes OUT (and `--report FILE`) only when everything succeeded. Targets that cannot be
written (a missing folder, OUT being MODEL, an unwritable report) are refused before
compiling. Errors are one line with their code (JSON with `--json`); warnings are
`ge: warning: ...` lines.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from ge.cli.compile_report import builtins_not_in, print_compile_result, result_payload
from ge.cli.output import CommandOutput, command_output
from ge.cli.output_files import (
    DASH_IS_NO_STDOUT,
    check_not_read,
    check_output_folder,
    file_target,
    files_read,
    same_file,
    write_json_atomically,
)
from ge.errors import CommandLineError, CompileWarning, GeError, model_file_named

if TYPE_CHECKING:
    from ge.session.compile_arguments import VerifyNames
    from ge.session.hints import CustomOpHint, FunctionHint, OpsetHint, UnverifiedHint

__all__ = ["compile_command", "dump_command", "parse_options",
           "print_compile_result", "result_payload"]


def _pairs(pairs: Sequence[str], param_hint: str, what: str, value_name: str,
           *, last: bool = False) -> dict[str, str]:
    """`what=value_name` strings as a mapping, split at the first `=` (at the last with `last`);
    a usage error for a string without `=` or `what`, and for a `what` given twice: the
    command line holds one value of each, and two are a mistake (which one did the user
    mean?), not an override."""
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.rpartition("=") if last else pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not {what}={value_name}", param_hint=param_hint)
        if key in options:
            raise click.BadParameter(
                f"{key!r} given twice ({key}={options[key]} and {pair}): give each {what} "
                "once", param_hint=param_hint)
        options[key] = value
    return options


def parse_options(pairs: Sequence[str], param_hint: str = "--option") -> dict[str, str]:
    """`KEY=VALUE` strings as a mapping, split at the first `=` (a value may hold one: a
    path); a usage error for anything else, and for a KEY given twice."""
    return _pairs(pairs, param_hint, "KEY", "VALUE")


def parse_dims(pairs: Sequence[str], inputs: Path | None) -> dict[str, int]:
    """`--dims NAME=SIZE` strings as sizes of symbolic dims of generated inputs, split at
    the last `=`: a size never holds one, a dim's name may (ONNX allows any `dim_param`,
    `a=b`). A usage error for anything else: no `=`, a size that is not an int >= 0, a
    NAME given twice (two sizes for one dim), or `--inputs` given, so nothing is
    generated."""
    if pairs and inputs is not None:
        raise click.BadParameter("sizes the dims of generated inputs: not with --inputs",
                                 param_hint="--dims")
    dims: dict[str, int] = {}
    for name, size in _pairs(pairs, "--dims", "NAME", "SIZE", last=True).items():
        if not size.isdigit():
            raise click.BadParameter(f"{name}={size}: the size must be an int >= 0",
                                     param_hint="--dims")
        dims[name] = int(size)
    return dims


def _check_report_target(report: Path, model: Path, output: Path,
                         read: Sequence[tuple[Path | None, str]] = ()) -> None:
    """Refuse a report target that cannot be written or names another file in use: MODEL,
    OUT or the external data file OUT may get, or a file the command reads (`read`)."""
    check_output_folder(report, "the report")
    check_not_read(report, "the report", [*_model_files(model, output), *read])


def _check_not_dumps(targets: Sequence[tuple[Path | None, str]], dump: Path | None) -> None:
    """Refuse (GE1701) a file the command writes into the folder the graph dumps go to
    (`--dump`, else `DUMP_GRAPH_PATH` or the current folder with `DUMP_GE_GRAPH`) under a
    dump's name: a dump would replace it, or it a dump, and the folder's manifest would
    list it as one."""
    from ge.compiler.dump_manifest import is_dump_file

    dump = dump if dump is not None else _environment_dumps()
    if dump is None:
        return
    for target, what in targets:
        if target is not None and is_dump_file(target.name) and same_file(target.parent, dump):
            raise CommandLineError(
                f"cannot write {what} to {target}: the graph dumps into {dump} write files "
                "named like it (ge_<seq>_<step>...); choose another name or folder",
                path=str(target))


def _environment_dumps() -> Path | None:
    """The folder GE's DUMP_GE_GRAPH variables dump into, if they are set."""
    from ge.compiler.dumping import environment_dump_folder

    folder = environment_dump_folder()
    return None if folder is None else Path(folder)


def _model_files(model: Path, output: Path) -> list[tuple[Path | None, str]]:
    """MODEL, OUT and OUT's external data file (`OUT.data`, which --external-data or a
    large model writes; beside the file OUT links to, named after it, when OUT is a
    symbolic link), as what a report or page must not replace."""
    from ge.graph.save_target import data_file_of

    return [(model, "the model"), (output, "the output model"),
            (data_file_of(output), "the output model's external data file")]


# -- ge compile -------------------------------------------------------------------------------


class _ModeChoice(click.Choice):
    """The choices of a flag whose value may be left out (`--verify` alone is `final`).
    Click takes the next word as the value whatever it is, so `--verify MODEL` reads MODEL
    as a mode: the error then says how to write it."""

    def fail(self, message: str, param: click.Parameter | None = None,
             ctx: click.Context | None = None) -> NoReturn:
        flag = param.opts[0] if param is not None and param.opts else "the flag"
        super().fail(f"{message} To use {flag} without a value, put it after MODEL or "
                     f"write {flag}=VALUE.", param, ctx)


def _given(ctx: click.Context, *names: str) -> list[str]:
    """The flags among `names` (parameter names) that the command line gave."""
    from click.core import ParameterSource

    return [f"--{name}" for name in names
            if ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)]


def _cli_verify_names() -> VerifyNames:
    """`verification_mode`'s words for `ge compile`: its flags, and a usage error (GE1701)."""
    from ge.session.compile_arguments import VerifyNames

    return VerifyNames("--verify", "--inputs", "--dims", CommandLineError)


def _compile(out: CommandOutput, model: Path, output: Path, *, report_path: Path | None,
             read: Sequence[tuple[Path | None, str]],
             pass_paths: tuple[str, ...], options: dict[str, str], verify: str | None,
             inputs: Path | None, rtol: float, atol: float, dump: Path | None,
             dims: dict[str, int] | None = None,
             dump_level: str | None, builtin: bool, disable: tuple[str, ...], check: str,
             on_pass_failure: str, external_data: bool | None, overwrite_input: bool,
             value_info: str, html_path: Path | None = None,
             tolerances_given: Sequence[str] = (), opset: int | None = None,
             enable: tuple[str, ...] = (), inline_functions: bool = False,
             quiet: bool = False, all_passes: bool = False,
             strip_metadata: bool = False, fail_on_warning: bool = False) -> None:
    import ge
    import ge.graph
    from ge.cli.progress import compile_progress
    from ge.session.compile_arguments import check_tolerance, verification_mode

    check_tolerance(rtol, "--rtol")
    check_tolerance(atol, "--atol")
    # ge.compile's rule, in the command line's words (the flags, GE1701)
    mode = verification_mode(verify, inputs_given=inputs is not None, dims_given=bool(dims),
                             tolerances_given=tolerances_given, names=_cli_verify_names())
    if dump_level is not None and dump is None:
        raise CommandLineError("--dump-level needs --dump DIR")
    if dump is not None and not os.path.isdir(dump) and not os.path.isdir(dump.parent):
        raise CommandLineError(f"cannot dump graphs to {dump}: {dump.parent} is not an "
                               "existing folder", path=str(dump))
    check_not_read(output, "the output model", read)
    from ge.graph.save_target import (
        check_data_target,
        check_save_target,
        check_target_path,
        data_file_of,
    )

    check_target_path(output)  # before loading (a large model takes seconds to load)
    if external_data:  # (a data file that is a folder was found only once compiled)
        check_data_target(output, data_file_of(output))
    if report_path is not None:
        _check_report_target(report_path, model, output, read)
    if html_path is not None:
        from ge.cli.html_page import check_page_target

        check_page_target(html_path, [*_model_files(model, output),
                                       (report_path, "the report"), *read])
    _check_not_dumps([*_model_files(model, output)[1:], (report_path, "the report"),
                      (html_path, "the HTML page")], dump)
    out.dumps = dump if dump is not None else _environment_dumps()
    from ge.graph.input_checks import check_model_as_given

    # Every graph of the command is closed (`Graph.close`) when its work ends, failed or
    # not: the cyclic collector would free it at the process's end, after the command.
    with compile_progress(str(model)) as progress, contextlib.ExitStack() as graphs:
        progress.phase("loading")
        graph = ge.graph.load(model)
        graphs.callback(graph.close)
        # (ge.compile checks it too; here the error names the file as given, as ge run's)
        check_model_as_given(graph, str(model))
        check_save_target(graph, output, external_data=external_data,
                          overwrite_input=overwrite_input)
        recorder = None
        if html_path is not None:
            from ge.cli import graph_diff

            # Its `before` is the graph the pipeline starts from (converted, with --opset
            # or --inline-functions; the subtitle's counts are MODEL's, the report's).
            recorder = graph_diff.PassChangeRecorder(graph)
        observers = progress.observers if recorder is None else [*progress.observers,
                                                                   recorder]
        progress.phase("running the model as given for --verify" if mode != "none"
                       else "starting")
        with _working_directory_kept(), _failure_page(html_path, recorder, model, progress):
            result = ge.compile(
                graph, pass_paths=list(pass_paths) or None, options=options or None,
                builtin_passes=builtin, disable=disable, enable=enable, verify=mode,
                inputs=None if inputs is None else inputs.absolute(), dims=dims or None,
                rtol=rtol if "--rtol" in tolerances_given else None,
                atol=atol if "--atol" in tolerances_given else None,
                check=check, on_pass_failure=on_pass_failure,
                dump=None if dump is None else dump.absolute(), dump_level=dump_level,
                observers=observers, value_info=value_info, opset=opset,
                inline_functions=inline_functions)
        graphs.callback(result.graph.close)  # (a converted copy with --opset)
        from ge.passes.stage import PassStage
        from ge.session.hints import (
            custom_op_hints,
            function_hints,
            opset_hints,
            unverified_hints,
        )

        # what the compilation ran (`--disable`, `--enable` and a fusion switch file decided)
        ran = {record.pass_name for record in result.report.records}
        late = {record.pass_name for record in result.report.records
                if str(record.stage) == PassStage.AFTER_ORIGIN_GRAPH_OPTIMIZE.value}
        hints: list[OpsetHint | FunctionHint | CustomOpHint | UnverifiedHint] = [
            *(opset_hints(result.graph, builtins_not_in(ran), ran, late=late)
              if builtin else []),
            *(function_hints(result.graph) if not inline_functions else []),
            *custom_op_hints(result.graph, verified=result.verification is not None,
                             undefined=result.report.undefined_operators),
            *unverified_hints(result.report.passes_that_changed(plugins_only=True),
                              verified=result.verification is not None)]
        described: list[dict[str, Any]] = []

        def describe(data_file: Path | None) -> None:
            """The page and the report of the model about to be renamed into place: written
            before it, so that a failure to write them (a full disk) leaves the previous
            model where it was, as every other failure does. With --fail-on-warning, a
            warning so far (the export's included) fails the command here: nothing is
            written."""
            if fail_on_warning and out.warnings:
                _fail_on(out.warnings, output)
            before = recorder.before if recorder is not None else None
            if html_path is not None and before is not None and recorder is not None:
                from ge.cli import graph_diff, html_page

                progress.phase(f"writing {html_path}")
                change = result.report.counts_before.change(result.report.counts_after)
                html_page.write_page(html_path, html_page.render_page(
                    title=f"ge compile {model.name}",
                    subtitle=f"{model} → {output}; {change}; "
                             f"{len(result.report.records)} pass run(s)",
                    before=before, after=graph_diff.snapshot(result.graph),
                    passes=recorder.changes, labels=("Before", "After")))
                out.wrote(html_path)
            payload = result_payload(result, model=model, output=output,
                                     warnings=out.warnings)
            payload["output_data"] = None if data_file is None else str(data_file)
            payload["hints"] = [dataclasses.asdict(h) | {"text": str(h)} for h in hints]
            if html_path is not None:
                payload["html"] = str(html_path)
            if report_path is not None:
                write_json_atomically(report_path, payload, "the report")
                out.wrote(report_path)
            described.append(payload)

        progress.phase(f"writing {output}")
        with out.writing(output):
            data_file = result.save(output, external_data=external_data,
                                    overwrite_input=overwrite_input, before_commit=describe,
                                    strip_metadata=strip_metadata)
        out.wrote(output)
        out.wrote(data_file)
        _warn_link_elsewhere(output, data_file)
    (payload,) = described
    if out.as_json:
        del payload["warnings"]  # added (complete) when the command ends
        out.result(payload)
    else:
        explain_args = [str(model), *(a for path in pass_paths for a in ("--pass-path", path)),
                        *(["--inline-functions"] if inline_functions else []),
                        *(["--opset", str(opset)] if opset is not None else [])]
        print_compile_result(result, output=output, hints=hints, data_file=data_file,
                             quiet=quiet, explain_args=explain_args,
                             all_passes=all_passes)
        if report_path is not None:
            click.echo(f"wrote report {report_path}")
        if html_path is not None:
            click.echo(f"wrote page {html_path}")


def _fail_on(warnings: Sequence[dict[str, Any]], output: Path) -> None:
    """GE1702 for the warnings a compilation issued, with --fail-on-warning: the first
    (with where it came from), and how many more. Raised before OUT (and its data file and
    page) is written; `--dump`'s graphs were written as the passes ran (trial AL)."""
    from ge.errors import WarningsRaisedError

    first = warnings[0]
    where = f" (at {first['location']})" if first.get("location") else ""
    more = f" (and {len(warnings) - 1} more)" if len(warnings) > 1 else ""
    raise WarningsRaisedError(
        f"the compilation issued {len(warnings)} warning(s) and --fail-on-warning makes "
        f"that a failure; {output} was not written: {first['category']}: "
        f"{first['message']}{where}{more}")


def _warn_link_elsewhere(output: Path, data_file: Path | None) -> None:
    """Warn when OUT is a symbolic link into another folder and a data file was written:
    beside the file the link names, where the model refers to it, but onnx, onnxruntime
    and ge look for it beside the path they are given, so the model opens by its own path,
    not through the link."""
    from ge.graph.save_target import write_destination

    if data_file is None or not os.path.islink(output):
        return
    if same_file(output.parent if str(output.parent) else Path("."), data_file.parent):
        return
    written, _ = write_destination(output)
    warnings.warn(CompileWarning(
        f"{output} links to a file in another folder; its weights went beside that file "
        f"({data_file}), where the model refers to them, but onnx, onnxruntime and ge look "
        f"for them beside the path they are given: open {written}, not the link"),
        stacklevel=2)


@contextlib.contextmanager
def _failure_page(html_path: Path | None, recorder: Any, model: Path,
                  progress: Any) -> Iterator[None]:
    """On a compilation failing once its pipeline started (a pass, a check, verification),
    write the `--html` page anyway, as `--report` records the failure: the graph it started
    from beside the graph as the failure left it (after the passes before it; a failing
    pass's own change rolled back, a pass that verification found wrong kept), with what
    each pass changed, under the error. Not when the page cannot be written (the error
    stays the compilation's)."""
    from ge.cli.graph_diff import snapshot as graph_snapshot

    try:
        yield
    except GeError as err:
        after = None if recorder is None else (
            recorder.failed_at if recorder.failed_at is not None
            else graph_snapshot(recorder.graph)
            # (a converted copy: `ge.compile` closed it, failing)
            if recorder.graph is not None and not recorder.graph.closed else None)
        if html_path is not None and recorder is not None and recorder.before is not None \
                and after is not None:
            from ge.cli import html_page

            try:
                progress.phase(f"writing {html_path}")
                html_page.write_page(html_path, html_page.render_page(
                    title=f"ge compile {model.name}: FAILED",
                    subtitle=f"{model}: {err}; the graph as the failure left it",
                    before=recorder.before, after=after,
                    passes=recorder.changes, labels=("Before", "At the failure")))
            except (GeError, OSError):
                pass
        raise


@contextlib.contextmanager
def _working_directory_kept() -> Iterator[None]:
    """Give back the working directory a pass plugin changed (at import or in a hook): the
    paths of the command line are relative to the one it started in (the output was
    refused as 'not an existing folder' after the whole compilation). A warning says so."""
    start = os.getcwd()
    try:
        yield
    finally:
        now = os.getcwd()
        if now != start:
            os.chdir(start)
            warnings.warn(CompileWarning(
                f"a pass plugin changed the working directory (to {now}); ge changed it back "
                f"to {start}, where the command's paths are"), stacklevel=2)


def _output_file(text: str) -> Path:
    """OUT as a path; GE1104 before any work when it ends with a path separator ("out/"
    names a folder: as a Path it would have been written as a file "out")."""
    from ge.graph.save_target import check_target_spelling

    if text == "-":
        raise CommandLineError(f"-o -: {DASH_IS_NO_STDOUT}", path=text)
    check_target_spelling(text)
    return Path(text)


@click.command("compile")
@click.argument("model", type=click.Path(path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(),  # (str: "out/" kept)
              help="Where to write the compiled model (written only on success).")
@click.option("--pass-path", "pass_paths", multiple=True, metavar="PATH",
              help="A pass plugin file or folder for this compilation (repeatable).")
@click.option("--option", "option_pairs", multiple=True, metavar="KEY=VALUE",
              help="A compiler option, readable by passes (repeatable).")
@click.option("--verify", type=_ModeChoice(["final", "each-pass"]), is_flag=False,
              flag_value="final", default=None,
              help="Run the original and the compiled model on the same inputs and compare "
                   "(plain --verify = final; each-pass also checks after every pass that "
                   "changed the graph).")
@click.option("--inputs", type=click.Path(path_type=Path), default=None, metavar="FILE.npz",
              help="Inputs for verification (one array per input name); implies --verify. "
                   "Default: generated from the input types.")
@click.option("--dims", "dim_pairs", multiple=True, metavar="NAME=SIZE",
              help="Size of the symbolic dim NAME in the generated inputs (default 2; "
                   "repeatable); implies --verify.")
@click.option("--rtol", type=float, default=1e-4, show_default=True,
              help="Relative tolerance of verification (a finite number >= 0); needs "
                   "--verify (or --inputs or --dims, which imply it).")
@click.option("--atol", type=float, default=1e-5, show_default=True,
              help="Absolute tolerance of verification (a finite number >= 0); needs "
                   "--verify (or --inputs or --dims, which imply it).")
@click.option("--report", "report_path", type=click.Path(), callback=file_target,
              default=None,
              metavar="FILE", help="Write the report (and verification) as JSON to FILE.")
@click.option("--html", "html_path", type=click.Path(), callback=file_target,
              default=None,
              metavar="FILE",
              help="Write one self-contained HTML page: the graph before and after, the "
                   "changes, and every pass that changed it.")
@click.option("--dump", type=click.Path(path_type=Path), default=None, metavar="DIR",
              help="Dump the graph around the pipeline's steps into DIR.")
@click.option("--dump-level", default=None, metavar="LEVEL",
              help="What to dump, as DUMP_GRAPH_LEVEL (default 2); needs --dump.")
@click.option("--no-builtin", "no_builtin", is_flag=True,
              help="Run none of the built-in passes (plugins only).")
@click.option("--disable", "disable", multiple=True, metavar="NAME",
              help="Do not run the pass NAME, built-in or plugin (repeatable).")
@click.option("--enable", "enable", multiple=True, metavar="NAME",
              help="Run the built-in pass NAME that is off by default (repeatable; `ge "
                   "passes list` marks them).")
@click.option("--check", type=_ModeChoice(["region", "full", "none"]), is_flag=False,
              flag_value="full", default="region", show_default=True,
              help="Validate what each pass touched (region), the whole graph (full, also "
                   "plain --check) or nothing.")
@click.option("--on-pass-failure", type=click.Choice(["stop", "skip"]), default="stop",
              show_default=True,
              help="stop: a failing pass is an error; skip: roll it back, warn, go on.")
@click.option("--external-data/--no-external-data", default=None,
              help="Force weights into (or out of) a data file beside the output "
                   "(default: only over protobuf's 2 GB limit).")
@click.option("--overwrite-input", is_flag=True,
              help="Allow OUTPUT to be MODEL itself (or its external data file).")
@click.option("--value-info", type=click.Choice(["auto", "all", "none"]), default="auto",
              show_default=True,
              help="Types of intermediate values in OUTPUT: all, none, or auto (all when "
                   "MODEL had any).")
@click.option("--strip-metadata", is_flag=True,
              help="Leave the doc strings and metadata_props of nodes, values, tensors, "
                   "graphs and functions out of OUTPUT (exporters' namespaces and stack "
                   "traces; the model's own stay): a smaller file.")
@click.option("--opset", type=int, default=None, metavar="N",
              help="Convert MODEL to standard opset N first (onnx's version converter), so "
                   "that fusions into newer operators apply (Gelu: 20, RMSNormalization: 23).")
@click.option("--inline-functions", is_flag=True,
              help="Replace every call of a function MODEL defines by its body first, so "
                   "the passes see what it computes (onnx's inliner).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the report (or the error) as JSON on stdout.")
@click.option("-q", "--quiet", is_flag=True,
              help="Print the summary, hints and verification lines without the tables.")
@click.option("--all-passes", is_flag=True,
              help="List every pass run in the pass table, also the built-in passes that "
                   "found nothing (left out by default).")
@click.option("--fail-on-warning", is_flag=True,
              help="Fail (GE1702, nothing written) when the compilation issues a warning.")
def compile_command(model: Path, output: str, pass_paths: tuple[str, ...],
                    option_pairs: tuple[str, ...], verify: str | None, inputs: Path | None,
                    dim_pairs: tuple[str, ...], rtol: float, atol: float, report_path: Path | None,
                    html_path: Path | None, dump: Path | None,
                    dump_level: str | None, no_builtin: bool, disable: tuple[str, ...],
                    enable: tuple[str, ...], check: str, on_pass_failure: str,
                    external_data: bool | None, overwrite_input: bool, value_info: str,
                    strip_metadata: bool, opset: int | None, inline_functions: bool,
                    as_json: bool, quiet: bool, all_passes: bool,
                    fail_on_warning: bool) -> None:
    """Compile MODEL with the pass plugins and write the result to OUTPUT."""
    options = parse_options(option_pairs)
    dims = parse_dims(dim_pairs, inputs)
    given = _given(click.get_current_context(), "rtol", "atol")
    with command_output("ge", as_json=as_json) as out:
        read = files_read(inputs=inputs, pass_paths=pass_paths)  # what no output may replace
        try:
            # (ge.compile is given the graph loaded: the errors about it name MODEL here)
            with model_file_named(model):
                _compile(out, model, _output_file(output), report_path=report_path,
                         read=read, pass_paths=pass_paths, options=options, verify=verify,
                         inputs=inputs, dims=dims, rtol=rtol, atol=atol, dump=dump,
                         dump_level=dump_level, builtin=not no_builtin, disable=disable,
                         check=check, on_pass_failure=on_pass_failure,
                         external_data=external_data, overwrite_input=overwrite_input,
                         value_info=value_info, html_path=html_path,
                         tolerances_given=given, opset=opset, enable=enable,
                         inline_functions=inline_functions, quiet=quiet,
                         all_passes=all_passes, strip_metadata=strip_metadata,
                         fail_on_warning=fail_on_warning)
        except GeError as err:
            if report_path is not None:
                _write_failure_report(out, err, report_path, model, Path(output), read, dump)
            raise


def _write_failure_report(out: CommandOutput, err: GeError, report_path: Path, model: Path,
                          output: Path, read: Sequence[tuple[Path | None, str]],
                          dump: Path | None) -> None:
    """The report of a failed compilation: the error as `--json` prints it, in place of a
    report an earlier run left (a CI job would upload that as this run's). Not when the
    report's own target is what is wrong (a file in use, `read` among them, a dump's name)."""
    try:
        _check_report_target(report_path, model, output, read)
        _check_not_dumps([(report_path, "the report")], dump)
        write_json_atomically(report_path, out.failure(err), "the report")
    except (GeError, OSError):
        return  # the compilation's own error is the one to report


# -- ge dump ----------------------------------------------------------------------------------

_DUMP_FORMATS = ("readable", "onnx", "txt")


@click.command("dump")
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(_DUMP_FORMATS), default="readable",
              show_default=True,
              help="readable: one line per node; onnx: ONNX text syntax; txt: protobuf text.")
def dump_command(model: Path, fmt: str) -> None:
    """Print MODEL as text (its IR, as `Graph.dump_to_stream` gives it)."""
    import ge.graph
    from ge.graph import DumpFormat

    formats = {"readable": DumpFormat.kReadable, "onnx": DumpFormat.kOnnx,
               "txt": DumpFormat.kTxt}
    with command_output("ge"):
        with contextlib.closing(ge.graph.load(model)) as graph:  # (see `_compile`)
            text = graph.dump_to_stream(formats[fmt])
        click.echo(text, nl=False)
