"""Fixtures shared by every test folder: where the real ONNX model corpus lives.

The models exported from PyTorch are vendored in `tests/models/` (see its README.md). Tests
that need them fail (never skip) when the folder is missing or empty, so a missing corpus
cannot pass for a green run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from model_paths import shared_models_dir


@pytest.fixture(scope="session")
def shared_models() -> Path:
    """The path of the models folder; the test fails when it is missing or empty."""
    folder = shared_models_dir()
    if not folder.is_dir():
        pytest.fail(f"models folder {folder} does not exist (it is part of the repository)",
                    pytrace=False)
    if not any(folder.glob("*.onnx")):
        pytest.fail(f"models folder {folder} holds no .onnx file (it is part of the repository)",
                    pytrace=False)
    return folder


@pytest.fixture(params=["search", "plans"])
def matching(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test twice: patterns matched by `Matcher`'s search as on small graphs, and by
    their match plans from the first candidate on (`ge.passes.match_plan`), as on large
    graphs; the outcome must be the same."""
    import ge.passes.matcher

    if request.param == "plans":
        monkeypatch.setattr(ge.passes.matcher, "PLAN_AFTER", 0)
    return str(request.param)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`shared_model` parametrizes a test over the stems of the vendored `.onnx` files."""
    if "shared_model" in metafunc.fixturenames:
        folder = shared_models_dir()
        names = sorted(p.stem for p in folder.glob("*.onnx")) if folder.is_dir() else []
        # With no model found, one placeholder case runs and `shared_models` fails it.
        metafunc.parametrize("shared_model", names or ["no-shared-models"])
