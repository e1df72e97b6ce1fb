"""The compiler's built-in passes, written with the public pass API (`ge.passes`).

`BUILTIN_PASSES` lists them in the order the engine runs them inside their step; each is
marked with `@builtin_pass(name=..., step=...)` and can be disabled by name.
"""

from __future__ import annotations

__all__ = ["BUILTIN_PASSES"]

BUILTIN_PASSES: tuple[type, ...] = ()
