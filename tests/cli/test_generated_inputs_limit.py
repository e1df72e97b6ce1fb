"""`ge run` and `ge compile` with `--dims` sizing generated inputs beyond the limit (4 GiB,
`GE_MAX_GENERATED_INPUT_BYTES`): one line with GE1602 naming the input, its shape and the
bytes (JSON on stdout with `--json`), refused before anything is allocated or written (it
was a MemoryError traceback, or the OOM killer)."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from cli_helpers import listing, run_ge
from onnx import TensorProto, helper

MESSAGE = ("the generated inputs of graph 'g' would take 1.09 TiB (1200000000000 "
           "bytes), over the limit of 4 GiB (GE_MAX_GENERATED_INPUT_BYTES): 'x' float32 "
           "[100000000000, 3] 1.09 TiB; give smaller sizes with --dims NAME=SIZE (dims=) or "
           "real inputs with --inputs FILE.npz (inputs=), or raise the limit with "
           "GE_MAX_GENERATED_INPUT_BYTES=BYTES if the machine has several times that in "
           "memory (the inputs, and the outputs of each run)")


@pytest.fixture(autouse=True)
def _default_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GE_MAX_GENERATED_INPUT_BYTES", raising=False)


def _dynamic_model(folder: Path) -> Path:
    """y = Relu(x), x float32 [N, 3]."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])])
    path = folder / "dyn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("command", ["run", "compile"])
def test_inputs_over_the_limit_are_one_line(tmp_path: Path, command: str) -> None:
    model = _dynamic_model(tmp_path)
    out = ["-o", str(tmp_path / "out.onnx"), "--report", str(tmp_path / "r.json")] \
        if command == "compile" else ["--output", str(tmp_path / "out.npz")]
    # nothing written but, for compile, the report recording the failure
    before = sorted([*listing(tmp_path), *(["r.json"] if command == "compile" else [])])
    code, stdout, err = run_ge(command, str(model), *out, "--dims", "N=100000000000")
    assert code == 1 and stdout == ""
    assert err == f"ge: [GE1602] {model}: {MESSAGE}\n"  # (the model's inputs: named)
    assert listing(tmp_path) == before
    code, stdout, err = run_ge(command, str(model), *out, "--dims", "N=100000000000",
                               "--json")
    assert code == 1 and "Traceback" not in err
    data = json.loads(stdout)
    assert (data["code"], data["type"]) == ("GE1602", "VerificationInputError")
    assert (data["message"], data["path"]) == (f"{model}: {MESSAGE}", str(model))
    assert listing(tmp_path) == before
    if command == "compile":
        assert json.loads((tmp_path / "r.json").read_text()) == data


def test_the_environment_raises_or_lowers_the_limit(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    model = _dynamic_model(tmp_path)
    monkeypatch.setenv("GE_MAX_GENERATED_INPUT_BYTES", "1000")
    code, _, err = run_ge("run", str(model), "--dims", "N=100")
    assert code == 1
    assert err.startswith(f"ge: [GE1602] {model}: the generated inputs of graph 'g' would "
                          "take 1.17 KiB (1200 bytes), over the limit of 1000 bytes")
    code, _, err = run_ge("run", str(model), "--dims", "N=80")
    assert code == 0, err
    monkeypatch.setenv("GE_MAX_GENERATED_INPUT_BYTES", "4GiB")
    code, _, err = run_ge("run", str(model))
    assert (code, err) == (1, "ge: [GE1202] GE_MAX_GENERATED_INPUT_BYTES must be a whole "
                              "number of bytes (e.g. 8589934592 for 8 GiB), got '4GiB'\n")
