"""Realloc (spec sections 5.3 and 10): the single plan with own cores preferred, pools in
the stated order, all or nothing; properties of the inverse delta and of failures."""

from __future__ import annotations

import copy

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from coordinator.placement import (
    Delta,
    GiB,
    MiB,
    Node,
    NodeState,
    Normalized,
    PlacementError,
    Plan,
    assign,
    cpu_plans,
    realloc,
)
from coordinator.placement import reference as ref
from coordinator.placement.state import single_plan
from shared.quantity import format_cpu
from tests.coordinator.placement.topologies import (
    STATE_FLAT_4,
    STATE_SEED_NUMA,
    bound,
    bound_requests,
    memory_mode,
    placed,
    record,
    small_nodes,
)

# --- named starting states --------------------------------------------------------------

# flat-4 with one 1-CPU container on core 0.
FLAT_ONE = placed(STATE_FLAT_4, bound(100, GiB), 1, "c")
# flat-4 with one 2.5-CPU container: fragment 50 on core 0 (converted), whole cores 1 and 2.
FLAT_2_5 = placed(STATE_FLAT_4, bound(250, GiB), 1, "c")
# FLAT_2_5 with another container's 0.5 CPU fragment on core 0 (now full).
FLAT_2_5_SHARED = assign(FLAT_2_5, "d", Plan({0: 50}, None, 0, 0), bound(50)).state
# seed-numa with one 1-CPU + 600Mi container on NUMA 0 (core 0).
SEED_ONE = placed(STATE_SEED_NUMA, bound(100, 600 * MiB), 1, "c")
# seed-numa with two 1-CPU containers, both on NUMA 0 (cores 0 and 1).
SEED_NUMA0_FULL = placed(STATE_SEED_NUMA, bound(100), 2, "c")
# flat-4 fully bound: four 1-CPU containers.
FLAT_FULL = placed(STATE_FLAT_4, bound(100, GiB), 4, "c")
# flat-4 with a memory-mode container (1 CPU, 1 GiB, limit 1 core) and a bound one on core 0.
FLAT_MIXED = assign(
    placed(STATE_FLAT_4, memory_mode(100, GiB, cpu_limit=100), 1, "m"),
    "c-0",
    Plan({0: 100}),
    bound(100),
).state


def test_named_states() -> None:
    assert FLAT_ONE.allocations["c-0"].plan.cores == {0: 100}
    assert FLAT_2_5.allocations["c-0"].plan == Plan({0: 50, 1: 100, 2: 100}, None, GiB, 0)
    assert SEED_ONE.allocations["c-0"].plan == Plan({0: 100}, 0, 600 * MiB)
    assert [a.plan.cores for a in SEED_NUMA0_FULL.allocations.values()] == [{0: 100}, {1: 100}]
    assert FLAT_MIXED.shared_pool() == (1, 2, 3)


# (state, delta, expected new plan of c-0)
GROWS = [
    pytest.param(
        FLAT_ONE, Delta(cpu="0.5"), Plan({0: 100, 1: 50}, None, GiB, 1), id="grow-keeps-own-core"
    ),
    pytest.param(
        FLAT_2_5,
        Delta(cpu="-0.8"),
        Plan({0: 70, 1: 100}, None, GiB, 0),
        id="shrink-own-fragment-first",
    ),
    pytest.param(
        FLAT_2_5,
        Delta(cpu="-1.1"),
        Plan({0: 40, 1: 100}, None, GiB, 0),
        id="shrink-own-fragment-before-surplus",
    ),
    pytest.param(
        FLAT_2_5_SHARED,
        Delta(cpu="-0.9"),
        Plan({1: 100, 2: 60}, None, GiB, 2),
        id="shrink-surplus-whole-hosts-fragment",
    ),
    pytest.param(
        SEED_ONE,
        Delta(memory="500Mi"),
        Plan({0: 100}, None, 1100 * MiB, None),
        id="memory-beyond-numa-goes-cross-own-core",
    ),
    pytest.param(
        SEED_NUMA0_FULL,
        Delta(cpu="1"),
        Plan({2: 100, 3: 100}, 1, 0, None),
        id="cpu-beyond-numa-0-goes-numa-1",
    ),
    pytest.param(
        FLAT_ONE,
        Delta(memory="1Gi"),
        Plan({0: 100}, None, 2 * GiB, None),
        id="memory-only-same-cores",
    ),
]


@pytest.mark.parametrize(("state", "delta", "plan"), GROWS)
def test_realloc_plans(state: NodeState, delta: Delta, plan: Plan) -> None:
    snapshot = copy.deepcopy(state)
    change = realloc(state, "c-0", delta)
    assert change.state.allocations["c-0"].plan == plan
    assert change.state.version == state.version + 1
    assert "c-0" in change.updates
    assert change.updates["c-0"] == change.state.limits("c-0")
    assert state == snapshot  # the given state is never touched


def test_realloc_moves_the_shared_pool() -> None:
    change = realloc(FLAT_MIXED, "c-0", Delta(cpu="1"))
    assert change.state.allocations["c-0"].plan.cores == {0: 100, 1: 100}
    assert change.updates["m-0"].cpuset_cpus == "2,3"
    assert change.updates["m-0"].cpu_quota == 100_000


def test_zero_delta_changes_nothing() -> None:
    for state in (FLAT_ONE, FLAT_2_5, SEED_ONE, FLAT_MIXED):
        for cid in state.allocations:
            change = realloc(state, cid, Delta())
            assert change.state is state
            assert change.updates == {}


def test_memory_mode_realloc() -> None:
    change = realloc(FLAT_MIXED, "m-0", Delta(memory="2Gi", cpu="1"))
    resources = change.state.allocations["m-0"].resources
    assert (resources.memory_request, resources.memory_limit) == (3 * GiB, 3 * GiB)
    assert (resources.cpu_request, resources.cpu_limit) == (200, 200)
    assert change.updates["m-0"].cpu_quota == 200_000
    assert change.state.allocations["m-0"].plan == Plan({}, None, 3 * GiB, None)


def test_switching_modes() -> None:
    to_bound = realloc(FLAT_MIXED, "m-0", Delta(cpu_bind=True))
    assert to_bound.state.allocations["m-0"].plan == Plan({1: 100}, None, GiB, None)
    assert to_bound.state.shared_pool() == (2, 3)
    to_memory = realloc(FLAT_ONE, "c-0", Delta(cpu_bind=False))
    assert to_memory.state.allocations["c-0"].plan == Plan({}, None, GiB, None)
    assert to_memory.updates["c-0"].cpuset_cpus == "0,1,2,3"


def _rejected(state: NodeState, cid: str, delta: Delta, kind: str, word: str, id: str) -> object:
    return pytest.param(state, cid, delta, kind, word, id=id)


SHORT = "insufficient_resource"
INVALID = "invalid_request"
# (state, container, delta, kind, a word the message must contain)
REJECTED = [
    _rejected(FLAT_FULL, "c-0", Delta(cpu="0.5"), SHORT, "fragment", "no-fragment-core"),
    _rejected(FLAT_FULL, "c-0", Delta(cpu="1"), SHORT, "whole", "no-whole-core"),
    _rejected(FLAT_FULL, "c-0", Delta(memory="5Gi"), SHORT, "memory", "memory"),
    _rejected(SEED_ONE, "c-0", Delta(memory="2Gi"), SHORT, "NUMA memory", "numa-memory"),
    _rejected(FLAT_MIXED, "m-0", Delta(memory="8Gi"), SHORT, "memory", "memory-mode"),
    _rejected(FLAT_MIXED, "m-0", Delta(cpu="4"), SHORT, "cores", "above-core-count"),
    _rejected(FLAT_ONE, "c-0", Delta(cpu="-1"), INVALID, "cpu-bind", "bind-to-zero"),
    _rejected(FLAT_ONE, "c-0", Delta(cpu="-2"), INVALID, "negative", "negative"),
    _rejected(FLAT_ONE, "c-0", Delta(memory_limit="-1Gi"), INVALID, "in place", "drop-limit"),
    _rejected(FLAT_ONE, "c-0", Delta(soft_memory=True), INVALID, "in place", "go-soft"),
    _rejected(FLAT_ONE, "c-0", Delta(cpu="1", cpu_request="1"), INVALID, "shorthand", "both"),
    _rejected(FLAT_ONE, "c-0", Delta(cpu="0.001"), INVALID, "finer", "finer-than-a-piece"),
    _rejected(FLAT_ONE, "c-0", Delta(cpu_bind=1), INVALID, "boolean", "flag-int"),  # type: ignore[arg-type]
    _rejected(FLAT_ONE, "zz", Delta(cpu="1"), INVALID, "no allocation", "unknown-container"),
]


@pytest.mark.parametrize(("state", "cid", "delta", "kind", "word"), REJECTED)
def test_realloc_rejects_and_changes_nothing(
    state: NodeState, cid: str, delta: Delta, kind: str, word: str
) -> None:
    snapshot = copy.deepcopy(state)
    with pytest.raises(PlacementError) as caught:
        realloc(state, cid, delta)
    assert caught.value.kind == kind
    assert word in caught.value.message
    if kind == "insufficient_resource":
        assert caught.value.details["node"] == state.name
        assert caught.value.details["short"]
    assert state == snapshot
    assert state.version == snapshot.version


# --- section 5.3 against section 5.1 ----------------------------------------------------


@settings(max_examples=150)
@given(st.data())
def test_single_plan_without_own_cores_is_plan_zero(data: st.DataObject) -> None:
    node = data.draw(small_nodes())
    request = data.draw(bound_requests(node.share_base))
    flat = Node("n", node.cores, share_base=node.share_base)  # the cross pool only
    x, y = divmod(request.cpu_request, node.share_base)
    cores = single_plan(flat.cores, tuple(flat.cores), flat.share_base, x, y)
    plans = (
        cpu_plans(flat, Normalized(request.cpu_request, 0, 0, 0, True, False, node.share_base), 1)
        if cores is not None
        else []
    )
    assert (cores is None) == (not plans)
    if plans:
        assert cores == plans[0].cores
    if not any(v > node.share_base for v in node.cores.values()):
        assert (cores is not None) == ref.one_fits(
            flat.cores, tuple(flat.cores), flat.share_base, x, y
        )


# --- properties -------------------------------------------------------------------------


@st.composite
def populated(draw: st.DrawFn) -> NodeState:
    """A small node with a few bound and memory-mode containers already placed."""
    node = draw(small_nodes())
    state = record(node)
    p = node.share_base
    for i in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            resources = draw(bound_requests(p))
        else:
            memory = draw(st.sampled_from([64, 256, 512])) * MiB
            resources = memory_mode(draw(st.integers(1, 2 * p)), memory, p, cpu_limit=0)
        try:
            [plan] = cpu_plans(state.view(), resources, 1)
        except PlacementError:
            continue
        state = assign(state, f"c{i}", plan, resources).state
    return state


def totals(state: NodeState) -> tuple[int, int]:
    return sum(state.used.values()), state.memory_used


@settings(max_examples=200)
@given(populated(), st.data())
def test_realloc_then_inverse_restores_totals(state: NodeState, data: st.DataObject) -> None:
    if not state.allocations:
        return
    cid = data.draw(st.sampled_from(sorted(state.allocations)))
    assert realloc(state, cid, Delta()).state is state  # a zero delta changes nothing
    old = state.allocations[cid].resources
    p = state.share_base
    low = -(old.cpu_request - 1)  # every container keeps some CPU
    cpu = data.draw(st.integers(low, 2 * p))
    memory = data.draw(st.sampled_from([0, 64 * MiB, 512 * MiB, -64 * MiB]))
    if old.memory_request + memory < (6 * MiB if old.memory_request or not old.cpu_bind else 0):
        memory = 0
    delta = Delta(cpu=format_cpu(cpu, share_base=p), memory=memory)
    snapshot = copy.deepcopy(state)
    kind: str | None = None
    try:
        change = realloc(state, cid, delta)
    except PlacementError as error:
        kind = error.kind
    # A failed realloc leaves node, allocation and container untouched.
    assert kind in (None, "insufficient_resource", "invalid_request")
    assert state == snapshot
    if kind is not None:
        event(f"failed: {kind}")
        return
    inverse = Delta(cpu=_negate(delta.cpu), memory=-memory)
    if any(v > p for v in state.cores.values()):
        # Oversold cores: section 5.3 may refuse the inverse (see the test below).
        try:
            back = realloc(change.state, cid, inverse)
        except PlacementError as error:
            assert error.kind == "insufficient_resource"  # noqa: PT017
            event("oversold: inverse refused")
            return
    else:
        back = realloc(change.state, cid, inverse)  # always succeeds
    event("succeeded, inverse too")
    assert totals(back.state) == totals(state)
    assert back.state.allocations[cid].resources.cpu_request == old.cpu_request
    assert back.state.allocations[cid].resources.memory_request == old.memory_request


def _negate(value: object) -> str:
    text = str(value)
    return text[1:] if text.startswith("-") else "-" + text


def test_oversold_inverse_may_be_refused() -> None:
    # Section 5.3 takes a whole unit only from a core whose free pieces are a multiple of
    # P. On an oversold core shared with another container's fragment that is not so:
    # c0 = 3 CPU on cores 0, 1, 2 (P = 10; core 2 offers 20), c1 = 0.1 CPU on core 2.
    # c0 shrinks to 2.9 (fragment 9 on core 2), then back to 3: core 2 has 19 free, not a
    # whole core, and the cross pool has only cores 0 and 1 whole. The spec's "the inverse
    # always succeeds" holds without oversold cores (the property above).
    state = NodeState("n", {0: 10, 1: 10, 2: 20}, share_base=10)
    state = assign(state, "c0", Plan({0: 10, 1: 10, 2: 10}), bound(30, share_base=10)).state
    state = assign(state, "c1", Plan({2: 1}, fragment=2), bound(1, share_base=10)).state
    shrunk = realloc(state, "c0", Delta(cpu="-0.1")).state
    assert shrunk.allocations["c0"].plan == Plan({0: 10, 1: 10, 2: 9}, None, 0, 2)
    snapshot = copy.deepcopy(shrunk)
    with pytest.raises(PlacementError) as caught:
        realloc(shrunk, "c0", Delta(cpu="0.1"))
    assert caught.value.kind == "insufficient_resource"
    assert caught.value.details["short"] == ["whole_cores"]
    assert shrunk == snapshot


def test_a_shrunk_bound_container_grows_back_beside_a_small_core_that_covers_the_unbound() -> None:
    # Found by the property above: c0 = 1.2 CPU on cores 1 and 0 (P = 10), c1 = 0.1 CPU
    # unbound; core 2 offers one piece, enough for c1. c0 shrinks to core 1 alone; growing
    # back needs 2 pieces of core 0, so the core kept for c1 must be core 2, the smallest
    # that covers it, not core 0, the largest.
    state = NodeState("n", {0: 10, 1: 10, 2: 1}, memory=600 * MiB, share_base=10)
    state = assign(state, "c0", Plan({0: 2, 1: 10}, fragment=0), bound(12, share_base=10)).state
    state = assign(state, "c1", Plan({}, memory=64 * MiB), memory_mode(1, 64 * MiB, 10)).state
    shrunk = realloc(state, "c0", Delta(cpu="-0.2")).state
    assert shrunk.allocations["c0"].plan.cores == {1: 10}
    assert shrunk.kept_cores(avoid=(1,)) == (2,)
    back = realloc(shrunk, "c0", Delta(cpu="0.2")).state
    assert back.allocations["c0"].plan.cores == {0: 2, 1: 10}
    assert totals(back) == totals(state)
