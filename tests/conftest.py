"""Fixtures shared by every test folder: where the real ONNX model corpus lives.

The models exported from PyTorch are vendored in `tests/models/` (see its README.md). Tests
that need them fail (never skip) when the folder is missing or empty, so a missing corpus
cannot pass for a green run.

The tests build their models with `onnx.helper.make_model`, which stamps the newest IR
version the installed onnx knows; `pytest_configure` has it stamp the newest one the
installed onnxruntime reads as well (`ge._compat`), so that an onnxruntime older than onnx
(onnxruntime 1.23 with onnx 1.23 on Python 3.10) runs them. An explicit `ir_version=` wins.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from model_paths import shared_models_dir


def pytest_configure(config: pytest.Config) -> None:
    """Test models get an IR version the installed onnxruntime reads (see the module)."""
    import functools

    from onnx import helper

    from ge._compat import new_model_ir_version

    if getattr(helper.make_model, "__ge_runtime_ir__", False):
        return
    original = helper.make_model

    @functools.wraps(original)
    def make_model(graph: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("ir_version", new_model_ir_version())
        return original(graph, **kwargs)

    make_model.__ge_runtime_ir__ = True  # type: ignore[attr-defined]
    helper.make_model = make_model


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
