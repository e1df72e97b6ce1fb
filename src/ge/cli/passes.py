"""`ge passes list`: every pass the compiler would use, where it came from, and load failures.

Reads `ASCEND_GE_PY_PASS_PATH` like the compiler, plus `--pass-path` items, then the entry
points; every plugin is tried (continue-on-error), and the exit status is 1 if any failed.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence

import click
from rich.console import Console
from rich.table import Table

from ge.compiler.options import CompilerOptions
from ge.compiler.pass_registry import PassRegistry, RegisteredPass
from ge.compiler.plugin_loader import PluginLoader
from ge.errors import GeError, PluginLoadWarning
from ge.passes.loader import PluginLoadReport
from ge.passes.stage import PassStage

__all__ = ["passes"]


@click.group()
def passes() -> None:
    """Inspect the passes the compiler would run."""


def _collect(
    pass_paths: Sequence[str], disabled: Sequence[str]
) -> tuple[list[RegisteredPass], list[GeError], list[str]]:
    options = CompilerOptions(continue_on_plugin_error=True, disabled_plugins=frozenset(disabled))
    loader = PluginLoader()
    with warnings.catch_warnings():  # failures are listed, not warned about
        warnings.simplefilter("ignore", PluginLoadWarning)
        reports: list[PluginLoadReport] = [loader.load_from_environment(options)]
        if pass_paths:
            reports.append(loader.load_paths(pass_paths, options))
    registry = PassRegistry.with_builtins()
    failures: list[GeError] = []
    disabled_found: list[str] = []
    for report in reports:
        failures += [f for f in report.failures if all(f is not g for g in failures)]
        disabled_found += [d for d in report.disabled if d not in disabled_found]
        for plugin in report.plugins:
            try:
                registry.add_plugin(plugin)
            except GeError as err:
                failures.append(err)
    return registry.passes(), failures, disabled_found


def _pass_dict(entry: RegisteredPass) -> dict[str, object]:
    d = entry.descriptor
    return {
        "name": d.pass_name,
        "kind": d.kind,
        "stage": d.stage.value,
        "op_types": list(d.op_types),
        "class": f"{d.module_name}.{d.class_name}",
        "descriptor_key": d.descriptor_key,
        "origin": entry.origin.as_dict(),
        "source": str(entry.origin),
    }


def _failure_dict(err: GeError) -> dict[str, object]:
    data = err.details()
    cause = err.__cause__
    data["exception"] = f"{type(cause).__name__}: {cause}" if cause is not None else None
    return data


def _print_tables(
    entries: list[RegisteredPass], failures: list[GeError], disabled: list[str]
) -> None:
    console = Console(soft_wrap=False)
    table = Table(title=f"Passes ({len(entries)})")
    for column in ("Name", "Kind", "Stage", "Op types", "Source"):
        table.add_column(column, overflow="fold")
    stage_order = {stage: i for i, stage in enumerate(PassStage)}
    for entry in sorted(entries, key=lambda e: (stage_order[e.stage], e.name)):
        d = entry.descriptor
        table.add_row(
            d.pass_name, d.kind, d.stage.value, ", ".join(d.op_types) or "-", str(entry.origin)
        )
    console.print(table)
    if disabled:
        console.print(f"Disabled entry points: {', '.join(disabled)}")
    if failures:
        errors = Table(title=f"Load failures ({len(failures)})", style="red")
        for column in ("Code", "Where", "Error"):
            errors.add_column(column, overflow="fold")
        for err in failures:
            where = str(err.location) if err.location else (err.path or "-")
            errors.add_row(err.code, where, err.message)
        console.print(errors)


@passes.command("list")
@click.option(
    "--pass-path",
    "pass_paths",
    multiple=True,
    type=click.Path(),
    help="A pass plugin file or directory to load besides ASCEND_GE_PY_PASS_PATH (repeatable).",
)
@click.option(
    "--disable",
    "disabled",
    multiple=True,
    metavar="NAME",
    help="Do not import the entry point NAME (or DIST:NAME) (repeatable).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.pass_context
def list_passes(
    ctx: click.Context, pass_paths: tuple[str, ...], disabled: tuple[str, ...], as_json: bool
) -> None:
    """List every pass with its kind, stage, op types and origin; exit 1 if a plugin failed."""
    entries, failures, disabled_found = _collect(pass_paths, disabled)
    if as_json:
        payload = {
            "passes": [_pass_dict(e) for e in entries],
            "failures": [_failure_dict(f) for f in failures],
            "disabled": disabled_found,
        }
        click.echo(json.dumps(payload, indent=2))
    else:
        _print_tables(entries, failures, disabled_found)
    if failures:
        ctx.exit(1)
