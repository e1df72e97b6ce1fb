"""Generated inputs and comparisons within bounds of memory.

Inputs that would take more than the limit (4 GiB, `GE_MAX_GENERATED_INPUT_BYTES`) are
refused before anything is allocated, with GE1602 naming each input, its shape and bytes;
running out of memory while generating or running is a GE error, never a MemoryError.
Generation and comparison work block by block: the same values and verdicts as on whole
arrays, without a second copy of the data (a 3.6 GB input grew a verification to 24 GB).
Every test here allocates a few MB at most.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ge
import ge.graph
import ge.session.comparison as comparison
import ge.session.inputs as input_generation
from ge.errors import CompilerOptionError, SessionError, VerificationInputError
from ge.session import compare_outputs, generate_inputs
from ge.session.inputs import (
    ENV_MAX_GENERATED_INPUT_BYTES,
    MAX_GENERATED_INPUT_BYTES,
    generated_inputs_limit,
)
from ge.session.runner import ModelRunner

T = TensorProto


def _model(*inputs: tuple[str, int, list[Any]]) -> onnx.ModelProto:
    """Relu of a float input `x` [N, 3] (or Identity of each of `inputs`)."""
    inputs = inputs or (("x", T.FLOAT, ["N", 3]),)
    values = [helper.make_tensor_value_info(n, e, s) for n, e, s in inputs]
    nodes = [helper.make_node("Relu" if e == T.FLOAT else "Identity", [n], [f"{n}_out"])
             for n, e, _ in inputs]
    outputs = [helper.make_tensor_value_info(f"{n}_out", e, s) for n, e, s in inputs]
    graph = helper.make_graph(nodes, "big", values, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(autouse=True)
def _default_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_MAX_GENERATED_INPUT_BYTES, raising=False)


def _peak(action: Callable[[], Any]) -> int:
    """The most bytes Python and numpy held at once during `action`, beyond the start."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        action()
        return tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()


# -- the limit --------------------------------------------------------------------------------


def test_inputs_over_the_limit_are_refused_before_allocation() -> None:
    peak: list[int] = []

    def generate() -> None:
        with pytest.raises(VerificationInputError) as info:
            generate_inputs(_model(), dims={"N": 100_000_000_000})
        peak.append(1)
        err = info.value
        assert err.code == "GE1602" and isinstance(err, ValueError)
        assert err.message == (
            "the generated inputs of graph 'big' would take 1.09 TiB (1200000000000 bytes), "
            "over the limit of 4 GiB (GE_MAX_GENERATED_INPUT_BYTES): 'x' float32 "
            "[100000000000, 3] 1.09 TiB; give smaller sizes with --dims NAME=SIZE (dims=) or "
            "real inputs with --inputs FILE.npz (inputs=), or raise the limit with "
            "GE_MAX_GENERATED_INPUT_BYTES=BYTES if the machine has several times that in "
            "memory (the inputs, and the outputs of each run)")

    assert _peak(generate) < 2**20 and peak
    assert MAX_GENERATED_INPUT_BYTES == 4 * 2**30 == generated_inputs_limit()


def test_the_limit_counts_every_input_and_names_the_largest_first() -> None:
    model = _model(("ids", T.INT64, ["N"]), ("x", T.FLOAT, ["N", 3]), ("m", T.BOOL, ["N"]),
                   ("s", T.STRING, ["N"]), ("h", T.FLOAT16, ["N", 2]), ("k", T.INT8, [4]))
    n = 2**28  # 8 + 12 + 1 + 8 + 4 bytes an element: 8.25 GiB
    with pytest.raises(VerificationInputError) as info:
        generate_inputs(model, dims={"N": n})
    assert info.value.message.startswith(
        f"the generated inputs of graph 'big' would take 8.25 GiB ({33 * n + 4} bytes), over "
        "the limit of 4 GiB (GE_MAX_GENERATED_INPUT_BYTES): 'x' float32 [268435456, 3] "
        "3 GiB, 'ids' int64 [268435456] 2 GiB, 's' string [268435456] 2 GiB, 'h' float16 "
        "[268435456, 2] 1 GiB and 2 more; give smaller sizes")


def test_static_dims_count_and_the_advice_leaves_out_dims_then(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_MAX_GENERATED_INPUT_BYTES, "100")
    with pytest.raises(VerificationInputError) as info:
        generate_inputs(_model(("x", T.FLOAT, [10, 3])))
    assert info.value.message == (
        "the generated inputs of graph 'big' would take 120 bytes, over the limit of 100 "
        "bytes (GE_MAX_GENERATED_INPUT_BYTES): 'x' float32 [10, 3] 120 bytes; give real "
        "inputs with --inputs FILE.npz (inputs=), or raise the limit with "
        "GE_MAX_GENERATED_INPUT_BYTES=BYTES if the machine has several times that in "
        "memory (the inputs, and the outputs of each run)")


def test_the_limit_is_set_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_MAX_GENERATED_INPUT_BYTES, "96")
    assert generate_inputs(_model(), dims={"N": 8})["x"].nbytes == 96  # at the limit: fine
    with pytest.raises(VerificationInputError, match=r"would take 108 bytes, over the limit"):
        generate_inputs(_model(), dims={"N": 9})
    monkeypatch.setenv(ENV_MAX_GENERATED_INPUT_BYTES, " ")  # empty: the default
    assert generated_inputs_limit() == MAX_GENERATED_INPUT_BYTES
    assert generated_inputs_limit({ENV_MAX_GENERATED_INPUT_BYTES: "17179869184"}) == 2**34
    for bad in ("4G", "-1", "1e9", "abc"):
        monkeypatch.setenv(ENV_MAX_GENERATED_INPUT_BYTES, bad)
        with pytest.raises(CompilerOptionError) as info:
            generate_inputs(_model())
        assert info.value.code == "GE1202"
        assert info.value.message == (
            "GE_MAX_GENERATED_INPUT_BYTES must be a whole number of bytes (e.g. 8589934592 "
            f"for 8 GiB), got {bad!r}")


def test_compile_refuses_such_inputs_and_leaves_the_graph_as_it_was() -> None:
    graph = ge.graph.load(_model())
    before = graph.dump_to_stream()
    with pytest.raises(VerificationInputError) as info:
        ge.compile(graph, verify=True, dims={"N": 10**12})
    assert info.value.code == "GE1602" and "'x' float32 [1000000000000, 3]" in str(info.value)
    assert graph.dump_to_stream() == before


# -- out of memory ----------------------------------------------------------------------------


def test_out_of_memory_while_generating_is_a_ge_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_memory(*args: Any) -> np.ndarray:
        raise MemoryError("Unable to allocate 3.35 GiB")

    monkeypatch.setattr(input_generation, "_filled", no_memory)
    with pytest.raises(VerificationInputError) as info:
        generate_inputs(_model(), dims={"N": 300_000_000})
    assert info.value.code == "GE1602"
    assert info.value.message == (
        "out of memory generating input 'x' of graph 'big' (float32 [300000000, 3], "
        "3.35 GiB): give smaller sizes with --dims NAME=SIZE (dims=) or real inputs with "
        "--inputs FILE.npz (inputs=)")
    assert info.value.__cause__ is None  # one line: not the MemoryError's traceback


@pytest.mark.parametrize("failure", [
    MemoryError("Unable to allocate 1.00 TiB for an array"),
    RuntimeError("[ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while "
                 "running Relu node. Status Message: Failed to allocate memory for "
                 "requested buffer of size 600000000"),
])
def test_out_of_memory_while_running_is_a_session_error(failure: Exception) -> None:
    runner = ModelRunner(_model())

    class Session:
        def run(self, *args: Any) -> None:
            raise failure

    runner._session = Session()
    with pytest.raises(SessionError) as info:
        runner.run({"x": np.ones((2, 3), np.float32)})
    assert info.value.code == "GE1601"
    assert info.value.message.startswith("onnxruntime ran out of memory running graph 'big' (")
    assert info.value.message.endswith("): smaller inputs need less")


# -- block by block ---------------------------------------------------------------------------


def _one_shot(spec_type: int, shape: tuple[int, ...], seed: int, name: str) -> np.ndarray:
    """What generation gave before it worked block by block (one draw of every element)."""
    import zlib

    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    dtype = helper.tensor_dtype_to_np_dtype(spec_type)
    if spec_type == T.BOOL:
        return rng.random(shape) < 0.5
    if spec_type in (T.INT8, T.INT64, T.UINT16):
        return rng.integers(0, 4, size=shape).astype(dtype)
    if spec_type == T.COMPLEX64:
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape, dtype=np.float32).astype(dtype)


def test_blocks_give_the_values_of_one_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(input_generation, "BLOCK_ELEMENTS", 7)  # many blocks, one cut mid-row
    types = (T.FLOAT, T.FLOAT16, T.DOUBLE, T.BFLOAT16, T.INT8, T.INT64, T.UINT16, T.BOOL,
             T.COMPLEX64)
    model = _model(*((f"v{t}", t, ["N", 5]) for t in types))
    inputs = generate_inputs(model, seed=3, dims={"N": 6})
    for t in types:
        expected = _one_shot(t, (6, 5), 3, f"v{t}")
        assert inputs[f"v{t}"].dtype == expected.dtype
        assert inputs[f"v{t}"].tobytes() == expected.tobytes(), t


def test_generation_holds_no_copy_of_the_input() -> None:
    model = _model(("i", T.INT8, ["N"]), ("x", T.FLOAT16, ["N"]))
    n = 2**22  # 4 MiB of int8 (drawn as int64: 32 MiB at once before), 8 MiB of float16
    assert _peak(lambda: generate_inputs(model, dims={"N": n})) < 3 * n + 2**20


def _compared(expected: np.ndarray, actual: np.ndarray) -> dict[str, Any]:
    return compare_outputs({"y": expected}, {"y": actual}, rtol=1e-3,
                           atol=1e-4).outputs[0].as_dict()


def test_blocks_give_the_verdict_of_the_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(0)
    cases = []
    for dtype in (np.float32, np.float16, np.int32):
        expected = rng.standard_normal((7, 9)).astype(dtype)
        actual = expected.copy()
        actual[1, 2] += 3  # the largest difference, in one block...
        actual[5, 8] = actual[5, 8] + 1 if dtype == np.int32 else np.nan  # ...worst in another
        expected[6, 0] = 0 if dtype == np.int32 else np.inf
        cases.append((expected, actual))
    whole = [_compared(e, a) for e, a in cases]
    monkeypatch.setattr(comparison, "BLOCK_ELEMENTS", 4)
    assert [_compared(e, a) for e, a in cases] == whole
    assert whole[0]["worst_index"] == [5, 8] and whole[0]["mismatches"] == 3


def test_comparison_holds_no_float64_copy_of_the_outputs() -> None:
    n = 2**22  # float32 outputs of 16 MiB: five float64 arrays of 32 MiB each before
    expected = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    actual = expected + np.float32(1e-6)
    result: list[Any] = []
    assert _peak(lambda: result.append(_compared(expected, actual))) < 8 * 2**20
    assert result[0]["ok"] and result[0]["size"] == n
