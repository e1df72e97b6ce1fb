"""Plugin isolation: the compiler, the pass registry and the plugin modules reset around a test.

`reset_plugin_state()` finalizes the compiler (its loader unloads the plugins it loaded),
unloads every plugin the process loaded and forgets every registration.
`isolated_plugin_state()` does that before and after its block, and also gives back what
plugins leave in the process: `sys.path` as it was, `ASCEND_GE_PY_PASS_PATH` unset inside
and restored after, and the plugin modules (`_ge_py_pass_*`, and any module imported from
inside `module_roots` during the block, such as a test's temporary folders) dropped from
`sys.modules`.
Installed plugins (entry points of `ge.passes.plugins`) do not load inside either:
`GE_DISABLE_PLUGIN_AUTOLOAD=1` is set for the block (restored after), so a test sees the
passes it loads itself and not those of whatever distributions the environment has, and
the subprocesses it starts inherit that. `entry_points=True` is the explicit opt-in: the
variable is removed for the block and installed plugins autoload as in a fresh process.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, MutableMapping
from contextlib import contextmanager

__all__ = ["isolated_plugin_state", "purge_plugin_modules", "reset_plugin_state"]

#: The prefix of the module names standalone plugin files are imported under.
PLUGIN_MODULE_PREFIX = "_ge_py_pass_"


def reset_plugin_state() -> None:
    """Finalize the compiler, unload every plugin and clear the `ge.passes` registry."""
    import ge.compiler
    from ge.passes import clear_registered_passes
    from ge.passes.loader import unload_all

    ge.compiler.finalize()
    unload_all()
    clear_registered_passes()


def purge_plugin_modules(
    module_roots: Iterable[str | os.PathLike[str]] = (),
    *,
    among: Iterable[str] | None = None,
) -> list[str]:
    """Drop plugin modules from `sys.modules`: standalone plugin files and every module whose
    file lies inside one of `module_roots`; returns the names dropped. `among` limits the
    look at files to those module names (resolving every module's file path costs ~40 ms in
    a process that has imported onnx, onnxruntime and pytest; per test, that added up)."""
    roots = [os.path.realpath(root) for root in module_roots]
    candidates = set(sys.modules) if among is None else set(among)
    dropped = []
    for name, module in list(sys.modules.items()):
        inside = False
        if roots and name in candidates:
            file = getattr(module, "__file__", None)
            inside = isinstance(file, str) and any(
                os.path.realpath(file).startswith(root + os.sep) for root in roots)
        if name.startswith(PLUGIN_MODULE_PREFIX) or inside:
            del sys.modules[name]
            dropped.append(name)
    return dropped


def _restore(env: MutableMapping[str, str], key: str, value: str | None) -> None:
    if value is None:
        env.pop(key, None)
    else:
        env[key] = value


@contextmanager
def isolated_plugin_state(
    *,
    module_roots: Iterable[str | os.PathLike[str]] = (),
    environ: MutableMapping[str, str] | None = None,
    entry_points: bool = False,
) -> Iterator[None]:
    """Run the block with no plugin loaded, no pass registered, no pass path in the
    environment (`environ`, default `os.environ`) and installed plugins not autoloaded
    (`GE_DISABLE_PLUGIN_AUTOLOAD=1`; `entry_points=True` lets them load), and leave the
    process so afterwards: both variables and `sys.path` restored, plugin modules (and
    modules the block imported from `module_roots`) unimported."""
    from ge.compiler.plugin_loader import ENV_DISABLE_PLUGIN_AUTOLOAD
    from ge.passes.bootstrap import ENV_PY_PASS_PATH

    env = os.environ if environ is None else environ
    roots = list(module_roots)
    saved_path = list(sys.path)
    modules_before = dict(sys.modules)
    saved_env = env.pop(ENV_PY_PASS_PATH, None)
    saved_autoload = env.pop(ENV_DISABLE_PLUGIN_AUTOLOAD, None)
    if not entry_points:
        env[ENV_DISABLE_PLUGIN_AUTOLOAD] = "1"
    try:
        reset_plugin_state()
        yield
    finally:
        try:
            reset_plugin_state()
        finally:
            sys.path[:] = saved_path
            purge_plugin_modules(
                roots, among=[name for name, module in sys.modules.items()
                              if modules_before.get(name) is not module])
            _restore(env, ENV_PY_PASS_PATH, saved_env)
            _restore(env, ENV_DISABLE_PLUGIN_AUTOLOAD, saved_autoload)
