"""A LeaseTable driven by random requests, refreshes, releases, time and capacity
changes, checked after every step against a recount and, once the inputs settle,
against the pure equilibrium."""

from __future__ import annotations

import math

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from coordinator.leases import Kind, LeaseTable, allocate
from tests.coordinator.leases.strategies import capacities, wants_values

TOL = 1e-6
T0 = 1_700_000_000.0
LEASE_LENGTH = 30.0
SHARING = {Kind.FAIR_SHARE, Kind.PROPORTIONAL_SHARE}

clients = st.sampled_from([f"c{i}" for i in range(8)])


class LeaseTableMachine(RuleBasedStateMachine):
    table: LeaseTable
    now: float
    # While Σhas is above capacity (after a cut), it may not rise: the last value seen.
    over: float | None

    @initialize(kind=st.sampled_from(list(Kind)), capacity=capacities)
    def start(self, kind: Kind, capacity: float) -> None:
        self.table = LeaseTable(
            kind, capacity, lease_length=LEASE_LENGTH, refresh_interval=10, started_at=T0
        )
        self.now = T0
        self.over = None

    def _after_change(self, client: str, wants: float, grant: float, subclients: int) -> None:
        table = self.table
        assert grant >= 0
        if table.kind == Kind.NO_ALGORITHM:
            assert grant == wants
        elif table.kind == Kind.STATIC:
            assert grant == min(wants, table.capacity)
        else:
            assert grant <= wants
        lease = table.get(client)
        assert lease is not None
        assert (lease.has, lease.wants, lease.subclients) == (grant, wants, subclients)
        assert lease.expiry_time == self.now + LEASE_LENGTH

    @rule(
        client=clients,
        wants=wants_values,
        subclients=st.integers(1, 3),
        priority=st.integers(-1, 1),
        has=wants_values,
    )
    def request(
        self, client: str, wants: float, subclients: int, priority: int, has: float
    ) -> None:
        lease = self.table.request(
            client, wants, now=self.now, has=has, subclients=subclients, priority=priority
        )
        self._after_change(client, wants, lease.capacity, subclients)

    @precondition(lambda self: self.table.count > 0)
    @rule(data=st.data())
    def refresh(self, data: st.DataObject) -> None:
        lease = data.draw(st.sampled_from(self.table.leases()))
        grant = self.table.request(
            lease.client_id,
            lease.wants,
            now=self.now,
            has=lease.has,
            subclients=lease.subclients,
            priority=lease.priority,
        ).capacity
        self._after_change(lease.client_id, lease.wants, grant, lease.subclients)

    @rule(client=clients)
    def release(self, client: str) -> None:
        held = self.table.get(client) is not None
        assert self.table.release(client) is held
        assert self.table.get(client) is None

    @rule(seconds=st.sampled_from([0.0, 1.0, 10.0, 29.0, 30.0, 45.0]))
    def advance(self, seconds: float) -> None:
        self.now += seconds
        due = {lease.client_id for lease in self.table.leases() if lease.expiry_time <= self.now}
        assert set(self.table.expire(self.now)) == due
        assert self.table.expire(self.now) == []

    @rule(capacity=capacities)
    def set_capacity(self, capacity: float) -> None:
        self.table.set_capacity(capacity)

    @rule()
    def settle(self) -> None:
        # Inputs stop changing; every client refreshes twice: all hold the equilibrium.
        leases = self.table.leases()
        for _ in range(2):
            for lease in leases:
                self.table.request(
                    lease.client_id,
                    lease.wants,
                    now=self.now,
                    subclients=lease.subclients,
                    priority=lease.priority,
                )
        leases = self.table.leases()
        expected = allocate(
            self.table.kind,
            self.table.capacity,
            [lease.wants for lease in leases],
            [lease.subclients for lease in leases],
            [lease.priority for lease in leases],
        )
        assert [lease.has for lease in leases] == pytest.approx(expected, abs=TOL)

    @invariant()
    def sums_match_a_recount(self) -> None:
        leases = self.table.leases()
        assert self.table.count == len(leases)
        assert self.table.sum_has == pytest.approx(math.fsum(x.has for x in leases), abs=TOL)
        assert self.table.sum_wants == pytest.approx(math.fsum(x.wants for x in leases), abs=TOL)
        assert self.table.sum_subclients == sum(x.subclients for x in leases)
        assert [x.client_id for x in leases] == sorted(x.client_id for x in leases)
        self.table.check()

    @invariant()
    def sum_has_stays_within_capacity(self) -> None:
        table = self.table
        if table.kind not in SHARING:
            return
        if table.sum_has <= table.capacity + TOL:
            self.over = None
            return
        # Only a capacity cut gets Σhas above capacity; then it never rises.
        if self.over is not None:
            assert table.sum_has <= self.over + TOL
        self.over = table.sum_has


LeaseTableMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=50)
TestLeaseTable = LeaseTableMachine.TestCase


class LearningMachine(LeaseTableMachine):
    """The same, for a coordinator that started without its leases: requests in the
    learning window get their reported has; afterwards everything above holds."""

    @initialize(kind=st.sampled_from(sorted(SHARING)), capacity=capacities)
    def start(self, kind: Kind, capacity: float) -> None:
        self.table = LeaseTable(
            kind,
            capacity,
            lease_length=LEASE_LENGTH,
            refresh_interval=10,
            learning_mode_duration=LEASE_LENGTH,
            started_at=T0,
            learning=True,
        )
        self.now = T0
        self.over = None

    @rule(
        client=clients,
        wants=wants_values,
        subclients=st.integers(1, 3),
        priority=st.integers(-1, 1),
        has=wants_values,
    )
    def request(
        self, client: str, wants: float, subclients: int, priority: int, has: float
    ) -> None:
        learning = self.table.learning(self.now)
        lease = self.table.request(
            client, wants, now=self.now, has=has, subclients=subclients, priority=priority
        )
        if learning:
            assert lease.capacity == has
        else:
            self._after_change(client, wants, lease.capacity, subclients)

    @precondition(lambda self: self.table.count > 0 and not self.table.learning(self.now))
    @rule(data=st.data())
    def refresh(self, data: st.DataObject) -> None:
        super().refresh(data)

    @precondition(lambda self: not self.table.learning(self.now))
    @rule()
    def settle(self) -> None:
        super().settle()

    @invariant()
    def sum_has_stays_within_capacity(self) -> None:
        # Suspended while learning; what was learned counts like a capacity cut after.
        if self.table.learning(self.now):
            self.over = None
            return
        super().sum_has_stays_within_capacity()


LearningMachine.TestCase.settings = settings(max_examples=50, stateful_step_count=50)
TestLearning = LearningMachine.TestCase
