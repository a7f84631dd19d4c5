"""Plain-text tables for the command-line tools: left-aligned columns, two spaces apart."""

from __future__ import annotations

from collections.abc import Sequence


def table(headers: Sequence[str] | None, rows: Sequence[Sequence[object]]) -> str:
    """Rows under an optional header line; every row has the same number of cells."""
    cells = ([list(headers)] if headers else []) + [[str(cell) for cell in row] for row in rows]
    if not cells:
        return ""
    if len({len(row) for row in cells}) > 1:
        raise ValueError(f"rows differ in length: {sorted({len(row) for row in cells})}")
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = ("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells)
    return "\n".join(line.rstrip() for line in lines)
