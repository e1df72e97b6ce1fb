"""What `ge compile` prints of a compilation: the report as data (`--report`, `--json`) and
as text (the pass table, the operator table, the summary, hints and verification).

The pass table leaves out the runs of built-in passes that found nothing (most rows of a
compilation: 44 of DistilBERT's 54) unless `--all-passes`; `--quiet` keeps the lines and
drops the tables.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ge.cli.output import cell, console, encodable, fitting_columns, left_out_note

if TYPE_CHECKING:
    from ge.compiler.report import CompileReport, PassRunRecord
    from ge.session.compile_result import CompileResult
    from ge.session.hints import CustomOpHint, FunctionHint, OpsetHint, UnverifiedHint
    from ge.session.verification import VerificationReport

__all__ = ["TOP_OPS", "builtins_not_in", "ops_table", "print_compile_result",
           "result_payload", "verification_table"]

#: How many op-histogram rows the text report shows (largest changes first).
TOP_OPS = 12
#: At most this many passes get a line saying why they refused matches (`refusal_notes`).
_REFUSAL_NOTES = 10


def result_payload(result: CompileResult, *, model: Path | str, output: Path | str | None,
                   warnings: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """What `--report FILE` writes and `--json` prints: the ge version that wrote it,
    `report.as_dict()`, the model and output paths, the verification (or None) and the
    warnings."""
    from ge import __version__

    data: dict[str, Any] = {"ge_version": __version__, "model": str(model),
                            "output": None if output is None else str(output)}
    data.update(result.report.as_dict())
    data["verification"] = (result.verification.as_dict()
                            if result.verification is not None else None)
    if warnings is not None:
        data["warnings"] = warnings
    return data


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def _short_origin(origin: str) -> str:
    """A plugin file's origin as `name.py:line` (the JSON report keeps the full path)."""
    file, sep, line = origin.rpartition(":")
    if sep and line.isdigit() and ("/" in file or "\\" in file):
        return f"{Path(file).name}:{line}"
    return origin or "-"


#: The widest an origin is shown in the pass table (cut at its start beyond).
_ORIGIN_WIDTH = 24


def _cut_start(text: str, width: int) -> str:
    """`text`, or its last `width - 1` characters after an ellipsis when it is longer."""
    return text if len(text) <= width else "…" + text[len(text) - width + 1:]


def _found_nothing(runs: Sequence[PassRunRecord]) -> bool:
    """Whether a built-in pass's runs (one row) changed nothing (`not_changed`: a run that
    changed the graph is `success`), found no match, reported no fusion and were not rolled
    back: the rows the table leaves out unless asked."""
    from ge.compiler.pass_registry import BUILTIN_ORIGIN

    return all(run.origin == BUILTIN_ORIGIN and run.outcome.value == "not_changed" and not (
        run.matches or run.rewrites or run.fusions or run.rolled_back) for run in runs)


#: The pass table's columns, and those left out when a terminal is too narrow for all, in
#: that order: a row's pass, outcome, counts and nodes always stay.
_PASS_COLUMNS = ("Stage", "Pass", "Kind", "Origin", "Graph", "Outcome", "M/R/F", "Nodes", "ms")
_NARROW_DROPS = ("Kind", "Graph", "ms", "Stage", "Origin")


def _pass_table(report: CompileReport, every: bool = False, width: int | None = None) -> Any:
    """A row per pass invocation (its runs on bodies summed in); without `every`, the
    built-in passes that found nothing are counted in the caption instead of listed (a
    plugin pass always has its row: its author looks for it). Columns a terminal of `width`
    cannot hold are left out, the caption says which."""
    from rich.markup import escape
    from rich.table import Table

    from ge.compiler.report import overall_outcome

    groups = _runs_of_each_pass(report.records)
    shown = groups if every else [runs for runs in groups if not _found_nothing(runs)]
    hidden = len(groups) - len(shown)
    if not report.records:
        return "Pass runs (0): no pass ran"
    if hidden and not shown:  # (no table of headers alone)
        return (f"Pass runs ({len(report.records)}): no built-in pass found anything to "
                "change (--all-passes lists them)")
    # (runs on bodies are summed into their pass's row: trial Y read "Pass runs (216; 2 of
    # 54 row(s) shown)" as 216 rows)
    if len(report.records) == len(groups):
        title = f"Pass runs ({len(groups)}" + (
            f"; {len(shown)} of {len(groups)} row(s) shown" if hidden else "") + ")"
    else:
        title = f"Pass runs ({len(report.records)} in {len(groups)} row(s)" + (
            f"; {len(shown)} row(s) shown" if hidden else "") + ")"
    hidden_runs = sum(len(runs) for runs in groups) - sum(len(runs) for runs in shown)
    bodies = False
    rows: list[list[str]] = []  # (plain text: the cells are escaped once the columns are known)
    for runs in shown:
        r = runs[0]
        outcome = overall_outcome([run.outcome.value for run in runs])
        if any(run.rolled_back for run in runs):
            outcome += " (rolled back)"
        before = sum(run.nodes_before for run in runs)
        after = sum(run.nodes_after for run in runs)
        nodes = encodable(f"{before}→{after}") if before != after else str(after)
        stage = r.stage + (f" #{r.round}" if r.round else "")
        matches, rewrites, fusions = (sum(run.matches for run in runs),
                                      sum(run.rewrites for run in runs),
                                      sum(run.fusions for run in runs))
        counts = f"{matches}/{rewrites}/{fusions}" if matches or rewrites or fusions else "-"
        graph = r.graph_name if len(runs) == 1 else f"{r.graph_name} +{len(runs) - 1}"
        bodies |= len(runs) > 1
        rows.append([stage, encodable(r.pass_name), r.kind or "-",
                     encodable(_cut_start(_short_origin(r.origin), _ORIGIN_WIDTH)),
                     encodable(graph), outcome, counts, nodes,
                     _ms(sum(run.seconds for run in runs))])
    columns = fitting_columns(_PASS_COLUMNS, rows, width, _NARROW_DROPS)
    table = Table(title=title, title_justify="left")
    # An origin (`file:line`) folded in a narrow terminal showed `p.py:1` over a `1` that
    # read as another line (trial U): it is never folded, and a long one is cut at its start
    # (`…ompose_layernorm.py:11`), so that its line stays.
    for i in columns:
        column = _PASS_COLUMNS[i]
        numeric = column in ("M/R/F", "Nodes", "ms")
        if column == "Origin":
            table.add_column(column, overflow="ellipsis", no_wrap=True)
            continue
        # (a count cut short says so, `104→…`: cut silently, `104→7` read as 7, trial AG)
        table.add_column(column, justify="right" if numeric else "left",
                         overflow="ellipsis" if numeric else "fold", no_wrap=numeric)
    for row in rows:
        table.add_row(*(escape(row[i]) for i in columns))
    left_out = left_out_note(_PASS_COLUMNS, columns, width)
    table.caption = ("M/R/F: matches found (before meet_requirements) / rewrites applied / "
                     "fusions reported (report_fuse); -: none") + (
        "; a pass's runs on the bodies of If/Loop/Scan nodes are summed into its row "
        + ("(GRAPH +N: N bodies; " if _PASS_COLUMNS.index("Graph") in columns
           else "(its Nodes count theirs too; ")
        + "the JSON report lists each run that did something on one)"
        if bodies else "") + (
        f"; {hidden} row(s) of built-in passes that found nothing are not shown"
        + (f" ({hidden_runs} runs, bodies included)" if hidden_runs != hidden else "")
        + " (--all-passes lists them)" if hidden else "") + (
        f"; {left_out}" if left_out else "")
    table.caption_justify = "left"
    return table


def builtins_not_in(ran: set[str]) -> list[str]:
    """The built-in passes a compilation did not run (no record of theirs)."""
    from ge.compiler.builtin import BUILTIN_PASSES

    names = (cls.__ge_builtin__.name for cls in BUILTIN_PASSES)  # type: ignore[attr-defined]
    return [name for name in names if name not in ran]


def _runs_of_each_pass(records: Sequence[PassRunRecord]) -> list[list[PassRunRecord]]:
    """The records grouped by pass invocation: a pass's run on the root graph and its runs
    on the bodies after it (one row each would make a table of 50,000 rows for a model of
    1,000 If nodes, which takes rich half a minute to print)."""
    groups: list[list[PassRunRecord]] = []
    for record in records:
        last = groups[-1][0] if groups else None
        if (last is not None and (last.pass_name, last.stage, last.round)
                == (record.pass_name, record.stage, record.round)):
            groups[-1].append(record)
        else:
            groups.append([record])
    return groups


def ops_table(before: Mapping[str, int], after: Mapping[str, int],
               top: int = TOP_OPS) -> Any:
    """The operator counts before and after, the `top` largest changes first (0: all)."""
    from rich.table import Table

    names = sorted(set(before) | set(after),
                   key=lambda op: (-abs(after.get(op, 0) - before.get(op, 0)),
                                   -max(before.get(op, 0), after.get(op, 0)), op))
    shown = names[:top] if top else names
    hidden = len(names) - len(shown)
    title = encodable("Operators before → after") + (f" (top {len(shown)} of {len(names)})"
                                          if hidden else "")
    table = Table(title=title, title_justify="left")
    for column in ("Op", "Before", "After", "Change"):
        table.add_column(column, justify="left" if column == "Op" else "right")
    for op in shown:
        b, a = before.get(op, 0), after.get(op, 0)
        table.add_row(cell(op), str(b), str(a), f"{a - b:+d}" if a != b else "")
    return table


def verification_table(verification: VerificationReport, *,
                       title: str = "Verification") -> Any:
    """A row per output: whether it matches, its shape, dtype, diffs and mismatches."""
    from rich.table import Table

    table = Table(title=f"{title} ({verification.tolerance()})", title_justify="left")
    for column in ("Output", "OK", "Shape", "Dtype", "Max abs diff", "Max rel diff",
                   "Mismatches"):
        table.add_column(column, justify="left" if column in ("Output", "OK", "Shape",
                                                                "Dtype") else "right")
    for out in verification.outputs:
        shape = "-" if out.actual_shape is None else f"[{', '.join(map(str, out.actual_shape))}]"
        if not out.compared:  # depends on a random operator
            table.add_row(cell(out.name), "not compared", shape, out.actual_dtype or "-",
                          "-", "-", "-")
            continue
        ok = "yes" if out.ok else "NO"
        if out.rtol is not None and (out.rtol, out.atol) != (verification.rtol,
                                                            verification.atol):
            ok += f" (rtol={out.rtol:.3g}, atol={out.atol:.3g})"  # float16's precision
        table.add_row(cell(out.name), ok, shape,
                      out.actual_dtype or "-", f"{out.max_abs_diff:.3g}",
                      f"{out.max_rel_diff:.3g}", f"{out.mismatches}/{out.size}")
    return table


def print_compile_result(result: CompileResult, *, output: Path | None,
                         hints: Sequence[OpsetHint | FunctionHint | CustomOpHint
                                         | UnverifiedHint] = (),
                         data_file: Path | None = None, quiet: bool = False,
                         explain_args: Sequence[str] = (), all_passes: bool = False) -> None:
    """The text report: pass runs, operator changes, totals, hints, verification; with
    `quiet`, the lines without the tables; with `all_passes`, a row for every pass run.
    `explain_args` (the model and the options that load and convert it as this compilation
    did) complete the `ge passes explain` command suggested for a plugin pattern pass that
    matched nothing."""
    from rich.markup import escape

    report = result.report
    con = console()
    if not quiet:
        con.print(_pass_table(report, every=all_passes, width=con.width))
    notes = report.refusal_notes()
    for note in notes[:_REFUSAL_NOTES]:
        con.print(cell(note))
    if len(notes) > _REFUSAL_NOTES:
        con.print(f"and {len(notes) - _REFUSAL_NOTES} more pass(es) refused matches with a "
                  "reason (the JSON report, --report FILE, has each pass's)")
    def explain(name: str) -> str:
        return shlex.join(["ge", "passes", "explain", name, *explain_args])

    for name in report.unmatched_plugin_passes():
        con.print(cell(f"{name} matched nothing: {explain(name)} shows where its patterns "
                       "stop"))
    for name, refusals, what in report.silently_refusing_plugin_passes():
        con.print(cell(f"{name}'s meet_requirements refused {refusals} {what}, giving no "
                       f"reason: {explain(name)} shows each refusal and its inputs "
                       "(context.set_error_message gives a reason here)"))
    if not quiet:
        con.print(ops_table(report.ops_before, report.ops_after))
    con.print(report.summary())
    for hint in hints:
        con.print(f"hint: {escape(str(hint))}")
    if result.verification is not None:
        if not quiet:
            con.print(verification_table(result.verification))
        con.print(f"verification {escape(result.verification.summary())}")
    if output is not None:
        con.print(wrote_line(output, data_file, escape))


def wrote_line(output: Path, data_file: Path | None,
               escape: Callable[[str], str] = str) -> str:
    """The line naming what a compilation wrote: OUT and its data file; when OUT is a
    symbolic link, the file it names, which is the one written (the link stays), with the
    data file beside it."""
    from ge.graph.save_target import write_destination

    weights = "" if data_file is None else f" (its weights in {escape(str(data_file))})"
    written, _ = write_destination(output)
    if written != output:
        return (f"wrote {escape(str(written))}, the file {escape(str(output))} links to"
                f"{weights}")
    return f"wrote {escape(str(output))}{weights}"
