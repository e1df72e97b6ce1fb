"""Fixtures shared by every test folder: where the real ONNX model corpus lives.

The models exported from PyTorch are vendored in `tests/models/` (see its README.md). Tests
that need them fail (never skip) when the folder is missing or empty, so a missing corpus
cannot pass for a green run.

The tests build their models with `onnx.helper.make_model`, which stamps the newest IR
version the installed onnx knows; `pytest_configure` has it stamp the newest one the
installed onnxruntime reads as well (`ge._compat`), so that an onnxruntime older than onnx
(onnxruntime 1.23 with onnx 1.23 on Python 3.10) runs them. An explicit `ir_version=` wins.

The CLI tests read `CliRunner` results as click 8.2 gives them: `stderr` apart, `output` all
the terminal shows. Under click 8.1 (which mixes stderr into stdout unless told not to)
`click.testing.CliRunner` is replaced before the test modules import it (`_CliRunner81`).
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from model_paths import shared_models_dir

if TYPE_CHECKING:
    from ge.graph import Graph


def _uniform_cli_runner() -> None:
    """Under click 8.1, a `CliRunner` that captures stderr apart, as click 8.2 does, and whose
    results' `output` is stdout then stderr (8.2 interleaves them as written)."""
    import contextlib
    import inspect
    import sys

    import click.testing

    base = click.testing.CliRunner
    if "mix_stderr" not in inspect.signature(base.__init__).parameters:
        return  # click 8.2 or later

    class _Result81(click.testing.Result):
        @property
        def output(self) -> str:
            return self.stdout + (self.stderr if self.stderr_bytes is not None else "")

    class _CliRunner81(base):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("mix_stderr", False)
            super().__init__(*args, **kwargs)

        @contextlib.contextmanager
        def isolation(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
            # 8.1 reads the stderr buffer without flushing the text stream over it: a
            # print() to sys.stderr (as `--json` redirects a pass's prints) would be lost
            with super().isolation(*args, **kwargs) as streams:
                sys.stderr.reconfigure(write_through=True)  # type: ignore[union-attr]
                yield streams

        def invoke(self, *args: Any, **kwargs: Any) -> click.testing.Result:
            result = super().invoke(*args, **kwargs)
            result.__class__ = _Result81
            return result

    click.testing.CliRunner = _CliRunner81  # type: ignore[misc]


_uniform_cli_runner()


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


@pytest.fixture(autouse=True)
def _terminal_width_of_a_pipe() -> Iterator[None]:
    """The CLI's tables at the width ge gives output that is no terminal (160 columns),
    whatever terminal the suite is run from: an exported COLUMNS (rich reads it) narrowed
    them, and 47 CLI tests reading a row on one line failed under COLUMNS=60. A test
    about a width sets COLUMNS itself (its own `monkeypatch`, or the runner's `env=`)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("COLUMNS", raising=False)
        patch.delenv("LINES", raising=False)
        yield


@pytest.fixture
def collector_off() -> Iterator[None]:
    """The cyclic collector disabled for the test: what is freed, reference counting freed."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@pytest.fixture
def made_graphs(monkeypatch: pytest.MonkeyPatch, collector_off: None
                ) -> Callable[..., list[Graph]]:
    """`made_graphs(name=None)`: the graphs made while the test runs that are still alive
    (weakly held; those named `name` only, if given), with the cyclic collector off, so that
    what is freed was freed by reference counting."""
    from ge.graph import Graph

    made: list[weakref.ref[Graph]] = []
    init = Graph.__init__

    def recording(self: Graph, name: str | None = "graph") -> None:
        init(self, name)
        made.append(weakref.ref(self))

    monkeypatch.setattr(Graph, "__init__", recording)

    def alive(name: str | None = None) -> list[Graph]:
        return [g for g in (ref() for ref in made)
                if g is not None and (name is None or g.name == name)]

    return alive


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
