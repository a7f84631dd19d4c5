"""The pure node state machine and the lease table, without a store or a clock."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.services.nodes import (
    NodeLeases,
    node_name_problem,
    on_hello,
    on_lease_expired,
    on_problems,
)
from shared.api.nodes import NodeHealth, NodeRecord
from tests.builders import make_inventory

T0 = 1_700_000_000.0


def hello(
    previous: NodeRecord | None, *, now: float, problems: list[str] | None = None
) -> NodeRecord:
    return on_hello(
        previous,
        name="n1",
        inventory=make_inventory(problems),
        address="10.0.0.7:41000",
        agent_version="0.1.0",
        now=now,
    )


# --- names ----------------------------------------------------------------------------

LONGEST_NAME = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])  # 253 characters


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("n1", id="short"),
        pytest.param("gpu-01.rack2.example", id="dotted"),
        pytest.param("7", id="one-digit"),
        pytest.param("a" * 63, id="63-char-label"),
        pytest.param(LONGEST_NAME, id="253-chars"),
    ],
)
def test_valid_node_names(name: str) -> None:
    assert node_name_problem(name) is None


@pytest.mark.parametrize(
    ("name", "why"),
    [
        pytest.param("", "1 to 253 characters", id="empty"),
        pytest.param(LONGEST_NAME + "d", "1 to 253 characters", id="254-chars"),
        pytest.param("Node1", "lower-case DNS name", id="upper-case"),
        pytest.param("gpu_01", "lower-case DNS name", id="underscore"),
        pytest.param("-n1", "lower-case DNS name", id="leading-dash"),
        pytest.param("n1-", "lower-case DNS name", id="trailing-dash"),
        pytest.param("a" * 64, "lower-case DNS name", id="64-char-label"),
        pytest.param("a..b", "lower-case DNS name", id="empty-label"),
        pytest.param("n1.", "lower-case DNS name", id="trailing-dot"),
        pytest.param("n\u00e9", "lower-case DNS name", id="non-ascii"),
        pytest.param("n 1", "lower-case DNS name", id="space"),
    ],
)
def test_invalid_node_names_say_why(name: str, why: str) -> None:
    problem = node_name_problem(name)

    assert problem is not None
    assert why in problem
    assert repr(name) in problem


# --- hello ----------------------------------------------------------------------------


def test_first_hello_registers_a_ready_node() -> None:
    record = hello(None, now=T0)

    assert record.state == NodeHealth.READY
    assert record.reason == ""
    assert record.registered_at == record.state_since == T0
    assert (record.name, record.address, record.agent_version) == (
        "n1",
        "10.0.0.7:41000",
        "0.1.0",
    )
    assert record.inventory == make_inventory()


def test_first_hello_with_problems_registers_a_degraded_node() -> None:
    record = hello(None, now=T0, problems=["nvml unreadable", "gpu 1 missing"])

    assert record.state == NodeHealth.DEGRADED
    assert record.reason == "nvml unreadable; gpu 1 missing"
    assert record.registered_at == record.state_since == T0


@pytest.mark.parametrize(
    ("first", "second", "state_moves"),
    [
        pytest.param([], [], False, id="ready-again"),
        pytest.param(["x"], ["x"], False, id="same-problem-again"),
        pytest.param([], ["x"], True, id="ready-to-degraded"),
        pytest.param(["x"], [], True, id="degraded-to-ready"),
        pytest.param(["x"], ["y"], True, id="other-problem"),
    ],
)
def test_a_later_hello_keeps_registration_and_moves_state_since_only_on_change(
    first: list[str], second: list[str], state_moves: bool
) -> None:
    before = hello(None, now=T0, problems=first)

    after = hello(before, now=T0 + 60, problems=second)

    assert after.registered_at == T0
    assert after.state_since == (T0 + 60 if state_moves else T0)
    assert after.inventory.problems == second


def test_hello_revives_a_lost_node() -> None:
    lost = on_lease_expired(hello(None, now=T0), lease_seconds=15, now=T0 + 20)

    revived = hello(lost, now=T0 + 90)

    assert revived.state == NodeHealth.READY
    assert revived.reason == ""
    assert revived.state_since == T0 + 90
    assert revived.registered_at == T0


# --- problems -------------------------------------------------------------------------


def test_problems_move_a_node_between_ready_and_degraded() -> None:
    ready = hello(None, now=T0)

    degraded = on_problems(ready, ["nvml unreadable"], now=T0 + 1)
    healed = on_problems(degraded, [], now=T0 + 2)

    assert (degraded.state, degraded.reason, degraded.state_since) == (
        NodeHealth.DEGRADED,
        "nvml unreadable",
        T0 + 1,
    )
    assert (healed.state, healed.reason, healed.state_since) == (NodeHealth.READY, "", T0 + 2)
    assert healed.registered_at == T0


@pytest.mark.parametrize(
    "problems", [pytest.param([], id="healthy"), pytest.param(["a", "b"], id="degraded")]
)
def test_unchanged_problems_return_the_same_record(problems: list[str]) -> None:
    record = hello(None, now=T0, problems=problems)

    assert on_problems(record, problems, now=T0 + 5) is record


@pytest.mark.parametrize(
    "problems", [pytest.param([], id="healthy"), pytest.param(["a"], id="degraded")]
)
def test_problems_do_not_revive_a_lost_node(problems: list[str]) -> None:
    lost = on_lease_expired(hello(None, now=T0), lease_seconds=15, now=T0 + 15)

    assert on_problems(lost, problems, now=T0 + 30) is lost


# --- lease expiry ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "problems", [pytest.param([], id="from-ready"), pytest.param(["x"], id="from-degraded")]
)
def test_an_expired_lease_loses_the_node(problems: list[str]) -> None:
    record = hello(None, now=T0, problems=problems)

    lost = on_lease_expired(record, lease_seconds=15.0, now=T0 + 16)

    assert lost.state == NodeHealth.LOST
    assert lost.reason == "no heartbeat for 15s"
    assert lost.state_since == T0 + 16
    assert lost.registered_at == T0


def test_an_expired_lease_leaves_a_lost_node_alone() -> None:
    lost = on_lease_expired(hello(None, now=T0), lease_seconds=15, now=T0 + 15)

    assert on_lease_expired(lost, lease_seconds=15, now=T0 + 99) is lost


# --- NodeLeases ---------------------------------------------------------------------------


def test_a_lease_ends_lease_seconds_after_its_renewal() -> None:
    leases = NodeLeases(lease_seconds=10)
    leases.renew("n1", now=100)

    assert "n1" in leases
    assert "n2" not in leases
    assert leases.expired(now=109.9) == []
    assert leases.expired(now=110) == ["n1"]
    assert "n1" not in leases
    assert leases.expired(now=200) == []


def test_a_renewal_replaces_the_old_deadline() -> None:
    leases = NodeLeases(lease_seconds=10)
    leases.renew("n1", now=100)
    leases.renew("n1", now=105)

    assert leases.expired(now=110) == []  # the first deadline is stale
    assert "n1" in leases
    assert leases.expired(now=115) == ["n1"]


def test_set_deadline_can_move_a_lease_earlier() -> None:
    leases = NodeLeases(lease_seconds=10)
    leases.renew("n1", now=100)
    leases.set_deadline("n1", 101)

    assert leases.expired(now=101) == ["n1"]
    assert leases.expired(now=110) == []  # the original deadline is gone with it


def test_expired_names_come_once_in_deadline_order() -> None:
    leases = NodeLeases(lease_seconds=10)
    for name, deadline in [("c", 3.0), ("a", 5.0), ("b", 1.0), ("d", 50.0)]:
        leases.set_deadline(name, deadline)
    leases.set_deadline("c", 4.0)  # a second entry for c in the heap

    assert leases.expired(now=10) == ["b", "c", "a"]
    assert leases.expired(now=10) == []
    assert "d" in leases


NAMES = ("n1", "n2", "n3")
_operations = st.lists(
    st.tuples(
        st.sampled_from(("renew", "set_deadline", "expired")),
        st.sampled_from(NAMES),
        st.integers(0, 4),  # how far the clock moves first
        st.integers(-3, 12),  # set_deadline: the deadline relative to now
    ),
    max_size=60,
)


@settings(max_examples=300)
@given(operations=_operations)
def test_leases_match_a_full_scan(operations: list[tuple[str, str, int, int]]) -> None:
    leases = NodeLeases(lease_seconds=5)
    deadlines: dict[str, float] = {}
    now = 0.0
    for kind, name, step, offset in operations:
        now += step
        if kind == "renew":
            leases.renew(name, now=now)
            deadlines[name] = now + 5
        elif kind == "set_deadline":
            leases.set_deadline(name, now + offset)
            deadlines[name] = now + offset
        else:
            due = sorted((d, n) for n, d in deadlines.items() if d <= now)
            assert leases.expired(now=now) == [n for _, n in due]
            for _, n in due:
                del deadlines[n]
        assert [n for n in NAMES if n in leases] == sorted(deadlines)
