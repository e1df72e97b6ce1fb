"""Running one pass the engine's way, outside a compilation.

`run_pass` is what the scheduler does for one pass at its stage, nothing more: shape
inference first when the pass runs after `BeforeInferShape` and the model is not typed yet
(the engine's `infer_shape` step), then one instance of the pass on the root graph and on
every live subgraph, each invocation in a checked transaction (`ge.compiler.invocation`):
a failing pass raises the engine's `PassRunError` (E13028) and leaves the graph as it found
it. The model is a path, an `onnx.ModelProto` or a `Graph`; a graph is copied unless
`in_place=True`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import onnx

from ge.compiler.invocation import Invocation, create_instance, is_live
from ge.compiler.options import parse_options
from ge.compiler.pass_failure import describe_exception, run_error
from ge.compiler.pass_registry import PassOrigin, RegisteredPass, builtin_entries
from ge.compiler.report import PassRunRecord
from ge.compiler.steps import infer_shape
from ge.errors import PassRunError
from ge.es.opset import opset_scope
from ge.graph import DataType, Graph
from ge.graph import load as load_graph
from ge.ops.memo import InferenceMemo, inference_memo_scope
from ge.passes.base import FusionBasePass
from ge.passes.context import PassContext
from ge.passes.found_matches import FoundMatch
from ge.passes.found_matches import find_matches as _find_matches
from ge.passes.registry import PASS_KIND_FUSION_BASE, PASS_KIND_PATTERN_FUSION, PassDescriptor
from ge.passes.stage import PassStage
from ge.testing.tracebacks import without_engine_frames

if TYPE_CHECKING:
    from ge.testing.passes import PassSet

__all__ = [
    "ModelLike",
    "PassApplication",
    "PassLike",
    "apply_pass",
    "as_graph",
    "checked_options",
    "find_matches",
    "is_typed",
    "resolve_pass",
    "run_pass",
]

#: A model as the helpers take it: a file path, serialized bytes, a ModelProto or a Graph.
ModelLike = Graph | onnx.ModelProto | str | os.PathLike[str] | bytes
#: A pass as the helpers take it: a registered class, an instance of one, a name (with
#: `passes=`), or a `RegisteredPass` / `PassDescriptor`.
PassLike = type | FusionBasePass | str | RegisteredPass | PassDescriptor


def checked_options(options: Mapping[str, str] | None) -> dict[str, str]:
    """`options` checked as a compilation checks them, as a new dict: a mapping of `str` to
    `str` whose values for the built-in passes' options are usable, else
    `CompilerOptionError` (GE1202) before anything runs. A pass then reads them with
    `context.get_option_value(key)` (or `get_option_value(key, default)`) exactly as in a
    compilation given the same options."""
    return dict(parse_options(options).values)


def as_graph(model: ModelLike, *, copy: bool = True) -> Graph:
    """`model` as a `Graph`: a path, bytes or ModelProto is loaded into a new graph; a
    `Graph` is cloned (`copy=True`) or returned as is."""
    if isinstance(model, Graph):
        return model.clone() if copy else model
    if isinstance(model, (str, os.PathLike, bytes, onnx.ModelProto)):
        return load_graph(model)
    raise TypeError("expected a model: a path, an onnx.ModelProto or a ge.graph.Graph, got "
                    f"{type(model).__name__}")


def is_typed(graph: Graph) -> bool:
    """Whether every named output of every node (subgraphs included) has a data type."""
    for node in graph.get_all_nodes():
        for index, name in enumerate(node.get_output_names()):
            if name and node.get_output_desc(index).data_type == DataType.DT_UNDEFINED:
                return False
    return True


def _entry_of_class(cls: type) -> RegisteredPass:
    __tracebackhide__ = True  # (pytest: a class that is no pass is the test's mistake)
    descriptor = cls.__dict__.get("__ge_pass_descriptor__")
    if isinstance(descriptor, PassDescriptor) and descriptor.cls is cls:
        return RegisteredPass(descriptor, PassOrigin("module", descriptor.location))
    if "__ge_builtin__" in cls.__dict__:
        return builtin_entries([cls])[0]
    raise TypeError(
        f"{cls.__qualname__} is not a registered pass: decorate it with "
        "@register_fusion_pass / @register_decompose_pass, or load its file with "
        "ge.testing.load_passes")


def resolve_pass(pass_: PassLike, passes: PassSet | None = None
                 ) -> tuple[RegisteredPass, FusionBasePass | None]:
    """The registration of `pass_` and, when `pass_` is an instance, that instance.

    A name is looked up in `passes`; a class in `passes` if it is there, else by its own
    registration (the decorator's, or the compiler's for a built-in pass)."""
    __tracebackhide__ = True  # (pytest: the failure points at the test's line)
    instance: FusionBasePass | None = None
    if isinstance(pass_, str):
        if passes is None:
            raise TypeError(f"a pass given by name ({pass_!r}) needs passes= (the set it is "
                            "loaded in: passes=load_passes(path), or the ge_passes fixture's)"
                            "; or give the pass class")
        return passes.entry(pass_), None
    if isinstance(pass_, RegisteredPass):
        return pass_, None
    if isinstance(pass_, PassDescriptor):
        return RegisteredPass(pass_, PassOrigin("module", pass_.location)), None
    if isinstance(pass_, FusionBasePass):
        instance = pass_
        cls: type = type(pass_)
    elif isinstance(pass_, type) and issubclass(pass_, FusionBasePass):
        cls = pass_
    else:
        raise TypeError("expected a pass: a pass class, an instance, or a name with passes=, "
                        f"got {type(pass_).__name__}")
    entry = passes.entry_of_class(cls) if passes is not None else None
    return (entry or _entry_of_class(cls)), instance


def _runs_before_inference(entry: RegisteredPass) -> bool:
    return entry.step is None and entry.stage is PassStage.BEFORE_INFER_SHAPE


def _prepare(entry: RegisteredPass, model: ModelLike, options: Mapping[str, str],
             infer: bool | None, in_place: bool) -> tuple[Graph, bool]:
    """The graph the pass runs on, shape-inferred as the engine would have it; and whether
    the pass runs after inference (its outputs must then be typed)."""
    graph = as_graph(model, copy=not in_place)
    before = _runs_before_inference(entry)
    if infer is None:
        infer = not before and not is_typed(graph)
    if infer:
        infer_shape(graph, options)
    return graph, infer or not before


def _targets(graph: Graph, bodies: bool) -> Iterable[Graph]:
    """The root graph, then (`bodies`) every subgraph still live when its turn comes."""
    yield graph
    if bodies:
        for sub in [s for s in graph.get_all_subgraphs() if not s.is_orphan()]:
            if is_live(sub, graph):
                yield sub


@dataclass
class PassApplication:
    """What `apply_pass` did: the resulting graph and one record per invocation."""

    graph: Graph
    entry: RegisteredPass
    records: list[PassRunRecord] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def changed(self) -> bool:
        return any(r.changed for r in self.records)

    @property
    def matches(self) -> int:
        """Matches found (pattern passes, before `meet_requirements`) or nodes accepted by
        `meet_requirements` (decompose passes)."""
        return sum(r.matches for r in self.records)

    @property
    def rewrites(self) -> int:
        """Rewrites applied (pattern and decompose passes)."""
        return sum(r.rewrites for r in self.records)

    @property
    def fusions(self) -> int:
        """Fusions reported through the context (`report_fuse`, `SubgraphRewriter`)."""
        return sum(r.fusions for r in self.records)

    @property
    def rewrite_count(self) -> int:
        """Rewrites for pattern and decompose passes, fusions for a `FusionBasePass`."""
        if self.entry.descriptor.kind == PASS_KIND_FUSION_BASE:
            return self.fusions
        return self.rewrites


def apply_pass(pass_: PassLike, model: ModelLike, *, passes: PassSet | None = None,
               options: Mapping[str, str] | None = None, in_place: bool = False,
               bodies: bool = True, infer: bool | None = None,
               check: str = "region") -> PassApplication:
    """`run_pass`, returning the graph together with the engine's records of every
    invocation (matches, rewrites, fusions, changed)."""
    __tracebackhide__ = True  # (pytest: the failure points at the test's line)
    entry, instance = resolve_pass(pass_, passes)
    opts = checked_options(options)
    graph, typed = _prepare(entry, model, opts, infer, in_place)
    return _apply(entry, instance, graph, opts, typed=typed, bodies=bodies, check=check)


def _apply(entry: RegisteredPass, instance: FusionBasePass | None, graph: Graph,
           options: Mapping[str, str], *, typed: bool, bodies: bool, check: str
           ) -> PassApplication:
    """One instance of the pass run on a prepared graph, root then live bodies, in place.
    A failing pass raises the engine's E13028 from here, with the user's frames only
    (`without_engine_frames`)."""
    __tracebackhide__ = True
    stage = entry.stage_label
    result = PassApplication(graph, entry)
    try:
        if instance is None:
            instance = create_instance(entry, stage)
        invocation = Invocation(dict(options), InferenceMemo(), check=check, typed=typed)
        for target in _targets(graph, bodies):
            result.records.append(invocation.run(entry, instance, target, graph, stage))
    except PassRunError as err:
        raise without_engine_frames(err)  # noqa: B904 (it is the error caught, its cause kept)
    return result


def run_pass(pass_: PassLike, model: ModelLike, *, passes: PassSet | None = None,
             options: Mapping[str, str] | None = None, in_place: bool = False,
             bodies: bool = True, infer: bool | None = None, check: str = "region") -> Graph:
    """Run one pass on `model` exactly as the engine does at the pass's stage; the result.

    `pass_` is a pass class, an instance, or a name in `passes` (a `PassSet`). `model` is a
    path, a ModelProto or a Graph (copied unless `in_place`). A pass after
    `BeforeInferShape` gets an inferred model (`infer=None`: when some value has no type;
    `True`/`False` force it). `options` are what `context.get_option_value` reads, checked
    as `ge.compile` checks them (`checked_options`: GE1202 for a value that is not a str);
    `bodies` runs it on the live subgraphs too; `check` is the engine's check after a changing pass
    ("region", "full", "none"). A failing pass raises `PassRunError` (E13028).
    """
    __tracebackhide__ = True
    return apply_pass(pass_, model, passes=passes, options=options, in_place=in_place,
                      bodies=bodies, infer=infer, check=check).graph


def matches_in(entry: RegisteredPass, instance: FusionBasePass | None, graph: Graph,
               options: Mapping[str, str], bodies: bool = True) -> list[FoundMatch]:
    """The matches of a pattern pass in a prepared graph (root, then live bodies)."""
    __tracebackhide__ = True
    if entry.descriptor.kind != PASS_KIND_PATTERN_FUSION:
        raise TypeError(f"find_matches needs a PatternFusionPass; {entry.name} is a "
                        f"{entry.descriptor.kind} pass")
    stage = entry.stage_label
    if instance is None:
        instance = create_instance(entry, stage)
    context = PassContext(entry.name, options)
    found: list[FoundMatch] = []
    try:
        with opset_scope(graph.opset_imports), inference_memo_scope(InferenceMemo()):
            found += _find_matches(instance, graph, context, bodies=bodies)  # (patterns once)
    except Exception as exc:
        err = run_error(entry, stage, "FAILED", describe_exception(exc), exc)
        err.__cause__ = exc  # (`from exc` below sets it too late for the trimming)
        raise without_engine_frames(err) from exc
    return found


def find_matches(pass_: PassLike, model: ModelLike, *, passes: PassSet | None = None,
                 options: Mapping[str, str] | None = None, bodies: bool = True,
                 infer: bool | None = None) -> list[FoundMatch]:
    """The matches a pattern pass would rewrite in `model`, without rewriting
    (`ge.passes.found_matches.find_matches` on the graph the pass would see: inferred as for
    `run_pass`, root graph then live bodies). Each `FoundMatch` has `pattern_name`, `nodes`
    (in a copy of the model) and `captured`. A hook that raises is the engine's
    `PassRunError`."""
    __tracebackhide__ = True
    entry, instance = resolve_pass(pass_, passes)
    opts = checked_options(options)
    graph, _ = _prepare(entry, model, opts, infer, in_place=False)
    return matches_in(entry, instance, graph, opts, bodies)
