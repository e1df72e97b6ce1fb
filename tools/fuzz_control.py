"""Generators of the fuzzer's models: control flow. `If` and `Loop` nodes whose bodies are
built by the other generators (drawn from `Builder.generators`) and read values of the
enclosing graphs (outer-scope reads of computed values, inputs and constants), in the forms
that constant folding, no-op elimination, CSE and dead-code elimination must handle: constant
conditions, identical branches, pass-through and no-op loop-carried values, foldable
constants in bodies, an `If` nested in a body (depth 2 at most)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import onnx
from fuzz_builder import BOOL, FLOAT, INT64, MAX_NUMEL, Builder, Value, broadcast
from onnx import helper

CONTROL = ("If", "Loop")
MAX_DEPTH = 2  # bodies inside bodies: an If in a Loop body or in an If branch, no deeper
Spec = tuple[int, tuple[int, ...]]  # an output's (element type, shape)


@dataclass
class Body:
    """A body under construction: its nodes and initializers (swapped into the builder while
    it is built)."""

    nodes: list[onnx.NodeProto] = field(default_factory=list)
    initializers: list[onnx.TensorProto] = field(default_factory=list)


@contextmanager
def body_scope(b: Builder, kind: str, visible: Sequence[Value]) -> Iterator[Body]:
    """Build a body of `kind`: while open, generators append to its nodes and draw from
    `visible` (the outer values it may read, its own inputs last) and what it computes."""
    body = Body()
    saved = (b.nodes, b.initializers, b.values, b.consts)
    b.nodes, b.initializers, b.values, b.consts = body.nodes, body.initializers, list(visible), []
    b.scopes.append(kind)
    try:
        yield body
    finally:
        b.nodes, b.initializers, b.values, b.consts = saved
        b.scopes.pop()


def _allowed(b: Builder, name: str) -> bool:
    """Whether a body at the current depth may draw generator `name`: an If only below the
    depth limit, never a Loop (only the main graph has them)."""
    if name == "If":
        return len(b.scopes) < MAX_DEPTH
    return name != "Loop"


def fill(b: Builder, steps: int) -> None:
    """Run `steps` generators in the open body (a failed draw is retried a few times)."""
    names = [k for k in b.generators if _allowed(b, k)]
    if not names:
        return
    weights = np.array([b.generators[k][0] for k in names])
    done = 0
    for _ in range(steps * 3):
        if done >= steps:
            break
        name = names[int(b.rng.choice(len(names), p=weights / weights.sum()))]
        if b.generators[name][1](b):
            done += 1
            b.tags[f"body:{name}"] += 1


def _vi(name: str, spec: Spec, loose: bool = False) -> onnx.ValueInfoProto:
    dtype, shape = spec
    return helper.make_tensor_value_info(name, dtype, [None] * len(shape) if loose else shape)


def _random_const(b: Builder, spec: Spec) -> Value:
    """A constant of `spec` (an initializer of the current graph or a Constant node)."""
    dtype, shape = spec
    if dtype == FLOAT:
        return b.const(b.randn(shape))
    if dtype == INT64:
        return b.const(b.rng.integers(-3, 4, size=shape).astype(np.int64))
    return b.const(b.rng.random(shape) < 0.5)


def _fit(b: Builder, spec: Spec, candidates: Sequence[Value], outer: Sequence[Value],
         tag: str) -> Value:
    """A value of the open body with exactly `spec`: a computed one, one made to fit by a
    broadcasting Add, an Identity of an outer value, or a constant."""
    dtype, shape = spec
    same = [v for v in candidates if (v.dtype, v.shape) == spec]
    if same and b.chance(0.85):
        return b.choice(same)
    if dtype == FLOAT and b.chance(0.6):
        fits = [v for v in candidates if v.dtype == FLOAT and broadcast(v.shape, shape) == shape]
        if fits:
            v = b.choice(fits)
            return b.op("Add", [v, b.const(b.randn(shape))], shape)
    same_outer = [v for v in outer if (v.dtype, v.shape) == spec]
    if same_outer and b.chance(0.6):
        b.tags[f"{tag}:outer-identity-output"] += 1
        return b.op("Identity", [b.choice(same_outer)], shape, dtype)
    b.tags[f"{tag}:constant-output"] += 1
    return _random_const(b, spec)


def _unique_outputs(b: Builder, values: list[Value]) -> list[Value]:
    """`values` with a repeated one replaced by an Identity of it: a graph's outputs have
    distinct names."""
    seen: set[str] = set()
    out = []
    for v in values:
        if v.name in seen:
            v = b.op("Identity", [v], v.shape, v.dtype, pool=False)
        seen.add(v.name)
        out.append(v)
    return out


def outer_view(b: Builder, kind: str) -> list[Value]:
    """The outer values a new body of `kind` may read: the pool, sometimes followed by an
    intermediate value of a pattern (kept out of the pool: a fusion must not swallow it
    now that a body reads it) or a new constant that only the body reads.

    Not a Cast's result: onnxruntime drops a body's read of a chain of Casts from a graph
    input ("Missing Input"), and a compilation may bypass what stood between the two."""
    cast = {o for n in b.nodes if n.op_type == "Cast" for o in n.output}
    visible = [v for v in b.values if v.name not in cast]
    pooled = {id(v) for v in b.values}
    hidden = [b.by_name[o] for n in b.nodes for o in n.output
              if o in b.by_name and id(b.by_name[o]) not in pooled and o not in b.unshaped
              and o not in b.unread
              and b.by_name[o].dtype == FLOAT and n.op_type not in ("Constant", "Cast")]
    if hidden and b.chance(0.3):
        visible.append(b.choice(hidden))
        b.tags[f"{kind}:reads-pattern-intermediate"] += 1
    elif b.chance(0.3):  # a constant of the outer graph that only the body reads
        like = [v for v in visible if v.dtype == FLOAT]
        shape = b.bshape(b.choice(like).shape) if like else (2,)
        visible.append(b.const(b.randn(shape)))
        b.tags[f"{kind}:outer-constant"] += 1
    return visible


def keep_alive(b: Builder, kind: str, results: Sequence[Value]) -> None:
    """Make one of the results of a top-level If or Loop a graph output half of the time:
    else later generators often leave it dead, and dead-code elimination removes it all."""
    if results and not b.scopes and b.chance(0.5):
        b.outputs.append(b.choice(results))
        b.tags[f"{kind}:kept-as-output"] += 1


# -- If -------------------------------------------------------------------------------------
def _condition(b: Builder) -> Value | None:
    """The If condition: from an exact value of the graph (it must not flip under a rewrite),
    a constant, or a constant expression constant folding resolves."""
    form = b.choice(["input", "input", "input", "const", "const", "foldable"])
    if form == "input":
        src = b.pick(ok=lambda v: v.exact and v.dtype == FLOAT) if b.chance(0.8) else None
        src = src or b.pick(INT64, ok=lambda v: v.exact)
        if src is None:
            form = "const"
        else:
            keep = b.chance(0.3)
            m = b.op("ReduceMax", [src], (1,) * src.rank if keep else (), src.dtype, pool=False,
                     keepdims=int(keep))
            if src.dtype == FLOAT:
                zero = b.scalar(0.0)
                cond = b.op("Greater", [m, zero], m.shape, BOOL, pool=False)
            else:
                one = b.const(np.array(1, dtype=np.int64))
                cond = b.op("Equal", [m, one], m.shape, BOOL, pool=False)
    if form == "const":
        cond = b.const(np.array(b.chance(0.5)).reshape(b.choice([(), (1,)])))
    elif form == "foldable":
        lo, hi = b.scalar(float(b.rng.standard_normal())), b.scalar(float(b.rng.normal()))
        cond = b.op("Less", [lo, hi], (), BOOL, pool=False)
    b.tags[f"If:cond-{form}"] += 1
    return cond


def _branch(b: Builder, name: str, visible: Sequence[Value], want: Sequence[Spec] | None,
            outputs: int) -> tuple[onnx.GraphProto, list[Spec], bool]:
    """One branch: a few generators, then outputs of the `want`ed specs (or, for the first
    branch, chosen among what it computed); also whether every output is exact."""
    with body_scope(b, "If", visible) as body:
        fill(b, int(b.rng.integers(0, 4)))
        made = [v for v in b.values[len(visible):] if v.dtype in (FLOAT, INT64, BOOL)]
        outer = [v for v in visible if v.dtype in (FLOAT, INT64, BOOL)]
        outs: list[Value] = []
        if want is None:
            for _ in range(outputs):
                r = b.rng.random()
                if made and r < 0.7:
                    outs.append(made[-1] if not outs else b.choice(made))
                elif outer and r < 0.85:
                    v = b.choice(outer)
                    outs.append(b.op("Identity", [v], v.shape, v.dtype, pool=False))
                    b.tags["If:outer-identity-output"] += 1
                else:
                    outs.append(_random_const(b, (FLOAT, b.choice([(), (2,), (1, 3)]))))
                    b.tags["If:constant-output"] += 1
        else:
            outs = [_fit(b, spec, made, outer, "If") for spec in want]
        outs = _unique_outputs(b, outs)
    specs = [(v.dtype, v.shape) for v in outs]
    loose = b.chance(0.1)  # branch outputs typed without dims
    graph = helper.make_graph(body.nodes, name, [], [_vi(v.name, s, loose)
                                                     for v, s in zip(outs, specs)],
                              initializer=body.initializers)
    return graph, specs, all(v.exact for v in outs)


def g_if(b: Builder) -> bool:
    """An If on a condition read from the graph or constant; its branches read outer values
    (an outer initializer of their own sometimes), and are sometimes identical, with the
    same value names (legal in sibling branches) or renamed."""
    if len(b.scopes) >= MAX_DEPTH:
        return False
    cond = _condition(b)
    if cond is None:
        return False
    visible = outer_view(b, "If")
    if b.scopes:
        b.tags[f"If:nested-in-{b.scopes[-1]}"] += 1
    outputs = 1 if b.chance(0.7) else 2
    form = b.choice(["distinct"] * 6 + ["identical-same-names", "identical-renamed"])
    b.tags[f"If:branches-{form}"] += 1
    state, differ = b.rng.bit_generator.state, False
    # the local functions defined so far (`fuzz_functions`): a replay sees these alone
    known = list(b.local.functions) if b.local is not None else []
    then, specs, exact = _branch(b, b.fresh("then_"), visible, None, outputs)
    if form == "identical-same-names":
        other = onnx.GraphProto()
        other.CopyFrom(then)
        other.name = b.fresh("else_")
    elif form == "identical-renamed":  # the same draws again: the same nodes, fresh names
        b.rng.bit_generator.state = state
        made = b.local.functions[len(known):] if b.local is not None else []
        if b.local is not None:  # (the functions the first branch defined, kept)
            b.local.functions[:] = known
        other, specs2, exact2 = _branch(b, b.fresh("else_"), visible, None, outputs)
        if b.local is not None:
            b.local.functions[len(known):len(known)] = made
        exact = exact and exact2
        if specs2 != specs:  # the draws went otherwise (the first branch changed what they
            other = onnx.GraphProto()  # pick from): its outputs would not be the declared
            other.CopyFrom(then)  # ones, so the copy under other names is taken instead
            other.name = b.fresh("else_")
            b.tags["If:replay-diverged"] += 1
    else:
        want = list(specs)
        dtype, shape = specs[0]
        differ = dtype == FLOAT and len(shape) >= 1 and b.chance(0.12)
        if differ:  # a first output whose shape depends on the branch taken
            other_shape = shape[::-1] if shape[::-1] != shape else tuple(
                int(d) for d in b.rng.integers(1, 5, size=len(shape)))
            want[0] = (FLOAT, other_shape)
            b.tags["If:output-shapes-differ"] += 1
        other, _, exact2 = _branch(b, b.fresh("else_"), visible, want, outputs)
        exact = exact and exact2
    swap = b.chance(0.5)
    branches = {"then_branch": other if swap else then, "else_branch": then if swap else other}
    outs = b.emit("If", [cond], specs, pool=False, **branches)
    if form == "distinct" and differ:  # no static shape: summed, and its Shape read
        first, outs = outs[0], outs[1:]
        b.unshaped.add(first.name)
        b.op("ReduceSum", [first], (), keepdims=0).exact = False
        dims = b.op("Shape", [first], (len(shape),), INT64, pool=False)
        b.op("Cast", [dims], dims.shape, to=FLOAT)
    for v in outs:
        v.exact = exact
        b.values.append(v)
    keep_alive(b, "If", outs)
    return True


# -- Loop -----------------------------------------------------------------------------------
def _carried_output(b: Builder, v: Value, made: Sequence[Value], visible: Sequence[Value]
                    ) -> Value:
    """The body's next value of carried `v`: itself (a pass-through), a no-op of it, a
    value the body computed, or an update of it (bounded by a Tanh sometimes)."""
    form = b.choice(["pass", "identity", "add-zero", "computed", "computed", "update",
                     "update"])
    if form == "add-zero" and v.dtype != FLOAT:
        form = "identity"
    same = [m for m in made if (m.dtype, m.shape) == (v.dtype, v.shape)]
    if form == "computed" and not same:
        form = "update"
    if form == "update" and v.dtype != FLOAT:
        form = "pass"
    b.tags[f"Loop:carried-{form}"] += 1
    if form == "pass":
        return v
    if form == "identity":
        return b.op("Identity", [v], v.shape, v.dtype, pool=False)
    if form == "add-zero":
        return b.op("Add", [v, b.scalar(0.0, b.bshape(v.shape))], v.shape, pool=False)
    if form == "computed":
        return b.choice(same)
    pool = [m for m in [*made, *visible] if m.dtype == FLOAT and m is not v
            and broadcast(m.shape, v.shape) == v.shape]
    w = b.choice(pool) if pool else b.const(b.randn(b.bshape(v.shape)))
    y = b.op(b.choice(["Add", "Sub", "Mul"]), [v, w], v.shape, pool=False)
    return b.op("Tanh", [y], v.shape, pool=False) if b.chance(0.5) else y


def _growing(b: Builder, initial: Sequence[Value], trips: int) -> dict[int, str]:
    """Which carried values change shape per trip, and how: "grow", Concat(v, v) on axis 0
    (that dim doubles per trip); "grow-mix", for a [1, n] value, Reshape(Concat(v, v),
    [2, -1]) ([1, n], [2, n], [2, 2n], ...: its second dim agrees with the initial value's
    after one trip and changes after two, which a one-step proof of the Loop's output type
    gets wrong)."""
    found = {}
    for i, v in enumerate(initial):
        if (v.dtype == FLOAT and v.shape and v.numel > 0 and v.numel << trips <= MAX_NUMEL
                and b.chance(0.2)):
            mix = len(v.shape) == 2 and v.shape[0] == 1 and b.chance(0.6)
            found[i] = "grow-mix" if mix else "grow"
            b.tags[f"Loop:carried-{found[i]}"] += 1
    return found


def _grown(b: Builder, v: Value, form: str) -> Value:
    """The next value of a carried value that changes shape per trip (`_growing`); its
    Value's shape is the first trip's (no other node of the body reads it)."""
    doubled = b.op("Concat", [v, v], (2 * v.shape[0], *v.shape[1:]), pool=False, axis=0)
    if form == "grow":
        return doubled
    target = b.const(np.array([2, -1], np.int64))
    return b.op("Reshape", [doubled, target], (2, v.shape[1]), pool=False)


def _final_shape(shape: tuple[int, ...], form: str | None, runs: int) -> tuple[int, ...]:
    """A carried value's shape after `runs` trips of a body that grows it as `form`."""
    if form == "grow":
        return (shape[0] << runs, *shape[1:])
    if form == "grow-mix" and runs:
        return (2, shape[1] << (runs - 1))
    return shape


def _stop(b: Builder, iteration: Value, cond_in: Value, trips: int, form: str
          ) -> tuple[Value, int]:
    """The body's condition output, and how many iterations the loop then runs."""
    if form == "stop":  # true while iteration < k: k + 1 iterations
        k = int(b.rng.integers(0, trips))
        limit = b.const(np.array(k, dtype=np.int64))
        return b.op("Less", [iteration, limit], (), BOOL, pool=False), min(trips, k + 1)
    r = b.rng.random()
    if r < 0.4:
        return cond_in, trips  # the condition passed through
    if r < 0.7:
        return b.op("Identity", [cond_in], (), BOOL, pool=False), trips
    return b.const(np.array(True)), trips


def g_loop(b: Builder) -> bool:
    """A Loop with a constant trip count (and a condition: none, constant, read from the
    graph, or one that stops it early), carried values and scan outputs, its body reading
    outer values."""
    if b.scopes:
        return False
    seeds = [v for v in b.values if v.dtype in (FLOAT, INT64) and v.numel <= MAX_NUMEL // 4]
    if not seeds:
        return False
    trips = int(b.rng.integers(1, 4))
    form = b.choice(["none", "none", "const", "input", "stop"])
    b.tags[f"Loop:cond-{form}"] += 1
    # a "while" loop: no trip count, only the condition that stops it
    count = None if form == "stop" and b.chance(0.3) else b.const(np.array(trips, np.int64))
    cond: Value | str = ""
    if form in ("const", "stop"):
        cond = b.const(np.array(True))
    elif form == "input":
        src = b.pick(ok=lambda v: v.exact and v.dtype == FLOAT)
        if src is None:
            cond = b.const(np.array(True))
        else:
            m = b.op("ReduceMin", [src], (), pool=False, keepdims=0)
            cond = b.op("Greater", [m, b.scalar(-1.0)], (), BOOL, pool=False)
    initial = [b.choice(seeds) for _ in range(int(b.rng.integers(1, 3)))]
    if b.chance(0.2):  # an outer constant as an initial value
        initial.append(b.const(b.randn(b.choice([(), (3,), (2, 2)]))))
        b.tags["Loop:constant-initial"] += 1
    iteration = Value(b.fresh("iter"), INT64, ())
    cond_in = Value(b.fresh("cond"), BOOL, ())
    carried = [Value(b.fresh("carried"), v.dtype, v.shape, exact=False) for v in initial]
    # carried values whose shape changes per trip: read by nothing else in the body (its
    # other nodes assume one shape), declared without dims; only where the trips are known
    grows = _growing(b, initial, trips) if form != "input" else {}
    visible = [*outer_view(b, "Loop"), iteration, cond_in,
               *[c for i, c in enumerate(carried) if i not in grows]]
    runs = trips
    with body_scope(b, "Loop", visible) as body:
        fill(b, int(b.rng.integers(1, 4)))
        steady = [c for i, c in enumerate(carried) if i not in grows]
        if steady and b.chance(0.35):  # a constant sub-expression in the body: folding material
            x = b.choice(steady)
            if x.dtype == FLOAT:
                k = b.op("Mul", [b.scalar(float(b.rng.normal())), b.scalar(0.5)], (), pool=False)
                b.op("Add", [x, k], x.shape)
                b.tags["Loop:foldable-body"] += 1
        made = [v for v in b.values[len(visible):] if v.dtype in (FLOAT, INT64)]
        stop, runs = _stop(b, iteration, cond_in, trips, form)
        nexts = [_grown(b, v, grows[i]) if i in grows else _carried_output(b, v, made, visible)
                 for i, v in enumerate(carried)]
        fits = [v for v in [*made, *steady, iteration]
                if v.numel * trips <= MAX_NUMEL and v.dtype in (FLOAT, INT64)]
        scans = [b.choice(fits) for _ in range(int(b.rng.integers(0, 3)) if fits else 0)]
        outs = _unique_outputs(b, [stop, *nexts, *scans])
    b.tags["Loop:scan-outputs"] += len(scans)
    b.tags["Loop:carried-values"] += len(carried)
    loose = b.chance(0.1)
    rows_unknown = form == "input"  # (the condition read from the graph: 0 trips or all)
    grown = {carried[i].name for i in grows} | {nexts[i].name for i in grows}
    # a grow-mix value declared as an exporter tracing one trip declares it: [L, n] in and
    # out (n holds for one trip only; onnx's checker cannot tell, onnxruntime warns)
    traced = {name: ("L", carried[i].shape[1]) for i in grows if grows[i] == "grow-mix"
              and b.chance(0.5) for name in (carried[i].name, nexts[i].name)}
    b.tags["Loop:grow-mix-traced"] += len(traced) // 2

    def declared(v: Value, loose_too: bool) -> onnx.ValueInfoProto:
        if v.name in traced:
            return helper.make_tensor_value_info(v.name, v.dtype, list(traced[v.name]))
        return _vi(v.name, (v.dtype, v.shape), loose_too or v.name in grown)

    graph = helper.make_graph(
        body.nodes, b.fresh("body_"),
        [declared(v, False) for v in (iteration, cond_in, *carried)],
        # (a scan output of a loop that may run no trip keeps its dims: onnxruntime makes
        # its empty result from the declared shape, [0, 0, 0] for one declared without dims)
        [declared(v, loose and not (rows_unknown and k > len(carried)))
         for k, v in enumerate(outs)],
        initializer=body.initializers)
    out_specs = [(v.dtype, _final_shape(v.shape, grows.get(i), runs))
                 for i, v in enumerate(initial)]
    rows = None if rows_unknown else runs  # 0 or `trips` rows: unknown
    out_specs += [(v.dtype, (rows or 0, *v.shape)) for v in outs[1 + len(carried):]]
    results = b.emit("Loop", [count or "", cond, *initial], out_specs, pool=False, body=graph)
    live = list(results[:len(initial)])
    for i in grows:  # a dim of it (`Gather(Shape(v), k)`, what a dim known after one trip
        if b.chance(0.5):  # only would fold wrongly), or its whole Shape
            v = results[i]
            dims = b.op("Shape", [v], (len(v.shape),), INT64, pool=False)
            if b.chance(0.7):
                k = b.const(np.array(int(b.rng.integers(0, len(v.shape))), np.int64))
                dims = b.op("Gather", [dims, k], (), INT64, pool=False, axis=0)
            live.append(b.op("Cast", [dims], dims.shape, pool=False, to=FLOAT))
            b.tags["Loop:grown-shape-read"] += 1
    for v in results[len(initial):]:
        if b.chance(0.25):  # its Shape: folded only where the row count is known
            dims = b.op("Shape", [v], (len(v.shape),), INT64, pool=False)
            live.append(b.op("Cast", [dims], dims.shape, pool=False, to=FLOAT))
            b.tags["Loop:scan-shape-read"] += 1
        if rows is None:  # summed over its rows: a static shape, 0 for no iteration
            b.unshaped.add(v.name)
            axes, attrs = b.axes_arg("ReduceSum", [0], 13)
            v = b.op("ReduceSum", [v, *axes], v.shape[1:], v.dtype, pool=False, keepdims=0,
                     **attrs)
            b.tags["Loop:scan-summed"] += 1
        live.append(v)
    for v in live:
        v.exact = False
        b.values.append(v)
    keep_alive(b, "Loop", live)
    return True


def reads(nodes: Sequence[onnx.NodeProto]) -> set[str]:
    """The names `nodes` read, their bodies' reads included (their own values too)."""
    names: set[str] = set()
    for node in nodes:
        names.update(node.input)
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                names |= reads(a.g.node)
    return names


def control_tags(b: Builder, names: Sequence[str]) -> None:
    """Count the graph outputs (`names`) that an If or Loop computes."""
    made = {o for n in b.nodes if n.op_type in CONTROL for o in n.output}
    b.tags["output:control-flow"] += sum(n in made for n in names)
