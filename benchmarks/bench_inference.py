"""Benchmark how fast the models ge writes run in onnxruntime, against the original and peers.

Models (the default set):
- the vendored real exports of tests/models/ (`VENDORED`), with the inputs their .json
  sidecars describe (names, shapes, dtypes): floats standard normal, int64 token ids in
  [0, vocab) (the vocabulary from the sidecar's note, "token ids in [0, 500)"), attention
  masks all ones;
- bench_compile's generated encoder (`make_encoder_model(--nodes)`, default 10,000 nodes,
  tensors of [1, 8, 16], so the time per operator, not arithmetic, dominates), at its own
  opset 17 and converted to opset 20 with `onnx.version_converter` as bench_fusions does
  (Gelu is an operator from opset 20), input x standard normal;
- every `--model PATH[:INPUTS.npz]` (repeatable), with the arrays of the .npz keyed by input
  name, or without one generated from the model's input types: floats standard normal,
  integer inputs whose name contains "mask" all ones, other integers in [0, 4), bools
  random; a symbolic dim takes its `--dim NAME=SIZE` value, any other unknown dim 2.
`--only NAME` (repeatable) keeps some of the default models: a vendored model's name,
"encoder" or "encoder_opset20"; `--no-defaults` keeps none of them (only `--model`'s).

Files compared for each model, made once per invocation before any timing, in a temporary
folder, by bench_fusions' `child_nodes` (one fresh process each, two at a time; their
times are not reported):
1. original: the model file as it is;
2. ge: `ge.compile(path)` + `result.save(out)`, default options (built-in passes, no plugins:
   GE_DISABLE_PLUGIN_AUTOLOAD=1);
3. ort-extended: onnxruntime's offline optimisation, a session at ORT_ENABLE_EXTENDED
   writing `optimized_model_filepath` (it may write com.microsoft contrib operators);
4. onnxscript: `onnxscript.optimizer.optimize` + `onnxscript.rewriter.rewrite` (default rules).
A side that fails to write its file is shown as failed and not timed. The same process then
opens the file in an onnxruntime session at ORT_ENABLE_ALL writing what onnxruntime itself
makes of it (`optimized_model_filepath`; onnxruntime warns that a model with NCHWc layout
operators may not run elsewhere, which is not a concern here), whose nodes are counted
("after onnxruntime"; subgraphs included, as are the files' own node counts).

Timing: each (file, runtime level) runs in a fresh interpreter (`common.run_sides_alternating`,
the files and levels alternating, the order reversed every other round), `--runs` rounds
(default 3): onnxruntime's CPUExecutionProvider, intra_op_num_threads = inter_op_num_threads
= 1, at two levels: ORT_ENABLE_ALL (what users get by default) and ORT_DISABLE_ALL (a
runtime doing no graph work of its own). The child times the session's creation from the
file ("session ms"), makes 3 warm-up runs (the first one's outputs are compared with the
original's), then calls `session.run(None, feeds)` in batches of at least `BATCH_SECONDS`
(10 ms) until `--budget` seconds (default 0.3) have passed, at least 3 batches; a batch's
time divided by its runs is one sample. The tables show min and median per run over the
samples of all the children of that file and level, in ms, and the ratios of both to the
original's and to ort-extended's at the same level (min to min, median to median). The
run includes onnxruntime's Python binding's per-call work (a few µs), the same for every
file. Numerics: each child compares its outputs with the original's under ORT_DISABLE_ALL
on the same inputs (rtol = atol = 1e-4); the largest abs difference over the children is
shown, and a mismatch is marked, not hidden.

There is no goal: the tables show ratios, and a summary line per model says which file ran
fastest at each level. The exit status is 1 when ge fails to write a model or its output
differs from the original's. With the defaults a run takes about 4 minutes on 2 shared
cores (222-271 s measured), of which 1.5-2 minutes are onnxscript optimising the two
encoders (both at once); `--quick` takes about 6 s.

Run: `make bench` or `.venv/bin/python benchmarks/bench_inference.py [--runs R]
[--budget S] [--nodes N] [--only NAME]... [--model PATH[:INPUTS.npz]]... [--no-defaults]
[--dim NAME=SIZE]... [--quick]`.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import min_median, print_columns, run_child, run_sides_alternating

# onnx, bench_compile and bench_fusions (which import onnx) are imported where they are
# used: a timing child imports numpy and onnxruntime only (0.15 s instead of 0.8 s, most of
# it ml_dtypes, so the 200-odd children of a default run start 2 minutes sooner in all)

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
VENDORED = ("vit_tiny", "distilbert_tiny", "distilbert_tiny_dynamo", "t5_encoder_tiny",
            "mobilenet_like", "mobilenet_like_bn", "gelu_mlp_opset20")
OPSET = 20  # bench_fusions.OPSET, the encoder's second opset
ENCODERS = ("encoder", f"encoder_opset{OPSET}")
DEFAULT_NODES, DEFAULT_RUNS, DEFAULT_BUDGET = 10_000, 3, 0.3
QUICK_MODELS, QUICK_RUNS, QUICK_BUDGET = ("distilbert_tiny",), 1, 0.1
DEFAULT_DIM = 2
WARMUP, BATCH_SECONDS, MIN_BATCHES = 3, 0.010, 3
RTOL = ATOL = 1e-4
FILES = ("original", "ge", "ort-extended", "onnxscript")
FILE_NAMES = {
    "original": "the model file",
    "ge": "ge.compile + save",
    "ort-extended": "onnxruntime's ORT_ENABLE_EXTENDED offline optimisation",
    "onnxscript": "onnxscript optimize + rewrite",
}
LEVELS = {"ENABLE_ALL": "ORT_ENABLE_ALL", "DISABLE_ALL": "ORT_DISABLE_ALL"}


# -- children: one process each ------------------------------------------------------------
def session_options(level: str, saved: str | None = None):
    """onnxruntime options of every session here: one thread, `level`, quiet."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, LEVELS[level])
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only (not the NCHWc warning of a saved model)
    if saved:
        options.optimized_model_filepath = saved
    return options


def child_prepare(side: str, source: str, target: str, after_ort: str) -> dict:
    """Write `side`'s file of `source` to `target` (the original is `source` itself), then
    what onnxruntime makes of it at ENABLE_ALL to `after_ort`."""
    import onnxruntime as ort
    from bench_fusions import child_nodes

    seconds = 0.0
    if side != "original":
        seconds = child_nodes(side, source, target)["seconds"]
    else:
        target = source
    ort.InferenceSession(target, session_options("ENABLE_ALL", after_ort),
                         providers=["CPUExecutionProvider"])
    return {"seconds": seconds}


def child_time(path: str, level: str, feeds_npz: str, expected_npz: str, budget: str) -> dict:
    """Create a session of `path` at `level`, check its outputs, time its runs."""
    import onnxruntime as ort

    with np.load(feeds_npz) as data:
        feeds = {name: data[name] for name in data.files}
    with np.load(expected_npz) as data:
        expected = {name: data[name] for name in data.files}
    options = session_options(level)
    begin = time.perf_counter()
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    create = time.perf_counter() - begin
    names = [output.name for output in session.get_outputs()]
    warmup = []
    for _ in range(WARMUP):
        start = time.perf_counter()
        outputs = session.run(None, feeds)
        warmup.append(time.perf_counter() - start)
        if len(warmup) == 1:
            diff, ok, error = compare(dict(zip(names, outputs)), expected)
    per_batch = max(1, math.ceil(BATCH_SECONDS / max(min(warmup[1:]), 1e-7)))
    samples: list[float] = []
    end = time.perf_counter() + float(budget)
    while time.perf_counter() < end or len(samples) < MIN_BATCHES:
        start = time.perf_counter()
        for _ in range(per_batch):
            session.run(None, feeds)
        samples.append((time.perf_counter() - start) / per_batch)
    return {"seconds": time.perf_counter() - begin, "create": create, "samples": samples,
            "per_batch": per_batch, "max_abs_diff": diff, "ok": ok, "mismatch": error}


def compare(actual: dict[str, np.ndarray],
            expected: dict[str, np.ndarray]) -> tuple[float | None, bool, str]:
    """(max abs diff, within rtol/atol, what differs) of `actual` against `expected`."""
    worst, ok = 0.0, True
    for name, want in expected.items():
        got = actual.get(name)
        if got is None:
            return None, False, f"output {name} missing (has {sorted(actual)})"
        if got.shape != want.shape:
            return None, False, f"output {name}: shape {list(got.shape)}, not {list(want.shape)}"
        if got.size:
            diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
            worst = max(worst, float(np.nanmax(diff)) if not np.isnan(diff).all() else 0.0)
        ok = ok and bool(np.allclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True))
    return worst, ok, "" if ok else f"outputs differ beyond rtol={RTOL:g}, atol={ATOL:g}"


# -- inputs ----------------------------------------------------------------------------------
def input_specs(path: Path, dims: dict[str, int],
                sidecar: bool) -> list[tuple[str, tuple[int, ...], np.dtype, str]]:
    """(name, shape, dtype, note) of each graph input: from the .json sidecar beside a
    vendored model, else from the model's input types."""
    def size(dim: int | str | None) -> int:
        return dim if isinstance(dim, int) and dim > 0 else dims.get(str(dim), DEFAULT_DIM)

    import onnx
    from onnx import helper

    if sidecar:
        inputs = json.loads(path.with_suffix(".json").read_text())["inputs"]
        return [(i["name"], tuple(size(d) for d in i["shape"]), np.dtype(i["dtype"]),
                 i.get("note", "")) for i in inputs]
    model = onnx.load(path, load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    specs = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        shape = tuple(size(d.dim_value if d.HasField("dim_value") else
                           d.dim_param if d.HasField("dim_param") else None)
                      for d in tensor.shape.dim)
        specs.append((value.name, shape, np.dtype(helper.tensor_dtype_to_np_dtype(
            tensor.elem_type)), ""))
    return specs


def make_feeds(path: Path, dims: dict[str, int], sidecar: bool,
               seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, shape, dtype, note in input_specs(path, dims, sidecar):
        if np.issubdtype(dtype, np.floating):
            feeds[name] = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            feeds[name] = rng.random(shape) < 0.5
        elif "mask" in name.lower():
            feeds[name] = np.ones(shape, dtype)
        else:
            vocab = re.search(r"\[0, (\d+)\)", note)
            feeds[name] = rng.integers(0, int(vocab.group(1)) if vocab else 4,
                                       shape).astype(dtype)
    return feeds


# -- the comparison --------------------------------------------------------------------------
@dataclass
class Model:
    label: str
    source: Path
    feeds: dict[str, np.ndarray] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)  # the sides that wrote one
    nodes: dict[str, int] = field(default_factory=dict)
    after_ort: dict[str, int] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # side -> why
    reports: dict[str, list[dict]] = field(default_factory=dict)  # "side@level" -> children


def error_tail(error: Exception) -> str:
    text = (getattr(error, "stderr", None) or str(error)).strip().splitlines()
    return "\n".join(text[-15:]) or type(error).__name__


def prepare(model: Model, side: str, folder: Path) -> None:
    """Make `side`'s file of `model` and count its nodes and onnxruntime's (one child)."""
    import onnx
    from bench_fusions import CHILD_ENV, op_counts

    stem = f"{model.label}.{side}"
    target = model.source if side == "original" else folder / f"{stem}.onnx"
    after = folder / f"{stem}.after_ort.onnx"
    try:
        out = run_child(__file__, "prepare", side, str(model.source), str(target), str(after),
                        env=CHILD_ENV)
        model.nodes[side] = sum(op_counts(onnx.load(target).graph).values())
        model.after_ort[side] = sum(op_counts(onnx.load(after).graph).values())
    except Exception as error:  # the side is shown as failed, the others go on
        model.failed[side] = error_tail(error)
        print(f"{model.label:<24} {FILE_NAMES[side]:<36} FAILED: "
              f"{model.failed[side].splitlines()[-1]}", flush=True)
        return
    model.files[side] = target
    shown = "" if side == "original" else f" written in {out['seconds']:.2f} s,"
    print(f"{model.label:<24} {FILE_NAMES[side]:<36}{shown} {model.nodes[side]:,} nodes, "
          f"{model.after_ort[side]:,} after onnxruntime ENABLE_ALL", flush=True)


def measure(model: Model, runs: int, budget: float, folder: Path) -> None:
    from bench_compile import run_ort

    feeds_npz = folder / f"{model.label}.feeds.npz"
    expected_npz = folder / f"{model.label}.expected.npz"
    np.savez(feeds_npz, **model.feeds)
    np.savez(expected_npz, **run_ort(model.source, model.feeds))
    sides = [f"{side}@{level}" for level in LEVELS for side in FILES if side in model.files]

    def args(key: str) -> list[str]:
        side, level = key.split("@")
        return ["time", str(model.files[side]), level, str(feeds_npz), str(expected_npz),
                str(budget)]

    model.reports = run_sides_alternating(__file__, sides, args, runs,
                                          label=f"{model.label:<24} ")


def stats(model: Model, side: str, level: str) -> dict | None:
    """min / median per run (s) over all samples, session creation min / median, the worst
    numeric difference of the children of `side` at `level`; None if it failed."""
    reports = model.reports.get(f"{side}@{level}", [])
    if not reports or any("error" in r for r in reports):
        return None
    samples = [s for r in reports for s in r["samples"]]
    diffs = [r["max_abs_diff"] for r in reports]
    return {"run": min_median(samples), "create": min_median([r["create"] for r in reports]),
            "diff": None if None in diffs else max(diffs),
            "ok": all(r["ok"] for r in reports),
            "mismatch": next((r["mismatch"] for r in reports if r["mismatch"]), "")}


def ratio(a: dict | None, b: dict | None) -> str:
    if a is None or b is None:
        return "n/a"
    return f"{a['run'][0] / b['run'][0]:.2f} / {a['run'][1] / b['run'][1]:.2f}x"


def print_model(model: Model, runs: int) -> bool:
    """The model's table and summary line; True when ge wrote a file whose outputs match."""
    table = {(s, lv): stats(model, s, lv) for s in FILES for lv in LEVELS}
    rows = []
    for level in LEVELS:
        for side in FILES:
            if side in model.failed:
                rows.append([side, level, "failed", *["n/a"] * 5, "[red]no[/red]"])
                continue
            nodes = f"{model.nodes[side]:,}"
            if level == "ENABLE_ALL":  # what onnxruntime runs: its own optimisation of the file
                nodes += f" → {model.after_ort[side]:,}"
            got = table[(side, level)]
            if got is None:
                rows.append([side, level, nodes, *["failed"] * 2, *["n/a"] * 3,
                             "[red]no[/red]"])
                continue
            rows.append([side, level, nodes,
                         f"{got['create'][0] * 1e3:.0f} / {got['create'][1] * 1e3:.0f}",
                         f"{got['run'][0] * 1e3:.3f} / {got['run'][1] * 1e3:.3f}",
                         ratio(got, table[("original", level)]),
                         ratio(got, table[("ort-extended", level)]),
                         "n/a" if got["diff"] is None else f"{got['diff']:.1e}",
                         "[green]yes[/green]" if got["ok"] else "[red]no[/red]"])
    print_columns(
        f"Running {model.label} ({model.nodes.get('original', 0):,} nodes) in onnxruntime: "
        f"CPU, 1 thread, {runs} fresh process(es) per file and level",
        ["file", "runtime level", "nodes (file → onnxruntime's)", "session ms (min / median)",
         "run ms (min / median)", "÷ original (min / median)", "÷ ort-extended",
         "max abs diff", f"ok (rtol=atol={RTOL:g})"], rows,
        caption="ratios min to min / median to median; outputs against the original's under "
                "ORT_DISABLE_ALL")
    for side, why in model.failed.items():
        print(f"{FILE_NAMES[side]} FAILED on {model.label}:\n  " + why.replace("\n", "\n  "))
    for (side, level), got in table.items():
        reports = model.reports.get(f"{side}@{level}", [])
        errors = [r["error"] for r in reports if "error" in r]
        if errors:
            print(f"{FILE_NAMES[side]} at {level} FAILED on {model.label}:\n  "
                  + errors[0].replace("\n", "\n  "))
        elif got is not None and got["mismatch"]:
            print(f"{FILE_NAMES[side]} at {level} on {model.label}: {got['mismatch']} "
                  f"(max abs diff {got['diff']})")
    return "ge" in model.files and all(
        table[("ge", level)] is not None and table[("ge", level)]["ok"] for level in LEVELS)


def summary(model: Model) -> str:
    """One line: ge's ratios to the original and to ort-extended at each level (min /
    median), and the file with the fastest median run at each level."""
    table = {(s, lv): stats(model, s, lv) for s in FILES for lv in LEVELS}
    parts = []
    for peer in ("original", "ort-extended"):
        parts.append(f"ge ÷ {peer} " + ", ".join(
            f"{level} {ratio(table[('ge', level)], table[(peer, level)])}" for level in LEVELS))
    fastest = []
    for level in LEVELS:
        timed = {s: table[(s, level)] for s in FILES if table[(s, level)] is not None}
        if timed:
            fastest.append(f"{level} {min(timed, key=lambda s: timed[s]['run'][1])}")
    return (f"{model.label}: " + "; ".join(parts)
            + f"; fastest median: {', '.join(fastest) or 'n/a'}")


def parse_model(spec: str) -> tuple[Path, Path | None]:
    """`PATH[:INPUTS.npz]`."""
    path, sep, npz = spec.rpartition(":")
    if sep and npz.endswith(".npz"):
        return Path(path), Path(npz)
    return Path(spec), None


def parse_dims(specs: list[str]) -> dict[str, int]:
    dims = {}
    for spec in specs:
        name, sep, size = spec.partition("=")
        if not sep or not size.isdigit():
            raise SystemExit(f"--dim takes NAME=SIZE, not {spec!r}")
        dims[name] = int(size)
    return dims


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=None,
                        help=f"fresh processes per file and level (default {DEFAULT_RUNS}, "
                             f"{QUICK_RUNS} with --quick)")
    parser.add_argument("--budget", type=float, default=None,
                        help=f"seconds of timed runs per process (default {DEFAULT_BUDGET}, "
                             f"{QUICK_BUDGET} with --quick)")
    parser.add_argument("--nodes", type=int, default=DEFAULT_NODES,
                        help=f"minimum nodes of the generated encoder (default {DEFAULT_NODES:,})")
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help=f"keep this default model (repeatable): {', '.join(VENDORED)}, "
                             f"{', '.join(ENCODERS)}")
    parser.add_argument("--model", action="append", default=[], metavar="PATH[:INPUTS.npz]",
                        help="add a model file, with its inputs from an .npz (repeatable)")
    parser.add_argument("--no-defaults", action="store_true",
                        help="time the --model files only, none of the default models")
    parser.add_argument("--dim", action="append", default=[], metavar="NAME=SIZE",
                        help=f"size of a symbolic dim of an added model's inputs (default "
                             f"{DEFAULT_DIM})")
    parser.add_argument("--quick", action="store_true",
                        help=f"a smoke run: {', '.join(QUICK_MODELS)} only (unless --only or "
                             f"--model), {QUICK_RUNS} run, {QUICK_BUDGET} s per process")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        print(json.dumps(child_prepare(*rest) if kind == "prepare" else child_time(*rest)))
        return 0
    import onnx
    import onnx.version_converter
    from bench_compile import make_encoder_model
    from bench_fusions import OPSET as FUSIONS_OPSET

    assert FUSIONS_OPSET == OPSET
    began = time.perf_counter()
    runs = args.runs or (QUICK_RUNS if args.quick else DEFAULT_RUNS)
    budget = args.budget or (QUICK_BUDGET if args.quick else DEFAULT_BUDGET)
    dims = parse_dims(args.dim)
    unknown = set(args.only) - set(VENDORED) - set(ENCODERS)
    if unknown:
        parser.error(f"--only takes {', '.join(VENDORED + ENCODERS)}; not {sorted(unknown)}")
    if args.no_defaults and (args.only or not args.model):
        parser.error("--no-defaults takes --model and no --only")
    chosen = args.only or ([] if args.no_defaults or (args.quick and args.model)
                           else list(QUICK_MODELS) if args.quick else [*VENDORED, *ENCODERS])
    status = 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        models = [Model(name, MODELS / f"{name}.onnx") for name in VENDORED if name in chosen]
        if set(ENCODERS) & set(chosen):
            proto = make_encoder_model(args.nodes)
            for name, model in ((ENCODERS[0], proto), (ENCODERS[1], onnx.version_converter
                                                        .convert_version(proto, OPSET))):
                if name in chosen:
                    onnx.checker.check_model(model)
                    onnx.save(model, folder / f"{name}.onnx")
                    models.append(Model(name, folder / f"{name}.onnx"))
            print(f"encoder: make_encoder_model({args.nodes}) at opset 17, "
                  f"{len(proto.graph.node):,} nodes; encoder_opset{OPSET}: converted with "
                  f"onnx.version_converter")
        labels = {m.label for m in models}
        for spec in args.model:
            path, npz = parse_model(spec)
            for given in (path, npz):
                if given is not None and not given.is_file():
                    parser.error(f"--model {spec}: no file {given}")
            label = path.stem
            while label in labels:
                label += "_"
            labels.add(label)
            model = Model(label, path.resolve())
            if npz is not None:
                with np.load(npz) as data:
                    model.feeds = {name: data[name] for name in data.files}
            models.append(model)
        for model in models:
            if not model.feeds:
                model.feeds = make_feeds(model.source, dims,
                                         sidecar=model.source.parent == MODELS)
        # the files, two processes at a time, the slowest (largest sources) first
        jobs = sorted(((m, s) for m in models for s in FILES),
                      key=lambda job: -job[0].source.stat().st_size)
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(lambda job: prepare(job[0], job[1], folder), jobs))
        print("files: " + "; ".join(f"{s}: {n}" for s, n in FILE_NAMES.items()))
        print(f"files written in {time.perf_counter() - began:.0f} s; timing "
              f"{runs} round(s), {budget:g} s of runs per process", flush=True)
        for model in models:
            if "original" in model.files:
                measure(model, runs, budget, folder)
        for model in models:
            if "original" not in model.files:
                print(f"{model.label}: the original could not be opened:\n  "
                      + model.failed["original"].replace("\n", "\n  "))
                status = 1
            elif not print_model(model, runs):
                status = 1
        print("Summary (ratios min / median):")
        for model in models:
            if "original" in model.files:
                print("  " + summary(model))
    print(f"wall time: {time.perf_counter() - began:.0f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
