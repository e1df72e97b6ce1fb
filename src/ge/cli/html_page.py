"""One self-contained HTML page showing a graph before and after: `ge compile --html FILE`
and `ge diff A B --html FILE`.

The page has inline CSS, JavaScript and SVG only (no network, no external fonts or
scripts). It draws the two graphs side by side (or one at a time), marks the nodes that were
removed (in the before graph), added (in the after graph), changed (in both: another op
type, other inputs or other attributes) and matched (the nodes a pass rewrote: named in a
new node's `ge.origin_nodes`, or removed by a pass run that also made new nodes), lists the
changes (and, for a compilation, every pass run that changed the graph with the nodes it
removed and added; clicking one highlights them), and has a search box (by name or op type)
and tooltips (op type, name, inputs, outputs, shapes, attributes, origin).

What changed is worked out by `ge.cli.graph_diff` (nodes matched by name). The drawing
comes from `ge.cli.layout` (graphviz dot when on PATH, else a built-in layered layout).
Graphs of more than `MAX_DRAWN` nodes are not drawn whole: constants are left out first,
then only the changed nodes and their neighbours are drawn; every node stays in the search
(by name and type; the page holds the inputs, outputs and attributes of the nodes drawn
only, or a large model's page would be mostly data nobody sees).
This module renders what changes from page to page; the page's static template, CSS and
JavaScript are package data files in ge/cli/html (page.html, page.css, page.js).
"""

from __future__ import annotations

import functools
import html
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import IO, Any

from ge.cli.graph_diff import (
    IO_TYPES,
    GraphDiff,
    GraphSnapshot,
    NodeRecord,
    PassChange,
    diff_snapshots,
)

__all__ = ["MAX_DRAWN", "render_page", "write_page"]

#: Above this many nodes a graph is not drawn whole (see the module's docstring).
MAX_DRAWN = 3000
#: How many node names a list of the page shows before "+N more".
_CHIPS = 300


@functools.cache
def _asset(name: str) -> str:
    """A static part of the page, package data in ge/cli/html: the template `page.html` (a
    `str.format` template: braces are its fields), and the `page.css` and `page.js` it holds."""
    return (resources.files("ge.cli") / "html" / name).read_text(encoding="utf-8")


def _tail(name: str, limit: int) -> str:
    return name if len(name) <= limit else "…" + name[-(limit - 1):]


def _box(record: NodeRecord) -> tuple[float, float, str, str]:
    """(width, height, first line, second line) of a node's box."""
    if record.type == "Const":
        label = _tail(record.name, 24)
        return max(48.0, min(160.0, len(label) * 5.6 + 14)), 20.0, label, ""
    if record.type in IO_TYPES:
        label = _tail(record.name, 26)
        head = "input" if record.type == "Data" else "output"
        return max(70.0, min(180.0, len(label) * 6.2 + 20)), 30.0, head, label
    sub = _tail(record.name, 30)
    width = max(len(record.type) * 7.4 + 18, len(sub) * 5.6 + 14, 64.0)
    return min(width, 210.0), 34.0, record.type, sub


def _select(snap: GraphSnapshot, interesting: set[str],
            cap: int) -> tuple[list[str], str | None]:
    """The keys to draw and a note when not all of them are."""
    keys = list(snap.nodes)
    if len(keys) <= cap:
        return keys, None
    no_consts = [k for k in keys if snap.nodes[k].type != "Const"]
    if len(no_consts) <= cap:
        return no_consts, (f"{len(keys)} nodes: constants are not drawn "
                           f"({len(keys) - len(no_consts)}); search finds them")
    chosen: dict[str, None] = {}
    consumers: dict[str, list[str]] = {}
    for k in no_consts:
        for src, *_ in snap.nodes[k].inputs:
            if src is not None:
                consumers.setdefault(src, []).append(k)
    for k in no_consts:
        if k in interesting:
            chosen[k] = None
            for src, *_ in snap.nodes[k].inputs:
                if src is not None and snap.nodes.get(src) and snap.nodes[src].type != "Const":
                    chosen[src] = None
            chosen.update(dict.fromkeys(consumers.get(k, [])))
        if len(chosen) >= cap:
            break
    if not chosen:
        chosen = dict.fromkeys(no_consts[:cap])
    drawn = [k for k in no_consts if k in chosen][:cap]
    return drawn, (f"{len(keys)} nodes, constants and the graph's inputs and outputs "
                   f"counted ({len(no_consts)} without the constants), more than {cap}: "
                   f"drawing {len(drawn)} (the changed "
                   "nodes and their neighbours, no constants); search finds every node (by "
                   "name and type: the page holds the details of those drawn)")


def _fmt(v: float) -> str:
    return f"{v:.1f}".removesuffix(".0")


def _records(snap: GraphSnapshot, drawn: set[str]) -> dict[str, list[Any]]:
    """The page's data of each node: all of it (inputs, outputs, attributes) for a graph
    drawn whole, and for a larger one only for the nodes drawn; the others keep their name,
    type and origin, which is what the search and the lists of changes read (a 213k-node
    model made a 148 MB page of 143 MB data for 6,000 nodes drawn; keeping the changed
    nodes' details too still left 27 of 32 MB on a 53k-node one, where a fusion pass
    removes half the nodes)."""
    if len(snap.nodes) <= MAX_DRAWN:
        return {k: r.as_json() for k, r in snap.nodes.items()}
    return {k: r.as_json() if k in drawn else r.brief_json() for k, r in snap.nodes.items()}


def _svg(snap: GraphSnapshot, side: str, states: Mapping[str, list[str]],
         other_edges: set[tuple[str, str]], engine: str | None,
         notes: list[str]) -> tuple[str, str, list[str]]:
    """The SVG of one graph (each graph and subgraph laid out on its own, stacked), the
    layout engine used and the nodes drawn."""
    from ge.cli.layout import layout

    interesting = {k for k, s in states.items() if s}
    drawn, note = _select(snap, interesting, MAX_DRAWN)
    if note:
        notes.append(f"{'before' if side == 'b' else 'after'}: {note}")
    by_graph: dict[str, list[str]] = {}
    for key in drawn:
        by_graph.setdefault(snap.nodes[key].graph, []).append(key)
    owners = dict(snap.subgraphs)
    parts: list[str] = []
    y_offset = 0.0
    width = 0.0
    engines: list[str] = []
    order = [snap.name] + [g for g in by_graph if g != snap.name]
    for graph_name in order:
        keys = by_graph.get(graph_name, [])
        if not keys:
            continue
        index = {k: i for i, k in enumerate(keys)}
        boxes = [_box(snap.nodes[k]) for k in keys]
        edges: list[tuple[int, int]] = []
        edge_info: list[tuple[str, str, str]] = []
        for k in keys:
            for src, _port, value, shape, dtype in snap.nodes[k].inputs:
                if src is not None and src in index:
                    edges.append((index[src], index[k]))
                    edge_info.append((src, k, f"{value}: {dtype} {shape}"))
        placed = layout([(w, h) for w, h, *_ in boxes], edges, engine=engine)
        engines.append(placed.engine)
        notes.extend(n for n in placed.notes if n not in notes)
        top = y_offset
        if graph_name != snap.name:
            owner = owners.get(graph_name, "")
            title = f"subgraph {graph_name}" + (f" of {owner}" if owner else "")
            parts.append(f'<text class="sg-title" x="8" y="{_fmt(top + 14)}">'
                         f"{html.escape(title)}</text>")
            top += 22
            parts.append(f'<rect class="sg-frame" x="2" y="{_fmt(top)}" '
                         f'width="{_fmt(placed.width - 4)}" height="{_fmt(placed.height)}"/>')
        for (src, dst, title), path in zip(edge_info, placed.edges, strict=True):
            if not path:
                continue
            d = f"M{_fmt(path[0][0])},{_fmt(path[0][1] + top)}"
            for j in range(1, len(path) - 2, 3):
                d += "C" + " ".join(f"{_fmt(px)},{_fmt(py + top)}" for px, py in path[j:j + 3])
            state = "" if (src, dst) in other_edges else (" e-removed" if side == "b"
                                                          else " e-added")
            parts.append(f'<path class="edge{state}" marker-end="url(#arrow-{side})" d="{d}" '
                         f'data-from="{html.escape(src)}" '
                         f'data-to="{html.escape(dst)}"><title>{html.escape(title)}</title>'
                         "</path>")
        for k, (w, h, line1, line2), (cx, cy) in zip(keys, boxes, placed.centres, strict=True):
            record = snap.nodes[k]
            kind = ("const" if record.type == "Const" else
                    "io" if record.type in IO_TYPES else "op")
            classes = " ".join(["node", kind, *states.get(k, [])])
            extra = (f' data-origin-pass="{html.escape(record.origin_pass)}"'
                     if record.origin_pass else "")
            parts.append(
                f'<g class="{classes}" data-key="{html.escape(k)}" '
                f'data-op="{html.escape(record.type)}"{extra} '
                f'transform="translate({_fmt(cx)},{_fmt(cy + top)})">'
                f'<rect x="{_fmt(-w / 2)}" y="{_fmt(-h / 2)}" width="{_fmt(w)}" '
                f'height="{_fmt(h)}" rx="{4 if kind != "io" else 12}"/>')
            if line2:
                parts.append(f'<text class="l1" y="-3">{html.escape(line1)}</text>'
                             f'<text class="l2" y="10">{html.escape(line2)}</text></g>')
            else:
                parts.append(f'<text class="l2" y="3">{html.escape(line1)}</text></g>')
        width = max(width, placed.width)
        y_offset = top + placed.height + 12
    used = "dot" if engines and all(e == "dot" for e in engines) else (
        "builtin" if engines else "none")
    w, h = max(width, 120.0), max(y_offset, 60.0)
    svg = (f'<svg class="graph" id="svg-{side}" data-engine="{used}" '
           f'viewBox="0 0 {_fmt(w)} {_fmt(h)}" width="{_fmt(w)}" height="{_fmt(h)}" '
           f'data-w="{_fmt(w)}" data-h="{_fmt(h)}">'
           '<defs><marker id="arrow-' + side + '" viewBox="0 0 10 10" refX="9" refY="5" '
           'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
           '<path d="M0,0L10,5L0,10z" class="arrow"/></marker></defs>'
           + "".join(parts) + "</svg>")
    return svg, used, drawn


# -- the page ---------------------------------------------------------------------------------


def _json_script(data: Any) -> str:
    text = json.dumps(data, separators=(",", ":"), default=str)
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _chips(keys: Iterable[str], cls: str, types: Mapping[str, str],
           present: set[str] | None = None) -> str:
    keys = list(keys)
    out = []
    for k in keys[:_CHIPS]:
        gone = present is not None and k not in present
        extra = " transient" if gone else ""
        title = ' title="not in either graph: made and removed again during compilation"' \
            if gone else ""
        op = types.get(k, "")
        out.append(f'<span class="chip {cls}{extra}" data-key="{html.escape(k)}"{title}>'
                   f'{html.escape(k)}{f" <i>{html.escape(op)}</i>" if op else ""}</span>')
    if len(keys) > _CHIPS:
        out.append(f'<span class="more">+{len(keys) - _CHIPS} more</span>')
    return "".join(out)


def _changes_section(diff: GraphDiff, before: GraphSnapshot, after: GraphSnapshot) -> str:
    types = {**{k: r.type for k, r in before.nodes.items()},
             **{k: r.type for k, r in after.nodes.items()}}
    rows = []
    for cls, label, keys in (("removed", "Removed", diff.removed),
                             ("added", "Added", diff.added),
                             ("changed", "Changed", list(diff.changed)),
                             ("matched", "Matched (rewritten)",
                              [k for k in before.nodes if k in diff.matched])):
        shown = " open" if 0 < len(keys) <= 24 else ""
        rows.append(f'<details class="group" data-group="{cls}"{shown}>'
                    f'<summary><span class="sw {cls}"></span>{label} '
                    f'<b>{len(keys)}</b></summary><div class="chips">'
                    f"{_chips(keys, cls, types)}</div></details>")
    delta = diff.ops_delta()
    ops = "".join(f"<tr><td>{html.escape(op)}</td><td>{diff.ops_before[op]}</td>"
                  f"<td>{diff.ops_after[op]}</td><td>{d:+d}</td></tr>"
                  for op, d in delta.items())
    table = (f'<table class="ops"><tr><th>Op</th><th>Before</th><th>After</th><th>Δ</th></tr>'
             f"{ops}</table>" if ops else '<p class="muted">operator counts unchanged</p>')
    return (f'<section id="changes"><h2>Changes</h2>{"".join(rows)}'
            f"<h3>Operators</h3>{table}</section>")


def _passes_section(passes: Sequence[PassChange], before: GraphSnapshot,
                    after: GraphSnapshot) -> str:
    types: dict[str, str] = {}
    for change in passes:
        types.update(change.removed)
        types.update(change.added)
    present = set(before.nodes) | set(after.nodes)
    items = []
    for i, change in enumerate(passes):
        stage = change.stage + (f" #{change.round}" if change.round else "")
        body = ""
        for cls, label, keys in (("removed", "removed", [k for k, _ in change.removed]),
                                 ("added", "added", [k for k, _ in change.added]),
                                 ("matched", "matched", change.matched),
                                 ("changed", "rewired", change.rewired)):
            if keys:
                body += (f'<div class="pl"><span class="sw {cls}"></span>{label} {len(keys)}'
                         f'</div><div class="chips">{_chips(keys, cls, types, present)}'
                         "</div>")
        items.append(
            f'<li class="pass" data-pass-index="{i}" data-pass="{html.escape(change.pass_name)}">'
            f'<div class="pass-head" role="button" tabindex="0"><b>{html.escape(change.pass_name)}'
            f'</b> <small>{html.escape(stage)} · {html.escape(change.graph)} · '
            f"−{len(change.removed)} +{len(change.added)}</small></div>"
            f'<div class="pass-body">{body}</div></li>')
    if not items:
        return ('<section id="passes"><h2>Passes</h2><p class="muted">no pass changed '
                "the graph</p></section>")
    return (f'<section id="passes"><h2>Passes that changed the graph ({len(items)})</h2>'
            f'<p class="muted">click a pass to highlight its nodes</p>'
            f'<ol class="pass-list">{"".join(items)}</ol></section>')


def render_page(*, title: str, subtitle: str, before: GraphSnapshot, after: GraphSnapshot,
                passes: Sequence[PassChange] | None = None, labels: tuple[str, str] = (
                    "Before", "After"), engine: str | None = None) -> str:
    """The whole page as a string."""
    started = time.perf_counter()
    diff = diff_snapshots(before, after, passes or ())
    states_b: dict[str, list[str]] = {}
    states_a: dict[str, list[str]] = {}
    for k in diff.removed:
        states_b.setdefault(k, []).append("removed")
    for k in diff.added:
        states_a.setdefault(k, []).append("added")
    for k in diff.changed:
        states_b.setdefault(k, []).append("changed")
        states_a.setdefault(k, []).append("changed")
    for k in diff.matched:
        if k in before.nodes:
            states_b.setdefault(k, []).append("matched")
        if k in after.nodes:
            states_a.setdefault(k, []).append("matched")

    def edge_set(snap: GraphSnapshot) -> set[tuple[str, str]]:
        return {(src, k) for k, r in snap.nodes.items() for src, *_ in r.inputs
                if src is not None}

    notes: list[str] = []
    svg_b, engine_b, drawn_b = _svg(before, "b", states_b, edge_set(after), engine, notes)
    svg_a, engine_a, drawn_a = _svg(after, "a", states_a, edge_set(before), engine, notes)
    used = engine_b if engine_b == engine_a else f"{engine_b}/{engine_a}"
    data = {
        "b": _records(before, set(drawn_b)),
        "a": _records(after, set(drawn_a)),
        "passes": [p.as_json() for p in passes or ()],
        "changes": {"removed": diff.removed, "added": diff.added,
                    "changed": diff.changed, "matched": sorted(diff.matched)},
        "labels": list(labels),
    }
    counts_b, counts_a = before.node_counts(), after.node_counts()
    nb, na = counts_b.nodes, counts_a.nodes
    summary = (f"{labels[0]}: {counts_b.text()}, {labels[1]}: {counts_a.text()} "
               f"({na - nb:+d} node(s)) · removed "
               f"{len(diff.removed)}, added {len(diff.added)}, changed {len(diff.changed)}, "
               f"matched {len(diff.matched & set(before.nodes))} · layout: {used} "
               f"({time.perf_counter() - started:.2f} s)")
    passes_html = _passes_section(passes, before, after) if passes is not None else ""
    note_html = "".join(f'<p class="note">{html.escape(n)}</p>' for n in notes)
    legend = "".join(f'<span class="lg"><span class="sw {c}"></span>{t}</span>'
                     for c, t in (("removed", "removed"), ("added", "added"),
                                  ("changed", "changed"), ("matched", "matched (rewritten)"),
                                  ("hl", "highlighted"), ("found", "search match")))
    return _asset("page.html").format(
        title=html.escape(title), subtitle=html.escape(subtitle), summary=html.escape(summary),
        notes=note_html, legend=legend, css=_asset("page.css"), js=_asset("page.js"),
        data=_json_script(data),
        changes=_changes_section(diff, before, after), passes=passes_html,
        label_b=html.escape(labels[0]), label_a=html.escape(labels[1]),
        count_b=counts_b.text(), count_a=counts_a.text(), svg_b=svg_b, svg_a=svg_a)


def check_page_target(page: Path, read: Sequence[tuple[Path | None, str]]) -> None:
    """Refuse, before anything is loaded, a page target that cannot be written, that names
    a file the command reads or writes (`read`: path and what it is), or a layout engine
    `GE_HTML_LAYOUT` names wrongly (`ge compile --html`, `ge diff --html`)."""
    from ge.cli.layout import engine_from_environment
    from ge.cli.output_files import check_not_read, check_output_folder

    check_output_folder(page, "the HTML page")
    check_not_read(page, "the HTML page", read)
    engine_from_environment()


def write_page(path: Path, page: str) -> None:
    """Write the page atomically (see `ge.cli.output_files.write_atomically`)."""
    from ge.cli.output_files import write_atomically

    encoded = page.encode("utf-8")

    def write(stream: IO[bytes]) -> None:
        stream.write(encoded)

    write_atomically(path, write, "the HTML page")

