"""`ModelInfo`: the fields of an ONNX model around its root graph (opsets, producer, ...).

Kept apart from graph.py: it describes the model file, not the graph.
"""

from __future__ import annotations

from typing import Any

import onnx

from ge._compat import new_model_ir_version, new_model_opset
from ge.graph.domains import normalize_domain

__all__ = ["FunctionKey", "ModelInfo"]

#: A model-local function's identity: (domain, name, overload), as a call names it (the
#: domain normalised; `NodeProto.overload`, IR 10, tells two functions of one name apart).
FunctionKey = tuple[str, str, str]


class ModelInfo:
    """What an ONNX model carries around its root graph, kept so that save loses nothing."""

    __slots__ = (
        "_function_index",
        "doc_string",
        "domain",
        "extras",
        "functions",
        "ir_version",
        "metadata_props",
        "model_version",
        "opset_imports",
        "opset_source",
        "producer_name",
        "producer_version",
        "source_files",
        "typed_values",
    )

    def __init__(self) -> None:
        # a model made here is read by the installed onnxruntime too (ge._compat)
        self.ir_version: int = new_model_ir_version()
        self.opset_imports: dict[str, int] = {"": new_model_opset()}
        self.opset_source: list[onnx.OperatorSetIdProto] = []  # as read, for byte-exact saves
        self.producer_name = "ge"
        self.producer_version = ""
        self.domain = ""
        self.model_version = 0
        self.doc_string = ""
        self.metadata_props: dict[str, str] = {}
        self.functions: list[onnx.FunctionProto] = []
        # `functions` by key, with what the list looked like when it was made (`function`)
        self._function_index: tuple[tuple[Any, ...], dict[FunctionKey, onnx.FunctionProto]] = (
            (), {})
        # Rare ModelProto fields the IR does not model (training_info, configuration).
        self.extras: onnx.ModelProto | None = None
        # Resolved path -> "model file" / "external data file" for every file `load` read:
        # save refuses to write over them unless told to (overwrite_input=True).
        self.source_files: dict[str, str] = {}
        # Whether the model as read typed its intermediate values (value_info in some graph);
        # a model built in Python counts as typed. `ge.compile` keeps an untyped model lean.
        self.typed_values = True

    def function(self, key: FunctionKey) -> onnx.FunctionProto | None:
        """The local function of `key` ((domain, name, overload), the domain normalised),
        or None. Looked up in an index of `functions` made again when the list is another,
        or changed length or ends (a function renamed in place is not seen: ge renames
        none): asked for every node of a model (its calls, its random operators), a scan of
        the list made CSE quadratic in the functions (trial DD: 2.7 s of 3.7 for 1,250)."""
        functions = self.functions
        shape = (id(functions), len(functions),
                 id(functions[0]) if functions else 0, id(functions[-1]) if functions else 0)
        seen, index = self._function_index
        if seen != shape:
            index = {(normalize_domain(f.domain), f.name, f.overload): f for f in functions}
            self._function_index = (shape, index)
        return index.get(key)
