"""Numeric verification: running an original and a compiled model on the same inputs.

`verify` runs both on the same inputs and compares their outputs with
`ge.session.comparison` (element by element, `numpy.isclose` semantics; NaN equals NaN),
giving a `VerificationReport`. Inputs come from `ge.session.inputs` (generated, read or
checked); its names and the comparison's are this module's too.

Generated inputs size every symbolic dim 2 unless told otherwise, so a pass that bakes a
size into a constant (a Reshape to `[2, -1, 64]` where the batch was) computes right at
those sizes. Verification with generated inputs therefore checks again at other sizes
(`other_sizes`: each symbol its own, 3, 5, 7...) wherever the original runs at them and
gives outputs its declared output shapes allow (`run_at_other_sizes`).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ge._text import first_and_more
from ge.errors import (
    CompileWarning,
    GeError,
    SessionError,
    VerificationInputError,
)
from ge.graph.graph import Graph
from ge.graph.types import DataType
from ge.passes.source import warn_user
from ge.session.comparison import (  # (the comparison's public names are this module's too)
    OutputComparison,
    VerificationReport,
    compare_outputs,
    precision_floor,
    sizes_text,
    warn_unchecked_outputs,
)
from ge.session.inputs import (  # (so are the inputs')
    ENV_MAX_GENERATED_INPUT_BYTES,
    MAX_GENERATED_INPUT_BYTES,
    ModelOrPath,
    as_model,
    check_inputs,
    generate_inputs,
    generated_inputs_failure,
    generated_inputs_limit,
    generated_inputs_note,
    input_symbols,
    load_inputs,
)
from ge.session.model_interface import Model, model_outputs
from ge.session.runner import ExportedModel, ModelRunner, run_model

__all__ = [
    "ENV_MAX_GENERATED_INPUT_BYTES",
    "MAX_GENERATED_INPUT_BYTES",
    "OTHER_SIZES",
    "OutputComparison",
    "SizedRun",
    "VerificationReport",
    "check_inputs",
    "compare_at_other_sizes",
    "compare_outputs",
    "compare_run",
    "generate_inputs",
    "generated_inputs_failure",
    "generated_inputs_limit",
    "generated_inputs_note",
    "load_inputs",
    "narrow_float_outputs",
    "other_sizes",
    "precision_floor",
    "random_output_reasons",
    "reference_outputs",
    "run_at_other_sizes",
    "verify",
]


# -- which outputs are compared -------------------------------------------------------------


def random_output_reasons(model: ModelOrPath) -> dict[str, str]:
    """The outputs of `model` (its root graph) that depend on a random operator (RandomNormal,
    Bernoulli, a Dropout in training mode...), each with why: two runs differ there, so they
    are not compared."""
    import ge.graph
    from ge.ops.randomness import random_outputs

    model = as_model(model)
    graph = model if isinstance(model, Graph) else ge.graph.load(model)
    reasons = {}
    for name, origin in random_outputs(graph).items():
        reasons[name] = f"not compared: depends on {origin}"
    return reasons


#: The 16-bit float types, coarsest first, by the name `compare_outputs` takes.
_NARROW_FLOATS = {DataType.DT_BF16: "bfloat16", DataType.DT_FLOAT16: "float16"}


def narrow_float_outputs(model: ModelOrPath) -> dict[str, str]:
    """The outputs of `model` (its root graph) computed from a float16 or bfloat16 value,
    each with that type (the coarser when both): a float16 model with float32 inputs and
    outputs rounds in float16, so its outputs are compared at that type's precision."""
    import ge.graph

    model = as_model(model)
    graph = model if isinstance(model, Graph) else ge.graph.load(model)
    narrow: dict[int, set[DataType]] = {}
    for node in graph.topological_order():
        found = {dt for i in range(node.get_outputs_size())
                 if (dt := node._output_dtype(i)) in _NARROW_FLOATS}
        producers = [node.get_input_producer(i) for i in range(node.get_inputs_size())]
        for producer in [*producers, *node.get_outer_inputs()]:
            if producer is not None:
                found |= narrow.get(id(producer[0]), set())
        if found:
            narrow[id(node)] = found
    net_output = graph.get_net_output()
    outputs: dict[str, str] = {}
    for i in range(net_output.get_inputs_size() if net_output is not None else 0):
        producer = net_output.get_input_producer(i)  # type: ignore[union-attr]
        types = narrow.get(id(producer[0])) if producer is not None else None
        if producer is not None and types:
            coarsest = next(t for t in _NARROW_FLOATS if t in types)
            outputs[producer[0].get_output_name(producer[1])] = _NARROW_FLOATS[coarsest]
    return outputs


def warn_not_compared(random: Mapping[str, str]) -> None:
    """Outputs that depend on a random operator cannot be verified: say which, and why."""
    shown, first = _random_text(random)
    warn_user(CompileWarning(
        f"verification does not compare output(s) {shown}: they depend on {first}, so two "
        "runs of the original differ there; export the model in eval mode (model.eval()) "
        "to verify them"))


def _random_text(random: Mapping[str, str]) -> tuple[str, str]:
    """The outputs of `random_output_reasons` for a message, and the operator the first
    depends on."""
    shown = first_and_more([repr(n) for n in random])
    return shown, next(iter(random.values())).removeprefix("not compared: depends on ")


# -- running and comparing --------------------------------------------------------------------


def reference_outputs(model: ModelOrPath, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The outputs to compare later runs against (`run_model`; the model is not changed)."""
    return run_model(as_model(model), inputs)


def verify(original: ModelOrPath, compiled: ModelOrPath, *,
           inputs: Mapping[str, Any] | None = None, rtol: float = 1e-4,
           atol: float = 1e-5, seed: int = 0,
           dims: Mapping[str, int] | None = None,
           names: tuple[str, str] = ("original", "compiled")) -> VerificationReport:
    """Run both models (each may be the path of a model file) on the same inputs (generated
    from `original` when None, see `generate_inputs`) and compare their outputs;
    `report.raise_if_failed(...)` to enforce. Generated inputs are tried at other sizes of
    the symbolic dims too (see the module docstring): the report of a difference there has
    those `sizes`; when the outputs match there too, the report's `also_at` says where. A
    model that cannot be run is SessionError saying which one, by `names` (the runtime's
    words name a graph, which both models may share: trial WW)."""
    original, compiled = as_model(original, "original"), as_model(compiled, "compiled")
    analysed = _as_graph(original)  # (read once for what the comparison asks of it)
    # (inputs that do not fit say which model they were checked against: both models'
    # graphs may have one name, trial AH)
    with _inputs_said(f"the {names[0]} model"), \
            _named_side(f"the {names[0]} model cannot be run"):
        feeds = (generate_inputs(original, seed=seed, dims=dims) if inputs is None
                 else dict(inputs))
        first = ModelRunner(original)
        try:
            expected = first.run(feeds)
        except SessionError as err:  # (as ge run and ge compile --verify say: trial AL)
            failed = None if inputs is not None else generated_inputs_failure(
                err, original, feeds)
            if failed is None:
                raise
            raise failed from err
    not_compared = random_output_reasons(analysed)
    if not_compared:  # (as `ge.compile` does, and of the tiny outputs too: trial AH)
        warn_not_compared(not_compared)
    warn_unchecked_outputs(expected, rtol, atol, not_compared)
    with _named_side(f"the {names[0]} model cannot be run"):
        resized = None if inputs is not None else run_at_other_sizes(
            original, dims, seed=seed, runner=first)
    cannot_run = f"the {names[1]} model cannot be run (the {names[0]} runs)"
    with _named_side(cannot_run):
        runner = ModelRunner(compiled)  # (a model the runtime refuses is said so first)
    if resized is not None and not resized.skipped:
        try:
            check_inputs(resized.inputs, compiled)
        except VerificationInputError as err:  # (fixed sizes where the original has dims)
            resized = replace(resized, inputs={}, expected={}, skipped=(
                f"the {names[1]} model does not take inputs of those sizes: {err.message}"))
    # (the inputs at other sizes fit it, checked above: an input error is the first run's,
    # of two models whose inputs differ)
    with _inputs_said(f"the inputs the {names[0]} model ran on do not fit the {names[1]} "
                      "model"), _named_side(cannot_run):
        report = compare_run(runner, expected, feeds, rtol=rtol, atol=atol,
                             not_compared=not_compared,
                             computed_in=narrow_float_outputs(analysed), resized=resized,
                             names=names)
    runs = [feeds, *([resized.inputs] if resized is not None and resized.inputs else [])]
    warn_bodies_not_run(analysed, compiled, runs, names, generated=inputs is None)
    if not report.ok:  # (a random operator only the second model has: trial AJ)
        failed_names = {out.name for out in report.failures}
        random = {name: why for name, why in random_output_reasons(compiled).items()
                  if name in failed_names}
        if random:
            shown, origin = _random_text(random)
            warn_user(CompileWarning(
                f"output(s) {shown} of the {names[1]} model depend on {origin}, which the "
                f"{names[0]} model's do not: two runs of it differ there, so they cannot "
                "match"))
    return report


def _as_graph(model: Model) -> Graph:
    """`model` as a Graph (a proto loaded), for the questions asked of its structure."""
    if isinstance(model, Graph):
        return model
    import ge.graph

    return ge.graph.load(model)


def warn_bodies_not_run(original: Model, model: Model, runs: Sequence[Mapping[str, Any]],
                        names: tuple[str, str], *, generated: bool) -> None:
    """A run takes one path through an If and runs a Loop's body only as its trip count
    allows: name the bodies of `model` (the second model verified) that differ from
    `original`'s at the same place and that none of `runs` ran, whose differences the
    verification could not see (trial AJ: a wrong then_branch verified "ok" on inputs
    taking the else branch), and, for generated inputs, those ge cannot tell about (an If
    inside a Loop deciding on a value computed in the body: trial AL). Bodies equal in both
    are not named (trial AL: `assert_numerically_equal(m, m)` warned on every call). A model
    without If, Loop or Scan costs nothing."""
    from ge.session.body_coverage import body_coverage

    graph = _with_bodies(model)
    if graph is None:
        return
    theirs = _with_bodies(original)
    before = {} if theirs is None else _body_prints(theirs)
    differing = [path for path, data in _body_prints(graph).items()
                 if before.get(path) != data]
    if not differing:
        return
    try:
        coverage = body_coverage(graph, differing, runs)
    except GeError:  # (a body ge cannot read the deciding values of: nothing to tell)
        return
    which = "generated" if generated else "given"
    for listed, said, why, then in (
            (coverage.not_run, f"the verification's {which} inputs did not run", "",
             "is not"),
            (coverage.undecided if generated else [],
             "ge cannot tell whether the verification's generated inputs ran",
             " (an If or Loop deciding on a value computed inside a body)", "may not be")):
        if listed:
            shown = first_and_more([coverage.described[b] for b in listed])
            one = len(listed) == 1
            warn_user(CompileWarning(
                f"{said} {shown} of the {names[1]} model{why}, which "
                f"differ{'s' if one else ''} from the {names[0]} model's: what differs there "
                f"{then} compared; give inputs that run {'it' if one else 'them'} (--inputs "
                "FILE.npz, inputs=)"))


def _with_bodies(model: Model) -> Graph | None:
    """`model` as a Graph when it holds If, Loop or Scan bodies (None otherwise; a proto is
    loaded only when its graph has such a node)."""
    if not isinstance(model, Graph) and not any(n.op_type in _BODY_OWNERS
                                                for n in model.graph.node):
        return None
    graph = _as_graph(model)
    return graph if any(not s.is_orphan() for s in graph.get_all_subgraphs()) else None


def _body_prints(graph: Graph) -> dict[str, bytes]:
    """Each live body of `graph` by `body_path`, as the ONNX it is written as (what tells
    an equal body from a changed one)."""
    import onnx

    from ge.graph.onnx_export import write_graph
    from ge.graph.subgraphs import body_path

    prints = {}
    for sub in graph.get_all_subgraphs():
        if not sub.is_orphan():
            proto = onnx.GraphProto()
            write_graph(sub, proto)
            prints[body_path(sub)] = proto.SerializeToString()
    return prints


#: The operators holding bodies (a model without one in its graph has none to tell of).
_BODY_OWNERS = frozenset({"If", "Loop", "Scan"})


@contextlib.contextmanager
def _inputs_said(said: str) -> Iterator[None]:
    """A VerificationInputError (GE1602: inputs that do not fit a model, dims it does not
    have) raised in the block, prefixed with `said` (the type kept: a DimsArgumentError
    stays the caller's argument's)."""
    try:
        yield
    except VerificationInputError as err:
        raise type(err)(f"{said}: {err.message}", nodes=err.nodes) from err


@contextlib.contextmanager
def _named_side(said: str) -> Iterator[None]:
    """A SessionError raised in the block (a model onnxruntime or the reference evaluator
    cannot load or run) prefixed with `said`, unless it names its model already."""
    try:
        yield
    except SessionError as err:
        if err.code != SessionError.code or err.message.startswith("the "):
            raise  # (inputs that do not fit are not a model's; at other sizes it says which)
        raise type(err)(f"{said}: {err.message}", nodes=err.nodes) from err


def compare_run(runner: ModelRunner, expected: Mapping[str, Any], inputs: Mapping[str, Any], *,
                rtol: float, atol: float, not_compared: Mapping[str, str] | None = None,
                computed_in: Mapping[str, str] | None = None,
                resized: SizedRun | None = None,
                names: tuple[str, str] = ("original", "compiled")) -> VerificationReport:
    """The compiled model (`runner`) run on `inputs` and compared with the original's
    `expected` outputs; when they match and the original also ran at other sizes
    (`resized`), compared there too (`compare_at_other_sizes`). What `verify`, the check
    of `ge.compile` and its each-pass check share; a run that fails is SessionError."""
    report = compare_outputs(expected, runner.run(inputs), rtol=rtol, atol=atol, names=names,
                             not_compared=not_compared, computed_in=computed_in)
    if report.ok and resized is not None:
        if resized.skipped:
            report = replace(report, not_at=dict(resized.sizes),
                             not_at_reason=resized.skipped, given_dims=resized.given)
        else:
            report = compare_at_other_sizes(report, resized, runner, names=names,
                                            not_compared=not_compared, computed_in=computed_in)
    # (outputs are compared by name: a name listed twice is one comparison)
    repeated = {name: times for name, times in Counter(runner.output_names).items()
                if times > 1}
    return replace(report, repeated=repeated) if repeated else report


# -- checking again at other sizes ------------------------------------------------------------

#: The sizes the symbolic dims take in the check at other sizes, one per symbol in the order
#: the inputs name them (again from the first past the last): each distinct from the others
#: and from the default 2, so a size baked into a constant or one dim taken for another
#: computes wrong there.
OTHER_SIZES = (3, 5, 7, 11, 13, 17)


def other_sizes(model: ModelOrPath, dims: Mapping[str, int] | None = None) -> dict[str, int]:
    """The sizes of `model`'s symbolic input dims for the check at other sizes: those in
    `dims` as given, every other one its own from `OTHER_SIZES`; {} when `dims` sizes them
    all (or there are none), as then there is nothing else to try."""
    given = dict(dims or {})
    free = [name for name in input_symbols(model) if name not in given]
    if not free:
        return {}
    return given | {name: OTHER_SIZES[i % len(OTHER_SIZES)] for i, name in enumerate(free)}


@dataclass(frozen=True)
class SizedRun:
    """The original model's outputs (`expected`) on inputs generated at `sizes`; or, with
    `skipped`, why it gave none there (inputs and outputs empty)."""

    sizes: dict[str, int]
    inputs: dict[str, Any]
    expected: dict[str, Any]
    skipped: str = ""
    given: tuple[str, ...] = ()  # the dims of `sizes` the caller sized (`dims`)


def run_at_other_sizes(original: Model | ExportedModel, dims: Mapping[str, int] | None = None,
                       *, seed: int = 0, runner: ModelRunner | None = None) -> SizedRun | None:
    """The original model run at `other_sizes` (on `runner`, one already made for it, if
    given), or None when there are no other sizes to try. A run `skipped` says why there
    is nothing to compare there: the original cannot run at those sizes (an export traced
    at fixed sizes and declared dynamic; a mask that must be as long as two other dims
    together), or its outputs there do not have the shapes its graph outputs declare (the
    compiled model may rely on those)."""
    model = original.proto if isinstance(original, ExportedModel) else original
    sizes = other_sizes(model, dims)
    if not sizes:
        return None
    given = tuple(name for name in sizes if name in (dims or {}))
    try:
        feeds = generate_inputs(model, seed=seed, dims=sizes)
        expected = (runner or ModelRunner(original)).run(feeds)
    except (SessionError, VerificationInputError):
        return SizedRun(sizes, {}, {}, skipped="the original cannot run there", given=given)
    if not _fit_declared_outputs(model_outputs(model), expected, sizes):
        return SizedRun(sizes, {}, {}, skipped="the original's outputs there do not have "
                                               "the shapes its graph outputs declare",
                        given=given)
    return SizedRun(sizes, feeds, expected, given=given)


def _fit_declared_outputs(declared: Mapping[str, tuple[int | str | None, ...]],
                          outputs: Mapping[str, Any], sizes: Mapping[str, int]) -> bool:
    """Whether every tensor output has its declared rank and static dims, and the size of
    each input symbol it declares."""
    for name, dims in declared.items():
        shape = getattr(outputs.get(name), "shape", None)
        if shape is None:
            continue  # (a sequence, map or optional: its own declaration)
        if len(shape) != len(dims):
            return False
        for want, got in zip(dims, shape, strict=True):
            if isinstance(want, int) and want != got:
                return False
            if isinstance(want, str) and want in sizes and sizes[want] != got:
                return False
    return True


def compare_at_other_sizes(report: VerificationReport, run: SizedRun,
                           compiled: Model | ModelRunner, *,
                           not_compared: Mapping[str, str] | None = None,
                           computed_in: Mapping[str, str] | None = None,
                           names: tuple[str, str] = ("original", "compiled")
                           ) -> VerificationReport:
    """`report` (the outputs matched at the sizes generated first) checked again on `run`'s
    inputs: the comparison there (its `sizes` the run's) when the outputs differ, else
    `report` saying where they matched too (`also_at`). A compiled model that cannot run
    where the original did is SessionError, saying so."""
    runner = compiled if isinstance(compiled, ModelRunner) else ModelRunner(compiled)
    try:
        actual = runner.run(run.inputs)
    except SessionError as err:
        raise SessionError(
            f"the {names[1]} model cannot run at {sizes_text(run.sizes, run.given)}, where "
            f"the {names[0]} runs: {err.message}", nodes=err.nodes) from err
    resized = compare_outputs(run.expected, actual, rtol=report.rtol, atol=report.atol,
                              names=names,
                              not_compared=not_compared, computed_in=computed_in)
    if resized.ok:
        return replace(report, also_at=dict(run.sizes), given_dims=run.given)
    return replace(resized, sizes=dict(run.sizes), given_dims=run.given)
