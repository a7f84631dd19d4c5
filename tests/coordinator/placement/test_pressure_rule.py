"""Unbound containers prefer nodes not under CPU pressure (``placement.pressure``): the
rule against its literal one-container-at-a-time statement, and through ``place``."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.placement import GiB, Node, PlacementError, Request, place
from coordinator.placement.pressure import prefer_calm
from coordinator.placement.strategies import Columns, distribute


def columns(caps: list[int], counts: list[int] | None = None) -> Columns:
    n = len(caps)
    names = [f"n{k}" for k in range(n)]
    return Columns(names, caps, counts or [0] * n, [0.0] * n, [0.0] * n)


def literal(cols: Columns, need: int, limit: int, pressured: frozenset[str]) -> dict[str, int]:
    """The rule as stated: one container at a time to the least (pressured, count,
    -capacity left, name) among the nodes with room; None's error when none has."""
    caps = dict(zip(cols.names, cols.caps, strict=True))
    counts = dict(zip(cols.names, cols.counts, strict=True))
    added = dict.fromkeys(cols.names, 0)
    for _ in range(need):
        open_nodes = [
            name
            for name in cols.names
            if added[name] < caps[name] and (not limit or counts[name] + added[name] < limit)
        ]
        if not open_nodes:
            raise LookupError("no room")
        best = min(
            open_nodes,
            key=lambda n: (n in pressured, counts[n] + added[n], -(caps[n] - added[n]), n),
        )
        added[best] += 1
    return {name: k for name, k in sorted(added.items()) if k}


def test_calm_nodes_take_everything_they_have_room_for() -> None:
    cols = columns([4, 4])
    assert prefer_calm(cols, 2, 0, frozenset({"n0"})) == {"n1": 2}
    assert prefer_calm(cols, 6, 0, frozenset({"n0"})) == {"n0": 2, "n1": 4}


def test_without_pressure_the_rule_is_auto() -> None:
    cols = columns([3, 5, 2], [1, 0, 0])
    for need in range(1, 11):
        assert prefer_calm(cols, need, 0, frozenset()) == distribute("auto", cols, need)
        assert prefer_calm(cols, need, 0, frozenset({"elsewhere"})) == distribute(
            "auto", cols, need
        )


def test_a_limit_holds_on_calm_and_pressured_nodes() -> None:
    cols = columns([5, 5, 5], [1, 0, 0])
    assert prefer_calm(cols, 4, 2, frozenset({"n2"})) == {"n0": 1, "n1": 2, "n2": 1}


@pytest.mark.parametrize(
    ("need", "limit", "kind"),
    [(9, 0, "insufficient_capacity"), (5, 2, "node_limit"), (0, 0, "invalid_request")],
)
def test_when_nothing_fits_the_error_is_autos_over_all_nodes(
    need: int, limit: int, kind: str
) -> None:
    cols = columns([3, 4], [0, 1])
    with pytest.raises(PlacementError) as ours:
        prefer_calm(cols, need, limit, frozenset({"n1"}))
    with pytest.raises(PlacementError) as autos:
        distribute("auto", cols, need, limit)
    assert ours.value.kind == autos.value.kind == kind
    assert ours.value.details == autos.value.details


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 6), st.integers(0, 4), st.booleans()), min_size=1, max_size=7
    ),
    st.integers(1, 25),
    st.integers(0, 5),
)
def test_the_rule_is_its_literal_statement(
    nodes: list[tuple[int, int, bool]], need: int, limit: int
) -> None:
    cols = columns([cap for cap, _, _ in nodes], [count for _, count, _ in nodes])
    pressured = frozenset(cols.names[k] for k, (_, _, hot) in enumerate(nodes) if hot)
    try:
        expected = literal(cols, need, limit, pressured)
    except LookupError:
        with pytest.raises(PlacementError):
            prefer_calm(cols, need, limit, pressured)
        return
    got = prefer_calm(cols, need, limit, pressured)
    assert got == expected
    calm_room = sum(
        max(0, min(cap, limit - count) if limit else cap)
        for name, cap, count in zip(cols.names, cols.caps, cols.counts, strict=True)
        if name not in pressured
    )
    if need <= calm_room:  # pressured nodes get nothing while calm ones have room
        assert pressured.isdisjoint(got)


def two_equal_nodes() -> list[Node]:
    return [Node(name, {0: 100, 1: 100}, memory=4 * GiB) for name in ("node-a", "node-b")]


@pytest.mark.parametrize("hot", ["node-a", "node-b"])
def test_place_puts_a_new_unbound_container_on_the_calm_of_two_equal_nodes(hot: str) -> None:
    placement = place(two_equal_nodes(), Request("0.5", GiB), 1, "auto", pressured=frozenset({hot}))
    (calm,) = {"node-a", "node-b"} - {hot}
    assert placement.deploy == {calm: 1}


def test_place_leaves_bound_containers_and_other_strategies_as_they_were() -> None:
    nodes, hot = two_equal_nodes(), frozenset({"node-a"})
    bound = Request("1", GiB, cpu_bind=True)
    assert place(nodes, bound, 1, "auto", pressured=hot).deploy == {"node-a": 1}
    unbound = Request("0.5", GiB)
    assert (
        place(nodes, unbound, 2, "fill", pressured=hot).deploy
        == place(nodes, unbound, 2, "fill").deploy
    )
