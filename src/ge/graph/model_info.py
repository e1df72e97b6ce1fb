"""`ModelInfo`: the fields of an ONNX model around its root graph (opsets, producer, ...).

Kept apart from graph.py: it describes the model file, not the graph.
"""

from __future__ import annotations

import onnx

from ge._compat import new_model_ir_version, new_model_opset

__all__ = ["ModelInfo"]


class ModelInfo:
    """What an ONNX model carries around its root graph, kept so that save loses nothing."""

    __slots__ = (
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
        # Rare ModelProto fields the IR does not model (training_info, configuration).
        self.extras: onnx.ModelProto | None = None
        # Resolved path -> "model file" / "external data file" for every file `load` read:
        # save refuses to write over them unless told to (overwrite_input=True).
        self.source_files: dict[str, str] = {}
        # Whether the model as read typed its intermediate values (value_info in some graph);
        # a model built in Python counts as typed. `ge.compile` keeps an untyped model lean.
        self.typed_values = True
