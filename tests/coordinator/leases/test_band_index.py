"""The band index against the one-band functions it replaces, and its cost in steps."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.leases import Kind, LeaseTable
from coordinator.leases.algorithms import fair_band, proportional_band
from coordinator.leases.band_index import BandIndex
from tests.coordinator.leases.strategies import capacities, wants_values

TOL = 1e-6

# One operation on a band of at most 30 clients: (client, wants, subclients, remove?).
operations = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=29),
        wants_values,
        st.integers(min_value=1, max_value=4),
        st.booleans(),
    ),
    max_size=80,
)


def _shares(band: BandIndex, kind: Kind, available: float) -> dict[str, float]:
    shares = {}
    if kind == Kind.FAIR_SHARE:
        level = band.water_level(available)
        for w, s, client in band.entries():
            shares[client] = min(w, level * s)
    else:
        terms = band.proportional_terms(available)
        for w, s, client in band.entries():
            if terms is None:
                shares[client] = w
            else:
                q, slack, excess = terms
                base = q * s
                shares[client] = w if w <= base else base + (w - base) * slack / excess
    return shares


@settings(max_examples=150)
@given(operations, capacities, st.sampled_from([4, 6, 64]))
def test_index_answers_like_the_band_functions(
    ops: list[tuple[int, float, int, bool]], available: float, load: int
) -> None:
    band = BandIndex(load=load)
    live: dict[str, tuple[float, int]] = {}
    for client_number, wants, subclients, remove in ops:
        client = f"c{client_number}"
        if client in live and remove:
            band.remove(*live.pop(client), client)
        elif client in live:
            band.move(*live[client], wants, subclients, client)
            live[client] = (wants, subclients)
        else:
            band.add(wants, subclients, client)
            live[client] = (wants, subclients)
        band.check()
        assert len(band) == len(live)
        assert sorted(band.entries(), key=lambda e: e[2]) == sorted(
            ((w, s, c) for c, (w, s) in live.items()), key=lambda e: e[2]
        )
        assert band.total_wants == pytest.approx(math.fsum(w for w, _ in live.values()), abs=TOL)
        assert band.total_subclients == sum(s for _, s in live.values())
        clients = sorted(live)
        wants_list = [live[c][0] for c in clients]
        weights = [live[c][1] for c in clients]
        for kind, expected in (
            (Kind.FAIR_SHARE, fair_band(available, wants_list, weights)),
            (Kind.PROPORTIONAL_SHARE, proportional_band(available, wants_list, weights)),
        ):
            shares = _shares(band, kind, available)
            assert [shares[c] for c in clients] == pytest.approx(expected, abs=TOL)


@pytest.mark.parametrize("load", [4, 16, 64], ids=lambda load: f"load-{load}")
def test_many_blocks_answer_like_the_band_functions(load: int) -> None:
    # Hundreds of claims in small blocks, so the boundary falls in every part of the
    # tree: at every tenth of the demand, after adds, moves and removes.
    rng = random.Random(load)
    band = BandIndex(load=load)
    live: dict[str, tuple[float, int]] = {}
    for i in range(600):
        client = f"c{rng.randrange(400)}"
        wants, subclients = (
            rng.choice([rng.uniform(0, 50), float(rng.randrange(4))]),
            rng.randint(1, 5),
        )
        if client not in live:
            band.add(wants, subclients, client)
        elif i % 3:
            band.move(*live[client], wants, subclients, client)
        else:
            band.remove(*live.pop(client), client)
            continue
        live[client] = (wants, subclients)
    band.check()
    clients = sorted(live)
    wants_list = [live[c][0] for c in clients]
    weights = [live[c][1] for c in clients]
    demand = math.fsum(wants_list)
    for tenth in range(12):
        available = demand * tenth / 10
        for kind, expected in (
            (Kind.FAIR_SHARE, fair_band(available, wants_list, weights)),
            (Kind.PROPORTIONAL_SHARE, proportional_band(available, wants_list, weights)),
        ):
            shares = _shares(band, kind, available)
            assert [shares[c] for c in clients] == pytest.approx(expected, abs=TOL)


def test_water_level_of_the_worked_example() -> None:
    band = BandIndex()
    for wants, client in ((50.0, "c1"), (10.0, "c2"), (1000.0, "c0")):
        band.add(wants, 1, client)
    assert band.water_level(120.0) == 60.0
    assert band.water_level(2000.0) == math.inf
    assert band.water_level(0.0) == 0.0
    assert band.proportional_terms(120.0) == pytest.approx((40.0, 30.0, 970.0))
    assert band.proportional_terms(1060.0) is None


def test_removing_an_unknown_claim_changes_nothing() -> None:
    band = BandIndex(load=4)
    for i in range(20):
        band.add(float(i), 1, f"c{i}")
    before = band.entries()
    for wants, subclients, client in ((3.0, 1, "nobody"), (3.0, 2, "c3"), (4.0, 1, "c3")):
        with pytest.raises(KeyError, match="no claim"):
            band.remove(wants, subclients, client)
        with pytest.raises(KeyError, match="no claim"):
            band.move(wants, subclients, 1.0, 1, client)
    assert band.entries() == before
    band.check()
    with pytest.raises(ValueError, match="load = 2"):
        BandIndex(load=2)


def test_blocks_split_and_merge_as_the_band_grows_and_shrinks() -> None:
    band = BandIndex(load=4)
    rng = random.Random(3)
    clients = {f"c{i}": rng.uniform(0, 10) for i in range(200)}
    for client, wants in clients.items():
        band.add(wants, 1, client)
        band.check()
    for client in rng.sample(sorted(clients), 195):
        band.remove(clients.pop(client), 1, client)
        band.check()
    assert len(band) == 5
    level = band.water_level(1.0)
    expected = fair_band(1.0, list(clients.values()), [1] * 5)
    assert [min(w, level) for w in clients.values()] == pytest.approx(expected, abs=TOL)


# --- cost: one request must not look at every lease ---------------------------------------


def _steps_per_request(kind: Kind, n: int, requests: int = 200) -> float:
    """Index steps per request, once n clients hold leases in one band, for requests
    that each change the band: a newcomer or a client changing its wants."""
    rng = random.Random(n)
    table = LeaseTable(kind, 10.0 * n, lease_length=1e6, refresh_interval=10)
    for i in range(n):
        table.request(f"c{i}", rng.uniform(0, 40), now=0.0)
    before = table.index_steps
    for i in range(requests):
        client = f"c{rng.randrange(n)}" if i % 2 else f"new{i}"
        table.request(client, rng.uniform(0, 40), now=1.0)
    return (table.index_steps - before) / requests


@pytest.mark.parametrize("kind", [Kind.FAIR_SHARE, Kind.PROPORTIONAL_SHARE], ids=str)
def test_one_request_does_not_scan_the_band(kind: Kind) -> None:
    # Steps count the index's Python loop iterations and the entries its C loops went
    # over (prefix sums of one block, a split or merge, the periodic exact recount), so
    # they are deterministic. A scan would cost at least n = 20,000 per request.
    small = _steps_per_request(kind, 1_000)
    large = _steps_per_request(kind, 20_000)
    assert large < 20_000 / 20
    assert large < 3 * small  # grows like log n plus a block, not like n
