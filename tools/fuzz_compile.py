"""Differential fuzzer of `ge.compile`: random small ONNX models, compiled with every built-in
pass, must save, pass the strict checker, load back, keep their outputs and compute the same
values in onnxruntime as the original.

    .venv/bin/python tools/fuzz_compile.py --seeds 0:500 [--ops Add,Mul] [--keep DIR] [--jobs N]
        [--dims mixed|static|symbolic]  # symbolic input dims: on 1 seed in 8 (mixed), all, none
        [--functions mixed|every|none]  # model-local functions: on 1 seed in 8, all, none
        [--inline both|keep|inline|all]  # a model with functions: compiled as it is,
                                         # inlined, both; all: with --opset 24 too
        [--minimise]  # with --keep: also DIR/seed_N.min.onnx + .npz, cut down to the finding
        [--stats]     # the op and form histogram of the seeds' models, nothing compiled

A model that onnxruntime cannot load or run in its original form is skipped, not a finding.
A model with symbolic dims (`tools/fuzz_dims.py`, `tools/fuzz_symbolic.py`) is compiled
once and run at several sizes of its symbols: a size where the original fails to run is
skipped, one where the compiled model fails, computes other values or shapes, or outputs a
shape contradicting its declared dims, is a finding (its message says at which sizes).
A model with local functions (`tools/fuzz_functions.py`) is compiled twice by default: as
it is and with `inline_functions` (`ge compile --inline-functions`); a finding of the
second says "inlined:" (`--inline all`: also both with `opset=24`, 21 for a model with
random operators, "opset:" and "inlined+opset:"; ge's refusal to convert is no finding).
The models come from `tools/fuzz_models.py` (one per seed, deterministic); `fuzz_seed(seed)`
and `check_model(model, feeds)` are what tests call."""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

import ge
import ge.errors
import ge.graph

# `tools/` is not a package: its modules import each other by name (as when this file runs
# as a script), also when a test loads this file by path.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import fuzz_functions
import fuzz_models
import fuzz_symbolic

#: The generator names --ops accepts: the static ones, the symbolic ones, the functions'.
KNOWN_OPS = [*fuzz_models.GENERATORS, *fuzz_symbolic.SYMBOLIC, *fuzz_functions.FUNCTIONS]
#: How a model with local functions is compiled: as it is, inlined first, both ways, or
#: both ways and both again converted to the newest opset.
INLINE_MODES = ("both", "keep", "inline", "all")
#: The compilations of a model with functions: name -> `ge.compile` options (besides
#: every built-in pass), in the order they run; "" is the plain one.
VARIANTS: dict[str, dict[str, Any]] = {
    "": {}, "inlined": {"inline_functions": True}, "opset": {"opset": "newest"},
    "inlined+opset": {"inline_functions": True, "opset": "newest"}}
#: onnxruntime implements these up to opset 21 only (their opset 22 versions not at all):
#: a model with them is converted to 21, not to the newest opset
RANDOM_LIKE = frozenset({"RandomNormalLike", "RandomUniformLike", "RandomNormal",
                         "RandomUniform", "Bernoulli", "Multinomial"})
#: Which variants each --inline mode runs.
MODE_VARIANTS = {"keep": ("",), "inline": ("inlined",), "both": ("", "inlined"),
                 "all": tuple(VARIANTS)}
RTOL = ATOL = 1e-4
#: Narrow float outputs: one rounding flip of a value cast to them is an ulp (float16's is
#: 2^-11 relative, about 5e-4 near 1), more than RTOL: two ulps allowed.
NARROW_TOL = {np.dtype(np.float16): 2e-3}
#: The checks, in the order they run; a finding's kind is the first that failed.
KINDS = ("generator", "ge-error", "crash", "save", "checker", "reload", "outputs",
         "ort-compiled", "numerics", "shapes", "timeout")
CompileFn = Callable[[str], Any]  # path -> something with .save(path)


@dataclass
class FuzzOutcome:
    """What one seed gave: status "ok", "skipped" or "finding"; kind says which check (for a
    skip, why); message is one short line."""

    seed: int
    status: str
    kind: str = ""
    message: str = ""
    warnings: tuple[str, ...] = ()
    model: onnx.ModelProto | None = field(default=None, repr=False, compare=False)
    #: the passes that changed the graph (from the compile report, when there is one)
    changed: tuple[str, ...] = ()
    #: a symbolic model's finding: the label of the sizes it showed at ("B=1,S=1")
    at: str = ""
    #: the compilation the finding is of (`VARIANTS`: "inlined" with `inline_functions`)
    variant: str = ""


def _session(model: onnx.ModelProto | str) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    options.intra_op_num_threads = 1
    source = model if isinstance(model, str) else model.SerializeToString()
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def run_ort(model: onnx.ModelProto | str, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The outputs of `model` in onnxruntime (CPU, no graph optimisations), in graph order."""
    session = _session(model)
    names = [o.name for o in session.get_outputs()]
    return session.run(names, feeds)


def compare(expected: list[np.ndarray], actual: list[np.ndarray], names: list[str]) -> str:
    """'' when the outputs agree (floats within RTOL/ATOL, float16 within NARROW_TOL, NaN
    equal to NaN, the rest exact), else a short description of the first difference."""
    if len(expected) != len(actual):
        return f"{len(actual)} outputs, expected {len(expected)}"
    for name, e, a in zip(names, expected, actual):
        e, a = np.asarray(e), np.asarray(a)
        if e.dtype != a.dtype or e.shape != a.shape:
            return f"output {name}: {a.dtype}{list(a.shape)}, expected {e.dtype}{list(e.shape)}"
        if np.issubdtype(e.dtype, np.floating):
            tol = NARROW_TOL.get(e.dtype, RTOL)
            bad = ~np.isclose(a, e, rtol=tol, atol=max(tol, ATOL), equal_nan=True)
        else:
            bad = a != e
        if bad.any():
            i = tuple(int(j) for j in np.argwhere(bad)[0])
            return (f"output {name}: {int(bad.sum())}/{e.size} differ, at {list(i)} "
                    f"{a[i]!r} vs expected {e[i]!r}")
    return ""


def _short(err: BaseException) -> str:
    text = " ".join(f"{type(err).__name__}: {err}".split())
    return text if len(text) <= 300 else text[:297] + "..."


class Refused(Exception):
    """ge refused a conversion asked of it, as documented (a variant's `opset` that would
    convert a local function, or that onnx's converter cannot do): no finding."""


def _compile_with_every_builtin(path: str, **options: Any) -> Any:
    """`ge.compile` with the built-in passes that are off by default enabled too: they are
    shipped code, fuzzed like the rest; with `options` (`VARIANTS`) if given."""
    import ge.compiler.builtin

    off = [cls.__ge_builtin__.name for cls in ge.compiler.builtin.BUILTIN_PASSES
           if not cls.__ge_builtin__.on_by_default]
    if "opset" in options:
        model = onnx.load(path, load_external_data=False)
        ops = {n.op_type for n in _all_nodes(model.graph.node)} | {
            n.op_type for f in model.functions for n in _all_nodes(f.node)}
        opset = 21 if ops & RANDOM_LIKE else max(fuzz_models.OPSETS)
        options = {**options, "opset": opset}
        if max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
               default=0) >= opset:
            raise Refused("the model is at that opset already")
        try:
            return ge.compile(path, enable=off, **options)
        except (ge.errors.CompileInputError, ge.errors.CompilerOptionError) as err:
            raise Refused(_short(err)) from err
    return ge.compile(path, enable=off, **options)


def variant_compiler(variant: str) -> CompileFn | None:
    """The compile function of a variant (`VARIANTS`); None for the plain one."""
    if not variant:
        return None
    return lambda path: _compile_with_every_builtin(path, **VARIANTS[variant])


def declared_mismatch(model: onnx.ModelProto, outputs: list[np.ndarray]) -> str:
    """'' when each output's shape fits the dims its graph output declares (a number must
    match, a symbol is the same size in every output), else the first contradiction."""
    bound: dict[str, int] = {}
    for info, value in zip(model.graph.output, outputs):
        if not info.type.tensor_type.HasField("shape"):
            continue
        dims = info.type.tensor_type.shape.dim
        shape = np.shape(value)
        if len(dims) != len(shape):
            return f"output {info.name}: rank {len(shape)}, declared {len(dims)}"
        for dim, n in zip(dims, shape):
            if dim.HasField("dim_value") and dim.dim_value != n:
                return f"output {info.name}: shape {list(shape)}, declared dim {dim.dim_value}"
            if dim.HasField("dim_param") and bound.setdefault(dim.dim_param, n) != n:
                return (f"output {info.name}: shape {list(shape)}, declared {dim.dim_param}"
                        f" = {bound[dim.dim_param]} elsewhere")
    return ""


def fuzz_seed(seed: int, ops: set[str] | None = None,
              compile_fn: CompileFn | None = None, dims: str = "mixed",
              functions: str = "mixed", inline: str = "both") -> FuzzOutcome:
    """Build the model of `seed`, compile it (`ge.compile` unless `compile_fn` is given: a
    function of a model path returning something with `.save(path)`) and check the result;
    `dims` says which seeds' models have symbolic dims (`fuzz_models.is_symbolic`),
    `functions` which define local functions (`fuzz_models.has_functions`); `inline`
    (`INLINE_MODES`) how those are compiled by `ge.compile`: as they are, with
    `inline_functions`, or both (the inlined compilation only when the other is right)."""
    try:
        fm = _build(seed, ops, dims, functions)
    except Exception as err:  # a fuzzer bug: reported, never hidden
        return FuzzOutcome(seed, "finding", "generator", _short(err))
    if not fm.model.functions or compile_fn is not None:
        return check_model(fm.model, fm.inputs, seed, compile_fn, fm.sizes)
    outcome: FuzzOutcome | None = None
    for variant in MODE_VARIANTS[inline]:
        got = check_model(fm.model, fm.inputs, seed, variant_compiler(variant), fm.sizes)
        if got.status == "skipped" and got.kind == "refused" and outcome is not None:
            continue  # (a conversion ge refuses: the other variants stand)
        if got.status == "finding":
            got.variant = variant
            got.message = f"{variant}: {got.message}" if variant else got.message
        if got.status != "ok":
            return got
        if outcome is not None:
            got.changed = tuple(dict.fromkeys([*outcome.changed, *got.changed]))
            got.warnings = tuple(dict.fromkeys([*outcome.warnings, *got.warnings]))
        outcome = got
    assert outcome is not None
    return outcome


def check_model(model: onnx.ModelProto, feeds: dict[str, np.ndarray], seed: int = -1,
                compile_fn: CompileFn | None = None,
                sizes: Sequence[tuple[str, dict[str, np.ndarray]]] = ()) -> FuzzOutcome:
    """Compile `model` and run every check on it with `feeds` (see `fuzz_seed`), or with
    each of the labelled inputs of `sizes` (a symbolic model's, the first in place of
    `feeds`): sizes where the original does not run are skipped."""
    runs = list(sizes) or [("", feeds)]

    def finding(kind: str, message: str, notes: tuple[str, ...] = (), at: str = ""
                ) -> FuzzOutcome:
        where = f"at {at}: " if at else ""
        return FuzzOutcome(seed, "finding", kind, where + message, notes, model, at=at)

    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as err:  # the generator made an invalid model
        return FuzzOutcome(seed, "skipped", "invalid-original", _short(err), model=model)
    expected: list[tuple[str, dict[str, np.ndarray], list[np.ndarray]]] = []
    try:
        session = _session(model)
        out_names = [o.name for o in session.get_outputs()]
        for i, (label, inputs) in enumerate(runs):
            try:
                expected.append((label, inputs, session.run(out_names, inputs)))
            except Exception:
                if i == 0:  # the first size must run: the others may not (a Slice to 0)
                    raise
    except Exception as err:
        return FuzzOutcome(seed, "skipped", "ort-original", _short(err), model=model)
    for label, _, values in expected:
        mismatch = declared_mismatch(model, values)
        if mismatch:  # the generator declared a wrong output shape
            return finding("generator", mismatch, at=label)
    names = [o.name for o in model.graph.output]
    if compile_fn is None:  # looked up now: a test may patch ge.compile
        compile_fn = _compile_with_every_builtin
    with tempfile.TemporaryDirectory(prefix=f"fuzz_{seed}_") as tmp:
        original, compiled = f"{tmp}/original.onnx", f"{tmp}/compiled.onnx"
        onnx.save(model, original)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                result = compile_fn(original)
            except Refused as err:
                return FuzzOutcome(seed, "skipped", "refused", _short(err), model=model)
            except ge.errors.GeError as err:
                return finding("ge-error", _short(err))
            except Exception as err:
                return finding("crash", _short(err))
        notes = tuple(dict.fromkeys(_short(w.message) for w in caught))  # type: ignore[arg-type]
        try:
            result.save(compiled)
        except Exception as err:
            return finding("save", _short(err), notes)
        try:
            onnx.checker.check_model(compiled, full_check=True)
        except Exception as err:
            return finding("checker", _short(err), notes)
        try:
            ge.graph.load(compiled)
        except Exception as err:
            return finding("reload", _short(err), notes)
        compiled_model = onnx.load(compiled)
        got = [o.name for o in compiled_model.graph.output]
        if got != names:
            return finding("outputs", f"outputs {got}, expected {names}", notes)
        actual: list[list[np.ndarray]] = []
        running = expected[0][0]  # the sizes being run (a failure is reported at them)
        try:
            session = _session(compiled)
            for label, inputs, _ in expected:
                running = label
                actual.append(session.run(out_names, inputs))
        except Exception as err:
            return finding("ort-compiled", _short(err), notes, running)
    for (label, _, want), got_values in zip(expected, actual):
        diff = compare(want, got_values, names)
        if diff:
            return finding("numerics", diff, notes, label)
    for (label, _, _), got_values in zip(expected, actual):
        mismatch = declared_mismatch(compiled_model, got_values)
        if mismatch:
            return finding("shapes", mismatch, notes, label)
    report = getattr(result, "report", None)
    changed = tuple(dict.fromkeys(r.pass_name for r in getattr(report, "records", ())
                                  if r.changed))
    return FuzzOutcome(seed, "ok", warnings=notes, changed=changed)


def _subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    """The bodies a node owns (If branches, a Loop body)."""
    return [g for a in node.attribute for g in ([a.g] if a.HasField("g") else [*a.graphs])]


def _reads(node: onnx.NodeProto) -> set[str]:
    """The names `node` reads: its inputs and every name its bodies read (outer-scope reads
    among them; a few of the body's own names too, which is harmless here)."""
    names = set(node.input)
    for graph in _subgraphs(node):
        for inner in graph.node:
            names |= _reads(inner)
    return names


def _all_nodes(nodes: Iterable[onnx.NodeProto]) -> Iterable[onnx.NodeProto]:
    """`nodes` and the nodes of their bodies, at every depth."""
    for node in nodes:
        yield node
        for graph in _subgraphs(node):
            yield from _all_nodes(graph.node)


def _pruned_node(node: onnx.NodeProto) -> onnx.NodeProto:
    """`node` with the nodes and initializers that its bodies' outputs do not need dropped."""
    if not _subgraphs(node):
        return node
    out = onnx.NodeProto()
    out.CopyFrom(node)
    for graph in _subgraphs(out):
        needed = {o.name for o in graph.output}
        keep = []
        for inner in reversed(graph.node):
            if any(o in needed for o in inner.output):
                keep.append(_pruned_node(inner))
                needed.update(_reads(keep[-1]))
        del graph.node[:]
        graph.node.extend(reversed(keep))
        for field_name in ("initializer", "value_info"):
            items = [t for t in getattr(graph, field_name) if t.name in needed]
            del getattr(graph, field_name)[:]
            getattr(graph, field_name).extend(items)
    return out


def _prune(model: onnx.ModelProto, feeds: dict[str, np.ndarray], nodes: bool = True
           ) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Drop the nodes (unless told; in bodies too), initializers and inputs that no graph
    output needs."""
    graph = model.graph
    needed = {o.name for o in graph.output}
    keep = []
    for node in reversed(graph.node):
        if not nodes or any(o in needed for o in node.output):
            keep.append(_pruned_node(node) if nodes else node)
            needed.update(_reads(keep[-1]))
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(reversed(keep))
    inputs = {i.name for i in graph.input}
    for field_name in ("initializer", "input", "value_info"):
        items = [t for t in getattr(graph, field_name)
                 if t.name in needed and (field_name != "value_info" or t.name not in inputs)]
        del getattr(out.graph, field_name)[:]
        getattr(out.graph, field_name).extend(items)
    return out, {k: v for k, v in feeds.items() if k in needed}


def _cut(model: onnx.ModelProto, feeds: dict[str, np.ndarray], index: int
         ) -> tuple[onnx.ModelProto, dict[str, np.ndarray]] | None:
    """Node `index` replaced by graph inputs holding the values it computed on `feeds`."""
    node = model.graph.node[index]
    try:
        typed = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        types = {v.name: v.type for v in [*typed.graph.value_info, *typed.graph.output]}
        probe = onnx.ModelProto()
        probe.CopyFrom(model)
        del probe.graph.output[:]
        probe.graph.output.extend(onnx.helper.make_value_info(o, types[o]) for o in node.output)
        values = run_ort(probe, feeds)
    except Exception:
        return None
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[index]
    new_feeds = dict(feeds)
    for name, value in zip(node.output, values):
        out.graph.input.append(onnx.helper.make_tensor_value_info(
            name, types[name].tensor_type.elem_type, value.shape))
        new_feeds[name] = value
    kept = [v for v in out.graph.value_info if v.name not in node.output]
    del out.graph.value_info[:]
    out.graph.value_info.extend(kept)
    return out, new_feeds


def minimise(model: onnx.ModelProto, feeds: dict[str, np.ndarray], kind: str,
             compile_fn: CompileFn | None = None
             ) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A smaller model (and its feeds) with a finding of the same kind: outputs dropped and
    nodes cut off (the values they computed become inputs) while the finding stays."""

    Model = tuple[onnx.ModelProto, dict[str, np.ndarray]]

    def smaller(candidate: Model | None) -> Model | None:
        """The candidate without its dead nodes, or as it is, if it keeps the finding."""
        options = (_prune(*candidate), _prune(*candidate, nodes=False)) if candidate else ()
        for option in options:
            outcome = check_model(*option, compile_fn=compile_fn)
            if outcome.status == "finding" and outcome.kind == kind:
                return option
        return None

    current = smaller((model, feeds)) or (model, feeds)
    progress = True
    while progress:
        progress = False
        for i in range(len(current[0].graph.output) - 1, -1, -1):
            if len(current[0].graph.output) < 2:
                break
            fewer = onnx.ModelProto()
            fewer.CopyFrom(current[0])
            del fewer.graph.output[i]
            found = smaller((fewer, current[1]))
            if found:
                current, progress = found, True
        for i in range(len(current[0].graph.node) - 1, -1, -1):
            if i < len(current[0].graph.node):
                found = smaller(_cut(*current, i))
                if found:
                    current, progress = found, True
    return current


def parse_seeds(text: str) -> range:
    """'A:B' is seeds A..B-1, 'N' is the one seed N."""
    if ":" in text:
        start, stop = text.split(":", 1)
        return range(int(start or 0), int(stop))
    return range(int(text), int(text) + 1)


class SeedTimeout(BaseException):
    """One seed ran past its time (a BaseException: the checks' handlers let it through)."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise SeedTimeout


def _where(err: BaseException) -> str:
    """The innermost frame of `err`'s traceback in ge (else the innermost), as file:function."""
    frames = [f for f, _ in traceback.walk_tb(err.__traceback__)]
    inside = [f for f in frames if f"{os.sep}ge{os.sep}" in f.f_code.co_filename] or frames
    if not inside:
        return "?"
    code = inside[-1].f_code
    return f"{Path(code.co_filename).name}:{code.co_name}"


def _build(seed: int, ops: set[str] | None, dims: str, functions: str = "mixed"
           ) -> fuzz_models.FuzzModel:
    return fuzz_models.build(seed, ops, fuzz_models.is_symbolic(seed, ops, dims),
                             fuzz_models.has_functions(seed, ops, functions))


#: What a worker runs: seed, ops, timeout, dims, functions, inline.
Work = tuple[int, set[str] | None, float, str, str, str]


def _fuzz_args(args: Work) -> FuzzOutcome:
    """`fuzz_seed`, stopped after `timeout` seconds (a hang in ge is a finding; one in native
    code is only noticed when it returns)."""
    seed, ops, timeout, dims, functions, inline = args
    if not timeout or not hasattr(signal, "setitimer"):
        return fuzz_seed(seed, ops, dims=dims, functions=functions, inline=inline)
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        return fuzz_seed(seed, ops, dims=dims, functions=functions, inline=inline)
    except SeedTimeout as err:
        where = _where(err)
        model = None if where.startswith("fuzz_") else _build(seed, ops, dims,
                                                                functions).model
        return FuzzOutcome(seed, "finding", "timeout", f"over {timeout:g} s, in {where}",
                           model=model)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_seeds(seeds: Iterable[int], ops: set[str] | None, jobs: int, timeout: float = 0,
              dims: str = "mixed", functions: str = "mixed", inline: str = "both"
              ) -> Iterable[FuzzOutcome]:
    """The outcome of every seed, in seed order, over `jobs` processes; a seed running over
    `timeout` seconds (if given) is a "timeout" finding."""
    work = [(s, ops, timeout, dims, functions, inline) for s in seeds]
    if jobs <= 1:
        yield from map(_fuzz_args, work)
        return
    context = multiprocessing.get_context("fork" if sys.platform != "win32" else "spawn")
    with context.Pool(jobs) as pool:
        yield from pool.imap(_fuzz_args, work, chunksize=8)


def op_histogram(seeds: Iterable[int], ops: set[str] | None, dims: str = "mixed",
                 functions: str = "mixed") -> tuple[Counter[str], Counter[str]]:
    """How often each op type (nodes of the built models, bodies and functions included)
    and each generator form occurs."""
    types: Counter[str] = Counter()
    tags: Counter[str] = Counter()
    for seed in seeds:
        fm = _build(seed, ops, dims, functions)
        types.update(n.op_type for n in _all_nodes(fm.model.graph.node))
        types["<node in a body>"] += sum(1 for _ in _all_nodes(fm.model.graph.node)) - len(
            fm.model.graph.node)
        for function in fm.model.functions:
            inside = list(_all_nodes(function.node))
            types.update(n.op_type for n in inside)
            types["<node in a function>"] += len(inside)
        types["<initializer>"] += len(fm.model.graph.initializer)
        tags.update(fm.tags)
        tags[f"opset:{fm.opset}"] += 1
    return types, tags


def _finding_inputs(outcome: FuzzOutcome, ops: set[str] | None, dims: str,
                    functions: str = "mixed") -> dict[str, np.ndarray]:
    """The inputs `outcome`'s finding showed with (a symbolic model's: at its sizes)."""
    fm = _build(outcome.seed, ops, dims, functions)
    return dict(fm.sizes).get(outcome.at, fm.inputs)


def _keep_minimised(outcome: FuzzOutcome, ops: set[str] | None, folder: Path, dims: str,
                    functions: str = "mixed") -> None:
    """Minimise at the sizes the finding showed at (its symbols stay symbolic), with the
    compilation that showed it (inlined or not)."""
    fm = _build(outcome.seed, ops, dims, functions)
    model, feeds = minimise(fm.model, _finding_inputs(outcome, ops, dims, functions),
                            outcome.kind, variant_compiler(outcome.variant))
    onnx.save(model, folder / f"seed_{outcome.seed}.min.onnx")
    np.savez(folder / f"seed_{outcome.seed}.min.npz", **feeds)  # type: ignore[arg-type]
    print(f"  minimised to {len(model.graph.node)} nodes: seed_{outcome.seed}.min.onnx")


def main(argv: list[str] | None = None) -> int:
    """The command line; 1 if any seed gave a finding."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0:500", help="A:B (B excluded) or one seed")
    parser.add_argument("--ops", help="comma-separated generator names (op types, LayerNorm, "
                        f"Gelu, ...): {', '.join(KNOWN_OPS)}")
    parser.add_argument("--keep", type=Path, help="write each finding's model as DIR/seed_N.onnx")
    parser.add_argument("--minimise", action="store_true",
                        help="with --keep, also write each finding minimised: seed_N.min.onnx "
                        "and its inputs, seed_N.min.npz")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--dims", choices=fuzz_models.DIMS_MODES, default="mixed",
                        help="symbolic input dims (run at several sizes): on one seed in "
                        f"{fuzz_models.SYMBOLIC_EVERY} (mixed), on none, on every seed")
    parser.add_argument("--functions", choices=fuzz_models.FUNCTIONS_MODES, default="mixed",
                        help="model-local functions: on one seed in "
                        f"{fuzz_models.FUNCTIONS_EVERY} (mixed; every seed if --ops names "
                        "Function or Call), on every seed, on none")
    parser.add_argument("--inline", choices=INLINE_MODES, default="both",
                        help="compile a model with functions as it is and with "
                        "--inline-functions (both), as it is only, inlined only")
    parser.add_argument("--stats", action="store_true",
                        help="print the op and form histogram of the seeds' models and exit")
    parser.add_argument("--timeout", type=float, default=120,
                        help="seconds one seed may take before it is a finding (0: no limit)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print skips too")
    args = parser.parse_args(argv)
    seeds = parse_seeds(args.seeds)
    ops = set(args.ops.split(",")) if args.ops else None
    if ops and ops - set(KNOWN_OPS):
        parser.error(f"unknown --ops {sorted(ops - set(KNOWN_OPS))}; known: "
                     f"{', '.join(KNOWN_OPS)}")
    if args.stats:
        types, tags = op_histogram(seeds, ops, args.dims, args.functions)
        for title, counts in (("op type", types), ("form", tags)):
            print(f"{title:<32} count")
            for key, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
                print(f"{key:<32} {n}")
            print()
        return 0
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    status: Counter[str] = Counter()
    kinds: Counter[tuple[str, str]] = Counter()
    warned = 0
    start = time.perf_counter()
    for outcome in run_seeds(seeds, ops, args.jobs, args.timeout, args.dims, args.functions,
                             args.inline):
        status[outcome.status] += 1
        warned += bool(outcome.warnings)
        if outcome.status != "ok":
            kinds[(outcome.status, outcome.kind)] += 1
        if outcome.status == "finding" or (args.verbose and outcome.status == "skipped"):
            print(f"seed {outcome.seed}: {outcome.status} {outcome.kind}: {outcome.message}",
                  flush=True)
            if args.keep and outcome.model is not None and outcome.status == "finding":
                onnx.save(outcome.model, args.keep / f"seed_{outcome.seed}.onnx")
                if outcome.at:  # the inputs at the sizes it showed at
                    np.savez(args.keep / f"seed_{outcome.seed}.npz",  # type: ignore[arg-type]
                             **_finding_inputs(outcome, ops, args.dims, args.functions))
                if args.minimise and outcome.kind != "timeout":  # (it would hang again)
                    _keep_minimised(outcome, ops, args.keep, args.dims, args.functions)
    seconds = time.perf_counter() - start
    print(f"\nseeds {len(seeds)} in {seconds:.1f} s ({len(seeds) / max(seconds, 1e-9):.1f}/s)")
    print(f"{'ok':<24} {status['ok']}")
    print(f"{'skipped':<24} {status['skipped']}")
    for (kind_status, kind), n in sorted(kinds.items()):
        if kind_status == "skipped":
            print(f"  {kind:<22} {n}")
    print(f"{'findings':<24} {status['finding']}")
    for kind in KINDS:
        print(f"  {kind:<22} {kinds[('finding', kind)]}")
    print(f"{'with compile warnings':<24} {warned}")
    return 1 if status["finding"] else 0


if __name__ == "__main__":
    sys.exit(main())
