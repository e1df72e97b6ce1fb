"""`ge diff A B`: what differs between two ONNX models, nodes matched by name.

Prints the removed, added and changed nodes (another op type, other inputs or other
attributes; `--limit` of each, 50 by default) and the operator histogram's changes; `--json`
prints them all as JSON; `--html FILE` writes the page of `ge.cli.html_page` (A before, B
after). The exit status is 0 whether or not the models differ (1 for an error: a missing or
unreadable model, an unwritable page).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ge._text import printable
from ge.cli.output import CommandOutput, command_output
from ge.cli.output_files import file_target

if TYPE_CHECKING:
    from ge.cli.graph_diff import GraphSnapshot
    from ge.compiler.report import NodeCounts

__all__ = ["diff_command"]


def _attribute_change(change: dict[str, str]) -> str:
    """"value: tensor float scalar 0.5 → tensor float scalar 1.5"; a tensor too large to
    show whose type and dims stay says its values differ (trial AE: "tensor float 8×8 →
    tensor float 8×8" read as no change)."""
    was, now = change["a"] or "(none)", change["b"] or "(none)"
    if was == now:
        return f"{change['name']}: {now} (other values)"
    return f"{change['name']}: {was} → {now}"


def _attributes_text(attributes: dict[str, str]) -> str:
    """A removed or added node's attributes, as its line ends: " (axis=-1, epsilon=1e-12)",
    at most 100 characters (trial AD: an added LayerNormalization's wrong epsilon was
    nowhere but the HTML page)."""
    if not attributes:
        return ""
    text = ", ".join(f"{name}={value}" for name, value in attributes.items())
    return f" ({text if len(text) <= 100 else text[:99] + '…'})"


def _rows(keys: list[str], snap: Any) -> list[dict[str, Any]]:
    """Nodes as the JSON lists them: `graph` their body's name ("" for the main graph),
    `graph_path` where that body is (`if1.then_branch`: bodies share names), `key` both,
    `attributes` as the page shows them (a small tensor's values, a long one cut)."""
    out = []
    for key in keys:
        path, sep, name = key.rpartition("::")
        record = snap.nodes.get(key)
        out.append({"name": name if sep else key,
                    "graph": record.graph if sep and record is not None else "",
                    "graph_path": path if sep else "", "key": key,
                    "op": record.type if record is not None else "",
                    "attributes": dict(record.attrs) if record is not None else {}})
    return out


def _snapshot(path: Path) -> GraphSnapshot:
    """The snapshot of the model at `path`, its graph closed once taken (`Graph.close`: the
    cyclic collector would free it at the process's end, after the command)."""
    import ge.graph
    from ge.cli import graph_diff

    with contextlib.closing(ge.graph.load(path)) as graph:
        return graph_diff.snapshot(graph)


def _diff(out: CommandOutput, a: Path, b: Path, html_path: Path | None, limit: int) -> None:
    from ge.cli import graph_diff, html_page

    if html_path is not None:
        html_page.check_page_target(html_path, [(a, "model A"), (b, "model B")])

    before, after = _snapshot(a), _snapshot(b)
    diff = graph_diff.diff_snapshots(before, after)
    types_a = {k: r.type for k, r in before.nodes.items()}
    types_b = {k: r.type for k, r in after.nodes.items()}
    if html_path is not None:
        html_page.write_page(html_path, html_page.render_page(
            title=f"ge diff {a.name} {b.name}", subtitle=f"A = {a}, B = {b}",
            before=before, after=after, labels=("A", "B")))
    payload: dict[str, Any] = {
        "a": str(a), "b": str(b), "graph_a": before.name, "graph_b": after.name,
        **{f"{field}_{side}": value for side, snap in (("a", before), ("b", after))
           for field, value in snap.node_counts().as_dict().items()},
        "removed": _rows(diff.removed, before), "added": _rows(diff.added, after),
        "renamed": [{"a": old, "b": new} for old, new in diff.renamed.items()],
        "changed": [{**row, "op_a": types_a[row["key"]], "op_b": types_b[row["key"]],
                     "what": diff.changed[row["key"]],
                     "attributes_changed": [{"name": name, "a": was, "b": now}
                                            for name, was, now
                                            in diff.attributes.get(row["key"], [])]}
                    for row in _rows(list(diff.changed), after)],
        "ops_a": dict(diff.ops_before.most_common()),
        "ops_b": dict(diff.ops_after.most_common()),
        "ops_delta": diff.ops_delta(),
        "html": None if html_path is None else str(html_path),
    }
    if out.as_json:
        out.result(payload)
        return
    _print(payload, limit)


def _side_counts(payload: dict[str, Any], side: str) -> NodeCounts:
    """The node counts of model `side` ("a" or "b") as the payload holds them."""
    from ge.compiler.report import NodeCounts  # (when the command runs: --help stays light)

    return NodeCounts(payload[f"nodes_{side}"], payload[f"subgraph_nodes_{side}"],
                      payload[f"constants_{side}"])


#: The nodes each section of the text lists by default (`--limit`): a diff of a 150k-node
#: model and its compiled file printed 134,975 lines (trial DD).
DEFAULT_LIMIT = 50


def _listed(lines: list[str], limit: int) -> list[str]:
    """The first `limit` of `lines` (all for 0), and a line counting the rest."""
    if not limit or len(lines) <= limit:
        return lines
    return [*lines[:limit], f"  ... {len(lines) - limit} more (--limit 0 lists them all)"]


def _print(payload: dict[str, Any], limit: int = DEFAULT_LIMIT) -> None:
    from rich.markup import escape

    from ge.cli.compile_report import TOP_OPS, ops_table
    from ge.cli.output import console

    con = console()
    for side in ("a", "b"):
        con.print(f"{side.upper()} {escape(payload[side])}: graph "
                  f"{escape(payload[f'graph_{side}'])}, {_side_counts(payload, side).text()}")
    # Plain text, one print per section: a rich print per line (markup parsed, the terminal
    # measured) took 10 s for a diff of 50,000 nodes.
    # (names and values from the models: escaped, a terminal obeys what they hold: AE)
    for label, rows in (("Removed (in A, not in B)", payload["removed"]),
                        ("Added (in B, not in A)", payload["added"])):
        con.print("\n".join([f"{label}: {len(rows)}",
                             *_listed([printable(f"  {row['key']}  {row['op']}"
                                                 f"{_attributes_text(row['attributes'])}")
                                       for row in rows], limit)]),
                  markup=False, highlight=False, soft_wrap=True)
    if payload["renamed"]:
        con.print("\n".join([f"Constants renamed (the same value, named by it in B): "
                             f"{len(payload['renamed'])}",
                             *_listed([printable(f"  {row['a']} → {row['b']}")
                                       for row in payload["renamed"]], limit)]),
                  markup=False, highlight=False, soft_wrap=True)
    lines = []
    for row in payload["changed"]:
        op = row["op_b"] if row["op_a"] == row["op_b"] else f"{row['op_a']} → {row['op_b']}"
        what = [w if w != "attributes" else "attributes (" + "; ".join(
                    _attribute_change(a) for a in row["attributes_changed"]) + ")"
                for w in row["what"]]
        lines.append(printable(f"  {row['key']}  {op}: {', '.join(what)}"))
    con.print("\n".join([f"Changed: {len(payload['changed'])}", *_listed(lines, limit)]),
              markup=False, highlight=False, soft_wrap=True)
    if payload["ops_delta"]:
        con.print(ops_table(payload["ops_a"], payload["ops_b"], top=TOP_OPS if limit else 0))
    else:
        con.print("operator counts unchanged")
    total = len(payload["removed"]) + len(payload["added"]) + len(payload["changed"])
    con.print("the models' graphs are the same" if not total else
              f"{len(payload['removed'])} removed, {len(payload['added'])} added, "
              f"{len(payload['changed'])} changed (nodes matched by name"
              + (f"; {len(payload['renamed'])} constant(s) renamed" if payload["renamed"]
                 else "") + ")")
    if payload["html"] is not None:
        con.print(f"wrote page {escape(payload['html'])}")


@click.command("diff")
@click.argument("a", type=click.Path(path_type=Path))
@click.argument("b", type=click.Path(path_type=Path))
@click.option("--html", "html_path", type=click.Path(), callback=file_target, default=None,
              metavar="FILE",
              help="Write one self-contained HTML page with both graphs and the changes.")
@click.option("--limit", type=click.IntRange(min=0), default=DEFAULT_LIMIT, show_default=True,
              metavar="N",
              help="List at most N nodes per section of the text, and the 12 largest operator "
                   "changes (0: all of both); --json lists all.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the differences (or the error) as JSON on stdout.")
def diff_command(a: Path, b: Path, html_path: Path | None, limit: int, as_json: bool) -> None:
    """Show the nodes and operators that differ between models A and B."""
    with command_output("ge", as_json=as_json) as out:
        _diff(out, a, b, html_path, limit)
