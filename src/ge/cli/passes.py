"""`ge passes list`: every pass the compiler would use, where it came from, and load failures.

Reads `ASCEND_GE_PY_PASS_PATH` like the compiler, plus `--pass-path` items, then the entry
points (unless `GE_DISABLE_PLUGIN_AUTOLOAD` or the option
`ge.passes.disable_plugin_autoload` turns that off, which the listing says); built-in passes
are marked. Every plugin is tried (continue-on-error), and the exit status is 1 if any failed.
A path that does not exist (or a file not ending in `.py`) is listed as one more failure
beside the plugins that did load: the compiler refuses such a path before importing
anything (spec D6), but a listing is where one goes to find out what is wrong.

The plugins are loaded by `ge.cli.listed_passes`, with which `ge passes explain`
(`ge.cli.passes_explain`) finds its pass the same way.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import click
from rich.markup import escape
from rich.table import Table

from ge.cli.compile import parse_options
from ge.cli.listed_passes import listing_options, loaded_passes, pass_path_option
from ge.cli.output import cell, command_output, console, fitting_columns, left_out_note
from ge.cli.path_cell import path_cell
from ge.compiler.options import OPTION_DISABLE_PLUGIN_AUTOLOAD, CompilerOptions
from ge.compiler.pass_registry import RegisteredPass
from ge.compiler.plugin_loader import ENV_DISABLE_PLUGIN_AUTOLOAD, autoload_disabled
from ge.compiler.scheduler import PIPELINE, step_label
from ge.errors import GeError

__all__ = ["passes"]


@click.group()
def passes() -> None:
    """Inspect the passes the compiler would run."""


def _autoload(options: CompilerOptions) -> dict[str, object]:
    """Whether entry points were loaded, and what turned that off."""
    if not autoload_disabled(options, os.environ):
        return {"autoload": True, "disabled_by": None}
    by = (f"option {OPTION_DISABLE_PLUGIN_AUTOLOAD}" if options.disable_plugin_autoload
          else f"{ENV_DISABLE_PLUGIN_AUTOLOAD}={os.environ.get(ENV_DISABLE_PLUGIN_AUTOLOAD)}")
    return {"autoload": False, "disabled_by": by}


def _autoload_line(autoload: Mapping[str, object]) -> str:
    if autoload["autoload"]:
        return ("Entry points (group ge.passes.plugins): auto-loaded "
                f"(set {ENV_DISABLE_PLUGIN_AUTOLOAD}=1 to turn off)")
    return ("Entry points (group ge.passes.plugins): not loaded, disabled by "
            f"{autoload['disabled_by']}")


def _pass_dict(entry: RegisteredPass) -> dict[str, object]:
    d = entry.descriptor
    return {
        "name": d.pass_name,
        "kind": d.kind,
        "stage": entry.stage_label,
        "op_types": list(d.op_types),
        "class": f"{d.module_name}.{d.class_name}",
        "descriptor_key": d.descriptor_key,
        "origin": entry.origin.as_dict(),
        "source": str(entry.origin),
        "builtin": entry.builtin,
        "on_by_default": entry.on_by_default,
    }


def _failure_dict(err: GeError) -> dict[str, object]:
    data = err.details()
    cause = err.__cause__
    data["exception"] = f"{type(cause).__name__}: {cause}" if cause is not None else None
    return data


#: `ge passes list`'s columns, and those left out when a terminal is too narrow for all,
#: in that order (a built-in's Source says it is one; most passes have no op types).
_LIST_COLUMNS = ("Name", "Kind", "Stage", "Op types", "Built-in", "Source")
_LIST_DROPS = ("Built-in", "Op types", "Kind")


def _listing_order(entries: list[RegisteredPass]) -> list[RegisteredPass]:
    """The passes in pipeline order; within a step in run order (built-in: declared,
    plugins: by name): the table's order and the JSON's (trial Y: they differed)."""
    order = {step_label(step): i for i, step in enumerate(PIPELINE)}
    return sorted(entries, key=lambda e: (order[e.stage_label], "" if e.step else e.name))


def _print_tables(
    entries: list[RegisteredPass], failures: list[GeError], disabled: list[str],
    autoload: Mapping[str, object],
) -> None:
    con = console()
    rows = [[d.pass_name, d.kind, entry.stage_label, ", ".join(d.op_types) or "-",
             ("yes" if entry.on_by_default else "yes (off)") if entry.builtin else "-",
             str(entry.origin)]
            for entry in entries for d in [entry.descriptor]]
    columns = fitting_columns(_LIST_COLUMNS, rows, con.width, _LIST_DROPS, {"Source": 30})
    if _LIST_COLUMNS.index("Built-in") not in columns:  # (its "(off)" goes with the name)
        for row, entry in zip(rows, entries, strict=True):
            row[0] += "" if entry.on_by_default else " (off)"
    table = Table(title=f"Passes ({len(entries)})", title_justify="left")
    for i in columns:
        table.add_column(_LIST_COLUMNS[i], overflow="fold")
    for row in rows:
        table.add_row(*(path_cell(row[i]) if _LIST_COLUMNS[i] == "Source" else cell(row[i])
                        for i in columns))
    left_out = left_out_note(_LIST_COLUMNS, columns, con.width)
    if left_out:
        table.caption, table.caption_justify = left_out, "left"
    con.print(table)
    if any(not entry.on_by_default for entry in entries):
        con.print("(off): a built-in pass off by default; `ge compile --enable NAME` runs it")
    con.print(escape(_autoload_line(autoload)))
    if disabled:
        con.print(f"Disabled entry points: {escape(', '.join(disabled))}")
    if failures:
        errors = Table(title=f"Load failures ({len(failures)})", style="red")
        for column in ("Code", "Where", "Error"):
            errors.add_column(column, overflow="fold")
        for err in failures:
            where = str(err.location) if err.location else (err.path or "-")
            errors.add_row(err.code, path_cell(where), cell(err.message))
        con.print(errors)


@passes.command("list")
@pass_path_option
@click.option(
    "--disable",
    "disabled",
    multiple=True,
    metavar="NAME",
    help="Do not import the entry point NAME (or DIST:NAME) (repeatable).",
)
@click.option("--option", "option_pairs", multiple=True, metavar="KEY=VALUE",
              help="A compiler option, e.g. ge.passes.disable_plugin_autoload=true (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.pass_context
def list_passes(
    ctx: click.Context, pass_paths: tuple[str, ...], disabled: tuple[str, ...],
    option_pairs: tuple[str, ...], as_json: bool
) -> None:
    """List every pass with its kind, stage, op types and origin; exit 1 if a plugin failed."""
    values = parse_options(option_pairs)
    with command_output("ge", as_json=as_json) as out:
        options = listing_options(values, disabled)
        autoload = _autoload(options)
        with loaded_passes(pass_paths, options) as found:
            if as_json:
                out.result({
                    "passes": [_pass_dict(e) for e in _listing_order(found.entries)],
                    "failures": [_failure_dict(f) for f in found.failures],
                    "disabled": found.disabled,
                    "entry_points": autoload,
                })
            else:
                _print_tables(_listing_order(found.entries), found.failures, found.disabled,
                              autoload)
    if found.failures:
        ctx.exit(1)


# `ge passes explain` lives in its own module; importing it adds it to the group.
from ge.cli.passes_explain import explain_command  # noqa: E402

passes.add_command(explain_command, "explain")
