"""What a pass's `run()` may return, and how the engine reads it (decision D2).

`None` or `True` is success; `False` is failure; an `int` is a GE status: `0` success,
`NOT_CHANGED` success without change, any other value failure; any other type is a failure
("python pass returned unsupported type: <type>").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Final

__all__ = [
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
        return RunStatus(RunOutcome.FAILED, str(value), f"run() returned status {value}")
    type_name = type(value).__name__
    return RunStatus(
        RunOutcome.FAILED, "FAILED", f"python pass returned unsupported type: {type_name}"
    )
