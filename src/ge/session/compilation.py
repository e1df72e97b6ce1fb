"""`ge.compile`: one compilation from a model to a `CompileResult`, verified if asked.

It lives in `ge.session` because it runs both layers: the compiler (`compile_graph`) and,
for verification, the runtime side of this package.

The model is a path, an `onnx.ModelProto` or a `Graph`. A path or a proto is loaded into a
new graph; a `Graph` is compiled in place inside one transaction, so a failing compilation
gives it back unchanged. Verification runs the original and the compiled model in
`ge.session` on the same inputs; `verify="each-pass"` also runs the graph after every pass
that changed it and names the first one whose outputs differ beyond the tolerance.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, ParamSpec

import onnx

from ge._text import first_and_more
from ge.compiler.arguments import described, flag, name_list
from ge.compiler.dumping import GraphDumper
from ge.compiler.engine import compilation_passes, compile_graph
from ge.compiler.options import parse_options
from ge.compiler.report import CompileReport, StepRecord, model_size
from ge.compiler.scheduler import PipelineObserver, check_modes, observer_list
from ge.compiler.steps import FINAL_VALIDATION_STAGE, INFER_SHAPE_STAGE, check_training_info
from ge.errors import (
    CompileInputError,
    CompileWarning,
    GeError,
    GraphError,
    GraphValidationError,
    MissingOperatorError,
    SessionError,
    ShapeInferenceError,
    VerificationError,
    VerificationInputError,
    concerning_model,
    model_file_named,
)
from ge.graph import Graph
from ge.graph.export_names import NodeNamesMadeUnique, unique_node_names
from ge.graph.input_checks import check_model_as_given, check_runtime_kernels
from ge.passes.discovery import given_paths
from ge.passes.source import collected_warnings, warn_user
from ge.session.comparison import warn_unchecked_outputs
from ge.session.compile_arguments import (
    DEFAULT_ATOL,
    DEFAULT_RTOL,
    check_dims_argument,
    check_dump_arguments,
    check_inputs_argument,
    check_tolerance,
    check_value_info,
    value_info_mode,
    verification_mode,
)
from ge.session.compile_result import CompileResult
from ge.session.compile_verification import (
    EachPassVerifier,
    run_original,
    warn_unexercised_bodies,
)
from ge.session.custom_evaluation import custom_output_descs
from ge.session.first_difference import snapshot
from ge.session.input_verdicts import (
    inference_failure,
    input_graph,
    with_input_problems,
)
from ge.session.onnx_tools import check_opset, converted_graph, upgraded_opset
from ge.session.runner import ModelRunner, exported_to_run
from ge.session.verification import (
    SizedRun,
    compare_run,
    narrow_float_outputs,
    random_output_reasons,
    warn_not_compared,
)

__all__ = ["CONVERT_STEP", "CompileResult", "compile", "upgraded_opset"]

# (`CompileResult` is `ge.session.compile_result`'s; exported here, as `compile` returns it)

#: The report's step of `opset=` / `inline_functions=` (the model converted or inlined
#: before the passes), first in `CompileReport.steps` when one of them changed the model.
CONVERT_STEP = "Convert"


def _model_file(graph: Graph) -> Path | None:
    """The model file `graph` was loaded from (`ge.graph.load` records it), if any."""
    files = [Path(f) for f, role in graph.root_graph().model.source_files.items()
             if role == "model file"]
    return files[0] if files else None


def _as_graph(model: object) -> tuple[Graph, bool, Path | None]:
    """(graph, compiled in place?, source file) for what `ge.compile` was given; a Graph's
    source file is the one it was loaded from (`ge compile` and pyatc load the model
    themselves), so that every caller's errors say alike when the input model has the
    problem too (`with_input_problems`, `CompileResult.save`)."""
    import ge.graph

    if isinstance(model, Graph):
        return model, True, _model_file(model)
    if isinstance(model, (bytearray, memoryview)):
        model = bytes(model)  # (as ge.graph.load reads them)
    if isinstance(model, (onnx.ModelProto, bytes)):
        return ge.graph.load(model), False, None
    if isinstance(model, (str, os.PathLike)):
        return ge.graph.load(model), False, Path(model)
    raise CompileInputError(
        "ge.compile expects a model path, an onnx.ModelProto, its serialized bytes or a "
        "ge.graph.Graph, got "
        f"{described(model)}")


@contextlib.contextmanager
def _closed_on_failure(owned: list[Graph]) -> Iterator[None]:
    """Close the graphs in `owned` (the compilation's own: loaded or converted by it, never
    the caller's) when the block fails, once its error is made (it names nodes by their
    names: a message is the same after): not left to the cyclic collector."""
    try:
        yield
    except BaseException:
        for graph in owned:
            with contextlib.suppress(GraphError):  # (closing is never worth another error)
                graph.close()
        raise


def _warn_duplicate_node_names(changed: Iterable[NodeNamesMadeUnique]) -> None:
    """One `CompileWarning` for the node names of the input model that the compiled model
    writes differently (`unique_node_names`): ONNX allows two nodes of a graph one name,
    but onnxruntime refuses such a model, the compiled one included, if it kept them."""
    items = []
    for item in changed:
        names = ", ".join(repr(name) for name in item.names)
        if len(item.names) > 1:
            items.append(f"graph {item.graph!r}: the {len(item.names)} nodes named "
                         f"{item.name!r} as {names}")
        else:  # its name is now one of those given to a node of a duplicate name
            items.append(f"graph {item.graph!r}: node {item.name!r} as {names} (a node of a "
                         f"duplicate name is named {item.name!r} now)")
    if items:
        warn_user(CompileWarning(
            "onnxruntime refuses a graph with two nodes of one name (two nodes with same "
            f"node name); the compiled model names them apart: "
            f"{first_and_more(items, separator='; ')}"))


def _verify_conversion(graph: Graph, expected: Mapping[str, Any], feeds: Mapping[str, Any],
                       rtol: float, atol: float, random: Mapping[str, str],
                       narrow: Mapping[str, str], resized: SizedRun | None,
                       opset: int | None, inline_functions: bool) -> None:
    """Under `verify="each-pass"`, run the converted model before any pass: a difference is
    the conversion's (onnx's converter or inliner), not the first pass's (trial Y: a
    converter gap was blamed on NoOpElimination, which had removed an Identity)."""
    what = " and ".join(part for part, on in (
        (f"the conversion to opset {opset} (onnx's version converter)", opset is not None),
        ("inlining the model's functions (onnx's inliner)", inline_functions)) if on)
    try:
        report = compare_run(ModelRunner(graph), expected, feeds, rtol=rtol, atol=atol,
                             not_compared=random, computed_in=narrow, resized=resized)
    except SessionError as err:
        raise SessionError(f"after {what} the model cannot be run: {err.message}",
                           stage=CONVERT_STEP, nodes=err.nodes) from err
    if not report.ok:
        raise VerificationError(
            f"the outputs differ from the original's after {what}, before any pass: "
            f"{report.summary()}", stage=CONVERT_STEP, report=report)


def _each_pass_hint(report: CompileReport, names: str = "the pass that changed them") -> str:
    """What names the pass that made the compiled model differ (or fail), when a pass
    changed it."""
    return (f" (verify=\"each-pass\", --verify each-pass, names {names})"
            if report.passes_that_changed() else "")


def _invalid_as_given(given: Graph, err: GeError) -> bool:
    """Whether ge finds the model as given invalid, as its compilation would say without
    verification: its validation, or its shape inference (a value_info declaring another
    element type than its node computes, an input of a type its reader does not take).
    Asked only when the original failed to run for the verification, so that the error is
    the one a compilation without `--verify` gives (the diagnosis does not depend on it).
    An operator nothing loaded defines (`MissingOperatorError`) is said as the run says
    it, which names what to load."""
    if given.find_problems():
        return True
    missing = (isinstance(cause, MissingOperatorError)
               for cause in (err, err.__cause__))  # (run_original says it in a SessionError)
    return not any(missing) and inference_failure(given, given) is not None


def _compiled_unrunnable(err: SessionError, report: CompileReport) -> SessionError:
    """GE1601 (of `err`'s class) for the compiled model that onnxruntime (or the reference
    evaluator) cannot load or run while the original runs: saying that it is the compiled
    model (the runtime's words name a graph, which both have), and the pass behind the node
    the runtime names (by the name the saved model writes for it) or a node it reads
    (`CompileReport.last_changes`: the pass that last changed it, and the one that made it
    when another, `Blame.cause` being the error's pass, stage and location), and how to
    find the first pass after which it cannot run: the last pass to touch a node need not
    be the one that broke it."""
    message = err.message
    if not message.startswith("the compiled model"):  # (at other sizes: it says so)
        message = f"the compiled model cannot be run (the original runs): {message}"
    blamed = report.last_changes.blame(report.graph, err.nodes, written=True)
    kind = type(err)  # (RuntimeLoadError: no input would make it run)
    hint = _each_pass_hint(report, "the first pass after which it cannot run")
    if blamed is None:
        return kind(message + hint, nodes=err.nodes)
    if not blamed.sure:  # (further upstream, the nearest change is a guess)
        return kind(message + blamed.sentence + hint, nodes=err.nodes)
    cause = blamed.cause
    return kind(message + blamed.sentence + hint, pass_name=cause.pass_name,
                stage=cause.stage, location=cause.location, nodes=err.nodes)


def _collecting(compile_: Callable[_P, CompileResult]) -> Callable[_P, CompileResult]:
    """`compile_` with the warnings it issues in this thread kept in its result."""
    @functools.wraps(compile_)
    def collecting(*args: _P.args, **kwargs: _P.kwargs) -> CompileResult:
        with collected_warnings() as caught:
            result = compile_(*args, **kwargs)
        result.warnings = list(caught)
        return result

    return collecting


_P = ParamSpec("_P")


def _naming_model_file(compile_: Callable[_P, CompileResult]
                       ) -> Callable[_P, CompileResult]:
    """`compile_` naming the model file it is given (not a proto or a Graph, whose file, if
    any, may not hold what they do) in each error about the model (`model_file_named`)."""
    @functools.wraps(compile_)
    def naming(*args: _P.args, **kwargs: _P.kwargs) -> CompileResult:
        model = args[0] if args else kwargs.get("model")
        path = os.fspath(model) if isinstance(model, (str, os.PathLike)) else None
        with model_file_named(path):
            return compile_(*args, **kwargs)

    return naming


@_collecting
@_naming_model_file
def compile(
    model: str | os.PathLike[str] | onnx.ModelProto | bytes | Graph,
    *,
    pass_paths: Iterable[str | os.PathLike[str]] | None = None,
    options: Mapping[str, str] | None = None,
    builtin_passes: bool = True,
    disable: Iterable[str] = (),
    enable: Iterable[str] = (),
    verify: bool | str | None = None,
    inputs: Mapping[str, Any] | str | os.PathLike[str] | None = None,
    dims: Mapping[str, int] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    check: str = "region",
    on_pass_failure: str = "stop",
    dump: str | os.PathLike[str] | None = None,
    dump_level: str | None = None,
    observers: Iterable[PipelineObserver] = (),
    value_info: str = "auto",
    opset: int | None = None,
    inline_functions: bool = False,
) -> CompileResult:
    """Compile `model` with the built-in and plugin passes; see `compile_graph` for the
    pipeline, `pass_paths`, `options`, `disable`, `enable`, `check` and `on_pass_failure`.

    `verify` (True, "final" or "each-pass") runs the original and the compiled model on
    `inputs` (a mapping, an `.npz` path, or generated from the input types, a symbolic dim
    of the size `dims` gives it by name, else 2: `generate_inputs`) and raises
    `VerificationError` when an output differs beyond `rtol`/`atol` (finite numbers >= 0,
    else `CompilerOptionError`, checked before anything runs; default `DEFAULT_RTOL`,
    `DEFAULT_ATOL`). Left out, `verify` is "final" when `inputs` or `dims` are given (as
    `ge compile --inputs` is) and off otherwise; `verify=False` beside them, or a tolerance
    without verification, is `CompilerOptionError` (`verification_mode`). `dump` is a folder for
    graph dumps (`dump_level` as `DUMP_GRAPH_LEVEL`); without it `DUMP_GE_GRAPH` decides.
    `value_info` ("auto", "all", "none") decides whether `CompileResult.save` writes the
    types of intermediate values; "auto" writes them only if the input model had any.
    `opset` converts the model to that standard-domain opset first (`upgraded_opset`), so
    that fusions into newer operators apply; a Graph given is then left as it is (the
    result's graph is the converted one) and verification compares with the model as given.
    `inline_functions` first replaces every call of a model-local function by its body
    (`inlined_functions`): the passes otherwise see a call, not what it computes. After
    either conversion the report's `counts_before` and `ops_before` are still the model as
    given (its steps and pass records count the converted one the passes ran on).

    Every argument is checked before anything is loaded or run: one of the wrong type (a
    str where a list of names or an int belongs, "false" for False) is
    `CompilerOptionTypeError` (GE1202, a `TypeError`) naming the type it got.
    """
    check_inputs_argument(inputs)
    if dims is not None:
        check_dims_argument(dims)
    # the collections, before anything runs (`compilation_passes` reads options and
    # pass_paths after the model is loaded and converted)
    parse_options(options)
    if pass_paths is not None:
        given_paths(pass_paths)
    disable, enable = name_list(disable, "disable"), name_list(enable, "enable")
    watchers = observer_list(observers)
    # the single values: each of its type (a str where an int belongs, "false" for False)
    flag(builtin_passes, "builtin_passes")
    check_modes(check, on_pass_failure)
    check_value_info(value_info)
    check_dump_arguments(dump, dump_level)
    if opset is not None:
        check_opset(opset)
    flag(inline_functions, "inline_functions")
    tolerances = [name for name, value in (("rtol", rtol), ("atol", atol)) if value is not None]
    if rtol is not None:
        check_tolerance(rtol, "rtol")
    if atol is not None:
        check_tolerance(atol, "atol")
    mode = verification_mode(verify, inputs_given=inputs is not None, dims_given=bool(dims),
                             tolerances_given=tolerances)
    rtol = DEFAULT_RTOL if rtol is None else float(rtol)  # a numpy scalar as a float
    atol = DEFAULT_ATOL if atol is None else float(atol)
    given, in_place, source = _as_graph(model)
    loaded_here = not in_place  # (a path or a proto: the graph is this compilation's own)
    # The graphs this compilation made (the model loaded here, a converted copy) are closed
    # when it fails, once its error is made: its traceback would hold them for the collector.
    owned = [] if in_place else [given]
    # A Graph given is compiled in place: a failure gives it back with its names as given
    # too (the other changes are undone by the transaction around the passes, inside).
    with (_closed_on_failure(owned),
          given.transaction() if in_place else contextlib.nullcontext()):
        # A model with a cycle, or a node onnx's checker refuses, is invalid whatever the
        # passes do (one might remove the node): said as `ge run` says it (GE1003 naming the
        # nodes), before anything converts, runs or infers it.
        check_model_as_given(given)
        check_training_info(given)  # (before opset= conversion, which drops it)
        _warn_duplicate_node_names(unique_node_names(given, lift_constants=True))
        converting = time.perf_counter()
        with concerning_model():  # (the model as given is what the converter refuses)
            graph = converted_graph(given, opset=opset, inline_functions=inline_functions)
        converted_in = time.perf_counter() - converting
        # onnxruntime could load neither the model nor what the passes make of it (an Add
        # of opset 1, which onnx's checker passes): refused as --verify would; after the
        # conversion, which is what makes such a model valid.
        with concerning_model():
            check_runtime_kernels(graph)
        if graph is not given:
            owned.append(graph)  # (the result's graph, unless the compilation fails)
        in_place = in_place and graph is given
        # The report's "before" is the model as given, not the converted copy the passes get:
        # the user holds it against the file (`ge inspect`, `ge diff`, onnx), in which a call
        # of a function is one node; the conversion is part of the change to "after". The
        # steps and pass records keep counting the graphs the passes ran on.
        as_given = None if graph is given else model_size(given)
        typed = value_info_mode(value_info, given)  # the model as given, not as converted
        dumper = (GraphDumper(dump, level=dump_level or "2") if dump is not None
                  else GraphDumper.from_environment())
        if dumper is not None:
            watchers.append(dumper)
        # The plugins are loaded first: one may register the custom operator (and its kernel)
        # that the original model needs to run.
        with compilation_passes(options, pass_paths) as passes:
            if dumper is not None:  # a level's names, against the passes the plugins brought
                dumper.check_level_names(entry.name for entry in passes.registry)
            expected: dict[str, Any] | None = None  # the original's outputs, run once
            feeds: dict[str, Any] = {}
            random: dict[str, str] = {}  # outputs two runs of the original may differ in
            narrow: dict[str, str] = {}  # outputs computed in float16 or bfloat16
            unrunnable: SessionError | VerificationInputError | None = None  # told after compiling
            resized: SizedRun | None = None  # the original at other sizes of the symbolic dims
            if mode != "none":
                try:
                    # before any conversion
                    # (an inputs file that does not fit is that file's error, not the model's)
                    with concerning_model(() if inputs is None else (VerificationInputError,)):
                        expected, feeds, resized = run_original(given, inputs, dims)
                except (SessionError, VerificationInputError) as err:
                    # (inputs given that do not fit are the inputs' problem, not the model's)
                    generated = isinstance(err, SessionError) or inputs is None
                    if not generated or not _invalid_as_given(given, err):
                        raise
                    unrunnable = err
                    if isinstance(err, SessionError):  # (not its session)
                        unrunnable = SessionError(err.message, nodes=err.nodes)
                    unrunnable.about_model = True
                else:
                    random, narrow = random_output_reasons(given), narrow_float_outputs(given)
                    if random:
                        warn_not_compared(random)
                    warn_unchecked_outputs(expected, rtol, atol, random)
                    if mode == "each-pass":
                        if graph is not given:  # the conversion first: no pass is to blame
                            _verify_conversion(graph, expected, feeds, rtol, atol, random,
                                               narrow, resized, opset, inline_functions)
                        watchers.append(EachPassVerifier(expected, feeds, rtol, atol, random,
                                                          narrow, resized, snapshot(graph)))

            def run() -> CompileResult:
                report = compile_graph(graph, passes=passes, builtin_passes=builtin_passes,
                                       disable=disable, enable=enable, check=check,
                                       on_pass_failure=on_pass_failure, observers=watchers)
                if as_given is not None:
                    # the conversion is a step of the compilation too (a large model's
                    # opset conversion takes as long as its passes)
                    report.steps.insert(0, StepRecord.of(
                        CONVERT_STEP, converted_in, as_given[0], report.counts_before))
                    report.seconds += converted_in
                    report.counts_before, report.ops_before = as_given
                try:
                    return verified(report)
                except Exception as err:  # (the observers see the compiled graph failing)
                    for watcher in watchers:
                        watcher.compilation_failed(err, graph)
                    raise

            def verified(report: CompileReport) -> CompileResult:
                """The result of `report`'s compilation, once verified (when asked)."""
                if unrunnable is not None:
                    # ge finds the model as given invalid, which onnxruntime refused to run in
                    # its own words (or no input could be generated for): the compilation said
                    # it in ge's, as without verification (the input's own problem, GE1003 or
                    # GE1305); it did not fail, so the run's failure is the error
                    raise unrunnable
                verification = None
                if expected is not None:
                    # as save writes it; its weights are the graph's until it runs (a temporary
                    # file, not a second copy in a proto: see exported_to_run)
                    with exported_to_run(graph, value_info=typed, lift_constants=True) as saved:
                        try:
                            verification = compare_run(
                                ModelRunner(saved, output_descs=custom_output_descs(graph)),
                                expected, feeds, rtol=rtol, atol=atol,
                                not_compared=random, computed_in=narrow, resized=resized)
                        except SessionError as err:
                            raise _compiled_unrunnable(err, report) from err
                    if not verification.ok:
                        which = _each_pass_hint(report)
                        where = (" at other sizes of the symbolic dims than those generated "
                                 "first" if verification.sizes else "")
                        raise VerificationError(
                            f"the compiled model's outputs differ from the original's{where}: "
                            f"{verification.summary()}{which}", report=verification)
                    runs = [feeds, *([resized.inputs] if resized is not None
                                     and verification.also_at else [])]
                    warn_unexercised_bodies(report, graph, runs, generated=inputs is None)
                return CompileResult(graph, report, verification, source, typed)

            try:
                if not in_place:
                    result = run()
                    if loaded_here and graph is not given:
                        # The model as loaded here, which a conversion replaced (`opset`,
                        # `inline_functions`): closed now, not left to the cyclic collector
                        # (a full collection, or the end of the process, traverses it all).
                        given.close()
                    return result
                # (inside the outer one: the verdict below reads the graph as given back)
                with graph.transaction():  # a failure gives the caller's graph back unchanged
                    return run()
            except GraphValidationError as err:
                if err.stage != FINAL_VALIDATION_STAGE:
                    raise
                unchanged = in_place or graph is not given
                try:
                    original = input_graph(model, given, unchanged)
                except Exception:  # a verdict is never worth another error
                    raise err from None
                raise with_input_problems(err, original, source) from err
            except ShapeInferenceError as err:
                unblamed = getattr(err, "unblamed", None)
                if err.stage != INFER_SHAPE_STAGE or unblamed is None:
                    # no pass changed what inference refuses: the model as given is
                    # (an operator ONNX does not have, a MatMul of [2, 3] by [4, 5])
                    if err.stage == INFER_SHAPE_STAGE and err.pass_name is None:
                        err.about_model = True
                    raise
                try:
                    own = inference_failure(input_graph(model, given, in_place
                                                          or graph is not given), given)
                except Exception:  # a verdict is never worth another error
                    raise err from None
                if own is None:
                    raise
                own_error = ShapeInferenceError(
                    f"{unblamed}; the model as given fails shape inference too ({own}): it "
                    "is the model's doing, not a pass's", stage=err.stage, nodes=err.nodes)
                own_error.about_model = True
                raise own_error from err
