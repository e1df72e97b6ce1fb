"""The Python examples of docs/compiler.md and docs/session.md run as printed.

Each block runs in a fresh folder holding the model files the docs name (`model.onnx` and
`tests/models/distilbert_tiny.onnx`, both the vendored DistilBERT)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from low_bit_models import EXCHANGE
from model_paths import shared_model
from plugin_fixtures import clean_plugin_state  # noqa: F401  (no plugin outlives the test)

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("compiler.md", "session.md")


def _blocks() -> list[tuple[str, int, str]]:
    found = []
    for doc in DOCS:
        for i, body in enumerate(re.findall(r"```python\n(.*?)```",
                                            (ROOT / "docs" / doc).read_text(), re.S)):
            found.append((doc, i, body))
    return found


@pytest.mark.builtin_passes
@pytest.mark.parametrize("doc,index,code", _blocks(), ids=lambda v: str(v)[:20])
def test_the_docs_example_runs(doc: str, index: int, code: str, tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    if "ml_dtypes" in code and not EXCHANGE:  # session.md's float8/int4 inputs and outputs
        pytest.skip("this onnxruntime makes no OrtValue of float8 or 4-bit values")
    model = shared_model("distilbert_tiny")
    shutil.copy(model, tmp_path / "model.onnx")
    (tmp_path / "tests" / "models").mkdir(parents=True)
    shutil.copy(model, tmp_path / "tests" / "models" / model.name)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"docs/{doc} block {index}", "exec"), {"__name__": "__docs__"})
    if "result.save(" in code:
        assert (tmp_path / "model.compiled.onnx").is_file()
