"""Asking a pass's `meet_requirements` during an explanation, and telling its answer.

`ask` calls the hook as the engine does and keeps what it returned or raised together with
the line of the user's code that did it: the `return` statement that answered (followed
with a profile function while the hook runs, unless a profiler is already installed), or
for an exception the innermost frame in the pass's own file (else the innermost frame
outside `ge`). A pass author with several `return False` in one hook then sees which one
refused. `refusal` words a refusing or raising answer as a `Reason`, with the types and
shapes of the values the hook was asked about, for pattern passes (a match) and
decompose passes (a node) alike. `missing_descs_warning` flags a refusal made while some
of those values have no type or rank, saying why they have none at the pass's stage: a
`BeforeInferShape` pass runs before shape inference, so a compilation gives it the same
unknown values, which a later pass would see typed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Any

from ge._text import first_and_more
from ge.errors import SourceLocation
from ge.graph import DataType, Graph, Node, TensorDesc
from ge.passes.dim_hints import shape_symbols, symbolic_dim_hint
from ge.passes.execution import read_only_call, untyped_values
from ge.passes.explain_reasons import Reason
from ge.passes.source import (
    blamed_location,
    definition_location,
    is_internal_file,
    traceback_location,
)
from ge.passes.status import answer_truth, is_bool_answer, odd_answer_text

__all__ = [
    "HookAnswer",
    "answer_summary",
    "ask",
    "describe_desc",
    "missing_descs_warning",
    "refusal",
    "runs_before_inference",
    "value_symbols",
]

#: How many unknown descs a warning names.
_SHOWN_DESCS = 3
#: How much of what a hook returned a message repeats.
_SHOWN_RETURN = 80


@dataclass(frozen=True)
class HookAnswer:
    """What a hook answered: the value it returned and whether that counts as accepting
    (`bool(value)`, as the engine reads it), or the exception it raised; the line of the
    user's code that returned or raised (None when it is not known, or is `ge`'s own: a
    built-in pass); and whether it read a desc nothing was known of (None: not asked about
    a graph)."""

    value: Any = None
    accepted: bool = False
    error: Exception | None = None
    location: SourceLocation | None = None
    read_unknown: bool | None = None


def _code_of(hook: Callable[..., Any]) -> CodeType | None:
    """The code object of the function the author wrote (the original of an adapted hook)."""
    func = getattr(hook, "__ge_original_hook__", None) or getattr(hook, "__func__", hook)
    code = getattr(func, "__code__", None)
    return code if isinstance(code, CodeType) else None


def ask(hook: Callable[..., Any], args: Iterable[Any], pass_class: type,
        graph: Graph | None = None) -> HookAnswer:
    """Call `hook(*args)` and keep its answer with the user's line that gave it; an
    exception (of the hook, or of `bool()` on what it returned) is kept, never raised.
    With `graph`, a hook that changes it fails as in a compilation (the engine's
    `RewriteError`: a hook asked about the graph may only read it); the explanation undoes
    the change."""
    code = _code_of(hook)
    returned_at: list[int] = []
    # Only when no profiler runs: one installed by the user (cProfile) is not replaced.
    follow = code is not None and not is_internal_file(code.co_filename) and (
        sys.getprofile() is None)

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "return" and frame.f_code is code:
            returned_at.append(frame.f_lineno)

    unknown_reads = None if graph is None else graph.root_graph()._unknown_desc_reads
    if follow:
        sys.setprofile(profile)
    try:
        value = hook(*args) if graph is None else read_only_call(hook, graph, *args)
    except Exception as exc:
        location = blamed_location(exc) or _raised_at(exc, pass_class)
        return HookAnswer(error=exc, location=location)
    finally:
        if follow:
            sys.setprofile(None)
    try:
        accepted = answer_truth(value)
    except TypeError as exc:  # (what it returned, as a compilation says it)
        return HookAnswer(value, error=exc, location=_returned_at(code, returned_at))
    location = _returned_at(code, returned_at)
    read_unknown = (None if graph is None or unknown_reads is None
                    else graph.root_graph()._unknown_desc_reads != unknown_reads)
    return HookAnswer(value, accepted, None, location, read_unknown)


def _returned_at(code: CodeType | None, lines: list[int]) -> SourceLocation | None:
    """The line the hook returned from (the outermost call returns last), if followed."""
    if code is None or not lines:
        return None
    return SourceLocation(code.co_filename, lines[-1])


def odd_answer_note(answer: HookAnswer) -> str | None:
    """A warning for an answer that is no bool (nor None), as a compilation gives it: GE
    reads it as `bool(answer)` ("no" accepts the match)."""
    if answer.error is not None or answer.value is None or is_bool_answer(answer.value):
        return None
    return "meet_requirements returned " + odd_answer_text(answer.value, answer.accepted)


def _raised_at(exc: BaseException, pass_class: type) -> SourceLocation | None:
    """The user's line that raised `exc`: the innermost frame in the pass's own file, else
    the innermost outside `ge` (a helper module of the plugin); None for `ge`'s own."""
    location = traceback_location(exc.__traceback__, [definition_location(pass_class).file])
    if location is None or is_internal_file(location.file):
        return None
    return location


def refusal(answer: HookAnswer, what: str, inputs: Mapping[str, str], said: str, *,
            symbols: Iterable[str], anchor: str) -> Reason:
    """The `Reason` of a hook that refused or raised: what it returned (None counting as
    False, probably a missing return) or raised, where, what the pass said with
    `context.set_error_message`, and `inputs` (name -> type and shape) of `what` it was
    asked about ("match" or "node"). `symbols`: the named dims of those values, which a
    hook raising may have taken for ints (`ge.passes.dim_hints`, as the compilation's
    error says it)."""
    at = f" (at {answer.location})" if answer.location is not None else ""
    listed = f"; its inputs: {', '.join(f'{k} {v}' for k, v in inputs.items())}" if (
        inputs) else ""
    location = str(answer.location) if answer.location is not None else None
    if answer.error is not None:
        raised = f"{type(answer.error).__name__}: {answer.error}"
        message = f"meet_requirements raised {raised}{at}{listed}"
        hint = symbolic_dim_hint(answer.error, symbols)
        if hint is not None:
            message += f" ({hint})"
        return Reason("meet_requirements_raised", message, None, anchor, (anchor,),
                      {"exception": raised, "inputs": dict(inputs), "location": location})
    returned = f"returned {answer.value!r}"[:_SHOWN_RETURN]
    message = f"meet_requirements {returned}{at}: the pass refuses this {what}"
    if answer.value is None:
        message += " (None counts as False: a missing return?)"
    if said:
        message += f" (the pass says: {said})"
    return Reason("meet_requirements", message + listed, None, anchor, (anchor,),
                  {"inputs": dict(inputs), "error_message": said or None,
                   "location": location})


def answer_summary(answer: HookAnswer) -> str:
    """What the hook did, as the start of a warning: "meet_requirements returned False"."""
    if answer.error is not None:
        return "meet_requirements raised"
    return f"meet_requirements returned {answer.value!r}"[:_SHOWN_RETURN]


def describe_desc(desc: TensorDesc) -> str:
    """A value's type and shape as messages show it: `float[N, 16]`, `unknown type[?]`."""
    dtype = desc.data_type
    name = "unknown type" if dtype == DataType.DT_UNDEFINED else dtype.name.removeprefix(
        "DT_").lower()
    shape = desc.get_shape()
    if shape.is_unknown_rank():
        return f"{name}[unknown rank]"
    dims = ", ".join("?" if isinstance(d, int) and d < 0 else str(d) for d in shape.get_dims())
    return f"{name}[{dims}]"


def value_symbols(values: Iterable[tuple[Node, int]]) -> set[str]:
    """The symbolic (named) dims of `values` (producer, output)."""
    return shape_symbols(node.get_output_desc(out).get_shape() for node, out in values)


def runs_before_inference(pass_class: type, stage: object = None) -> bool:
    """Whether the pass runs at `BeforeInferShape`, on the model as loaded: `stage` (a
    `PassStage` or its value; the CLI knows the registration it explains), else the stage
    `pass_class` is registered at by its own decorator (a built-in pass never is)."""
    from ge.passes.registry import PassDescriptor
    from ge.passes.stage import PassStage

    if stage is not None:
        return str(stage) == PassStage.BEFORE_INFER_SHAPE.value
    descriptor = pass_class.__dict__.get("__ge_pass_descriptor__")
    return (isinstance(descriptor, PassDescriptor) and descriptor.cls is pass_class
            and descriptor.stage is PassStage.BEFORE_INFER_SHAPE)


def missing_descs_warning(nodes: Iterable[Node], answer: HookAnswer, *,
                          before_inference: bool) -> str | None:
    """A warning when a hook refused after reading a desc nothing was known of while inputs
    or outputs of `nodes` have no type or rank, else None. Before inference (the pass's
    stage is `BeforeInferShape`) that is what a compilation gives the pass too; after it,
    the graph explained was not typed."""
    if answer.read_unknown is False:
        return None  # it did not read one (it refused for a reason of its own)
    what = answer_summary(answer)
    unknown = list(untyped_values(nodes))
    if not unknown:
        return None
    listed = first_and_more(unknown, _SHOWN_DESCS)
    start = f"{what} while shape or type information is missing ({listed} unknown): "
    if before_inference:
        return start + ("the pass runs at BeforeInferShape, before shape inference, so a "
                        "compilation gives it these values untyped too (only the types and "
                        "shapes the model file declares are known then); a hook that reads "
                        "them belongs at AfterInferShape")
    return start + ("the check may not have been decidable (ge.ops.infer_shapes types a "
                    "graph, as `ge passes explain` does first; what stays unknown after it, "
                    "inference could not type)")
