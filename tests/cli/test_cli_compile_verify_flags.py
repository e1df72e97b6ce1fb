"""`ge compile`'s verification flags on a vendored real model: an optional-value flag
(`--verify`, `--check`) takes the next word as its value, and says how to write it when
that word is not one; `--rtol` and `--atol` need `--verify` (or `--inputs`) and must be
finite numbers >= 0; the report's per-pass `node_delta` is signed (a decomposition adds nodes).
Every refusal writes nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import listing, run_ge

from model_paths import shared_model

GELU_MLP = shared_model("gelu_mlp_opset20")  # Gemm, Gelu, LayerNormalization; input [4, 32]

#: Gemm(x, w, b, transB=1) as MatMul(x, Transpose(w)) + b: one node becomes three.
DECOMPOSE_GEMM = """
import ge.es.all as es
from ge.es import GraphBuilder
from ge.passes import DecomposePass, PassStage, register_decompose_pass

@register_decompose_pass(name="GemmToMatMulAdd", stage=PassStage.BEFORE_INFER_SHAPE,
                         op_types=["Gemm"])
class GemmToMatMulAdd(DecomposePass):
    def meet_requirements(self, node):
        return (node.get_attr("transB") == 1 and node.get_attr("alpha") == 1.0
                and node.get_attr("beta") == 1.0)

    def replacement(self, node):
        builder = GraphBuilder("gemm")
        x, w, b = builder.create_inputs(3)
        return builder.build_and_reset([es.MatMul(x, es.Transpose(w, perm=[1, 0])) {sign} b])
"""


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """A copy of gelu_mlp_opset20 in its own folder."""
    path = tmp_path / "m" / "mlp.onnx"
    path.parent.mkdir()
    shutil.copy(GELU_MLP, path)
    return path


def _plugin(write, *, sign: str = "+") -> Path:
    return write("plugins/gemm.py", DECOMPOSE_GEMM.replace("{sign}", sign))


def _compile_json(*args: str) -> dict:
    code, stdout, stderr = run_ge("compile", *args, "--json")
    assert code == 0, (stdout, stderr)
    data: dict = json.loads(stdout)
    assert Path(data["output"]).is_file()
    return data


def _refused(tmp_path: Path, *args: str, exit_code: int = 1) -> str:
    """`ge compile ARGS` fails with `exit_code`, writes nothing, says it on one line of
    stderr (a GeError) or as click's usage error (exit status 2); returns stderr."""
    before = listing(tmp_path)
    code, stdout, stderr = run_ge("compile", *args)
    assert code == exit_code, (stdout, stderr)
    assert "Traceback" not in stderr
    if exit_code == 1:
        assert stderr.count("\n") == 1, stderr
    assert listing(tmp_path) == before
    return stderr


# -- an optional value: after MODEL, or attached -------------------------------------------


def test_verify_takes_its_mode_as_the_next_word(model: Path, tmp_path: Path, write) -> None:
    # A pass that subtracts the bias instead of adding it: `final` finds the difference in
    # the compiled model, `each-pass` names the pass. Which one ran shows the mode.
    wrong = str(_plugin(write, sign="-"))
    out = str(tmp_path / "out.onnx")
    for args in ((str(model), "--verify", "each-pass", "-o", out),
                 ("--verify=each-pass", str(model), "-o", out)):
        each = _refused(tmp_path, *args, "--pass-path", wrong)
        assert each.startswith("ge: [GE1603] the outputs differ from the original's after "
                               "pass GemmToMatMulAdd"), each
        line = 1 + DECOMPOSE_GEMM.splitlines().index("    def replacement(self, node):")
        assert each.endswith(f", at {wrong}:{line})\n"), each  # what built the nodes
    for args in ((str(model), "--verify", "final", "-o", out),
                 (str(model), "-o", out, "--verify"), (str(model), "--verify", "-o", out)):
        final = _refused(tmp_path, *args, "--pass-path", wrong)
        assert final.startswith("ge: [GE1603] the compiled model's outputs differ from the "
                                "original's: FAILED"), (args, final)
        assert ('(verify="each-pass", --verify each-pass, names the pass that changed them)'
                in final), final


def test_a_plain_check_after_the_model_is_full(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.onnx"
    _compile_json(str(model), "--check", "none", "-o", str(out))
    _compile_json(str(model), "-o", str(out), "--check")
    _compile_json("--check=full", str(model), "-o", str(out))


@pytest.mark.parametrize(("flag", "values"), [("--check", "'region', 'full', 'none'"),
                                              ("--verify", "'final', 'each-pass'")])
def test_a_word_that_is_not_a_mode_is_a_bad_value_with_a_hint(
        model: Path, tmp_path: Path, flag: str, values: str) -> None:
    out = str(tmp_path / "out.onnx")
    for args, word in (((str(model), flag, "bogus", "-o", out), "bogus"),
                       ((flag, str(model), "-o", out), str(model))):
        stderr = _refused(tmp_path, *args, exit_code=2)
        assert f"Invalid value for '{flag}': '{word}' is not one of {values}. To use {flag} " \
               f"without a value, put it after MODEL or write {flag}=VALUE." in stderr


# -- tolerances: they need verification, and must be numbers >= 0 ------------------------------


@pytest.mark.parametrize(("args", "message"), [
    (("--rtol", "0.1"), "--rtol needs --verify (or --inputs or --dims)"),
    (("--atol", "1e-3"), "--atol needs --verify (or --inputs or --dims)"),
    (("--atol", "1e-3", "--rtol", "1e-4"),
     "--rtol and --atol need --verify (or --inputs or --dims)"),
])
def test_a_tolerance_without_verify_is_refused(model: Path, tmp_path: Path,
                                               args: tuple[str, ...], message: str) -> None:
    stderr = _refused(tmp_path, str(model), "-o", str(tmp_path / "out.onnx"), *args)
    assert stderr.startswith(f"ge: [GE1701] {message}: without it nothing is compared"), stderr


def test_a_tolerance_with_inputs_alone_is_used(model: Path, tmp_path: Path) -> None:
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, input=np.random.default_rng(0).standard_normal((4, 32), np.float32))
    data = _compile_json(str(model), "-o", str(tmp_path / "out.onnx"), "--inputs",
                         str(inputs), "--rtol", "0.25", "--atol", "0")
    assert data["verification"]["ok"] is True
    assert (data["verification"]["rtol"], data["verification"]["atol"]) == (0.25, 0.0)


@pytest.mark.parametrize(("flag", "value", "shown"), [
    ("--rtol", "-1", "-1"), ("--atol", "-0.5", "-0.5"), ("--rtol", "nan", "nan"),
    ("--rtol", "inf", "inf"), ("--atol", "inf", "inf"), ("--atol", "nan", "nan"),
    ("--atol", "-inf", "-inf"), ("--rtol", "1e999", "inf")])
@pytest.mark.parametrize("as_json", [False, True])
def test_a_negative_or_non_finite_tolerance_is_a_bad_option_value(
        model: Path, tmp_path: Path, flag: str, value: str, shown: str, as_json: bool) -> None:
    # With inf (or nan, as the comparison is written) verification passed anything.
    message = f"{flag} must be a finite number >= 0, got {shown}"
    args = (str(model), "-o", str(tmp_path / "out.onnx"), "--verify", flag, value)
    if not as_json:
        stderr = _refused(tmp_path, *args)
        assert stderr == f"ge: [GE1202] {message}\n"
        return
    before = listing(tmp_path)
    code, stdout, stderr = run_ge("compile", *args, "--json")
    assert code == 1 and stderr == ""
    error = json.loads(stdout)
    assert (error["code"], error["type"], error["message"]) == (
        "GE1202", "CompilerOptionError", message)
    assert listing(tmp_path) == before


# -- the report: node_delta is signed -----------------------------------------------------------


def test_a_pass_that_adds_nodes_has_a_positive_node_delta(model: Path, tmp_path: Path,
                                                          write) -> None:
    out = tmp_path / "out.onnx"
    data = _compile_json(str(model), "-o", str(out), "--pass-path", str(_plugin(write)),
                         "--verify")
    [row] = [p for p in data["passes"] if p["name"] == "GemmToMatMulAdd"]
    assert "removed_nodes" not in row
    assert row["kind"] == "decompose" and row["rewrites"] == 3
    assert row["node_delta"] == 6  # each of the 3 Gemm nodes became 3 nodes
    [run] = [r for r in data["invocations"] if r["name"] == "GemmToMatMulAdd"]
    assert run["nodes_after"] - run["nodes_before"] == 6
    assert data["ops_before"]["Gemm"] == 3 and "Gemm" not in data["ops_after"]
    assert (data["ops_after"]["MatMul"], data["ops_after"]["Transpose"]) == (3, 3)
    assert data["verification"]["ok"] is True
