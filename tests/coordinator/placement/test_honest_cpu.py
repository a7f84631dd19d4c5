"""Honest CPU (issue 17, items 2-4): unbound containers are charged their CPU requests
against the node's shared pool (the cores no bound container uses) times its
``cpu_overcommit``; bound cores stay exclusive; every container asks for some CPU."""

from __future__ import annotations

from fractions import Fraction

import pytest

from coordinator.placement import (
    Delta,
    GiB,
    MiB,
    NodeState,
    PlacementError,
    Plan,
    Request,
    Resources,
    assign,
    cpu_plans,
    node_capacity,
    normalize,
    realloc,
    release,
    set_node,
)
from tests.coordinator.placement.topologies import STATE_FLAT_4, bound, memory_mode, placed

# The host: two CPUs, 23.5 GiB.
STATE_VM = NodeState("vm", {0: 100, 1: 100}, memory=47 * GiB // 2)


def readme_walkthrough() -> NodeState:
    """The README's deployments: two bound containers of 0.5 CPU sharing core 0, one
    unbound of 0.5 CPU on the shared pool (core 1)."""
    state = placed(STATE_VM, bound(50, 64 * MiB), 2, "web")
    return placed(state, memory_mode(50, 32 * MiB, cpu_limit=50), 1, "batch")


# --- item 4: a CPU request must be > 0 ---------------------------------------------------


@pytest.mark.parametrize("cpu", ["0", 0, "0.0"])
def test_a_memory_mode_container_without_cpu_is_refused(cpu: object) -> None:
    with pytest.raises(PlacementError) as refused:
        normalize(Resources(cpu_request=cpu, memory_request="64Mi"))  # type: ignore[arg-type]
    assert refused.value.kind == "invalid_request"
    assert "cpu_request" in refused.value.message
    assert "> 0" in refused.value.message
    with pytest.raises(PlacementError):
        Request(cpu, 64 * MiB).normalized()  # type: ignore[arg-type]


def test_realloc_cannot_take_an_unbound_container_to_zero_cpu() -> None:
    state = readme_walkthrough()
    with pytest.raises(PlacementError) as refused:
        realloc(state, "batch-0", Delta(cpu="-0.5"))
    assert refused.value.kind == "invalid_request"


# --- item 3: unbound containers are charged CPU on the node --------------------------------


def test_memory_mode_capacity_is_bounded_by_the_shared_cpu() -> None:
    assert node_capacity(STATE_VM.view(), Request("2", 16 * MiB)) == 1  # was 1,504
    assert node_capacity(STATE_VM.view(), Request("0.5", 16 * MiB)) == 4
    state = readme_walkthrough()  # core 1 shared, 0.5 of it requested
    assert node_capacity(state.view(), Request("0.5", 16 * MiB)) == 1
    assert node_capacity(state.view(), Request("0.6", 16 * MiB)) == 0
    assert node_capacity(state.view(), Request("2", 16 * MiB)) == 0


def test_an_unbound_container_beyond_the_shared_pool_is_refused_with_the_numbers() -> None:
    state = readme_walkthrough()
    with pytest.raises(PlacementError) as refused:
        cpu_plans(state.view(), Request("1", 16 * MiB), 1)
    assert refused.value.kind == "insufficient_resource"
    assert refused.value.details["short"] == "cpu"
    plan = Plan({}, None, 16 * MiB, None)
    with pytest.raises(PlacementError) as refused:
        assign(state, "more", plan, memory_mode(100, 16 * MiB))
    error = refused.value
    assert error.kind == "insufficient_resource"
    assert (error.details["requested"], error.details["asked"]) == (50, 100)
    assert (error.details["shared_cpu"], error.details["cpu_overcommit"]) == (100, "1")
    assert "shared pool" in error.message
    assert "(0.5 before)" in error.message


def test_the_state_counts_what_unbound_containers_request() -> None:
    state = readme_walkthrough()
    assert state.bound_cpu == 100
    assert state.unbound_cpu == 50
    assert (state.shared_cpu, state.shared_limit) == (100, 100)
    assert state.shared_pool() == (1,)


# --- item 2: bound cores stay exclusive ----------------------------------------------------


def test_a_realloc_that_would_take_the_last_shared_core_is_refused() -> None:
    state = readme_walkthrough()
    with pytest.raises(PlacementError) as refused:
        realloc(state, "web-0", Delta(cpu="+0.5"))
    error = refused.value
    assert error.kind == "insufficient_resource"
    assert "kept for the unbound containers" in error.message
    assert state.shared_pool() == (1,)
    assert state.limits("batch-0").cpuset_cpus == "1"


def test_bound_placement_leaves_the_unbound_their_shared_cores() -> None:
    state = placed(STATE_FLAT_4, memory_mode(150, GiB), 1, "m")  # needs 2 shared cores
    assert node_capacity(state.view(), bound(100)) == 2
    state = placed(state, bound(100), 2, "b")
    assert state.shared_pool() == (2, 3)
    assert state.limits("m-0").cpuset_cpus == "2,3"
    assert node_capacity(state.view(), bound(100)) == 0
    with pytest.raises(PlacementError) as refused:
        assign(state, "b-2", Plan({2: 100}, None, 0, None), bound(100))
    assert refused.value.kind == "insufficient_resource"
    assert refused.value.details["short"] == "shared_cpu"


def test_the_shared_pool_is_never_widened_onto_bound_cores() -> None:
    state = placed(STATE_FLAT_4, bound(400), 1, "b")
    assert state.shared_pool() == ()
    assert node_capacity(state.view(), Request("0.5", 16 * MiB)) == 0
    assert release(state, "b-0").state.shared_pool() == (0, 1, 2, 3)


# --- cpu_overcommit --------------------------------------------------------------------------


def test_cpu_overcommit_scales_the_shared_pool_and_is_set_with_set_node() -> None:
    assert STATE_VM.cpu_overcommit == 1
    oversold = set_node(STATE_VM, "delta", cpu_overcommit="1.5").state
    assert oversold.cpu_overcommit == Fraction(3, 2)
    assert oversold.shared_limit == 300
    assert node_capacity(oversold.view(), Request("0.5", 16 * MiB)) == 6
    assert node_capacity(oversold.view(), Request("3", 16 * MiB)) == 0  # above 2 cores
    state = placed(oversold, memory_mode(100, 16 * MiB), 3, "m")
    with pytest.raises(PlacementError) as refused:
        set_node(state, "absolute", cpu_overcommit="1")
    assert refused.value.kind == "below_allocation"
    assert "3 CPU requested" in refused.value.message
    with pytest.raises(PlacementError) as refused:
        set_node(state, "delta", cores={1: -100})
    assert refused.value.kind == "below_allocation"


@pytest.mark.parametrize("value", ["0.5", "0", "-1", "1.001", "abc", "101", True])
def test_a_bad_cpu_overcommit_is_refused(value: object) -> None:
    with pytest.raises(PlacementError) as refused:
        set_node(STATE_VM, "absolute", cpu_overcommit=value)
    assert refused.value.kind == "invalid_request"
    assert "cpu_overcommit" in refused.value.message
