"""The filling helpers: named cases, and random cases against the reference's literal
rising-level versions (exact fractions)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.pools import reference as ref
from coordinator.pools.filling import level, progressive_fill, raise_by_weight

LEVELS = [
    pytest.param(1.0, [0.5, 2.0], [1.0, 1.0], 0.5, id="both-rise"),
    pytest.param(1.5, [0.5, 2.0], [1.0, 1.0], 1.0, id="first-capped"),
    pytest.param(3.0, [1.0, 1.0], [1.0, 1.0], float("inf"), id="never-reached"),
    pytest.param(0.0, [1.0], [1.0], 0.0, id="no-room"),
    pytest.param(1.0, [5.0, 5.0], [1.0, 3.0], 0.25, id="weighted"),
    pytest.param(1.0, [5.0, 5.0], [0.0, 1.0], 1.0, id="weightless-item-ignored"),
]


@pytest.mark.parametrize(("room", "caps", "weights", "expected"), LEVELS)
def test_level(room: float, caps: list[float], weights: list[float], expected: float) -> None:
    assert level(room, caps, weights) == pytest.approx(expected)


FILLS = [
    pytest.param(
        [0.6, 0.6], [1.0, 1.0], [(1, 0), (0,)], {0: 0.8, 1: 0.3}, [0.3, 0.5], id="nested-room"
    ),
    pytest.param([0.4, 0.2], [0.4, 0.2], [(0,), (0,)], {0: 0.3}, [0.2, 0.1], id="by-weight"),
    pytest.param([0.4, 0.2], [0.4, 0.2], [(0,), (0,)], {0: 1.0}, [0.4, 0.2], id="room-enough"),
    pytest.param([0.5, 0.5], [1.0, 0.0], [(0,), (0,)], {0: 1.0}, [0.5, 0.0], id="no-weight"),
    pytest.param(
        [0.45, 0.3], [3.0, 1.0], [(1, 0), (0,)], {0: 0.4, 1: 0.2}, [0.2, 0.2], id="frozen-child"
    ),
    pytest.param([0.5], [1.0], [(1, 0)], {0: 1.0, 1: -0.2}, [0.0], id="negative-room-is-0"),
]


@pytest.mark.parametrize(("caps", "weights", "paths", "rooms", "expected"), FILLS)
def test_progressive_fill(
    caps: list[float],
    weights: list[float],
    paths: list[tuple[int, ...]],
    rooms: dict[int, float],
    expected: list[float],
) -> None:
    depth = {node: 0 if node == 0 else 1 for node in rooms}
    assert progressive_fill(caps, weights, paths, rooms, depth) == pytest.approx(expected)


RAISES = [
    pytest.param(1.0, [0.2, 0.0], [1.0, 0.3], [1.0, 1.0], [0.7, 0.3], id="one-capped"),
    pytest.param(1.0, [0.2, 0.0], [1.0, 1.0], [1.0, 3.0], [0.4, 0.6], id="additive-weights"),
    pytest.param(2.0, [0.2, 0.0], [1.0, 0.3], [1.0, 1.0], [1.0, 0.3], id="all-at-ceiling"),
    pytest.param(0.5, [0.3, 0.3], [1.0, 1.0], [1.0, 1.0], [0.25, 0.25], id="floors-scaled"),
]


@pytest.mark.parametrize(("total", "floors", "ceilings", "weights", "expected"), RAISES)
def test_raise_by_weight(
    total: float,
    floors: list[float],
    ceilings: list[float],
    weights: list[float],
    expected: list[float],
) -> None:
    assert raise_by_weight(total, floors, ceilings, weights) == pytest.approx(expected)


amount = st.integers(0, 20).map(lambda k: k / 10)


# caps, weights, paths, rooms, depths
Fill = tuple[list[float], list[float], list[tuple[int, ...]], dict[int, float], dict[int, int]]


@st.composite
def fills(draw: st.DrawFn) -> Fill:
    nodes = draw(st.integers(0, 4))
    parent = {node: draw(st.integers(0, node - 1)) for node in range(1, nodes + 1)}

    def path(node: int) -> tuple[int, ...]:
        return (node,) if node == 0 else (node, *path(parent[node]))

    depth = {node: len(path(node)) for node in range(nodes + 1)}
    rooms = {node: draw(amount) for node in range(nodes + 1)}
    items = draw(st.integers(1, 6))
    caps, weights, paths = [], [], []
    for _ in range(items):
        cap = draw(amount)
        caps.append(cap)
        weights.append(draw(st.sampled_from([0.0, cap, cap + 0.5, 2.0])))
        paths.append(path(draw(st.integers(0, nodes))))
    return caps, weights, paths, rooms, depth


@settings(max_examples=200)
@given(fills())
def test_progressive_fill_equals_the_rising_level(case: Fill) -> None:
    caps, weights, paths, rooms, depth = case
    fast = progressive_fill(caps, weights, paths, rooms, depth)
    items = {
        str(k): (Fraction(c), Fraction(w))
        for k, (c, w) in enumerate(zip(caps, weights, strict=True))
    }
    exact = ref.progressive_fill(
        items,
        lambda i: list(paths[int(i)]),
        lambda node: max(Fraction(0), Fraction(rooms[node if node is not None else 0])),
    )
    assert fast == pytest.approx([float(exact[str(k)]) for k in range(len(caps))], abs=1e-12)
    for node, room in rooms.items():  # postcondition: no room exceeded
        below = sum(x for x, p in zip(fast, paths, strict=True) if node in p)
        assert below <= max(room, 0.0) + 1e-12
    assert all(0 <= x <= c + 1e-12 for x, c in zip(fast, caps, strict=True))


@settings(max_examples=200)
@given(
    st.lists(st.tuples(amount, amount, st.sampled_from([0.5, 1.0, 3.0])), min_size=1, max_size=6),
    amount,
)
def test_raise_by_weight_equals_the_rising_level(
    children: list[tuple[float, float, float]], total: float
) -> None:
    floors = [min(a, b) for a, b, _ in children]
    ceilings = [max(a, b) for a, b, _ in children]
    weights = [w for _, _, w in children]
    fast = raise_by_weight(total, floors, ceilings, weights)
    names = [str(k) for k in range(len(children))]
    exact = ref.raise_by_weight(
        Fraction(total),
        {n: Fraction(g) for n, g in zip(names, floors, strict=True)},
        {n: Fraction(e) for n, e in zip(names, ceilings, strict=True)},
        {n: Fraction(w) for n, w in zip(names, weights, strict=True)},
    )
    assert fast == pytest.approx([float(exact[n]) for n in names], abs=1e-12)
