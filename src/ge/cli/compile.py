"""`ge compile` and `ge dump`: compile a model file with the pass plugins, or look at one.

`ge compile IN -o OUT` loads IN, runs the pipeline (built-in passes, plugins from
`ASCEND_GE_PY_PASS_PATH`, entry points and `--pass-path`), and writes OUT only when every
step succeeded: a failing pass, plugin or model leaves no file behind. OUT may not be IN
(or its data file) unless `--overwrite-input` is given. Errors reach the user as one line
with their code (the `ge` group in `ge.cli` prints them).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

import ge.graph
from ge.compiler import compile_graph
from ge.compiler.report import CompileReport
from ge.graph import DumpFormat, Graph
from ge.graph.model_io import check_save_target

__all__ = ["compile_command", "dump_command"]


def _parse_options(pairs: Sequence[str]) -> dict[str, str]:
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--option")
        options[key] = value
    return options


def _node_count(graph: Graph) -> int:
    return len(graph.get_all_nodes())


def _print_report(report: CompileReport, before: int, output: Path) -> None:
    console = Console(soft_wrap=False)
    table = Table(title=f"Pass runs ({len(report.records)})")
    for column in ("Pass", "Stage", "Graph", "Outcome", "Changed", "Rewrites", "ms"):
        table.add_column(column, justify="right" if column in ("ms", "Rewrites") else "left")
    for record in report.records:
        done = record.rewrites + record.fusions
        table.add_row(record.pass_name, record.stage, escape(record.graph_name),
                      record.outcome.value, "yes" if record.changed else "-",
                      str(done) if done else "-", f"{record.seconds * 1000:.1f}")
    console.print(table)
    for skipped in report.skipped_plugins:
        console.print(f"[yellow]skipped plugin[/yellow] {escape(str(skipped))}")
    after = _node_count(report.graph)
    console.print(f"{before} nodes -> {after} nodes; wrote {escape(str(output))}")


@click.command("compile")
@click.argument("model", type=click.Path(path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path),
              help="Where to write the compiled model (written only on success).")
@click.option("--pass-path", "pass_paths", multiple=True,
              help="A pass plugin file or folder for this compilation (repeatable).")
@click.option("--option", "option_pairs", multiple=True, metavar="KEY=VALUE",
              help="A compiler option, readable by passes (repeatable).")
@click.option("--external-data/--no-external-data", default=None,
              help="Force weights into (or out of) a data file beside the output "
                   "(default: only over protobuf's 2 GB limit).")
@click.option("--overwrite-input", is_flag=True,
              help="Allow OUTPUT to be MODEL itself (or its external data file).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def compile_command(model: Path, output: Path, pass_paths: tuple[str, ...],
                    option_pairs: tuple[str, ...], external_data: bool | None,
                    overwrite_input: bool, as_json: bool) -> None:
    """Compile MODEL with the pass plugins and write the result to OUTPUT."""
    options = _parse_options(option_pairs)
    graph = ge.graph.load(model)
    # Refused before compiling, not after; save checks again (and the data file it writes).
    check_save_target(graph, output, external_data=external_data,
                      overwrite_input=overwrite_input)
    before = _node_count(graph)
    report = compile_graph(graph, options=options or None,
                           pass_paths=list(pass_paths) if pass_paths else None)
    graph.save(output, external_data=external_data, overwrite_input=overwrite_input)
    if as_json:
        click.echo(json.dumps({
            "model": str(model),
            "output": str(output),
            "nodes_before": before,
            "nodes_after": _node_count(graph),
            "passes": [{"name": r.pass_name, "stage": r.stage, "graph": r.graph_name,
                        "outcome": r.outcome.value, "changed": r.changed,
                        "matches": r.matches, "rewrites": r.rewrites, "fusions": r.fusions,
                        "seconds": r.seconds} for r in report.records],
            "skipped_plugins": [err.details() for err in report.skipped_plugins],
        }, indent=2))
    else:
        _print_report(report, before, output)


_DUMP_FORMATS = {"readable": DumpFormat.kReadable, "onnx": DumpFormat.kOnnx,
                 "txt": DumpFormat.kTxt}


@click.command("dump")
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(sorted(_DUMP_FORMATS)), default="readable",
              show_default=True,
              help="readable: one line per node; onnx: ONNX text syntax; txt: protobuf text.")
def dump_command(model: Path, fmt: str) -> None:
    """Print MODEL as text (its IR, as `Graph.dump_to_stream` gives it)."""
    graph = ge.graph.load(model)
    click.echo(graph.dump_to_stream(_DUMP_FORMATS[fmt]), nl=False)

