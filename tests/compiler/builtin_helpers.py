"""Helpers for the built-in pass tests: small ONNX models, running a pass the way the
engine does (root graph, then every body), and the checks every rewrite must pass."""

from __future__ import annotations

import collections
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

import ge.graph
import ge.ops
from ge.compiler.invocation import Invocation, create_instance, is_live
from ge.compiler.pass_registry import builtin_entries
from ge.compiler.report import PassRunRecord
from ge.graph import Graph
from ge.ops.memo import InferenceMemo

Feeds = dict[str, np.ndarray]

F = onnx.TensorProto.FLOAT
I64 = onnx.TensorProto.INT64
BOOL = onnx.TensorProto.BOOL


def vi(name: str, elem_type: int = F, shape: Sequence[int | str] | None = (2, 3)
       ) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, shape)


def init(name: str, value: Any, dtype: Any = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def model(nodes: Iterable[onnx.NodeProto], inputs: Iterable[onnx.ValueInfoProto],
          outputs: Iterable[onnx.ValueInfoProto], initializers: Iterable[onnx.TensorProto] = (),
          *, opset: int = 17, value_info: Iterable[onnx.ValueInfoProto] = (),
          check: bool = True) -> onnx.ModelProto:
    """An ONNX model of one graph "g" at `opset`, checked (unless `check=False`) so tests
    start from valid models."""
    graph = helper.make_graph(list(nodes), "g", list(inputs), list(outputs),
                              initializer=list(initializers), value_info=list(value_info))
    made = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    if check:
        onnx.checker.check_model(made, full_check=True)
    return made


#: A per-channel step after an operator: (Mul or Add, the constant's shape, None for the
#: default one; whether the constant is the first operand).
AffineStep = tuple[str, Sequence[int] | None, bool]


def affine_steps(steps: Sequence[AffineStep], *, default_shape: Sequence[int],
                 inputs: list[onnx.ValueInfoProto], inits: list[onnx.TensorProto],
                 operand_input: bool, rng: np.random.Generator, prefix: str = ""
                 ) -> list[onnx.NodeProto]:
    """The nodes applying `steps` in turn to value t0 (t1, t2, ...; the last result is y),
    each constant an initializer drawn from `rng` (a Mul's in [0.5, 2), an Add's normal)
    added to `inits`, or with `operand_input` a graph input added to `inputs`; node names
    `prefix` + "mul0", "add1"...; the decomposed BatchNormalization of tf2onnx's Keras."""
    nodes = []
    for k, (op, shape, first) in enumerate(steps):
        name = f"k{k}"
        dims = list(default_shape) if shape is None else list(shape)
        if operand_input:
            inputs.append(vi(name, F, dims))
        else:
            value = rng.uniform(0.5, 2.0, dims) if op == "Mul" else rng.standard_normal(dims)
            inits.append(init(name, value))
        args = [name, f"t{k}"] if first else [f"t{k}", name]
        nodes.append(helper.make_node(op, args, [f"t{k + 1}"], name=f"{prefix}{op.lower()}{k}"))
    nodes[-1].output[0] = "y"
    return nodes


def load(source: onnx.ModelProto | Path, *, infer: bool = True) -> Graph:
    """The IR of a model, with inferred descs unless `infer=False`."""
    graph = ge.graph.load(source)
    if infer:
        ge.ops.infer_shapes(graph)
    return graph


def _invocations(pass_class: type, graph: Graph, options: Mapping[str, str] | None,
                 bodies: bool, typed: bool = True) -> list[PassRunRecord]:
    """Run a built-in pass as the engine does: root graph, then every live body, each in a
    checked transaction at the model's opset (`typed`: outputs must have types, as after
    shape inference); one record per invocation."""
    entry = builtin_entries([pass_class])[0]
    invocation = Invocation(dict(options or {}), InferenceMemo(), typed=typed)
    instance = create_instance(entry, entry.stage_label)
    records = [invocation.run(entry, instance, graph, graph, entry.stage_label)]
    if bodies:
        for sub in graph.get_all_subgraphs():
            if is_live(sub, graph):
                records.append(invocation.run(entry, instance, sub, graph, entry.stage_label))
    return records


def run_pass(pass_class: type, graph: Graph, options: Mapping[str, str] | None = None,
             *, bodies: bool = True, typed: bool = True) -> bool:
    """Run one built-in pass on `graph` (then its bodies) as the engine does; whether it
    changed anything."""
    return any([r.changed for r in _invocations(pass_class, graph, options, bodies, typed)])


def count_rewrites(pass_class: type, graph: Graph,
                   options: Mapping[str, str] | None = None) -> int:
    """Run one built-in pattern pass as the engine does; the rewrites it applied (a pass
    changes the graph exactly when it rewrote something)."""
    records = _invocations(pass_class, graph, options, True)
    for record in records:
        assert record.changed is (record.rewrites > 0), record
    return sum(r.rewrites for r in records)


def run_to_fixed_point(pass_classes: Sequence[type], graph: Graph, rounds: int = 10) -> int:
    """Run the passes in order, repeatedly, until none changes the graph; the rounds run."""
    for round_ in range(1, rounds + 1):
        if not any([run_pass(cls, graph) for cls in pass_classes]):
            return round_
    raise AssertionError(f"no fixed point after {rounds} rounds")


def assert_stable(pass_class: type, graph: Graph,
                  options: Mapping[str, str] | None = None, *, typed: bool = True) -> None:
    """Running the pass again changes nothing: NOT_CHANGED and the same mutation count."""
    before = graph.mutation_count
    assert not run_pass(pass_class, graph, options, typed=typed)
    assert graph.mutation_count == before


def histogram(graph: Graph, *, everywhere: bool = False) -> dict[str, int]:
    """Node count per type: direct nodes, or (everywhere) subgraphs included."""
    nodes = graph.get_all_nodes() if everywhere else graph.get_direct_nodes()
    return dict(collections.Counter(n.type for n in nodes))


def output_names(gp: onnx.GraphProto) -> list[tuple[str, list[str]]]:
    """(graph name, output names) of a graph and, depth first, of its subgraphs."""
    found = [(gp.name, [o.name for o in gp.output])]
    for node in gp.node:
        for attr in node.attribute:
            for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
                found.extend(output_names(sub))
    return found


def value_info_names(gp: onnx.GraphProto) -> set[str]:
    """The names of every value_info entry of a graph and its subgraphs."""
    names = {v.name for v in gp.value_info}
    for node in gp.node:
        for attr in node.attribute:
            for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
                names |= value_info_names(sub)
    return names


def ort_run(source: onnx.ModelProto | bytes, feeds: Feeds) -> list[np.ndarray]:
    data = source.SerializeToString() if isinstance(source, onnx.ModelProto) else source
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def assert_sound(graph: Graph, original: onnx.ModelProto | bytes, feeds: Sequence[Feeds],
                 *, exact: bool = True) -> onnx.ModelProto:
    """The rewritten graph validates, exports a model the full checker accepts with the
    original's output names (every graph, bodies too), loads back, and computes what the
    original computes in onnxruntime (`exact`, or within rtol 1e-4 / atol 1e-5)."""
    graph.validate()
    exported = graph.to_onnx()
    onnx.checker.check_model(exported, full_check=True)
    source = original if isinstance(original, onnx.ModelProto) else onnx.load_from_string(
        original)
    kept, before = output_names(exported.graph), dict(output_names(source.graph))
    assert kept[0] == output_names(source.graph)[0]  # the model's interface
    for name, outputs in kept:  # bodies that are still there (a dead If takes its own)
        assert before[name] == outputs, name
    ge.graph.load(exported).validate()
    for inputs in feeds:
        got, want = ort_run(exported, inputs), ort_run(source, inputs)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            if exact:
                np.testing.assert_array_equal(g, w, strict=True)
            else:
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    return exported


def sidecar_feeds(path: Path, seed: int = 0) -> list[Feeds]:
    """Inputs from a vendored model's `.json` sidecar: random floats (and their negation, so
    both If branches run), all-ones masks, small token ids, a loop count of 3."""
    spec = json.loads(path.with_suffix(".json").read_text())
    rng = np.random.default_rng(seed)
    feeds: Feeds = {}
    for item in spec["inputs"]:
        name, shape, dtype = item["name"], item["shape"], np.dtype(item["dtype"])
        if dtype.kind == "f":
            feeds[name] = rng.standard_normal(shape).astype(dtype)
        elif "mask" in name:
            feeds[name] = np.ones(shape, dtype)
        elif not shape:
            feeds[name] = np.array(3, dtype)
        else:
            feeds[name] = rng.integers(0, 10, shape).astype(dtype)
    negated = {k: -v if v.dtype.kind == "f" else v for k, v in feeds.items()}
    return [feeds, negated]


def x_feeds(shape: Sequence[int] = (2, 3), seed: int = 0, **more: np.ndarray) -> list[Feeds]:
    """One feed of a float input "x" (plus `more`)."""
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal(shape).astype(np.float32), **more}]


def feeds_for(source: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs of a model with static input shapes (symbolic dims taken as 4)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in source.graph.input:
        tt = value.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 4 for d in tt.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        feeds[value.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def assert_fused(graph: Graph, source: onnx.ModelProto, tmp_path: Path,
                 feeds: Sequence[dict[str, np.ndarray]] | None = None,
                 *, tol: float = 1e-4) -> onnx.ModelProto:
    """The rewritten graph validates, saves a model the full checker accepts with the
    original's output names, and computes what the original does (rtol = atol = `tol`)."""
    graph.validate()
    path = tmp_path / "fused.onnx"
    graph.save(path)
    onnx.checker.check_model(str(path), full_check=True)
    saved = onnx.load(path)
    assert [o.name for o in saved.graph.output] == [o.name for o in source.graph.output]
    for inputs in feeds or [feeds_for(source, 0), feeds_for(source, 1)]:
        got, want = ort_run(saved, inputs), ort_run(source, inputs)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    return saved
