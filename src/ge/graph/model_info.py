"""`ModelInfo`: the fields of an ONNX model around its root graph (opsets, producer, ...).

Kept apart from graph.py: it describes the model file, not the graph.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import onnx

from ge._compat import new_model_ir_version, new_model_opset
from ge.graph.domains import normalize_domain

__all__ = ["FunctionKey", "FunctionList", "ModelInfo", "call_key", "function_key"]

#: A model-local function's identity: (domain, name, overload), as a call names it (the
#: domain normalised; `NodeProto.overload`, IR 10, tells two functions of one name apart).
FunctionKey = tuple[str, str, str]


def function_key(function: onnx.FunctionProto) -> FunctionKey:
    """The key of a local function, as `call_key` gives it for a call of it."""
    return normalize_domain(function.domain), function.name, function.overload


def call_key(node: onnx.NodeProto) -> FunctionKey:
    """The function a node proto would call, if the model defines it."""
    return normalize_domain(node.domain), node.op_type, node.overload


class ModelInfo:
    """What an ONNX model carries around its root graph, kept so that save loses nothing."""

    __slots__ = (
        "_function_index",
        "_functions",
        "_ir_version",
        "_opset_imports",
        "doc_string",
        "domain",
        "extras",
        "metadata_props",
        "model_version",
        "opset_source",
        "producer_name",
        "producer_version",
        "source_files",
        "typed_values",
    )

    def __init__(self) -> None:
        # a model made here is read by the installed onnxruntime too (ge._compat), asked
        # when first read: asking imports onnxruntime (~60 ms), which a model read from a
        # file (its own IR version and opsets) never needs
        self._ir_version: int | None = None
        self._opset_imports: dict[str, int] | None = None
        self.opset_source: list[onnx.OperatorSetIdProto] = []  # as read, for byte-exact saves
        self.producer_name = "ge"
        self.producer_version = ""
        self.domain = ""
        self.model_version = 0
        self.doc_string = ""
        self.metadata_props: dict[str, str] = {}
        self._functions = FunctionList()
        # `functions` by key, with the list (itself: an id may be reused once it is freed;
        # trial HH) and its version when it was made (`function`)
        self._function_index: tuple[tuple[FunctionList | None, int],
                                    dict[FunctionKey, onnx.FunctionProto]] = ((None, -1), {})
        # Rare ModelProto fields the IR does not model (training_info, configuration).
        self.extras: onnx.ModelProto | None = None
        # Resolved path -> "model file" / "external data file" for every file `load` read:
        # save refuses to write over them unless told to (overwrite_input=True).
        self.source_files: dict[str, str] = {}
        # Whether the model as read typed its intermediate values (value_info in some graph);
        # a model built in Python counts as typed. `ge.compile` keeps an untyped model lean.
        self.typed_values = True

    @property
    def ir_version(self) -> int:
        """The model's IR version; for a model made here, the newest onnx and the installed
        onnxruntime both know."""
        if self._ir_version is None:
            self._ir_version = new_model_ir_version()
        return self._ir_version

    @ir_version.setter
    def ir_version(self, value: int) -> None:
        self._ir_version = value

    @property
    def opset_imports(self) -> dict[str, int]:
        """Domain -> opset version; for a model made here, the standard domain at the newest
        opset onnx and the installed onnxruntime both know."""
        if self._opset_imports is None:
            self._opset_imports = {"": new_model_opset()}
        return self._opset_imports

    @opset_imports.setter
    def opset_imports(self, value: dict[str, int]) -> None:
        self._opset_imports = value

    @property
    def functions(self) -> list[onnx.FunctionProto]:
        """The model's local functions (`ModelProto.functions`), in order: a list that
        counts its changes, so that `function` knows when its index is stale."""
        return self._functions

    @functions.setter
    def functions(self, value: Iterable[onnx.FunctionProto]) -> None:
        self._functions = FunctionList(value)

    def function(self, key: FunctionKey) -> onnx.FunctionProto | None:
        """The local function of `key` ((domain, name, overload), the domain normalised),
        the first of that key, or None. Looked up in an index of `functions` made again
        whenever the list changed (a function renamed in place is not seen: ge renames
        none): asked for every node of a model (its calls, its random operators), a scan of
        the list made CSE quadratic in the functions (trial DD: 2.7 s of 3.7 for 1,250)."""
        functions = self._functions
        (indexed, version), index = self._function_index
        if indexed is not functions or version != functions.version:
            index = {}
            for f in functions:
                index.setdefault(function_key(f), f)
            self._function_index = ((functions, functions.version), index)
        return index.get(key)


class FunctionList(list[onnx.FunctionProto]):
    """A list that counts the calls that change it (`version`): `ModelInfo.functions`."""

    version = 0

    def _changed(self) -> None:
        self.version += 1


def _counting(name: str) -> Any:
    method = getattr(list, name)

    def changing(self: FunctionList, *args: Any, **kwargs: Any) -> Any:
        self._changed()
        return method(self, *args, **kwargs)

    changing.__name__ = name
    return changing


for _name in ("__setitem__", "__delitem__", "__iadd__", "__imul__", "append", "clear",
              "extend", "insert", "pop", "remove", "reverse", "sort"):
    setattr(FunctionList, _name, _counting(_name))
