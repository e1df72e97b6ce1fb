"""The opset conversion and the inlining are part of a compilation's time: a user trial
converting a 100k-node decoder to opset 23 saw 33 s of wall time against a report of
16.5 s. `ge.compile` records them as a first step, `Convert`, in the report's steps and
seconds."""

from __future__ import annotations

import pytest

import ge
from ge.session.compilation import CONVERT_STEP
from model_paths import shared_model


@pytest.mark.parametrize(("kwargs", "converts"), [
    ({"opset": 23}, True), ({}, False), ({"opset": 17}, False)])
def test_a_conversion_is_the_reports_first_step(kwargs: dict[str, int], converts: bool) -> None:
    result = ge.compile(shared_model("t5_encoder_tiny"), **kwargs)  # at opset 17 as exported
    steps = result.report.steps
    names = [s.name for s in steps]
    assert (names[0] == CONVERT_STEP) is converts and names.count(CONVERT_STEP) == int(converts)
    if converts:
        convert = steps[0]
        assert convert.seconds > 0 and convert.nodes_before == result.report.counts_before.nodes
        assert convert.nodes_after == steps[1].nodes_before  # what the passes got
        assert result.report.seconds >= sum(s.seconds for s in steps)
        assert result.report.as_dict()["steps"][0]["name"] == "Convert"
