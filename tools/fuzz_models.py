"""Random small ONNX models for `tools/fuzz_compile.py`: one deterministic model per seed.

Each generator (`fuzz_ops`, `fuzz_layout`; the builder is `fuzz_builder`) appends a few
valid nodes (its shapes computed there, checked by onnx's strict shape inference in the
fuzzer), often in a no-op or fusable form, so that every built-in pass of `ge.compile` has
work. This module draws them, adds constant expressions and duplicates, and picks the
outputs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial

import fuzz_dims
import fuzz_functions
import fuzz_symbolic
import numpy as np
import onnx
from fuzz_builder import BOOL, FLOAT, INT64, OPSETS, Builder, FuzzModel, Generator, Value, broadcast
from fuzz_control import CONTROL, control_tags, g_if, g_loop, reads
from fuzz_layout import (
    g_argmax,
    g_cast,
    g_clip,
    g_concat,
    g_expand,
    g_flatten,
    g_gather,
    g_identity,
    g_pad,
    g_reshape,
    g_shape,
    g_slice,
    g_slice_pieces,
    g_split,
    g_squeeze,
    g_tile,
    g_transpose,
    g_unsqueeze,
)
from fuzz_ops import (
    MS,
    g_batchnorm,
    g_binary,
    g_contrib,
    g_conv,
    g_gelu,
    g_gemm,
    g_int,
    g_layernorm,
    g_matmul,
    g_reciprocal_mul,
    g_reduce,
    g_rmsnorm,
    g_silu,
    g_softmax,
    g_unary,
    g_where,
)
from onnx import helper, numpy_helper


# -- constants and shapes -------------------------------------------------------------------
def g_const_expr(b: Builder) -> bool:
    """Generators run on constants only (folding material), the result then combined with a
    live value."""
    x = b.pick(ok=lambda v: not v.const)
    shape = b.bshape(x.shape) if x is not None and b.chance(0.7) else _input_shape(b)
    c = b.const(b.randn(shape), pool=True)
    b.const_only = True
    try:
        for _ in range(int(b.rng.integers(1, 4)) if b.foldable else 0):
            name = b.choice(b.foldable)
            GENERATORS[name][2](b)
            b.tags[f"const-expr:{name}"] += 1
    finally:
        b.const_only = False
    last = [v for v in b.values if v.const and v.dtype == FLOAT][-1]
    for k in (last, c):
        out = broadcast(x.shape, k.shape) if x is not None else None
        if x is not None and out is not None:
            b.op(b.choice(["Add", "Mul", "Sub"]), [x, k], out)
            break
    return True


def g_duplicate(b: Builder) -> bool:
    """A copy of an earlier node under another name (CSE material), its outputs combined with
    the original's or left for the outputs; sometimes with one attribute changed."""
    nodes = [n for n in b.nodes if n.output  # (not a random draw: only its comparison reads it)
             and all(o in b.by_name and o not in b.unshaped and o not in b.unread
                     for o in n.output)]
    if not nodes:
        return False
    node = b.choice(nodes)
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    copy.name = b.fresh(f"dup_{node.op_type.lower()}_")
    del copy.output[:]
    twins = []
    for out in node.output:
        v = b.by_name[out]
        twin = Value(b.fresh("v"), v.dtype, v.shape, v.const)
        b.by_name[twin.name] = twin
        copy.output.append(twin.name)
        twins.append((v, twin))
        if v in b.values:
            b.values.append(twin)
    changed = ""
    if node.op_type == "Softmax" and b.chance(0.4):  # the same op type, another attribute
        rank = len(twins[0][0].shape)
        for a in copy.attribute:
            if a.name == "axis" and rank > 1:
                a.i = (a.i + 1) % rank
                changed = "-other-attribute"
    b.nodes.append(copy)
    b.tags[f"duplicate:{node.op_type}{changed}"] += 1
    v, twin = twins[0]
    if v.dtype == FLOAT and b.chance(0.6):
        b.op(b.choice(["Add", "Sub"]), [v, twin], v.shape)
    return True


def hidden(gen: Generator) -> Generator:
    """`gen` with its intermediate values mostly kept out of the pool, so that nothing else
    reads them and its fusion can fire; its last value is pooled."""

    def run(b: Builder) -> bool:
        b.hide = b.chance(0.8)
        try:
            done = gen(b)
        finally:
            b.hide = False
        last = b.by_name.get(b.nodes[-1].output[0]) if b.nodes and b.nodes[-1].output else None
        if done and last is not None and last not in b.values:
            b.values.append(last)
        return done

    return run

#: name -> (weight, lowest opset, generator); names are op types or fused patterns.
GENERATORS: dict[str, tuple[float, int, Generator]] = {
    **{op: (1.0, 13, partial(g_unary, op=op))
       for op in ("Relu", "Sigmoid", "Tanh", "Erf", "Neg", "Abs", "Exp", "Sqrt", "Reciprocal",
                  "Floor", "Ceil", "Round", "Sign")},
    **{op: (2.0 if op in ("Add", "Mul") else 1.0, 13, partial(g_binary, op=op))
       for op in ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min")},
    "ReciprocalMul": (1.0, 13, g_reciprocal_mul),
    "Where": (1.0, 13, g_where),
    "IntOps": (1.0, 13, g_int),
    "MatMul": (1.5, 13, partial(g_matmul, bias=False)),
    "MatMulAdd": (1.5, 13, hidden(partial(g_matmul, bias=True))),
    "Gemm": (1.5, 13, hidden(g_gemm)),
    "Conv": (2.0, 13, hidden(g_conv)),
    "BatchNormalization": (0.5, 13, g_batchnorm),
    "ReduceMean": (1.0, 13, partial(g_reduce, op="ReduceMean")),
    "ReduceSum": (1.0, 13, partial(g_reduce, op="ReduceSum")),
    "ReduceMax": (0.5, 13, partial(g_reduce, op="ReduceMax")),
    "Softmax": (1.0, 13, g_softmax),
    "LayerNorm": (1.5, 17, hidden(g_layernorm)),
    "Gelu": (1.5, 20, hidden(g_gelu)),
    "RMSNorm": (1.5, 13, hidden(g_rmsnorm)),
    "SiLU": (1.0, 13, hidden(g_silu)),
    "Reshape": (2.0, 13, g_reshape),
    "Transpose": (1.5, 13, g_transpose),
    "Unsqueeze": (1.0, 13, g_unsqueeze),
    "Squeeze": (1.0, 13, g_squeeze),
    "Flatten": (0.7, 13, g_flatten),
    "Expand": (1.0, 13, g_expand),
    "Tile": (0.7, 13, g_tile),
    "Slice": (1.2, 13, g_slice),
    "SlicePieces": (1.0, 13, g_slice_pieces),
    "Concat": (1.2, 13, g_concat),
    "Split": (1.0, 13, g_split),
    "Pad": (1.0, 13, g_pad),
    "Cast": (1.5, 13, g_cast),
    "Identity": (1.0, 13, partial(g_identity, op="Identity")),
    "Dropout": (1.0, 13, partial(g_identity, op="Dropout")),
    "ConstExpr": (3.0, 13, g_const_expr),
    "Duplicate": (1.5, 13, g_duplicate),
    "Clip": (0.7, 13, g_clip),
    "ArgMax": (0.7, 13, g_argmax),
    "Shape": (0.8, 13, g_shape),
    "Gather": (0.7, 13, g_gather),
    "Contrib": (1.0, 13, g_contrib),
    "If": (2.5, 13, g_if),
    "Loop": (2.0, 13, g_loop),
}


def _uses_domain(graph: onnx.GraphProto | onnx.FunctionProto, domain: str) -> bool:
    """Whether a node of `domain` is in `graph` (or a function) or in a body inside it."""
    for node in graph.node:
        if node.domain == domain:
            return True
        for attr in node.attribute:
            bodies = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
            if any(_uses_domain(body, domain) for body in bodies):
                return True
    return False


#: Generators that make sense on constants only (ConstExpr runs them on the constant pool).
FOLDABLE = [k for k in GENERATORS
            if k not in ("ConstExpr", "Duplicate", "LayerNorm", "Gelu", "RMSNorm", *CONTROL)]


def _input_shape(b: Builder) -> tuple[int, ...]:
    """A small static input shape; a quarter of them images for Conv."""
    if b.chance(0.25):  # an image for Conv
        return (int(b.rng.integers(1, 3)), int(b.rng.integers(1, 4)),
                int(b.rng.integers(3, 6)), int(b.rng.integers(3, 6)))
    while True:
        shape = tuple(int(d) for d in b.rng.integers(1, 6, size=int(b.rng.integers(1, 4))))
        if math.prod(shape) <= 64:
            return shape


Dims = Sequence[int | str | None] | None


def _pick_outputs(b: Builder) -> list[tuple[str, int, Dims]]:
    """The graph outputs: the last value, some intermediate ones, and the odd cases (an
    input, a constant, the same value twice, an output repeated)."""
    pool = [*b.values, *b.sym_values]
    produced = [v for v in pool if v not in b.inputs] or pool
    chosen = [produced[-1], *b.outputs]
    static = [v for v in b.values if v not in b.inputs]
    if b.sym_values and static and b.chance(0.7):  # what the static generators built too
        chosen.append(static[-1])
    for _ in range(int(b.rng.integers(0, 3))):
        chosen.append(b.choice(produced))
    if b.chance(0.08):
        chosen.append(b.choice(b.inputs))
        b.tags["output:is-input"] += 1
    if b.consts and b.chance(0.08):
        chosen.append(b.choice(b.consts))
        b.tags["output:is-constant"] += 1
    unique = list(dict.fromkeys(v.name for v in chosen))
    by_name = {v.name: v for v in [*b.values, *b.consts, *b.sym_values, *b.outputs]}
    outs = [(n, by_name[n].dtype, fuzz_dims.declared(b, by_name[n])) for n in unique]
    if b.chance(0.1):  # the same value under a second name
        v = by_name[unique[0]]
        copy = b.op("Identity", [v], v.shape, v.dtype, pool=False)
        outs.append((copy.name, v.dtype, fuzz_dims.declared(b, v)))
        b.tags["output:identity-copy"] += 1
    if b.chance(0.05):
        outs.append(outs[0])
        b.tags["output:repeated-name"] += 1
    loose: list[tuple[str, int, Dims]] = [
        (n, t, [None] * len(s) if s is not None and b.chance(0.15) else s) for n, t, s in outs]
    b.tags["output:unknown-dims"] += sum(s != o[2] for (_, _, s), o in zip(loose, outs))
    b.tags["output:unknown-rank"] += sum(s is None for _, _, s in loose)
    control_tags(b, [n for n, _, _ in outs])
    return loose


#: In the "mixed" mode, one seed in this many is symbolic (`is_symbolic`).
SYMBOLIC_EVERY = 8
#: How the seeds' models declare their input dims: static, symbolic, or some of each.
DIMS_MODES = ("mixed", "static", "symbolic")
#: In the "mixed" mode, one seed in this many (not a symbolic one) defines model-local
#: functions (`has_functions`); the others build the models they built before.
FUNCTIONS_EVERY = 8
#: Which seeds' models define local functions: some, every one, none.
FUNCTIONS_MODES = ("mixed", "every", "none")


def has_functions(seed: int, ops: set[str] | None = None, functions: str = "mixed") -> bool:
    """Whether the model of `seed` draws the generators of `fuzz_functions` too: in the
    "mixed" mode one seed in `FUNCTIONS_EVERY` (seed % 8 == 3) if `ops` is not given, every
    seed if `ops` names one of them, none else."""
    if functions != "mixed":
        return functions == "every"
    if ops is not None:
        return bool(ops & set(fuzz_functions.FUNCTIONS))
    return seed % FUNCTIONS_EVERY == 3


def is_symbolic(seed: int, ops: set[str] | None = None, dims: str = "mixed") -> bool:
    """Whether the model of `seed` has symbolic dims: in the "mixed" mode one seed in
    `SYMBOLIC_EVERY` (the others build the same static models as before there was a
    symbolic mode), every seed if `ops` names symbolic generators only, none if it names
    none."""
    if dims != "mixed":
        return dims == "symbolic"
    if ops is not None and not ops & set(fuzz_symbolic.SYMBOLIC):
        return False
    if ops is not None and not ops & {*GENERATORS, *fuzz_functions.FUNCTIONS}:
        return True
    return seed % SYMBOLIC_EVERY == SYMBOLIC_EVERY - 1


def build(seed: int, ops: set[str] | None = None, symbolic: bool = False,
          functions: bool = False) -> FuzzModel:
    """The model of `seed` (numpy `default_rng(seed)`), drawing only from `ops` if given;
    with symbolic input dims if told (see `fuzz_symbolic`), with model-local functions
    (`fuzz_functions`) if told."""
    rng = np.random.default_rng(seed)
    local = fuzz_functions.FUNCTIONS if functions else {}
    known = {**GENERATORS, **(fuzz_symbolic.SYMBOLIC if symbolic else {}), **local}
    wanted = set(known) if ops is None else ops & set(known)
    allowed = [o for o in OPSETS if any(known[k][1] <= o for k in wanted)]
    if not allowed:
        raise ValueError(f"no generator among {sorted(ops or ())}")
    opset = int(rng.choice(allowed))  # an opset where some of `ops` exist (Gelu: 20 only)
    b = Builder(rng, opset)
    table = {k: g for k, g in {**GENERATORS, **local}.items() if g[1] <= opset and k in wanted}
    sym_table = {k: g for k, g in known.items()
                 if k in fuzz_symbolic.SYMBOLIC and g[1] <= opset and k in wanted}
    drawn = {**table, **sym_table}
    names = list(drawn)
    b.foldable = [k for k in names if k in FOLDABLE]
    # control-flow and function bodies draw from the chosen generators, from all when only
    # If/Loop/Function/Call are
    body = {k: g for k, g in table.items() if k not in CONTROL and k not in local} or {
        k: g for k, g in GENERATORS.items() if g[1] <= opset and k not in CONTROL}
    b.generators = {k: (w, gen) for k, (w, _, gen) in {**body, **{
        k: g for k, g in table.items() if k in CONTROL or k in local}}.items()}
    weights = np.array([drawn[k][0] for k in names])
    feeds: dict[str, np.ndarray] = {}
    if symbolic:
        fuzz_dims.make_inputs(b)
    for i in range(0 if symbolic else int(rng.integers(1, 3))):
        shape = _input_shape(b) if i == 0 or b.chance(0.5) else b.bshape(b.inputs[0].shape)
        value = Value(f"x{i}", FLOAT, shape)
        b.inputs.append(value)
        b.values.append(value)
        feeds[value.name] = b.rng.standard_normal(shape).astype(np.float32)
    if b.chance(0.25):
        value = Value("idx", INT64, b.choice([(2,), (2, 3), (1,)]))
        b.inputs.append(value)
        b.values.append(value)
        feeds["idx"] = b.rng.integers(0, 2, size=value.shape).astype(np.int64)
    target = int(rng.integers(3, 26))
    for _ in range(200):
        if len(b.nodes) >= target:
            break
        name = names[int(rng.choice(len(names), p=weights / weights.sum()))]
        if drawn[name][2](b):
            b.tags[f"gen:{name}"] += 1
    for _ in range(3 if "Function" in table and not fuzz_functions.protos(b) else 0):
        if fuzz_functions.g_function(b):  # a model with functions has one at least
            b.tags["gen:Function"] += 1
            break
    outputs = _pick_outputs(b)
    graph = helper.make_graph(
        b.nodes, f"fuzz_{seed}",
        [fuzz_dims.input_info(b, v) for v in b.inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        initializer=b.initializers)
    used = reads(b.nodes)  # bodies' outer reads included
    weights_in = [t for t in b.initializers  # (not a scalar: a Dropout ratio, an exponent)
                  if t.data_type == FLOAT and t.name in used and len(t.dims)]
    if weights_in and b.chance(0.05):  # an initializer that is also an input: a default value
        init = b.choice(weights_in)
        graph.input.append(helper.make_tensor_value_info(init.name, FLOAT, init.dims))
        feeds[init.name] = b.randn(init.dims) if b.chance(0.8) else numpy_helper.to_array(init)
        b.tags["input:overridable-initializer"] += 1
    conds = {n.input[0] for n in b.nodes if n.op_type == "If"}
    flags = [t for t in b.initializers if t.name in conds]
    if flags and b.chance(0.2):  # an If on a constant that an input may override
        init = b.choice(flags)
        graph.input.append(helper.make_tensor_value_info(init.name, BOOL, init.dims))
        feeds[init.name] = np.asarray(b.rng.random(tuple(init.dims)) < 0.5)
        b.tags["input:overridable-condition"] += 1
    opsets = [helper.make_opsetid("", opset)]
    ir_version = helper.find_min_ir_version_for(opsets)
    protos = fuzz_functions.protos(b)
    if _uses_domain(graph, MS) or any(_uses_domain(f, MS) for f in protos):
        opsets.append(helper.make_opsetid(MS, 1))
    if protos:
        opsets.append(helper.make_opsetid(fuzz_functions.DOMAIN, 1))
        b.tags["model:functions"] += 1
    if fuzz_functions.uses_overloads(b):  # FunctionProto.overload: IR 10
        ir_version = max(ir_version, 10)
    model = helper.make_model(graph, opset_imports=opsets, producer_name="ge-fuzz",
                              ir_version=ir_version, functions=protos)
    if b.chance(0.3):  # a typed model: ge keeps value_info then
        model = onnx.shape_inference.infer_shapes(model)
        b.tags["model:value_info"] += 1
    sizes = []
    if symbolic:  # the inputs at each size, from their own generator (the model is built)
        sized = np.random.default_rng([seed, 1])
        sizes = [(label, {**feeds, **fuzz_dims.feeds_at(b, env, sized)})
                 for label, env in fuzz_dims.assignments(b, sized)]
        feeds = sizes[0][1]
        b.tags["model:symbolic"] += 1
    return FuzzModel(model, feeds, opset, b.tags, sizes)
