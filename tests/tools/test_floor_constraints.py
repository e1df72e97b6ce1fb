"""`tools/floor_constraints.py`, which pins `make test-floors` (and CI's second run) to the
oldest dependency versions pyproject.toml admits."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "floor_constraints.py"

tool = load_script(TOOL, "_ge_floor_constraints")


def _declared_runtime_floors() -> dict[str, str]:
    """`name -> floor` of pyproject's [project] dependencies, read from the file itself."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = re.search(r"^dependencies = \[(.*?)^\]", text, re.S | re.M)
    assert block is not None
    return dict(re.findall(r'^\s*"([A-Za-z0-9._-]+)>=([0-9.]+)(?:,[^"]*)?"', block.group(1),
                           re.M))


def test_every_runtime_dependency_is_pinned_to_its_floor() -> None:
    declared = _declared_runtime_floors()
    assert set(declared) == {"onnx", "onnxruntime", "numpy", "ml_dtypes", "click", "rich"}
    pins = tool.floor_constraints([f"{name}>={floor}" for name, floor in declared.items()])
    assert pins == [f"{name}=={floor}" for name, floor in declared.items()]


def test_the_installed_metadata_gives_the_same_pins() -> None:
    """What CI runs: the tool on the metadata of the installed ge (an editable install of
    this tree), extras left out."""
    done = subprocess.run([sys.executable, str(TOOL)], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == [f"{n}=={f}" for n, f in _declared_runtime_floors().items()]


def test_extras_are_left_out_and_other_markers_kept() -> None:
    """An extra's requirement is no runtime dependency; one for some Pythons only is pinned
    with its marker (it was left out, so never tested at its floor; trial L)."""
    assert tool.floor_constraints([
        'pytest>=8; extra == "dev"', "onnx[reference]>=1.19",
        'tomli>=2; python_version < "3.11"']) == [
        "onnx==1.19", 'tomli==2; python_version < "3.11"']


def test_excluded_releases_beside_the_floor_are_allowed() -> None:
    """A release known bad excluded beside the floor, in the order the metadata writes it
    (`ml_dtypes!=0.7.0,>=0.5.0`, from pyproject's `>=0.5.0,!=0.7.0`); anything else than one
    floor and exclusions is still refused."""
    assert tool.floor_constraints(["ml_dtypes!=0.7.0,>=0.5.0", "a>=1, != 1.2.*"]) == [
        "ml_dtypes==0.5.0", "a==1"]
    for bad in ("b<2,>=1", "c!=1", "d>=1,>=2", "e"):
        with pytest.raises(ValueError, match="has no single '>=' floor"):
            tool.floor_constraints([bad])


def test_without_ge_installed_it_says_so_in_one_line(tmp_path: Path) -> None:
    """Run by a Python without ge: one line and status 1, not a traceback."""
    base = getattr(sys, "_base_executable", sys.executable)  # the venv's own Python
    done = subprocess.run([base, "-I", str(TOOL)], capture_output=True, text=True,
                          check=False, cwd=tmp_path)
    if done.returncode == 0:
        pytest.skip(f"ge is installed in {base} itself")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith("floor_constraints: ge is not installed in this Python")


@pytest.mark.parametrize("requirement", ["onnx", "onnx<2", "onnx>=1.19,<2", "onnx==1.19"])
def test_a_dependency_without_a_single_floor_is_refused(requirement: str) -> None:
    """It could not be pinned, so the floors run would not test it."""
    with pytest.raises(ValueError, match="has no single '>=' floor"):
        tool.floor_constraints([requirement])


def test_help_says_what_it_does_and_an_argument_is_refused(capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    """Trial AI: `--help` was ignored and printed the pins."""
    assert tool.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Print pip constraints that pin every runtime dependency of ge")
    assert "==" not in out
    assert tool.main(["--floors"]) == 2
    assert capsys.readouterr().err == "floor_constraints: takes no argument, got --floors\n"
