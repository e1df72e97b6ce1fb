"""Benchmark ge's built-in fusion catalog: op-type dispatch and the node count it reaches.

Model: the generated transformer-like encoder of bench_compile (`make_encoder_model`, at
least `--nodes` nodes, default 10,000), converted from its opset 17 to opset 20 with
`onnx.version_converter` (`make_encoder_model` has no opset argument; GeluFusion needs
opset >= 20, where Gelu is an ONNX operator). The converted model is the original below.

1. Dispatch. The BuiltinFusion step of `ge.compile` with every fusion pass enabled
   (SwishFusion, off by default, too: `enable=`) against the same step with one fusion
   pass enabled (default LayerNormFusion; the other fusion passes turned off by name with
   `disable=`). A pattern pass visits only the
   candidates of its op types, so the step with all passes should cost at most 1.5x the step
   with one. Each run is a fresh interpreter (`common.run_sides_alternating`, the
   configurations alternating), the garbage collector on, GE_DISABLE_PLUGIN_AUTOLOAD=1;
   the time is taken from the report twice: the `steps` entry of BuiltinFusion, and the
   sum of the seconds of the fusion pass records (the step minus the engine's own work);
   per node is over the nodes the step started with (the step's `nodes_before`: the main
   graph's nodes as ONNX counts them, constants apart). Min and median over `--runs` runs.
2. Nodes. The model after ge's full compile (`ge.compile` + `result.save`), after
   `onnxscript.optimizer.optimize(model)` followed by `onnxscript.rewriter.rewrite(model)`
   (its default rule set, `_DEFAULT_REWRITE_RULES`, which optimize already applies
   inside its loop) and after onnxruntime's ORT_ENABLE_EXTENDED offline optimisation
   (`optimized_model_filepath`; it may write com.microsoft contrib operators such as
   FusedMatMul, Gelu or SkipLayerNormalization). Every side runs once in a fresh process;
   its saved model's nodes are counted (subgraphs included), the op histograms compared,
   and its outputs checked in onnxruntime (optimisations off) against the original's on
   the same random inputs (rtol = atol = 1e-4). Goal: ge has no more nodes than
   onnxscript; onnxruntime's count is shown beside.

The exit status is 1 when ge fails or its output differs from the original's.

Run: `.venv/bin/python benchmarks/bench_fusions.py [--nodes N] [--runs R] [--only PASS]
[--quick]`.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnx.version_converter

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_compile import make_encoder_model, make_inputs, run_ort
from common import min_median, print_columns, run_child, run_sides_alternating

DEFAULT_NODES, DEFAULT_RUNS = 10_000, 5
QUICK_NODES, QUICK_RUNS = 800, 2
OPSET = 20
DEFAULT_ONLY = "LayerNormFusion"
GOAL_DISPATCH = 1.5  # step time with all fusion passes at most 1.5x the step with one
RTOL = ATOL = 1e-4
CHILD_ENV = {"GE_DISABLE_PLUGIN_AUTOLOAD": "1"}
NODE_SIDES = ("ge", "onnxscript", "ort-extended")
NODE_SIDE_NAMES = {
    "ge": "ge (full compile + save)",
    "onnxscript": "onnxscript optimize + rewrite (default rules)",
    "ort-extended": "onnxruntime ORT_ENABLE_EXTENDED offline",
}


def fusion_pass_names() -> list[str]:
    """The built-in passes of the builtin_fusion step, in run order."""
    from ge.compiler.builtin import BUILTIN_PASSES

    return [cls.__ge_builtin__.name for cls in BUILTIN_PASSES
            if cls.__ge_builtin__.step == "builtin_fusion"]


# -- children: one measured run in a fresh process -----------------------------------------
def child_fusion(config: str, source: str) -> dict:
    """Compile `source` with every fusion pass ("all") or one ("only:NAME"); report the
    BuiltinFusion step from the compile report."""
    import ge
    import ge.compiler.builtin
    import ge.graph
    import ge.session.compilation

    names = fusion_pass_names()
    chosen = names if config == "all" else [config.split(":", 1)[1]]
    disable = [n for n in names if n not in chosen]
    # the passes off by default (SwishFusion) are part of the catalog measured
    dormant = {cls.__ge_builtin__.name for cls in ge.compiler.builtin.BUILTIN_PASSES
               if not cls.__ge_builtin__.on_by_default}
    gc.collect()
    result = ge.compile(source, disable=disable, enable=[n for n in chosen if n in dormant])
    step = next(s for s in result.report.steps if s.name == "BuiltinFusion")
    records = [r for r in result.report.records if r.stage == "BuiltinFusion"]
    passes: dict[str, dict] = {}
    for record in records:
        row = passes.setdefault(record.pass_name, {"seconds": 0.0, "matches": 0, "rewrites": 0})
        row["seconds"] += record.seconds
        row["matches"] += record.matches
        row["rewrites"] += record.rewrites + record.fusions
    return {"seconds": step.seconds, "records": sum(r.seconds for r in records),
            "nodes": step.nodes_before, "nodes_after": step.nodes_after, "passes": passes}


def child_nodes(side: str, source: str, target: str) -> dict:
    """Optimise `source` into `target` with one side; its time is informative only."""
    if side == "ge":
        import ge
        import ge.compiler.builtin
        import ge.graph
        import ge.session.compilation

        gc.collect()
        start = time.perf_counter()
        result = ge.compile(source)
        result.save(target)
    elif side == "onnxscript":
        import onnxscript.optimizer
        import onnxscript.rewriter

        gc.collect()
        start = time.perf_counter()
        model = onnxscript.optimizer.optimize(onnx.load(source))
        model = onnxscript.rewriter.rewrite(model)  # the default rule set
        onnx.save(model, target)
    else:
        import onnxruntime as ort

        gc.collect()
        start = time.perf_counter()
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = target
        ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    return {"seconds": time.perf_counter() - start}


# -- 1. dispatch -----------------------------------------------------------------------------
def measure_dispatch(source: Path, only: str, runs: int) -> bool:
    """The all-vs-one table; True when the goal is met on the min and the median."""
    configs = ("all", f"only:{only}")
    reports = run_sides_alternating(__file__, configs, lambda c: ["fusion", c, str(source)],
                                    runs, env=lambda c: CHILD_ENV, label="BuiltinFusion ")
    failed = [c for c in configs if any("error" in r for r in reports[c])]
    for config in failed:
        error = next(r["error"] for r in reports[config] if "error" in r)
        print(f"{config} FAILED:\n  " + error.replace("\n", "\n  "))
    if failed:
        return False
    names = fusion_pass_names()
    labels = {"all": f"all {len(names)} fusion passes", configs[1]: f"only {only}"}
    sources = {"seconds": "BuiltinFusion step", "records": "sum of fusion records"}
    stats = {(c, k): min_median([r[k] for r in reports[c]]) for c in configs for k in sources}
    nodes = reports["all"][0]["nodes"]
    rows, met = [], True
    for key, what in sources.items():
        base = stats[(configs[1], key)]
        for config in configs:
            low, mid = stats[(config, key)]
            cells = [f"{low:.4f}", f"{mid:.4f}", f"{low / nodes * 1e6:.2f}",
                     f"{mid / nodes * 1e6:.2f}"]
            if config == "all":
                ratio = (low / base[0], mid / base[1])
                ok = all(r <= GOAL_DISPATCH for r in ratio)
                met = met and ok
                cells += [f"{ratio[0]:.2f}x", f"{ratio[1]:.2f}x",
                          f"≤ {GOAL_DISPATCH:g}x " + ("[green]met[/green]" if ok
                                                      else "[red]missed[/red]")]
            else:
                cells += ["1.00x", "1.00x", ""]
            rows.append([f"{labels[config]} — {what}", *cells])
    print_columns(
        f"BuiltinFusion step, {nodes:,} nodes, opset {OPSET}, {runs} fresh processes per "
        f"configuration — goal: all passes ≤ {GOAL_DISPATCH:g}x one pass (op-type dispatch)",
        ["configuration — time from", "min s", "median s", "min µs/node", "median µs/node",
         "all / one (min)", "all / one (median)", "goal"], rows,
        caption="collector on, GE_DISABLE_PLUGIN_AUTOLOAD=1; the others disabled by name")
    runs_all = sorted(reports["all"], key=lambda r: r["seconds"])
    median_run = runs_all[len(runs_all) // 2]
    per_pass = [[name, f"{row['seconds']:.4f}", f"{row['seconds'] / nodes * 1e6:.2f}",
                 f"{row['matches']:,}", f"{row['rewrites']:,}"]
                for name, row in median_run["passes"].items()]
    print_columns("Fusion passes of the median 'all' run", ["pass", "seconds", "µs/node",
                                                           "matches", "rewrites + fusions"],
                  per_pass, caption=f"BuiltinFusion: {median_run['nodes']:,} → "
                                    f"{median_run['nodes_after']:,} nodes")
    print_work_floor(median_run["passes"], only, stats[(configs[1], "records")][1])
    print(f"goal dispatch (all ≤ {GOAL_DISPATCH:g}x only {only}): "
          + ", ".join(f"{sources[k]} {stats[('all', k)][0] / stats[(configs[1], k)][0]:.2f}x "
                      f"min / {stats[('all', k)][1] / stats[(configs[1], k)][1]:.2f}x median"
                      for k in sources) + f": {'met' if met else 'MISSED'}")
    return met


def print_work_floor(passes: dict[str, dict], only: str, one_seconds: float) -> None:
    """Split the other passes' time of an 'all' run by what they did: rewrote, matched and
    refused every match in `meet_requirements`, or found nothing (the part op-type dispatch
    can make small); and the all / one ratio if the passes that found nothing cost nothing,
    and if the refusing ones did too: the floor that the rewrites themselves set."""
    groups: dict[str, dict[str, float]] = {"rewrote": {}, "refused every match": {},
                                           "found nothing": {}}
    for name, row in passes.items():
        if name == only:
            continue
        group = ("rewrote" if row["rewrites"] else "refused every match" if row["matches"]
                 else "found nothing")
        groups[group][name] = row["seconds"]
    parts = [f"{what} {sum(times.values()) * 1e3:.1f} ms ({len(times)} pass(es)"
             + (f": {', '.join(times)})" if times and len(times) <= 3 else ")")
             for what, times in groups.items()]
    rewrote, refused = (sum(groups[g].values()) for g in ("rewrote", "refused every match"))
    without_idle = (one_seconds + rewrote + refused) / one_seconds
    print(f"the other passes of the median 'all' run: {'; '.join(parts)}. With the passes "
          f"that found nothing free, all / one would be {without_idle:.2f}x (median of "
          f"{only} alone: {one_seconds * 1e3:.1f} ms); with the refusing ones free too, "
          f"{(one_seconds + rewrote) / one_seconds:.2f}x: the rewrites' own work")


# -- 2. nodes --------------------------------------------------------------------------------
def op_counts(graph: onnx.GraphProto) -> Counter[str]:
    """Nodes per op type of `graph` and its subgraphs; an op of another domain than ONNX's
    is named "domain::op" (onnxruntime's contrib operators: "com.microsoft::Gelu")."""
    counts: Counter[str] = Counter()
    for node in graph.node:
        domain = node.domain if node.domain not in ("", "ai.onnx") else ""
        counts[f"{domain}::{node.op_type}" if domain else node.op_type] += 1
        for attr in node.attribute:
            for body in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs):
                counts += op_counts(body)
    return counts


def check_outputs(target: Path, feeds: dict[str, np.ndarray],
                  expected: dict[str, np.ndarray]) -> tuple[float | None, bool, str]:
    """(max abs diff, within rtol/atol, error) of `target`'s outputs against `expected`."""
    try:
        actual = run_ort(target, feeds)
    except Exception as error:  # report what the side's output does, not stop
        return None, False, f"{type(error).__name__}: {error}".splitlines()[0][:300]
    worst, ok = 0.0, True
    for name, want in expected.items():
        got = actual.get(name)
        if got is None or got.shape != want.shape:
            return None, False, f"output {name} missing or of another shape"
        worst = max(worst, float(np.max(np.abs(got.astype(np.float64) - want))))
        ok = ok and bool(np.allclose(got, want, rtol=RTOL, atol=ATOL))
    return worst, ok, "" if ok else f"outputs differ beyond rtol={RTOL:g}, atol={ATOL:g}"


def measure_nodes(source: Path, folder: Path) -> bool:
    """The node-count table and histograms; True when ge's output matches the original's."""
    original = onnx.load(source)
    before = op_counts(original.graph)
    feeds = make_inputs(original, {})
    expected = run_ort(source, feeds)
    counts: dict[str, Counter[str]] = {}
    rows, ge_ok = [], False
    for side in NODE_SIDES:
        target = folder / f"{source.stem}.{side}.onnx"
        try:
            seconds = run_child(__file__, "nodes", side, str(source), str(target),
                                env=CHILD_ENV)["seconds"]
        except Exception as error:
            tail = (getattr(error, "stderr", "") or str(error)).strip().splitlines()[-1:]
            print(f"{NODE_SIDE_NAMES[side]} FAILED: {' '.join(tail)}")
            rows.append([NODE_SIDE_NAMES[side], "failed", "?", "?", "?", "n/a", "[red]no[/red]"])
            continue
        print(f"{NODE_SIDE_NAMES[side]:<48} {seconds:8.3f} s", flush=True)
        counts[side] = op_counts(onnx.load(target).graph)
        diff, ok, error = check_outputs(target, feeds, expected)
        if side == "ge":
            ge_ok = ok
        if error:
            print(f"{NODE_SIDE_NAMES[side]} output: {error}")
        contrib = sum(n for op, n in counts[side].items() if "::" in op)
        rows.append([NODE_SIDE_NAMES[side], f"{seconds:.2f}",
                     f"{sum(counts[side].values()):,}", f"{counts[side]['Constant']}",
                     f"{contrib}", "n/a" if diff is None else f"{diff:.2e}",
                     "[green]yes[/green]" if ok else "[red]no[/red]"])
    total = {side: sum(c.values()) for side, c in counts.items()}
    goal = ""
    if "ge" in total and "onnxscript" in total:
        met = total["ge"] <= total["onnxscript"]
        goal = (f"ge {total['ge']:,} vs onnxscript {total['onnxscript']:,} nodes: "
                + ("[green]met[/green]" if met else "[red]missed[/red]"))
    print_columns(
        f"Nodes after optimisation, encoder at opset {OPSET} ({sum(before.values()):,} nodes) "
        f"— goal: ge ≤ onnxscript's nodes (onnxruntime extended beside)",
        ["side", "seconds (1 run)", "nodes after", "Constant", "contrib ops", "max abs diff",
         f"ok (rtol=atol={RTOL:g})"], rows, caption=goal or None)
    print_histograms(before, counts)
    return ge_ok


def print_histograms(before: Counter[str], counts: dict[str, Counter[str]]) -> None:
    """Op counts per side, the op types whose counts differ between sides, largest first."""
    sides = [s for s in NODE_SIDES if s in counts]
    ops = set(before).union(*counts.values())
    differing = [op for op in ops if len({counts[s][op] for s in sides}) > 1
                 or (sides and before[op] != counts[sides[0]][op])]

    def gap(op: str) -> tuple[int, int, str]:
        ge_vs = counts["ge"][op] - counts["onnxscript"][op] if {"ge", "onnxscript"} <= set(
            counts) else 0
        return (-abs(ge_vs), -max(before[op], *(counts[s][op] for s in sides)), op)

    rows = []
    for op in sorted(differing, key=gap):
        row = [op, f"{before[op]}", *(f"{counts[s][op]}" for s in sides)]
        if {"ge", "onnxscript"} <= set(counts):
            row.append(f"{counts['ge'][op] - counts['onnxscript'][op]:+d}")
        rows.append(row)
    columns = ["op type", "original", *sides]
    if {"ge", "onnxscript"} <= set(counts):
        columns.append("ge − onnxscript")
    print_columns("Op histograms (op types whose counts differ; subgraphs included)",
                  columns, rows)
    if {"ge", "onnxscript"} <= set(counts):
        extra = {op: counts["ge"][op] - counts["onnxscript"][op] for op in ops}
        more = ", ".join(f"{op} {n:+d}" for op, n in sorted(extra.items(), key=lambda kv: -kv[1])
                         if n > 0)
        fewer = ", ".join(f"{op} {n:+d}" for op, n in sorted(extra.items(), key=lambda kv: kv[1])
                          if n < 0)
        print(f"ge − onnxscript: {sum(extra.values()):+d} nodes; ge has more {more or '-'}; "
              f"fewer {fewer or '-'}")


# -- main ------------------------------------------------------------------------------------
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=None,
                        help=f"minimum nodes of the generated encoder (default {DEFAULT_NODES:,}"
                             f", {QUICK_NODES} with --quick)")
    parser.add_argument("--runs", type=int, default=None,
                        help=f"fresh processes per configuration (default {DEFAULT_RUNS}, "
                             f"{QUICK_RUNS} with --quick)")
    parser.add_argument("--only", default=DEFAULT_ONLY,
                        help=f"the one fusion pass of the comparison (default {DEFAULT_ONLY})")
    parser.add_argument("--quick", action="store_true",
                        help=f"a small encoder ({QUICK_NODES} nodes) and {QUICK_RUNS} runs")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        print(json.dumps(child_fusion(*rest) if kind == "fusion" else child_nodes(*rest)))
        return 0
    if args.only not in fusion_pass_names():
        parser.error(f"--only must be one of {fusion_pass_names()}")
    nodes = args.nodes or (QUICK_NODES if args.quick else DEFAULT_NODES)
    runs = args.runs or (QUICK_RUNS if args.quick else DEFAULT_RUNS)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        source = folder / f"encoder_opset{OPSET}.onnx"
        model = onnx.version_converter.convert_version(make_encoder_model(nodes), OPSET)
        onnx.checker.check_model(model)
        onnx.save(model, source)
        print(f"encoder: make_encoder_model({nodes}) at opset 17, converted to opset {OPSET} "
              f"with onnx.version_converter: {len(model.graph.node):,} nodes, "
              f"{source.stat().st_size / 1e6:.1f} MB")
        measure_dispatch(source, args.only, runs)
        ge_ok = measure_nodes(source, folder)
    return 0 if ge_ok else 1


if __name__ == "__main__":
    sys.exit(main())
