"""What `ge.compile` gives back (`CompileResult`): the compiled graph, its report and
verification, and saving it so that nothing the checker rejects or the input's data needs
is lost."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from ge.compiler.report import CompileReport
from ge.errors import CompileWarning, GraphValidationError
from ge.graph import Graph
from ge.passes.source import warn_user
from ge.session.input_verdicts import with_input_verdict
from ge.session.verification import VerificationReport

__all__ = ["CompileResult"]


@dataclass
class CompileResult:
    """What `ge.compile` gives back: the compiled graph, the report, the verification."""

    graph: Graph
    report: CompileReport
    verification: VerificationReport | None = None
    source: Path | None = None  # the file the model was loaded from, if any
    value_info: bool = True  # whether `save` writes the types of intermediate values
    #: Every warning the compilation issued, in order, whatever the warning filters: per
    #: compilation, also with others running in other threads (`warnings.catch_warnings`
    #: is process-wide and mixes theirs in).
    warnings: list[Warning] = field(default_factory=list)

    def __repr__(self) -> str:
        verified = ("" if self.verification is None
                    else f"; verification {self.verification.summary()}")
        source = "" if self.source is None else f" from {str(self.source)!r}"
        return f"<CompileResult{source}: {self.report.summary()}{verified}>"

    def as_dict(self) -> dict[str, Any]:
        """The result as JSON-ready data, what a service logs: the file compiled from,
        `report.as_dict()` (counts, steps, every pass and invocation), the verification
        (or None) and the warnings (category and message). `ge compile --report` writes
        the same, with the paths it was given, the hints and where each warning came from."""
        return {
            "source": None if self.source is None else str(self.source),
            **self.report.as_dict(),
            "verification": (None if self.verification is None
                             else self.verification.as_dict()),
            "warnings": [{"category": type(w).__name__, "message": str(w)}
                         for w in self.warnings],
        }

    def save(self, path: str | os.PathLike[str], *, external_data: bool | None = None,
             overwrite_input: bool = False,
             before_commit: Callable[[Path | None], None] | None = None,
             strip_metadata: bool = False) -> Path | None:
        """Write the compiled model atomically (see `Graph.save`, also for `before_commit`
        and `strip_metadata`),
        never one onnx's full checker rejects (`GraphValidationError`, nothing written; it
        says so when the input model fails the checker too). Returns the external data file
        written beside it, or None."""
        from ge.graph.save_target import check_target_spelling, replaced_data_files

        check_target_spelling(path)  # (a path of another type: GE1002 before anything)
        replaced = replaced_data_files(self.graph, path) if overwrite_input else []
        try:
            written = self.graph.save(path, external_data=external_data,
                                      overwrite_input=overwrite_input,
                                      value_info=self.value_info, lift_constants=True,
                                      full_check=True, before_commit=before_commit,
                                      strip_metadata=strip_metadata)
        except GraphValidationError as err:
            verdict = with_input_verdict(err, self.source)
            if verdict is not err:
                raise verdict from err
            # the compilation's doing: name the pass behind the node onnx names
            blamed = self.report.last_changes.blame(self.graph, err.nodes, written=True)
            if blamed is not None:
                blamed.add_to(err)
            raise
        left = [file for file in replaced
                if written is None or os.path.realpath(written) != str(file)]
        if left:
            # (object, subject, verb): "does not read them ..., so they are left"
            it, they, is_ = ("it", "it", "is") if len(left) == 1 else ("them", "they", "are")
            warn_user(CompileWarning(
                f"{path} replaced the model it was loaded from, whose weights were in "
                f"{', '.join(map(str, left))}; the model written does not read {it} "
                f"({_why_not_read(external_data, written)}), so {they} {is_} left in place: "
                f"delete {it} if no other model reads {it}"))
        elif not overwrite_input:
            self._warn_stale_data(path, written)
        return written

    def _warn_stale_data(self, path: str | os.PathLike[str], written: Path | None) -> None:
        """Warn when a data file named after the model saved (`OUT.data`) is beside it and
        the model written does not read it: left by an earlier save with external data, it
        would ship with the folder unread (trial Z: `ge compile` said so, `save` did not). It
        is not deleted: another model may read it. One the model was loaded from is the
        input's (MODEL's own, or `overwrite_input`'s to name)."""
        from ge.graph.save_target import data_file_of, write_destination

        stale = data_file_of(Path(path))
        if not stale.is_file() or (written is not None and os.path.exists(written)
                                   and os.path.samefile(written, stale)):
            return
        if os.path.realpath(stale) in self.graph.root_graph().model.source_files:
            return
        destination, _ = write_destination(Path(path))
        reads = (f"its weights are inside it and in {written}" if written is not None
                 else "its weights are inside it")
        warn_user(CompileWarning(
            f"{stale} is not read by the model written, {destination} ({reads}), and ge left "
            "it as it was (an earlier save with external data wrote it, or another program "
            "did); delete it if no other model reads it"))

    def to_onnx(self) -> onnx.ModelProto:
        """The compiled model as `save` writes it (`Constant` operators as initializers)."""
        return self.graph.to_onnx(value_info=self.value_info, lift_constants=True)


def _why_not_read(external_data: bool | None, written: Path | None) -> str:
    """Why a model saved over its own file no longer reads its former data file(s)."""
    if external_data is False:
        return "its weights are inside it: --no-external-data, external_data=False"
    if written is not None:
        return f"its weights are in {written}"
    if external_data:  # (asked for, but no tensor as large as the threshold: no data file)
        return "its weights are inside it: no tensor is of 1 KiB or more"
    return ("its weights are inside it: under protobuf's 2 GB limit a model is written as "
            "one file; --external-data, external_data=True, writes them to a data file")
