"""Benchmark a graph rewrite: every MatMul+Add pair of an N-layer chain becomes one Gemm.

Model: X[2,4] -> N x (MatMul by a constant W[4,4] -> Add a constant b[4] -> Relu), built with
onnx.helper, opset 17, with value_info (type and shape) on every value. Work timed: replace
each MatMul+Add by Gemm(x, W, b) and ask for the topological order every 1,000 rewrites.

- `ge`: `ge.graph.load`, then `rewrite_with_ge` (one transaction per rewrite with the
  public rewrite primitives: `copy_in` of a one-node Gemm replacement, its output desc,
  `replace_all_uses`, `remove_node`) and `Graph.topological_order()` every 1,000 rewrites.
- peer: the onnxscript rewriter (the `bench` extra): a `pattern.RewriteRule`
  `MatMul(x, w) + b -> Gemm(x, w, b)` applied by `RewriteRuleSet.apply_to_model` to an
  `onnx_ir` model loaded from the same file. Its pass visits the nodes once and inserts each
  Gemm where the Add was, so the node list stays in order; sorting inside that pass would
  make its node iterator visit the graph again (2.5x the visits at N=5,000), so
  `model.graph.sort()` is timed once after the rewrite and the second peer figure adds it
  N/1,000 times (an underestimate: those sorts would run on a larger graph mid-rewrite).

Each run of each side is a fresh interpreter; the sides alternate, and the table shows the
min and median over the runs, as ratios to the peer measured in the same run. Without
`--runs`, up to 3 runs are made, the third only when it should end within 4.5 minutes of
the start (two while ge is slow at N=50,000). Only the rewrite is timed (loading, saving
and checking are not). Loading runs with the collector paused and is followed by
`gc.collect()`, so both sides start from the same clean state; the timed rewrite runs with
Python's garbage collector ON at its default thresholds, as users run (each child asserts
it). ge's rewrite here calls the graph API directly, outside any pass, so no collector
measure of ge's compiler applies to it. Every collection of the timed part is timed through
`gc.callbacks` (`common.CollectionTimer`), and a second table shows the share of the timed
part spent in collections (goal for ge at N = 50,000: under 10%), the collections per
generation and each child's peak RSS. With `--with-hold` a third side, "ge-held", runs
the same rewrite inside `ge.graph.allocation.no_full_collections()` (what every pass
invocation of ge's compiler gets), to show what the hold does for a bulk rewrite written
against the graph API. The first run of each side and size checks the
result: N Gemm nodes, no MatMul or Add left, and (for N <= 5,000) onnxruntime's output
equal to the original's within 1e-5.

Run: `make bench` or
`.venv/bin/python benchmarks/bench_rewrite.py [--sizes 5000 50000] [--runs 3] [--with-hold]`.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    CollectionTimer,
    Row,
    assert_chain_output_equal,
    gc_share_cells,
    peak_rss_mib,
    print_columns,
    print_table,
    run_child,
    sides_available,
)

DEFAULT_RUNS = 3
DEFAULT_BUDGET_S = 270.0  # without --runs, a further run starts only if it should end by then
REWRITES_PER_ORDER = 1_000  # ask for the topological order after this many rewrites
NUMERICS_MAX_N = 5_000  # onnxruntime compares outputs up to this size (counts: every size)
SIDES = ("ge", "onnxscript")
HELD = "ge-held"  # --with-hold: ge's rewrite inside no_full_collections()
GOAL_N, GOAL_GC_SHARE = 50_000, 0.10  # ge at N = 50,000: under 10% in garbage collections


def make_matmul_add_chain(num_layers: int) -> onnx.ModelProto:
    """X[2,4] -> num_layers x (MatMul W_i -> Add b_i -> Relu), value_info on every value.

    W_i are permutation matrices and b_i small, and X is positive, so the output keeps
    depending on the input through thousands of layers (the numeric check means something).
    """
    rng = np.random.default_rng(0)
    f32 = TensorProto.FLOAT
    nodes, initializers, value_info = [], [], []
    previous = "x"
    for i in range(num_layers):
        weight = np.eye(4, dtype=np.float32)[rng.permutation(4)]
        bias = rng.uniform(-0.01, 0.01, 4).astype(np.float32)
        initializers.append(helper.make_tensor(f"W{i}", f32, [4, 4], weight.tobytes(), raw=True))
        initializers.append(helper.make_tensor(f"b{i}", f32, [4], bias.tobytes(), raw=True))
        mm, add, relu = f"mm{i}", f"add{i}", f"relu{i}"
        nodes.append(helper.make_node("MatMul", [previous, f"W{i}"], [mm], name=f"MatMul_{i}"))
        nodes.append(helper.make_node("Add", [mm, f"b{i}"], [add], name=f"Add_{i}"))
        nodes.append(helper.make_node("Relu", [add], [relu], name=f"Relu_{i}"))
        value_info.append(helper.make_tensor_value_info(mm, f32, [2, 4]))
        value_info.append(helper.make_tensor_value_info(add, f32, [2, 4]))
        if i < num_layers - 1:  # the last Relu's value is the graph output
            value_info.append(helper.make_tensor_value_info(relu, f32, [2, 4]))
        previous = relu
    graph = helper.make_graph(
        nodes, "matmul_add_chain",
        [helper.make_tensor_value_info("x", f32, [2, 4])],
        [helper.make_tensor_value_info(previous, f32, [2, 4])],
        initializers, value_info=value_info)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


# -- ge --------------------------------------------------------------------------------------
def gemm_replacement():
    """The one-node replacement copied in for every match: Data 0..2 -> Gemm -> output."""
    from ge.graph import Graph

    rep = Graph("gemm_replacement")
    gemm = rep.add_node("Gemm", name="gemm", num_inputs=3)
    for index in range(3):
        data = rep.add_node("Data", name=f"in{index}", attrs={"index": index})
        rep.add_data_edge(data, 0, gemm, index)
    out = rep.add_node("NetOutput", num_inputs=1, num_outputs=0)
    rep.add_data_edge(gemm, 0, out, 0)
    return rep


def rewrite_with_ge(graph) -> int:
    """Replace every MatMul whose only consumer is an Add of a Const by one Gemm, through
    the public rewrite primitives: copy-in, replace uses, remove, one transaction each."""
    rewrites = 0
    replacement = gemm_replacement()
    for matmul in graph.nodes_of_type("MatMul"):
        consumers = matmul.get_out_data_nodes_and_port_indexes(0)
        if len(consumers) != 1:
            continue
        add, port = consumers[0]
        if add.type != "Add" or port != 0:
            continue
        bias = add.get_input_producer(1)
        if bias is None or bias[0].type != "Const":
            continue
        x, weight = matmul.get_input_producer(0), matmul.get_input_producer(1)
        with graph.transaction():
            (gemm,), _ = graph.copy_in(replacement, [x, weight, bias])
            gemm.update_output_desc(0, add.get_output_desc(0))
            graph.replace_all_uses(add, 0, gemm, 0)
            graph.remove_node(add)
            graph.remove_node(matmul)
        rewrites += 1
        if rewrites % REWRITES_PER_ORDER == 0:
            graph.topological_order()
    return rewrites


# -- onnxscript ------------------------------------------------------------------------------
def gemm_rule_set():
    """The onnxscript rule set MatMul(x, w) + b -> Gemm(x, w, b), b a constant."""
    from onnxscript.rewriter import pattern

    def matmul_add(op, x, w, b):
        return op.Add(op.MatMul(x, w), b)

    def bias_is_constant(context, x, w, b, **_) -> bool:
        return b.const_value is not None

    def gemm(op, x, w, b, **_):
        return op.Gemm(x, w, b)

    return pattern.RewriteRuleSet([pattern.RewriteRule(matmul_add, gemm, bias_is_constant)])


# -- one measured run in a fresh process ---------------------------------------------------
def check_result(original: Path, result: onnx.ModelProto, num_layers: int) -> None:
    """N Gemm, no MatMul or Add, and (small N) onnxruntime's output equal to the original's."""
    ops = Counter(node.op_type for node in result.graph.node)
    assert ops["Gemm"] == num_layers, f"{ops['Gemm']} Gemm nodes for {num_layers} layers"
    assert ops["MatMul"] == 0 and ops["Add"] == 0, f"MatMul/Add left: {dict(ops)}"
    if num_layers > NUMERICS_MAX_N:
        return
    assert_chain_output_equal(str(original), result.SerializeToString())


def child(side: str, source: Path, num_layers: int, verify: bool) -> None:
    """Load (collector off, outside the timing), rewrite (collector on, timed), check."""
    gc.disable()
    if side in ("ge", HELD):
        import ge.graph

        subject = ge.graph.load(source)
    else:
        import onnx_ir as ir

        subject = ir.load(source)
        rules = gemm_rule_set()
    gc.collect()
    gc.enable()
    assert gc.isenabled() and gc.get_freeze_count() == 0
    thresholds = list(gc.get_threshold())
    with CollectionTimer() as timer:
        start = time.perf_counter()
        if side == HELD:
            from ge.graph.allocation import no_full_collections

            with no_full_collections():
                rewrites = rewrite_with_ge(subject)
        else:
            rewrites = (rewrite_with_ge(subject) if side == "ge"
                        else rules.apply_to_model(subject))
        end = time.perf_counter()
    seconds = end - start
    report = {"seconds": seconds, "rewrites": rewrites, "sort_seconds": 0.0,
              **timer.report(start, end), "peak_mib": peak_rss_mib(), "collector": "on",
              "thresholds": thresholds}
    if side == "onnxscript":
        start = time.perf_counter()
        subject.graph.sort()
        report["sort_seconds"] = time.perf_counter() - start
    assert rewrites == num_layers, f"{side}: {rewrites} rewrites for {num_layers} layers"
    if verify:
        if side != "onnxscript":
            with tempfile.TemporaryDirectory() as tmp:
                subject.save(Path(tmp) / "rewritten.onnx")
                result = onnx.load(Path(tmp) / "rewritten.onnx")
        else:
            result = ir.to_proto(subject)
        check_result(source, result, num_layers)
    print(json.dumps(report))


# -- the comparison --------------------------------------------------------------------------
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5_000, 50_000],
                        help="numbers of MatMul+Add+Relu layers (default: 5000 50000)")
    parser.add_argument("--runs", type=int, default=None,
                        help="fresh processes per side and size (default: up to "
                             f"{DEFAULT_RUNS}, the third only within {DEFAULT_BUDGET_S:.0f} s)")
    parser.add_argument("--with-hold", action="store_true",
                        help="add a side: ge's rewrite inside no_full_collections()")
    parser.add_argument("--child", nargs=4, metavar=("SIDE", "MODEL", "N", "VERIFY"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        side, model, n, verify = args.child
        child(side, Path(model), int(n), verify == "1")
        return 0
    sides = sides_available(SIDES)
    if args.with_hold:
        sides = (*sides, HELD)
    sizes = sorted(set(args.sizes))
    per_rewrite: dict[tuple[str, int], list[float]] = {(s, n): [] for s in sides for n in sizes}
    reports: dict[tuple[str, int], list[dict]] = {(s, n): [] for s in sides for n in sizes}
    sort_us: dict[int, list[float]] = {n: [] for n in sizes}
    runs = args.runs or DEFAULT_RUNS
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        models = {}
        for n in sizes:
            models[n] = Path(tmp) / f"chain_{n}.onnx"
            onnx.save(make_matmul_add_chain(n), models[n])
        for run in range(runs):
            if args.runs is None and run >= 2:
                spent = time.perf_counter() - started
                if spent + spent / run > DEFAULT_BUDGET_S:  # the next run takes about the mean
                    print(f"stopping after {run} runs: a run takes about {spent / run:.0f} s "
                          f"(--runs {DEFAULT_RUNS} to make them all)")
                    break
            for n in sizes:
                # Alternate which side goes first, so neither always runs on a warmer machine.
                for side in sides if run % 2 == 0 else sides[::-1]:
                    out = run_child(__file__, side, str(models[n]), str(n),
                                    "1" if run == 0 else "0")
                    per_rewrite[side, n].append(out["seconds"] / n * 1e6)
                    reports[side, n].append(out)
                    if side == "onnxscript":
                        sort_us[n].append(out["sort_seconds"] * 1e6)
                    print(f"run {run + 1}/{runs}  N={n:,}  {side:<10} "
                          f"{out['seconds']:7.2f} s  {out['seconds'] / n * 1e6:6.0f} µs/rewrite"
                          f"  gc {out['gc_seconds'] / out['seconds']:5.1%}", flush=True)
    print_rows(sizes, sides, per_rewrite, sort_us)
    print_collections(reports)
    return 0


def print_collections(reports: dict[tuple[str, int], list[dict]]) -> None:
    """The share of each side's timed rewrite spent in garbage collections, collector on."""
    rows = []
    for (side, n), outs in sorted(reports.items(), key=lambda item: (item[0][1], item[0][0])):
        if not outs:
            continue
        cells = gc_share_cells([o["seconds"] for o in outs], [o["gc_seconds"] for o in outs],
                               [o["gc_counts"] for o in outs])
        share = statistics.median(o["gc_seconds"] / o["seconds"] for o in outs)
        goal = ""
        if side == "ge" and n == GOAL_N:
            goal = f"< {GOAL_GC_SHARE:.0%} " + ("met" if share < GOAL_GC_SHARE else "missed")
        peaks = [o["peak_mib"] for o in outs]
        rows.append([f"N={n:,}", side, *cells,
                     f"{min(peaks):.0f} / {statistics.median(peaks):.0f} MiB", goal])
    thresholds = next((o["thresholds"] for outs in reports.values() for o in outs), [])
    print_columns("Garbage collections during the timed rewrite (collector on, default "
                  f"thresholds {tuple(thresholds)})",
                  ["task", "side", "time min / median", "in collections min / median",
                   "share min / median", "collections gen 0 / 1 / 2", "peak RSS min / median",
                   "goal"], rows)


def print_rows(sizes: list[int], sides: tuple[str, ...],
               per_rewrite: dict[tuple[str, int], list[float]],
               sort_us: dict[int, list[float]]) -> None:
    rows = []
    stats = {"min": min, "median": statistics.median}
    for n in sizes:
        ge_times = per_rewrite["ge", n]
        if "onnxscript" not in sides:
            for stat, fn in stats.items():
                print(f"N={n:,}: ge {fn(ge_times):.0f} µs per rewrite ({stat})")
            continue
        peer = per_rewrite["onnxscript", n]
        for stat, fn in stats.items():
            rows.append(Row(f"N={n:,}: per rewrite ({stat})", fn(ge_times),
                            "onnxscript rewriter", fn(peer), unit="µs"))
        if HELD in sides:
            for stat, fn in stats.items():
                rows.append(Row(f"N={n:,}: per rewrite ({stat}), ge in no_full_collections",
                                fn(per_rewrite[HELD, n]), "onnxscript rewriter", fn(peer),
                                unit="µs"))
        # Peer + N/1,000 sorts, each run's own sort time: the same work as ge's order queries.
        sorts = n // REWRITES_PER_ORDER
        if sorts:
            with_sorts = [p + sorts * s / n for p, s in zip(peer, sort_us[n])]
            rows.append(Row(f"N={n:,}: per rewrite (min), peer + {sorts} sorts", min(ge_times),
                            "onnxscript + graph.sort()", min(with_sorts), unit="µs"))
    if len(sizes) > 1:
        small, large = sizes[0], sizes[-1]
        for stat, fn in stats.items():
            rows.append(Row(f"ge per rewrite, N={large:,} vs N={small:,} ({stat})",
                            fn(per_rewrite["ge", large]), f"ge at N={small:,}",
                            fn(per_rewrite["ge", small]), unit="µs", goal=1.3))
    if rows:
        print_table("MatMul+Add -> Gemm rewrite, topological order every 1,000 rewrites", rows)


if __name__ == "__main__":
    sys.exit(main())
