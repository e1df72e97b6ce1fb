"""What a pass's `run()` may return, and how the engine reads it (decision D2).

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

__all__ = [
    "ACCEPTED_RESULTS",
    "FAILED",
    "NOT_CHANGED",
    "SUCCESS",
    "RunOutcome",
    "RunStatus",
    "StatusLike",
    "interpret_run_result",
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
        return RunStatus(RunOutcome.FAILED, "False", "run() returned False")
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
