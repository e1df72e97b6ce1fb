"""Skip markers for tests whose subject needs a newer onnx or onnxruntime than the oldest ge
supports (pyproject.toml's floors; Python 3.10 gets onnxruntime 1.23 at most).

Only what the installed packages cannot do is skipped, and the reason names the version
that can: an opset onnxruntime does not run, a kernel or an input form it lacks, a check
onnx does not make. Everything else runs on every supported version.
"""

from __future__ import annotations

import re

import onnx
import onnxruntime
import pytest

from ge._compat import runtime_opset

__all__ = ["ONNX_OPSET", "RUNTIME_OPSET", "needs_onnx", "needs_opset", "needs_runtime",
           "onnx_at_least", "runtime_at_least"]

#: The newest standard opset the installed onnx knows, and the installed onnxruntime runs.
ONNX_OPSET = onnx.defs.onnx_opset_version()
RUNTIME_OPSET = runtime_opset()


def _release(version: str) -> tuple[int, ...]:
    """(1, 23, 2) of "1.23.2" (and of "1.23.2.dev0" or "1.24.0rc1": numbers only)."""
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def runtime_at_least(version: str) -> bool:
    """Whether the installed onnxruntime is `version` or later."""
    return _release(onnxruntime.__version__) >= _release(version)


def onnx_at_least(version: str) -> bool:
    """Whether the installed onnx is `version` or later."""
    return _release(onnx.__version__) >= _release(version)


def needs_opset(opset: int, what: str = "") -> pytest.MarkDecorator:
    """Skip unless onnx knows standard opset `opset` and onnxruntime runs it."""
    why = f" ({what})" if what else ""
    return pytest.mark.skipif(
        min(ONNX_OPSET, RUNTIME_OPSET) < opset,
        reason=f"needs opset {opset}{why}: onnx {onnx.__version__} knows opsets up to "
               f"{ONNX_OPSET}, onnxruntime {onnxruntime.__version__} runs up to {RUNTIME_OPSET}")


def needs_runtime(version: str, what: str) -> pytest.MarkDecorator:
    """Skip under an onnxruntime older than `version`, which cannot do `what`."""
    return pytest.mark.skipif(
        not runtime_at_least(version),
        reason=f"onnxruntime {onnxruntime.__version__} {what} ({version} on does)")


def needs_onnx(version: str, what: str) -> pytest.MarkDecorator:
    """Skip under an onnx older than `version`, which cannot do `what`."""
    return pytest.mark.skipif(
        not onnx_at_least(version),
        reason=f"onnx {onnx.__version__} {what} ({version} on does)")
