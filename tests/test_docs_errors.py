"""docs/errors.md's table is what `ge.errors` has: every class it names is importable from
`ge.errors`, derives from GeError and the builtin named under "also a", and has the code of
its row (a user trial found a row whose class lived elsewhere)."""

from __future__ import annotations

import builtins
import re
from pathlib import Path

import pytest

import ge.errors

DOC = Path(__file__).resolve().parents[1] / "docs" / "errors.md"
ROW = re.compile(r"^\| (E\d+|GE\d+) \| (.+?) \| (`\w+`)? ?\|")


def _rows() -> list[tuple[str, str, str | None]]:
    rows = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        found = ROW.match(line)
        if found:
            code, classes, base = found.groups()
            for name in re.findall(r"`(\w+)`", classes):
                rows.append((code, name, base.strip("`") if base else None))
    return rows


def test_the_table_has_rows() -> None:
    assert len(_rows()) >= 38


@pytest.mark.parametrize(("code", "name", "base"), _rows())
def test_each_documented_error_is_in_ge_errors(code: str, name: str, base: str | None) -> None:
    cls = getattr(ge.errors, name, None)
    assert cls is not None, f"docs/errors.md names {name}, which ge.errors does not have"
    assert name in ge.errors.__all__
    assert issubclass(cls, ge.errors.GeError) and cls.code == code
    if base is not None:
        assert issubclass(cls, getattr(builtins, base))
