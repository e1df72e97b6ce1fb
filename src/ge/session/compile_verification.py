"""Verifying a compilation (`ge.compile`'s `verify`): running the model as given for the
expected outputs, checking after every pass that changed the graph (`verify="each-pass"`),
and the warnings about what generated inputs or random operators leave unchecked."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from ge._text import first_and_more
from ge.compiler.last_changes import LastChanges
from ge.compiler.pass_registry import BUILTIN_ORIGIN
from ge.compiler.report import CompileReport, PassRunRecord
from ge.compiler.scheduler import PipelineObserver
from ge.compiler.steps import check_operators_known
from ge.errors import (
    CompileWarning,
    GeError,
    RuntimeLoadError,
    SessionError,
    SourceLocation,
    VerificationError,
    VerificationInputError,
)
from ge.graph import DATA, NET_OUTPUT, Graph, Node
from ge.graph.node import is_const
from ge.graph.places import body_owner, graph_place
from ge.passes.source import warn_user
from ge.session.body_coverage import BodyCoverage, body_coverage
from ge.session.first_difference import Difference, first_difference
from ge.session.model_interface import InputSpec, model_inputs
from ge.session.runner import ModelRunner, exported_to_run
from ge.session.verification import (
    SizedRun,
    check_inputs,
    compare_run,
    generate_inputs,
    generated_inputs_note,
    load_inputs,
    run_at_other_sizes,
)

__all__ = ["EachPassVerifier", "run_original", "warn_unexercised_bodies"]


class EachPassVerifier(PipelineObserver):
    """After every pass that changed the graph, run it and compare with the original: once
    per pass, after it ran on the root graph and every body (once per body made a model of
    a thousand If nodes take minutes); at other sizes of the symbolic dims too when the
    original ran there (`resized`)."""

    def __init__(self, expected: Mapping[str, Any], inputs: Mapping[str, Any],
                 rtol: float, atol: float, not_compared: Mapping[str, str],
                 computed_in: Mapping[str, str], resized: SizedRun | None = None,
                 original: onnx.ModelProto | None = None) -> None:
        self.expected, self.inputs, self.rtol, self.atol = expected, inputs, rtol, atol
        self.not_compared, self.computed_in, self.resized = not_compared, computed_in, resized
        self.last_changes: LastChanges | None = None
        #: the model the passes start from, whose values a failure is compared with
        #: (`ge.session.first_difference`)
        self.original = original

    def compilation_started(self, last_changes: LastChanges) -> None:
        self.last_changes = last_changes

    def _changed(self, record: PassRunRecord) -> tuple[str, list[str]]:
        """What the message says of the nodes `record`'s pass changed (and is not said when
        it changed none that are left: a pass that only removed), and their names: the
        operators it made or rewired, and the constants it changed without making them
        (trial AD: a value changed in place, which another node read too, was not named;
        the constants a pass makes, folding, are many and said by the operators reading
        them)."""
        changes = self.last_changes
        nodes = changes.changed_by(record.pass_name, record.stage) if changes else []
        names = [n.name for n in nodes if n.owner_graph is not None and (
            not _made_by(changes, n, record) if is_const(n)
            else n.type not in (DATA, NET_OUTPUT))]
        if not names:
            return "", []
        return f"; pass {record.pass_name} changed {first_and_more(list(map(repr, names)))}", names

    def pass_done(self, records: Sequence[PassRunRecord], graph: Graph) -> None:
        changed = [r for r in records if r.changed]
        if not changed:
            return
        record = changed[0]
        where = first_and_more([_graph_named(graph, r) for r in changed], 1)
        try:
            report = compare_run(ModelRunner(graph), self.expected, self.inputs,
                                 rtol=self.rtol, atol=self.atol,
                                 not_compared=self.not_compared,
                                 computed_in=self.computed_in, resized=self.resized)
        except SessionError as err:  # the pass left a model the runtime cannot load or run
            said, _ = self._changed(record)
            raise SessionError(
                f"after pass {record.pass_name} ({where}) the model cannot "
                f"be run: {err.message}{said}", pass_name=record.pass_name, stage=record.stage,
                nodes=err.nodes, location=record.location) from err
        if not report.ok:
            said, names = self._changed(record)
            first = (first_difference(self.original, graph, names, self.inputs, self.rtol,
                                      self.atol) if names and self.original is not None
                     else Difference(""))
            # (the line that changed the node the first difference is put down to, else
            # the first node named: trial AE was sent to a harmless line)
            blamed = [first.node, *names] if first.node is not None else names
            raise VerificationError(
                f"the outputs differ from the original's after pass {record.pass_name} "
                f"({where}): {report.summary()}{said}{first.text}",
                pass_name=record.pass_name, stage=record.stage, report=report,
                location=_edited_at(record, blamed), nodes=names)


def _made_by(changes: LastChanges | None, node: Node, record: PassRunRecord) -> bool:
    """Whether `record`'s pass made `node` (rather than changed one the graph had)."""
    maker = changes.maker(node) if changes is not None else None
    return maker is not None and (maker.pass_name, maker.stage) == (record.pass_name,
                                                                  record.stage)


def _edited_at(record: PassRunRecord, names: Sequence[str]) -> SourceLocation | None:
    """The line of the pass's own code an error about what it did points at: the one that
    last changed the first of `names` a FusionBasePass changed itself, a pattern or
    decompose pass's `replacement` (which built what the engine put in), else its class
    (trial AD: the class line every time, the bug three hooks below)."""
    lines = dict(record.edit_lines)
    line = next((lines[n] for n in names if n in lines), None)
    if line is not None and record.location is not None:
        return SourceLocation(record.location.file, line)
    return record.edit_location or record.location


def _graph_named(root: Graph, record: PassRunRecord) -> str:
    """The graph `record`'s run changed: "graph g"; a body by the node and attribute holding
    it (`graph_place`: exporters name every body alike), by its path when it is gone."""
    if not record.graph_path:
        return f"graph {record.graph_name}"
    try:
        body = root.get_subgraph(record.graph_path)
    except GeError:
        body = None
    if body is None:
        return f"graph {record.graph_name} ({record.graph_path})"
    return graph_place(body.name, body_owner(body))


def warn_unexercised_bodies(report: CompileReport, graph: Graph,
                            runs: Sequence[Mapping[str, Any]], *, generated: bool) -> None:
    """A run takes one path through an If (and runs a Loop's body only as its trip count
    allows): a plugin pass that changed a body the verification's inputs `runs` did not run
    (in any of its runs, the root graph's too, or by building it: `bodies_changed`) was not
    checked by it; say so, naming them (`ge.session.body_coverage`: a body inside a branch
    not run was not run either). Where ge cannot tell (a node deciding on a value computed
    in a body, a Scan's body), generated inputs get the warning too; given ones were chosen
    by the user."""
    changed: dict[str, list[str]] = {}  # body (`graph_path`) -> the plugin passes changing it
    for r in report.records:
        if r.changed and r.origin != BUILTIN_ORIGIN:
            for path in r.bodies_changed:  # (whichever run made the change: the root's too)
                names = changed.setdefault(path, [])
                if r.pass_name not in names:
                    names.append(r.pass_name)
    if not changed:
        return
    coverage = body_coverage(graph, list(changed), runs)
    advice = "give inputs that run it (--inputs FILE.npz, inputs=)"
    if coverage.not_run:
        warn_user(CompileWarning(
            f"the verification's {'generated' if generated else 'given'} inputs did not run "
            f"{_bodies(coverage.not_run, coverage, changed)}, so it did not check what the "
            f"passes changed there: {advice}"))
    if coverage.undecided and generated:
        warn_user(CompileWarning(
            f"verification ran generated inputs, which take one path through If and Loop "
            f"nodes, and ge cannot tell whether they ran "
            f"{_bodies(coverage.undecided, coverage, changed)}: {advice}"))


def _bodies(names: Sequence[str], coverage: BodyCoverage,
            changed: Mapping[str, Sequence[str]]) -> str:
    """At most three bodies with the passes that changed them, and how many more."""
    return first_and_more([f"{coverage.described[n]} (changed by {', '.join(changed[n])})"
                           for n in names])


def _inputs_for(original: onnx.ModelProto, inputs: Mapping[str, Any] | str | os.PathLike[str]
                | None, seed: int, dims: Mapping[str, int] | None = None) -> dict[str, Any]:
    if inputs is None:
        return generate_inputs(original, seed=seed, dims=dims)
    if isinstance(inputs, (str, os.PathLike)):
        return load_inputs(inputs, original)
    # only tensor inputs are made arrays: a list of arrays is a sequence, not one tensor
    specs = {spec.name: spec for spec in model_inputs(original)}
    values = {name: value if name in specs and specs[name].nested is not None
              else _as_array(value, specs.get(name), original.graph.name)
              for name, value in inputs.items()}
    check_inputs(values, original)
    return values


def _as_array(value: Any, spec: InputSpec | None, graph: str) -> Any:
    """`value` given for a tensor input as an array; a ragged list is GE1602."""
    try:
        return np.asarray(value)
    except ValueError:
        if spec is None:  # not an input: check_inputs says so
            return value
        raise VerificationInputError(
            f"inputs do not fit graph {graph!r}: input {spec.name!r}: expected "
            f"{spec.describe()}, got a {type(value).__name__} of items of different shapes "
            "(ragged), which is no array") from None


def _inputs_may_matter(err: SessionError, inputs: object) -> bool:
    """Whether a failed run of generated inputs might run with real ones: not when the
    runtime would not load the model at all."""
    return inputs is None and not isinstance(err, RuntimeLoadError)


def run_original(given: Graph, inputs: Mapping[str, Any] | str | os.PathLike[str] | None,
                 dims: Mapping[str, int] | None
                 ) -> tuple[dict[str, Any], dict[str, Any], SizedRun | None]:
    """The outputs of the model as given (it is checked too), the inputs they came from,
    and, for generated inputs, its run at other sizes of the symbolic dims (None when there
    is none: `ge.session.verification.run_at_other_sizes`). Nothing of the runs outlives
    them: their session and export are gone before the passes run. What the compilation's
    shape inference refuses before any inference (an opset or an operator onnx does not
    know) is refused first, with the same error: onnxruntime would refuse it too, in its
    own words, and the diagnosis would depend on verifying."""
    check_operators_known(given)
    with exported_to_run(given) as original:
        feeds = _inputs_for(original.proto, inputs, seed=0, dims=dims)
        try:
            runner = ModelRunner(original)
            expected = runner.run(feeds)
        except SessionError as err:  # nothing of ge's in it yet: say so
            note = (generated_inputs_note(original.proto, feeds)
                    if _inputs_may_matter(err, inputs) else "")
            raise SessionError(
                f"the original model (as given, before any pass) cannot be run for the "
                f"verification: {err.message}{note}", nodes=err.nodes) from err
        resized = None if inputs is not None else run_at_other_sizes(original, dims,
                                                                      runner=runner)
        return expected, feeds, resized
