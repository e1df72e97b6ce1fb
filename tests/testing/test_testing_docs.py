"""docs/testing.md works as printed: its plugin and test file pass under `python -m pytest`,
and its sample failure is what `assert_rewrites` says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from ge.passes.bootstrap import ENV_PY_PASS_PATH
from ge.testing import assert_rewrites, load_passes, make_model, tensor

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def _files() -> dict[str, str]:
    """The python blocks that start with `# <path>`, by path."""
    blocks = re.findall(r"```python\n# (\S+)\n(.*?)```", DOC.read_text(), re.S)
    return {path: f"# {path}\n{body}" for path, body in blocks}


def _write_example(folder: Path) -> None:
    for path, source in _files().items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source)


def test_the_doc_has_the_plugin_and_the_test_file() -> None:
    assert sorted(_files()) == ["my_passes/fuse_matmul_add.py", "tests/test_fuse_matmul_add.py"]


@pytest.mark.slow
def test_the_example_test_file_passes(tmp_path: Path) -> None:
    _write_example(tmp_path)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_ADDOPTS", ENV_PY_PASS_PATH)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--rootdir", ".",
         "tests/test_fuse_matmul_add.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "4 passed" in run.stdout


def test_the_sample_failure_is_what_assert_rewrites_says(tmp_path: Path) -> None:
    _write_example(tmp_path)
    samples = re.findall(r"```\n(E   AssertionError: FuseMatMulAdd.*?)```", DOC.read_text(), re.S)
    assert len(samples) == 1
    expected = [line[4:] for line in samples[0].splitlines()]
    expected[0] = expected[0].removeprefix("AssertionError: ")
    model = make_model(
        [helper.make_node("MatMul", ["x", "w"], ["t"], name="mm"),
         helper.make_node("Add", ["t", "b"], ["y"], name="add")],
        [("x", [2, 3])], [("y", [2, 4])],
        [tensor("w", np.ones((3, 4))), tensor("b", np.arange(4.0))])
    with load_passes(tmp_path / "my_passes") as passes, \
            pytest.raises(AssertionError) as caught:
        assert_rewrites("FuseMatMulAdd", model, 2, passes=passes)
    assert str(caught.value).splitlines() == expected
