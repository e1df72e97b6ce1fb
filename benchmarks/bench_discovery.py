"""Benchmark: discovering and registering 1,000 pass files vs plain `importlib` imports.

Both sides import the same kind of file (one registered `FusionBasePass` each) from their
own copy of the directory, so bytecode caches do not favour either (one warm-up process
per side writes them first, untimed). `ge` does more per file (path resolution, stable
module names, de-duplication, isolation and rollback bookkeeping); the goal is to stay
within 1.3x of the plain imports.

Each run of each side is a fresh interpreter (`common.run_sides_alternating`: the sides
alternate which goes first) that imports ge first and times only the discovery, with
Python's garbage collector ON at its default thresholds, as users run; each checks that
exactly N passes were registered, and reports the share of its time spent in collections
(timed through `gc.callbacks`). The table shows the min and median over the runs.

Run: `make bench` or `.venv/bin/python benchmarks/bench_discovery.py [--files N]
[--rounds R]`.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import CollectionTimer, min_median, run_child, run_sides_alternating

from ge.passes import get_registered_passes
from ge.passes.bootstrap import scan_modules_from_path

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


SIDES = ("plain", "ge")
CHILD_ENV = {"GE_DISABLE_PLUGIN_AUTOLOAD": "1"}  # only the files of the directory register
LABELS = {"plain": "importlib (spec_from_file + exec_module)",
          "ge": "ge discovery + registration"}


def child(side: str, directory: Path, expected: int) -> None:
    """One timed discovery in this fresh process, collector on."""
    assert gc.isenabled(), "the collector must be on, as users run"
    discover = plain_import if side == "plain" else ge_discovery
    with CollectionTimer() as timer:
        start = time.perf_counter()
        registered = discover(directory)
        end = time.perf_counter()
    if registered != expected:
        raise SystemExit(f"{side} registered {registered} passes, expected {expected}")
    print(json.dumps({"seconds": end - start, "registered": registered, "collector": "on",
                      "thresholds": list(gc.get_threshold()), **timer.report(start, end)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7,
                        help="fresh processes per side (default: 7)")
    parser.add_argument("--child", nargs=3, metavar=("SIDE", "DIR", "N"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    # Measure with bytecode caches, as users import: both sides then skip compiling.
    sys.dont_write_bytecode = False
    if args.child:
        side, directory, n = args.child
        child(side, Path(directory), int(n))
        return

    with tempfile.TemporaryDirectory(prefix="ge_bench_discovery_") as tmp:
        dirs = {"plain": Path(tmp) / "plain", "ge": Path(tmp) / "ge"}
        write_plugins(dirs["plain"], "Plain", args.files)
        write_plugins(dirs["ge"], "Ge", args.files)
        for side in SIDES:  # warm-up: writes the bytecode caches
            run_child(__file__, side, str(dirs[side]), str(args.files), env=CHILD_ENV)
        reports = run_sides_alternating(
            __file__, SIDES, lambda side: [side, str(dirs[side]), str(args.files)],
            args.rounds, env=lambda side: CHILD_ENV)
    for side, outs in reports.items():
        if outs and "error" in outs[-1]:
            raise SystemExit(f"{side} failed:\n{outs[-1]['error']}")

    times = {side: [o["seconds"] for o in outs] for side, outs in reports.items()}
    base_min, base_median = min_median(times["plain"])
    table = Table(title=f"Discovering {args.files} pass files ({args.rounds} fresh processes "
                        "per side, warm caches, collector on)")
    for column in ("method", "median ms", "min ms", "µs per file (median)",
                   "ratio median / min", "in collections (median)"):
        table.add_column(column, justify="right" if column != "method" else "left")
    for side in SIDES:
        t_min, t_median = min_median(times[side])
        gc_median = min_median([o["gc_seconds"] for o in reports[side]])[1]
        table.add_row(
            LABELS[side],
            f"{t_median * 1e3:.1f}",
            f"{t_min * 1e3:.1f}",
            f"{t_median / args.files * 1e6:.1f}",
            f"{t_median / base_median:.2f}x / {t_min / base_min:.2f}x",
            f"{gc_median * 1e3:.1f} ms ({gc_median / t_median:.1%})",
        )
    console = Console(width=140)
    console.print(table)
    ratio = min_median(times["ge"])[1] / base_median
    verdict = "[green]within" if ratio <= GOAL else "[red]above"
    console.print(f"{verdict} the {GOAL}x goal[/] (median ratio {ratio:.2f}x)")


if __name__ == "__main__":
    main()
