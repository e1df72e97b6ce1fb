"""The arguments of the registering decorators, checked as their own validations are.

GE's decorators take keywords only (`@register_fusion_pass(name=..., stage=...)`); a pass
author reaching for another form (`@register_fusion_pass("P", stage)`, the decorator bare,
`priority=5` to order passes) got Python's bare TypeError. `checked_arguments` makes each
such call E13030 naming the keywords taken, the pass and the user's line.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from ge.errors import PassRegisterTypeError
from ge.passes.source import caller_location

__all__ = ["checked_arguments"]

_P = ParamSpec("_P")
_R = TypeVar("_R")

#: Keywords a user may reach for to order passes, which ge orders by name within a stage.
_ORDER_WORDS = frozenset({"priority", "order", "rank", "index", "before", "after", "weight"})


def checked_arguments(factory: Callable[_P, _R]) -> Callable[_P, _R]:
    """`factory` (a registering decorator's factory) with its arguments checked the way its
    own validations are: an unknown keyword (`priority=5`), a positional argument or a
    missing `name`/`stage` is E13030 naming the keywords it takes, the pass and the user's
    line, not Python's bare TypeError."""
    import inspect

    signature = inspect.signature(factory)
    accepted = list(signature.parameters)
    api = factory.__name__

    @functools.wraps(factory)
    def checked(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            signature.bind(*args, **kwargs)
        except TypeError:
            raise _argument_error(api, accepted, args, kwargs) from None
        return factory(*args, **kwargs)

    return checked


_FORM = {
    "register_fusion_pass": 'name="MyPass", stage=PassStage.AFTER_INFER_SHAPE',
    "register_decompose_pass": 'name="MyPass", stage=PassStage.AFTER_INFER_SHAPE, '
                               'op_types=["Conv"]',
}


def _argument_error(api: str, accepted: list[str], args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> PassRegisterTypeError:
    """E13030 for a registering decorator called in a form it does not take (trial O: GE
    authors write `@register_fusion_pass("P", stage)` or the decorator bare; trial KK:
    `priority=5`)."""
    name = kwargs.get("name")
    name = name if isinstance(name, str) and name.strip() else None
    form = f"@{api}({_FORM[api]}) above the class"
    unknown = [k for k in kwargs if k not in accepted]
    if unknown:
        order = ("; passes of one stage run in lexicographic order of their names: name "
                 "them to order them" if _ORDER_WORDS.intersection(unknown) else "")
        message = (f"{api} got unknown keyword argument(s) {', '.join(map(repr, unknown))}; "
                   f"it takes {', '.join(accepted)}: {form}{order}")
    else:
        if not args:
            missing = [k for k in ("name", "stage", "op_types")
                       if k in accepted and k not in kwargs]
            why = f"{', '.join(missing)} missing"
        elif len(args) == 1 and not kwargs and isinstance(args[0], type):
            why = "it is used bare, without arguments"
        else:
            why = f"it was given {len(args)} positional argument(s)"
        message = f"{api} is called with keyword arguments, as GE's is: {form} ({why})"
    return PassRegisterTypeError(message, pass_name=name, location=caller_location())
