"""The opset a builder builds at: the graph being compiled's, inside `opset_scope`.

The compiler wraps every pass invocation in `opset_scope(graph.opset_imports)`, so a
replacement built in a pass uses the operator signatures of the model it goes into. Outside
any scope a builder uses the newest opset that both onnx and the installed onnxruntime
support (`ge._compat.new_model_opset`), so that what it builds runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

from ge._compat import new_model_opset
from ge.errors import BuilderTypeError
from ge.ops.schemas import normalize_domain

__all__ = ["current_opset_imports", "normalize_opset_imports", "opset_scope"]

_SCOPE: ContextVar[dict[str, int] | None] = ContextVar("ge_es_opset_scope", default=None)


def normalize_opset_imports(opset: int | Mapping[str, int] | None) -> dict[str, int]:
    """A `{domain: version}` dict from an int (the ONNX domain), a mapping, or None."""
    if opset is None:
        scoped = _SCOPE.get()
        return dict(scoped) if scoped is not None else {"": new_model_opset()}
    if isinstance(opset, bool) or not isinstance(opset, (int, Mapping)):
        raise BuilderTypeError(
            f"opset must be an int or a dict of domain -> version, got {type(opset).__name__}"
        )
    if isinstance(opset, int):
        return {"": opset}
    out: dict[str, int] = {}
    for domain, version in opset.items():
        if not isinstance(domain, str) or isinstance(version, bool) or not isinstance(
            version, int
        ):
            raise BuilderTypeError(f"opset imports must map str to int, got {domain!r}: "
                                   f"{version!r}")
        out[normalize_domain(domain)] = version
    if "" not in out:  # (asked only when missing: asking imports onnxruntime)
        out[""] = new_model_opset()
    return out


def current_opset_imports() -> dict[str, int]:
    """The opset imports a new builder would use here."""
    return normalize_opset_imports(None)


@contextmanager
def opset_scope(opset_imports: int | Mapping[str, int]) -> Iterator[dict[str, int]]:
    """Builders created inside the block build at these opsets (context-local, nestable)."""
    imports = normalize_opset_imports(opset_imports)
    token = _SCOPE.set(imports)
    try:
        yield dict(imports)
    finally:
        _SCOPE.reset(token)
