"""`Session`: GE's session API over onnxruntime — add graphs by id, compile them, run them.

Method names and argument order follow GE's Python `ge.session.Session` (`add_graph`,
`remove_graph`, `run_graph`) and, for what GE has only in C++ (`ge_api.h`), the
snake_case of its names (`compile_graph`, `add_graph_with_copy`,
`get_compiled_graph_summary`, `is_graph_need_rebuild`). Streams and external allocators have
no meaning on the CPU and are not offered.

Differences from GE, on purpose: `run_graph` runs the graph as it stands (GE compiles a
graph on its first run; here `compile_graph` is explicit, so a test can run the graph
before and after compiling it), and it also takes numpy arrays and a mapping by name.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ge.errors import GraphClosedError, GraphTypeError, SessionError, VerificationInputError
from ge.graph.graph import Graph
from ge.graph.tensor import Tensor
from ge.session.runner import ModelRunner
from ge.session.values import is_nested

if TYPE_CHECKING:
    from ge.compiler.report import CompileReport

__all__ = ["Session"]

_MAX_GRAPH_ID = 2**32 - 1  # GE's graph ids are uint32

Inputs = Sequence[np.ndarray | Tensor] | Mapping[str, np.ndarray | Tensor]


def _check_options(options: Any, what: str) -> dict[str, str]:
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise GraphTypeError(f"{what} must be a dict of str to str, got {type(options).__name__}")
    for key, value in options.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise GraphTypeError(
                f"{what} must map str to str, got {key!r}: {type(value).__name__}")
    return dict(options)


def _check_graph_id(graph_id: Any) -> int:
    if not isinstance(graph_id, int) or isinstance(graph_id, bool):
        raise GraphTypeError(f"graph_id must be an int, got {type(graph_id).__name__}")
    if not 0 <= graph_id <= _MAX_GRAPH_ID:
        raise SessionError(f"graph id {graph_id} is out of range (0..{_MAX_GRAPH_ID})")
    return graph_id


@dataclass
class _Entry:
    """One added graph, its options, and what the session derived from it."""

    graph: Graph
    options: dict[str, str]
    runner: ModelRunner | None = None
    runner_version: int = -1  # the graph's mutation_count when `runner` was built
    report: CompileReport | None = None
    compiled_version: int | None = None  # mutation_count right after the last compile
    lock: threading.Lock = field(default_factory=threading.Lock)
    copied: bool = False  # the session's own copy (`add_graph_with_copy`): closed on removal


class Session:
    """Graphs by id, compiled with `ge.compiler` and run with onnxruntime.

    `options` (str → str) apply to every graph; those given to `add_graph` override them
    for that graph. Each graph's prepared onnxruntime session is cached and dropped when
    the graph changes (`Graph.mutation_count`) or is compiled again.
    """

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        self._options = _check_options(options, "options")
        self._graphs: dict[int, _Entry] = {}
        self._lock = threading.Lock()

    @property
    def options(self) -> dict[str, str]:
        """The session's options (a copy)."""
        return dict(self._options)

    def _entry(self, graph_id: int) -> _Entry:
        _check_graph_id(graph_id)
        with self._lock:
            entry = self._graphs.get(graph_id)
            known = sorted(self._graphs)
        if entry is None:
            ids = ", ".join(map(str, known)) or "none"
            raise SessionError(f"graph id {graph_id} is not in the session (graph ids: {ids})")
        return entry

    # -- graphs ---------------------------------------------------------------------------
    def add_graph(self, graph_id: int, graph: Graph,
                  options: Mapping[str, str] | None = None) -> None:
        """Add `graph` under `graph_id` (shared, not copied: compiling changes it in place)."""
        _check_graph_id(graph_id)
        if not isinstance(graph, Graph):
            raise GraphTypeError(f"graph must be a ge.graph.Graph, got {type(graph).__name__}")
        if graph.closed:
            raise GraphClosedError(f"graph {graph.name!r} is closed (Graph.close() released "
                                   "its nodes): a session cannot compile or run it; load the "
                                   "model again")
        self._add(graph_id, _Entry(graph, _check_options(options, "graph options")))

    def _add(self, graph_id: int, entry: _Entry) -> None:
        with self._lock:
            if graph_id in self._graphs:
                raise SessionError(
                    f"graph id {graph_id} is already in the session (graph "
                    f"{self._graphs[graph_id].graph.name!r}); remove_graph it first")
            self._graphs[graph_id] = entry

    def add_graph_with_copy(self, graph_id: int, graph: Graph,
                            options: Mapping[str, str] | None = None) -> None:
        """Add a copy of `graph`: compiling it leaves the caller's graph as it is. The copy
        is the session's: `remove_graph` closes it (`Graph.close`)."""
        _check_graph_id(graph_id)
        if not isinstance(graph, Graph):
            raise GraphTypeError(f"graph must be a ge.graph.Graph, got {type(graph).__name__}")
        entry = _Entry(graph.clone(), _check_options(options, "graph options"), copied=True)
        try:
            self._add(graph_id, entry)
        except BaseException:
            entry.graph.close()  # (an id in use: the copy is nobody's)
            raise

    def remove_graph(self, graph_id: int) -> None:
        """Forget the graph and everything prepared for it; a copy the session made
        (`add_graph_with_copy`) is closed, not left to the cyclic collector."""
        entry = self._entry(graph_id)
        with self._lock:
            if self._graphs.get(graph_id) is not entry:
                return  # (another thread removed it first)
            del self._graphs[graph_id]
        if entry.copied:
            with entry.lock:  # (after a compilation of it, or its runner being made, ends)
                entry.runner = None
                entry.graph.close()

    def get_graph(self, graph_id: int) -> Graph:
        """The graph added under `graph_id` (extension)."""
        return self._entry(graph_id).graph

    def get_graph_ids(self) -> list[int]:
        """The ids of the graphs in the session, sorted (extension)."""
        with self._lock:
            return sorted(self._graphs)

    # -- compiling ------------------------------------------------------------------------
    def compile_graph(self, graph_id: int) -> CompileReport:
        """Compile the graph in place with `ge.compiler` (session options, then the graph's);
        returns the compile report (GE returns a status and keeps a summary)."""
        import ge.compiler

        entry = self._entry(graph_id)
        with entry.lock:
            try:
                report = ge.compiler.compile_graph(
                    entry.graph, options={**self._options, **entry.options})
            finally:
                entry.runner = None  # the graph may have changed even when compiling failed
            entry.report = report
            entry.compiled_version = entry.graph.mutation_count
        return report

    def get_compiled_graph_summary(self, graph_id: int) -> CompileReport | None:
        """The report of the graph's last compilation, or None if it was never compiled."""
        return self._entry(graph_id).report

    def is_graph_need_rebuild(self, graph_id: int) -> bool:
        """True when the graph was never compiled or has changed since it was."""
        entry = self._entry(graph_id)
        return entry.compiled_version != entry.graph.mutation_count

    # -- running --------------------------------------------------------------------------
    def _runner(self, entry: _Entry) -> ModelRunner:
        with entry.lock:
            version = entry.graph.mutation_count
            if entry.runner is None or entry.runner_version != version:
                entry.runner = None
                entry.runner = ModelRunner(entry.graph)
                entry.runner_version = version
            return entry.runner

    def run_graph(self, graph_id: int, inputs: Inputs) -> list[Any]:
        """Run the graph on `inputs` and return its outputs as `ge.graph.Tensor`s, in the
        graph's output order (like GE; `Tensor.numpy()` gives the arrays); a sequence, map
        or optional output is given as its Python value (a list, a dict, None:
        `ge.session.values`), as `run_model` gives it.

        `inputs` is a list in graph-input order (`Data` index), or a mapping by input name;
        the values are `Tensor`s or numpy arrays. Bad inputs raise VerificationInputError,
        a graph onnxruntime cannot run SessionError.
        """
        entry = self._entry(graph_id)
        runner = self._runner(entry)
        if isinstance(inputs, Mapping):
            feeds = dict(inputs)
        elif isinstance(inputs, Sequence) and not isinstance(inputs, (str, bytes)):
            names = [spec.name for spec in runner.inputs]
            if len(inputs) > len(names):
                raise VerificationInputError(
                    f"{len(inputs)} inputs given, graph {runner.name!r} has {len(names)}"
                    f" ({', '.join(names) or 'none'})")
            feeds = dict(zip(names, inputs))
        else:
            raise GraphTypeError(
                f"inputs must be a list or a dict of Tensors or numpy arrays, "
                f"got {type(inputs).__name__}")
        outputs = runner.run(feeds)
        return [value if is_nested(value) else Tensor(np.asarray(value))
                for value in outputs.values()]
