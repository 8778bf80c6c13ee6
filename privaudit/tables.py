"""rich tables that fit the terminal without cutting a word: every column at least as wide as its longest word.

rich shrinks a table that is too wide by narrowing its widest columns, below their longest word if need be, and then
folds or crops that word ("refuted" becomes "ref", "[15.1, 15.1]" becomes "[15"). :func:`fit_table` sizes the
columns itself instead: each column gets its longest word (its longest line when it does not wrap) and the room that
is left goes to the columns that wrap, so a verdict word or a number is never split. When even that does not fit it
returns ``None``, and the caller shows fewer columns or another layout (e.g. one block per row).

Cells are rich markup; words are the runs between spaces, as rich wraps them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Col", "fit_table", "longest_word", "plain"]


@dataclass(frozen=True)
class Col:
    """A column: the row key it shows, its header, and whether its cells stay on one line (e.g. indented ids)."""

    key: str
    header: str
    no_wrap: bool = False


def plain(markup: str) -> str:
    """The text a markup cell shows."""
    from rich.text import Text

    return Text.from_markup(markup).plain


def longest_word(text: str) -> int:
    from rich.cells import cell_len

    return max((cell_len(word) for line in text.split("\n") for word in line.split()), default=0)


def _longest_line(text: str) -> int:
    from rich.cells import cell_len

    return max((cell_len(line) for line in text.split("\n")), default=0)


def _widths(columns: Sequence[Col], rows: Sequence[Mapping[str, str]], room: int) -> list[int] | None:
    """Content widths (padding and borders excluded) that fit ``room``, or ``None``."""
    mins, maxs = [], []
    for col in columns:
        cells = [plain(row.get(col.key, "")) for row in rows]
        widest = max([_longest_line(c) for c in cells] + [_longest_line(col.header), 1])
        mins.append(widest if col.no_wrap else max([longest_word(c) for c in cells] + [longest_word(col.header), 1]))
        maxs.append(widest)
    if sum(mins) > room:
        return None
    if sum(maxs) <= room:
        return maxs
    widths, spare = list(mins), room - sum(mins)
    order = sorted(range(len(widths)), key=lambda i: maxs[i] - mins[i])
    for rank, i in enumerate(order):  # max-min fair: short columns whole first, the rest shared evenly by the long ones
        extra = min(maxs[i] - mins[i], spare // (len(order) - rank))
        widths[i] += extra
        spare -= extra
    return widths


def fit_table(columns: Sequence[Col], rows: Sequence[Mapping[str, str]], width: int, **table_options: Any):
    """A ``rich.table.Table`` of ``rows`` (column key → markup) no wider than ``width`` in which no word is cut, or
    ``None`` when the columns' longest words alone exceed ``width``. ``table_options`` go to ``Table`` (title, …)."""
    from rich.table import Table

    room = width - 3 * len(columns) - 1  # one cell of padding either side of each column, and n + 1 rules
    widths = _widths(columns, rows, room)
    if widths is None:
        return None
    table = Table(expand=False, **table_options)
    for col, w in zip(columns, widths, strict=True):
        table.add_column(col.header, width=w, no_wrap=col.no_wrap, overflow="fold")
    for row in rows:
        table.add_row(*(row.get(col.key, "") for col in columns))
    return table
