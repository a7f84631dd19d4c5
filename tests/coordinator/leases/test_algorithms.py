"""The pure allocation functions: the spec's worked examples, priority bands, checks of
the input, and agreement with the slow exact references on random claims."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.leases import (
    Kind,
    allocate,
    fair_share,
    no_algorithm,
    proportional_share,
    static_share,
)
from coordinator.leases.reference import proportional, water_filling
from tests.coordinator.leases.strategies import band_offers, claims

TOL = 1e-6
Sharing = Callable[..., list[float]]

# --- the spec's worked examples (capacity 120, three clients, one band) ----------------

SEED_WANTS = [1000.0, 50.0, 10.0]
PROPORTIONAL_SEED = [40 + 960 * 30 / 970, 40 + 10 * 30 / 970, 10.0]  # 69.6907..., 40.3092...


@pytest.mark.parametrize(
    ("kind", "wants", "expected"),
    [
        pytest.param(Kind.NO_ALGORITHM, [100, 10, 1000], [100, 10, 1000], id="no-algorithm"),
        pytest.param(Kind.STATIC, [50, 200, 300], [50, 120, 120], id="static"),
        pytest.param(Kind.PROPORTIONAL_SHARE, SEED_WANTS, PROPORTIONAL_SEED, id="proportional"),
        pytest.param(Kind.FAIR_SHARE, SEED_WANTS, [60, 50, 10], id="fair"),
    ],
)
def test_worked_examples(kind: Kind, wants: list[float], expected: list[float]) -> None:
    assert allocate(kind, 120, wants) == pytest.approx(expected, abs=TOL)


def test_worked_examples_through_each_function() -> None:
    assert no_algorithm([100, 10, 1000]) == [100, 10, 1000]
    assert static_share(120, [50, 200, 300]) == [50, 120, 120]
    assert proportional_share(120, SEED_WANTS) == pytest.approx(PROPORTIONAL_SEED, abs=TOL)
    assert proportional_share(120, SEED_WANTS)[0] == pytest.approx(69.690721649, abs=1e-9)
    assert proportional_share(120, SEED_WANTS)[1] == pytest.approx(40.309278350, abs=1e-9)
    assert fair_share(120, SEED_WANTS) == pytest.approx([60, 50, 10], abs=TOL)


@pytest.mark.parametrize(
    ("share", "reference"),
    [
        pytest.param(fair_share, water_filling, id="fair"),
        pytest.param(proportional_share, proportional, id="proportional"),
    ],
)
def test_references_agree_on_the_worked_examples(share: Sharing, reference: Sharing) -> None:
    assert share(120, SEED_WANTS) == pytest.approx(reference(120, SEED_WANTS), abs=TOL)


# --- single-band cases ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("capacity", "wants", "weights", "expected"),
    [
        pytest.param(90, [100, 100], [2, 1], [60, 30], id="weights-split-the-level"),
        pytest.param(100, [10, 20], None, [10, 20], id="demand-fits"),
        pytest.param(30, [10, 20], None, [10, 20], id="demand-exactly-fits"),
        pytest.param(0, [10, 20], None, [0, 0], id="no-capacity"),
        pytest.param(50, [0, 0, 100], None, [0, 0, 50], id="zero-wants"),
        pytest.param(30, [10, 10, 10, 10], None, [7.5] * 4, id="ties"),
        pytest.param(100, [], None, [], id="nobody"),
        pytest.param(90, [20, 40, 40], [1, 1, 2], [20, 30, 40], id="weighted-level"),
    ],
)
def test_fair_share_in_one_band(
    capacity: float, wants: list[float], weights: list[int] | None, expected: list[float]
) -> None:
    assert fair_share(capacity, wants, weights) == pytest.approx(expected, abs=TOL)
    assert water_filling(capacity, wants, weights) == pytest.approx(expected, abs=TOL)


def test_proportional_share_counts_excess_need_not_wants() -> None:
    # q = 30 per subclient: c2 leaves 20 unused; excess needs 70 and 10 share it 7:1.
    shares = proportional_share(90, [100, 40, 10])
    assert shares == pytest.approx([30 + 70 * 20 / 80, 30 + 10 * 20 / 80, 10], abs=TOL)
    assert math.fsum(shares) == pytest.approx(90, abs=TOL)


def test_proportional_share_weights_scale_the_base() -> None:
    # q = 20: base 40 for the two-subclient client, which wants less than that.
    shares = proportional_share(60, [30, 100], weights=[2, 1])
    assert shares == pytest.approx([30, 30], abs=TOL)


# --- priority bands --------------------------------------------------------------------


@pytest.mark.parametrize("share", [fair_share, proportional_share], ids=["fair", "proportional"])
@pytest.mark.parametrize(
    ("capacity", "wants", "priorities", "expected"),
    [
        pytest.param(10, [8, 8], [1, 0], [8, 2], id="lower-band-gets-the-rest"),
        pytest.param(10, [6, 6, 5], [1, 1, 0], [5, 5, 0], id="short-high-band-starves-low"),
        pytest.param(12, [6, 6, 5], [1, 1, 0], [6, 6, 0], id="exact-fit-leaves-nothing"),
        pytest.param(20, [5, 10, 10], [-1, -5, 0], [5, 5, 10], id="negative-priorities"),
        pytest.param(9, [4, 4, 4], [3, 2, 1], [4, 4, 1], id="three-bands"),
        pytest.param(3, [1, 100, 1], [0, 7, 0], [0, 3, 0], id="order-of-positions-free"),
    ],
)
def test_strict_priority_bands(
    share: Sharing,
    capacity: float,
    wants: list[float],
    priorities: list[int],
    expected: list[float],
) -> None:
    assert share(capacity, wants, priorities=priorities) == pytest.approx(expected, abs=TOL)


def test_bands_use_their_own_algorithm_inside() -> None:
    wants = [30.0, 1000.0, 50.0, 10.0]
    priorities = [1, 0, 0, 0]
    assert fair_share(150, wants, priorities=priorities) == pytest.approx([30, 60, 50, 10], abs=TOL)
    assert proportional_share(150, wants, priorities=priorities) == pytest.approx(
        [30, *PROPORTIONAL_SEED], abs=TOL
    )


# --- checks of the input -----------------------------------------------------------------

NAN = float("nan")
INF = float("inf")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        pytest.param(
            lambda: fair_share(10, [1, 2], [1]), "wants has 2 entries, weights has 1", id="weights"
        ),
        pytest.param(
            lambda: proportional_share(10, [1], priorities=[0, 1]),
            "wants has 1 entries, priorities has 2",
            id="priorities",
        ),
        pytest.param(lambda: fair_share(10, [1, -2]), "wants[1] = -2.0", id="negative-wants"),
        pytest.param(lambda: fair_share(10, [NAN]), "wants[0] = nan", id="nan-wants"),
        pytest.param(lambda: proportional_share(10, [INF]), "wants[0] = inf", id="inf-wants"),
        pytest.param(lambda: fair_share(10, [1, 1], [1, 0]), "weights[1] = 0", id="weight-0"),
        pytest.param(lambda: fair_share(10, [1], [True]), "weights[0] = True", id="weight-bool"),
        pytest.param(
            lambda: fair_share(10, [1], priorities=[0.5]),  # type: ignore[list-item]
            "priorities[0] = 0.5",
            id="priority-float",
        ),
        pytest.param(lambda: fair_share(-1, [1]), "capacity = -1", id="negative-capacity"),
        pytest.param(lambda: static_share(NAN, [1]), "capacity = nan", id="nan-capacity"),
        pytest.param(lambda: no_algorithm([-0.5]), "wants[0] = -0.5", id="no-algorithm"),
        pytest.param(lambda: allocate("BOGUS", 1, [1]), "kind = 'BOGUS'", id="kind"),  # type: ignore[arg-type]
        pytest.param(
            lambda: allocate(Kind.STATIC, 10, [1], [1, 1]),
            "weights has 2",
            id="allocate-checks-all",
        ),
    ],
)
def test_bad_input_is_rejected_with_the_numbers(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


# --- agreement with the references --------------------------------------------------------


def _check_band_rule(
    shares: Sequence[float],
    capacity: float,
    wants: Sequence[float],
    priorities: Sequence[int],
) -> None:
    for share, want in zip(shares, wants, strict=True):
        assert 0 <= share <= want
    offers = band_offers(capacity, wants, priorities)
    for band, offer in offers.items():
        members = [i for i, p in enumerate(priorities) if p == band]
        band_wants = math.fsum(wants[i] for i in members)
        handed_out = math.fsum(shares[i] for i in members)
        assert handed_out == pytest.approx(min(offer, band_wants), abs=TOL)
    assert math.fsum(shares) == pytest.approx(min(capacity, math.fsum(wants)), abs=TOL)


@settings(max_examples=300)
@given(claims())
def test_fair_share_equals_water_filling(
    case: tuple[float, list[float], list[int], list[int]],
) -> None:
    capacity, wants, weights, priorities = case
    shares = fair_share(capacity, wants, weights, priorities)
    assert shares == pytest.approx(water_filling(capacity, wants, weights, priorities), abs=TOL)
    _check_band_rule(shares, capacity, wants, priorities)


@settings(max_examples=300)
@given(claims())
def test_proportional_share_equals_its_transcription(
    case: tuple[float, list[float], list[int], list[int]],
) -> None:
    capacity, wants, weights, priorities = case
    shares = proportional_share(capacity, wants, weights, priorities)
    assert shares == pytest.approx(proportional(capacity, wants, weights, priorities), abs=TOL)
    _check_band_rule(shares, capacity, wants, priorities)


@settings(max_examples=100)
@given(claims(), st.randoms(use_true_random=False))
def test_shares_do_not_depend_on_the_order_of_clients(
    case: tuple[float, list[float], list[int], list[int]], random: st.SearchStrategy[object]
) -> None:
    capacity, wants, weights, priorities = case
    order = list(range(len(wants)))
    random.shuffle(order)  # type: ignore[attr-defined]
    for share in (fair_share, proportional_share):
        shares = share(capacity, wants, weights, priorities)
        shuffled = share(
            capacity,
            [wants[i] for i in order],
            [weights[i] for i in order],
            [priorities[i] for i in order],
        )
        assert shuffled == pytest.approx([shares[i] for i in order], abs=TOL)


@settings(max_examples=100)
@given(claims())
def test_fair_share_is_max_min(case: tuple[float, list[float], list[int], list[int]]) -> None:
    # Within a band, a client short of its wants has at least as much per subclient as
    # anyone else in the band: nobody could gain by taking from someone with more.
    capacity, wants, weights, priorities = case
    shares = fair_share(capacity, wants, weights, priorities)
    for i, (share, want) in enumerate(zip(shares, wants, strict=True)):
        if share < want - TOL:
            for j in range(len(wants)):
                if priorities[j] == priorities[i]:
                    assert shares[j] / weights[j] <= share / weights[i] + TOL
