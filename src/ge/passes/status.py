"""What a pass's `run()` may return, and how the engine reads it (decision D2); how a
`meet_requirements` answer is read (GE's `bool(answer)`) and said when it is no bool; the
reasons a pass gave for refusing matches, as a pass run keeps them.

`None` or `True` is success; `False` is failure; an `int` is a GE status: `0` success,
`NOT_CHANGED` success without change, any other value failure; any other type is a failure
("python pass returned unsupported type: <type>"). `SUCCESS`, `NOT_CHANGED` and `FAILED`
are exported by `ge.passes` too: the names GE's C++ passes return (GE's Python package
exports none of them; returning True/None/False runs on both).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Final

from ge._text import printable, short_repr

__all__ = [
    "ACCEPTED_RESULTS",
    "FAILED",
    "MAX_REFUSAL_REASONS",
    "MAX_REFUSAL_REASON_LENGTH",
    "NOT_CHANGED",
    "SUCCESS",
    "RunOutcome",
    "RunStatus",
    "StatusLike",
    "answer_truth",
    "interpret_run_result",
    "is_bool_answer",
    "note_refusal_reason",
    "odd_answer_text",
]

#: GE's `SUCCESS` status.
SUCCESS: Final[int] = 0
#: GE's `NOT_CHANGED` status: the pass succeeded and left the graph as it was.
NOT_CHANGED: Final[int] = 1
#: GE's `FAILED` status (what a status-returning helper such as `SubgraphRewriter.replace`
#: gives back on failure).
FAILED: Final[int] = 0xFFFFFFFF

#: What `run()` may return.
StatusLike = bool | int | None

#: Statuses of GE's C++ API that a ported pass may return, which ge does not read as theirs
#: (its statuses are GE's pass statuses, `ge::SUCCESS`, `ge::NOT_CHANGED`, `ge::FAILED`):
#: the value, what it is and the name to return instead.
_FOREIGN_STATUSES: Final[dict[int, tuple[str, str]]] = {
    1343242304: ("GE C++'s GRAPH_NOT_CHANGED (graph/ge_error_codes.h)", "NOT_CHANGED"),
}

#: What `run()` may return and what each means, for a message about a status ge refused.
ACCEPTED_RESULTS: Final[str] = (
    f"ge reads None, True and SUCCESS ({SUCCESS}) as success, NOT_CHANGED ({NOT_CHANGED}) "
    f"as success without a change, False, FAILED ({FAILED}) and any other int as failure "
    "(SUCCESS, NOT_CHANGED and FAILED are in ge.passes)")


class RunOutcome(str, Enum):
    """The three results the engine distinguishes."""

    SUCCESS = "success"
    NOT_CHANGED = "not_changed"
    FAILED = "failed"


@dataclass(frozen=True)
class RunStatus:
    """A `run()` result read by D2's rules: the outcome, the return code, and why it failed."""

    outcome: RunOutcome
    return_code: str
    reason: str = ""

    @property
    def failed(self) -> bool:
        return self.outcome is RunOutcome.FAILED


def interpret_run_result(value: object) -> RunStatus:
    """Read a `run()` return value by decision D2 (`bool` is checked before `int`)."""
    if value is None or value is True:
        return RunStatus(RunOutcome.SUCCESS, str(SUCCESS))
    if value is False:
        # (GE reads False as a failure; trial AD meant "nothing changed")
        return RunStatus(RunOutcome.FAILED, "False",
                         "run() returned False, which GE reads as a failure (its changes "
                         "are undone): return ge.passes.NOT_CHANGED when the pass found "
                         "nothing to change, True when it changed the graph")
    if isinstance(value, int):
        if value == SUCCESS:
            return RunStatus(RunOutcome.SUCCESS, str(value))
        if value == NOT_CHANGED:
            return RunStatus(RunOutcome.NOT_CHANGED, str(value))
        return RunStatus(RunOutcome.FAILED, str(value), _refused_status(value))
    type_name = type(value).__name__
    return RunStatus(
        RunOutcome.FAILED, "FAILED", f"python pass returned unsupported type: {type_name}"
    )


def _refused_status(value: int) -> str:
    """Why an int `run()` returned fails the pass: FAILED says so itself; another status
    is named when it is one of GE's C++ API a port returned by mistake, and the statuses ge
    accepts are listed (a pass meaning success with another number fails otherwise)."""
    if value == FAILED:
        return f"run() returned FAILED ({value})"
    reason = f"run() returned status {value}"
    foreign = _FOREIGN_STATUSES.get(value)
    if foreign is not None:
        what, instead = foreign
        reason += f", which is {what}: return ge.passes.{instead} instead"
    return f"{reason}; {ACCEPTED_RESULTS}"


#: How many distinct reasons for refusing matches (`context.set_error_message` in a
#: `meet_requirements` that refused) a pass run and a report's per-pass summary keep, and
#: how long each may be: a pass that writes each match's node into its message has as many
#: reasons as matches, and a report or a terminal line must stay readable.
MAX_REFUSAL_REASONS: Final[int] = 5
MAX_REFUSAL_REASON_LENGTH: Final[int] = 200


def is_bool_answer(value: object) -> bool:
    """Whether a `meet_requirements` answer is a bool (numpy's too: `bool_`, numpy 2's
    `bool`); None and anything else are answers GE reads with `bool()` all the same."""
    return isinstance(value, bool) or (type(value).__module__ == "numpy"
                                       and type(value).__name__ in ("bool", "bool_"))


def answer_truth(value: object) -> bool:
    """A `meet_requirements` answer as GE reads it, `bool(value)`; a TypeError saying what
    it returned when bool() refuses it (a numpy array of several elements: numpy's
    ValueError said nothing of the hook)."""
    try:
        return bool(value)
    except Exception as exc:  # (a user's type whose __bool__ raises, too)
        raise TypeError(f"meet_requirements must return a bool, got {type(value).__name__}, "
                        f"which bool() refuses: {exc}") from None


def odd_answer_text(value: object, accepted: bool, counted: str = "") -> str:
    """An answer that is no bool, as the warnings say it after "meet_requirements
    returned": `str 'no'` (then `counted`, ` for 2 of 2 match(es)`), what it counts as,
    and what to return instead (trial T: "no" accepted every match)."""
    return (f"{type(value).__name__} {short_repr(value)}{counted}, which counts as {accepted} "
            "(GE reads the answer as bool(answer)); return True or False")


def note_refusal_reason(reasons: dict[str, int], message: str, count: int = 1) -> None:
    """Count `count` refusals giving `message` in `reasons` (message -> refusals, in the
    order first given), as one line of at most `MAX_REFUSAL_REASON_LENGTH` characters. A
    blank message is no reason; a new one once `MAX_REFUSAL_REASONS` are kept is not
    listed (the refusals are still counted apart, `PassRunRecord.refusals`)."""
    text = " ".join(message.split())
    if not text:
        return
    text = printable(text)  # (a terminal would obey an escape sequence in it)
    if len(text) > MAX_REFUSAL_REASON_LENGTH:
        text = text[:MAX_REFUSAL_REASON_LENGTH - 3] + "..."
    if text in reasons:
        reasons[text] += count
    elif len(reasons) < MAX_REFUSAL_REASONS:
        reasons[text] = count
