"""shared.bounds: peer text cut to fit a message."""

from __future__ import annotations

from shared.bounds import MAX_MESSAGE, MAX_SHOWN, clipped, shown


def test_clipped_keeps_short_text_and_marks_where_long_text_was_cut() -> None:
    assert clipped("disk full") == "disk full"
    assert clipped("x" * MAX_MESSAGE) == "x" * MAX_MESSAGE
    cut = clipped("y" * (MAX_MESSAGE + 1))
    assert (len(cut), cut[-4:]) == (MAX_MESSAGE, "y...")
    assert clipped("abcdef", 5) == "ab..."


def test_shown_quotes_a_value_within_a_line() -> None:
    assert shown(-5) == "-5"
    assert shown("node-a") == "'node-a'"
    assert len(shown("z" * 1000)) == MAX_SHOWN
