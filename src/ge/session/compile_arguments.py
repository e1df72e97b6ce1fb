"""The arguments of `ge.compile` checked before anything is loaded or run, and the rule
deciding which verification a compilation runs, which `ge compile` shares for its flags.

Each check raises `CompilerOptionTypeError` (GE1202, a `TypeError`) for an argument of the
wrong type, naming the type it got, and `CompilerOptionError` for a wrong value, so that
no argument is silently ignored or misread.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ge.compiler.arguments import described, mapping, text
from ge.errors import CompilerOptionError, CompilerOptionTypeError, GeError
from ge.graph import Graph

__all__ = ["API_VERIFY_NAMES", "DEFAULT_ATOL", "DEFAULT_RTOL", "VALUE_INFO_MODES",
           "VERIFY_MODES", "VerifyNames", "check_dims_argument", "check_dump_arguments",
           "check_inputs_argument", "check_tolerance", "check_value_info", "value_info_mode",
           "verification_mode"]

#: What `verify` may be: False/"none", True/"final" (the compiled model once), "each-pass".
VERIFY_MODES = ("none", "final", "each-pass")
#: The tolerances of verification when none are given (`ge.compile`, `ge compile`).
DEFAULT_RTOL, DEFAULT_ATOL = 1e-4, 1e-5
#: Which intermediate value types the saved model carries: "auto" (all if the input model had
#: any value_info, else none: an exporter's untyped model stays as lean), "all", "none".
VALUE_INFO_MODES = ("auto", "all", "none")


def _verify_mode(verify: bool | str) -> str:
    if verify is False:
        return "none"
    if verify is True:
        return "final"
    if isinstance(verify, str) and verify in VERIFY_MODES:
        return verify
    wanted = f"verify must be True, False or one of {VERIFY_MODES}"
    if not isinstance(verify, str):  # 1 and "1" are not the same mistake
        raise CompilerOptionTypeError(f"{wanted}, got {described(verify)}")
    raise CompilerOptionError(f"{wanted}, got {verify!r}")


@dataclass(frozen=True)
class VerifyNames:
    """How a caller of `verification_mode` spells the arguments in its errors, and the
    error it raises: `ge.compile`'s keywords (`API_VERIFY_NAMES`), or `ge compile`'s flags
    (with `CommandLineError`), so that one rule gives each its own words."""

    verify: str  # what turns verification on: "verify=True", "--verify"
    inputs: str
    dims: str
    error: type[GeError]


#: `ge.compile`'s spelling: its keyword arguments, `CompilerOptionError` (GE1202).
API_VERIFY_NAMES = VerifyNames("verify=True", "inputs=", "dims=", CompilerOptionError)


def verification_mode(verify: bool | str | None, *, inputs_given: bool, dims_given: bool,
                      tolerances_given: Sequence[str] = (),
                      names: VerifyNames = API_VERIFY_NAMES) -> str:
    """The verification a compilation runs ("none", "final" or "each-pass"): the one rule
    `ge.compile` and `ge compile` share.

    `verify` decides when given (not None); else verification inputs (`inputs_given`) or
    sizes for generated ones (`dims_given`) ask for "final", as they serve nothing else.
    Refused (`names.error`, in `names`' words): `verify` turned off explicitly (False,
    "none") beside inputs or dims, which only verification reads; dims beside inputs
    (there is nothing generated to size); a tolerance (`tolerances_given`, the names of
    those given as the caller spells them) without verification, which would compare
    nothing with it. So no argument is silently ignored."""
    given = [what for what, there in ((names.inputs, inputs_given), (names.dims, dims_given))
             if there]
    if verify is None:
        mode = "final" if given else "none"
    else:
        mode = _verify_mode(verify)
        if mode == "none" and given:
            raise names.error(
                f"verify={verify!r} contradicts {' and '.join(given)}: they are only used to "
                f"verify; leave verify out ({given[0]} alone implies verify='final') or "
                f"leave {' and '.join(given)} out")
    if inputs_given and dims_given:
        raise names.error(f"{names.dims} sizes the symbolic dims of generated inputs; with "
                          f"{names.inputs} given there are none to size")
    if tolerances_given and mode == "none":
        flags = " and ".join(tolerances_given)
        raise names.error(f"{flags} {'needs' if len(tolerances_given) == 1 else 'need'} "
                          f"{names.verify} (or {names.inputs} or {names.dims}): without it "
                          "nothing is compared")
    return mode


def check_tolerance(value: object, name: str) -> None:
    """Refuse a verification tolerance that is not a finite number >= 0, naming it as `name`
    (`rtol`, `--rtol`): `CompilerOptionTypeError` (GE1202) for one that is not a number (a
    str, a bool), naming its type; `CompilerOptionError` for a negative one, NaN or an
    infinity (with inf every difference is within it, so verification would pass anything;
    with NaN none is, or every one, as the comparison is written)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise CompilerOptionTypeError(f"{name} must be a number, got {described(value)}")
    number = float(value)
    if not math.isfinite(number) or number < 0:
        shown = f"{number:g}" if isinstance(value, (float, np.floating)) else repr(value)
        raise CompilerOptionError(f"{name} must be a finite number >= 0, got {shown}")


def check_inputs_argument(inputs: object) -> None:
    """Refuse `inputs` of another type than a mapping of input names to arrays or the path
    of an `.npz` file (a list of arrays was read with `.items()`: an AttributeError)."""
    if inputs is None or isinstance(inputs, (str, os.PathLike)):
        return
    if not isinstance(inputs, Mapping):
        raise CompilerOptionTypeError(
            "inputs must be a mapping of input names to arrays ({'x': array, ...}) or the "
            f"path of an .npz file, got {described(inputs)}")
    names = [name for name in inputs if not isinstance(name, str)]
    if names:
        raise CompilerOptionTypeError(
            f"inputs must map input names (str) to arrays, got {described(names[0])} as a "
            "name")


def check_dims_argument(dims: object) -> None:
    """Refuse `dims` that is not a mapping of symbolic dim names to sizes (`--dims`'s
    "NAME=SIZE" is shown as the mapping it means)."""
    name, sep, number = dims.partition("=") if isinstance(dims, str) else ("", "", "")
    if sep and name and number.isdigit():
        raise CompilerOptionTypeError(f"dims must be a mapping of symbolic dim names to sizes, "
                                      f"got {described(dims)}: write {{{name!r}: {number}}}")
    for key, size in mapping(dims, "dims",
                             "symbolic dim names to sizes ({'batch': 4, ...})").items():
        if not isinstance(key, str):
            raise CompilerOptionTypeError(
                f"dims must map symbolic dim names (str) to sizes, got {described(key)} as a "
                "name")
        if isinstance(size, bool) or not isinstance(size, int):
            hint = f": write {size}" if isinstance(size, str) and size.isdigit() else ""
            raise CompilerOptionTypeError(
                f"dims must map symbolic dim names to sizes (int), got {described(size)} for "
                f"{key!r}{hint}")


def check_value_info(mode: object) -> None:
    if text(mode, "value_info", f"one of {VALUE_INFO_MODES}") not in VALUE_INFO_MODES:
        raise CompilerOptionError(f"value_info must be one of {VALUE_INFO_MODES}, got {mode!r}")


def check_dump_arguments(dump: object, dump_level: object) -> None:
    if dump is not None and not isinstance(dump, (str, os.PathLike)):
        raise CompilerOptionTypeError(
            f"dump must be the path of a folder (a str or os.PathLike), got {described(dump)}")
    if dump_level is not None and not isinstance(dump_level, str):
        hint = f": write '{dump_level}'" if isinstance(dump_level, int) else ""
        raise CompilerOptionTypeError(
            "dump_level must be a str (as DUMP_GRAPH_LEVEL: '1' to '4' or '|'-separated "
            f"names), got {described(dump_level)}{hint}")
    if dump_level is not None and dump is None:
        raise CompilerOptionError(f"dump_level={dump_level!r} needs dump=FOLDER: without it "
                                  "nothing is dumped (the CLI's --dump-level needs --dump)")


def value_info_mode(mode: str, graph: Graph) -> bool:
    check_value_info(mode)
    if mode == "auto":
        return graph.root_graph().model.typed_values
    return mode == "all"
