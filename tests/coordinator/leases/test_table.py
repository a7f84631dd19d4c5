"""LeaseTable: the request-time decision, expiry, release, learning mode, capacity cuts,
safe capacity and the checking of arguments. Time is passed in; nothing sleeps."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.leases import Kind, Lease, LeaseState, LeaseTable, allocate
from tests.coordinator.leases.strategies import capacities, wants_values

TOL = 1e-6
T0 = 1_700_000_000.0
SHARING = [Kind.FAIR_SHARE, Kind.PROPORTIONAL_SHARE]


def make_table(kind: Kind = Kind.FAIR_SHARE, capacity: float = 120, **options: Any) -> LeaseTable:
    settings_: dict[str, Any] = {"lease_length": 30, "refresh_interval": 10} | options
    return LeaseTable(kind, capacity, **settings_)


def snapshot(table: LeaseTable) -> tuple[object, ...]:
    return (table.leases(), table.sum_has, table.sum_wants, table.count, table.capacity)


# --- the worked examples, reached through requests -----------------------------------------

SEED = {
    Kind.NO_ALGORITHM: ([100, 10, 1000], [100, 10, 1000]),
    Kind.STATIC: ([50, 200, 300], [50, 120, 120]),
    Kind.PROPORTIONAL_SHARE: ([1000, 50, 10], [40 + 960 * 30 / 970, 40 + 10 * 30 / 970, 10]),
    Kind.FAIR_SHARE: ([1000, 50, 10], [60, 50, 10]),
}


@pytest.mark.parametrize("kind", list(SEED), ids=str)
def test_three_clients_requesting_twice_reach_the_worked_example(kind: Kind) -> None:
    wants, expected = SEED[kind]
    table = make_table(kind)
    for round_ in range(2):
        grants = [table.request(f"c{i}", w, now=T0 + round_).capacity for i, w in enumerate(wants)]
        if kind in SHARING:
            assert table.sum_has <= 120 + TOL
    assert grants == pytest.approx(expected, abs=TOL)
    assert [lease.has for lease in table.leases()] == pytest.approx(expected, abs=TOL)
    assert allocate(kind, 120, wants) == pytest.approx(expected, abs=TOL)


def test_first_come_gets_what_is_free_and_everyone_converges() -> None:
    table = make_table(Kind.FAIR_SHARE)
    first = [table.request(c, w, now=T0).capacity for c, w in (("a", 1000), ("b", 50))]
    assert first == [120, 0]  # a took everything; b waits for a to shrink
    # Equilibrium 70 / 50: a shrinks to 70 at once, b then finds its 50 free.
    assert table.request("a", 1000, now=T0 + 1).capacity == 70
    assert table.request("b", 50, now=T0 + 1).capacity == 50
    assert table.request("a", 1000, now=T0 + 2).capacity == 70


def test_a_lease_carries_its_times() -> None:
    table = make_table(lease_length=30, refresh_interval=10)
    lease = table.request("c", 5, now=T0)
    assert lease == Lease(capacity=5.0, expiry_time=T0 + 30, refresh_interval=10, safe_capacity=120)
    assert table.get("c") == LeaseState("c", 5.0, 5.0, 1, 0, T0 + 30)
    assert table.get("nobody") is None


@settings(max_examples=60)
@given(
    kind=st.sampled_from(list(Kind)),
    capacity=capacities,
    clients=st.lists(
        st.tuples(wants_values, st.integers(1, 4), st.integers(-2, 2)), min_size=1, max_size=10
    ),
)
def test_two_rounds_of_requests_reach_the_equilibrium(
    kind: Kind, capacity: float, clients: list[tuple[float, int, int]]
) -> None:
    table = make_table(kind, capacity)
    for round_ in range(2):
        for i, (wants, subclients, priority) in enumerate(clients):
            table.request(f"c{i}", wants, now=T0 + round_, subclients=subclients, priority=priority)
    wants_, weights, priorities = zip(*clients, strict=True)
    expected = allocate(kind, capacity, wants_, weights, priorities)
    assert [lease.has for lease in table.leases()] == pytest.approx(
        [expected[int(lease.client_id[1:])] for lease in table.leases()], abs=TOL
    )


def test_a_client_moving_to_another_band_leaves_the_old_one() -> None:
    table = make_table(Kind.FAIR_SHARE, 10)
    table.request("low", 8, now=T0, priority=0)
    table.request("high", 8, now=T0, priority=5)
    table.request("low", 8, now=T0 + 1, priority=9)  # low jumps above high
    table.request("high", 8, now=T0 + 1, priority=5)
    table.request("low", 8, now=T0 + 2, priority=9)
    assert [lease.has for lease in table.leases()] == [2, 8]
    table.check()


# --- expiry and release -----------------------------------------------------------------


def test_leases_expire_at_their_expiry_time_and_are_reported_once() -> None:
    table = make_table(lease_length=30)
    table.request("a", 10, now=T0)
    table.request("b", 20, now=T0 + 5)
    assert table.expire(T0 + 29.999) == []
    assert table.expire(T0 + 30) == ["a"]  # expired once now >= expiry_time
    assert table.expire(T0 + 30) == []
    assert (table.count, table.sum_has, table.sum_wants) == (1, 20, 20)
    assert table.expire(T0 + 100) == ["b"]
    assert (table.count, table.sum_has, table.sum_wants) == (0, 0, 0)


def test_a_renewed_lease_is_not_expired_by_its_old_heap_entry() -> None:
    table = make_table(lease_length=30)
    table.request("a", 10, now=T0)
    table.request("a", 10, now=T0 + 20)  # now expires at T0 + 50
    assert table.expire(T0 + 30) == []
    assert table.get("a") is not None
    assert table.expire(T0 + 50) == ["a"]
    assert table.expire(T0 + 60) == []


def test_a_request_expires_the_others_first() -> None:
    table = make_table(Kind.FAIR_SHARE, 100, lease_length=30)
    table.request("a", 100, now=T0)
    assert table.request("b", 100, now=T0 + 10).capacity == 0
    assert table.request("b", 100, now=T0 + 30).capacity == 100  # a is gone
    assert [lease.client_id for lease in table.leases()] == ["b"]


def test_a_release_frees_capacity_for_the_very_next_request() -> None:
    table = make_table(Kind.PROPORTIONAL_SHARE, 100)
    table.request("a", 100, now=T0)
    assert table.request("b", 100, now=T0).capacity == 0
    assert table.release("a") is True
    assert table.release("a") is False
    assert table.release("never-seen") is False
    assert table.request("b", 100, now=T0 + 1).capacity == 100
    assert table.sum_has == 100


def test_the_heap_stays_bounded_under_frequent_refreshes() -> None:
    table = make_table(lease_length=1e6)
    for i in range(20_000):
        table.request("only", 1, now=T0 + i * 1e-3)
    assert len(table._heap) <= 4 * table.count + 1024
    assert table.expire(T0 + 2e6) == ["only"]


# --- learning mode ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", SHARING, ids=str)
def test_learning_mode_grants_the_reported_has_until_the_window_ends(kind: Kind) -> None:
    table = make_table(
        kind, 100, started_at=T0, learning=True, learning_mode_duration=30, lease_length=30
    )
    assert table.learning(T0)
    assert table.learning(T0 + 29.9)
    assert table.request("a", 500, now=T0 + 1, has=80).capacity == 80
    assert table.request("b", 500, now=T0 + 2, has=70).capacity == 70  # above capacity
    assert table.request("c", 500, now=T0 + 3).capacity == 0  # no lease: has 0
    assert table.sum_has == 150
    assert not table.learning(T0 + 30)
    # Outside the window the decision is normal again: nothing is free.
    assert table.request("c", 500, now=T0 + 30, has=90).capacity == 0


def test_reload_moves_the_end_of_learning_mode() -> None:
    table = make_table(started_at=T0, learning=True, learning_mode_duration=30)
    table.reconfigure(
        Kind.FAIR_SHARE,
        120,
        lease_length=30,
        refresh_interval=10,
        learning_mode_duration=60,
        safe_capacity=None,
    )
    assert table.learning(T0 + 45)
    table.reconfigure(
        Kind.FAIR_SHARE,
        120,
        lease_length=30,
        refresh_interval=10,
        learning_mode_duration=0,
        safe_capacity=None,
    )
    assert not table.learning(T0)


@pytest.mark.parametrize(
    ("kind", "learning", "wants", "expected"),
    [
        pytest.param(Kind.FAIR_SHARE, False, 500, 100, id="restored-fair"),
        pytest.param(Kind.PROPORTIONAL_SHARE, False, 500, 100, id="restored-proportional"),
        pytest.param(Kind.NO_ALGORITHM, True, 500, 500, id="no-algorithm"),
        pytest.param(Kind.STATIC, True, 500, 100, id="static"),
    ],
)
def test_no_learning_without_a_fresh_start_or_for_other_kinds(
    kind: Kind, learning: bool, wants: float, expected: float
) -> None:
    table = make_table(kind, 100, started_at=T0, learning=learning, learning_mode_duration=30)
    assert not table.learning(T0 + 1)
    assert table.request("a", wants, now=T0 + 1, has=7).capacity == expected


# --- capacity cuts -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", SHARING, ids=str)
def test_a_capacity_cut_grants_zero_and_sum_has_never_rises_above_capacity(kind: Kind) -> None:
    table = make_table(kind, 100)
    for client in "abcd":
        table.request(client, 25, now=T0)
    assert table.sum_has == 100
    table.set_capacity(40)
    assert table.request("e", 10, now=T0 + 1).capacity == 0  # never negative
    previous = table.sum_has
    for step, client in enumerate("abcdeabcde"):
        grant = table.request(client, 25 if client != "e" else 10, now=T0 + 2 + step).capacity
        assert grant >= 0
        assert table.sum_has <= max(previous, 40) + TOL
        previous = table.sum_has
    expected = allocate(kind, 40, [25, 25, 25, 25, 10])
    assert [lease.has for lease in table.leases()] == pytest.approx(expected, abs=TOL)


# --- safe capacity ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "configured", "expected"),
    [
        pytest.param(Kind.FAIR_SHARE, 5.0, [5.0, 5.0], id="configured"),
        pytest.param(Kind.FAIR_SHARE, 0.0, [0.0, 0.0], id="configured-zero"),
        pytest.param(Kind.PROPORTIONAL_SHARE, -1.0, [-1.0, -1.0], id="unlimited"),
        pytest.param(Kind.FAIR_SHARE, None, [100.0, 75.0], id="dynamic-with-subclients"),
        pytest.param(Kind.NO_ALGORITHM, None, [100.0, 75.0], id="no-algorithm-dynamic"),
        pytest.param(Kind.STATIC, None, [100.0, 75.0], id="static-dynamic"),
    ],
)
def test_safe_capacity(kind: Kind, configured: float | None, expected: list[float]) -> None:
    table = make_table(kind, 100, safe_capacity=configured)
    first = table.request("a", 10, now=T0).safe_capacity  # alone: all of it
    second = table.request("b", 10, now=T0, subclients=3).safe_capacity  # 100 * 3 / 4
    assert [first, second] == expected
    assert table.safe_capacity == configured


def test_dynamic_safe_capacity_counts_only_live_leases() -> None:
    table = make_table(Kind.FAIR_SHARE, 90, lease_length=30)
    table.request("a", 1, now=T0, subclients=2)
    assert table.request("b", 1, now=T0 + 10).safe_capacity == 30
    assert table.request("b", 1, now=T0 + 30).safe_capacity == 90  # a expired


# --- restoring leases ----------------------------------------------------------------------


def test_assign_puts_a_lease_back_as_it_was() -> None:
    table = make_table(Kind.FAIR_SHARE, 100)
    table.assign("a", has=70, wants=90, expiry_time=T0 + 20, subclients=2, priority=-1)
    table.assign("b", has=5, wants=5, expiry_time=T0 - 1)  # already past: goes next
    assert table.sum_has == 75
    assert table.get("a") == LeaseState("a", 70.0, 90.0, 2, -1, T0 + 20)
    # c's band is above a's: c is entitled to 50, but a still holds 70 (b was dropped).
    assert table.request("c", 50, now=T0).capacity == 30
    assert table.get("b") is None
    table.assign("a", has=10, wants=10, expiry_time=T0 + 40)  # replaces
    assert (table.count, table.sum_has, table.sum_wants) == (2, 40, 60)
    assert table.expire(T0 + 20) == []  # a's old expiry is stale
    table.check()


# --- configuration -------------------------------------------------------------------------


def test_reconfigure_keeps_the_leases_and_their_expiry() -> None:
    table = make_table(Kind.FAIR_SHARE, 120)
    for i, wants in enumerate([1000, 50, 10]):
        table.request(f"c{i}", wants, now=T0)
    before = table.leases()
    table.reconfigure(
        Kind.PROPORTIONAL_SHARE,
        120,
        lease_length=60,
        refresh_interval=20,
        learning_mode_duration=0,
        safe_capacity=3,
    )
    assert table.leases() == before
    assert (table.kind, table.lease_length, table.refresh_interval) == (
        Kind.PROPORTIONAL_SHARE,
        60,
        20,
    )
    for round_ in (1, 2):
        for i, wants in enumerate([1000, 50, 10]):
            lease = table.request(f"c{i}", wants, now=T0 + round_)
    assert lease == Lease(10.0, T0 + 62, 20, 3)
    assert [x.has for x in table.leases()] == pytest.approx(SEED[Kind.PROPORTIONAL_SHARE][1])


BAD_CONFIGS: list[Any] = [
    pytest.param({"kind": "BOGUS"}, "kind = 'BOGUS'", id="kind"),
    pytest.param({"capacity": -1}, "capacity = -1", id="negative-capacity"),
    pytest.param({"capacity": math.inf}, "capacity = inf", id="inf-capacity"),
    pytest.param({"lease_length": 0}, "lease_length = 0", id="zero-lease"),
    pytest.param({"refresh_interval": math.nan}, "refresh_interval = nan", id="nan-refresh"),
    pytest.param({"learning_mode_duration": -1}, "learning_mode_duration = -1", id="learning"),
    pytest.param({"safe_capacity": -2}, "safe_capacity = -2", id="safe-capacity"),
]


def config_with(change: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {
        "kind": Kind.FAIR_SHARE,
        "capacity": 120,
        "lease_length": 30,
        "refresh_interval": 10,
        "learning_mode_duration": 30,
        "safe_capacity": None,
    }
    return config | change


@pytest.mark.parametrize(("change", "message"), BAD_CONFIGS)
def test_bad_configuration_is_rejected_and_changes_nothing(
    change: dict[str, Any], message: str
) -> None:
    config = config_with(change)
    with pytest.raises(ValueError, match=re.escape(message)):
        LeaseTable(config.pop("kind"), config.pop("capacity"), **config)
    table = make_table(Kind.FAIR_SHARE, 120)
    table.request("a", 10, now=T0)
    before = snapshot(table), table.kind, table.lease_length, table.safe_capacity
    config = config_with(change)
    with pytest.raises(ValueError, match=re.escape(message)):
        table.reconfigure(config.pop("kind"), config.pop("capacity"), **config)
    assert (snapshot(table), table.kind, table.lease_length, table.safe_capacity) == before
    if "capacity" in change:
        with pytest.raises(ValueError, match=re.escape(message)):
            table.set_capacity(change["capacity"])
        assert snapshot(table) == before[0]


# --- checking the request's arguments ---------------------------------------------------------

BAD_REQUESTS: list[Any] = [
    pytest.param(lambda t: t.request("", 1, now=T0), "client_id = ''", id="empty-id"),
    pytest.param(lambda t: t.request(7, 1, now=T0), "client_id = 7", id="id-not-str"),
    pytest.param(lambda t: t.request("x", -1, now=T0), "wants (client 'x') = -1", id="negative"),
    pytest.param(lambda t: t.request("x", math.nan, now=T0), "wants (client 'x') = nan", id="nan"),
    pytest.param(lambda t: t.request("x", math.inf, now=T0), "= inf must be finite", id="inf"),
    pytest.param(lambda t: t.request("x", "5", now=T0), "wants (client 'x') = '5'", id="str"),
    pytest.param(lambda t: t.request("x", True, now=T0), "= True must be a number", id="bool"),
    pytest.param(
        lambda t: t.request("x", 1, now=T0, has=-0.5), "has (client 'x') = -0.5", id="has"
    ),
    pytest.param(
        lambda t: t.request("x", 1, now=T0, subclients=0), "subclients (client 'x') = 0", id="sub-0"
    ),
    pytest.param(
        lambda t: t.request("x", 1, now=T0, subclients=1.5),
        "subclients (client 'x') = 1.5",
        id="sub",
    ),
    pytest.param(
        lambda t: t.request("x", 1, now=T0, priority=0.5), "priority (client 'x') = 0.5", id="prio"
    ),
    pytest.param(lambda t: t.request("x", 1, now=math.nan), "now = nan", id="now"),
    pytest.param(lambda t: t.expire(math.inf), "now = inf", id="expire-now"),
    pytest.param(
        lambda t: t.assign("x", has=1, wants=1, expiry_time=math.nan), "expiry_time = nan", id="exp"
    ),
    pytest.param(
        lambda t: t.assign("a", has=-1, wants=1, expiry_time=T0), "has (client 'a') = -1", id="asg"
    ),
]


@pytest.mark.parametrize(("call", "message"), BAD_REQUESTS)
def test_bad_arguments_are_rejected_and_change_nothing(
    call: Callable[[LeaseTable], object], message: str
) -> None:
    table = make_table(Kind.FAIR_SHARE, 100, lease_length=30)
    table.request("a", 60, now=T0)
    table.request("b", 60, now=T0 + 1)
    before = snapshot(table)
    with pytest.raises(ValueError, match=re.escape(message)):
        call(table)
    assert snapshot(table) == before
    # Not even the expiry that a valid request at that time would have done.
    assert table.request("b", 60, now=T0 + 2).capacity == 40
    table.check()


def test_integer_arguments_are_accepted() -> None:
    table = make_table(Kind.STATIC, 10)
    lease = table.request("a", 20, now=int(T0), has=3, subclients=2, priority=-1)
    assert (lease.capacity, lease.expiry_time) == (10.0, T0 + 30)
    assert isinstance(table.get("a").wants, float)  # type: ignore[union-attr]
