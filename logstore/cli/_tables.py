"""Tables as Kafka's tools print them (``logstore groups``, ``logstore users``).

A leaf of the CLI: the command modules import it; it imports none of them.

>>> print("\\n".join(format_table(["A", "LONGER"], [["x", 1], ["yyyy", None]])))
A    LONGER
x    1
yyyy -
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def format_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """Left-aligned columns one space apart; None prints as "-"."""
    text = [[("-" if cell is None else str(cell)) for cell in row] for row in rows]
    widths = [max([len(title)] + [len(row[i]) for row in text]) for i, title in enumerate(header)]
    lines = []
    for row in [list(header), *text]:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=True)]
        lines.append(" ".join(cells).rstrip())
    return lines
