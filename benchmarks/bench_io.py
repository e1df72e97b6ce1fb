"""Benchmark ONNX I/O and graph building of `ge.graph` against peers measured in the same run.

1. load + save of a generated 100k-node model, untouched (ge's fast path: every node keeps
   the NodeProto it was read from): `ge.graph.load` + `Graph.save` against `onnx.load` +
   `onnx.save` (goal: within 1.5x); both outputs must be byte-identical to the source;
2. load, touch every node, save, the same model: ge sets a metadata entry on every node
   (`Node.set_metadata("bench.touched", name)`, so export rebuilds every NodeProto) against
   `onnx.load` + the same entry added to every `NodeProto.metadata_props` + `onnx.save`
   (goal: within 2x); both outputs must pass `onnx.checker.check_model`, carry the entry on
   every node and be byte-identical to each other;
3. building a 1M-node graph through the API: `ge.graph.Graph.add_node/add_data_edge`
   against `onnx_ir` (the IR of the PyTorch exporter, the `bench` extra), time and peak
   memory.

Each run of each side is a fresh interpreter that imports its libraries first and times
only the work (`common.run_sides_alternating`: the sides alternate which goes first), with
Python's garbage collector ON at its default thresholds, as users run (each child reports
it, and the share of its time spent in collections, timed through `gc.callbacks`). The
tables show the min and median over the runs and the ratios to the peer of the same
invocation; outputs are checked after the timing.

Run: `make bench` or `.venv/bin/python benchmarks/bench_io.py [--nodes N] [--build-nodes M]
[--runs R] [--build-runs B]`.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    CollectionTimer,
    Row,
    gc_share_cells,
    min_median,
    print_columns,
    print_table,
    run_sides_alternating,
)

import ge.graph


def make_chain_model(num_nodes: int) -> onnx.ModelProto:
    """A chain of Add/Relu/LeakyRelu/Mul nodes; every fourth node reads a small initializer."""
    rng = np.random.default_rng(0)
    nodes, initializers = [], []
    previous = "x"
    for i in range(num_nodes):
        out = f"v{i}"
        kind = i % 4
        if kind == 0:
            weight = f"w{i}"
            initializers.append(helper.make_tensor(
                weight, TensorProto.FLOAT, [16], rng.random(16, dtype=np.float32).tobytes(),
                raw=True))
            nodes.append(helper.make_node("Add", [previous, weight], [out], name=f"n{i}"))
        elif kind == 1:
            nodes.append(helper.make_node("Relu", [previous], [out], name=f"n{i}"))
        elif kind == 2:
            nodes.append(helper.make_node("LeakyRelu", [previous], [out], name=f"n{i}",
                                          alpha=0.1))
        else:
            nodes.append(helper.make_node("Mul", [previous, f"v{i - 2}"], [out], name=f"n{i}"))
        previous = out
    graph = helper.make_graph(
        nodes, "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16])],
        [helper.make_tensor_value_info(previous, TensorProto.FLOAT, [16])],
        initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


TOUCH_KEY = "bench.touched"
IO_SIDES = ("ge", "onnx")
BUILD_SIDES = ("ge", "onnx_ir")
TASKS = {
    "roundtrip": "load + save, untouched",
    "touch": "load, touch every node, save",
}
#: ge / onnx: the untouched round trip's goal is the IR issue's (1.5x); the touched row has
#: no goal of its own in the issues, 2x is this benchmark's.
GOALS = {"roundtrip": 1.5, "touch": 2.0}


def io_ge(task: str, source: Path, target: Path) -> None:
    graph = ge.graph.load(source)
    if task == "touch":
        for node in graph.get_all_nodes():
            if node.type not in ("Data", "NetOutput", "Const"):  # graph inputs, outputs and
                node.set_metadata(TOUCH_KEY, node.name)  # initializers are no NodeProtos
    graph.save(target)


def io_onnx(task: str, source: Path, target: Path) -> None:
    model = onnx.load(source)
    if task == "touch":
        for node in model.graph.node:
            node.metadata_props.add(key=TOUCH_KEY, value=node.name)
    onnx.save(model, target)


def check_outputs(task: str, source: Path, outputs: dict[str, Path]) -> str:
    """Raise when the sides' outputs are wrong or differ; what was checked."""
    data = {side: path.read_bytes() for side, path in outputs.items()}
    if task == "roundtrip":
        for side, payload in data.items():
            assert payload == source.read_bytes(), f"{side}'s round trip changed the model"
        return "both byte-identical to the source"
    for side, path in outputs.items():
        model = onnx.load(path)
        onnx.checker.check_model(model)
        untouched = [n.name for n in model.graph.node
                     if {p.key: p.value for p in n.metadata_props}.get(TOUCH_KEY) != n.name]
        assert not untouched, f"{side}: {len(untouched)} nodes without {TOUCH_KEY}"
    assert data["ge"] == data["onnx"], "ge's and onnx's touched models differ"
    return "onnx.checker passes, every node touched, ge's bytes == onnx's"


def build_ge(num_nodes: int) -> None:
    graph = ge.graph.Graph("built")
    data = graph.add_node("Data", num_outputs=1, attrs={"index": 0})
    previous = data
    for i in range(num_nodes):
        node = graph.add_node("Relu", name=f"n{i}", num_inputs=1)
        graph.add_data_edge(previous, 0, node, 0)
        previous = node
    out = graph.add_node("NetOutput", num_inputs=1, num_outputs=0)
    graph.add_data_edge(previous, 0, out, 0)


def build_onnx_ir(num_nodes: int) -> None:
    import onnx_ir as ir

    x = ir.Value(name="x")
    graph = ir.Graph(inputs=[x], outputs=[], nodes=[], opset_imports={"": 17})
    previous = x
    for i in range(num_nodes):
        node = ir.Node("", "Relu", inputs=[previous], num_outputs=1, name=f"n{i}")
        graph.append(node)
        previous = node.outputs[0]
    graph.outputs.append(previous)


def peak_rss_kib() -> int:
    """This process's peak resident memory. Linux's VmHWM starts afresh at exec, unlike
    ru_maxrss, which a child inherits from the process that started it."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def child(task: str, side: str, source: str, target: str, num_nodes: int) -> None:
    """One measured run in this fresh process: time, peak RSS growth, collections."""
    if side == "onnx_ir":
        import onnx_ir  # noqa: F401  (imported before measuring, as ge is)

    assert gc.isenabled(), "the collector must be on, as users run"
    thresholds = list(gc.get_threshold())
    before = peak_rss_kib()
    with CollectionTimer() as timer:
        start = time.perf_counter()
        if task == "build":
            (build_ge if side == "ge" else build_onnx_ir)(num_nodes)
        else:
            (io_ge if side == "ge" else io_onnx)(task, Path(source), Path(target))
        end = time.perf_counter()
    peak = peak_rss_kib() - before
    print(json.dumps({"seconds": end - start, "peak_mib": peak / 1024, "collector": "on",
                      "thresholds": thresholds, **timer.report(start, end)}))


def measure(task: str, sides: tuple[str, ...], runs: int, num_nodes: int,
            source: Path | None = None, folder: Path | None = None) -> dict[str, list[dict]]:
    def child_args(side: str) -> list[str]:
        target = "-" if folder is None else str(folder / f"{task}_{side}.onnx")
        return [task, side, str(source or "-"), target, str(num_nodes)]

    reports = run_sides_alternating(__file__, sides, child_args, runs, label=f"{task:<9} ")
    for side, outs in reports.items():
        if outs and "error" in outs[-1]:
            raise SystemExit(f"{task} {side} failed:\n{outs[-1]['error']}")
    return reports


def rows_of(task: str, label: str, reports: dict[str, list[dict]], peer: str, *,
            goal: float | None = None, memory: bool = False) -> list[Row]:
    rows = []
    ge_s, peer_s = ([o["seconds"] for o in reports[s]] for s in ("ge", peer))
    for stat, index in (("min", 0), ("median", 1)):
        rows.append(Row(f"{label} ({stat})", min_median(ge_s)[index], peer,
                        min_median(peer_s)[index], goal=goal))
    if memory:
        ge_m, peer_m = ([o["peak_mib"] for o in reports[s]] for s in ("ge", peer))
        rows.append(Row(f"{label} (peak memory, median)", min_median(ge_m)[1], peer,
                        min_median(peer_m)[1], unit="MiB"))
    return rows


def collection_rows(task: str, reports: dict[str, list[dict]]) -> list[list[str]]:
    return [[TASKS.get(task, task), side,
             *gc_share_cells([o["seconds"] for o in outs], [o["gc_seconds"] for o in outs],
                             [o["gc_counts"] for o in outs])]
            for side, outs in reports.items() if outs]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000,
                        help="nodes of the I/O model (default: 100000)")
    parser.add_argument("--build-nodes", type=int, default=1_000_000,
                        help="nodes of the built graph (default: 1000000)")
    parser.add_argument("--runs", type=int, default=5,
                        help="fresh processes per side of each I/O row (default: 5)")
    parser.add_argument("--build-runs", type=int, default=3,
                        help="fresh processes per side of the build rows (default: 3)")
    parser.add_argument("--child", nargs=5, metavar=("TASK", "SIDE", "SRC", "DST", "N"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        task, side, source, target, n = args.child
        child(task, side, source, target, int(n))
        return 0
    rows: list[Row] = []
    collections: list[list[str]] = []
    checked: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        source = folder / "chain.onnx"
        onnx.save(make_chain_model(args.nodes), source)
        for task, label in TASKS.items():
            reports = measure(task, IO_SIDES, args.runs, args.nodes, source, folder)
            outputs = {side: folder / f"{task}_{side}.onnx" for side in IO_SIDES}
            checked.append(f"{label}: {check_outputs(task, source, outputs)}")
            rows += rows_of(task, f"{label}, {args.nodes:,} nodes", reports, "onnx",
                            goal=GOALS[task])
            collections += collection_rows(task, reports)
    try:
        import onnx_ir  # noqa: F401
    except ImportError:
        print("onnx_ir is not installed (pip install -e '.[bench]'); skipping the build peer")
        reports = measure("build", ("ge",), args.build_runs, args.build_nodes)
        t_min, t_med = min_median([o["seconds"] for o in reports["ge"]])
        print(f"build {args.build_nodes:,} nodes with ge: {t_min:.2f} / {t_med:.2f} s "
              "(min / median)")
    else:
        reports = measure("build", BUILD_SIDES, args.build_runs, args.build_nodes)
        rows += rows_of("build", f"build {args.build_nodes:,}-node graph", reports,
                        "onnx_ir", memory=True)
    collections += collection_rows(f"build {args.build_nodes:,} nodes", reports)
    print_table(f"ge.graph I/O and building (fresh process per run, {args.runs} I/O runs and "
                f"{args.build_runs} build runs per side, collector on)", rows)
    print_columns("Garbage collections during the timed part (collector on)",
                  ["task", "side", "time min / median", "in collections min / median",
                   "share min / median", "collections gen 0 / 1 / 2"], collections)
    for line in checked:
        print(f"outputs checked: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
