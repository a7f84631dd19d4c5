"""agent.runtime.applied_file: what the agent last set on each container, written through
to a file on every change and read back by the next run of the agent."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agent.runtime.applied_file import (
    AppliedSettings,
    UnreadableApplied,
    applied_path,
    read_applied,
    write_applied,
)
from agent.runtime.settings import Settings
from shared.cpuset import CpuSet

BOUND = Settings(
    cpuset_cpus=CpuSet([2, 3]),
    cpuset_mems=CpuSet([0]),
    cpu_shares=717,
    cpu_quota=-1,
    cpu_period=100_000,
    mem_limit=64 * 2**20,
    memswap_limit=64 * 2**20,
    mem_reservation=32 * 2**20,
)
POOLED = Settings(
    cpuset_cpus=CpuSet([0, 1]),
    cpuset_mems=CpuSet([0]),
    cpu_shares=1024,
    cpu_quota=50_000,
    cpu_period=100_000,
    mem_limit=0,
    memswap_limit=0,
    mem_reservation=0,
)


def test_the_file_sits_in_the_state_directory_under_the_nodes_name() -> None:
    assert applied_path("/var/lib/allot", "n1") == Path("/var/lib/allot/applied-n1.json")


def test_settings_written_are_read_back_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "applied.json"
    write_applied(path, {"bound": BOUND, "pooled": POOLED})
    assert read_applied(path) == {"bound": BOUND, "pooled": POOLED}


def test_before_the_first_write_nothing_was_applied(tmp_path: Path) -> None:
    assert read_applied(tmp_path / "applied.json") == {}


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"{not json", "is damaged"),
        (b'{"version": 1, "containers": {"c1": {"cpuset_cpus": "x"}}}', "is damaged"),
        (b'{"version": 2, "containers": {}}', "has version 2; this agent reads 1"),
    ],
    ids=["not-json", "bad-settings", "other-version"],
)
def test_a_file_that_cannot_be_used_says_why(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "applied.json"
    path.write_bytes(content)
    with pytest.raises(UnreadableApplied, match=reason):
        read_applied(path)


def test_every_change_is_written_through(tmp_path: Path) -> None:
    path = tmp_path / "applied.json"
    applied = AppliedSettings(path)
    applied.set("bound", BOUND)
    applied.set("pooled", POOLED)
    assert read_applied(path) == {"bound": BOUND, "pooled": POOLED}
    applied.forget("bound")
    assert read_applied(path) == {"pooled": POOLED}
    applied.set("bound", BOUND)
    applied.keep_only({"bound", "another"})
    assert read_applied(path) == {"bound": BOUND}


def test_a_new_run_loads_what_the_last_one_wrote(tmp_path: Path) -> None:
    path = tmp_path / "applied.json"
    AppliedSettings(path).set("bound", BOUND)
    restarted = AppliedSettings(path)
    assert restarted.settings == {}
    restarted.load()
    assert restarted.settings == {"bound": BOUND}


def test_an_unusable_file_is_logged_and_the_agent_starts_knowing_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "applied.json"
    path.write_bytes(b"\0\0")
    applied = AppliedSettings(path)
    with caplog.at_level(logging.WARNING, logger="allot.agent.runtime"):
        applied.load()
    assert applied.settings == {}
    (record,) = caplog.records
    assert record.getMessage().startswith("what the agent last applied is unknown")


def test_a_file_that_cannot_be_written_is_logged_once_and_memory_still_serves(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    applied = AppliedSettings(blocked / "applied.json")  # its directory is a file
    with caplog.at_level(logging.WARNING, logger="allot.agent.runtime"):
        applied.set("bound", BOUND)
        applied.set("pooled", POOLED)
    assert applied.settings == {"bound": BOUND, "pooled": POOLED}
    (record,) = caplog.records
    assert record.getMessage() == "cannot keep what the agent applied across restarts"
