"""Graph layout for the HTML pages of `ge compile --html` and `ge diff --html`.

`layout(sizes, edges)` places boxes top to bottom and routes the edges between them. It asks
graphviz (`dot -Tplain`, a subprocess with a timeout) when `dot` is on PATH, and otherwise
(or when dot fails or times out) uses the layered layout below: longest-path layers
(sources pulled down next to their first consumer), dummy nodes on long edges, barycentre
ordering (a few down/up sweeps, keeping the ordering with the fewest crossings), and x
coordinates by weighted isotonic regression towards the neighbours (so chains run straight).
`GE_HTML_LAYOUT=builtin` (or `dot`) forces one engine; the default is `auto`; another value
is GE1202 (`engine_from_environment`, asked before a command does any work), and a forced
dot that is missing or fails is a warning beside the page's note.

Pure Python, no imports beyond the standard library (and ge's errors and warnings): it runs
on graphs of thousands of nodes in about a second.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["ENGINES", "ENGINE_ENV", "Layout", "builtin_layout", "dot_layout",
           "engine_from_environment", "layout"]

#: The environment variable choosing the engine: auto (default), builtin or dot.
ENGINE_ENV = "GE_HTML_LAYOUT"
ENGINES = ("auto", "dot", "builtin")


def engine_from_environment(environ: Mapping[str, str] | None = None) -> str:
    """The engine `GE_HTML_LAYOUT` chooses ("auto" when unset or empty; case and spaces
    ignored); another value is `CompilerOptionError` (GE1202), as for every variable of
    ge's: it used to be taken as "auto" in silence."""
    value = (os.environ if environ is None else environ).get(ENGINE_ENV, "")
    chosen = value.strip().lower() or "auto"
    if chosen not in ENGINES:
        from ge.errors import CompilerOptionError

        raise CompilerOptionError(f"{ENGINE_ENV} must be one of {', '.join(ENGINES)} (unset: "
                                  f"auto), got {value!r}")
    return chosen

Point = tuple[float, float]

_RANK_GAP = 42.0  # vertical space between layers
_NODE_GAP = 18.0  # horizontal space between boxes of a layer
_DUMMY_WIDTH = 8.0  # the width an edge takes where it passes a layer
_MARGIN = 16.0
_SWEEPS = 6  # barycentre sweeps (each one down and one up)
_DOT_TIMEOUT = 60.0  # seconds


@dataclass
class Layout:
    """Box centres, the drawing's size, and per edge a cubic Bézier path as control points
    `[p0, c1, c2, p1, c1, c2, p2, ...]` (so both engines render the same way)."""

    width: float
    height: float
    centres: list[Point]
    edges: list[list[Point]]
    engine: str  # "dot" or "builtin"
    notes: list[str] = field(default_factory=list)


def layout(sizes: Sequence[tuple[float, float]], edges: Sequence[tuple[int, int]], *,
           engine: str | None = None) -> Layout:
    """Lay out boxes of `sizes` (width, height) joined by `edges` (source, target indexes).

    `engine`: "auto" (dot when on PATH, else built-in), "dot" or "builtin"; default from
    `GE_HTML_LAYOUT`. When dot is wanted but missing or fails, the built-in layout is used
    and a note says why; when it was asked for by name, a `CompileWarning` says it too."""
    chosen = engine.strip().lower() if engine else engine_from_environment()
    if chosen not in ENGINES:
        chosen = "auto"
    notes: list[str] = []
    if chosen != "builtin" and sizes:
        dot = shutil.which("dot")
        if dot is None:
            if chosen == "dot":
                notes.append("graphviz dot is not on PATH: used the built-in layout")
        else:
            try:
                return dot_layout(sizes, edges, dot=dot)
            except (OSError, ValueError, subprocess.SubprocessError) as err:
                notes.append(f"graphviz dot failed ({_short(err)}): used the built-in layout")
    if chosen == "dot" and notes:
        import warnings

        from ge.errors import CompileWarning

        warnings.warn(CompileWarning(f"{ENGINE_ENV}=dot: {notes[0]}"), stacklevel=2)
    result = builtin_layout(sizes, edges)
    result.notes[:0] = notes
    return result


def _short(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return (text[0] if text else type(err).__name__)[:160]


# -- graphviz ---------------------------------------------------------------------------------


def dot_layout(sizes: Sequence[tuple[float, float]], edges: Sequence[tuple[int, int]], *,
               dot: str = "dot", timeout: float = _DOT_TIMEOUT) -> Layout:
    """The layout of `dot -Tplain` (positions in inches, y up) in pixels, y down."""
    lines = ["digraph G {",
             f"graph [rankdir=TB, nodesep={_NODE_GAP / 72:.3f}, ranksep={_RANK_GAP / 72:.3f}];",
             'node [shape=box, fixedsize=true, label=""];']
    for i, (w, h) in enumerate(sizes):
        lines.append(f"n{i} [width={w / 72:.4f}, height={h / 72:.4f}];")
    wanted = _unique_edges(len(sizes), edges)
    for u, v in wanted:
        lines.append(f"n{u} -> n{v};")
    lines.append("}")
    proc = subprocess.run([dot, "-Tplain"], input="\n".join(lines), capture_output=True,
                          text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise ValueError(proc.stderr.strip() or f"exit status {proc.returncode}")
    height = 0.0
    width = 0.0
    centres: list[Point | None] = [None] * len(sizes)
    routes: dict[tuple[int, int], list[Point]] = {}
    for line in proc.stdout.splitlines():
        words = line.split()
        if not words:
            continue
        if words[0] == "graph":
            width, height = float(words[2]) * 72, float(words[3]) * 72
        elif words[0] == "node":
            index = int(words[1][1:])
            centres[index] = (float(words[2]) * 72, height - float(words[3]) * 72)
        elif words[0] == "edge":
            u, v, count = int(words[1][1:]), int(words[2][1:]), int(words[3])
            coords = words[4:4 + 2 * count]
            points = [(float(coords[2 * k]) * 72, height - float(coords[2 * k + 1]) * 72)
                      for k in range(count)]
            routes.setdefault((u, v), points)
    if any(c is None for c in centres):
        raise ValueError("dot left nodes out of its output")
    placed = [c for c in centres if c is not None]
    m = _MARGIN
    shifted = [(x + m, y + m) for x, y in placed]
    paths: list[list[Point]] = []
    for u, v in edges:
        route = routes.get((u, v))
        if route is None or len(route) < 4 or (len(route) - 1) % 3:
            paths.append(_straight(shifted, sizes, u, v))
        else:
            paths.append([(x + m, y + m) for x, y in route])
    return Layout(width + 2 * m, height + 2 * m, shifted, paths, "dot")


def _straight(centres: Sequence[Point], sizes: Sequence[tuple[float, float]], u: int,
              v: int) -> list[Point]:
    (x0, y0), (x1, y1) = centres[u], centres[v]
    start = (x0, y0 + sizes[u][1] / 2)
    end = (x1, y1 - sizes[v][1] / 2)
    return _smooth([start, end])


def _smooth(points: Sequence[Point]) -> list[Point]:
    """A polyline as Bézier control points, vertical tangents at every point."""
    out = [points[0]]
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        dy = (y1 - y0) / 2
        out += [(x0, y0 + dy), (x1, y1 - dy), (x1, y1)]
    return out


def _unique_edges(n: int, edges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    seen: dict[tuple[int, int], None] = {}
    for u, v in edges:
        if u != v and 0 <= u < n and 0 <= v < n:
            seen[(u, v)] = None
    return list(seen)


# -- the built-in layered layout ---------------------------------------------------------------


def _topological(n: int, succ: list[list[int]], pred: list[list[int]]) -> list[int]:
    """Kahn's order (lowest index first among the ready nodes); nodes on cycles follow in
    index order."""
    import heapq

    indeg = [len(p) for p in pred]
    ready = [i for i in range(n) if indeg[i] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        u = heapq.heappop(ready)
        order.append(u)
        for v in succ[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                heapq.heappush(ready, v)
    if len(order) < n:
        placed = set(order)
        order += [i for i in range(n) if i not in placed]
    return order


def _crossings(upper: list[int], lower_pos: dict[int, int], down: list[list[int]]) -> int:
    """Edge crossings between two adjacent layers (inversions, counted with a Fenwick tree)."""
    targets: list[int] = []
    for u in upper:
        targets += sorted(lower_pos[v] for v in down[u])
    if len(targets) < 2:
        return 0
    size = max(targets) + 1
    tree = [0] * (size + 1)
    count = 0
    for seen, t in enumerate(targets):
        # how many earlier targets are greater than t
        i, not_greater = t + 1, 0
        while i > 0:
            not_greater += tree[i]
            i -= i & -i
        count += seen - not_greater
        i = t + 1
        while i <= size:
            tree[i] += 1
            i += i & -i
    return count


def _isotonic(desired: list[float], weights: list[float], gaps: list[float]) -> list[float]:
    """Positions x minimising sum w_i (x_i - d_i)^2 with x_{i+1} - x_i >= gaps[i] (pool
    adjacent violators on the gap-shifted problem)."""
    offsets = [0.0]
    for g in gaps:
        offsets.append(offsets[-1] + g)
    blocks: list[list[float]] = []  # [mean, weight, count]
    for d, w, off in zip(desired, weights, offsets, strict=True):
        blocks.append([d - off, w, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2, c2 = blocks.pop()
            m1, w1, c1 = blocks[-1]
            total = w1 + w2
            blocks[-1] = [(m1 * w1 + m2 * w2) / total, total, c1 + c2]
    out: list[float] = []
    for mean, _, count in blocks:
        out += [mean] * int(count)
    return [y + off for y, off in zip(out, offsets, strict=True)]


def builtin_layout(sizes: Sequence[tuple[float, float]],
                   edges: Sequence[tuple[int, int]]) -> Layout:
    """A layered (Sugiyama-style) layout; see the module's docstring."""
    n = len(sizes)
    if n == 0:
        return Layout(2 * _MARGIN, 2 * _MARGIN, [], [[] for _ in edges], "builtin")
    unique = _unique_edges(n, edges)
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for u, v in unique:
        succ[u].append(v)
        pred[v].append(u)
    order = _topological(n, succ, pred)
    rank = {u: i for i, u in enumerate(order)}
    # edges against the order (only on cycles) are laid out reversed
    dag = [(u, v) if rank[u] < rank[v] else (v, u) for u, v in unique]
    dsucc: list[list[int]] = [[] for _ in range(n)]
    dpred: list[list[int]] = [[] for _ in range(n)]
    for u, v in dag:
        if v not in dsucc[u]:
            dsucc[u].append(v)
            dpred[v].append(u)
    layer = [0] * n
    for u in order:
        if dpred[u]:
            layer[u] = max(layer[p] for p in dpred[u]) + 1
    for u in reversed(order):  # sources sit just above their first consumer
        if not dpred[u] and dsucc[u]:
            layer[u] = max(0, min(layer[s] for s in dsucc[u]) - 1)

    # dummy nodes: ids n.. ; every layer-to-layer hop becomes one segment
    widths = [float(w) for w, _ in sizes]
    heights = [float(h) for _, h in sizes]
    down: list[list[int]] = [[] for _ in range(n)]
    up: list[list[int]] = [[] for _ in range(n)]
    chains: dict[tuple[int, int], list[int]] = {}
    seed_key: list[float] = [float(rank[i]) for i in range(n)]
    for u, v in dag:
        chain = [u]
        for lay in range(layer[u] + 1, layer[v]):
            d = len(widths)
            widths.append(_DUMMY_WIDTH)
            heights.append(0.0)
            layer.append(lay)
            down.append([])
            up.append([])
            seed_key.append(seed_key[u] + 0.5)
            chain.append(d)
        chain.append(v)
        for a, b in itertools.pairwise(chain):
            down[a].append(b)
            up[b].append(a)
        chains[(u, v)] = chain
    total = len(widths)
    depth = max(layer) + 1
    layers: list[list[int]] = [[] for _ in range(depth)]
    for i in sorted(range(total), key=lambda i: seed_key[i]):
        layers[layer[i]].append(i)
    pos = [0] * total
    for members in layers:
        for p, i in enumerate(members):
            pos[i] = p

    def total_crossings() -> int:
        found = 0
        for a in range(depth - 1):
            lower = {i: pos[i] for i in layers[a + 1]}
            found += _crossings(layers[a], lower, down)
        return found

    def sweep(indices: range, neighbours: list[list[int]]) -> None:
        for a in indices:
            members = layers[a]
            keys = {}
            for i in members:
                near = neighbours[i]
                keys[i] = (sum(pos[j] for j in near) / len(near)) if near else float(pos[i])
            members.sort(key=lambda i: keys[i])
            for p, i in enumerate(members):
                pos[i] = p

    best = [list(m) for m in layers]
    best_count = total_crossings() if total < 20000 else 0
    for _ in range(_SWEEPS if best_count else 0):
        sweep(range(1, depth), up)
        sweep(range(depth - 2, -1, -1), down)
        count = total_crossings()
        if count < best_count:
            best, best_count = [list(m) for m in layers], count
        if best_count == 0:
            break
    layers = best
    for members in layers:
        for p, i in enumerate(members):
            pos[i] = p

    # x: pack each layer, then pull boxes towards their neighbours a few rounds
    x = [0.0] * total
    for members in layers:
        cursor = 0.0
        for i in members:
            x[i] = cursor + widths[i] / 2
            cursor += widths[i] + _NODE_GAP
    weight = [1.0 if i < n else 4.0 for i in range(total)]

    def place(indices: range, neighbour_sets: Sequence[list[list[int]]]) -> None:
        for a in indices:
            members = layers[a]
            if not members:
                continue
            desired = []
            for i in members:
                near = [j for nb in neighbour_sets for j in nb[i]]
                desired.append(sum(x[j] for j in near) / len(near) if near else x[i])
            gaps = [(widths[p] + widths[q]) / 2 + _NODE_GAP
                    for p, q in itertools.pairwise(members)]
            placed = _isotonic(desired, [weight[i] for i in members], gaps)
            for i, value in zip(members, placed, strict=True):
                x[i] = value

    for _ in range(4):
        place(range(1, depth), [up])
        place(range(depth - 2, -1, -1), [down])
    place(range(depth), [up, down])
    left = min(x[i] - widths[i] / 2 for i in range(total))
    x = [value - left + _MARGIN for value in x]
    right = max(x[i] + widths[i] / 2 for i in range(total)) + _MARGIN

    layer_y: list[float] = []
    cursor = _MARGIN
    for members in layers:
        tallest = max((heights[i] for i in members), default=0.0)
        layer_y.append(cursor + tallest / 2)
        cursor += tallest + _RANK_GAP
    bottom = cursor - _RANK_GAP + _MARGIN
    centres = [(x[i], layer_y[layer[i]]) for i in range(n)]

    paths: list[list[Point]] = []
    for u, v in edges:
        if u == v or not (0 <= u < n and 0 <= v < n):
            paths.append([])
            continue
        forward = rank[u] < rank[v]
        chain = chains.get((u, v) if forward else (v, u), [])
        if not forward:
            chain = list(reversed(chain))
        points: list[Point] = [(x[u], layer_y[layer[u]] + heights[u] / 2 * (1 if forward
                                                                            else -1))]
        points += [(x[d], layer_y[layer[d]]) for d in chain[1:-1]]
        points.append((x[v], layer_y[layer[v]] - heights[v] / 2 * (1 if forward else -1)))
        paths.append(_smooth(points))
    return Layout(right, bottom, centres, paths, "builtin")
