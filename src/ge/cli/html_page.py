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
comes from
`ge.cli.layout` (graphviz dot when on PATH, else a built-in layered layout). Graphs of more
than `MAX_DRAWN` nodes are not drawn whole: constants are left out first, then only the
changed nodes and their neighbours are drawn; every node stays in the search.
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Iterable, Mapping, Sequence
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
    return drawn, (f"{len(keys)} nodes, more than {cap}: drawing {len(drawn)} (the changed "
                   "nodes and their neighbours, no constants); search finds every node")


def _fmt(v: float) -> str:
    return f"{v:.1f}".removesuffix(".0")


def _svg(snap: GraphSnapshot, side: str, states: Mapping[str, list[str]],
         other_edges: set[tuple[str, str]], engine: str | None,
         notes: list[str]) -> tuple[str, str]:
    """The SVG of one graph (each graph and subgraph laid out on its own, stacked) and the
    layout engine used."""
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
    return svg, used


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
    svg_b, engine_b = _svg(before, "b", states_b, edge_set(after), engine, notes)
    svg_a, engine_a = _svg(after, "a", states_a, edge_set(before), engine, notes)
    used = engine_b if engine_b == engine_a else f"{engine_b}/{engine_a}"
    data = {
        "b": {k: r.as_json() for k, r in before.nodes.items()},
        "a": {k: r.as_json() for k, r in after.nodes.items()},
        "passes": [p.as_json() for p in passes or ()],
        "changes": {"removed": diff.removed, "added": diff.added,
                    "changed": diff.changed, "matched": sorted(diff.matched)},
        "labels": list(labels),
    }
    nb = sum(diff.ops_before.values())
    na = sum(diff.ops_after.values())
    summary = (f"{labels[0]}: {nb} operator(s), after: {na} ({na - nb:+d}) · removed "
               f"{len(diff.removed)}, added {len(diff.added)}, changed {len(diff.changed)}, "
               f"matched {len(diff.matched & set(before.nodes))} · layout: {used} "
               f"({time.perf_counter() - started:.2f} s)")
    passes_html = _passes_section(passes, before, after) if passes is not None else ""
    note_html = "".join(f'<p class="note">{html.escape(n)}</p>' for n in notes)
    legend = "".join(f'<span class="lg"><span class="sw {c}"></span>{t}</span>'
                     for c, t in (("removed", "removed"), ("added", "added"),
                                  ("changed", "changed"), ("matched", "matched (rewritten)"),
                                  ("hl", "highlighted"), ("found", "search match")))
    return _PAGE.format(
        title=html.escape(title), subtitle=html.escape(subtitle), summary=html.escape(summary),
        notes=note_html, legend=legend, css=_CSS, js=_JS, data=_json_script(data),
        changes=_changes_section(diff, before, after), passes=passes_html,
        label_b=html.escape(labels[0]), label_a=html.escape(labels[1]),
        count_b=len(before.nodes), count_a=len(after.nodes), svg_b=svg_b, svg_a=svg_a)


def write_page(path: Path, page: str) -> None:
    """Write the page atomically (see `ge.cli.output.write_atomically`)."""
    from ge.cli.output import write_atomically

    encoded = page.encode("utf-8")

    def write(stream: IO[bytes]) -> None:
        stream.write(encoded)

    write_atomically(path, write, "the HTML page")


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{css}</style></head>
<body data-ready="0">
<header><h1>{title}</h1><p class="sub">{subtitle}</p><p class="summary">{summary}</p>{notes}
</header>
<div id="toolbar">
<input id="search" type="search" placeholder="Search nodes by name or op type" autocomplete="off">
<span id="search-count"></span>
<span class="btns"><button data-mode="both" class="on">Side by side</button><button
 data-mode="before">{label_b}</button><button data-mode="after">{label_a}</button></span>
<span class="btns"><button data-zoom="out">−</button><button data-zoom="fit">Fit</button><button
 data-zoom="in">+</button></span>
<label><input id="show-consts" type="checkbox" checked> constants</label>
<button id="clear">Clear highlight</button>
<span class="legend">{legend}</span>
</div>
<div id="main">
<aside id="side">
<ul id="results"></ul>
<div id="details" class="muted">Click a node for its details.</div>
{passes}
{changes}
</aside>
<div id="views" class="mode-both">
<section class="view" id="view-b"><h2>{label_b} <small>({count_b} nodes)</small></h2>
<div class="scroll">{svg_b}</div></section>
<section class="view" id="view-a"><h2>{label_a} <small>({count_a} nodes)</small></h2>
<div class="scroll">{svg_a}</div></section>
</div>
</div>
<div id="tip" hidden></div>
<script type="application/json" id="ge-data">{data}</script>
<script>{js}</script>
</body></html>
"""

_CSS = """
*{box-sizing:border-box}
body{margin:0;font:13px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
  color:#202124;background:#fafafa;display:flex;flex-direction:column;height:100vh}
header{padding:8px 14px 4px;border-bottom:1px solid #ddd;background:#fff}
h1{font-size:16px;margin:0}h2{font-size:14px;margin:6px 0}h3{font-size:13px;margin:8px 0 4px}
.sub,.summary{margin:2px 0;color:#555}.note{margin:2px 0;color:#9a5b00}
.muted{color:#777}
#toolbar{display:flex;flex-wrap:wrap;gap:8px;align-items:center;padding:6px 14px;
  border-bottom:1px solid #ddd;background:#fff}
#search{width:280px;padding:4px 6px;font:inherit}
button{font:inherit;padding:2px 8px;border:1px solid #bbb;background:#f5f5f5;
  border-radius:3px;cursor:pointer}
button.on{background:#1a73e8;color:#fff;border-color:#1a73e8}
.btns button+button{margin-left:-1px}
.legend{display:flex;gap:10px;flex-wrap:wrap}.lg{white-space:nowrap}
.sw{display:inline-block;width:12px;height:12px;border:2px solid #999;border-radius:2px;
  vertical-align:-2px;margin-right:4px;background:#fff}
.sw.removed{background:#fde2e1;border-color:#d93025}
.sw.added{background:#dff5e3;border-color:#188038}
.sw.changed{background:#fff4d6;border-color:#e8a200}.sw.matched{border:2px dashed #8e24aa}
.sw.hl{border:3px solid #1a73e8}.sw.found{border:3px solid #ff6d00}
#main{flex:1;display:flex;min-height:0}
#side{width:330px;min-width:220px;overflow:auto;border-right:1px solid #ddd;padding:6px 10px;
  background:#fff;resize:horizontal}
#views{flex:1;display:flex;min-width:0}
.view{flex:1;display:flex;flex-direction:column;min-width:0;border-right:1px solid #ddd}
.view h2{padding:0 10px}
.scroll{flex:1;overflow:auto;background:#fff}
#views.mode-before #view-a,#views.mode-after #view-b{display:none}
svg.graph{display:block}
.node rect{fill:#e8f0fe;stroke:#5f6368;stroke-width:1}
.node.const rect{fill:#f1f3f4;stroke:#bdc1c6}
.node.io rect{fill:#e6f4ea;stroke:#5f6368}
.node text{text-anchor:middle;font-size:10px;fill:#202124;pointer-events:none}
.node text.l1{font-weight:600;font-size:11px}.node.const text{fill:#5f6368}
.node{cursor:pointer}
.node.removed rect{fill:#fde2e1;stroke:#d93025;stroke-width:2}
.node.added rect{fill:#dff5e3;stroke:#188038;stroke-width:2}
.node.changed rect{fill:#fff4d6;stroke:#e8a200;stroke-width:2}
.node.matched rect{stroke:#8e24aa;stroke-width:2.5;stroke-dasharray:5 3}
.edge{fill:none;stroke:#9aa0a6;stroke-width:1.2}
.edge.e-removed{stroke:#d93025;stroke-dasharray:4 3}.edge.e-added{stroke:#188038}
.arrow{fill:#9aa0a6}
.sg-frame{fill:none;stroke:#ccc;stroke-dasharray:6 4}.sg-title{font-size:12px;fill:#555}
svg.focus .node:not(.hl){opacity:.25}svg.focus .edge{opacity:.2}
svg.searching .node:not(.found){opacity:.25}svg.searching .edge{opacity:.2}
.node.hl rect{stroke:#1a73e8;stroke-width:3.5}
.node.found rect{stroke:#ff6d00;stroke-width:3.5}
.hide-consts .node.const,.hide-consts .edge.from-const{display:none}
#tip{position:fixed;z-index:10;max-width:520px;background:#fff;border:1px solid #999;
  border-radius:4px;padding:6px 8px;box-shadow:0 2px 8px rgba(0,0,0,.2);font-size:12px;
  pointer-events:none}
#tip table,#details table{border-collapse:collapse}
#tip td,#details td{padding:0 6px 0 0;vertical-align:top}
.k{color:#777}
.chips{display:flex;flex-wrap:wrap;gap:3px;margin:3px 0 6px}
.chip{border:1px solid #ccc;border-radius:10px;padding:0 6px;font-size:11px;cursor:pointer;
  word-break:break-all;background:#fff}
.chip i{color:#777;font-style:normal}
.chip.removed{border-color:#d93025}
.chip.added{border-color:#188038}
.chip.changed{border-color:#e8a200}
.chip.matched{border-color:#8e24aa;border-style:dashed}
.chip.transient{opacity:.55}
.more{font-size:11px;color:#777}
.pass-list{padding-left:20px;margin:4px 0}
.pass-head{cursor:pointer;padding:2px 0}.pass-head:hover{color:#1a73e8}
.pass.sel .pass-head{color:#1a73e8}
.pass-body{display:none;padding-left:4px}.pass.sel .pass-body{display:block}
.pl{font-size:11px;color:#555}
table.ops{border-collapse:collapse;font-size:12px}
table.ops td,table.ops th{padding:1px 6px;text-align:right;border-bottom:1px solid #eee}
table.ops td:first-child,table.ops th:first-child{text-align:left}
#results{list-style:none;padding:0;margin:0 0 6px;max-height:220px;overflow:auto}
#results li{cursor:pointer;padding:1px 2px;font-size:12px;word-break:break-all}
#results li:hover{background:#e8f0fe}
#details{font-size:12px;border:1px solid #eee;padding:4px;margin-bottom:6px;
  word-break:break-all}
summary{cursor:pointer}
"""

_JS = r"""
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("ge-data").textContent);
  var views = document.getElementById("views");
  var svgs = {b: document.getElementById("svg-b"), a: document.getElementById("svg-a")};
  var elements = {b: new Map(), a: new Map()};
  var scale = {b: 1, a: 1};
  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c];
    });
  }
  ["b", "a"].forEach(function (side) {
    var svg = svgs[side];
    svg.querySelectorAll("g.node").forEach(function (g) {
      elements[side].set(g.getAttribute("data-key"), g);
    });
    svg.querySelectorAll("path.edge").forEach(function (p) {
      var src = data[side][p.getAttribute("data-from")];
      if (src && src[1] === "Const") { p.classList.add("from-const"); }
    });
  });
  function stateOf(side, key) {
    var g = elements[side].get(key);
    if (!g) { return data[side][key] ? "not drawn" : ""; }
    var s = ["removed", "added", "changed", "matched"].filter(function (c) {
      return g.classList.contains(c);
    });
    return s.join(", ");
  }
  function describe(side, key) {
    var r = data[side][key];
    if (!r) { return ""; }
    var label = data.labels[side === "b" ? 0 : 1];
    var h = "<b>" + esc(r[1]) + "</b> <span class='k'>" + esc(label) + "</span><br>" + esc(r[0]);
    var st = stateOf(side, key);
    if (st) { h += "<br><span class='k'>state:</span> " + esc(st); }
    if (r[2] && key.indexOf("::") >= 0) { h += "<br><span class='k'>graph:</span> " + esc(r[2]); }
    h += "<table>";
    r[3].forEach(function (inp, i) {
      h += "<tr><td class='k'>in " + i + "</td><td>" + (inp[0] === null ? "(none)" :
        esc(inp[2]) + " <span class='k'>from " + esc(inp[0]) + ":" + inp[1] + "</span> " +
        esc(inp[4]) + " " + esc(inp[3])) + "</td></tr>";
    });
    r[4].forEach(function (out, i) {
      h += "<tr><td class='k'>out " + i + "</td><td>" + esc(out[0]) + " " + esc(out[2]) + " " +
        esc(out[1]) + "</td></tr>";
    });
    Object.keys(r[5]).forEach(function (name) {
      h += "<tr><td class='k'>" + esc(name) + "</td><td>" + esc(r[5][name]) + "</td></tr>";
    });
    h += "</table>";
    if (r[6]) {
      h += "<span class='k'>made by</span> " + esc(r[6]);
      if (r[7].length) { h += " <span class='k'>from</span> " + esc(r[7].join(", ")); }
    }
    return h;
  }
  var tip = document.getElementById("tip");
  function sideOf(el) { return el.closest("svg").id === "svg-b" ? "b" : "a"; }
  document.addEventListener("mouseover", function (ev) {
    var g = ev.target.closest && ev.target.closest("g.node");
    if (!g) { tip.hidden = true; return; }
    tip.innerHTML = describe(sideOf(g), g.getAttribute("data-key"));
    tip.hidden = false;
  });
  document.addEventListener("mousemove", function (ev) {
    if (tip.hidden) { return; }
    var x = ev.clientX + 14, y = ev.clientY + 14;
    var w = tip.offsetWidth, h = tip.offsetHeight;
    if (x + w > window.innerWidth) { x = Math.max(0, ev.clientX - w - 14); }
    if (y + h > window.innerHeight) { y = Math.max(0, ev.clientY - h - 14); }
    tip.style.left = x + "px"; tip.style.top = y + "px";
  });
  var details = document.getElementById("details");
  function showDetails(key) {
    var h = "";
    ["b", "a"].forEach(function (side) {
      if (data[side][key]) { h += "<div>" + describe(side, key) + "</div>"; }
    });
    details.innerHTML = h || esc(key) + " <span class='k'>is in neither graph</span>";
    details.classList.remove("muted");
  }
  function clearHighlight() {
    ["b", "a"].forEach(function (side) {
      svgs[side].classList.remove("focus");
      svgs[side].querySelectorAll(".hl").forEach(function (g) { g.classList.remove("hl"); });
    });
    document.querySelectorAll(".pass.sel").forEach(function (li) { li.classList.remove("sel"); });
  }
  function highlight(keysBySide, scroll) {
    clearHighlight();
    var first = {};
    ["b", "a"].forEach(function (side) {
      var any = false;
      keysBySide[side].forEach(function (k) {
        var g = elements[side].get(k);
        if (g) { g.classList.add("hl"); any = true; if (!first[side]) { first[side] = g; } }
      });
      if (any) { svgs[side].classList.add("focus"); }
    });
    if (scroll) {
      ["b", "a"].forEach(function (side) {
        if (first[side]) { first[side].scrollIntoView({block: "center", inline: "center"}); }
      });
    }
  }
  document.querySelectorAll(".pass").forEach(function (li) {
    li.querySelector(".pass-head").addEventListener("click", function () {
      var was = li.classList.contains("sel");
      var p = data.passes[Number(li.getAttribute("data-pass-index"))];
      if (was) { clearHighlight(); return; }
      var both = p.matched.concat(p.rewired);
      highlight({b: p.removed.concat(both), a: p.added.concat(both)}, true);
      li.classList.add("sel");
    });
  });
  document.addEventListener("click", function (ev) {
    var chip = ev.target.closest && ev.target.closest(".chip");
    if (chip) {
      var k = chip.getAttribute("data-key");
      highlight({b: [k], a: [k]}, true);
      var li = chip.closest(".pass");
      if (li) { li.classList.add("sel"); }
      showDetails(k);
      return;
    }
    var g = ev.target.closest && ev.target.closest("g.node");
    if (g) {
      var key = g.getAttribute("data-key");
      highlight({b: [key], a: [key]}, false);
      showDetails(key);
    }
  });
  document.getElementById("clear").addEventListener("click", clearHighlight);
  var search = document.getElementById("search");
  var results = document.getElementById("results");
  var count = document.getElementById("search-count");
  function runSearch() {
    var q = search.value.trim().toLowerCase();
    results.innerHTML = "";
    var found = 0, listed = 0, seen = new Set();
    ["b", "a"].forEach(function (side) {
      var svg = svgs[side];
      svg.querySelectorAll(".found").forEach(function (g) { g.classList.remove("found"); });
      svg.classList.toggle("searching", q.length > 0);
      if (!q) { return; }
      Object.keys(data[side]).forEach(function (k) {
        var r = data[side][k];
        if (r[0].toLowerCase().indexOf(q) < 0 && r[1].toLowerCase().indexOf(q) < 0 &&
            k.toLowerCase().indexOf(q) < 0) { return; }
        found++;
        var g = elements[side].get(k);
        if (g) { g.classList.add("found"); }
        if (!seen.has(k) && listed < 200) {
          seen.add(k); listed++;
          var li = document.createElement("li");
          li.textContent = r[0] + "  (" + r[1] + ")";
          li.setAttribute("data-key", k);
          li.addEventListener("click", function () {
            highlight({b: [k], a: [k]}, true); showDetails(k);
          });
          results.appendChild(li);
        }
      });
    });
    count.textContent = q ? found + " match(es)" + (listed >= 200 ? ", 200 listed" : "") : "";
  }
  search.addEventListener("input", runSearch);
  function setMode(mode) {
    ["both", "before", "after"].forEach(function (m) { views.classList.remove("mode-" + m); });
    views.classList.add("mode-" + mode);
    document.querySelectorAll("[data-mode]").forEach(function (o) {
      o.classList.toggle("on", o.getAttribute("data-mode") === mode);
    });
  }
  document.querySelectorAll("[data-mode]").forEach(function (b) {
    b.addEventListener("click", function () {
      setMode(b.getAttribute("data-mode"));
      visibleSides().forEach(fit);
    });
  });
  var wanted = window.location.hash.replace("#", "");
  if (["both", "before", "after"].indexOf(wanted) >= 0) { setMode(wanted); }
  function applyScale(side) {
    var svg = svgs[side];
    svg.setAttribute("width", Number(svg.getAttribute("data-w")) * scale[side]);
    svg.setAttribute("height", Number(svg.getAttribute("data-h")) * scale[side]);
  }
  function fit(side, floor) {
    var box = svgs[side].parentNode;
    var w = Number(svgs[side].getAttribute("data-w"));
    var avail = Math.max(100, box.clientWidth - 4);
    scale[side] = Math.max(floor || 0.05, Math.min(1, avail / w));
    applyScale(side);
  }
  function visibleSides() {
    return ["b", "a"].filter(function (s) { return svgs[s].offsetParent !== null; });
  }
  document.querySelectorAll("[data-zoom]").forEach(function (b) {
    b.addEventListener("click", function () {
      var how = b.getAttribute("data-zoom");
      visibleSides().forEach(function (side) {
        if (how === "fit") { fit(side, 0.05); return; }
        scale[side] = Math.max(0.05, Math.min(4, scale[side] * (how === "in" ? 1.25 : 0.8)));
        applyScale(side);
      });
    });
  });
  ["b", "a"].forEach(function (side) {
    svgs[side].parentNode.addEventListener("wheel", function (ev) {
      if (!ev.ctrlKey) { return; }
      ev.preventDefault();
      scale[side] = Math.max(0.05, Math.min(4, scale[side] * (ev.deltaY < 0 ? 1.1 : 0.9)));
      applyScale(side);
    }, {passive: false});
  });
  visibleSides().forEach(function (side) { fit(side, 0.5); });
  document.getElementById("show-consts").addEventListener("change", function (ev) {
    views.classList.toggle("hide-consts", !ev.target.checked);
  });
  document.body.setAttribute("data-ready", "1");
  document.body.setAttribute("data-nodes", elements.b.size + "/" + elements.a.size);
})();
"""
