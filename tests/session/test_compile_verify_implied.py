"""`ge.compile`'s verification arguments follow `ge compile`'s rule (`verification_mode`):
`inputs=` or `dims=` without `verify` verify ("final"), as `--inputs`/`--dims` imply
`--verify`; `verify=False` beside them contradicts them, and `rtol`/`atol` without
verification compare nothing: both are `CompilerOptionError` (GE1202), refused before
anything runs or is written. They were silently ignored (the result's verification None)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ge
import ge.graph
from ge.errors import CommandLineError, CompilerOptionError
from ge.session.compile_arguments import VerifyNames, verification_mode
from model_paths import shared_model
from sample_models import audio_front_end

MODEL = shared_model("gelu_mlp_opset20")  # one input, "input" [4, 32]


def _inputs() -> dict[str, np.ndarray]:
    return {"input": np.random.default_rng(0).standard_normal((4, 32), np.float32)}


def test_inputs_without_verify_verify_the_final_model() -> None:
    result = ge.compile(MODEL, inputs=_inputs(), builtin_passes=False)
    assert result.verification is not None and result.verification.ok


def test_dims_without_verify_verify_the_final_model() -> None:
    result = ge.compile(audio_front_end(), dims={"samples": 400})
    assert result.verification is not None and result.verification.ok


def test_a_tolerance_with_inputs_alone_is_used() -> None:
    result = ge.compile(MODEL, inputs=_inputs(), rtol=0.25, atol=0, builtin_passes=False)
    assert result.verification is not None
    assert (result.verification.rtol, result.verification.atol) == (0.25, 0.0)


def test_verify_left_out_or_none_without_inputs_does_not_verify() -> None:
    assert ge.compile(MODEL, builtin_passes=False).verification is None
    assert ge.compile(MODEL, verify=None, builtin_passes=False).verification is None


def test_the_default_tolerances_are_those_of_the_cli() -> None:
    result = ge.compile(MODEL, verify=True, builtin_passes=False)
    assert result.verification is not None
    assert (result.verification.rtol, result.verification.atol) == (1e-4, 1e-5)


@pytest.mark.parametrize(("arguments", "message"), [
    ({"verify": False, "inputs": "inputs"},
     "verify=False contradicts inputs=: they are only used to verify; leave verify out "
     "(inputs= alone implies verify='final') or leave inputs= out"),
    ({"verify": "none", "dims": {"batch": 3}},
     "verify='none' contradicts dims=: they are only used to verify; leave verify out "
     "(dims= alone implies verify='final') or leave dims= out"),
    ({"rtol": 0.1}, "rtol needs verify=True (or inputs= or dims=): without it nothing is compared"),
    ({"atol": 0.0, "verify": False},
     "atol needs verify=True (or inputs= or dims=): without it nothing is compared"),
    ({"rtol": 1e-3, "atol": 1e-3},
     "rtol and atol need verify=True (or inputs= or dims=): without it nothing is compared"),
])
def test_an_argument_verification_would_ignore_is_refused(
        tmp_path: Path, arguments: dict[str, object], message: str) -> None:
    if arguments.get("inputs") == "inputs":
        arguments["inputs"] = _inputs()
    graph = ge.graph.load(MODEL)
    before = graph.to_onnx().SerializeToString()
    dump = tmp_path / "dumps"
    with pytest.raises(CompilerOptionError) as info:
        ge.compile(graph, dump=dump, **arguments)  # type: ignore[arg-type]
    assert (info.value.code, info.value.message) == ("GE1202", message)
    assert graph.to_onnx().SerializeToString() == before
    assert list(tmp_path.iterdir()) == []  # not even the dump folder


def test_the_cli_shares_the_rule_in_its_own_words() -> None:
    cli = VerifyNames("--verify", "--inputs", "--dims", CommandLineError)
    assert verification_mode(None, inputs_given=True, dims_given=False, names=cli) == "final"
    assert verification_mode(None, inputs_given=False, dims_given=True, names=cli) == "final"
    assert verification_mode("each-pass", inputs_given=True, dims_given=False,
                             names=cli) == "each-pass"
    assert verification_mode(None, inputs_given=False, dims_given=False, names=cli) == "none"
    with pytest.raises(CommandLineError) as info:
        verification_mode(None, inputs_given=False, dims_given=False,
                          tolerances_given=["--rtol"], names=cli)
    assert (info.value.code, info.value.message) == (
        "GE1701", "--rtol needs --verify (or --inputs or --dims): without it nothing is compared")
