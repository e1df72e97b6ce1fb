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
    return dict(re.findall(r'^\s*"([A-Za-z0-9._-]+)>=([0-9.]+)"', block.group(1), re.M))


def test_every_runtime_dependency_is_pinned_to_its_floor() -> None:
    declared = _declared_runtime_floors()
    assert set(declared) == {"onnx", "onnxruntime", "numpy", "click", "rich"}
    pins = tool.floor_constraints([f"{name}>={floor}" for name, floor in declared.items()])
    assert pins == [f"{name}=={floor}" for name, floor in declared.items()]


def test_the_installed_metadata_gives_the_same_pins() -> None:
    """What CI runs: the tool on the metadata of the installed ge (an editable install of
    this tree), extras left out."""
    done = subprocess.run([sys.executable, str(TOOL)], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == [f"{n}=={f}" for n, f in _declared_runtime_floors().items()]


def test_extras_and_markers_are_not_runtime_dependencies() -> None:
    assert tool.floor_constraints(['pytest>=8; extra == "dev"', "onnx[reference]>=1.19"]) == [
        "onnx==1.19"]


@pytest.mark.parametrize("requirement", ["onnx", "onnx<2", "onnx>=1.19,<2", "onnx==1.19"])
def test_a_dependency_without_a_single_floor_is_refused(requirement: str) -> None:
    """It could not be pinned, so the floors run would not test it."""
    with pytest.raises(ValueError, match="has no single '>=' floor"):
        tool.floor_constraints([requirement])
