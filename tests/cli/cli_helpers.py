"""Helpers of the CLI tests: running `ge` in-process or as a subprocess, folder listings."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import onnx
from click.testing import CliRunner

from ge.cli import cli
from model_paths import shared_model

DISTILBERT = shared_model("distilbert_tiny")
SRC = Path(__file__).resolve().parents[2] / "src"


def run_ge(*args: str) -> tuple[int, str, str]:
    """`ge ARGS` in-process: (exit code, stdout, stderr)."""
    result = CliRunner().invoke(cli, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def process_env(env_vars: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a subprocess running this tree's ge: this process's, `env_vars`
    on top, `src` first on PYTHONPATH, no plugin path."""
    env = {**os.environ, **(env_vars or {}), "PYTHONPATH": os.pathsep.join(
        [str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])])}
    env.pop("ASCEND_GE_PY_PASS_PATH", None)
    return env


def run_process(*args: str, cwd: Path | None = None,
                env_vars: Mapping[str, str] | None = None
                ) -> subprocess.CompletedProcess[str]:
    """`python ARGS` in a subprocess (stdout and stderr pipes, so never a terminal), with
    `env_vars` set on top of this process's environment."""
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          cwd=cwd, env=process_env(env_vars), timeout=300, check=False)


def refused_compile(model: onnx.ModelProto, folder: Path, *, verify: bool
                    ) -> tuple[Path, int, str]:
    """`ge compile -q [--verify]` of `model` saved as `folder`/model.onnx, in-process: (that
    file, exit code, stderr), after checking that the command wrote nothing beside it and
    left it as it was (what every refused model must leave)."""
    source = folder / "model.onnx"
    onnx.save(model, source)
    before = source.read_bytes()
    args = ["compile", str(source), "-o", str(folder / "out.onnx"), "-q"]
    result = CliRunner().invoke(cli, args + (["--verify"] if verify else []))
    assert sorted(p.name for p in folder.iterdir()) == ["model.onnx"]
    assert source.read_bytes() == before
    return source, result.exit_code, result.stderr


def listing(folder: Path) -> list[str]:
    """The names under `folder`, recursively, sorted."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


#: A plugin fusing Relu(Neg(x)) into Relu(x) (wrong on purpose: the explain tests only
#: look at where it matches).
RELU_NEG = """
import ge.es.all as es
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass

@register_fusion_pass(name="ReluNeg", stage=PassStage.AFTER_INFER_SHAPE)
class ReluNeg(PatternFusionPass):
    @pattern
    def relu_neg(self, inputs):
        return es.Relu(es.Neg(inputs[0]))

    def replacement(self, inputs):
        return es.Relu(inputs[0])
"""
