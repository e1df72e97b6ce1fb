"""Benchmark: discovering and registering 1,000 pass files vs plain `importlib` imports.

Both sides import the same kind of file (one registered `FusionBasePass` each) from their
own copy of the directory, so bytecode caches do not favour either. `ge` does more per file
(path resolution, stable module names, de-duplication, isolation and rollback bookkeeping);
the goal is to stay within 1.3x of the plain imports.

Run: .venv/bin/python benchmarks/bench_discovery.py [--files N] [--rounds R]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ge.passes import clear_registered_passes, get_registered_passes
from ge.passes.bootstrap import scan_modules_from_path
from ge.passes.loader import unload_all

GOAL = 1.3

PASS_FILE = """\
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="{tag}Pass{index:04d}", stage=PassStage.BEFORE_INFER_SHAPE)
class {tag}Pass{index:04d}(FusionBasePass):
    def run(self, graph, context):
        return None
"""


def write_plugins(directory: Path, tag: str, count: int) -> None:
    directory.mkdir(parents=True)
    for index in range(count):
        text = PASS_FILE.format(tag=tag, index=index)
        (directory / f"pass_{index:04d}.py").write_text(text)


def plain_import(directory: Path) -> int:
    """What a hand-written loader would do: import every file, nothing else."""
    for path in sorted(directory.glob("*.py")):
        name = f"plain_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return len(get_registered_passes())


def ge_discovery(directory: Path) -> int:
    scan_modules_from_path(directory)
    return len(get_registered_passes())


def reset() -> None:
    unload_all()
    clear_registered_passes()
    for name in [n for n in sys.modules if n.startswith("plain_pass_")]:
        del sys.modules[name]
    gc.collect()


def measure(func: Callable[[Path], int], directory: Path, expected: int) -> float:
    reset()
    start = time.perf_counter()
    registered = func(directory)
    elapsed = time.perf_counter() - start
    if registered != expected:
        raise SystemExit(f"{func.__name__} registered {registered} passes, expected {expected}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    # Measure with bytecode caches, as users import: both sides then skip compiling.
    sys.dont_write_bytecode = False

    with tempfile.TemporaryDirectory(prefix="ge_bench_discovery_") as tmp:
        plain_dir, ge_dir = Path(tmp) / "plain", Path(tmp) / "ge"
        write_plugins(plain_dir, "Plain", args.files)
        write_plugins(ge_dir, "Ge", args.files)
        cases: list[tuple[str, Callable[[Path], int], Path]] = [
            ("importlib (spec_from_file_location + exec_module)", plain_import, plain_dir),
            ("ge discovery + registration", ge_discovery, ge_dir),
        ]
        for _, func, directory in cases:  # warm-up: writes the bytecode caches
            measure(func, directory, args.files)
        times: dict[str, list[float]] = {label: [] for label, _, _ in cases}
        for round_index in range(args.rounds):
            order = cases if round_index % 2 == 0 else list(reversed(cases))
            for label, func, directory in order:
                times[label].append(measure(func, directory, args.files))
        reset()

    baseline = statistics.median(times[cases[0][0]])
    table = Table(title=f"Discovering {args.files} pass files ({args.rounds} rounds, warm caches)")
    for column in ("method", "median ms", "min ms", "µs per file", "ratio"):
        table.add_column(column, justify="right" if column != "method" else "left")
    for label, _, _ in cases:
        median = statistics.median(times[label])
        table.add_row(
            label,
            f"{median * 1e3:.1f}",
            f"{min(times[label]) * 1e3:.1f}",
            f"{median / args.files * 1e6:.1f}",
            f"{median / baseline:.2f}x",
        )
    console = Console()
    console.print(table)
    ratio = statistics.median(times[cases[1][0]]) / baseline
    verdict = "[green]within" if ratio <= GOAL else "[red]above"
    console.print(f"{verdict} the {GOAL}x goal[/] (ratio {ratio:.2f}x)")


if __name__ == "__main__":
    main()
