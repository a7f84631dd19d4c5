"""Property tests of the shared pool's CPU over random sequences of operations: place
(bound or unbound, by the engine's own plans), realloc, remove and SetNode (cores and
``cpu_overcommit``). After every step, accepted or refused:

1. no core piece is both bound and shared (the shared pool holds no core a bound
   container uses);
2. the unbound containers' CPU requests add up to at most the shared pool's pieces times
   ``cpu_overcommit``, and none asks for more than the pool;
3. a refused step changes nothing.
"""

from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple

from hypothesis import event, given, settings
from hypothesis import strategies as st

from coordinator.placement import (
    Delta,
    NodeState,
    PlacementError,
    assign,
    cpu_plans,
    realloc,
    release,
    set_node,
)
from coordinator.placement.shared_cpu import kept_cores, shared_limit
from shared.quantity import format_cpu
from tests.coordinator.placement.topologies import bound, memory_mode

MiB = 2**20
P = 100


def check_invariants(state: NodeState) -> None:
    bound_cores = {
        core
        for alloc in state.allocations.values()
        if alloc.resources.cpu_bind
        for core in alloc.plan.cores
    }
    assert not bound_cores & set(state.shared_pool())  # 1.
    assert set(state.shared_pool()) | bound_cores == set(state.cores)
    unbound = [
        a.resources.cpu_request for a in state.allocations.values() if not a.resources.cpu_bind
    ]
    shared = sum(state.cores[c] for c in state.shared_pool())
    ratio = state.cpu_overcommit
    assert sum(unbound) <= shared * ratio  # 2.
    assert all(cpu <= shared for cpu in unbound)
    for cid, alloc in state.allocations.items():
        if not alloc.resources.cpu_bind:
            assert state.limits(cid).cpuset_cpus == ",".join(map(str, state.shared_pool()))


class Place(NamedTuple):
    bound: bool
    cpu: int
    memory: int
    containers: int


class Realloc(NamedTuple):
    pick: int
    cpu: int


class Remove(NamedTuple):
    pick: int


class Cores(NamedTuple):
    core: int
    pieces: int


class Overcommit(NamedTuple):
    ratio: str


Step = Place | Realloc | Remove | Cores | Overcommit
steps = st.lists(
    st.one_of(
        st.builds(
            Place,
            st.booleans(),
            st.integers(1, 3 * P),
            st.sampled_from([64 * MiB, 256 * MiB]),
            st.integers(1, 3),
        ),
        st.builds(Realloc, st.integers(0, 50), st.integers(-2 * P, 2 * P)),
        st.builds(Remove, st.integers(0, 50)),
        st.builds(Cores, st.integers(0, 5), st.sampled_from([-100, -50, 50, 100])),
        st.builds(Overcommit, st.sampled_from(["1", "1.25", "1.5", "2", "3"])),
    ),
    max_size=25,
)


def signed(pieces: int) -> str:
    return format_cpu(pieces) if pieces >= 0 else "-" + format_cpu(-pieces)


def apply(state: NodeState, step: Step, serial: int) -> NodeState:
    """One step on ``state``; a refused one raises and changes nothing."""
    ids = sorted(state.allocations)
    match step:
        case Place(is_bound, cpu, memory, containers):
            resources = bound(cpu, memory) if is_bound else memory_mode(cpu, memory)
            plans = cpu_plans(state.view(), resources, containers)  # refused: beyond capacity
            for i, plan in enumerate(plans):
                state = assign(state, f"c{serial}-{i}", plan, resources).state  # fits
            return state
        case Realloc(pick, cpu) if ids:
            return realloc(state, ids[pick % len(ids)], Delta(cpu=signed(cpu))).state
        case Remove(pick) if ids:
            return release(state, ids[pick % len(ids)]).state
        case Cores(core, pieces):
            return set_node(state, "delta", cores={core: pieces}).state
        case Overcommit(ratio):
            return set_node(state, "absolute", cpu_overcommit=ratio).state
    return state


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 4), steps)
def test_no_sequence_oversells_the_shared_pool_or_shares_a_bound_core(
    cores: int, sequence: list[Step]
) -> None:
    state = NodeState("n", dict.fromkeys(range(cores), P), memory=4096 * MiB)
    assert state.cpu_overcommit == Fraction(1)
    for serial, step in enumerate(sequence):
        before = state
        try:
            state = apply(state, step, serial)
        except PlacementError as error:
            event(f"{type(step).__name__}: {error.kind}")
            assert state is before  # 3.
        check_invariants(state)
    modes = {a.resources.cpu_bind for a in state.allocations.values()}
    event(f"ends with {len(state.allocations)} container(s), bound and unbound: {len(modes) == 2}")


@st.composite
def shared_cores(draw: st.DrawFn) -> tuple[dict[int, int], tuple[int, ...]]:
    """A node's cores (id -> pieces free to the pool) and its shared ones, ascending."""
    ids = draw(st.lists(st.integers(0, 31), min_size=1, max_size=12, unique=True))
    cores = {core: draw(st.integers(1, P)) for core in ids}
    return cores, tuple(sorted(draw(st.sets(st.sampled_from(sorted(ids)), min_size=1))))


@given(
    shared_cores(),
    st.sampled_from([Fraction(1), Fraction(3, 2), Fraction(2)]),
    st.integers(1, 2 * P),
    st.integers(0, 2 * P),
    st.sets(st.integers(0, 31), max_size=3),
)
def test_kept_cores_cover_the_unbound_with_one_core_where_one_does(
    node: tuple[dict[int, int], tuple[int, ...]],
    ratio: Fraction,
    requested: int,
    largest: int,
    avoid: set[int],
) -> None:
    """The cores kept for the unbound containers cover what they ask for whenever the
    shared cores can; where one core alone can, it is the one kept, the smallest of
    those by (avoided, pieces, highest id): found without sorting every core first."""
    cores, shared = node
    kept = kept_cores(cores, shared, ratio, requested=requested, largest=largest, avoid=avoid)
    if not largest:
        assert kept == ()
        return

    def covers(chosen: tuple[int, ...] | list[int]) -> bool:
        pieces = sum(cores[c] for c in chosen)
        return pieces >= largest and shared_limit(pieces, ratio) >= requested

    assert set(kept) <= set(shared)
    assert list(kept) == sorted(kept)
    alone = [c for c in shared if covers([c])]
    if alone:
        event("one core covers them")
        assert kept == (min(alone, key=lambda c: (c in avoid, cores[c], -c)),)
    elif covers(shared):
        event("several cores cover them")
        assert covers(kept)
        assert len(kept) > 1
    else:
        assert kept == shared
