"""agent.runtime.plan, drift: every limit changed by hand is put back (in place where
Docker can, by making the container anew where it cannot), a container removed by hand
is made anew, and each such correction is noted as drift, told from a new desired value
by what the agent last applied, field by field."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import msgspec
import pytest

from agent.runtime.applied_file import read_applied, write_applied
from agent.runtime.plan import (
    NO_IN_PLACE_REMOVAL,
    REMOVED_OUTSIDE,
    Create,
    Remove,
    Start,
    Update,
    Work,
    plan,
)
from shared.protocol import Limits
from tests.agent.runtime.reported import limits_of
from tests.agent.runtime.test_plan import GPU, HOST, by_id, desired, observed

MiB = 2**20
# As the coordinator writes a bound container's limits: no memory limit (soft memory).
LIMITS = Limits(
    cpuset_cpus="2,3",
    cpuset_mems="0",
    cpu_shares=717,
    cpu_quota=-1,
    cpu_period=100_000,
    mem_reservation=32 * MiB,
)
WANTED = desired(limits=LIMITS)
TARGET = HOST.settings(LIMITS)
APPLIED = {"c1": TARGET}
MEMORY_ADDED = {"mem_limit": 64 * MiB, "memswap_limit": 64 * MiB}


def by_hand(**changed: Any) -> Limits:
    """What ``docker inspect`` shows of WANTED, set as desired, after a hand-made change."""
    return msgspec.structs.replace(limits_of(TARGET), **changed)


# --- in place ---


@pytest.mark.parametrize(
    ("changed", "drift"),
    [
        ({"cpuset_cpus": "0-9"}, {"cpuset_cpus": "0-9 -> 2-3"}),
        ({"cpuset_mems": "1"}, {"cpuset_mems": "1 -> 0"}),
        ({"cpu_shares": 2}, {"cpu_shares": "2 -> 717"}),
        ({"cpu_quota": 50_000}, {"cpu_quota": "50000 -> -1"}),
        ({"cpu_period": 50_000}, {"cpu_period": "50000 -> 100000"}),
        ({"mem_reservation": 48 * MiB}, {"mem_reservation": "48Mi -> 32Mi"}),
        ({"mem_reservation": 0}, {"mem_reservation": "0 -> 32Mi"}),
    ],
    ids=[
        "cpuset",
        "mems",
        "shares",
        "quota-added",
        "period",
        "reservation-moved",
        "reservation-gone",
    ],
)
def test_a_limit_changed_by_hand_is_put_back_in_place_as_drift(
    changed: dict[str, Any], drift: dict[str, str]
) -> None:
    (work,) = plan(by_id(WANTED), [observed(WANTED, limits=by_hand(**changed))], APPLIED, HOST)
    assert work == Work(
        "c1",
        (Update("d1", TARGET, drift, drift=drift),),
        drift=tuple(f"{name} {change}" for name, change in drift.items()),
    )


def test_a_reservation_added_by_hand_where_none_is_desired_is_removed_in_place() -> None:
    wanted = desired(limits=msgspec.structs.replace(LIMITS, mem_reservation=0))
    target = HOST.settings(wanted.limits)
    found = observed(wanted, limits=limits_of(replace(target, mem_reservation=16 * MiB)))
    (work,) = plan(by_id(wanted), [found], {"c1": target}, HOST)
    change = {"mem_reservation": "16Mi -> 0"}
    assert work == Work(
        "c1", (Update("d1", target, change, drift=change),), drift=("mem_reservation 16Mi -> 0",)
    )


def test_swap_set_unlimited_by_hand_is_put_back_in_place() -> None:
    limited = msgspec.structs.replace(LIMITS, mem_limit=64 * MiB, memswap_limit=64 * MiB)
    wanted = desired(limits=limited)
    target = HOST.settings(limited)
    found = observed(wanted, limits=msgspec.structs.replace(limited, memswap_limit=-1))
    (work,) = plan(by_id(wanted), [found], {"c1": target}, HOST)
    assert [type(action) for action in work.actions] == [Update]
    assert work.drift == ("memswap_limit -1 -> 64Mi",)


# --- made anew ---


def test_a_memory_limit_added_by_hand_where_none_is_desired_is_removed_by_recreating() -> None:
    found = observed(WANTED, limits=by_hand(**MEMORY_ADDED))
    (work,) = plan(by_id(WANTED), [found], APPLIED, HOST)
    assert work == Work(
        "c1",
        (
            Remove("d1", f"to be made anew: {NO_IN_PLACE_REMOVAL}"),
            Create(WANTED, TARGET, recreated=NO_IN_PLACE_REMOVAL),
        ),
        drift=(
            "mem_limit 64Mi -> 0",
            "memswap_limit 64Mi -> 0",
            f"recreated ({NO_IN_PLACE_REMOVAL})",
        ),
    )


def test_a_memory_limit_and_another_change_by_hand_are_put_back_together() -> None:
    found = observed(WANTED, limits=by_hand(cpu_shares=2, **MEMORY_ADDED))
    (work,) = plan(by_id(WANTED), [found], APPLIED, HOST)
    assert [type(action) for action in work.actions] == [Remove, Create]
    assert work.drift == (
        "cpu_shares 2 -> 717",
        "mem_limit 64Mi -> 0",
        "memswap_limit 64Mi -> 0",
        f"recreated ({NO_IN_PLACE_REMOVAL})",
    )


def test_a_memory_limit_the_agent_did_not_set_is_removed_by_recreating_without_drift() -> None:
    found = observed(WANTED, limits=by_hand(**MEMORY_ADDED))
    (work,) = plan(by_id(WANTED), [found], {}, HOST)
    assert [type(action) for action in work.actions] == [Remove, Create]
    assert work.drift == ()


def test_a_never_started_container_made_anew_is_not_started_first() -> None:
    found = observed(WANTED, state="created", limits=by_hand(**MEMORY_ADDED))
    (work,) = plan(by_id(WANTED), [found], APPLIED, HOST)
    assert [type(action) for action in work.actions] == [Remove, Create]


def test_a_container_that_cannot_be_made_anew_keeps_its_memory_limit_and_says_why() -> None:
    wanted = desired(limits=LIMITS, gpus=["GPU-gone"])
    found = observed(wanted, state="created", limits=by_hand(**MEMORY_ADDED))
    (work,) = plan(by_id(wanted), [found], APPLIED, HOST)
    assert work.actions == (Start("d1", "never started"),)
    assert work.problem.startswith(f"{NO_IN_PLACE_REMOVAL}, and the container cannot be made anew")
    assert "GPU-gone is not on this node" in work.problem
    assert work.drift == ()


# --- removed by hand ---


def test_a_container_the_agent_had_and_finds_gone_is_made_anew_as_drift() -> None:
    (work,) = plan(by_id(WANTED), [], APPLIED, HOST)
    assert work == Work(
        "c1",
        (Create(WANTED, TARGET, recreated=REMOVED_OUTSIDE),),
        drift=(f"recreated ({REMOVED_OUTSIDE})",),
    )


def test_a_container_being_removed_by_hand_is_made_anew_as_drift() -> None:
    (work,) = plan(by_id(WANTED), [observed(WANTED, state="removing")], APPLIED, HOST)
    assert work.drift == (f"recreated ({REMOVED_OUTSIDE})",)


@pytest.mark.parametrize(
    "applied",
    [{}, {"other": TARGET}],
    ids=["never-applied", "applied-to-another-container"],
)
def test_a_container_the_agent_never_had_is_created_without_drift(applied: dict[str, Any]) -> None:
    assert plan(by_id(WANTED), [], applied, HOST) == [Work("c1", (Create(WANTED, TARGET),))]


def test_a_refused_container_the_agent_had_is_not_made_anew() -> None:
    wanted = desired(limits=LIMITS, gpus=["GPU-gone"])
    (work,) = plan(by_id(wanted), [], APPLIED, HOST)
    assert work.actions == ()
    assert work.problem.startswith("refused: GPU GPU-gone")
    assert work.drift == ()


def test_a_container_whose_spec_changed_is_made_anew_without_drift() -> None:
    wanted = desired(limits=LIMITS, gpus=[GPU])
    (work,) = plan(by_id(wanted), [observed(wanted, spec="old")], APPLIED, HOST)
    assert work.actions == (Remove("d1", "spec changed"), Create(wanted, TARGET))
    assert work.drift == ()


# --- drift or a new desired value ---


def test_drift_is_told_from_a_new_desired_value_field_by_field() -> None:
    """The coordinator moved the container to CPUs 4-5 while someone set its shares."""
    moved = desired(limits=msgspec.structs.replace(LIMITS, cpuset_cpus="4,5"))
    target = HOST.settings(moved.limits)
    found = observed(moved, limits=by_hand(cpu_shares=2))
    (work,) = plan(by_id(moved), [found], APPLIED, HOST)
    changes = {"cpuset_cpus": "2-3 -> 4-5", "cpu_shares": "2 -> 717"}
    assert work.actions == (Update("d1", target, changes, drift={"cpu_shares": "2 -> 717"}),)
    assert work.drift == ("cpu_shares 2 -> 717",)


def test_drift_made_while_the_agent_was_down_is_known_from_its_applied_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "applied-n1.json"
    write_applied(path, APPLIED)  # by the agent before it stopped
    after_restart = read_applied(path)
    (work,) = plan(
        by_id(WANTED), [observed(WANTED, limits=by_hand(cpu_shares=2))], after_restart, HOST
    )
    assert work.drift == ("cpu_shares 2 -> 717",)
