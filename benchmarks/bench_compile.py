"""Benchmark compiling model files: `ge` against onnxscript's optimizer and onnxruntime.

Models:
- a generated transformer-like encoder (`make_encoder_model`) of at least `--nodes` nodes
  (default 10,000): stacked blocks of MatMul+Add linear layers, multi-head attention
  (Reshape/Transpose/MatMul/Softmax), GELU in Erf form, LayerNorm in primitives (ReduceMean,
  Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add), residual Adds; plus what an optimiser
  should remove: Identity, Dropout, Casts to the same type, constant subgraphs on
  initializers (Transpose of a weight, Cast+Sqrt of the head size, Div of two scalars),
  duplicate constants (every block has its own equal Constant nodes and initializers), a
  duplicated Sub (a common subexpression) and dead nodes. Fixed shapes [1, 8, 16], float32,
  opset 17, hidden size 16, so the file stays small;
- tests/models/distilbert_tiny_dynamo.onnx, the vendored dynamo export (inputs as its .json
  describes: int64 token ids in [0, 500), a right-padded 0/1 attention mask);
- a generated model of many If bodies (`make_branches_model`, `--branches`, default 2,000
  If nodes, 4,000 bodies): a chain of If nodes on one condition whose branches each hold a
  no-op (an Identity, a Cast to the same type) before a Neg or a Relu, each If followed by
  an Add of a constant subexpression (Mul of two Constants): what per-body overhead costs.

Sides, each run in a fresh interpreter, the sides alternating (`common.run_sides_alternating`),
Python's garbage collector on as users run; a child imports its libraries first and times
only the work below (start-up and imports excluded), and reports its own time as JSON:
1. ge: `ge.graph.load(src)` + `ge.compile(graph)` (built-in passes, no plugins:
   GE_DISABLE_PLUGIN_AUTOLOAD=1 in the child's environment) + `result.save(dst)`;
2. onnxscript: `onnx.load` + `onnxscript.optimizer.optimize(model)` + `onnx.save`;
3. onnxruntime offline: an `InferenceSession` with ORT_ENABLE_BASIC writing the optimised
   model (`optimized_model_filepath`);
4. onnxruntime session only: the same with ORT_DISABLE_ALL (it still writes the model), to
   show how much of 3 is creating the session rather than optimising.

After timing, each side's output is run with onnxruntime (optimisations off) on the same
random inputs as the original (numpy, from the input types) and compared with the
original's outputs (rtol 1e-4, atol 1e-5); nodes are counted with subgraphs, Constant
nodes included (the table says how many: onnxruntime and onnxscript turn them into
initializers, ge's output may keep some). Goals: ge takes at most 0.5x onnxscript's
time, and its output has no more nodes than either peer's. (onnxscript 0.7.2's rewriter
tries its two-output SlicesSplit rule at every node and indexes the whole graph for each
try, so its time grows with the square of the node count: about 0.5 s at 800 nodes and
35 s at 10,000; the small distilbert model shows the ratio without that effect.)
The exit status is 1 when ge fails or its output differs from the original's.

Run: `make bench` or `.venv/bin/python benchmarks/bench_compile.py [--nodes N] [--runs R]
[--quick]`.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import math
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import min_median, print_columns, run_sides_alternating, sides_available

ROOT = Path(__file__).resolve().parent.parent
DISTILBERT = ROOT / "tests" / "models" / "distilbert_tiny_dynamo.onnx"
DEFAULT_NODES = 10_000
DEFAULT_BRANCHES = 2_000
DEFAULT_RUNS = 5
QUICK_NODES, QUICK_BRANCHES, QUICK_RUNS = 800, 100, 2
GOAL_RATIO = 0.5  # ge at most 0.5x onnxscript's time
RTOL, ATOL = 1e-4, 1e-5
SIDES = ("ge", "onnxscript", "ort-basic", "ort-none")
SIDE_NAMES = {
    "ge": "ge (load + compile + save)",
    "onnxscript": "onnxscript optimizer",
    "ort-basic": "onnxruntime basic offline",
    "ort-none": "onnxruntime session only (optimisation disabled)",
}
CHILD_ENV = {"ge": {"GE_DISABLE_PLUGIN_AUTOLOAD": "1"}}

SEQ, HIDDEN, HEADS, FFN = 8, 16, 2, 64
HEAD = HIDDEN // HEADS
F32 = TensorProto.FLOAT


# -- the generated encoder -------------------------------------------------------------------
class _Builder:
    """Nodes and initializers of one graph, with fresh value names."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    def op(self, op_type: str, inputs: list[str], name: str, **attrs) -> str:
        self.nodes.append(helper.make_node(op_type, inputs, [name], name=f"{op_type}_{name}",
                                           **attrs))
        return name

    def init(self, name: str, array: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def constant(self, name: str, array: np.ndarray) -> str:
        """A Constant node (every block makes its own: equal constants to merge)."""
        return self.op("Constant", [], name, value=numpy_helper.from_array(array, name))

    def weight(self, name: str, rows: int, cols: int) -> np.ndarray:
        return self.rng.normal(0.0, 1.0 / math.sqrt(rows), (rows, cols)).astype(np.float32)

    def linear(self, x: str, name: str, rows: int, cols: int, transposed: bool = False) -> str:
        weight = self.weight(name, rows, cols)
        if transposed:  # stored as [cols, rows] and transposed by a foldable node
            w = self.op("Transpose", [self.init(f"{name}_wt", weight.T.copy())], f"{name}_w",
                        perm=[1, 0])
        else:
            w = self.init(f"{name}_w", weight)
        bias = self.init(f"{name}_b", self.rng.uniform(-0.1, 0.1, cols).astype(np.float32))
        return self.op("Add", [self.op("MatMul", [x, w], f"{name}_mm"), bias], f"{name}_out")

    def layer_norm(self, x: str, name: str) -> str:
        """LayerNorm in primitives, its x - mean computed twice (once for the variance, once
        for the normalisation), epsilon as the quotient of two initializers."""
        mean = self.op("ReduceMean", [x], f"{name}_mean", axes=[-1], keepdims=1)
        diff = self.op("Sub", [x, mean], f"{name}_diff")
        diff_again = self.op("Sub", [x, mean], f"{name}_diff2")
        two = self.init(f"{name}_two", np.array(2.0, np.float32))
        var = self.op("ReduceMean", [self.op("Pow", [diff, two], f"{name}_sq")], f"{name}_var",
                      axes=[-1], keepdims=1)
        eps = self.op("Div", [self.init(f"{name}_eps_num", np.array(1.0, np.float32)),
                              self.init(f"{name}_eps_den", np.array(1e5, np.float32))],
                      f"{name}_eps")
        std = self.op("Sqrt", [self.op("Add", [var, eps], f"{name}_var_eps")], f"{name}_std")
        normed = self.op("Div", [diff_again, std], f"{name}_normed")
        gamma = self.init(f"{name}_gamma",
                          (1.0 + self.rng.uniform(-0.1, 0.1, HIDDEN)).astype(np.float32))
        beta = self.init(f"{name}_beta", self.rng.uniform(-0.1, 0.1, HIDDEN).astype(np.float32))
        return self.op("Add", [self.op("Mul", [normed, gamma], f"{name}_scaled"), beta],
                       f"{name}_out")

    def block(self, h: str, i: int) -> str:
        p = f"b{i}_"
        x = self.op("Identity", [h], f"{p}in")
        heads_shape = np.array([1, SEQ, HEADS, HEAD], np.int64)
        q, k, v = (self.linear(x, f"{p}{n}", HIDDEN, HIDDEN, transposed=True) for n in "qkv")
        qt = self.op("Transpose", [self.op("Reshape", [q, self.constant(f"{p}q_shape",
                                                                         heads_shape)],
                                           f"{p}q_heads")], f"{p}q_t", perm=[0, 2, 1, 3])
        kt = self.op("Transpose", [self.op("Reshape", [k, self.constant(f"{p}k_shape",
                                                                         heads_shape)],
                                           f"{p}k_heads")], f"{p}k_t", perm=[0, 2, 3, 1])
        vt = self.op("Transpose", [self.op("Reshape", [v, self.constant(f"{p}v_shape",
                                                                         heads_shape)],
                                           f"{p}v_heads")], f"{p}v_t", perm=[0, 2, 1, 3])
        head_size = self.init(f"{p}head_size", np.array(HEAD, np.int64))
        scale = self.op("Sqrt", [self.op("Cast", [head_size], f"{p}head_size_f", to=F32)],
                        f"{p}scale")
        scores = self.op("Div", [self.op("MatMul", [qt, kt], f"{p}qk"), scale], f"{p}scores")
        probs = self.op("Dropout", [self.op("Softmax", [scores], f"{p}probs", axis=-1)],
                        f"{p}probs_drop")
        context = self.op("Transpose", [self.op("MatMul", [probs, vt], f"{p}ctx")],
                          f"{p}ctx_t", perm=[0, 2, 1, 3])
        merged = self.op("Reshape", [context, self.constant(
            f"{p}merge_shape", np.array([1, SEQ, HIDDEN], np.int64))], f"{p}merged")
        attn = self.op("Dropout", [self.linear(merged, f"{p}o", HIDDEN, HIDDEN)], f"{p}o_drop")
        r1 = self.op("Add", [x, attn], f"{p}res1")
        dead = self.op("Relu", [r1], f"{p}dead_relu")  # nothing reads what follows
        self.op("Mul", [dead, dead], f"{p}dead_sq")
        ln1 = self.layer_norm(r1, f"{p}ln1")
        f = self.linear(ln1, f"{p}ff1", HIDDEN, FFN)
        erf = self.op("Erf", [self.op("Div", [f, self.constant(
            f"{p}sqrt2", np.array(math.sqrt(2.0), np.float32))], f"{p}gelu_div")], f"{p}erf")
        erf1 = self.op("Add", [erf, self.constant(f"{p}one", np.array(1.0, np.float32))],
                       f"{p}erf1")
        gelu = self.op("Mul", [self.op("Mul", [f, erf1], f"{p}gelu_mul"),
                               self.constant(f"{p}half", np.array(0.5, np.float32))],
                       f"{p}gelu")
        gelu = self.op("Cast", [gelu], f"{p}gelu_cast", to=F32)  # already float
        ff = self.op("Dropout", [self.linear(gelu, f"{p}ff2", FFN, HIDDEN)], f"{p}ff2_drop")
        out = self.layer_norm(self.op("Add", [ln1, ff], f"{p}res2"), f"{p}ln2")
        return self.op("Identity", [out], f"{p}out")


def make_encoder_model(min_nodes: int) -> onnx.ModelProto:
    """Stacked encoder blocks, x[1, 8, 16] -> y[1, 8, 16], with at least `min_nodes` nodes."""
    builder = _Builder(np.random.default_rng(0))
    previous, i = "x", 0
    while len(builder.nodes) < min_nodes or i == 0:
        previous = builder.block(previous, i)
        i += 1
    builder.nodes.append(helper.make_node("Identity", [previous], ["y"], name="Identity_y"))
    graph = helper.make_graph(
        builder.nodes, f"encoder_{i}_blocks",
        [helper.make_tensor_value_info("x", F32, [1, SEQ, HIDDEN])],
        [helper.make_tensor_value_info("y", F32, [1, SEQ, HIDDEN])],
        builder.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="ge-bench")
    onnx.checker.check_model(model)
    return model


def make_branches_model(ifs: int) -> onnx.ModelProto:
    """`ifs` If nodes in a chain, x[4] -> y[4], each branch a no-op and an operator, each If
    followed by an Add of a foldable constant (see the module docstring)."""
    nodes, previous = [], "x"
    for i in range(ifs):
        then = helper.make_graph(
            [helper.make_node("Identity", [previous], [f"then_id{i}"], name=f"then_id{i}"),
             helper.make_node("Neg", [f"then_id{i}"], [f"then{i}"], name=f"then_neg{i}")],
            f"then{i}", [], [helper.make_tensor_value_info(f"then{i}", F32, [4])])
        other = helper.make_graph(
            [helper.make_node("Cast", [previous], [f"else_cast{i}"], name=f"else_cast{i}",
                              to=TensorProto.FLOAT),
             helper.make_node("Relu", [f"else_cast{i}"], [f"else{i}"], name=f"else_relu{i}")],
            f"else{i}", [], [helper.make_tensor_value_info(f"else{i}", F32, [4])])
        nodes += [
            helper.make_node("If", ["c"], [f"if{i}"], name=f"if{i}", then_branch=then,
                             else_branch=other),
            helper.make_node("Constant", [], [f"two{i}"], name=f"two{i}",
                             value=numpy_helper.from_array(np.array(2.0, np.float32))),
            helper.make_node("Constant", [], [f"half{i}"], name=f"half{i}",
                             value=numpy_helper.from_array(np.array(0.5, np.float32))),
            helper.make_node("Mul", [f"two{i}", f"half{i}"], [f"one{i}"], name=f"mul{i}"),
            helper.make_node("Add", [f"if{i}", f"one{i}"], [f"add{i}"], name=f"add{i}"),
        ]
        previous = f"add{i}"
    nodes.append(helper.make_node("Identity", [previous], ["y"], name="Identity_y"))
    graph = helper.make_graph(
        nodes, f"branches_{ifs}",
        [helper.make_tensor_value_info("x", F32, [4]),
         helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", F32, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="ge-bench")
    onnx.checker.check_model(model)
    return model


# -- one measured run in a fresh process ---------------------------------------------------
def child(side: str, source: str, target: str) -> dict:
    """Import first, then time the side's load + optimise + save (collector on)."""
    stages: dict[str, float] = {}
    report: dict = {}
    if side == "ge":
        import ge
        import ge.compiler.builtin
        import ge.graph
        import ge.session.compilation

        # onnxscript imports onnx's reference evaluator (onnx.reference and its operators)
        # with its optimizer, ge at its first evaluation (`ge.ops.evaluation`): imported
        # outside the timing on both sides alike
        for module in ("onnx.reference", "ge.ops.runtime_kernels"):
            importlib.import_module(module)
        gc.collect()
        start = time.perf_counter()
        result = ge.compile(source)  # as users call it: from the file, load included
        stages["load+compile"] = time.perf_counter() - start
        result.save(target)
        seconds = time.perf_counter() - start
        stages["save"] = seconds - stages["load+compile"]
        report["steps"] = {step.name: step.seconds for step in result.report.steps}
        passes: dict[str, float] = {}
        for record in result.report.records:
            passes[record.pass_name] = passes.get(record.pass_name, 0.0) + record.seconds
        report["passes"] = passes
        if result.report.fixed_point is not None:
            report["rounds"] = result.report.fixed_point.rounds
    elif side == "onnxscript":
        import onnxscript.optimizer

        gc.collect()
        start = time.perf_counter()
        model = onnx.load(source)
        stages["load"] = time.perf_counter() - start
        model = onnxscript.optimizer.optimize(model)
        stages["optimize"] = time.perf_counter() - start - stages["load"]
        onnx.save(model, target)
        seconds = time.perf_counter() - start
        stages["save"] = seconds - stages["load"] - stages["optimize"]
    else:
        import onnxruntime as ort

        level = (ort.GraphOptimizationLevel.ORT_ENABLE_BASIC if side == "ort-basic"
                 else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
        gc.collect()
        start = time.perf_counter()
        options = ort.SessionOptions()
        options.graph_optimization_level = level
        options.optimized_model_filepath = target
        ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
        seconds = time.perf_counter() - start
    return {"seconds": seconds, "stages": stages, **report}


# -- checking the outputs ------------------------------------------------------------------
def op_counts(graph: onnx.GraphProto) -> Counter[str]:
    """Nodes per op type of `graph` and of every subgraph in its nodes' attributes."""
    counts = Counter(node.op_type for node in graph.node)
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                counts += op_counts(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for body in attr.graphs:
                    counts += op_counts(body)
    return counts


def make_inputs(model: onnx.ModelProto, int_inputs: dict[str, int | str],
                seed: int = 0) -> dict[str, np.ndarray]:
    """Random values for the graph inputs from their types: floats standard normal,
    integers in [0, high) (`int_inputs[name]`, default 4, or "right-padding": 1s then 0s),
    bools random."""
    rng = np.random.default_rng(seed)
    initializers = {t.name for t in model.graph.initializer}
    feeds = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in tensor.shape.dim)
        spec = int_inputs.get(value.name, 4)
        if np.issubdtype(dtype, np.floating):
            array = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            array = np.asarray(rng.random(shape) < 0.5)
        elif spec == "right-padding":
            lengths = rng.integers(1, shape[-1] + 1, shape[:-1])
            array = (np.arange(shape[-1]) < lengths[..., None]).astype(dtype)
        else:
            array = rng.integers(0, int(spec), shape).astype(dtype)
        feeds[value.name] = array
    return feeds


def run_ort(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The model's outputs by name, onnxruntime with its optimisations off."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds)))


@dataclass
class Check:
    nodes: int | None = None  # subgraphs included
    constants: int = 0  # of which Constant nodes (onnxruntime and onnxscript make them
    # initializers)
    max_abs_diff: float | None = None
    ok: bool = False
    error: str = ""


def check_output(target: Path, feeds: dict[str, np.ndarray],
                 expected: dict[str, np.ndarray]) -> Check:
    check = Check()
    try:
        counts = op_counts(onnx.load(target).graph)
        check.nodes, check.constants = sum(counts.values()), counts["Constant"]
        actual = run_ort(target, feeds)
    except Exception as error:  # report what the side's output does, not stop
        check.error = f"{type(error).__name__}: {error}".splitlines()[0][:300]
        return check
    missing = sorted(set(expected) - set(actual))
    if missing:
        check.error = f"outputs missing: {missing} (has {sorted(actual)})"
        return check
    worst, ok = 0.0, True
    for name, want in expected.items():
        got = actual[name]
        if got.shape != want.shape or got.dtype != want.dtype:
            check.error = (f"output {name}: {got.dtype}{list(got.shape)}, expected "
                           f"{want.dtype}{list(want.shape)}")
            return check
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        worst = max(worst, float(np.nanmax(diff)) if diff.size else 0.0)
        ok = ok and bool(np.allclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True))
    check.max_abs_diff, check.ok = worst, ok
    if not ok:
        check.error = f"outputs differ beyond rtol={RTOL:g}, atol={ATOL:g}"
    return check


# -- the comparison --------------------------------------------------------------------------
@dataclass
class Measured:
    """One model: where it is, its inputs and what every side did with it."""

    label: str
    source: Path
    int_inputs: dict[str, int | str] = field(default_factory=dict)
    reports: dict[str, list[dict]] = field(default_factory=dict)
    checks: dict[str, Check] = field(default_factory=dict)
    nodes_before: int = 0


def measure(model: Measured, sides: tuple[str, ...], runs: int, folder: Path) -> None:
    targets = {side: folder / f"{model.source.stem}.{side}.onnx" for side in sides}
    model.reports = run_sides_alternating(
        __file__, sides, lambda side: [side, str(model.source), str(targets[side])], runs,
        env=lambda side: CHILD_ENV.get(side), label=f"{model.label:<12} ")
    original = onnx.load(model.source)
    model.nodes_before = sum(op_counts(original.graph).values())
    feeds = make_inputs(original, model.int_inputs)
    expected = run_ort(model.source, feeds)
    for side in sides:
        if any("error" in r for r in model.reports[side]):
            model.checks[side] = Check(error="the side failed (see below)")
        else:
            model.checks[side] = check_output(targets[side], feeds, expected)


def seconds_of(model: Measured, side: str) -> list[float]:
    return [r["seconds"] for r in model.reports.get(side, []) if "seconds" in r]


def print_model(model: Measured, sides: tuple[str, ...], runs: int) -> bool:
    """The table of one model and its goal lines; True when ge's output is correct."""
    peer = min_median(seconds_of(model, "onnxscript")) if seconds_of(model, "onnxscript") \
        else None
    rows = []
    for side in sides:
        times = seconds_of(model, side)
        check = model.checks[side]
        if times:
            low, mid = min_median(times)
            cells = [f"{low:.3f}", f"{mid:.3f}"]
            cells += ([f"{low / peer[0]:.2f}x", f"{mid / peer[1]:.2f}x"] if peer
                      else ["n/a", "n/a"])
        else:
            cells = ["failed"] * 2 + ["n/a"] * 2
        after = "?" if check.nodes is None else f"{check.nodes:,} ({check.constants} Constant)"
        diff = "n/a" if check.max_abs_diff is None else f"{check.max_abs_diff:.2e}"
        ok = "[green]yes[/green]" if check.ok else "[red]no[/red]"
        rows.append([SIDE_NAMES[side], *cells, f"{model.nodes_before:,} → {after}", diff, ok])
    print_columns(
        f"Compiling {model.label} ({model.nodes_before:,} nodes), {runs} fresh processes per "
        f"side — goal: ge ≤ {GOAL_RATIO:g}x onnxscript's time, nodes ≤ both peers'",
        ["side", "min s", "median s", "/ onnxscript (min)", "/ onnxscript (median)",
         "nodes before → after", "max abs diff", "ok"], rows,
        caption=f"outputs vs the original's on the same random inputs, onnxruntime "
                f"(optimisations off), rtol={RTOL:g} atol={ATOL:g}")
    ge_check = model.checks.get("ge", Check())
    ge_times = seconds_of(model, "ge")
    if peer and ge_times:
        low, mid = min_median(ge_times)
        met = low / peer[0] <= GOAL_RATIO and mid / peer[1] <= GOAL_RATIO
        print(f"goal time  (ge ≤ {GOAL_RATIO:g}x onnxscript): {low / peer[0]:.2f}x min, "
              f"{mid / peer[1]:.2f}x median: {'met' if met else 'MISSED'}")
    peers = {s: model.checks[s].nodes for s in ("onnxscript", "ort-basic") if s in sides}
    if ge_check.nodes is not None and all(n is not None for n in peers.values()) and peers:
        met = all(ge_check.nodes <= n for n in peers.values())
        print(f"goal nodes (ge ≤ both peers): ge {ge_check.nodes:,}, "
              + ", ".join(f"{s} {n:,}" for s, n in peers.items())
              + f": {'met' if met else 'MISSED'}")
    ge_runs = sorted((r for r in model.reports.get("ge", []) if "seconds" in r),
                     key=lambda r: r["seconds"])
    if ge_runs:
        run = ge_runs[len(ge_runs) // 2]  # the median run (the upper one of an even count)
        stages = ", ".join(f"{k} {v:.3f} s" for k, v in run["stages"].items())
        steps = ", ".join(f"{k} {v:.3f}" for k, v in run.get("steps", {}).items())
        passes = ", ".join(f"{k} {v:.3f}" for k, v in sorted(
            run.get("passes", {}).items(), key=lambda kv: -kv[1]))
        print(f"ge median run: {stages}; steps (s): {steps}; passes (s): {passes}; "
              f"fixed-point rounds: {run.get('rounds', '?')}")
    for side in sides:
        check = model.checks[side]
        failures = [r["error"] for r in model.reports.get(side, []) if "error" in r]
        if failures:
            print(f"{SIDE_NAMES[side]} FAILED on {model.label}:\n  "
                  + failures[0].replace("\n", "\n  "))
        elif check.error:
            print(f"{SIDE_NAMES[side]} output on {model.label}: {check.error}")
    return ge_check.ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=None,
                        help=f"minimum nodes of the generated encoder (default {DEFAULT_NODES:,}"
                             f", {QUICK_NODES} with --quick)")
    parser.add_argument("--runs", type=int, default=None,
                        help=f"fresh processes per side and model (default {DEFAULT_RUNS}, "
                             f"{QUICK_RUNS} with --quick)")
    parser.add_argument("--branches", type=int, default=None,
                        help=f"If nodes of the generated branches model (default "
                             f"{DEFAULT_BRANCHES:,}, {QUICK_BRANCHES} with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help=f"a small encoder ({QUICK_NODES} nodes), {QUICK_BRANCHES} If "
                             f"nodes and {QUICK_RUNS} runs")
    parser.add_argument("--child", nargs=3, metavar=("SIDE", "SOURCE", "TARGET"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return 0
    nodes = args.nodes or (QUICK_NODES if args.quick else DEFAULT_NODES)
    branches = args.branches or (QUICK_BRANCHES if args.quick else DEFAULT_BRANCHES)
    runs = args.runs or (QUICK_RUNS if args.quick else DEFAULT_RUNS)
    with_onnxscript = "onnxscript" in sides_available(("ge", "onnxscript"))
    sides = tuple(s for s in SIDES if with_onnxscript or s != "onnxscript")
    status = 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        encoder = folder / "encoder.onnx"
        proto = make_encoder_model(nodes)
        onnx.save(proto, encoder)
        print(f"encoder: {len(proto.graph.node):,} nodes, {encoder.stat().st_size / 1e6:.1f} MB"
              f" ({os.path.relpath(DISTILBERT, Path.cwd())} is the second model, "
              f"{branches:,} If nodes the third)")
        branchy = folder / "branches.onnx"
        onnx.save(make_branches_model(branches), branchy)
        models = [Measured("encoder", encoder),
                  Measured("distilbert", DISTILBERT,
                           {"input_ids": 500, "attention_mask": "right-padding"}),
                  Measured("branches", branchy)]
        for model in models:
            measure(model, sides, runs, folder)
        for model in models:
            if not print_model(model, sides, runs):
                status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
