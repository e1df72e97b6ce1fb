"""`ge.testing`: testing pass plugins, and a pytest plugin (`-p ge`, installed as the
`pytest11` entry point `ge`).

- `load_passes(paths) -> PassSet`: plugin files and folders in a registry of their own.
- `run_pass(pass, model)`, `apply_pass(...)`: one pass run as the engine runs it;
  `find_matches(pass, model)`: what a pattern pass would rewrite.
- `assert_matches`, `assert_rewrites`, `assert_numerically_equal`: assertions whose
  failures show the region of the graph concerned or the outputs that differ.
- `isolated_plugin_state()`, `reset_plugin_state()`: compiler, registry and plugin modules
  reset around a test; `make_model`, `tensor`: small ONNX models.

Fixtures (`ge.testing.plugin`, none autouse): `ge_isolated`, `ge_passes`, `ge_model`.
Names resolve on first use, so importing the package (and the pytest plugin) is cheap.
See docs/testing.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ge.testing.assertions import (
        assert_matches,
        assert_numerically_equal,
        assert_rewrites,
        describe_matches,
    )
    from ge.testing.isolation import (
        isolated_plugin_state,
        purge_plugin_modules,
        reset_plugin_state,
    )
    from ge.testing.models import make_model, tensor
    from ge.testing.passes import PassSet, load_passes
    from ge.testing.regions import describe_region
    from ge.testing.running import (
        PassApplication,
        apply_pass,
        as_graph,
        find_matches,
        is_typed,
        resolve_pass,
        run_pass,
    )

#: Names resolved on first use, and the module each lives in.
_LAZY = {
    "assert_matches": "ge.testing.assertions",
    "assert_numerically_equal": "ge.testing.assertions",
    "assert_rewrites": "ge.testing.assertions",
    "describe_matches": "ge.testing.assertions",
    "isolated_plugin_state": "ge.testing.isolation",
    "purge_plugin_modules": "ge.testing.isolation",
    "reset_plugin_state": "ge.testing.isolation",
    "make_model": "ge.testing.models",
    "tensor": "ge.testing.models",
    "PassSet": "ge.testing.passes",
    "load_passes": "ge.testing.passes",
    "describe_region": "ge.testing.regions",
    "PassApplication": "ge.testing.running",
    "apply_pass": "ge.testing.running",
    "as_graph": "ge.testing.running",
    "find_matches": "ge.testing.running",
    "is_typed": "ge.testing.running",
    "resolve_pass": "ge.testing.running",
    "run_pass": "ge.testing.running",
}

__all__ = [
    "PassApplication",
    "PassSet",
    "apply_pass",
    "as_graph",
    "assert_matches",
    "assert_numerically_equal",
    "assert_rewrites",
    "describe_matches",
    "describe_region",
    "find_matches",
    "is_typed",
    "isolated_plugin_state",
    "load_passes",
    "make_model",
    "purge_plugin_modules",
    "reset_plugin_state",
    "resolve_pass",
    "run_pass",
    "tensor",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ge.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
