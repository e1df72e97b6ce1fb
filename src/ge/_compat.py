"""What the installed onnx and onnxruntime have in common, for the models ge makes itself
(and which ONNX operator versions onnxruntime has kernels for: `runtime_kernel_opsets`).

onnx and onnxruntime are released apart, and an environment may pair a newer onnx with an
older onnxruntime: onnxruntime 1.23 is the last with Python 3.10 wheels while onnx 1.23
still has them, and `onnx>=1.17`, `onnxruntime>=1.19` allow any pair. onnx stamps a model
it makes with the newest IR version it knows (`onnx.IR_VERSION`, 14 in onnx 1.23), and an
older onnxruntime refuses to load it ("Unsupported model IR version: 14, max supported IR
version: 11"). A model ge makes from nothing (a graph built in Python, `ge.testing`'s test
models) therefore gets `new_model_ir_version()`: the newest IR version both read, and by
default `new_model_opset()`: the newest standard opset both know (onnxruntime refuses a
model importing a newer one: "Opset 28 is under development"). A model ge loads keeps its
own IR version and opsets, as it keeps everything else it read.

onnxruntime tells no IR version; it is derived from the newest opset onnxruntime runs
(its schemas tell that), through onnx's own table of releases (`helper.VERSION_TABLE`).
Both are read once, when first asked: `import ge` does not import onnxruntime.
"""

from __future__ import annotations

import functools

import onnx
from onnx import helper

__all__ = [
    "RUNTIME_GUARANTEED_OPSET",
    "ir_version_of_opset",
    "new_model_ir_version",
    "new_model_opset",
    "runtime_ir_version",
    "runtime_kernel_opsets",
    "runtime_opset",
]

#: The oldest standard opset onnxruntime guarantees to run ("ONNX Runtime only *guarantees*
#: support for models stamped with opset version 7 or above"): from it on, its CPU kernels
#: cover every operator of ai.onnx (but `Constant`, which it holds as a value); below it,
#: most of opset 1 to 6's versions have none (Add-1, Relu-1, Gemm-6...).
RUNTIME_GUARANTEED_OPSET = 7


@functools.lru_cache(maxsize=1)
def runtime_opset() -> int:
    """The newest version of the standard domain (ai.onnx) the installed onnxruntime runs:
    the newest `since_version` among its schemas of that domain (each ONNX opset changes
    at least one operator). onnxruntime refuses a model importing a newer one. A build that
    lists no schemas (a minimal build) is taken to run onnx's newest."""
    from onnxruntime.capi import onnxruntime_pybind11_state as ort_state

    try:
        schemas = ort_state.get_all_operator_schema()
    except (AttributeError, RuntimeError):
        schemas = []
    return max((int(s.since_version) for s in schemas if s.domain in ("", "ai.onnx")),
               default=int(onnx.defs.onnx_opset_version()))


@functools.lru_cache(maxsize=1)
def runtime_ir_version() -> int:
    """The newest IR version the installed onnxruntime reads (`ir_version_of_opset`)."""
    return ir_version_of_opset(runtime_opset())


def ir_version_of_opset(opset: int) -> int:
    """The newest IR version a runtime running standard opsets up to `opset` reads: that of
    the newest onnx release of such an opset (onnxruntime is built on one onnx release and
    reads what it reads). Past every release onnx lists, onnx's own IR version."""
    # (release, IR version, ai.onnx opset, ai.onnx.ml opset[, training opset])
    known = [int(row[1]) for row in helper.VERSION_TABLE if int(row[2]) <= opset]
    newest_listed = max(int(row[2]) for row in helper.VERSION_TABLE)
    if not known or opset > newest_listed:
        return int(onnx.IR_VERSION)
    return max(known)


def new_model_ir_version() -> int:
    """The IR version of a model ge makes from nothing: the newest that both the installed
    onnx and the installed onnxruntime know, so that onnxruntime loads it."""
    return min(int(onnx.IR_VERSION), runtime_ir_version())


def new_model_opset() -> int:
    """The standard (ai.onnx) opset of a model ge makes from nothing when none is asked for:
    the newest that both the installed onnx and the installed onnxruntime know."""
    return min(int(onnx.defs.onnx_opset_version()), runtime_opset())


@functools.lru_cache(maxsize=1)
def _runtime_kernels() -> dict[str, tuple[tuple[int, int], ...]] | None:
    """op type -> the opset ranges of the installed onnxruntime's CPU kernels of ai.onnx;
    None when it does not list them."""
    from onnxruntime.capi import onnxruntime_pybind11_state as ort_state

    try:
        kernels = ort_state.get_all_opkernel_def()
    except (AttributeError, RuntimeError):
        return None
    ranges: dict[str, set[tuple[int, int]]] = {}
    for kernel in kernels:
        if kernel.provider == "CPUExecutionProvider" and kernel.domain in ("", "ai.onnx"):
            low, high = kernel.version_range
            ranges.setdefault(kernel.op_name, set()).add((int(low), int(high)))
    return {op: tuple(sorted(found)) for op, found in ranges.items()}


def runtime_kernel_opsets(op_type: str) -> tuple[tuple[int, int], ...] | None:
    """The opset ranges (first, last) of the installed onnxruntime's CPU kernels of the
    ai.onnx operator `op_type` (a node is run by the kernel whose range holds its
    operator's version: Add-1 by none of Add's (7, 12), (13, 13), (14, ...)); () for none,
    None when onnxruntime does not list its kernels. Imports onnxruntime when first asked."""
    kernels = _runtime_kernels()
    return None if kernels is None else kernels.get(op_type, ())
