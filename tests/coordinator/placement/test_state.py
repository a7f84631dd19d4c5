"""The stored node (spec sections 2 and 6): allocations charged and given back, the
available view, the shared pool, replace, and the checks of a record."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.placement import (
    Allocation,
    GiB,
    MiB,
    NodeState,
    PlacementError,
    Plan,
    assign,
    cpu_plans,
    load,
    release,
    replace,
)
from tests.coordinator.placement.topologies import (
    STATE_FLAT_4,
    STATE_SEED_NUMA,
    bound,
    bound_requests,
    memory_mode,
    placed,
    small_nodes,
)


def test_view_is_capacity_minus_allocations() -> None:
    state = placed(STATE_SEED_NUMA, bound(100, 600 * MiB), 3, "c")
    view = state.view()
    assert view.cores == {0: 0, 1: 0, 2: 0, 3: 100}
    assert view.memory == 2 * GiB - 3 * 600 * MiB
    assert view.numa_memory == {0: GiB - 600 * MiB, 1: GiB - 600 * MiB}  # cross charges node only
    assert view.shared_cores == (3,)
    assert state.version == 3


def test_shared_pool_is_empty_when_every_core_is_bound() -> None:
    state = placed(STATE_FLAT_4, bound(400), 1, "c")
    assert state.shared_pool() == ()  # never widened onto bound cores
    assert placed(STATE_FLAT_4, bound(150), 1, "c").shared_pool() == (2, 3)


def test_assign_reports_memory_mode_containers_whose_pool_moved() -> None:
    state = placed(STATE_FLAT_4, memory_mode(100, GiB), 2, "m")
    assert state.limits("m-0").cpuset_cpus == "0,1,2,3"
    change = assign(state, "c", Plan({0: 100}, None, 0, None), bound(100))
    assert set(change.updates) == {"c", "m-0", "m-1"}
    assert change.updates["m-0"].cpuset_cpus == "1,2,3"
    assert change.updates["c"].cpuset_cpus == "0"
    back = release(change.state, "c")
    assert set(back.updates) == {"m-0", "m-1"}
    assert back.updates["m-1"].cpuset_cpus == "0,1,2,3"
    assert back.state.used == state.used
    assert back.state.memory_used == state.memory_used


@pytest.mark.parametrize(
    ("plan", "resources", "short"),
    [
        pytest.param(Plan({0: 100}, None, 0, None), bound(100), "core", id="core-taken"),
        pytest.param(
            Plan({}, None, 8 * GiB, None), memory_mode(100, 8 * GiB), "memory", id="memory"
        ),
    ],
)
def test_assign_refuses_what_is_not_free(plan: Plan, resources: object, short: str) -> None:
    state = placed(STATE_FLAT_4, bound(100, GiB), 1, "c")
    snapshot = copy.deepcopy(state)
    with pytest.raises(PlacementError) as caught:
        assign(state, "x", plan, resources)  # type: ignore[arg-type]
    assert caught.value.kind == "insufficient_resource"
    assert caught.value.details["short"] == short
    assert state == snapshot
    assert state.version == snapshot.version


def test_assign_refuses_numa_memory_and_duplicates() -> None:
    state = placed(STATE_SEED_NUMA, bound(100, 600 * MiB), 1, "c")
    snapshot = copy.deepcopy(state)
    with pytest.raises(PlacementError) as caught:
        assign(state, "x", Plan({1: 100}, 0, 600 * MiB, None), bound(100, 600 * MiB))
    assert caught.value.details["short"] == "numa_memory"
    with pytest.raises(PlacementError) as caught:
        assign(state, "c-0", Plan({1: 100}, 0, 0, None), bound(100))
    assert caught.value.kind == "invalid_request"
    assert state == snapshot


def test_replace_repoints_without_charging_twice() -> None:
    state = placed(STATE_SEED_NUMA, bound(170, 512 * MiB), 2, "c")
    limits = state.limits("c-1")
    change = replace(state, "c-1", "new")
    assert change.updates == {}
    assert set(change.state.allocations) == {"c-0", "new"}
    assert change.state.allocations["new"] == state.allocations["c-1"]
    assert change.state.limits("new") == limits
    assert change.state.used == state.used
    assert change.state.memory_used == state.memory_used
    assert change.state.numa_used == state.numa_used
    assert change.state.version == state.version + 1


@pytest.mark.parametrize(
    ("old", "new"),
    [pytest.param("nope", "x", id="unknown-old"), pytest.param("c-0", "c-1", id="new-taken")],
)
def test_replace_rejects(old: str, new: str) -> None:
    state = placed(STATE_FLAT_4, bound(100), 2, "c")
    snapshot = copy.deepcopy(state)
    with pytest.raises(PlacementError) as caught:
        replace(state, old, new)
    assert caught.value.kind == "invalid_request"
    assert state == snapshot


def test_load_is_usage_and_rate() -> None:
    state = placed(STATE_FLAT_4, bound(100, GiB), 1, "c")
    assert load(state, bound(200)) == (100 / 400, 200 / 400)
    assert load(state, memory_mode(100, 2 * GiB)) == (GiB / (8 * GiB), 2 * GiB / (8 * GiB))
    assert load(NodeState("empty", {}), bound(100)) == (0.0, 0.0)


# (allocation, the field the error names)
BAD_RECORDS = [
    pytest.param(Allocation(Plan({9: 100}), bound(100)), "allocations['c']", id="unknown-core"),
    pytest.param(Allocation(Plan({2: 100}, 0), bound(100)), "allocations['c']", id="off-numa"),
    pytest.param(Allocation(Plan({0: 100}), bound(170)), "allocations['c']", id="pieces-differ"),
    pytest.param(Allocation(Plan({0: 100}), bound(100, GiB)), "allocations['c']", id="memory"),
    pytest.param(
        Allocation(Plan({0: 1000}), bound(1000, share_base=1000)),
        "allocations['c']",
        id="share-base",
    ),
    pytest.param(
        Allocation(Plan({0: 100}, 0, 2 * GiB), bound(100, 2 * GiB)),
        "numa_memory[0]",
        id="numa-memory-over",
    ),
]


@pytest.mark.parametrize(("allocation", "field"), BAD_RECORDS)
def test_record_rejects_inconsistent_allocations(allocation: Allocation, field: str) -> None:
    with pytest.raises(PlacementError) as caught:
        NodeState(
            "seed",
            {0: 100, 1: 100, 2: 100, 3: 100},
            numa={0: 0, 1: 0, 2: 1, 3: 1},
            memory=4 * GiB,
            numa_memory={0: GiB, 1: GiB},
            allocations={"c": allocation},
        )
    assert caught.value.kind == "invalid_request"
    assert caught.value.details["field"] == field


def test_record_rejects_over_allocation() -> None:
    two = {"a": Allocation(Plan({0: 100}, None, 0, None), bound(100))}
    two["b"] = two["a"]
    with pytest.raises(PlacementError) as caught:
        NodeState("n", {0: 100}, allocations=two)
    assert caught.value.details["field"] == "cores[0]"


@st.composite
def assigned_one_by_one(draw: st.DrawFn) -> list[NodeState]:
    """The states of a node as containers, bound and unbound, are assigned to it one at a
    time (each planned on the last state's view), until one does not fit."""
    node = draw(small_nodes(oversold=False))
    # whole free cores and room for memory, so that most draws place several containers
    roomy = dict.fromkeys(node.cores, node.share_base)
    numa_memory = None if node.numa_memory is None else dict.fromkeys(node.numa_memory, 4 * GiB)
    states = [NodeState("n", roomy, node.numa, 8 * GiB, numa_memory, node.share_base)]
    p = node.share_base
    for i in range(draw(st.integers(1, 8))):
        if draw(st.booleans()):
            resources = draw(bound_requests(p))
        else:
            resources = memory_mode(
                draw(st.integers(1, 2 * p)), draw(st.sampled_from([MiB, GiB])), p
            )
        try:
            (plan,) = cpu_plans(states[-1].view(), resources, 1)
            states.append(assign(states[-1], f"c-{i}", plan, resources).state)
        except PlacementError:
            break
    return states


@given(assigned_one_by_one())
def test_a_state_charged_one_container_at_a_time_equals_one_derived_at_once(
    states: list[NodeState],
) -> None:
    """``assign`` moves the derived amounts by the new container's alone; they must be
    what a record of the same allocations derives from all of them."""
    for state in states:
        whole = NodeState(
            state.name,
            state.cores,
            state.numa,
            state.memory,
            state.numa_memory,
            state.share_base,
            dict(state.allocations),
            state.version,
            state.cpu_overcommit,
        )
        derived = ("used", "memory_used", "numa_used", "bound_cpu", "unbound_cpu", "shared_cpu")
        assert {name: getattr(state, name) for name in derived} == {
            name: getattr(whole, name) for name in derived
        }
        assert state.shared_limit == whole.shared_limit
        assert state.shared_pool() == whole.shared_pool()
        assert state.overdrawn() == whole.overdrawn()
        assert state.view() == whole.view()
