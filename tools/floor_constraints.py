"""Print pip constraints that pin every runtime dependency of ge to its declared floor.

`make test-floors` (and CI) installs ge with these, so the suite runs against the oldest
versions pyproject.toml admits, not only the newest ones pip picks: a floor that no longer
works fails CI instead of a user's install. Read from the installed distribution's metadata
(install ge with --no-deps first), so it works on every Python ge supports.

A runtime dependency without a `>=` floor is an error (exit 1): it would not be tested.
Beside its floor a requirement may exclude releases (`!=0.7.0`: a release known bad), in
either order, as the metadata writes them (`ml_dtypes!=0.7.0,>=0.5.0`).
"""

from __future__ import annotations

import re
import sys
from importlib.metadata import PackageNotFoundError, requires

_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*)$")
_FLOOR = re.compile(r"^>=\s*([0-9][0-9A-Za-z.]*)$")
_EXCLUDED = re.compile(r"^!=\s*[0-9][0-9A-Za-z.*]*$")


def _floor(spec: str) -> tuple[str, str] | None:
    """(name, floor) of a requirement with one `>=` clause and otherwise only `!=` ones."""
    named = _NAME.match(spec)
    if named is None:
        return None
    clauses = [c.strip() for c in named.group(2).split(",")]
    floors = [m.group(1) for m in map(_FLOOR.match, clauses) if m is not None]
    if len(floors) != 1 or not all(_FLOOR.match(c) or _EXCLUDED.match(c) for c in clauses):
        return None
    return named.group(1), floors[0]


def floor_constraints(requirements: list[str]) -> list[str]:
    """`name==floor` for each runtime requirement (an extra's, `pytest>=8; extra == "dev"`,
    is not one); a requirement for some environments only keeps its marker
    (`tomli==2; python_version < "3.11"`), which pip's constraints take as written."""
    pins = []
    for requirement in requirements:
        spec, _, marker = (part.strip() for part in requirement.partition(";"))
        if re.search(r"\bextra\s*==", marker):
            continue
        found = _floor(spec)
        if found is None:
            raise ValueError(f"runtime dependency {requirement!r} has no single '>=' floor")
        pins.append(f"{found[0]}=={found[1]}" + (f"; {marker}" if marker else ""))
    return pins


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args in (["-h"], ["--help"]):  # (`--help` printed the pins: trial AI)
        print(__doc__)
        return 0
    if args:
        print(f"floor_constraints: takes no argument, got {' '.join(args)}", file=sys.stderr)
        return 2
    try:
        requirements = requires("ge")
    except PackageNotFoundError:
        print("floor_constraints: ge is not installed in this Python; install it first "
              "(pip install --no-deps -e .)", file=sys.stderr)
        return 1
    try:
        print("\n".join(floor_constraints(requirements or [])))
    except ValueError as err:
        print(f"floor_constraints: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
