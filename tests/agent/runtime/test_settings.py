"""agent.runtime.settings: Docker limits in one canonical form, to compare desired with
inspected values field by field."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.runtime.settings import (
    DEFAULT_CPU_PERIOD,
    DEFAULT_CPU_SHARES,
    NO_QUOTA,
    Settings,
)
from shared.cpuset import CpuSet, docker_cpuset
from shared.protocol import Limits
from tests.agent.runtime.reported import limits_of

ONLINE = CpuSet.parse("0-3")
MEMORY_NODES = CpuSet([0])
FIELD_NAMES = tuple(field.name for field in fields(Settings))
GiB = 2**30
MiB = 2**20


def canonical(limits: Limits) -> Settings:
    return Settings.of(limits, online=ONLINE, memory_nodes=MEMORY_NODES)


BASE = canonical(Limits())


def test_unset_limits_take_the_hosts_cpus_memory_nodes_and_dockers_defaults() -> None:
    assert canonical(Limits()) == Settings(
        cpuset_cpus=ONLINE,
        cpuset_mems=MEMORY_NODES,
        cpu_shares=DEFAULT_CPU_SHARES,
        cpu_quota=NO_QUOTA,
        cpu_period=DEFAULT_CPU_PERIOD,
        mem_limit=0,
        memswap_limit=0,
        mem_reservation=0,
    )


def test_the_defaults_are_dockers() -> None:
    assert (DEFAULT_CPU_SHARES, DEFAULT_CPU_PERIOD, NO_QUOTA) == (1024, 100_000, -1)


@pytest.mark.parametrize(
    ("limits", "field", "expected"),
    [
        (Limits(cpuset_cpus=""), "cpuset_cpus", ONLINE),
        (Limits(cpuset_cpus="3,1-2"), "cpuset_cpus", CpuSet([1, 2, 3])),
        (Limits(cpuset_cpus=" 2 "), "cpuset_cpus", CpuSet([2])),
        (Limits(cpuset_mems=""), "cpuset_mems", MEMORY_NODES),
        (Limits(cpuset_mems="1"), "cpuset_mems", CpuSet([1])),
        (Limits(cpu_shares=0), "cpu_shares", 1024),
        (Limits(cpu_shares=512), "cpu_shares", 512),
        (Limits(cpu_shares=1024), "cpu_shares", 1024),
        (Limits(cpu_quota=0), "cpu_quota", -1),
        (Limits(cpu_quota=-1), "cpu_quota", -1),
        (Limits(cpu_quota=-50), "cpu_quota", -1),
        (Limits(cpu_quota=50_000), "cpu_quota", 50_000),
        (Limits(cpu_period=0), "cpu_period", 100_000),
        (Limits(cpu_period=50_000), "cpu_period", 50_000),
        (Limits(mem_limit=0), "mem_limit", 0),
        (Limits(mem_limit=-1), "mem_limit", 0),
        (Limits(mem_limit=GiB), "mem_limit", GiB),
        (Limits(mem_limit=0, memswap_limit=2 * GiB), "memswap_limit", 0),
        (Limits(mem_limit=-1, memswap_limit=2 * GiB), "memswap_limit", 0),
        (Limits(mem_limit=GiB, memswap_limit=2 * GiB), "memswap_limit", 2 * GiB),
        (Limits(mem_limit=GiB, memswap_limit=-1), "memswap_limit", -1),
        (Limits(mem_limit=GiB, memswap_limit=0), "memswap_limit", 0),
        (Limits(mem_reservation=-1), "mem_reservation", 0),
        (Limits(mem_reservation=GiB // 2), "mem_reservation", GiB // 2),
        (Limits(mem_limit=0, mem_reservation=GiB), "mem_reservation", GiB),
    ],
    ids=[
        "empty-cpuset-is-every-online-cpu",
        "cpuset-parsed",
        "cpuset-with-spaces",
        "empty-mems-is-every-memory-node",
        "mems-parsed",
        "shares-0-is-1024",
        "shares-kept",
        "shares-1024-kept",
        "quota-0-is-none",
        "quota-minus-1-is-none",
        "negative-quota-is-none",
        "quota-kept",
        "period-0-is-default",
        "period-kept",
        "no-memory-limit",
        "negative-memory-is-no-limit",
        "memory-kept",
        "swap-ignored-without-memory-limit",
        "swap-ignored-with-negative-memory",
        "swap-kept-with-memory-limit",
        "unlimited-swap-kept",
        "swap-0-kept-with-memory-limit",
        "negative-reservation-is-none",
        "reservation-kept",
        "reservation-without-memory-limit",
    ],
)
def test_settings_of_canonicalises_each_field(limits: Limits, field: str, expected: object) -> None:
    assert getattr(canonical(limits), field) == expected


def test_dockers_spellings_of_unset_equal_the_explicit_values() -> None:
    as_inspected = Limits(cpuset_cpus="", cpuset_mems="", cpu_shares=0, cpu_quota=0, cpu_period=0)
    as_written = Limits(
        cpuset_cpus="0-3", cpuset_mems="0", cpu_shares=1024, cpu_quota=-1, cpu_period=100_000
    )
    assert canonical(as_inspected) == canonical(as_written)


def test_the_empty_cpusets_depend_on_the_host() -> None:
    elsewhere = Settings.of(Limits(), online=CpuSet([0, 1]), memory_nodes=CpuSet([0, 1]))
    assert elsewhere.cpuset_cpus == CpuSet([0, 1])
    assert elsewhere.cpuset_mems == CpuSet([0, 1])


def test_no_changes_from_equal_settings() -> None:
    assert BASE.changes_from(BASE) == {}


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (Limits(), Limits(cpuset_cpus="0,1"), {"cpuset_cpus": "0-3 -> 0-1"}),
        (Limits(cpuset_cpus="0,2"), Limits(cpuset_cpus="3"), {"cpuset_cpus": "0,2 -> 3"}),
        (Limits(), Limits(cpuset_mems="1"), {"cpuset_mems": "0 -> 1"}),
        (Limits(cpu_shares=2), Limits(cpu_shares=717), {"cpu_shares": "2 -> 717"}),
        (Limits(), Limits(cpu_quota=50_000), {"cpu_quota": "-1 -> 50000"}),
        (Limits(cpu_quota=50_000), Limits(), {"cpu_quota": "50000 -> -1"}),
        (Limits(), Limits(cpu_period=50_000), {"cpu_period": "100000 -> 50000"}),
        (Limits(), Limits(mem_limit=GiB), {"mem_limit": "0 -> 1Gi"}),
        (Limits(mem_limit=512 * MiB), Limits(mem_limit=GiB), {"mem_limit": "512Mi -> 1Gi"}),
        (Limits(mem_limit=GiB), Limits(mem_limit=1536), {"mem_limit": "1Gi -> 1536"}),
        (Limits(mem_limit=1536), Limits(mem_limit=1537), {"mem_limit": "1536 -> 1537"}),
        (
            Limits(mem_limit=GiB, memswap_limit=GiB),
            Limits(mem_limit=GiB, memswap_limit=-1),
            {"memswap_limit": "1Gi -> -1"},
        ),
        (Limits(), Limits(mem_reservation=3 * 1024), {"mem_reservation": "0 -> 3Ki"}),
        (Limits(mem_reservation=2**40), Limits(), {"mem_reservation": "1Ti -> 0"}),
    ],
    ids=[
        "cpuset-as-ranges",
        "cpuset-scattered",
        "mems",
        "shares",
        "quota-set",
        "quota-removed",
        "period",
        "memory-set",
        "memory-moved",
        "memory-not-a-whole-unit",
        "memory-in-bytes",
        "unlimited-swap",
        "reservation-in-ki",
        "reservation-in-ti",
    ],
)
def test_changes_from_shows_old_and_new_values(
    before: Limits, after: Limits, expected: dict[str, str]
) -> None:
    assert canonical(after).changes_from(canonical(before)) == expected


def test_changes_from_lists_fields_in_declaration_order() -> None:
    before = canonical(Limits())
    after = canonical(
        Limits(mem_reservation=MiB, cpu_shares=2, cpuset_cpus="1", mem_limit=GiB, cpu_period=1000)
    )
    assert list(after.changes_from(before)) == [
        "cpuset_cpus",
        "cpu_shares",
        "cpu_period",
        "mem_limit",
        "mem_reservation",
    ]


def test_adding_a_memory_limit_shows_its_swap_too() -> None:
    before = canonical(Limits(memswap_limit=GiB))  # swap ignored: no memory limit
    after = canonical(Limits(mem_limit=GiB, memswap_limit=2 * GiB))
    assert after.changes_from(before) == {"mem_limit": "0 -> 1Gi", "memswap_limit": "0 -> 2Gi"}


@pytest.mark.parametrize(
    ("limited", "fields"),
    [
        ({"mem_limit": GiB}, ["mem_limit"]),
        ({"mem_limit": GiB, "memswap_limit": 2 * GiB}, ["mem_limit", "memswap_limit"]),
        ({"mem_limit": GiB, "memswap_limit": -1}, ["mem_limit", "memswap_limit"]),
        (
            {"mem_limit": GiB, "memswap_limit": GiB, "mem_reservation": MiB},
            ["mem_limit", "memswap_limit"],
        ),
    ],
    ids=["limit", "limit-and-swap", "limit-and-unlimited-swap", "limit-swap-and-reservation"],
)
def test_a_memory_limit_is_removed_only_by_making_the_container_anew(
    limited: dict[str, Any], fields: list[str]
) -> None:
    before = replace(BASE, **limited)
    assert BASE.removed_only_by_recreating(before) == fields
    assert BASE.unsettable_from(before) == []


def test_a_memory_reservation_is_removed_in_place() -> None:
    before = replace(BASE, mem_reservation=MiB)
    assert BASE.removed_only_by_recreating(before) == []
    assert BASE.unsettable_from(before) == []


def test_removing_unlimited_swap_cannot_be_done_in_place() -> None:
    before = replace(BASE, mem_limit=GiB, memswap_limit=-1)
    after = replace(BASE, mem_limit=GiB)
    assert after.unsettable_from(before) == ["memswap_limit"]


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (Limits(), Limits(mem_limit=GiB, memswap_limit=GiB, mem_reservation=MiB)),
        (
            Limits(mem_limit=GiB, memswap_limit=GiB, mem_reservation=MiB),
            Limits(mem_limit=2 * GiB, memswap_limit=-1, mem_reservation=2 * MiB),
        ),
        (Limits(mem_limit=GiB), Limits(mem_limit=GiB)),
        (Limits(cpu_shares=2, cpu_quota=10, cpuset_cpus="1"), Limits()),
    ],
    ids=["memory-set", "memory-moved", "unchanged", "cpu-fields-removed"],
)
def test_setting_moving_or_cpu_changes_are_settable(before: Limits, after: Limits) -> None:
    assert canonical(after).unsettable_from(canonical(before)) == []
    assert canonical(after).removed_only_by_recreating(canonical(before)) == []


# --- properties ---

cpu_lists = st.frozensets(st.integers(0, 7), max_size=8).map(lambda ids: docker_cpuset(CpuSet(ids)))
counts = st.sampled_from([-1, 0, 1, 2, 1024, 50_000, 100_000])
memories = st.sampled_from([-1, 0, 1536, MiB, GiB, 2 * GiB])
any_limits = st.builds(
    Limits,
    cpuset_cpus=cpu_lists,
    cpuset_mems=st.sampled_from(["", "0", "1", "0-1"]),
    cpu_shares=counts,
    cpu_quota=counts,
    cpu_period=counts,
    mem_limit=memories,
    memswap_limit=memories,
    mem_reservation=memories,
)


@settings(max_examples=200)
@given(any_limits)
def test_canonical_settings_read_back_from_docker_are_unchanged(limits: Limits) -> None:
    """What the agent sets is what it reads back: no update loop on a container it set."""
    target = canonical(limits)
    assert canonical(limits_of(target)) == target


@settings(max_examples=200)
@given(any_limits)
def test_canonical_settings_are_always_set(limits: Limits) -> None:
    target = canonical(limits)
    assert target.cpuset_cpus
    assert target.cpuset_mems
    assert target.cpu_shares != 0
    assert target.cpu_quota == NO_QUOTA or target.cpu_quota > 0
    assert target.cpu_period != 0
    assert target.mem_limit >= 0
    assert target.mem_reservation >= 0
    assert target.mem_limit > 0 or target.memswap_limit == 0


@settings(max_examples=200)
@given(any_limits, any_limits)
def test_changes_name_exactly_the_differing_fields(first: Limits, second: Limits) -> None:
    before, after = canonical(first), canonical(second)
    changes = after.changes_from(before)
    differing = [name for name in FIELD_NAMES if getattr(before, name) != getattr(after, name)]
    assert list(changes) == differing
    assert (changes == {}) == (before == after)
    for name, text in changes.items():
        old, new = text.split(" -> ")
        assert old != new, name
    blocked = after.unsettable_from(before)
    assert blocked in ([], ["memswap_limit"])
    assert set(blocked) <= set(changes)
    assert all(getattr(before, name) != 0 and getattr(after, name) == 0 for name in blocked)
    anew = after.removed_only_by_recreating(before)
    assert set(anew) <= {"mem_limit", "memswap_limit"} & set(changes)
    assert bool(anew) == (before.mem_limit != 0 and after.mem_limit == 0)
    assert not (anew and blocked)
