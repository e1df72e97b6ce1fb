"""The pytest plugin of `ge` (entry point `ge` of the group `pytest11`): fixtures for
testing pass plugins. None is autouse: installing `ge` changes nothing for a test that does
not ask for one. Importing this module imports only pytest; `ge.testing` loads when a
fixture is first used.

- `ge_isolated`: no plugin loaded, no pass registered, no `ASCEND_GE_PY_PASS_PATH`, the
  compiler finalized, before and after the test; installed plugins (entry points) not
  autoloaded unless the test is marked `@pytest.mark.ge_entry_points`; `sys.path` and the
  plugin modules (and modules imported from the test's temporary folders) restored after it.
- `ge_passes`: `ge_passes(path_or_paths) -> PassSet`, plugin files and folders loaded into
  a set of their own (`ge.testing.load_passes`), unloaded after the test.
- `ge_model`: `ge.testing.make_model`, a checked ONNX model in one call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ge.testing.passes import PassPaths, PassSet

__all__ = ["ENTRY_POINTS_MARKER", "ge_isolated", "ge_model", "ge_passes", "pytest_configure"]

#: The marker with which a test using `ge_isolated` asks for installed plugins to autoload.
ENTRY_POINTS_MARKER = "ge_entry_points"


def pytest_configure(config: pytest.Config) -> None:
    """Register the plugin's marker (so that `--strict-markers` accepts it)."""
    config.addinivalue_line(
        "markers", f"{ENTRY_POINTS_MARKER}: under ge_isolated, installed pass plugins (entry "
        "points of ge.passes.plugins) autoload as in a fresh process")


@pytest.fixture
def ge_isolated(request: pytest.FixtureRequest,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Compiler, pass registry and plugin modules reset before and after the test; installed
    plugins are not autoloaded unless the test is marked `ge_entry_points`."""
    from ge.testing.isolation import isolated_plugin_state

    wanted = request.node.get_closest_marker(ENTRY_POINTS_MARKER) is not None
    with isolated_plugin_state(module_roots=[tmp_path_factory.getbasetemp()],
                               entry_points=wanted):
        yield


@pytest.fixture
def ge_passes() -> Iterator[Callable[[PassPaths], PassSet]]:
    """A factory: `ge_passes(path_or_paths)` loads plugin files or folders into a new
    `PassSet` (an isolated registry); every set is closed after the test."""
    from ge.testing.passes import load_passes

    sets: list[PassSet] = []

    def load(path_or_paths: PassPaths) -> PassSet:
        __tracebackhide__ = True
        loaded = load_passes(path_or_paths)
        sets.append(loaded)
        return loaded

    yield load
    for loaded in reversed(sets):
        loaded.close()


@pytest.fixture
def ge_model() -> Callable[..., Any]:
    """`ge.testing.make_model`: `ge_model(nodes, inputs, outputs, initializers=(), opset=17)`
    is a checked `onnx.ModelProto`; inputs and outputs may be `(name, shape[, dtype])`."""
    from ge.testing.models import make_model

    return make_model
