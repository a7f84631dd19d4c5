"""How Docker's limits appear in cgroup v2 files: the table the VM tests compare against,
checked against values runc is known to write (no VM needed)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.cpuset import CpuSet
from shared.protocol import Limits
from tests.cgroup_v2.v2_files import expected_files
from tests.docker.cpu_weight import MAX_SHARES, MIN_SHARES, cpu_weight, least_shares

# (shares, runc version, cpu.weight): bookworm's runc 1.1.5 wrote 20 for 512 shares in the
# VM; 77 and 170 for 2000 are from runc issue 4896, 1204 for 22000 from youki's port.
KNOWN = [
    (2, "1.1.5", 1),
    (512, "1.1.5", 20),
    (1024, "1.1.5", 39),
    (2000, "1.3.1", 77),
    (262144, "1.1.5", 10000),
    (2, "1.3.2", 1),
    (1024, "1.3.2", 100),
    (2000, "1.4.0-rc.1", 170),
    (22000, "1.3.2", 1204),
    (262144, "1.4.0", 10000),
]


@pytest.mark.parametrize(("shares", "runc", "weight"), KNOWN, ids=lambda v: str(v))
def test_cpu_weight_is_what_that_runc_writes(shares: int, runc: str, weight: int) -> None:
    assert cpu_weight(shares, runc=runc) == weight


def test_a_runc_version_that_is_not_one_is_refused() -> None:
    with pytest.raises(ValueError, match="not a runc version"):
        cpu_weight(512, runc="unknown")


def test_a_bound_container_with_memory_and_no_swap() -> None:
    limits = Limits(
        cpuset_cpus="1", cpu_shares=512, mem_limit=64 << 20, memswap_limit=64 << 20,
        mem_reservation=32 << 20,
    )  # fmt: skip
    assert expected_files(
        limits, runc="1.1.5", online=CpuSet([0, 1]), memory_nodes=CpuSet([0])
    ) == {
        "cpuset.cpus.effective": "1",
        "cpuset.mems.effective": "0",
        "cpu.weight": "20",
        "cpu.max": "max 100000",
        "memory.max": str(64 << 20),
        "memory.low": str(32 << 20),
        "memory.swap.max": "0",
    }


def test_an_unbound_container_with_a_quota_and_no_memory_limit() -> None:
    limits = Limits(cpu_quota=30_000, cpu_period=100_000)
    files = expected_files(limits, runc="1.3.2", online=CpuSet([0, 1]), memory_nodes=CpuSet([0]))
    assert files["cpuset.cpus.effective"] == "0-1"
    assert files["cpu.weight"] == "100"  # Docker's default 1024 shares
    assert files["cpu.max"] == "30000 100000"
    assert (files["memory.max"], files["memory.low"], files["memory.swap.max"]) == (
        "max",
        "0",
        "max",
    )


@given(shares=st.integers(MIN_SHARES, MAX_SHARES), runc=st.sampled_from(["1.1.5", "1.3.2"]))
def test_least_shares_is_the_fewest_with_that_weight(shares: int, runc: str) -> None:
    weight = cpu_weight(shares, runc=runc)
    least = least_shares(weight, runc=runc)
    assert least <= shares
    assert cpu_weight(least, runc=runc) == weight
    assert least == MIN_SHARES or cpu_weight(least - 1, runc=runc) < weight
