"""Limits read back from cgroup v2 files (tests/docker/cgroups.py), from a directory of
files as runc writes them: no cgroup v2 host needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.runtime.settings import Settings
from shared.cpuset import CpuSet
from shared.protocol import Limits
from tests.docker.cgroups import as_v2_holds, v2_settings
from tests.docker.cpu_weight import cpu_weight

ONLINE, MEMORY_NODES = CpuSet([0, 1]), CpuSet([0])


def write_v2(directory: Path, settings: Settings, *, runc: str) -> None:
    """The files runc writes for ``settings`` (cpusets unset: their effective values)."""
    swap = settings.memswap_limit - settings.mem_limit if settings.mem_limit else 0
    quota = "max" if settings.cpu_quota < 0 else str(settings.cpu_quota)
    files = {
        "cpuset.cpus": "",
        "cpuset.cpus.effective": str(settings.cpuset_cpus),
        "cpuset.mems": "",
        "cpuset.mems.effective": str(settings.cpuset_mems),
        "cpu.weight": str(cpu_weight(settings.cpu_shares, runc=runc)),
        "cpu.max": f"{quota} {settings.cpu_period}",
        "memory.max": str(settings.mem_limit or "max"),
        "memory.swap.max": str(swap) if settings.mem_limit else "max",
        "memory.low": str(settings.mem_reservation),
    }
    for name, text in files.items():
        (directory / name).write_text(text + "\n")


@pytest.mark.parametrize("runc", ["1.1.5", "1.3.2"])
@pytest.mark.parametrize("shares", [2, 512, 717, 1024, 2000, 262_144])
def test_what_runc_wrote_reads_back_as_the_limits_given(
    tmp_path: Path, runc: str, shares: int
) -> None:
    given = Settings.of(
        Limits(cpu_shares=shares, cpu_quota=20_000, mem_limit=64 << 20, memswap_limit=64 << 20),
        online=ONLINE,
        memory_nodes=MEMORY_NODES,
    )
    write_v2(tmp_path, given, runc=runc)
    assert v2_settings(tmp_path, runc=runc) == as_v2_holds(given, runc=runc)


def test_two_shares_values_with_one_weight_read_back_alike(tmp_path: Path) -> None:
    one, other = (
        Settings.of(Limits(cpu_shares=shares), online=ONLINE, memory_nodes=MEMORY_NODES)
        for shares in (1030, 1040)
    )
    assert cpu_weight(1030, runc="1.1.5") == cpu_weight(1040, runc="1.1.5")
    assert as_v2_holds(one, runc="1.1.5") == as_v2_holds(other, runc="1.1.5")
    assert as_v2_holds(one, runc="1.3.2") != as_v2_holds(other, runc="1.3.2")
