"""Fixtures shared by every test folder: where the shared ONNX model corpus lives.

The models exported from PyTorch live outside the repository, in `$GE_SHARED_MODELS` or else
`<repo>/../shared/models`. Tests that need them fail (never skip) when the folder is missing,
so a missing corpus cannot pass for a green run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from model_paths import SHARED_MODELS_ENV, shared_models_dir


@pytest.fixture(scope="session")
def shared_models() -> Path:
    """The path of the shared models folder; the test fails when it is missing or empty."""
    folder = shared_models_dir()
    source = (f"${SHARED_MODELS_ENV}" if os.environ.get(SHARED_MODELS_ENV)
              else f"the default <repo>/../shared/models (set ${SHARED_MODELS_ENV} to change it)")
    if not folder.is_dir():
        pytest.fail(f"shared models folder {folder} does not exist; it comes from {source}",
                    pytrace=False)
    if not any(folder.glob("*.onnx")):
        pytest.fail(f"shared models folder {folder} holds no .onnx file; it comes from {source}",
                    pytrace=False)
    return folder


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`shared_model` parametrizes a test over the stems of the shared `.onnx` files."""
    if "shared_model" in metafunc.fixturenames:
        folder = shared_models_dir()
        names = sorted(p.stem for p in folder.glob("*.onnx")) if folder.is_dir() else []
        # With no model found, one placeholder case runs and `shared_models` fails it.
        metafunc.parametrize("shared_model", names or ["no-shared-models"])
