"""The text tables every command prints: one place that decides how wide they may be.

A table printed to a terminal fits the terminal's width: its widest columns are wrapped between
words (never inside one: a name or a number broken in two cannot be read or copied) until the
lines fit or no column can narrow further. Printed anywhere else (a pipe, a file, a log),
a table keeps every cell on one line, so that `grep`, `awk` and diffs of two runs see whole rows.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

from tabulate import tabulate

__all__ = ["MIN_COLUMN", "output_width", "table"]

MIN_COLUMN = 12  # a wrapped column keeps at least this many characters


def output_width() -> int | None:
    """The width tables must fit: the terminal's (``$COLUMNS`` first, as the shell sets it) when
    stdout is a terminal, else None (no limit)."""
    try:
        if sys.stdout.isatty():
            return shutil.get_terminal_size().columns
    except (AttributeError, ValueError, OSError):  # a replaced or closed stdout
        return None
    return None


def _width(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str], width: int | None = None,
          droppable: Sequence[str] = (), **kw: Any) -> str:
    """``tabulate(rows, headers)`` (numbers left as the caller wrote them), its widest columns
    wrapped until it fits ``width`` (default :func:`output_width`; None: no limit). Where wrapping
    is not enough, the ``droppable`` columns are left out in that order, and a last line names
    them."""
    width = output_width() if width is None else width
    if width is None:
        return tabulate(rows, headers, disable_numparse=True, **kw)
    heads, cells = list(headers), [[str(c) for c in r] for r in rows]
    left_out: list[str] = []
    text = _wrapped(cells, heads, width, kw)
    for name in droppable:
        if _width(text) <= width:
            break
        if name in heads:
            i = heads.index(name)
            heads, cells = heads[:i] + heads[i + 1:], [r[:i] + r[i + 1:] for r in cells]
            left_out.append(name)
            text = _wrapped(cells, heads, width, kw)
    if left_out:
        note = (f"(left out to fit the terminal: {', '.join(left_out)}; a wider terminal, or the output "
                "piped, shows every column)")
        text += "\n" + "\n".join(textwrap.wrap(note, max(width, 40)))
    return text


def _wrapped(cells: list[list[str]], headers: list[str], width: int, kw: dict[str, Any]) -> str:
    text = tabulate(cells, headers, disable_numparse=True, **kw)
    if _width(text) <= width or not cells:
        return text
    ncol = len(headers)
    column = [[str(headers[i]), *(r[i] for r in cells if i < len(r))] for i in range(ncol)]
    widest = [max(len(c) for c in col) for col in column]
    # a column wraps between words, never inside one: a name or a number broken in two cannot be
    # read or copied, so no column narrows below its longest word
    floor = [max(MIN_COLUMN, *(len(w) for c in col for w in c.split())) for col in column]
    limits = list(widest)
    while _width(text) > width:
        over = _width(text) - width
        shrinkable = [j for j in range(ncol) if limits[j] > floor[j]]
        if not shrinkable:
            break
        i = max(shrinkable, key=lambda j: limits[j])
        limits[i] = max(floor[i], limits[i] - over)
        text = tabulate(cells, headers, disable_numparse=True, maxcolwidths=[
            None if limits[j] >= widest[j] else limits[j] for j in range(ncol)], **kw)
    return text
