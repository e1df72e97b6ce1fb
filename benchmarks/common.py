"""Shared helpers of the benchmarks: best-of-N timing, child processes, the result table."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
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


def run_child(script: str, *args: str) -> dict:
    """Run `script --child ARGS` in a fresh interpreter; it prints one JSON object."""
    out = subprocess.run([sys.executable, script, "--child", *args], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


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
