"""The default engine steps of the pipeline: shape inference and final validation.

`infer_shape` runs between `BeforeInferShape` and `AfterInferShape`: it types every node of
the model (subgraphs included) with `ge.ops.infer_shapes`, strictly, so that a node onnx
rejects (a MatMul of [2, 3] by [4, 5], an input without a type) stops the compilation with
`ShapeInferenceError` (GE1305, stage "InferShape") instead of leaving unknown descs behind;
so does an operator of ONNX's own domains that ONNX does not define at the model's opset
(`FooBar`, or `Gelu` at opset 17), which onnx's inference would pass over.
It runs in a graph transaction: a failing inference changes nothing.

`final_validation` runs last: `Graph.validate()`, so a compilation never returns a broken
graph; a problem raises `GraphValidationError` (GE1003, stage "FinalValidation") listing
every problem with its nodes.

Built-in fusion and origin-graph optimisation are not functions: the scheduler runs the
built-in passes registered for those steps (`ge.compiler.builtin`). A compilation given other
function steps (`compile_graph(steps=...)`) runs those instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import onnx

from ge.errors import (
    GeError,
    GraphValidationError,
    ShapeInferenceError,
    UnsupportedModelError,
    ValidationProblem,
)
from ge.graph.node import Node
from ge.graph.places import graph_label, ir_node_label
from ge.graph.tensor_desc import Dim
from ge.graph.validation import unknown_operators
from ge.passes.source import warn_user

if TYPE_CHECKING:
    from ge.compiler.last_changes import LastChanges
    from ge.graph import Graph

__all__ = [
    "FINAL_VALIDATION_STAGE",
    "INFER_SHAPE_STAGE",
    "check_operators_known",
    "check_training_info",
    "final_validation",
    "infer_shape",
    "undefined_operators",
    "warn_contradicted_outputs",
]

#: The `stage` of the errors the default engine steps raise.
INFER_SHAPE_STAGE = "InferShape"
FINAL_VALIDATION_STAGE = "FinalValidation"


def _check_opset_known(graph: Graph) -> None:
    """GE1305 for a model importing a standard opset newer than onnx knows: nothing can
    check its operators, and runtimes refuse it."""
    import onnx

    version = graph.get_opset_version("")
    newest = onnx.defs.onnx_opset_version()
    if version is not None and version > newest:
        raise ShapeInferenceError(
            f"graph {graph.name!r} imports opset {version} of the standard domain (ai.onnx); "
            f"onnx {onnx.__version__} knows opsets up to {newest}, and runtimes refuse the "
            "model", stage=INFER_SHAPE_STAGE)


def check_operators_known(graph: Graph) -> None:
    """GE1305 (stage InferShape) for a model whose operators onnx cannot know: a standard
    opset newer than onnx's, or an operator of ONNX's own domains that ONNX does not define
    at the model's opset (and no function of the model defines). Shape inference checks this
    first; `ge.compile` also checks it before running the original model for verification,
    which onnxruntime would refuse with a C++ message: the diagnosis of such a model is
    ge's, the same with and without verification."""
    root = graph.root_graph()
    _check_opset_known(root)
    unknown = unknown_operators(root)
    if unknown:
        more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
        message = (_newer_than_imported(root, unknown[0])
                   or _written_by_onnxruntime(root, unknown[0]) or unknown[0].message)
        node = next((n for n in unknown[0].subjects if isinstance(n, Node)), None)
        owner = node.owner_graph if node is not None else None
        where = (graph_label(owner, as_read=True) if owner is not None
                 else f"graph {unknown[0].graph!r}")  # (a body by its owner: graph_label)
        raise ShapeInferenceError(f"{where}: {message}{more}",
                                  stage=INFER_SHAPE_STAGE,
                                  nodes=[n for p in unknown for n in p.nodes])


def check_training_info(graph: Graph) -> None:
    """GE1204 (`UnsupportedModelError`) for a model whose `training_info` reads or updates
    values of its inference graph (an initializer the algorithm updates, a learning rate it
    reads): the passes treat initializers as constants and fold, merge or remove them, so
    the training graphs kept beside would name values that are gone or stale (trial Y), and
    `opset=` conversion drops training_info altogether. Nothing is run or written."""
    extras = graph.root_graph().model.extras
    if extras is None or not extras.training_info:
        return
    inputs = {node.name for node in graph.root_graph().get_direct_nodes()
              if node.type == "Data"}
    named: dict[str, None] = {}
    for info in extras.training_info:
        # a binding's key names an initializer of the inference graph or of the algorithm
        # itself (its own state, an iteration count: trial AA), which is not shared
        own = {t.name for body in (info.algorithm, info.initialization)
               for t in body.initializer}
        for binding in (*info.update_binding, *info.initialization_binding):
            if binding.key not in own:
                named[binding.key] = None
        for body in (info.algorithm, info.initialization):
            named.update(dict.fromkeys(_free_names(body)))
    shared = [name for name in named if name and name not in inputs]
    if not shared:
        return
    listed = ", ".join(repr(n) for n in shared[:5]) + (" ..." if len(shared) > 5 else "")
    raise UnsupportedModelError(
        f"the model's training_info reads or updates values of its inference graph "
        f"({listed}), which ge's passes would fold, merge or remove as constants: ge "
        "compiles inference graphs; to compile this one, remove training_info first "
        "(`del model.training_info[:]` with onnx)")


def _free_names(graph: onnx.GraphProto) -> list[str]:
    """The value names a GraphProto (its bodies included) reads without defining them."""
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    defined |= {t.values.name for t in graph.sparse_initializer}
    free: list[str] = []
    for node in graph.node:
        free += [name for name in node.input if name and name not in defined]
        for attr in node.attribute:
            if attr.type not in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                continue
            for body in (attr.g,) if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
                free += [name for name in _free_names(body) if name not in defined]
        defined.update(node.output)
    free += [o.name for o in graph.output if o.name not in defined]
    return free


def undefined_operators(graph: Graph) -> list[str]:
    """`domain::op` of each operator of `graph`'s model (bodies included, with the body's
    path: `acme::Mystery (in loop.body)`) that nothing ge sees defines: not ONNX's (its
    preview domains included), not onnxruntime's, no function of the model, no custom
    operator registered (a plugin's, for the compilation asking). ge compiles around such
    a node, its outputs typed as the model types them, but cannot check, verify or run it."""
    from ge.graph.graph import CONST, DATA, NET_OUTPUT
    from ge.graph.subgraphs import body_path
    from ge.ops.registry import get_custom_op
    from ge.ops.runtime_ops import runtime_domains
    from ge.ops.schemas import STANDARD_DOMAINS

    root = graph.root_graph()
    model = root.model
    defined = {(f.domain, f.name) for f in (model.functions if model is not None else ())}
    found: dict[str, None] = {}
    known_domains = frozenset(STANDARD_DOMAINS)
    asked_runtime = False  # (asking imports onnxruntime: only for a node of another domain)
    for node in root.get_all_nodes():
        if node.domain not in known_domains and not asked_runtime:
            known_domains |= runtime_domains()
            asked_runtime = True
        key = (node.domain, node.type)
        if (node.domain in known_domains or node.type in (DATA, CONST, NET_OUTPUT)
                or key in defined or get_custom_op(node.type, node.domain) is not None):
            continue
        owner = node.owner_graph
        where = body_path(owner) if owner is not None else ""
        found[f"{node.domain}::{node.type}" + (f" (in {where})" if where else "")] = None
    return list(found)


#: Domains an onnxruntime session imports in the model it saves (`optimized_model_filepath`),
#: which no exporter writes: the model was saved from a session.
_SESSION_DOMAINS = frozenset({"com.microsoft.nchwc", "com.microsoft.experimental",
                              "ai.onnx.training"})


def _newer_than_imported(root: Graph, problem: ValidationProblem) -> str | None:
    """What to say of an operator the model's opset lacks and a later ONNX opset has (a
    LayerNormalization, opset 17's, in a model importing 16): the exporter wrote an operator
    newer than the opset it declares (trial JJ: it was blamed on onnxruntime's optimiser,
    because onnxruntime defines a LayerNormalization of its own at every opset)."""
    from ge.graph.validation import newer_operators, redeclaring_advice
    from ge.ops.runtime_ops import runtime_defines_in_onnx_domain

    for node, version, since in newer_operators(root):
        owner = node.owner_graph
        if owner is None or owner.name != problem.graph or node.name not in problem.nodes:
            continue
        runs = runtime_defines_in_onnx_domain(node.type, node.domain, version)
        imported = set(root.opset_imports)
        saved = (f"; the model was saved from an onnxruntime session (it imports "
                 f"{', '.join(sorted(_SESSION_DOMAINS & imported))}), whose optimiser writes "
                 f"{node.type} at any opset" if runs and _SESSION_DOMAINS & imported else "")
        rejected = (f"onnxruntime runs it as an operator of its own{saved}, but onnx.checker "
                    "rejects the model" if runs else "onnx.checker and runtimes reject the model")
        return (f"{ir_node_label(node)}: {node.type} is an operator of opset "
                f"{since} and later, and the model imports opset {version}; {rejected}, "
                "and ge writes no model it rejects: "
                f"{redeclaring_advice(root, node.domain, version, since)}; --opset cannot "
                "convert it: onnx's converter adapts only the operators of the model's opset")
    return None


def _written_by_onnxruntime(root: Graph, problem: ValidationProblem) -> str | None:
    """What to say of an operator ONNX lacks that onnxruntime defines in ONNX's own domain
    (its optimiser writes `SimplifiedLayerNormalization` there): onnxruntime runs the model,
    but onnx.checker rejects it, so ge, which never writes such a model, cannot compile it."""
    from ge.ops.runtime_ops import runtime_defines_in_onnx_domain

    for g in (root, *root.get_all_subgraphs()):
        if g.name != problem.graph:
            continue
        for name in problem.nodes:
            if not g.has_node(name):
                continue
            node = g.find_node_by_name(name)
            version = g.get_opset_version(node.domain)
            if version is None or not runtime_defines_in_onnx_domain(
                    node.type, node.domain, version):
                continue
            return (f"{ir_node_label(node)}: onnxruntime defines {node.type} in "
                    f"domain {node.domain or 'ai.onnx'!r} at opset {version}, ONNX does not "
                    "(onnxruntime's optimiser writes it there, so the model was most likely saved "
                    "from an onnxruntime session); onnx.checker rejects the model, and ge "
                    "writes no model it rejects: compile the model as it was before it was "
                    "optimised")
    return None


def infer_shape(graph: Graph, options: Mapping[str, str]) -> None:
    """Infer the output descs of the whole model; GE1305 (stage InferShape) on failure."""
    from ge.ops import infer_shapes
    from ge.ops.expanded_defaults import explicit_expanded_defaults

    check_operators_known(graph)
    try:
        with graph.transaction():
            # (what onnx cannot infer nor check unless written out: `ge.ops.expanded_defaults`)
            explicit_expanded_defaults(graph.root_graph())
            infer_shapes(graph.root_graph(), strict=True)
    except ShapeInferenceError as err:
        err.stage = INFER_SHAPE_STAGE
        raise
    except Exception as exc:
        nodes = exc.nodes if isinstance(exc, GeError) else ()
        raise ShapeInferenceError(
            f"shape inference of graph {graph.root_graph().name!r} failed: "
            f"{type(exc).__name__}: {exc}",
            stage=INFER_SHAPE_STAGE,
            nodes=nodes,
        ) from exc


def warn_contradicted_outputs(graph: Graph, last_changes: LastChanges | None = None) -> None:
    """Check the graph outputs' declared dims against what shape inference gives from the
    inputs (the scheduler's, which knows what the passes changed). A declared size the
    inputs give another size for is ShapeInferenceError (GE1305, stage InferShape): onnx's
    checker rejects such a model, so it could never be written (it was a warning, and the
    compilation then failed when saved: trial S). A declared size the inputs give a
    symbol for (`[1, 5, 4]` for `[batch, seq, 4]`, an export with dynamic axes for its
    inputs only) is a `CompileWarning`: the passes take the inferred dims, and the output
    keeps its declared type. Where a pass changed a node upstream of the output (at
    BeforeInferShape, before the types were known), that pass is named: the export is
    then likely right and the pass changed the output's shape. An output computed from an
    operator whose inferred dims may be wrong (`UNSOUND_DIMS`) is left out: no pass trusts
    those dims, and the declared ones may well be right."""

    from ge.compiler.builtin._support import unsound_dims
    from ge.errors import CompileWarning, ShapeInferenceError
    from ge.ops.model_inference import contradicted_outputs

    net_output = graph.get_net_output()
    outputs = [net_output.name] if net_output is not None else []
    contradicted = contradicted_outputs(graph)
    unsound = unsound_dims(graph) if contradicted else set()
    for name, said, got, producer in contradicted:
        if producer in unsound:
            continue  # inference may be what is wrong there (an STFT's: trial GG)
        read = [producer.name, *outputs]
        blamed = last_changes.blame(graph, read) if last_changes is not None else None
        sizes = [i for i, (d, g) in enumerate(zip(said, got, strict=True))
                 if isinstance(d, int) and d >= 0 and isinstance(g, int) and g >= 0
                 and d != g]
        if sizes:
            cause = ("correct the output's declared type in the model" if blamed is None else
                     f"before inference,{blamed.sentence.removeprefix(';')}: that pass may "
                     "have changed the output's shape")
            raise ShapeInferenceError(
                f"graph output {name!r} is declared {_dims_text(said)} but its inputs give "
                f"{_dims_text(got)} (dim {sizes[0]}: {said[sizes[0]]} declared, "
                f"{got[sizes[0]]} computed by {producer.type} node {producer.name!r}): "
                f"onnx's checker rejects a model whose output contradicts its declared size, "
                f"so ge cannot write it; {cause}",
                stage=INFER_SHAPE_STAGE, nodes=(producer.name,))
        if blamed is None:
            cause = "Export the output with dynamic axes too"
        else:
            cause = (f"Before inference,{blamed.sentence.removeprefix(';')}: that pass may "
                     "have changed the output's shape (--verify compares the compiled model "
                     "with the original)")
        warn_user(CompileWarning(
            f"graph output {name!r} is declared {_dims_text(said)} but its inputs give "
            f"{_dims_text(got)}: the passes take {_dims_text(got)} (the declared type is "
            f"written back as it is; onnxruntime warns when a run contradicts it). {cause}"))


def _dims_text(dims: list[Dim]) -> str:
    return "[" + ", ".join("?" if isinstance(d, int) and d < 0 else str(d) for d in dims) + "]"


def final_validation(graph: Graph, options: Mapping[str, str]) -> None:
    """Check every IR invariant of the compiled graph; GE1003 (stage FinalValidation)."""
    try:
        graph.root_graph().validate()
    except GraphValidationError as err:
        err.stage = FINAL_VALIDATION_STAGE
        raise
