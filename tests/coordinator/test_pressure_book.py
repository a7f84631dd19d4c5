"""The coordinator's view of CPU pressure, pure: the hysteresis rule, the book of nodes
and the events it gives, and the ``[pressure]`` settings a config file may hold."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.config import CoordinatorConfig, PressureSettings
from coordinator.services.pressure import PressureBook, held_under
from shared.config import ConfigError, load
from shared.protocol import CpuPressure

SETTINGS = PressureSettings(enter_percent=60, leave_percent=30)
percents = st.floats(0, 100)


@given(st.booleans(), percents)
def test_the_rule_enters_at_enter_leaves_at_leave_and_holds_between(
    was_under: bool, avg10: float
) -> None:
    under = held_under(was_under, avg10, SETTINGS)
    if avg10 >= 60:
        assert under
    elif avg10 <= 30:
        assert not under
    else:
        assert under == was_under


@given(st.lists(percents, max_size=40))
def test_the_book_tells_each_change_once_and_they_alternate(readings: list[float]) -> None:
    book = PressureBook(SETTINGS)
    kinds = []
    for at, avg10 in enumerate(readings):
        notes = book.report("n1", CpuPressure(source="psi", avg10=avg10), now=float(at))
        kinds += [note.kind for note in notes]
        assert all(note.node == "n1" for note in notes)
        assert ("n1" in book.under()) == held_under(
            bool(kinds) and kinds[-1] == "pressure", avg10, SETTINGS
        )
    assert kinds == ["pressure", "relieved"] * (len(kinds) // 2) + ["pressure"] * (len(kinds) % 2)
    # A change needs a crossing: never two readings between the thresholds apart.
    crossings = sum(1 for avg10 in readings if avg10 >= 60 or avg10 <= 30)
    assert len(kinds) <= crossings


def test_the_book_keeps_when_a_node_last_changed_and_forgets_a_silent_one() -> None:
    book = PressureBook(SETTINGS)
    assert book.report("n1", CpuPressure(source="throttling", avg10=10), now=1.0) == []
    [entered] = book.report("n1", CpuPressure(source="throttling", avg10=75), now=2.0)
    assert (entered.kind, entered.reason) == (
        "pressure",
        "cpu pressure 75% (CFS periods throttled) >= 60%",
    )
    book.report("n1", CpuPressure(source="throttling", avg10=45), now=3.0)
    shown = book.of("n1")
    assert shown is not None
    assert (shown.under, shown.avg10, shown.at, shown.since) == (True, 45, 3.0, 2.0)
    assert book.under() == frozenset({"n1"})
    [gone] = book.report("n1", None, now=4.0)
    assert (gone.kind, gone.reason) == ("relieved", "no pressure reading from its agent")
    assert (book.of("n1"), book.under()) == (None, frozenset())
    assert book.report("n1", None, now=5.0) == []  # nothing to leave


def test_pressure_settings_come_from_the_config_file(tmp_path: Path) -> None:
    toml = tmp_path / "coordinator.toml"
    toml.write_text(
        'join_token = "join-token-0123456789abcdef"\n'
        'api_tokens = ["api-token-0123456789abcdef"]\n'
        "[pressure]\nenter_percent = 80.0\nleave_percent = 50.0\n"
    )
    config = load(CoordinatorConfig, file=toml)
    assert config.pressure == PressureSettings(enter_percent=80.0, leave_percent=50.0)
    plain = toml.with_name("plain.toml")
    plain.write_text(toml.read_text().split("[pressure]")[0])
    assert load(CoordinatorConfig, file=plain).pressure == PressureSettings(
        enter_percent=60.0, leave_percent=30.0
    )


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ("enter_percent = 30.0\nleave_percent = 30.0\n", "leave_percent (30) must be below"),
        ("enter_percent = 101.0\n", "Expected `float` <= 100.0"),
        ("leave_percent = -1.0\n", "Expected `float` >= 0.0"),
        ("enter = 70.0\n", "Object contains unknown field `enter`"),
    ],
    ids=["no-band", "enter-above-100", "leave-negative", "unknown-field"],
)
def test_bad_pressure_settings_are_refused_by_name(
    tmp_path: Path, table: str, problem: str
) -> None:
    toml = tmp_path / "coordinator.toml"
    toml.write_text(
        'join_token = "join-token-0123456789abcdef"\n'
        'api_tokens = ["api-token-0123456789abcdef"]\n'
        f"[pressure]\n{table}"
    )
    with pytest.raises(ConfigError, match="pressure") as caught:
        load(CoordinatorConfig, file=toml)
    assert problem in str(caught.value)
