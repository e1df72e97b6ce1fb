"""Where the shared real models are: `$GE_SHARED_MODELS`, else `<repo>/../shared/models`.

CI clones the repository next to a copy of `shared/`, so the relative default works there
and on every developer machine. A missing folder is an error, never a skip.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_MODELS = Path(os.environ.get("GE_SHARED_MODELS") or REPO.parent / "shared" / "models")

if not SHARED_MODELS.is_dir():
    raise RuntimeError(
        f"shared models folder not found at {SHARED_MODELS}; set GE_SHARED_MODELS to the "
        "folder holding the shared *.onnx models"
    )


def shared_model(name: str) -> Path:
    """The path of one shared model, e.g. `shared_model("control_flow")`."""
    path = SHARED_MODELS / f"{name}.onnx"
    if not path.is_file():
        raise FileNotFoundError(f"shared model {name!r} not found in {SHARED_MODELS}")
    return path


def all_shared_models() -> list[Path]:
    """Every shared model, sorted by name."""
    return sorted(SHARED_MODELS.glob("*.onnx"))
