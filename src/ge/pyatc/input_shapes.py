"""pyatc's `--input_shape`: reading it, setting the inputs' shapes as atc does, and
checking that a model whose static dims it changed still computes what it did.

atc sets the shapes given, static dims included: re-batching a batch-1 export
(`input:8,3,224,224`) is routine in its scripts. Shape inference alone cannot tell whether
the model computes with the new shape: an export without dynamic axes may write its batch
into a Reshape's target (`[1, -1]` flattens a batch of 8 into one row, which infers fine),
and If/Loop bodies declare the old shapes. So after a static dim changed, the compiled model
is run in onnxruntime (`check_recomputed`): when only the batch changed (dim 0, from 1), on
a batch of the new size against the original model on each sample; otherwise once at the
new shape, to see that it runs. A model that fails either is refused (GE1701), nothing
written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ge.errors import GeError
    from ge.graph import Graph, TensorDesc

__all__ = ["ShapeChange", "check_recomputed", "compile_error", "parse_input_shape",
           "refine_output_shapes", "set_input_shapes"]


@dataclass
class ShapeChange:
    """What `set_input_shapes` changed of the model's static dims."""

    #: The static dims changed, in words (`dim 0 of input 'x' from 1 to 4`).
    changed: list[str] = field(default_factory=list)
    #: The graph outputs' declarations set aside (computed from the old shapes): the
    #: compilation gets them without a shape, `refine_output_shapes` declares anew.
    aside: list[TensorDesc] = field(default_factory=list)
    #: The inputs whose batch (dim 0) went from 1 to another size (or dynamic), when that
    #: is all that changed of static dims: the model can be checked sample by sample.
    batched: list[str] = field(default_factory=list)
    per_sample: bool = False
    #: The static dims made dynamic (`-1`), by input: (axis, the size it had). The check
    #: runs them at another size (at the old one it would test nothing: trial Q).
    dynamic: dict[str, list[tuple[int, int]]] = field(default_factory=dict)


#: The largest dim ONNX holds (dims are int64).
_MAX_DIM = 2**63 - 1


def parse_input_shape(text: str) -> dict[str, list[int]]:
    """`"x:1,3,224,224;y:2"` as `{"x": [1, 3, 224, 224], "y": [2]}` (CommandLineError for
    anything else: an empty dim, one that is no integer >= -1 or beyond int64, atc's range
    `n1~n2`). The name is what precedes the last `:`; an empty dim list is a scalar."""
    from ge.errors import CommandLineError

    shapes: dict[str, list[int]] = {}
    for item in (part.strip() for part in text.split(";")):
        if not item:
            continue
        name, sep, dims_text = item.rpartition(":")
        if not sep or not name:
            raise CommandLineError(f"--input_shape: {item!r} is not NAME:D1,D2,...")
        parts = [d.strip() for d in dims_text.split(",")] if dims_text.strip() else []
        dims = [_dim(dim, i, name, dims_text) for i, dim in enumerate(parts)]
        if name in shapes:
            raise CommandLineError(f"--input_shape: input {name!r} is given twice")
        shapes[name] = dims
    if not shapes:
        raise CommandLineError(f"--input_shape: {text!r} names no input")
    return shapes


def _dim(dim: str, index: int, name: str, dims_text: str) -> int:
    """Dim `index` of input `name` (`dims_text`) as given, or CommandLineError saying why
    it is none."""
    from ge.errors import CommandLineError

    where = f"dim {index} of input {name!r} ({dims_text.strip()!r})"
    if not dim:
        raise CommandLineError(f"--input_shape: {where} is empty: give every dim, -1 to keep "
                               "one dynamic")
    if "~" in dim:
        raise CommandLineError(
            f"--input_shape: {where} is {dim!r}, a range (atc's n1~n2), which ge does not "
            "support: give -1 to keep the dim dynamic (as the model declares it), or a size "
            "to fix it")
    if not re.fullmatch(r"-?[0-9]+", dim) or int(dim) < -1:
        raise CommandLineError(f"--input_shape: {where} is {dim!r}, not an integer >= -1 "
                               "(-1 keeps a dim dynamic)")
    if int(dim) > _MAX_DIM:
        raise CommandLineError(f"--input_shape: {where} is {dim}, beyond the int64 range of "
                               f"ONNX's dims (at most {_MAX_DIM})")
    return int(dim)


def set_input_shapes(graph: object, shapes: dict[str, list[int]]) -> ShapeChange:
    """Set the shapes of the graph's inputs as atc does: a size fixes a dim, static or not
    (re-batching a batch-1 export), and `-1` keeps a dynamic dim as the model declares it
    and makes a static one dynamic; a named dim given a size in one input takes it in every
    input declaring it. An unknown name, another rank or two sizes for one name is a
    CommandLineError. When a static dim changed, the shapes the model declares beyond its
    inputs were computed from the old ones: those of the graph outputs are set aside
    (`ShapeChange.aside`), and their dims forgotten with those of If/Loop/Scan bodies'
    outputs and formal inputs, for inference to compute anew."""
    from ge.errors import CommandLineError
    from ge.graph import Graph

    assert isinstance(graph, Graph)
    nodes = {node.get_output_names()[0]: node for node in graph.get_data_nodes()}
    unknown = [name for name in shapes if name not in nodes]
    if unknown:
        # "x:1,3 y:4" reads as the input "x:1,3 y": inputs are separated by ';'
        hint = ("; inputs are separated by ';' (\"x:1,3;y:4\")"
                if any(":" in n or n != n.strip() or " " in n for n in unknown) else "")
        raise CommandLineError(
            f"--input_shape: {', '.join(repr(n) for n in unknown)} "
            f"{'is not an input' if len(unknown) == 1 else 'are not inputs'} of the model "
            f"(inputs: {', '.join(nodes) or 'none'}){hint}")
    change = ShapeChange()
    batch_only = True
    planned: dict[str, list[int | str]] = {}
    for name, dims in shapes.items():
        current = nodes[name].get_output_desc(0).shape
        if current.is_unknown_rank():
            planned[name] = list(dims)
            continue
        if len(current) != len(dims):
            raise CommandLineError(
                f"--input_shape: input {name!r} has rank {len(current)} "
                f"({list(current)}), the shape given has rank {len(dims)} ({dims})")
        planned[name] = []
        for i, (old, new) in enumerate(zip(current, dims)):
            static = isinstance(old, int) and old >= 0
            if static and new != old:
                change.changed.append(f"dim {i} of input {name!r} from {old} to "
                                      f"{'a dynamic dim' if new == -1 else new}")
                if new == -1:
                    change.dynamic.setdefault(name, []).append((i, int(old)))
                if i == 0 and old == 1:
                    change.batched.append(name)
                else:
                    batch_only = False
            planned[name].append(old if new == -1 and not static else new)
    sizes = _named_sizes(nodes, shapes)
    for name, node in nodes.items():  # a named dim fixed in one input is fixed in all
        dims_now = planned.get(name)
        if dims_now is None:
            shape = node.get_output_desc(0).shape
            dims_now = [] if shape.is_unknown_rank() else list(shape)
        if any(isinstance(d, str) and d in sizes for d in dims_now):
            planned[name] = [sizes[d][0] if isinstance(d, str) and d in sizes else d
                             for d in dims_now]
    for name, new_dims in planned.items():
        node = nodes[name]
        desc = node.get_output_desc(0)
        desc.set_shape(new_dims)
        desc.set_origin_shape(new_dims)
        node.update_output_desc(0, desc)
    if change.changed:
        change.per_sample = batch_only
        change.aside = _forget_declared_shapes(graph)
    return change


def _forget_declared_shapes(graph: Graph) -> list[TensorDesc]:
    """Forget the dims `graph` declares beyond its inputs (ranks and element types kept):
    its outputs' (returned, to declare again where inference gives none) and, in every
    body, its outputs' and formal inputs' (If branches declared `[1, 3]` outputs that
    inference then contradicted: trial P)."""
    from ge.graph import Shape, TensorDesc
    from ge.graph.value_info import holds_non_tensor

    def unshaped(desc: TensorDesc) -> TensorDesc:
        """`desc` with every dim unknown (its rank kept: onnxruntime refuses a Loop body
        input of unknown rank; a scalar stays one); a sequence's or optional's as it is
        (a tensor desc would declare another type: trial Q)."""
        if holds_non_tensor(desc):
            return desc
        shape = desc.shape
        return TensorDesc(shape if shape.is_unknown_rank() else Shape([-1] * len(shape)),
                          data_type=desc.data_type)

    aside: list[TensorDesc] = []
    for g in (graph, *graph.get_all_subgraphs()):
        net_output = g.get_net_output()
        if net_output is not None:
            for i in range(net_output.get_inputs_size()):
                declared = net_output.get_input_desc(i)
                if g is graph:
                    aside.append(declared)
                net_output.update_input_desc(i, unshaped(declared))
        if g is not graph:
            for node in g.get_data_nodes():
                node.update_output_desc(0, unshaped(node.get_output_desc(0)))
    return aside


def _named_sizes(nodes: dict[str, Any], shapes: dict[str, list[int]]
                 ) -> dict[str, tuple[int, str]]:
    """The size `shapes` gives each named dim of the inputs (`nodes`), with the input it is
    given in: the model declares one size by one name, so fixing `N` in `x` fixes it in `y`
    too (y stayed `['N', 8]` beside an x of 4, trial A of stop 47). Two sizes for one name
    are a CommandLineError."""
    from ge.errors import CommandLineError

    sizes: dict[str, tuple[int, str]] = {}
    for name, dims in shapes.items():
        current = nodes[name].get_output_desc(0).shape
        if current.is_unknown_rank():
            continue
        for old, new in zip(current, dims):
            if not isinstance(old, str) or new < 0:
                continue
            if old in sizes and sizes[old][0] != new:
                size, where = sizes[old]
                raise CommandLineError(
                    f"--input_shape: dim {old!r} is {size} in input {where!r} and {new} in "
                    f"input {name!r}: the model declares one size by one name")
            sizes.setdefault(old, (new, name))
    return sizes


_ADVICE = ("it may compute with the shape it declares (an export without dynamic axes "
           "writes it into Reshape targets and constants): give the shape it declares, or "
           "export the model with dynamic axes")


def compile_error(err: GeError, change: ShapeChange, model: Path | None = None,
                  options: Mapping[str, str] | None = None) -> GeError:
    """The error to report for a compilation that failed after `change`: said as what the
    flag asked of a model that does not compute with it (GE1701), with what failed; the
    compilation's own words (a pass's bug, an invalid input model) would blame ge or the
    model for what the flag did (trial P). Unless the `model` file (compiled again with
    `options`, as given) fails too: then its own error is the one (trial X: a model that
    never compiles was said not to compile "with" the flag)."""
    import warnings

    import ge
    from ge.errors import CommandLineError, GeError

    if not change.changed:
        return err
    if model is not None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ge.compile(str(model), options=options)
        except GeError as own:
            return own
    failed = f"[{err.code}] {_first_problem(err.message)}"
    found = CommandLineError(f"--input_shape changed {'; '.join(change.changed)}, and the "
                             f"model does not compile with it: {_ADVICE} (what failed: "
                             f"{failed})", nodes=list(err.nodes))
    found.__cause__ = err
    return found


#: Where the compilation's own explanation of a failure begins, cut from what is quoted.
_EXPLANATIONS = re.compile(r"(?: This is a bug in ge|[.;] The input model is invalid as given"
                           r"|; shape: | \(stage [A-Za-z]+\)$)")


def _first_problem(message: str) -> str:
    """The first problem a compilation's error message states, without the explanation
    it adds (`This is a bug in ge ...`) and the problems after it."""
    cut = _EXPLANATIONS.search(message)
    return (message[:cut.start()] if cut else message).rstrip(" .;")


def refine_output_shapes(graph: object, change: ShapeChange) -> None:
    """After setting input shapes, declare the graph outputs with the shapes inferred for
    them (the model's declared output shapes would keep the old symbolic dims; the
    declarations `change` set aside are compared instead, and one is declared again where
    inference gives no rank: a typed output without a shape fails onnx's checker). A dim
    inference could not tell (-1, or a name it made up: `unk__0`) keeps the declared name
    when the inputs still have it: `-1` keeps an input's dim as declared, so an output
    [N, 8, H, W] stays so, not [4, 8, unk__0, unk__1] (trial A)."""
    from ge.graph import Graph

    assert isinstance(graph, Graph)
    net_output = graph.get_net_output()
    if net_output is None:
        return
    aside = change.aside
    names = {dim for node in graph.get_data_nodes()
             for dim in node.get_output_desc(0).shape if isinstance(dim, str)}
    for i in range(net_output.get_inputs_size()):
        producer, index = net_output.get_in_data_nodes_and_port_indexes(i)
        inferred = producer.get_output_desc(index)
        if inferred.shape.is_unknown_rank():
            if aside:
                net_output.update_input_desc(i, aside[i])
            continue
        declared = aside[i].shape if aside else net_output.get_input_desc(i).shape
        if not declared.is_unknown_rank() and len(declared) == len(inferred.shape):
            dims = [old if isinstance(old, str) and old in names and (
                new == -1 or (isinstance(new, str) and new not in names)) else new
                for old, new in zip(declared, inferred.shape)]
            inferred.set_shape(dims)
            inferred.set_origin_shape(dims)
        net_output.update_input_desc(i, inferred)


def check_recomputed(model: Path, compiled: Graph, change: ShapeChange) -> str | None:
    """After `change` changed static dims: run the compiled model in onnxruntime at the
    new shapes (generated inputs; a dim made dynamic at another size than it had) and,
    when only the batch changed (`per_sample`), compare it with the original model run on
    each sample. CommandLineError (GE1701) when it does not run or computes otherwise; a
    warning's text when it cannot be checked here (an operator nothing ge sees implements,
    generated inputs the original model does not take either), else None."""
    import numpy as np
    import onnx

    from ge.errors import CommandLineError, GeError
    from ge.session.comparison import precision_floor
    from ge.session.compile_arguments import DEFAULT_ATOL, DEFAULT_RTOL
    from ge.session.inputs import generate_inputs
    from ge.session.runner import ModelRunner
    from ge.session.verification import narrow_float_outputs, random_output_reasons

    if not change.changed:
        return None
    said = "; ".join(change.changed)
    unchecked = f"--input_shape changed {said}: the compiled model could not be checked"
    try:
        feeds = _resized(generate_inputs(compiled), change)
        runner = ModelRunner(compiled)
    except GeError as err:
        return f"{unchecked} ({err.message})"
    source = onnx.load(str(model))
    try:
        got = runner.run(feeds)
    except GeError as err:
        try:  # inputs the original does not take either (an index out of its table)?
            ModelRunner(source).run(generate_inputs(source))
        except GeError as original_err:
            return f"{unchecked}: the model does not run on generated inputs either " \
                   f"({_first_problem(original_err.message)})"
        raise CommandLineError(f"--input_shape changed {said}, and the compiled model does "
                               f"not run with it: {_ADVICE} (onnxruntime: "
                               f"{_first_problem(err.message)})") from err
    batch = len(feeds[change.batched[0]]) if change.batched else 0
    if not change.per_sample or batch == 0:
        return None
    original = ModelRunner(source)
    samples = [original.run({name: value[i:i + 1] if name in change.batched else value
                             for name, value in feeds.items()}) for i in range(batch)]
    random = random_output_reasons(source)
    narrow = narrow_float_outputs(source)

    def close(name: str, got: Any, want: Any) -> bool:
        """As `ge.verify` compares at its default tolerances: a float16 or bfloat16 output,
        or one computed in such a type (`narrow_float_outputs`), held to that type's
        precision (trials W and X: a folded float16 BatchNormalization one step off
        refused a re-batch that --verify accepts)."""
        want = np.asarray(want)
        rtol, atol = precision_floor(want, DEFAULT_RTOL, DEFAULT_ATOL, narrow.get(name))
        return bool(np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True))

    for name, value in got.items():
        value = np.asarray(value)
        parts = [np.asarray(sample[name]) for sample in samples]
        axis = _batch_axis([p.shape for p in parts], value.shape)
        problem = None
        if axis is None:
            problem = (f"has shape {list(value.shape)} where each sample gives "
                       f"{list(parts[0].shape)}: {_ADVICE}")
        elif name in random:
            continue  # (its shape fits; its values are drawn at random)
        elif axis < 0:  # the samples' own shape: one value, the same for every sample
            if not all(close(name, p, parts[0]) for p in parts[1:]):
                problem = (f"has the shape of each sample's ({list(value.shape)}) while "
                           "the samples give it different values: the model computes "
                           "across the batch (a reduction or a choice over dim 0)")
            elif not close(name, value, parts[0]):
                problem = "differs from the value every sample gives it"
        else:
            want = np.concatenate(parts, axis=axis)
            if not close(name, value, want):
                problem = (f"differs from the samples' (max abs difference "
                           f"{float(np.max(np.abs(value - want))):.3g}): the model computes "
                           "across the batch, or with the batch it declares")
        if problem is not None:
            raise CommandLineError(
                f"--input_shape changed {said}, and the compiled model does not compute on "
                f"a batch of {batch} what the model computes on each sample: output "
                f"{name!r} {problem}")
    return None


def _resized(feeds: dict[str, Any], change: ShapeChange) -> dict[str, Any]:
    """`feeds` with each dim made dynamic at another size than the one it had (generated
    inputs take 2 for a dynamic dim: the old size of lstm_tagger's batch, trial Q): one
    more, the first slice repeated."""
    import numpy as np

    for name, dims in change.dynamic.items():
        value = feeds.get(name)
        if not isinstance(value, np.ndarray):
            continue
        for axis, old in dims:
            if axis < value.ndim and value.shape[axis] == old:
                value = np.concatenate([value, np.take(value, [0], axis=axis)], axis=axis)
        feeds[name] = value
    return feeds


def _batch_axis(parts: list[tuple[int, ...]], shape: tuple[int, ...]) -> int | None:
    """Where an output of `shape` on the whole batch stacks the shapes it has on each
    sample (`parts`): the axis where each has 1 and the batch has their count (axis 0
    mostly; a Loop's scan output stacks its iterations first, so its batch is axis 1); -1
    when it has the samples' own shape (computed from no batched input, or across the
    batch); None when the shapes fit neither."""
    first = parts[0]
    if any(part != first for part in parts) or len(first) != len(shape):
        return None
    if shape == first:
        return -1
    axes = [i for i, (one, whole) in enumerate(zip(first, shape)) if one != whole]
    if len(axes) != 1 or first[axes[0]] != 1 or shape[axes[0]] != len(parts):
        return None
    return axes[0]
