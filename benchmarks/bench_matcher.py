"""Benchmark the pattern matcher: a user's MatMul+Add -> Gemm pass against the onnxscript rewriter.

Model: `make_matmul_add_chain` of bench_rewrite.py, X[2,4] -> N x (MatMul by W[4,4] -> Add
b[4] -> Relu) with value_info on every value; N = 1,000, 10,000 and 50,000. Work timed:
rewrite every Add(MatMul(a, b), c) whose a and b are 2-D into Gemm(a, b, c), N rewrites.

- `ge`: the rule written as a user writes it, a plugin file (generated into a temporary
  folder) with one `@pattern` PatternFusionPass: `MatMul(inputs[0], inputs[1]) + inputs[2]`,
  a `meet_requirements` rank check of captures 0 and 1 (their producers' output descs), and
  an expression-style `replacement` returning `Gemm(inputs[0], inputs[1], inputs[2])`. It runs
  through `ge.compiler.compile_graph(graph, pass_paths=[plugin], steps=...)` with shape
  inference, the final validation and the built-in passes skipped (equal work: the peer
  applies the one rule). The
  time is the pass's `PassRunRecord.seconds`: the pass invocation alone (its sweeps, hooks
  and rewrites), not loading the plugin; the record must say `rewrites == N`.
- peer: the onnxscript rewriter (the `bench` extra): a `RewriteRuleSet` of one
  `RewriteRule` `Add(MatMul(a, b), c) -> Gemm(a, b, c)` with the same rank check on the
  values' shapes, `apply_to_model` on an `onnx_ir` model loaded from the same file; it must
  return N.

The second table has 1, 10 and 50 rules at N = 10,000: the matching rule plus k-1 rules
that never match but are rooted at op types of the graph (Relu, Add, MatMul) so they visit
candidates, e.g. `Relu(Sub(x, y))`, `Add(Exp(x), y)`, `MatMul(Neg(x), y)`. On our side they
are further `@pattern` methods of the same pass, on onnxscript's further rules of the same
set, the never-matching ones first (ge sweeps the patterns in order, so they see the whole
graph; onnxscript tries the rules in order at every node). Goals: at N = 50,000 ge takes at
most 0.2x onnxscript's time; 50 rules cost ge at most 1.5x one rule.

Each run of each side is a fresh interpreter; the sides alternate, and the tables show the
min and median over the runs and their ratios to the peer measured in the same invocation.
The 1-rule measurement at N = 10,000 serves both tables. Budget: without `--runs`, runs 1
and 2 are always made and each further run (up to 3) only when it should end, at the mean
duration of the runs so far, within 8 minutes of the start (two runs while a run takes
close to 3 minutes, ge at about 0.8 ms per rewrite and onnxscript's 50 rules at about 20 s).
Only the rewrite is timed (loading, saving and checking are not). Loading runs with the
collector paused and is followed by `gc.collect()`, so both sides start the timed part from
the same clean state; the timed part runs with Python's garbage collector ON, at its
default thresholds, as users run (each child asserts it and reports it). Every collection
of the timed part is timed through `gc.callbacks` (`common.CollectionTimer`); the third
table shows the share of the timed part spent in collections (goal for ge at N = 50,000:
under 10%), the collections per generation and each child's peak RSS. With
`--without-gc-measures` a third side, "ge (no gc hold)", runs the same pass without
`ge.graph.allocation.no_full_collections` around it, to show what that hold saves (time,
collections, memory). Every run checks the rewritten graph: N Gemm nodes, no MatMul or
Add left; the first run of each side, size and rule count with N <= 1,000 also compares
onnxruntime's output with the original's within 1e-5.

Run: `make bench` or `.venv/bin/python benchmarks/bench_matcher.py [--sizes 1000 10000
50000] [--rules 1 10 50] [--rules-size 10000] [--runs 3] [--without-gc-measures]`.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_rewrite import make_matmul_add_chain
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

DEFAULT_SIZES = [1_000, 10_000, 50_000]
DEFAULT_RULES = [1, 10, 50]
RULES_N = 10_000  # the size of the rule-count table
DEFAULT_RUNS = 3
DEFAULT_BUDGET_S = 480.0  # without --runs, a third run starts only if it should end by then
NUMERICS_MAX_N = 1_000  # onnxruntime compares outputs up to this size (counts: every run)
GOAL_N, GOAL_RATIO = 50_000, 0.2  # ge at most 0.2x onnxscript's time at N = 50,000
GOAL_RULES, GOAL_RULES_RATIO = 50, 1.5  # 50 rules at most 1.5x one rule
GOAL_GC_SHARE = 0.10  # ge's timed part at N = 50,000: under 10% in garbage collections
SIDES = ("ge", "onnxscript")
UNHELD = "ge-no-hold"  # --without-gc-measures: ge without no_full_collections around the pass
SIDE_NAMES = {"ge": "ge", "onnxscript": "onnxscript", UNHELD: "ge (no gc hold)"}
PASS_NAME = "BenchMatMulAddToGemm"

#: Roots of the never-matching rules (op types of the graph) and their inner operators
#: (none of which the graph has), as (op type, number of inputs).
NEVER_ROOTS = ("Relu", "Add", "MatMul")
NEVER_INNER = (
    ("Sub", 2), ("Exp", 1), ("Mul", 2), ("Neg", 1), ("Div", 2), ("Tanh", 1), ("Pow", 2),
    ("Sigmoid", 1), ("Max", 2), ("Log", 1), ("Min", 2), ("Abs", 1), ("Sqrt", 1),
    ("Reciprocal", 1), ("Floor", 1), ("Ceil", 1), ("Erf", 1), ("Softplus", 1),
    ("Softsign", 1), ("Sin", 1), ("Cos", 1), ("Identity", 1), ("Elu", 1), ("Selu", 1),
    ("HardSigmoid", 1), ("LeakyRelu", 1),
)


def never_matching_rules(count: int) -> list[tuple[str, str, int]]:
    """`count` distinct (root, inner op, inner inputs): Relu(inner(x..)) or root(inner(x..), z).

    Rule i takes root i mod 3 and inner op i mod 26 (coprime, so 78 distinct rules)."""
    limit = len(NEVER_ROOTS) * len(NEVER_INNER)
    if count > limit:
        raise ValueError(f"at most {limit + 1} rules")
    return [(NEVER_ROOTS[i % len(NEVER_ROOTS)], *NEVER_INNER[i % len(NEVER_INNER)])
            for i in range(count)]


# -- ge: the plugin a user would write -------------------------------------------------------
PLUGIN_HEADER = '''\
"""Benchmark plugin: Add(MatMul(a, b), c) -> Gemm(a, b, c) for 2-D a and b{extra}."""

import ge.es.all as es
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass


def _rank(tensor):
    return tensor.node.get_output_desc(tensor.index).get_shape().get_dim_num()


@register_fusion_pass(name="{name}", stage=PassStage.BEFORE_INFER_SHAPE)
class {name}(PatternFusionPass):
'''

PLUGIN_NEVER = '''\
    @pattern
    def never_{index}_{root}_{inner}(self, inputs):
        return {expression}

'''

PLUGIN_BODY = '''\
    @pattern
    def matmul_add(self, inputs):
        return es.MatMul(inputs[0], inputs[1]) + inputs[2]

    def meet_requirements(self, match_result):
        a = match_result.get_captured_tensor(0)
        b = match_result.get_captured_tensor(1)
        return _rank(a) == 2 and _rank(b) == 2

    def replacement(self, inputs):
        return es.Gemm(inputs[0], inputs[1], inputs[2])
'''


def plugin_source(num_rules: int) -> str:
    """The pass: `num_rules - 1` never-matching `@pattern` methods first, then matmul_add."""
    extra = f", with {num_rules - 1} never-matching patterns first" if num_rules > 1 else ""
    parts = [PLUGIN_HEADER.format(name=PASS_NAME, extra=extra)]
    for index, (root, inner, arity) in enumerate(never_matching_rules(num_rules - 1)):
        expression = f"es.{inner}({', '.join(f'inputs[{i}]' for i in range(arity))})"
        if root != "Relu":
            expression = f"es.{root}({expression}, inputs[{arity}])"
        else:
            expression = f"es.Relu({expression})"
        parts.append(PLUGIN_NEVER.format(index=index, root=root.lower(), inner=inner.lower(),
                                         expression=expression))
    parts.append(PLUGIN_BODY)
    return "".join(parts)


# -- onnxscript: the same rules ----------------------------------------------------------------
def onnxscript_rule_set(num_rules: int):
    """`num_rules - 1` never-matching rules, then Add(MatMul(a, b), c) -> Gemm, a b 2-D."""
    from onnxscript.rewriter import pattern

    def matmul_add(op, a, b, c):
        return op.Add(op.MatMul(a, b), c)

    def ranks_are_2(context, a, b, c, **_) -> bool:
        return (a.shape is not None and b.shape is not None
                and len(a.shape) == 2 and len(b.shape) == 2)

    def gemm(op, a, b, c, **_):
        return op.Gemm(a, b, c)

    def unused(op, x0, **_):  # never called: its rule never matches
        return op.Identity(x0)

    rules = [pattern.RewriteRule(never_target(*spec), unused)
             for spec in never_matching_rules(num_rules - 1)]
    rules.append(pattern.RewriteRule(matmul_add, gemm, ranks_are_2))
    return pattern.RewriteRuleSet(rules)


def never_target(root: str, inner: str, arity: int):
    """The onnxscript pattern function of one never-matching rule, inputs x0, x1, ..."""
    count = arity + (root != "Relu")

    def target(op, *values):
        value = getattr(op, inner)(*values[:arity])
        return op.Relu(value) if root == "Relu" else getattr(op, root)(value, values[arity])

    # onnxscript makes one pattern variable per parameter of the function's signature.
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    target.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(name, kind) for name in ["op", *(f"x{i}" for i in range(count))]])
    return target


# -- one measured run in a fresh process ---------------------------------------------------
def check_counts(ops: Counter, num_layers: int, side: str) -> None:
    assert ops["Gemm"] == num_layers, f"{side}: {ops['Gemm']} Gemm nodes for {num_layers} layers"
    assert ops["MatMul"] == 0 and ops["Add"] == 0, f"{side}: MatMul/Add left: {dict(ops)}"


def check_numerics(original: Path, result: onnx.ModelProto, num_layers: int) -> None:
    """The saved model's counts, and onnxruntime's output equal to the original's."""
    check_counts(Counter(node.op_type for node in result.graph.node), num_layers, "saved")
    assert_chain_output_equal(str(original), result.SerializeToString())


def collector_on() -> dict:
    """Enable the collector for the timed part (after loading) and say how it is set."""
    gc.collect()
    gc.enable()
    assert gc.isenabled() and gc.get_freeze_count() == 0
    return {"collector": "on", "thresholds": list(gc.get_threshold())}


def child_ge(source: Path, plugin: Path, num_layers: int, verify: bool,
             hold: bool = True) -> dict:
    import ge.graph
    from ge.compiler import compile_graph
    from ge.compiler.scheduler import PipelineObserver

    if not hold:  # what the pass costs without ge's gc measure (--without-gc-measures)
        import contextlib

        import ge.compiler.invocation

        ge.compiler.invocation.no_full_collections = contextlib.nullcontext  # type: ignore

    finished: dict[str, float] = {}

    class PassEnd(PipelineObserver):
        def pass_finished(self, record, graph) -> None:
            if record.pass_name == PASS_NAME:
                finished[PASS_NAME] = time.perf_counter()

    gc.disable()
    graph = ge.graph.load(source)
    state = collector_on()
    with CollectionTimer() as timer:
        start = time.perf_counter()
        report = compile_graph(graph, pass_paths=[plugin], observers=[PassEnd()],
                               steps={"infer_shape": None, "final_validation": None},
                               builtin_passes=False)
        end = time.perf_counter()
    compile_seconds = end - start
    assert not report.skipped_plugins, f"ge: plugin skipped: {report.skipped_plugins}"
    records = [r for r in report.records if r.pass_name == PASS_NAME]
    assert len(records) == 1, f"ge: {len(records)} runs of {PASS_NAME}"
    record = records[0]
    assert record.rewrites == num_layers, f"ge: {record.rewrites} rewrites for {num_layers}"
    check_counts(Counter(node.type for node in graph.get_all_nodes()), num_layers, "ge")
    # The pass's own window: the record's seconds, ending when the observer heard of it.
    pass_end = finished[PASS_NAME]
    in_pass = timer.report(pass_end - record.seconds, pass_end)
    in_compile = timer.report(start, end)
    peak = peak_rss_mib()
    if verify:
        with tempfile.TemporaryDirectory() as tmp:
            graph.save(Path(tmp) / "rewritten.onnx")
            check_numerics(source, onnx.load(Path(tmp) / "rewritten.onnx"), num_layers)
    return {"seconds": record.seconds, "rewrites": record.rewrites,
            "compile_seconds": compile_seconds, **in_pass,
            "compile_gc_seconds": in_compile["gc_seconds"], "peak_mib": peak, **state}


def child_onnxscript(source: Path, num_rules: int, num_layers: int, verify: bool) -> dict:
    import onnx_ir as ir

    gc.disable()
    model = ir.load(source)
    rules = onnxscript_rule_set(num_rules)
    state = collector_on()
    with CollectionTimer() as timer:
        start = time.perf_counter()
        rewrites = rules.apply_to_model(model)
        end = time.perf_counter()
    seconds = end - start
    collections = timer.report(start, end)
    peak = peak_rss_mib()
    assert rewrites == num_layers, f"onnxscript: {rewrites} rewrites for {num_layers}"
    check_counts(Counter(node.op_type for node in model.graph), num_layers, "onnxscript")
    if verify:
        check_numerics(source, ir.to_proto(model), num_layers)
    return {"seconds": seconds, "rewrites": rewrites, "compile_seconds": seconds,
            **collections, "compile_gc_seconds": collections["gc_seconds"],
            "peak_mib": peak, **state}


# -- the comparison --------------------------------------------------------------------------
Key = tuple[str, int, int]  # side, N, rules


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=DEFAULT_SIZES,
                        help="numbers of MatMul+Add+Relu layers, one rule (default: "
                             f"{' '.join(map(str, DEFAULT_SIZES))})")
    parser.add_argument("--rules", type=int, nargs="*", default=DEFAULT_RULES,
                        help=f"rule counts at N={RULES_N:,} (default: "
                             f"{' '.join(map(str, DEFAULT_RULES))}; none to skip)")
    parser.add_argument("--rules-size", type=int, default=RULES_N,
                        help=f"N of the rule-count table (default: {RULES_N})")
    parser.add_argument("--runs", type=int, default=None,
                        help="fresh processes per side and task (default: up to "
                             f"{DEFAULT_RUNS}, the third only within {DEFAULT_BUDGET_S:.0f} s)")
    parser.add_argument("--without-gc-measures", action="store_true",
                        help="add a side: ge without its full-collection hold around the "
                             "pass (at the sizes of the first table)")
    parser.add_argument("--child", nargs=6,
                        metavar=("SIDE", "MODEL", "PLUGIN", "RULES", "N", "VERIFY"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        side, model, plugin, k, n, verify = args.child
        if side in ("ge", UNHELD):
            out = child_ge(Path(model), Path(plugin), int(n), verify == "1",
                           hold=side == "ge")
        else:
            out = child_onnxscript(Path(model), int(k), int(n), verify == "1")
        print(json.dumps(out))
        return 0
    sides = sides_available(SIDES)
    sizes = sorted(set(args.sizes))
    rule_counts = sorted(set(args.rules))
    if rule_counts and 1 not in rule_counts:
        rule_counts.insert(0, 1)  # the baseline of the ratios
    rules_n = args.rules_size
    tasks = list(dict.fromkeys([(n, 1) for n in sizes] + [(rules_n, k) for k in rule_counts]))
    seconds: dict[Key, list[float]] = {(s, n, k): [] for s in sides for n, k in tasks}
    reports: dict[Key, list[dict]] = {(s, n, k): [] for s in sides for n, k in tasks}
    if args.without_gc_measures:
        for n in sizes:
            seconds[UNHELD, n, 1], reports[UNHELD, n, 1] = [], []
    runs = args.runs or DEFAULT_RUNS
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        models, plugins = {}, {}
        for n in dict.fromkeys(n for n, _ in tasks):
            models[n] = folder / f"chain_{n}.onnx"
            onnx.save(make_matmul_add_chain(n), models[n])
        for k in dict.fromkeys(k for _, k in tasks):
            plugins[k] = folder / f"bench_matcher_{k}_rules.py"
            plugins[k].write_text(plugin_source(k))
        for run in range(runs):
            if args.runs is None and run >= 2:
                spent = time.perf_counter() - started
                if spent + spent / run > DEFAULT_BUDGET_S:  # the next run takes about the mean
                    print(f"stopping after {run} runs: a run takes about {spent / run:.0f} s "
                          f"(--runs {DEFAULT_RUNS} to make them all)")
                    break
            for n, k in tasks:
                # Alternate which side goes first, so neither always runs on a warmer machine.
                task_sides = [s for s in (*sides, UNHELD) if (s, n, k) in seconds]
                for side in task_sides if run % 2 == 0 else task_sides[::-1]:
                    verify = run == 0 and n <= NUMERICS_MAX_N
                    out = run_child(__file__, side, str(models[n]), str(plugins[k]), str(k),
                                    str(n), "1" if verify else "0")
                    seconds[side, n, k].append(out["seconds"])
                    reports[side, n, k].append(out)
                    extra = (f"  (compile_graph {out['compile_seconds']:.2f} s)"
                             if side != "onnxscript" else "")
                    print(f"run {run + 1}/{runs}  N={n:>6,}  {k:>2} rule{'s' if k > 1 else ' '}  "
                          f"{side:<10} {out['seconds']:7.3f} s  "
                          f"{out['seconds'] / n * 1e6:6.0f} µs/rewrite  "
                          f"gc {out['gc_seconds'] / out['seconds']:5.1%}{extra}", flush=True)
    print(f"total {time.perf_counter() - started:.0f} s")
    print_rows(sizes, rule_counts, rules_n, sides, seconds)
    print_collections(reports)
    return 0


def print_collections(reports: dict[Key, list[dict]]) -> None:
    """The share of each side's timed part spent in garbage collections, collector on."""
    rows = []
    for (side, n, k), outs in sorted(reports.items(), key=lambda item: (item[0][2],
                                                                       item[0][1])):
        if not outs:
            continue
        cells = gc_share_cells([o["seconds"] for o in outs], [o["gc_seconds"] for o in outs],
                               [o["gc_counts"] for o in outs])
        share = statistics.median(o["gc_seconds"] / o["seconds"] for o in outs)
        goal = ""
        if side == "ge" and n == GOAL_N and k == 1:
            goal = f"< {GOAL_GC_SHARE:.0%} " + ("met" if share < GOAL_GC_SHARE else "missed")
        peak = min(o["peak_mib"] for o in outs), statistics.median(o["peak_mib"] for o in outs)
        rows.append([f"N={n:,}, {k} rule{'s' if k > 1 else ''}", SIDE_NAMES[side], *cells,
                     f"{peak[0]:.0f} / {peak[1]:.0f} MiB", goal])
    print_columns("Garbage collections during the timed part (collector on, default "
                  f"thresholds {tuple(reports_thresholds(reports))})",
                  ["task", "side", "time min / median", "in collections min / median",
                   "share min / median", "collections gen 0 / 1 / 2", "peak RSS min / median",
                   "goal"], rows,
                  caption="ge's timed part is the pass invocation (PassRunRecord.seconds); "
                          "onnxscript's is apply_to_model")


def reports_thresholds(reports: dict[Key, list[dict]]) -> list[int]:
    return next((o["thresholds"] for outs in reports.values() for o in outs), [])


def print_rows(sizes: list[int], rule_counts: list[int], rules_n: int,
               sides: tuple[str, ...], seconds: dict[Key, list[float]]) -> None:
    stats = {"min": min, "median": statistics.median}
    if "onnxscript" not in sides:
        for (side, n, k), times in seconds.items():
            print(f"N={n:,}, {k} rules: {SIDE_NAMES[side]} {min(times):.3f} s (min), "
                  f"{statistics.median(times):.3f} s (median)")
        return
    rows = []
    for n in sizes:
        for stat, fn in stats.items():
            rows.append(Row(f"N={n:,}: rewrite ({stat})", fn(seconds["ge", n, 1]),
                            "onnxscript rewriter", fn(seconds["onnxscript", n, 1]),
                            goal=GOAL_RATIO if n == GOAL_N else None))
    print_table("Add(MatMul(a, b), c) -> Gemm, 1 rule: N rewrites", rows)
    if not rule_counts:
        return
    rows = []
    for k in rule_counts:
        for stat, fn in stats.items():
            rows.append(Row(f"{k} rule{'s' if k > 1 else ''}, N={rules_n:,} ({stat})",
                            fn(seconds["ge", rules_n, k]), "onnxscript rewriter",
                            fn(seconds["onnxscript", rules_n, k])))
    for k in rule_counts:
        if k == 1:
            continue
        for stat, fn in stats.items():
            rows.append(Row(f"ge {k} rules vs 1 rule ({stat})", fn(seconds["ge", rules_n, k]),
                            "ge, 1 rule", fn(seconds["ge", rules_n, 1]),
                            goal=GOAL_RULES_RATIO if k == GOAL_RULES else None))
    print_table(f"Rule count at N={rules_n:,}: k-1 never-matching rules, then the matching one",
                rows)
    base = seconds["onnxscript", rules_n, 1]
    for k in rule_counts[1:]:
        times = seconds["onnxscript", rules_n, k]
        print(f"(for reference) onnxscript {k} rules vs 1 rule: {min(times) / min(base):.2f}x "
              f"(min), {statistics.median(times) / statistics.median(base):.2f}x (median)")


if __name__ == "__main__":
    sys.exit(main())
