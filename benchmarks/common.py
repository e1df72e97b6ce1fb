"""Shared helpers of the benchmarks: best-of-N timing, child processes, the result table."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table


def best_time(fn: Callable[[], object], repeat: int = 5) -> float:
    """The fastest of `repeat` runs, in seconds (the least disturbed by other processes)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def run_child(script: str, *args: str, env: Mapping[str, str] | None = None) -> dict:
    """Run `script --child ARGS` in a fresh interpreter; it prints one JSON object.

    `env` adds variables to the child's environment (the parent's is inherited)."""
    out = subprocess.run([sys.executable, script, "--child", *args], check=True,
                         capture_output=True, text=True,
                         env=None if env is None else {**os.environ, **env})
    return json.loads(out.stdout.strip().splitlines()[-1])


def min_median(values: Sequence[float]) -> tuple[float, float]:
    """(min, median) of `values`: the least disturbed run and the typical one."""
    return min(values), statistics.median(values)


def run_sides_alternating(script: str, sides: Sequence[str],
                          child_args: Callable[[str], Sequence[str]], runs: int, *,
                          env: Callable[[str], Mapping[str, str] | None] = lambda side: None,
                          label: str = "") -> dict[str, list[dict]]:
    """`runs` rounds of one fresh `run_child` per side, the order reversed every other round
    (so neither side always runs on a warmer machine); each side's JSON reports in order.

    A child that fails is reported as {"error": the end of its stderr} and its side is not
    run again; the printed progress line shows each run's "seconds"."""
    reports: dict[str, list[dict]] = {side: [] for side in sides}
    failed: set[str] = set()
    for run in range(runs):
        for side in sides if run % 2 == 0 else list(sides)[::-1]:
            if side in failed:
                continue
            try:
                out = run_child(script, *child_args(side), env=env(side))
            except subprocess.CalledProcessError as error:
                tail = (error.stderr or "").strip().splitlines()[-15:]
                out = {"error": "\n".join(tail) or f"exit status {error.returncode}"}
                failed.add(side)
            reports[side].append(out)
            if "seconds" in out:
                shown = f"{out['seconds']:8.3f} s"
            else:
                lines = out["error"].splitlines()
                shown = "FAILED: " + (lines[-1] if lines else "")
            print(f"run {run + 1}/{runs}  {label}{side:<28} {shown}", flush=True)
    return reports


@dataclass
class Row:
    """One comparison: what was measured, ge's number, the peer's, and the goal ratio."""

    task: str
    ge: float
    peer_name: str
    peer: float
    unit: str = "s"
    goal: float | None = None

    @property
    def ratio(self) -> float:
        return self.ge / self.peer if self.peer else float("inf")


def print_table(title: str, rows: list[Row]) -> None:
    table = Table(title=title)
    for column in ("task", "ge", "peer", "peer value", "ge / peer", "goal"):
        table.add_column(column, justify="right" if column != "task" else "left")
    for row in rows:
        digits = 3 if row.unit == "s" else 0
        ok = "" if row.goal is None else (
            f"≤ {row.goal:g}x " + ("[green]met[/green]" if row.ratio <= row.goal
                                   else "[red]missed[/red]"))
        table.add_row(row.task, f"{row.ge:.{digits}f} {row.unit}", row.peer_name,
                      f"{row.peer:.{digits}f} {row.unit}", f"{row.ratio:.2f}x", ok)
    Console(width=140).print(table)


def print_columns(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]],
                  caption: str | None = None) -> None:
    """A table of preformatted cells: the first column left-aligned, the others right."""
    table = Table(title=title, caption=caption)
    for index, column in enumerate(columns):
        table.add_column(column, justify="left" if index == 0 else "right")
    for row in rows:
        table.add_row(*row)
    Console(width=180).print(table)


def assert_chain_output_equal(original: str, rewritten: bytes) -> None:
    """onnxruntime (optimisations off) gives the rewritten MatMul chain the original's
    output on one positive input, within 1e-5 (bench_rewrite, bench_matcher)."""
    import numpy as np
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    x = np.random.default_rng(1).uniform(1.0, 2.0, (2, 4)).astype(np.float32)
    outputs = [
        ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
        .run(None, {"x": x})[0]
        for source in (original, rewritten)
    ]
    np.testing.assert_allclose(outputs[1], outputs[0], rtol=0, atol=1e-5)


def sides_available(sides: tuple[str, ...]) -> tuple[str, ...]:
    """`sides` ("ge", "onnxscript"), or ge alone when the onnxscript peer is not installed."""
    try:
        import onnxscript.rewriter  # noqa: F401
    except ImportError:
        print("onnxscript is not installed (pip install -e '.[bench]'); measuring ge alone")
        return ("ge",)
    return sides


class CollectionTimer:
    """Every garbage collection of this process while active, timed through `gc.callbacks`:
    (start, end, generation) by `time.perf_counter`, so the share of a timed part spent in
    collections can be read afterwards (`seconds_between`). The collector itself is left
    as it is (on, as users run)."""

    def __init__(self) -> None:
        self.collections: list[tuple[float, float, int]] = []
        self._started = 0.0

    def _callback(self, phase: str, info: dict) -> None:
        now = time.perf_counter()
        if phase == "start":
            self._started = now
        else:
            self.collections.append((self._started, now, info["generation"]))

    def __enter__(self) -> CollectionTimer:
        import gc

        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        import gc

        gc.callbacks.remove(self._callback)

    def within(self, start: float, end: float) -> list[tuple[float, float, int]]:
        """The collections that started in [start, end]."""
        return [c for c in self.collections if start <= c[0] <= end]

    def seconds_between(self, start: float, end: float) -> float:
        """Seconds spent in collections that started in [start, end] (clipped to `end`)."""
        return sum(min(stop, end) - begin for begin, stop, _ in self.within(start, end))

    def report(self, start: float, end: float) -> dict:
        """{"gc_seconds", "gc_counts": collections per generation} of [start, end], for a
        child's JSON report."""
        counts = [0, 0, 0]
        for _, _, generation in self.within(start, end):
            counts[generation] += 1
        return {"gc_seconds": self.seconds_between(start, end), "gc_counts": counts}


def gc_share_cells(seconds: Sequence[float], gc_seconds: Sequence[float],
                   counts: Sequence[Sequence[int]]) -> list[str]:
    """Cells of one side's collection table row: time min / median, collections min / median
    seconds, share of the timed part (each run's own share: min / median), collections per
    generation (median run)."""
    shares = [g / s if s else 0.0 for g, s in zip(gc_seconds, seconds)]
    t_min, t_med = min_median(seconds)
    g_min, g_med = min_median(gc_seconds)
    s_min, s_med = min_median(shares)
    middle = sorted(range(len(seconds)), key=lambda i: seconds[i])[len(seconds) // 2]
    gen = counts[middle] if counts else [0, 0, 0]
    return [f"{t_min:.3f} / {t_med:.3f} s", f"{g_min:.3f} / {g_med:.3f} s",
            f"{s_min:.1%} / {s_med:.1%}", f"{gen[0]:,} / {gen[1]:,} / {gen[2]:,}"]


def peak_rss_mib() -> float:
    """This process's peak resident memory in MiB (Linux VmHWM, which starts afresh at exec;
    elsewhere ru_maxrss)."""
    from pathlib import Path

    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024
