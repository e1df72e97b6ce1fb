"""Benchmark freeing a large compiled graph: `Graph.close()` against Python's cyclic
collector, and how long a `ge compile` process takes to end once its command has.

The IR is made of reference cycles, so a dropped graph is freed only by the cyclic
collector, which traverses every tracked object of the process to find it; `Graph.close()`
cuts the cycles, and reference counting frees the graph (docs/graph.md, "Closing a graph").

1. In process, one fresh interpreter per run, the sides alternating
   (`common.run_sides_alternating`): `ge.compile` of the generated encoder of `--nodes`
   nodes (`bench_compile.make_encoder_model`, built-in passes, no plugins), then, timed:
   - `close`: `result.graph.close()`, the result dropped, then `gc.collect()`;
   - `collector`: the result dropped, then `gc.collect()` (what a later full collection, or
     the end of the process, pays when nobody closes the graph).
   Each child reports the time of each part and the objects the collection found (what it
   freed); a `gc.collect()` before the timed part clears what the compilation itself left.
2. `ge compile MODEL -o OUT -q` as a process (`python -m ge`, the console script's path):
   its wall time, and the time from its last line of output (PYTHONUNBUFFERED: each line
   arrives as printed) to its end, which is the interpreter's shutdown; `--other-src DIR`
   also runs another checkout's `ge` (DIR, its `src` folder, first on PYTHONPATH),
   alternating with this one, for a before/after comparison; the outputs are compared.

Run: `make bench` or `.venv/bin/python benchmarks/bench_freeing.py [--nodes N] [--runs R]
[--other-src DIR]`.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_compile import make_encoder_model
from common import min_median, print_columns, run_sides_alternating

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_NODES = 100_000
DEFAULT_RUNS = 3
SIDES = ("close", "collector")


def child(side: str, model: str) -> dict:
    """One in-process run (section 1 of the module docstring)."""
    import ge

    result = ge.compile(model)
    gc.collect()  # (what the compilation left: not this benchmark's subject)
    start = time.perf_counter()
    if side == "close":
        result.graph.close()
    closed = time.perf_counter()
    del result
    dropped = time.perf_counter()
    found = gc.collect()
    end = time.perf_counter()
    return {"seconds": end - start, "close": closed - start, "drop": dropped - closed,
            "collect": end - dropped, "found": found}


def timed_command(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, seconds from the last line of output to the end) of one process."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env=env)
    last = start
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        last = time.perf_counter()
        lines.append(line)
    process.wait()
    end = time.perf_counter()
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{b''.join(lines).decode()}")
    return end - start, end - last


def measure_in_process(model: Path, runs: int) -> None:
    reports = run_sides_alternating(
        __file__, SIDES, lambda side: (side, str(model)), runs,
        env=lambda side: {"GE_DISABLE_PLUGIN_AUTOLOAD": "1"}, label="freeing: ")
    rows = []
    for side in SIDES:
        done = [r for r in reports[side] if "seconds" in r]
        if not done:
            rows.append([side, "FAILED", "", "", "", ""])
            continue
        cells = []
        for part in ("seconds", "close", "drop", "collect"):
            low, mid = min_median([r[part] for r in done])
            cells.append(f"{low:.3f} / {mid:.3f}")
        found = sorted(r["found"] for r in done)[len(done) // 2]
        rows.append([side, *cells, f"{found:,}"])
    print_columns(f"Freeing the compiled {model.name} ({runs} fresh processes per side; "
                  "seconds min / median)",
                  ["side", "total", "close()", "drop", "gc.collect()", "objects collected"],
                  rows)


def measure_command(model: Path, runs: int, other_src: Path | None, folder: Path) -> int:
    trees = {"this tree": ROOT / "src"}
    if other_src is not None:
        trees["other tree"] = other_src
    times: dict[str, list[tuple[float, float]]] = {tree: [] for tree in trees}
    for run in range(runs):
        order = list(trees) if run % 2 == 0 else list(trees)[::-1]
        for tree in order:
            env = {**os.environ, "PYTHONUNBUFFERED": "1", "GE_DISABLE_PLUGIN_AUTOLOAD": "1",
                   "PYTHONPATH": str(trees[tree])}
            out = folder / f"{tree.replace(' ', '_')}.onnx"
            wall, tail = timed_command([sys.executable, "-m", "ge", "compile", str(model),
                                        "-o", str(out), "-q"], env)
            times[tree].append((wall, tail))
            print(f"run {run + 1}/{runs}  ge compile, {tree:<12} wall {wall:8.3f} s, "
                  f"after its last line {tail:.3f} s", flush=True)
    rows = []
    for tree, measured in times.items():
        walls = min_median([w for w, _ in measured])
        tails = min_median([t for _, t in measured])
        rows.append([f"{tree} ({trees[tree]})", f"{walls[0]:.3f} / {walls[1]:.3f}",
                     f"{tails[0]:.3f} / {tails[1]:.3f}"])
    print_columns(f"ge compile {model.name} -o OUT -q, {runs} processes each (seconds min / "
                  "median)", ["ge", "wall", "from the last line to the end"], rows)
    outputs = [(folder / f"{tree.replace(' ', '_')}.onnx").read_bytes() for tree in trees]
    if any(output != outputs[0] for output in outputs):
        print("the outputs of the two trees DIFFER")
        return 1
    if len(outputs) > 1:
        print("the outputs of the two trees are byte-identical")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=DEFAULT_NODES,
                        help=f"minimum nodes of the generated encoder (default "
                             f"{DEFAULT_NODES:,})")
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS,
                        help=f"fresh processes per side (default {DEFAULT_RUNS})")
    parser.add_argument("--other-src", type=Path, default=None, metavar="DIR",
                        help="also time `ge compile` of another checkout's src folder")
    parser.add_argument("--child", nargs=2, metavar=("SIDE", "MODEL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        model = folder / "encoder.onnx"
        proto = make_encoder_model(args.nodes)
        onnx.save(proto, model)
        print(f"encoder: {len(proto.graph.node):,} nodes, {model.stat().st_size / 1e6:.1f} MB")
        del proto
        measure_in_process(model, args.runs)
        return measure_command(model, args.runs, args.other_src, folder)


if __name__ == "__main__":
    sys.exit(main())
