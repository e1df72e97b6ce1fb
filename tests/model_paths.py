"""Where the real models are: `tests/models/`, vendored in the repository.

The models exported from PyTorch (and their `.json` sidecars) are committed under
`tests/models/`, so a fresh clone tests with no other checkout. A missing folder or model
is an error, never a skip. Test modules import these helpers to parametrize at collection
time; `tests/conftest.py` turns the folder into the `shared_models` fixture.
"""

from __future__ import annotations

from pathlib import Path

MODELS_DIR = Path(__file__).resolve().parent / "models"


def shared_models_dir() -> Path:
    """The vendored models folder, `tests/models/`."""
    return MODELS_DIR


def shared_model(name: str) -> Path:
    """The path of one vendored model, e.g. `shared_model("control_flow")`."""
    path = MODELS_DIR / f"{name}.onnx"
    if not path.is_file():
        raise FileNotFoundError(f"model {name!r} not found in {MODELS_DIR}")
    return path


def all_shared_models() -> list[Path]:
    """Every vendored model, sorted by name (an error when there is none)."""
    models = sorted(MODELS_DIR.glob("*.onnx"))
    if not models:
        raise FileNotFoundError(f"no .onnx model in {MODELS_DIR}")
    return models
