"""`ge.compile(dims=...)`: the sizes of symbolic dims in the generated verification inputs
(an audio front end needs more than 2 samples); refused with `inputs=` (nothing to size)."""

from __future__ import annotations

import numpy as np
import pytest

import ge
from ge.errors import CompilerOptionError, SessionError
from sample_models import audio_front_end


def test_dims_size_the_generated_inputs() -> None:
    model = audio_front_end()
    with pytest.raises(SessionError, match="symbolic dims of 2 unless sized"):
        ge.compile(model, verify=True)
    result = ge.compile(model, verify=True, dims={"samples": 400})
    assert result.verification is not None and result.verification.ok


def test_dims_with_given_inputs_are_refused() -> None:
    model = audio_front_end()
    before = model.SerializeToString()
    with pytest.raises(CompilerOptionError) as info:
        ge.compile(model, verify=True, dims={"samples": 400},
                   inputs={"x": np.zeros((1, 400), np.float32)})
    assert info.value.code == "GE1202"
    assert "dims= sizes the symbolic dims of generated inputs" in info.value.message
    assert model.SerializeToString() == before
