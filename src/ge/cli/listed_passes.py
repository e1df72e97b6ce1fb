"""The passes a compilation would use, loaded for `ge passes list` and `ge passes explain`.

Reads `ASCEND_GE_PY_PASS_PATH` like the compiler, plus `--pass-path` items, then the entry
points (unless autoload is turned off). Every plugin is tried (continue-on-error); a path
that does not exist (or a file not ending in `.py`) is one more failure beside the plugins
that did load: the compiler refuses such a path before importing anything (spec D6), but a
listing is where one goes to find out what is wrong. The plugins stay loaded only for the
block that uses them (`loaded_passes`).
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import click

from ge.compiler.options import CompilerOptions, unknown_ge_options
from ge.compiler.options import parse_options as compiler_options
from ge.compiler.pass_registry import PassRegistry, RegisteredPass
from ge.compiler.plugin_loader import PASS_PATH_IN_ENV, PluginLoader
from ge.errors import CompileWarning, GeError, PluginLoadError, PluginLoadWarning
from ge.passes.bootstrap import ENV_PY_PASS_PATH
from ge.passes.discovery import given_paths, normalize_path_list, plugin_sources
from ge.passes.loader import PluginLoadReport
from ge.passes.plugin_names import merged_clashes

__all__ = ["FoundPasses", "listing_options", "loaded_passes", "pass_path_option"]


#: `--pass-path` of `ge passes list` and `ge passes explain`.
pass_path_option = click.option(
    "--pass-path",
    "pass_paths",
    multiple=True,
    type=click.Path(),
    help="A pass plugin file or directory to load besides ASCEND_GE_PY_PASS_PATH (repeatable).",
)


def listing_options(values: Mapping[str, str], disabled: Sequence[str]) -> CompilerOptions:
    """`--option` values checked as a compilation checks them, with a warning for each key
    of ge's namespace that ge does not know (as `ge compile` gives), plugin failures
    continued from (a listing shows them) and `disabled` entry points left out."""
    parsed = compiler_options(dict(values))
    for text in unknown_ge_options(parsed.values):
        warnings.warn(CompileWarning(text), stacklevel=2)
    return dataclasses.replace(parsed, continue_on_plugin_error=True,
                               disabled_plugins=parsed.disabled_plugins | frozenset(disabled))


def _usable_paths(items: Iterable[str | os.PathLike[str]],
                  failures: list[GeError], source: str) -> list[Path]:
    """The pass-path items discovery can load; each missing path or non-`.py` file goes to
    `failures` instead (discovery would raise it before loading any other item), saying
    where it came from."""
    usable: list[Path] = []
    for item in given_paths(items, "--pass-path"):
        try:
            plugin_sources(item)
        except PluginLoadError as err:
            err.message += f" ({source})"
            failures.append(err)
        else:
            usable.append(item)
    return usable


@dataclasses.dataclass
class FoundPasses:
    """What a listing found: the passes that loaded, every load failure (bad paths
    included), the disabled entry points."""

    entries: list[RegisteredPass]
    failures: list[GeError]
    disabled: list[str]


@contextmanager
def loaded_passes(pass_paths: Sequence[str], options: CompilerOptions) -> Iterator[FoundPasses]:
    """Load the plugins a compilation with `options` and `pass_paths` would, for the
    duration of the block: at its end they are unloaded (their passes unregistered, their
    modules dropped), so a process that lists or explains, then compiles or explains
    another file with the same pass names, starts clean."""
    bad_env: list[GeError] = []
    env_paths = _usable_paths(normalize_path_list(os.environ.get(ENV_PY_PASS_PATH, "")),
                              bad_env, PASS_PATH_IN_ENV)
    loader = PluginLoader({**os.environ,
                           ENV_PY_PASS_PATH: os.pathsep.join(str(p) for p in env_paths)})
    try:
        yield _collect(loader, bad_env, pass_paths, options)
    finally:
        loader.unload()


def _collect(loader: PluginLoader, bad_env: list[GeError], pass_paths: Sequence[str],
             options: CompilerOptions) -> FoundPasses:
    with warnings.catch_warnings():  # failures are listed, not warned about
        warnings.simplefilter("ignore", PluginLoadWarning)
        batches: list[tuple[list[GeError], PluginLoadReport]] = [
            (bad_env, loader.load_from_environment(options))]
        if pass_paths:
            bad_flags: list[GeError] = []
            usable = _usable_paths(pass_paths, bad_flags, "given with --pass-path")
            batches.append((bad_flags, loader.load_paths(usable, options) if usable
                            else PluginLoadReport()))
    registry = PassRegistry.with_builtins()
    failures: list[GeError] = []
    disabled_found: list[str] = []
    for bad_paths, report in batches:
        failures += bad_paths
        failures += [f for f in report.failures if all(f is not g for g in failures)]
        disabled_found += [d for d in report.disabled if d not in disabled_found]
        for plugin in report.plugins:
            try:
                registry.add_plugin(plugin)
            except GeError as err:
                failures.append(err)
    return FoundPasses(registry.passes(),
                       merged_clashes(failures, options.disabled_plugins), disabled_found)


