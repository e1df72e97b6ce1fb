"""Whether a problem that failed a compilation is the input model's own: the checks run
only when a compilation fails (validating every input would cost every compilation), so
that an error says "the input model has this problem too" rather than blaming a pass."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import onnx

from ge.errors import GraphValidationError, ShapeInferenceError, ValidationProblem
from ge.graph import Graph
from ge.graph.model_io import check_model_full, weightless
from ge.graph.sparse import has_sparse_initializers

__all__ = ["inference_failure", "input_graph", "with_input_problems", "with_input_verdict"]


def with_input_verdict(err: GraphValidationError, source: Path | None
                        ) -> GraphValidationError:
    """`err` (onnx's checker refused the compiled model), saying whether the input model
    fails the checker too: then ge did not make it invalid (a graph output typed without a
    shape, which onnxruntime runs)."""
    if source is None or not any(p.kind == "onnx-checker" for p in err.problems):
        return err
    try:
        fails = _fails_checker(source)
    except Exception:  # a verdict is never worth another error
        return err
    if not fails:
        return err
    return _with_verdict(
        err, lambda p: p.kind == "onnx-checker",
        f" (the input model {source} fails this check too: it is not the compilation's "
        "doing)")


def _fails_checker(source: Path) -> bool:
    """Whether the model file fails onnx's full checker as ge's saving runs it
    (`check_model_full`: its inference given each sparse initializer as the dense tensor it
    stands for, where onnx's own refuses one to every operator); False when it cannot
    tell."""
    try:
        onnx.checker.check_model(str(source), full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError):
        model = onnx.load(str(source), load_external_data=False)
        if not has_sparse_initializers(model.graph):
            return True
        checked = weightless(model)  # (its external tensors as typed inputs)
        if checked is None:
            return False
        try:
            check_model_full(checked)
        except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError):
            return True
    return False


def _with_verdict(err: GraphValidationError, concerned: Callable[[ValidationProblem], bool],
                  verdict: str) -> GraphValidationError:
    """`err` with `verdict` (that the input model has the problem too) added to each of its
    problems `concerned` is true of, without the advice meant for a pass that made one; its
    stage kept. The pass the error blames (`LastChanges.blame`: a sentence
    after the problems, its pass and location) stays when a problem is not the input's,
    and goes when every one is: then no pass made any."""
    new = GraphValidationError([
        ValidationProblem(p.kind, p.nodes, p.message + verdict, p.graph, place=p.place)
        if concerned(p) else p
        for p in err.problems])
    new.stage = err.stage
    # every problem the input's own: an error about the model as given (its file named)
    new.about_model = all(concerned(p) for p in err.problems)
    if not new.about_model:
        listed = GraphValidationError(err.problems).message  # the message before the blame
        if err.message.startswith(listed):
            new.message += err.message[len(listed):]
        new.pass_name, new.location = err.pass_name, err.location
    return new


def inference_failure(input_graph: Graph, given: Graph) -> str | None:
    """Why shape inference of the model as given fails (the caller's graph `given` on a
    copy: nothing of it changes), or None when it does not: a GE1305 blamed on a pass whose
    model fails without it too is the model's (trial S). Run only when a compilation failed
    so."""
    from ge.ops import infer_shapes

    try:
        infer_shapes(input_graph.clone() if input_graph is given else input_graph,
                     strict=True)
    except ShapeInferenceError as err:
        first = err.nodes[0] if err.nodes else ""
        return f"at node {first!r}" if first else "too"
    return None


def input_graph(model: str | os.PathLike[str] | onnx.ModelProto | bytes | Graph, given: Graph,
                 unchanged: bool) -> Graph:
    """The model as `ge.compile` was given it, to check what it already had: `given` when
    `unchanged` (a Graph compiled in place is given back as it was when the compilation
    fails; with `opset` the passes ran on a converted copy), else the proto or file loaded
    again, a file without its external data (the nodes are checked, not the weights)."""
    import ge.graph
    from ge.graph.allocation import no_gc_pauses
    from ge.graph.onnx_import import model_to_graph

    if unchanged or isinstance(model, Graph):
        return given
    if isinstance(model, (onnx.ModelProto, bytes, bytearray, memoryview)):
        return ge.graph.load(model if isinstance(model, (onnx.ModelProto, bytes))
                             else bytes(model))
    with no_gc_pauses():  # (as ge.graph.load: the collector would scan every new node)
        return model_to_graph(onnx.load(os.fspath(model), load_external_data=False))


def with_input_problems(err: GraphValidationError, input_graph: Graph,
                         source: Path | None) -> GraphValidationError:
    """`err` (the final validation found problems in the compiled graph), saying of each
    problem the input model has too that it is not the compilation's doing, without the
    advice meant for a pass that made it (`ValidationProblem.advice`). Checked only when
    the compilation fails so: validating every input would add about 6% to every
    compilation (0.4 s of 6 s for 65,000 nodes)."""
    from ge.graph.validation import find_problems

    def key(p: ValidationProblem) -> tuple[str, str, tuple[str, ...], str]:
        return p.graph, p.kind, p.nodes, p.message

    try:
        before = {key(p) for p in find_problems(input_graph)}
    except Exception:  # a verdict is never worth another error
        return err
    if not any(key(p) in before for p in err.problems):
        return err
    model = "the input model" + (f" {source}" if source is not None else "")
    return _with_verdict(
        err, lambda p: key(p) in before,
        f" ({model} has this problem too: it is not the compilation's doing; fix it in the "
        "model, or in the exporter that wrote it)")
