"""`ge`: a pure-Python graph compiler for ONNX models with GE-style Python pass plugins.

The layers live in sub-packages (see docs/architecture.md): `ge.graph` (IR and ONNX I/O),
`ge.ops`, `ge.es`, `ge.passes`, `ge.compiler`, `ge.session`, `ge.cli`.
"""

from __future__ import annotations

TYPE_CHECKING = False  # (typing not imported: the commands' entries start here, light)
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"

__all__ = ["CompileResult", "__version__", "compile", "finalize", "initialize"]


def __getattr__(name: str) -> Any:
    # `ge.initialize()` and `ge.finalize()` are the compiler's, `ge.compile()` (compile, then
    # verify in a runtime) is `ge.session`'s; resolved lazily so that `import ge.graph` (and
    # `ge --help`) does not pull in the compiler.
    if name in ("initialize", "finalize"):
        from ge import compiler

        return getattr(compiler, name)
    if name in ("compile", "CompileResult"):
        from ge.session import compilation

        return getattr(compilation, name)
    if name in _SUBPACKAGES:  # `ge.compiler.current_pass_registry()` after a plain `import ge`
        import importlib

        return importlib.import_module(f"ge.{name}")
    raise AttributeError(f"module 'ge' has no attribute {name!r}")


#: The layers, imported when first reached as attributes of `ge`.
_SUBPACKAGES = ("cli", "compiler", "es", "graph", "ops", "passes", "pyatc", "session", "testing")


def __dir__() -> list[str]:
    """The lazily resolved names too, so that `dir(ge)` and tab completion offer them."""
    return sorted(set(globals()) | set(__all__) | set(_SUBPACKAGES))
