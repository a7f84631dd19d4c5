"""WriteHealth: each cause of failing writes said once, and their end said once."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from coordinator.store.write_health import WriteHealth, disk_note, free_bytes


@pytest.fixture
def said(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    logging.getLogger("allot").propagate = True
    caplog.set_level(logging.INFO, logger="allot.coordinator.store")
    return caplog


def messages(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records]


def test_each_cause_is_said_once_and_the_recovery_once(
    tmp_path: Path, said: pytest.LogCaptureFixture
) -> None:
    health = WriteHealth(tmp_path)
    health.succeeded()  # nothing to say while all is well
    assert health.problem == ""

    for _ in range(3):
        health.failed("database or disk is full")
    assert health.problem.startswith("database or disk is full (")
    assert health.problem.endswith(f" bytes free in {tmp_path})")
    health.failed("disk I/O error")
    health.succeeded()
    health.succeeded()

    assert health.problem == ""
    assert messages(said) == [
        ("ERROR", "store writes fail: database or disk is full"),
        ("ERROR", "store writes fail: disk I/O error"),
        ("INFO", "store writes succeed again"),
    ]


def test_the_free_space_of_a_directory_that_is_gone_is_said_unknown(tmp_path: Path) -> None:
    gone = tmp_path / "gone"

    assert free_bytes(tmp_path) > 0
    assert disk_note(gone) == f"free space in {gone} unknown: No such file or directory"
