"""The live leases of one resource and the request-time decision (spec section 5).

Pure: no I/O, no clock (every call that needs the time takes ``now``). The service
keeps one table per resource, calls ``request`` under no ``await``, and writes what
changed to its store.

    table = LeaseTable(Kind.FAIR_SHARE, 120, lease_length=30, refresh_interval=10)
    table.request("c0", 1000, now=0.0)          -> Lease(capacity=120.0, ...)
    table.request("c1", 50, now=1.0)            -> Lease(capacity=0.0, ...)   nothing free yet
    table.expire(now=40.0)                      -> ["c0", "c1"]

Invariants, between calls:

1. ``_leases`` maps each client to one lease ``(has, wants, subclients, priority,
   expiry_time)``; every lease is in the band index of its priority with its wants and
   subclients (every kind keeps the index, so a reload may switch kinds), and has a
   heap entry ``(expiry_time, client_id)``. Heap entries that no longer match their
   lease's expiry time are stale and skipped when popped (lazy deletion); the heap is
   rebuilt from the leases once it holds more than ``4 n + 1024`` entries, so it stays
   O(n) and the rebuild is amortised O(1).
2. ``sum_has`` and ``sum_wants`` are running sums: updated with ``+=``/``-=`` on every
   change, recomputed with ``math.fsum`` once the changes since the last recount reach
   ``max(1024, n)`` (amortised O(1)), and set to exactly 0 when the table empties, so
   rounding drift stays far below 1e-6. ``sum_subclients`` is exact (integers).
3. For PROPORTIONAL_SHARE and FAIR_SHARE outside learning mode, a decision never makes
   ``sum_has`` exceed ``capacity`` (up to that rounding), and never raises it while it
   is above capacity (after a capacity cut the grant is 0, never negative).

Decision, per request (spec section 5): expire what is due, put the requester's new
claim in the index, then NO_ALGORITHM grants ``wants``; STATIC ``min(wants, capacity)``;
learning mode the reported ``has``; the sharing kinds ``max(0, min(entitled, free))``
with ``entitled`` the requester's equilibrium share (from the index, with its new claim
in place) and ``free = capacity - (sum_has - its own old has)``.

Safe capacity: the configured value, else ``capacity * s / sum_subclients`` over the
leases held after the decision, the requester's included. That dynamic value is used
for every kind, NO_ALGORITHM and STATIC too (the spec says NO_ALGORITHM templates should
configure one; for STATIC, where capacity is a per-client cap, it errs on the low side).

Cost of ``request``: O(log n) for the heap, plus the index (band_index.py: O(log n)
Python steps and O(load) in C, load 128), plus O(b) for the b priority bands above the
requester's (their wants totals are kept per band). A refresh with unchanged wants,
subclients and priority does not touch the index, and its query is answered from the
band's memo if nothing in the band changed since the last one. About 3.5 us for such a
refresh and 15 us for one with new wants at 10,000 clients (bench/leases.py).
"""

from __future__ import annotations

import heapq
import math
import sys
from bisect import bisect_right, insort
from dataclasses import dataclass
from typing import Final

from coordinator.leases.algorithms import SHARING_KINDS, check_capacity
from coordinator.leases.band_index import BandIndex
from shared.api.leases import Kind

# The running float sums are recounted after this many changes (or n, if larger).
RECOUNT_EVERY = 1024
# The heap is rebuilt once it holds more than HEAP_SLACK * n + HEAP_FLOOR entries.
HEAP_SLACK = 4
HEAP_FLOOR = 1024


@dataclass(frozen=True, slots=True)
class Lease:
    """What one request gets: the grant, when it ends and when to come back."""

    capacity: float
    expiry_time: float
    refresh_interval: float
    safe_capacity: float


@dataclass(frozen=True, slots=True)
class LeaseState:
    """One live lease as the table holds it and the store persists it."""

    client_id: str
    has: float
    wants: float
    subclients: int
    priority: int
    expiry_time: float


_MAX = sys.float_info.max

# A lease as the table holds it: (has, wants, subclients, priority, expiry_time). A tuple
# costs 0.03 us to build where the frozen LeaseState costs 1 us; get() and leases() build
# LeaseState on demand.
_Held = tuple[float, float, int, int, float]
HAS: Final = 0
WANTS: Final = 1
SUBCLIENTS: Final = 2
PRIORITY: Final = 3
EXPIRY: Final = 4


def _number(name: str, value: object, *, minimum: float | None = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} = {value!r} must be a number")
    if not math.isfinite(value):
        raise ValueError(f"{name} = {value!r} must be finite")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} = {value!r} must be >= {minimum:g}")
    return float(value)


def _integer(name: str, value: object, *, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} = {value!r} must be an integer")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} = {value!r} must be >= {minimum}")
    return int(value)


def _checked(
    client_id: object, wants: object, has: object, subclients: object, priority: object
) -> tuple[str, float, float, int, int]:
    """The lease fields, normalised, or ValueError naming the first bad one. O(1)."""
    if not isinstance(client_id, str) or not client_id:
        raise ValueError(f"client_id = {client_id!r} must be a non-empty string")
    whose = f" (client {client_id!r})"
    return (
        client_id,
        _number("wants" + whose, wants),
        _number("has" + whose, has),
        _integer("subclients" + whose, subclients, minimum=1),
        _integer("priority" + whose, priority),
    )


def _check_safe_capacity(safe_capacity: float | None) -> float | None:
    if safe_capacity is None:
        return None
    value = _number("safe_capacity", safe_capacity, minimum=None)
    if value < 0 and value != -1:
        raise ValueError(f"safe_capacity = {safe_capacity!r} must be >= 0, or -1 for unlimited")
    return value


class LeaseTable:
    """The leases of one resource; see the module docstring for invariants and costs."""

    def __init__(
        self,
        kind: Kind,
        capacity: float,
        *,
        lease_length: float,
        refresh_interval: float,
        learning_mode_duration: float = 0,
        safe_capacity: float | None = None,
        started_at: float = 0.0,
        learning: bool = False,
    ) -> None:
        self._started_at = _number("started_at", started_at, minimum=None)
        self._learning = bool(learning)
        self._leases: dict[str, _Held] = {}
        self._heap: list[tuple[float, str]] = []
        self._bands: dict[int, BandIndex] = {}
        self._priorities: list[int] = []  # of the bands present, ascending
        self._sum_has = 0.0
        self._sum_wants = 0.0
        self._sum_subclients = 0
        self._changes = 0  # to the float sums since they were last recounted
        self._retired_steps = 0  # index steps of bands that emptied and were dropped
        self.reconfigure(
            kind,
            capacity,
            lease_length=lease_length,
            refresh_interval=refresh_interval,
            learning_mode_duration=learning_mode_duration,
            safe_capacity=safe_capacity,
        )

    # --- configuration --------------------------------------------------------------

    def reconfigure(
        self,
        kind: Kind,
        capacity: float,
        *,
        lease_length: float,
        refresh_interval: float,
        learning_mode_duration: float,
        safe_capacity: float | None,
    ) -> None:
        """Apply a (re-loaded) template; the leases and their expiry times are kept.

        Checks every value first and changes nothing on error. A capacity below
        ``sum_has`` is handled by the decisions that follow (grants of 0). O(1).
        """
        try:
            checked_kind = Kind(kind)
        except ValueError:
            raise ValueError(f"kind = {kind!r} is not one of {', '.join(Kind)}") from None
        check_capacity(capacity)
        length = _number("lease_length", lease_length)
        interval = _number("refresh_interval", refresh_interval)
        if length <= 0 or interval <= 0:
            raise ValueError(
                f"lease_length = {length:g} and refresh_interval = {interval:g} must be > 0"
            )
        duration = _number("learning_mode_duration", learning_mode_duration)
        safe = _check_safe_capacity(safe_capacity)
        self._kind = checked_kind
        self._capacity = float(capacity)
        self._lease_length = length
        self._refresh_interval = interval
        self._learning_mode_duration = duration
        self._safe_capacity = safe

    def set_capacity(self, capacity: float) -> None:
        """Change the capacity alone; checked first. O(1)."""
        check_capacity(capacity)
        self._capacity = float(capacity)

    @property
    def kind(self) -> Kind:
        return self._kind

    @property
    def capacity(self) -> float:
        return self._capacity

    @property
    def lease_length(self) -> float:
        return self._lease_length

    @property
    def refresh_interval(self) -> float:
        return self._refresh_interval

    @property
    def learning_mode_duration(self) -> float:
        return self._learning_mode_duration

    @property
    def safe_capacity(self) -> float | None:
        """The configured safe capacity, or None when it is computed per lease."""
        return self._safe_capacity

    @property
    def started_at(self) -> float:
        return self._started_at

    def learning(self, now: float) -> bool:
        """True while requests are granted the ``has`` they report (spec section 6). O(1).

        Only for a table created with ``learning=True`` (no persisted leases), only for
        the two sharing kinds, while ``now < started_at + learning_mode_duration`` with
        the duration of the current configuration.
        """
        return (
            self._learning
            and self._kind in SHARING_KINDS
            and now < self._started_at + self._learning_mode_duration
        )

    # --- the decision ---------------------------------------------------------------

    def request(
        self,
        client_id: str,
        wants: float,
        *,
        now: float,
        has: float = 0.0,
        subclients: int = 1,
        priority: int = 0,
    ) -> Lease:
        """Decide and store the lease of ``client_id`` (spec section 5), after expiring.

        Postcondition: the client holds a lease with ``has`` = the grant, the given wants,
        subclients and priority, and ``expiry_time = now + lease_length``; the grant is
        >= 0 and, for the sharing kinds outside learning mode, <= its equilibrium share
        and <= what the others leave free. Raises ValueError naming the field, before
        changing anything. Cost: see the module docstring.
        """
        # The usual case is checked inline (type(x) is int also rules out bool; NaN and
        # inf fail the range test); anything else goes through _checked, which either
        # normalises it or says what is wrong. Saves about 3 us per request.
        if not (
            type(client_id) is str
            and client_id
            and (type(wants) is float or type(wants) is int)
            and 0 <= wants <= _MAX
            and (type(has) is float or type(has) is int)
            and 0 <= has <= _MAX
            and type(subclients) is int
            and subclients >= 1
            and type(priority) is int
        ):
            client_id, wants, has, subclients, priority = _checked(
                client_id, wants, has, subclients, priority
            )
        if not ((type(now) is float or type(now) is int) and -_MAX <= now <= _MAX):
            now = _number("now", now, minimum=None)
        heap = self._heap
        if heap and heap[0][0] <= now:
            self._expire_due(now)
        wants = float(wants)
        old = self._leases.get(client_id)
        if old is None:
            self._index(wants, subclients, priority, client_id)
            old_has = 0.0
        else:
            old_has = old[HAS]
            if old[PRIORITY] != priority:
                self._unindex(client_id, old)
                self._index(wants, subclients, priority, client_id)
            elif old[WANTS] != wants or old[SUBCLIENTS] != subclients:
                self._bands[priority].move(
                    old[WANTS], old[SUBCLIENTS], wants, subclients, client_id
                )
        kind = self._kind
        capacity = self._capacity
        if kind is Kind.NO_ALGORITHM:
            grant = wants
        elif kind is Kind.STATIC:
            grant = wants if wants < capacity else capacity
        elif self._learning and now < self._started_at + self._learning_mode_duration:
            grant = float(has)
        else:
            free = capacity - (self._sum_has - old_has)
            grant = self._entitled(wants, subclients, priority)
            if free < grant:
                grant = free if free > 0.0 else 0.0
        expiry = now + self._lease_length
        self._store(client_id, (grant, wants, subclients, priority, expiry), old)
        safe = self._safe_capacity
        if safe is None:
            safe = capacity * subclients / self._sum_subclients
        return Lease(grant, expiry, self._refresh_interval, safe)

    def _entitled(self, wants: float, subclients: int, priority: int) -> float:
        # The requester's equilibrium share, its new claim already in the index. A band
        # is offered what the wants of the bands above leave (see algorithms.py); with
        # one band, or in the highest, that is the whole capacity.
        priorities = self._priorities
        if priority == priorities[-1]:
            available = self._capacity
        else:
            above = priorities[bisect_right(priorities, priority) :]
            wanted_above = math.fsum([self._bands[p].total_wants for p in above])
            available = max(0.0, self._capacity - wanted_above)
        band = self._bands[priority]
        if self._kind is Kind.FAIR_SHARE:
            share = band.water_level(available) * subclients
        else:
            terms = band.proportional_terms(available)
            if terms is None:
                return wants
            q, slack, excess = terms
            base = q * subclients
            if wants <= base:
                return wants
            share = base + (wants - base) * slack / excess
        if share >= wants:
            return wants
        return share if share > 0.0 else 0.0

    # --- other changes --------------------------------------------------------------

    def assign(
        self,
        client_id: str,
        *,
        has: float,
        wants: float,
        expiry_time: float,
        subclients: int = 1,
        priority: int = 0,
    ) -> None:
        """Put a lease back as it was (restoring from the store), replacing any lease of
        ``client_id``. No decision is made and nothing is expired; a lease already past
        its expiry time goes at the next ``expire``. Checked first. O(log n) + index."""
        client_id, wants, has, subclients, priority = _checked(
            client_id, wants, has, subclients, priority
        )
        expiry_time = _number("expiry_time", expiry_time, minimum=None)
        old = self._leases.get(client_id)
        if old is not None:
            self._unindex(client_id, old)
        self._index(wants, subclients, priority, client_id)
        self._store(client_id, (has, wants, subclients, priority, expiry_time), old)

    def release(self, client_id: str) -> bool:
        """Drop the lease of ``client_id`` now; False (and no change) if it has none.

        Its heap entry goes stale. O(1) + the index removal."""
        held = self._leases.get(client_id)
        if held is None:
            return False
        self._drop(client_id, held)
        return True

    def expire(self, now: float) -> list[str]:
        """Drop every lease with ``expiry_time <= now``; return their ids, soonest first.

        Each id is returned once: by the call that drops it. Cost O(k log n) for the k
        heap entries due (stale ones included), never a scan of the leases."""
        return [lease.client_id for lease in self.expire_leases(now)]

    def expire_leases(self, now: float) -> list[LeaseState]:
        """Equivalent to ``expire``, returning each dropped lease as it was held (for
        a caller that may have to put them back). Same cost."""
        return self._expire_due(_number("now", now, minimum=None))

    def _expire_due(self, now: float) -> list[LeaseState]:
        heap = self._heap
        due: list[LeaseState] = []
        while heap and heap[0][0] <= now:
            expiry, client_id = heapq.heappop(heap)
            held = self._leases.get(client_id)
            if held is not None and held[EXPIRY] == expiry:
                self._drop(client_id, held)
                due.append(LeaseState(client_id, *held))
        return due

    # --- reading --------------------------------------------------------------------

    def get(self, client_id: str) -> LeaseState | None:
        """The lease of ``client_id``, or None. O(1)."""
        held = self._leases.get(client_id)
        return None if held is None else LeaseState(client_id, *held)

    def leases(self) -> list[LeaseState]:
        """Every lease held, sorted by client id. O(n log n)."""
        return [LeaseState(c, *self._leases[c]) for c in sorted(self._leases)]

    @property
    def sum_has(self) -> float:
        """Σhas over the leases held (live as of the last expiry). O(1)."""
        return self._sum_has

    @property
    def sum_wants(self) -> float:
        """Σwants over the leases held. O(1)."""
        return self._sum_wants

    @property
    def sum_subclients(self) -> int:
        """Σsubclients over the leases held, exact. O(1)."""
        return self._sum_subclients

    @property
    def count(self) -> int:
        """The number of leases held. O(1)."""
        return len(self._leases)

    @property
    def index_steps(self) -> int:
        """Work done by the band indexes so far (Python loop iterations and entries summed
        in C; see band_index.py): a deterministic measure, for tests. O(bands)."""
        return self._retired_steps + sum(band.steps for band in self._bands.values())

    def check(self) -> None:
        """Raise AssertionError unless the invariants of the module docstring hold. O(n)."""
        by_band: dict[int, list[tuple[float, int, str]]] = {}
        for client_id, held in self._leases.items():
            by_band.setdefault(held[PRIORITY], []).append(
                (held[WANTS], held[SUBCLIENTS], client_id)
            )
        assert sorted(by_band) == self._priorities == sorted(self._bands)
        for priority, band in self._bands.items():
            band.check()
            assert sorted(band.entries(), key=lambda e: e[2]) == sorted(
                by_band[priority], key=lambda e: e[2]
            )
        heap = set(self._heap)
        assert all((held[EXPIRY], c) in heap for c, held in self._leases.items())
        values = self._leases.values()
        assert math.isclose(self._sum_has, math.fsum(v[HAS] for v in values), abs_tol=1e-6)
        assert math.isclose(self._sum_wants, math.fsum(v[WANTS] for v in values), abs_tol=1e-6)
        assert self._sum_subclients == sum(v[SUBCLIENTS] for v in values)

    # --- bookkeeping ----------------------------------------------------------------

    def _index(self, wants: float, subclients: int, priority: int, client_id: str) -> None:
        band = self._bands.get(priority)
        if band is None:
            band = self._bands[priority] = BandIndex()
            insort(self._priorities, priority)
        band.add(wants, subclients, client_id)

    def _unindex(self, client_id: str, held: _Held) -> None:
        priority = held[PRIORITY]
        band = self._bands[priority]
        band.remove(held[WANTS], held[SUBCLIENTS], client_id)
        if not len(band):
            self._retired_steps += band.steps
            del self._bands[priority]
            self._priorities.remove(priority)

    def _store(self, client_id: str, held: _Held, old: _Held | None) -> None:
        # The index already holds the new claim; update the sums, the table and the heap.
        if old is None:
            self._sum_has += held[HAS]
            self._sum_wants += held[WANTS]
            self._sum_subclients += held[SUBCLIENTS]
        else:
            self._sum_has += held[HAS] - old[HAS]
            self._sum_wants += held[WANTS] - old[WANTS]
            self._sum_subclients += held[SUBCLIENTS] - old[SUBCLIENTS]
        self._leases[client_id] = held
        heapq.heappush(self._heap, (held[EXPIRY], client_id))
        self._changes += 1
        if self._changes >= RECOUNT_EVERY:
            self._recount()
        if len(self._heap) > HEAP_SLACK * len(self._leases) + HEAP_FLOOR:
            self._heap = [(held[EXPIRY], c) for c, held in self._leases.items()]
            heapq.heapify(self._heap)

    def _drop(self, client_id: str, held: _Held) -> None:
        del self._leases[client_id]
        self._unindex(client_id, held)
        self._sum_has -= held[HAS]
        self._sum_wants -= held[WANTS]
        self._sum_subclients -= held[SUBCLIENTS]
        self._changes += 1
        if not self._leases:
            self._sum_has = self._sum_wants = 0.0
            self._changes = 0
        elif self._changes >= RECOUNT_EVERY:
            self._recount()

    def _recount(self) -> None:
        # Exact sums again, once the changes since the last recount reach n as well.
        values = self._leases.values()
        if self._changes < len(values):
            return
        self._sum_has = math.fsum([v[HAS] for v in values])
        self._sum_wants = math.fsum([v[WANTS] for v in values])
        self._changes = 0
