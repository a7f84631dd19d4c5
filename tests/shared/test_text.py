"""shared.text: plain-text tables for the command-line tools."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.text import table


@pytest.mark.parametrize(
    ("headers", "rows", "expected"),
    [
        (["A", "BB"], [[1, "x"], ["long", 22]], "A     BB\n1     x\nlong  22"),
        (None, [["a", "b"], ["ccc", "d"]], "a    b\nccc  d"),
        (["NAME", "STATE"], [], "NAME  STATE"),
        (None, [["only"]], "only"),
        (["K", "V"], [["key", ""], ["k", "value"]], "K    V\nkey\nk    value"),
        (None, [[None, 1.5, True]], "None  1.5  True"),
        (None, [["a", "b  "]], "a  b"),
    ],
    ids=[
        "with-headers",
        "without-headers",
        "headers-only",
        "one-cell",
        "empty-last-cell-leaves-no-spaces",
        "cells-are-str",
        "trailing-spaces-in-a-cell",
    ],
)
def test_table(
    headers: Sequence[str] | None, rows: Sequence[Sequence[object]], expected: str
) -> None:
    assert table(headers, rows) == expected


@pytest.mark.parametrize("headers", [None, []], ids=["no-headers", "empty-headers"])
def test_empty_table_is_empty_text(headers: Sequence[str] | None) -> None:
    assert table(headers, []) == ""


@pytest.mark.parametrize(
    ("headers", "rows"),
    [(["A", "B"], [["1"]]), (["A"], [["1", "2"]]), (None, [["1", "2"], ["3"]])],
    ids=["row-shorter-than-headers", "row-longer-than-headers", "ragged-rows"],
)
def test_rows_of_different_lengths_are_refused(
    headers: Sequence[str] | None, rows: Sequence[Sequence[object]]
) -> None:
    # A caller's mistake: it must fail loudly rather than print a misaligned table.
    with pytest.raises(ValueError, match="rows differ in length"):
        table(headers, rows)


cells = st.text(alphabet="abcxyz0189-.", max_size=8)


@settings(max_examples=100)
@given(
    st.integers(min_value=1, max_value=5).flatmap(
        lambda width: st.lists(st.lists(cells, min_size=width, max_size=width), min_size=1)
    )
)
def test_columns_line_up(rows: list[list[str]]) -> None:
    lines = table(None, rows).split("\n")
    assert len(lines) == len(rows)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for line, row in zip(lines, rows, strict=True):
        assert line == line.rstrip()
        start = 0
        for cell, width in zip(row, widths, strict=True):
            # Each cell starts where the previous columns and their two-space gaps end,
            # and only spaces follow it up to the next column.
            assert line[start : start + width + 2].rstrip(" ") == cell
            start += width + 2
        assert len(line) <= start
