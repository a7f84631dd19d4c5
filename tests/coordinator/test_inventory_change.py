"""capacity_delta: the SetNode delta that follows a node's hardware from one offer to
the next, keeping an administrator's own changes and refused below what is allocated."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.deployments.inventory_change import capacity_delta
from coordinator.placement import Node, PlacementError, Plan, assign, normalize, set_node
from coordinator.placement import Resources as Wanted
from tests.coordinator.placement.topologies import record

GIB = 1024**3


def offer(cores: dict[int, int], memory_per_numa: dict[int, int] | None = None) -> Node:
    """A node offering 100 pieces on each core id, each core on the NUMA node given."""
    memory_per_numa = memory_per_numa or {}
    used = set(cores.values())
    numa_memory = {n: memory_per_numa.get(n, GIB) for n in sorted(used)}
    return Node(
        "n1",
        dict.fromkeys(cores, 100),
        numa=dict(cores),
        memory=sum(numa_memory.values()) + GIB,
        numa_memory=numa_memory,
    )


def test_a_cpu_taken_offline_takes_its_core_away_and_nothing_else() -> None:
    before = offer({0: 0, 1: 0, 2: 1, 3: 1})
    after = offer({0: 0, 1: 0, 2: 1})
    assert capacity_delta(before, after) == {
        "cores": {3: -100},
        "numa": {},
        "memory": 0,
        "numa_memory": {},
    }


def test_an_administrators_oversell_stays_when_a_core_comes_online() -> None:
    before = offer({0: 0, 1: 0})
    state = set_node(record(before), "delta", cores={0: 50}).state  # oversold by hand
    after = offer({0: 0, 1: 0, 2: 0})
    moved = set_node(state, "delta", **capacity_delta(before, after)).state
    assert moved.cores == {0: 150, 1: 100, 2: 100}


def test_hardware_taken_from_under_an_allocation_is_refused() -> None:
    before = offer({0: 0, 1: 0})
    request = normalize(Wanted(cpu_request="1", cpu_bind=True, memory_request=64 << 20), 100)
    held = assign(record(before), "c1", Plan({1: 100}, numa=0, memory=64 << 20), request)
    with pytest.raises(PlacementError) as refused:
        set_node(held.state, "delta", **capacity_delta(before, offer({0: 0})))
    assert refused.value.kind == "below_allocation"


def test_memory_and_numa_moves_follow_the_offer() -> None:
    before = offer({0: 0, 1: 1}, {0: 4 * GIB, 1: 4 * GIB})
    after = offer({0: 0, 1: 0}, {0: 8 * GIB})
    delta = capacity_delta(before, after)
    assert delta["numa"] == {1: 0}
    assert delta["numa_memory"] == {0: 4 * GIB, 1: -4 * GIB}
    moved = set_node(record(before), "delta", **delta).state
    assert (moved.numa, moved.numa_memory) == ({0: 0, 1: 0}, {0: 8 * GIB})


offers = st.dictionaries(
    st.integers(min_value=0, max_value=7), st.integers(min_value=0, max_value=1), min_size=1
).flatmap(
    lambda cores: st.tuples(
        st.just(cores),
        st.dictionaries(
            st.sampled_from(sorted(set(cores.values()))),
            st.integers(min_value=0, max_value=8).map(lambda g: g * GIB),
        ),
    )
)


@given(offers, offers)
def test_the_delta_applied_to_the_old_offer_gives_exactly_the_new_one(
    old: tuple[dict[int, int], dict[int, int]], new: tuple[dict[int, int], dict[int, int]]
) -> None:
    before, after = offer(*old), offer(*new)
    moved = set_node(record(before), "delta", **capacity_delta(before, after)).state
    assert (moved.cores, moved.numa, moved.memory, moved.numa_memory) == (
        after.cores,
        after.numa,
        after.memory,
        after.numa_memory,
    )
