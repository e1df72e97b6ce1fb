"""Where the shared real models are: `$GE_SHARED_MODELS`, else `<repo>/../shared/models`.

CI clones the repository next to a copy of `shared/`, so the relative default works there
and on every developer machine. A missing folder or model is an error, never a skip. Test
modules import these helpers to parametrize at collection time; `tests/conftest.py` turns
the folder into the `shared_models` fixture.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_MODELS_ENV = "GE_SHARED_MODELS"


def shared_models_dir() -> Path:
    """The shared models folder: `$GE_SHARED_MODELS`, else `<repo>/../shared/models`."""
    configured = os.environ.get(SHARED_MODELS_ENV)
    return Path(configured) if configured else REPO.parent / "shared" / "models"


def shared_model(name: str) -> Path:
    """The path of one shared model, e.g. `shared_model("control_flow")`."""
    path = shared_models_dir() / f"{name}.onnx"
    if not path.is_file():
        raise FileNotFoundError(
            f"shared model {name!r} not found in {shared_models_dir()}; set {SHARED_MODELS_ENV}"
        )
    return path


def all_shared_models() -> list[Path]:
    """Every shared model, sorted by name (an error when there is none)."""
    models = sorted(shared_models_dir().glob("*.onnx"))
    if not models:
        raise FileNotFoundError(
            f"no shared models in {shared_models_dir()}; set {SHARED_MODELS_ENV}"
        )
    return models
