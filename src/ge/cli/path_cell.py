"""A table cell of paths that wraps only where a path may break.

rich wraps a long cell anywhere, so `ge passes list` at 160 columns split `file:line` in
the middle of the file name or the line number (trial KK); `path_cell` wraps at whitespace
and after path separators only.
"""

from __future__ import annotations

import os
from typing import Any

from ge.cli.output import encodable

__all__ = ["path_cell"]


def path_cell(text: str) -> Any:
    """A table cell holding paths (`file:line`, an entry point): it wraps at whitespace and
    after path separators only, so that a `file:line` too wide for its column is never split
    inside its file name or line number (`rope_fusion.py:2` / `9` could not be copied or
    clicked); a piece wider than the column alone is folded."""
    return _PathCell(encodable(text))


class _PathCell:
    """The renderable of `path_cell`: its minimum width is its widest piece."""

    def __init__(self, text: str) -> None:
        import re

        separators = "/" + (os.sep if os.sep != "/" else "") + (
            os.altsep if os.altsep and os.altsep != "/" else "")
        self.text = text
        # runs of spaces, and words cut after each separator: `/tmp/`, `p/`, `f.py:29`
        self.pieces = re.findall(rf"\s+|[^\s{re.escape(separators)}]*[{re.escape(separators)}]"
                                 rf"|[^\s{re.escape(separators)}]+", text)

    def __rich_measure__(self, console: Any, options: Any) -> Any:
        from rich.cells import cell_len
        from rich.measure import Measurement

        widest = max((cell_len(p) for p in self.pieces if not p.isspace()), default=0)
        whole = max((cell_len(line) for line in self.text.splitlines()), default=0)
        return Measurement(min(widest, options.max_width), min(whole, options.max_width))

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.cells import cell_len
        from rich.text import Text

        width = max(1, options.max_width)
        lines: list[str] = []
        line = ""
        for piece in self.pieces:
            if "\n" in piece:
                lines.append(line)
                line = ""
                continue
            if piece.isspace():
                if line and cell_len(line) + cell_len(piece) < width:
                    line += piece
                continue
            if line and cell_len(line) + cell_len(piece) > width:
                lines.append(line.rstrip())
                line = ""
            line += piece
        lines.append(line.rstrip())
        # a piece wider than the column is folded, as rich's overflow="fold" does
        yield Text("\n".join(lines), overflow="fold")
