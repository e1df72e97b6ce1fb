"""`run()` result rules (D2), `PassStage` and `PassContext`."""

from __future__ import annotations

import pytest

import ge.passes
from ge.passes import NOT_CHANGED, PassContext, PassStage
from ge.passes.status import RunOutcome, interpret_run_result


@pytest.mark.parametrize(
    ("value", "outcome", "code"),
    [
        (None, RunOutcome.SUCCESS, "0"),
        (True, RunOutcome.SUCCESS, "0"),
        (0, RunOutcome.SUCCESS, "0"),
        (NOT_CHANGED, RunOutcome.NOT_CHANGED, str(NOT_CHANGED)),
        (False, RunOutcome.FAILED, "False"),
        (7, RunOutcome.FAILED, "7"),
        (-1, RunOutcome.FAILED, "-1"),
    ],
)
def test_run_results(value: object, outcome: RunOutcome, code: str) -> None:
    status = interpret_run_result(value)
    assert (status.outcome, status.return_code) == (outcome, code)
    assert status.failed is (outcome is RunOutcome.FAILED)


@pytest.mark.parametrize(("value", "type_name"), [("ok", "str"), (1.0, "float"), ([], "list")])
def test_other_types_fail_with_the_unsupported_type_message(value: object, type_name: str) -> None:
    status = interpret_run_result(value)
    assert status.failed
    assert status.reason == f"python pass returned unsupported type: {type_name}"


def test_statuses_are_exported_with_ges_names_and_values() -> None:
    """`from ge.passes import SUCCESS` works as `NOT_CHANGED` did: GE's C++ names, GE's
    values, the ones `run()` results are read by."""
    from ge.passes import FAILED, NOT_CHANGED, SUCCESS

    assert (SUCCESS, NOT_CHANGED, FAILED) == (0, 1, 0xFFFFFFFF)
    assert {"SUCCESS", "NOT_CHANGED", "FAILED"} <= set(ge.passes.__all__)
    assert interpret_run_result(SUCCESS).outcome is RunOutcome.SUCCESS
    assert interpret_run_result(FAILED).failed


def test_a_refused_status_says_which_ge_accepts() -> None:
    """Any other int fails, and the reason lists what ge reads, names and numbers."""
    status = interpret_run_result(7)
    assert status.reason == (
        "run() returned status 7; ge reads None, True and SUCCESS (0) as success, "
        "NOT_CHANGED (1) as success without a change, False, FAILED (4294967295) and any "
        "other int as failure (SUCCESS, NOT_CHANGED and FAILED are in ge.passes)")


def test_stage_values_are_ges() -> None:
    assert [s.value for s in PassStage] == [
        "BeforeInferShape",
        "AfterInferShape",
        "AfterBuiltinFusionPass",
        "AfterOriginGraphOptimize",
    ]
    assert PassStage("AfterInferShape") is PassStage.AFTER_INFER_SHAPE
    assert isinstance(PassStage.BEFORE_INFER_SHAPE, str)


def test_context() -> None:
    context = PassContext("MyPass", {"ge.key": "v"})
    assert context.get_pass_name() == "MyPass"
    context.set_pass_name("Other")
    assert context.get_pass_name() == "Other"
    assert context.get_error_message() == ""
    context.set_error_message("bad shape")
    assert context.get_error_message() == "bad shape"
    assert context.get_option_value("ge.key") == "v"
    for key in ("missing", 3):
        with pytest.raises(RuntimeError, match=f"^Failed to get option value for key: {key}$"):
            context.get_option_value(key)  # type: ignore[arg-type]


def test_get_option_value_default_is_returned_only_for_an_absent_option() -> None:
    """The `ge` extension: `default` (keyword or positional) instead of GE's RuntimeError;
    a given option wins over it, and any value, None or "" included, is a default."""
    context = PassContext("MyPass", {"ge.key": "v", "empty": ""})
    assert context.get_option_value("ge.key", "d") == "v"
    assert context.get_option_value("ge.key", default="d") == "v"
    assert context.get_option_value("empty", default="d") == ""  # given, though empty
    assert context.get_option_value("missing", "d") == "d"
    assert context.get_option_value("missing", default=None) is None
    assert context.get_option_value("missing", default="") == ""
    sentinel = object()
    assert context.get_option_value("missing", sentinel) is sentinel
    assert context.get_option_value(3, default="d") == "d"  # type: ignore[call-overload]
    with pytest.raises(RuntimeError, match=r"^Failed to get option value for key: missing$"):
        context.get_option_value("missing")  # without it: GE's behaviour


def test_package_exports_exist() -> None:
    for name in ge.passes.__all__:
        assert getattr(ge.passes, name) is not None
