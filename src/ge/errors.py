"""The exceptions of `ge`: one base class, GE's error codes where GE has one.

Every error carries what a user needs to act on it without reading a traceback: a code,
the message, and where applicable the pass, the stage, the user's file and line, and the
nodes or paths involved. Tools read these attributes instead of parsing messages.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import ClassVar

__all__ = [
    "ExternalDataError",
    "GeError",
    "GraphClosedError",
    "GraphError",
    "GraphTypeError",
    "GraphValidationError",
    "MatchResultError",
    "ModelLoadError",
    "ModelNotFoundError",
    "ModelSaveError",
    "PassRegisterError",
    "PassRunError",
    "PatternError",
    "PluginLoadError",
    "RewriteError",
    "SourceLocation",
    "ValidationProblem",
    "concerning_model",
    "model_file_named",
]


@dataclass(frozen=True)
class SourceLocation:
    """A place in the user's code: the file and line an error points at."""

    file: str
    line: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line is not None else self.file


class GeError(Exception):
    """Base of every error `ge` raises on purpose.

    `code` is GE's error code (E13028/E13029/E13030) where GE defines one, otherwise a
    `ge` code (GE1xxx); docs/errors.md lists them all.
    """

    code: ClassVar[str] = "GE1000"
    #: Whether the error is about the model a command or `ge.compile` was given (what it
    #: holds, not a pass, plugin, option or output): where that model was given as a file,
    #: the error names it (`name_model_file`, `model_file_named`). True of every
    #: `ModelLoadError`; set on others where they are raised about the model as given.
    about_model: bool = False

    def __init__(
        self,
        message: str,
        *,
        pass_name: str | None = None,
        stage: str | None = None,
        location: SourceLocation | None = None,
        path: str | None = None,
        nodes: Iterable[str] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        self.pass_name = pass_name
        self.stage = stage
        self.location = location
        self.path = path
        self.nodes: tuple[str, ...] = tuple(nodes)

    def details(self) -> dict[str, object]:
        """The error as plain data, for `--json` output and logs."""
        return {
            "code": self.code,
            "type": type(self).__name__,
            "message": self.message,
            "pass_name": self.pass_name,
            "stage": self.stage,
            "location": str(self.location) if self.location else None,
            "path": self.path,
            "nodes": list(self.nodes),
        }

    def __str__(self) -> str:
        context = self._context()
        suffix = f" ({', '.join(context)})" if context else ""
        return f"[{self.code}] {self.message}{suffix}"

    def name_model_file(self, path: str) -> None:
        """Name the model file `path` that this error is about: first in its message
        (`path: ...`) unless it is named there already, and as its `path` unless it has
        one (the data file of an external data error stays)."""
        if self.path is None:
            self.path = path
        # (named already unless only as the start of another name: "m.onnx.data")
        if re.search(rf"(?<![\w.\-/]){re.escape(path)}(?![\w.\-])", self.message) is None:
            self.message = f"{path}: {self.message}"

    def _context(self) -> list[str]:
        """What `str()` puts in parentheses after the message: the pass, stage, location."""
        context = []
        if self.pass_name:
            context.append(f"pass {self.pass_name}")
        if self.stage:
            context.append(f"stage {self.stage}")
        if self.location:
            context.append(f"at {self.location}")
        return context


class GraphError(GeError, RuntimeError):
    """A graph operation that cannot be done (GE raises RuntimeError for these)."""

    code = "GE1001"


class GraphClosedError(GraphError, AttributeError):
    """A closed graph (`Graph.close()`), or a node of one, used for anything but its name:
    closing released the nodes, edges, attributes and descs. An AttributeError too, so that
    `hasattr` and `getattr(obj, name, default)` answer for a closed object as for another."""


class GraphTypeError(GeError, TypeError):
    """A graph API called with an argument of the wrong type."""

    code = "GE1002"


@dataclass(frozen=True)
class ValidationProblem:
    """One broken IR invariant: its kind, the nodes involved, a sentence saying what, and
    what to do about it when a compilation (a pass) made it: `advice`, kept apart from the
    message so that a problem the input model already had is not told to a pass author."""

    # "dangling-edge", "cycle", "duplicate-name", "arity", "opset-import", "attribute",
    # "unknown-op", "structure", "body", "function", "untyped", "type" (see
    # ge.graph.validation);
    # "onnx-checker" (a save's full check, ge.graph.model_io)
    kind: str
    nodes: tuple[str, ...]
    message: str
    graph: str = ""
    advice: str = ""
    #: the `ge.graph.Node` objects named (when the check had them): names repeat across
    #: bodies, exporters name every body alike; not compared, not shown
    subjects: tuple[object, ...] = field(default=(), compare=False, repr=False)
    #: where the graph is, for a body: "graph body, then_branch of If node 'if'" (its name
    #: alone says little: exporters name every body alike); "" for a main graph
    place: str = field(default="", compare=False)

    @property
    def text(self) -> str:
        """The message with its advice, as the problem is shown."""
        return f"{self.message} ({self.advice})" if self.advice else self.message

    def __str__(self) -> str:
        where = self.place or (f"graph {self.graph}" if self.graph else "")
        return f"{where}: {self.kind}: {self.text}" if where else f"{self.kind}: {self.text}"


class GraphValidationError(GraphError):
    """`Graph.validate()` found broken invariants; `problems` lists every one, the message
    the first `LISTED` and a count of the others by kind (trial AA: 4,764 problems of one
    exporter mistake made a one-line error of about 1 MB)."""

    code = "GE1003"
    LISTED = 10

    def __init__(self, problems: Sequence[ValidationProblem]) -> None:
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems[:self.LISTED])
        rest = self.problems[self.LISTED:]
        if rest:
            kinds = Counter(p.kind for p in rest)
            lines += (f"\n  - and {len(rest)} more ("
                      + ", ".join(f"{kind}: {n}" for kind, n in kinds.most_common())
                      + "; the error's `problems`, and --json, list every one)")
        nodes = sorted({n for p in self.problems for n in p.nodes})
        count = len(self.problems)
        super().__init__(f"graph is invalid ({count} problem(s)):\n{lines}", nodes=nodes)

    def details(self) -> dict[str, object]:
        return {**super().details(), "problems": [
            {"kind": p.kind, "graph": p.place or p.graph, "nodes": list(p.nodes),
             "message": p.text} for p in self.problems]}


class ModelLoadError(GeError, ValueError):
    """A model file could not be read: not ONNX, truncated, or otherwise unusable."""

    code = "GE1101"
    about_model = True


class ModelNotFoundError(ModelLoadError, FileNotFoundError):
    """The model file does not exist."""

    code = "GE1102"


class ExternalDataError(ModelLoadError):
    """External tensor data is missing, short, or resolves outside the model's folder."""

    code = "GE1103"


class ModelSaveError(GeError, OSError):
    """A model could not be written; nothing was left at the destination."""

    code = "GE1104"


class UserCodeError(GeError):
    """An error of the user's code (a pass's run, a plugin's import) that raised.

    `location` is the line of the pass's or plugin's own file (the line that raised, or
    called what raised); `raised_in` the innermost line of the user's code that raised,
    when that is in another file (a helper module beside it): `(at p.py:12, raised in
    _helpers.py:3)`. None otherwise."""

    def __init__(self, message: str, *, pass_name: str | None = None,
                 stage: str | None = None, location: SourceLocation | None = None,
                 path: str | None = None, nodes: Iterable[str] = (),
                 raised_in: SourceLocation | None = None) -> None:
        super().__init__(message, pass_name=pass_name, stage=stage, location=location,
                         path=path, nodes=nodes)
        self.raised_in = raised_in

    def details(self) -> dict[str, object]:
        return {**super().details(),
                "raised_in": str(self.raised_in) if self.raised_in else None}

    def _context(self) -> list[str]:
        context = super()._context()
        if self.raised_in:
            context.append(f"raised in {self.raised_in}")
        return context


class PassRunError(UserCodeError):
    """E13028: a pass failed while running; the graph was left as the pass found it
    (`location` the pass file's line, `raised_in` a helper's: `UserCodeError`)."""

    code = "E13028"


class PluginLoadError(UserCodeError):
    """E13029: a pass plugin could not be loaded (import failed, bad path, name clash);
    an import that raised in a helper module names the plugin's own line that imported
    it (`location`) and the helper's (`raised_in`: `UserCodeError`)."""

    code = "E13029"


class PassRegisterError(GeError, ValueError):
    """E13030: a pass could not be registered (bad descriptor, duplicate name)."""

    code = "E13030"


@contextmanager
def model_file_named(path: str | os.PathLike[str] | None) -> Iterator[None]:
    """Name the model file `path` (`GeError.name_model_file`) in every error about the model
    (`GeError.about_model`) raised inside: where a command or `ge.compile` was given a file,
    a batch's log says which one failed. `path` None (a proto, a Graph): nothing named."""
    try:
        yield
    except GeError as err:
        if path is not None and err.about_model:
            err.name_model_file(os.fspath(path))
        raise


@contextmanager
def concerning_model(besides: tuple[type[GeError], ...] = ()) -> Iterator[None]:
    """Mark the errors raised inside as about the model as given (`GeError.about_model`):
    around what only reads the model a command or `ge.compile` was given (running it as
    given, converting it), before any pass changed it. Not an option's or a command line's
    error (`--opset 12` below the model's is the option's), nor one of `besides` (the
    inputs file a user gave, which the error names)."""
    try:
        yield
    except GeError as err:
        if not isinstance(err, (CompilerOptionError, CommandLineError, DimsArgumentError,
                                *besides)):
            err.about_model = True
        raise


# --- pass plugins and the compiler (added with the Python pass plugin machinery) -----------


class PassRegisterTypeError(PassRegisterError, TypeError):
    """E13030 raised where GE raises TypeError: a decorator applied to the wrong kind of object."""


class DuplicatePassNameError(PassRegisterError):
    """E13030: a pass name is registered twice; both definitions are named.

    `location` is the new definition, `previous_location` the one already registered;
    `class_name` the new definition's class.
    """

    def __init__(
        self,
        message: str,
        *,
        previous_location: SourceLocation | None = None,
        class_name: str | None = None,
        pass_name: str | None = None,
        stage: str | None = None,
        location: SourceLocation | None = None,
        path: str | None = None,
    ) -> None:
        super().__init__(
            message, pass_name=pass_name, stage=stage, location=location, path=path
        )
        self.previous_location = previous_location
        self.class_name = class_name
        #: A clash between installed plugins, as the plugin cache knows it
        #: (`ge.passes.plugin_names.InstalledClash`: its hint is composed when raised).
        self.clash: object | None = None

    def details(self) -> dict[str, object]:
        data = super().details()
        data["previous_location"] = str(self.previous_location) if self.previous_location else None
        return data


class PluginPathNotFoundError(PluginLoadError, FileNotFoundError):
    """E13029: a path listed for pass plugins does not exist (GE raises FileNotFoundError)."""


class PluginPathSuffixError(PluginLoadError, ValueError):
    """E13029: a file listed for pass plugins is not a `.py` file (GE raises ValueError)."""


class PluginPathTypeError(PluginLoadError, TypeError):
    """E13029: pass paths given as one string instead of a list of paths (its characters
    would each be taken as a path, `/` the root folder among them)."""


class PluginLoadErrors(PluginLoadError):
    """E13029: several plugins failed to load; `errors` holds each failure (E13029 or E13030)."""

    #: what the first line says failed
    failed_to = "load"

    def __init__(self, errors: Sequence[GeError]) -> None:
        self.errors = list(errors)
        lines = "\n".join(f"  - {err}" for err in self.errors)
        super().__init__(f"{len(self.errors)} python pass plugins failed to {self.failed_to}:"
                         f"\n{lines}")

    @staticmethod
    def of(errors: Sequence[GeError]) -> PluginLoadErrors:
        """The bundle of `errors`: E13030 (`PassRegisterErrors`) when each is a failure to
        register (trial T: three name clashes were E13029 together, E13030 alone)."""
        if all(err.code == PassRegisterError.code for err in errors):
            return PassRegisterErrors(errors)
        return PluginLoadErrors(errors)

    def details(self) -> dict[str, object]:
        data = super().details()
        data["errors"] = [err.details() for err in self.errors]
        return data


class PassRegisterErrors(PluginLoadErrors, PassRegisterError):
    """E13030: several passes failed to register (each failure E13030: name clashes, bad
    descriptors); a `PluginLoadErrors`, whose `errors` holds each."""

    code = "E13030"
    failed_to = "register"


class CompilerStateError(GeError, RuntimeError):
    """The compiler was used in a state that does not allow it (e.g. initialised twice)."""

    code = "GE1201"


class PluginLoaderClosedError(CompilerStateError):
    """A plugin loader `ge.finalize()` closed was asked to load plugins: a compilation
    that asked takes the compiler running now instead (`ge.compiler.engine`)."""

    def __init__(self) -> None:
        super().__init__(
            "the compiler was finalized (ge.finalize(), in another thread) while this "
            "compilation chose its plugins; it loads nothing more: start the compilation "
            "again")


class CompilerOptionError(GeError, ValueError):
    """A compiler option has a value the compiler cannot use."""

    code = "GE1202"


class CompilerOptionTypeError(CompilerOptionError, TypeError):
    """GE1202: an argument of the compilation of the wrong type (`opset='20'`, one str where
    a list of pass names belongs); its message names the type it got."""


class PluginLoadWarning(UserWarning):
    """A plugin failed to load and the compiler went on without it (continue-on-error)."""


class PassPathWarning(UserWarning):
    """A pass-path folder names no plugin (GE loads nothing from it, silently): the message
    says which of its contents were not loaded and why."""


class PassDefinitionWarning(UserWarning):
    """A pass GE accepts whose code is almost certainly not what its author meant: a hook
    whose parameter names contradict how GE calls it (given at class creation, so once per
    compilation that loads the plugin), a pattern setting attributes that are not compared
    (when it is built), a `run()` returning NOT_CHANGED after changing the graph (when it
    returns, once per pass and compilation). The message holds the file and line."""


# Extended here so that the original list above stays as it was.
__all__ += [
    "CompilerOptionError",
    "CompilerOptionTypeError",
    "CompilerStateError",
    "DuplicatePassNameError",
    "PassDefinitionWarning",
    "PassPathWarning",
    "PassRegisterErrors",
    "PassRegisterTypeError",
    "PluginLoadErrors",
    "PluginLoadWarning",
    "PluginLoaderClosedError",
    "PluginPathNotFoundError",
    "PluginPathSuffixError",
    "PluginPathTypeError",
]


# --- operators (ge.ops) and the ES builder (ge.es) ------------------------------------------


class OpRegisterError(GeError, ValueError):
    """A custom operator cannot be registered: invalid definition or already registered."""

    code = "GE1301"


class OpNotFoundError(GeError, ValueError):
    """No schema for an operator at the requested opset (unknown op, or not defined yet)."""

    code = "GE1302"


class OpInputError(GeError, ValueError):
    """An operator called with the wrong number of inputs (or an input it cannot take)."""

    code = "GE1303"


class OpAttributeError(GeError, TypeError):
    """An operator called with an unknown attribute or an attribute value of the wrong type."""

    code = "GE1304"


class ShapeInferenceError(GeError, RuntimeError):
    """Shape and type inference failed for a node or a graph; the message names the node.
    `reason`, where set, is what onnx's inference said, in its own words (the ES builder's
    `BuilderInferenceError` quotes it)."""

    code = "GE1305"
    reason: str | None = None


class ConstantEvaluationError(GeError, RuntimeError):
    """A node whose inputs are all constants could not be evaluated."""

    code = "GE1306"


class _SaysWhere(GeError):
    """An error whose message names its `location` already: `str()` does not repeat it."""

    def _context(self) -> list[str]:
        context = super()._context()
        if self.location and str(self.location) in self.message:
            context.remove(f"at {self.location}")
        return context


class InferenceFunctionError(_SaysWhere, ShapeInferenceError):
    """A custom operator's registered inference function raised, or returned other than one
    `TensorDesc` per output: its author's bug, raised even where inference is quiet (the
    ES builder), so a pass building the operator fails instead of leaving it untyped."""


class KernelError(_SaysWhere, ConstantEvaluationError):
    """A custom operator's registered kernel raised, or returned values whose number, dtype
    or shape contradict the node's outputs: its author's bug, wherever ge runs it."""


class BuilderStateError(GeError, RuntimeError):
    """A `GraphBuilder` used after `build_and_reset` (or a TensorHolder constructed directly)."""

    code = "GE1401"


class BuilderMixError(GeError, ValueError):
    """Tensors of two different `GraphBuilder`s used in one operation."""

    code = "GE1402"


class BuilderValueError(GeError, ValueError):
    """A builder argument with a bad value: ragged list, count not matching the shape, range."""

    code = "GE1403"


class BuilderTypeError(GeError, TypeError):
    """A builder argument of the wrong type (e.g. `outputs` not a list)."""

    code = "GE1404"


class BuilderInferenceError(GeError, ValueError):
    """An operator the ES builder was asked to build that onnx's shape inference (or the
    operator's own typing) proves invalid for inputs whose descs are fully known (a MatMul
    of [2, 3] and [4, 5]): raised at the user's line that built it."""

    code = "GE1405"


__all__ += [
    "BuilderInferenceError",
    "BuilderMixError",
    "BuilderStateError",
    "BuilderTypeError",
    "BuilderValueError",
    "ConstantEvaluationError",
    "InferenceFunctionError",
    "KernelError",
    "OpAttributeError",
    "OpInputError",
    "OpNotFoundError",
    "OpRegisterError",
    "ShapeInferenceError",
]


# --- pattern matching and rewriting (ge.passes) ---------------------------------------------


class PatternError(GeError, ValueError):
    """A pattern graph the matcher cannot use (GE §6.1: bodies, control edges, no output)."""

    code = "GE1501"


class MatchResultError(GeError, RuntimeError):
    """A `MatchResult` used wrongly: after its hook returned (GE's "MatchResult handle has
    expired"), or asked for a capture index its pattern does not have; a RuntimeError, as
    GE raises, and ge's own diagnostic (`ge.testing` shows the hook's line, not ge's).
    Its text is GE's message alone, without the code, as GE's RuntimeError reads."""

    code = "GE1503"

    def __str__(self) -> str:
        return self.message


class RewriteError(GeError, RuntimeError):
    """A replacement that cannot be applied to its match: wrong input or output count, a
    region that is not closed, a rewrite that would make a cycle."""

    code = "GE1502"



# --- compiling, running and verifying (ge.compiler, ge.session, ge.cli) ---------------------


class CompileInputError(GeError, TypeError):
    """`ge.compile` was given something that is not a model path, a ModelProto or a Graph."""

    code = "GE1203"


class UnsupportedModelError(GeError, ValueError):
    """A model ge loads and saves losslessly but cannot compile soundly: one whose
    `training_info` reads or updates values of the inference graph, which passes fold,
    merge or remove as constants (nothing is run or written)."""

    code = "GE1204"
    about_model = True


class CompileWarning(UserWarning):
    """The compiler went on but something needs attention (a fixed point not reached, a pass
    rolled back under `on_pass_failure=skip`)."""


class SessionError(GeError, RuntimeError):
    """A graph could not be run (onnxruntime or the reference evaluator rejected it)."""

    code = "GE1601"


class RuntimeLoadError(SessionError):
    """The runtime would not load a graph (before any input reached it): no input would
    make it run."""


class MissingOperatorError(SessionError):
    """A graph to run uses an operator of a custom domain that nothing loaded defines (no
    registered custom operator, no function of the model): the plugin is missing."""


class VerificationInputError(GeError, ValueError):
    """Inputs for running or verifying a model do not fit it (names, shapes or dtypes)."""

    code = "GE1602"


class DimsArgumentError(VerificationInputError):
    """The sizes given for symbolic dims (`dims=`, `--dims`) name no dim of the model or
    are no sizes: the caller's argument, not the model's problem (the model file is not
    named as its cause)."""


class VerificationError(GeError, RuntimeError):
    """The compiled model's outputs differ from the original's beyond the tolerance;
    `report` holds the comparison (a `ge.session.VerificationReport`) when there is one."""

    code = "GE1603"

    def __init__(self, message: str, *, report: object | None = None, **kwargs: object) -> None:
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.report = report


class OutOfMemoryError(GeError, MemoryError):
    """A command ran out of memory where ge has no more precise error (loading or compiling
    a model too large for the machine): one line instead of a traceback; nothing written."""

    code = "GE1801"


class CommandLineError(GeError, ValueError):
    """A command-line argument the command cannot use (e.g. `pyatc --framework=3`)."""

    code = "GE1701"


class WarningsRaisedError(GeError, RuntimeError):
    """A compilation that issued warnings, with `ge compile --fail-on-warning`: it fails
    before writing anything, as a pipeline that must not ship a doubtful model asks."""

    code = "GE1702"


__all__ += [
    "CommandLineError",
    "CompileInputError",
    "CompileWarning",
    "DimsArgumentError",
    "MissingOperatorError",
    "OutOfMemoryError",
    "RuntimeLoadError",
    "SessionError",
    "UnsupportedModelError",
    "VerificationError",
    "VerificationInputError",
    "WarningsRaisedError",
]
