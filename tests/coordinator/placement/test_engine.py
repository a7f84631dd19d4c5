"""Capacity and plans on one node (spec sections 5 and 6): the worked examples, a table
over the named topologies, and properties against the slow references and an exhaustive
search."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.placement import (
    GiB,
    MiB,
    Node,
    Normalized,
    PlacementError,
    Plan,
    Request,
    container_limits,
    cpu_plans,
    node_capacity,
    pool_capacities,
)
from coordinator.placement import reference as ref
from coordinator.placement.engine import closed_form
from tests.coordinator.placement.topologies import (
    TOPO_BENCH_24,
    TOPO_FLAT_4,
    TOPO_NUMA_UNTRACKED,
    TOPO_OVERSOLD_3,
    TOPO_PARTIAL_6,
    TOPO_SEED_NUMA,
    bound,
    bound_requests,
    is_oversold,
    memory_mode,
    small_nodes,
)

# --- the worked examples ----------------------------------------------------------------


def test_seed_numa_example() -> None:
    # 2 NUMA nodes of 2 cores and 1 GiB, node memory 2 GiB; 1 core + 600 MiB: NUMA 0 takes
    # 1 (memory), NUMA 1 takes 1, the cross pool has 2 cores and 848 MiB left: 1 more.
    request = Request("1", 600 * MiB, cpu_bind=True)
    assert node_capacity(TOPO_SEED_NUMA, request) == 3
    assert pool_capacities(TOPO_SEED_NUMA, request) == (1, 1, 1)
    assert cpu_plans(TOPO_SEED_NUMA, request, 3) == [
        Plan({0: 100}, 0, 600 * MiB, None),
        Plan({2: 100}, 1, 600 * MiB, None),
        Plan({1: 100}, None, 600 * MiB, None),
    ]


def test_seed_1_7_cpu_example() -> None:
    # 1.7 CPU with P = 100: X = 1 whole core + Y = 70 pieces of a fragment core, whose
    # cpu-shares come from the 70 pieces: max(2, round_half_up(1024 * 70 / 100)) = 717.
    node = Node("two", {0: 100, 1: 100}, memory=GiB)
    request = Request("1.7", 512 * MiB, cpu_bind=True)
    assert node_capacity(node, request) == 1
    [plan] = cpu_plans(node, request, 1)
    assert plan == Plan({0: 70, 1: 100}, None, 512 * MiB, 0)
    assert plan.fragment == 0
    assert plan.pieces == 170
    limits = container_limits(plan, request.normalized(100))
    assert limits.cpu_shares == 717
    assert limits.cpuset_cpus == "0,1"


def test_bench_node_keeps_fragments_low_and_whole_cores_high() -> None:
    request = Request("1.7", 512 * MiB, cpu_bind=True)
    assert pool_capacities(TOPO_BENCH_24, request) == (6, 6, 0)
    plans = cpu_plans(TOPO_BENCH_24, request, 10)
    # NUMA 0 full (6 conversions), NUMA 1 with the fewest conversions for 4: cores 12-15.
    assert [p.fragment for p in plans] == [0, 1, 2, 3, 4, 5, 12, 13, 14, 15]
    assert [sorted(set(p.cores) - {p.fragment}) for p in plans] == [
        [6], [7], [8], [9], [10], [11], [16], [17], [18], [19]
    ]  # fmt: skip
    assert [p.numa for p in plans] == [0] * 6 + [1] * 4


# --- capacities over the named topologies -----------------------------------------------

# (node, request, per-pool capacities) -- worked out by hand from section 5.1's formula.
CAPACITIES = [
    pytest.param(TOPO_SEED_NUMA, bound(100, 600 * MiB), (1, 1, 1), id="seed-numa-1cpu-600Mi"),
    pytest.param(TOPO_SEED_NUMA, bound(100), (2, 2, 0), id="seed-numa-1cpu"),
    pytest.param(TOPO_SEED_NUMA, bound(50), (4, 4, 0), id="seed-numa-half-cpu"),
    pytest.param(TOPO_SEED_NUMA, bound(170), (1, 1, 0), id="seed-numa-1.7"),
    pytest.param(TOPO_BENCH_24, bound(170, 512 * MiB), (6, 6, 0), id="bench-1.7"),
    # 1.3: max_k min(12 - k, 3k) = 9 at k = 3 per NUMA node; nothing left for cross.
    pytest.param(TOPO_BENCH_24, bound(130, 512 * MiB), (9, 9, 0), id="bench-1.3"),
    pytest.param(TOPO_FLAT_4, bound(170), (2,), id="flat-1.7"),
    pytest.param(TOPO_FLAT_4, bound(30), (12,), id="flat-0.3"),
    pytest.param(TOPO_FLAT_4, bound(200), (2,), id="flat-2cpu"),
    # Fragments of 30 and 50 pieces: 1.3 uses both (S = 2) next to whole cores.
    pytest.param(TOPO_PARTIAL_6, bound(130), (2,), id="partial-1.3"),
    pytest.param(TOPO_PARTIAL_6, bound(50), (7,), id="partial-0.5"),
    pytest.param(TOPO_PARTIAL_6, bound(170), (1,), id="partial-1.7"),
    # Oversold: cores of 200 count 2 units each; 150 is a fragment core of 150 pieces.
    pytest.param(TOPO_OVERSOLD_3, bound(100), (4,), id="oversold-1cpu"),
    pytest.param(TOPO_OVERSOLD_3, bound(150), (3,), id="oversold-1.5"),
    pytest.param(TOPO_OVERSOLD_3, bound(50), (11,), id="oversold-0.5"),
    # NUMA memory not tracked: each NUMA pool is bounded by node memory left.
    pytest.param(TOPO_NUMA_UNTRACKED, bound(100, 600 * MiB), (1, 0, 0), id="untracked-600Mi"),
    pytest.param(TOPO_NUMA_UNTRACKED, bound(100), (2, 2, 0), id="untracked-no-memory"),
]


@pytest.mark.parametrize(("node", "request_", "pools"), CAPACITIES)
def test_capacities(node: Node, request_: Normalized, pools: tuple[int, ...]) -> None:
    assert pool_capacities(node, request_) == pools
    assert node_capacity(node, request_) == sum(pools)
    assert ref.node_capacity(node, request_) == sum(pools)
    assert cpu_plans(node, request_, sum(pools)) == ref.cpu_plans(node, request_, sum(pools))


@pytest.mark.parametrize(
    ("node", "request_", "capacity"),
    [
        pytest.param(TOPO_FLAT_4, memory_mode(200, GiB), 2, id="flat-2cpu-1Gi"),
        pytest.param(TOPO_FLAT_4, memory_mode(50, GiB), 8, id="flat-memory-bound"),
        pytest.param(TOPO_FLAT_4, memory_mode(400, GiB), 1, id="cpu-equal-to-cores"),
        pytest.param(TOPO_FLAT_4, memory_mode(401, GiB), 0, id="cpu-above-cores"),
        pytest.param(TOPO_BENCH_24, memory_mode(170, 512 * MiB), 14, id="bench-512Mi"),
        pytest.param(TOPO_PARTIAL_6, memory_mode(100, 3 * GiB), 2, id="partial-3Gi"),
        pytest.param(TOPO_PARTIAL_6, memory_mode(0, 3 * GiB), 2, id="stored-without-cpu"),
    ],
)
def test_memory_mode_capacity(node: Node, request_: Normalized, capacity: int) -> None:
    # Section 6: the shared pool's CPU (a bare view: every core's free pieces) and the
    # memory bound it; NUMA is not consulted.
    assert node_capacity(node, request_) == capacity
    plans = cpu_plans(node, request_, capacity)
    assert plans == [Plan({}, None, request_.memory_request, None)] * capacity


@pytest.mark.parametrize(
    ("node", "request_", "short"),
    [
        pytest.param(TOPO_SEED_NUMA, bound(100, 600 * MiB), "memory", id="seed-numa-memory"),
        pytest.param(TOPO_SEED_NUMA, bound(100), "cpu", id="seed-numa-cpu"),
        pytest.param(TOPO_OVERSOLD_3, bound(150), "cpu", id="oversold-cpu"),
        pytest.param(TOPO_FLAT_4, memory_mode(100, 3 * GiB), "memory", id="memory-mode-memory"),
        pytest.param(TOPO_FLAT_4, memory_mode(500, GiB), "cpu", id="memory-mode-cpu"),
    ],
)
def test_more_than_capacity_names_what_was_short(
    node: Node, request_: Normalized, short: str
) -> None:
    capacity = node_capacity(node, request_)
    with pytest.raises(PlacementError) as caught:
        cpu_plans(node, request_, capacity + 1)
    error = caught.value
    assert error.kind == "insufficient_resource"
    assert error.details["node"] == node.name
    assert error.details["asked"] == capacity + 1
    assert error.details["capacity"] == capacity
    assert error.details["short"] == short
    assert node.name in error.message


def test_count_must_be_a_non_negative_int() -> None:
    for count in (-1, 1.0, True):
        with pytest.raises(PlacementError) as caught:
            cpu_plans(TOPO_FLAT_4, bound(100), count)  # type: ignore[arg-type]
        assert caught.value.kind == "invalid_request"
    assert cpu_plans(TOPO_FLAT_4, bound(100), 0) == []


def test_normalized_request_must_match_share_base() -> None:
    with pytest.raises(PlacementError) as caught:
        node_capacity(TOPO_FLAT_4, bound(1000, share_base=1000))
    assert caught.value.details["field"] == "share_base"


def test_closed_form_equals_every_split() -> None:
    for a in range(13):
        for s in range(7):
            for x in (1, 2, 3):
                for q in (1, 2, 5):
                    tried = max(min((a - k) // x, s + k * q) for k in range(a + 1))
                    assert closed_form(a, s, x, 1, q) == tried, (a, s, x, q)


# --- properties -------------------------------------------------------------------------


@st.composite
def node_and_request(draw: st.DrawFn, oversold: bool = True) -> tuple[Node, Normalized]:
    node = draw(small_nodes(oversold=oversold))
    return node, draw(bound_requests(node.share_base))


def charge(node: Node, plans: list[Plan]) -> tuple[dict[int, int], int, dict[int, int]]:
    """The node's availability after all plans: pieces, memory, NUMA memory."""
    avail = dict(node.cores)
    memory = node.memory
    numa_memory = dict(node.numa_memory or {})
    for plan in plans:
        for c, pieces in plan.cores.items():
            avail[c] -= pieces
        memory -= plan.memory
        if plan.numa is not None and node.numa_memory is not None:
            numa_memory[plan.numa] -= plan.memory
    return avail, memory, numa_memory


@settings(max_examples=150)
@given(node_and_request())
def test_plans_never_allocate_anything_twice(case: tuple[Node, Normalized]) -> None:
    node, request = case
    capacity = node_capacity(node, request)
    plans = cpu_plans(node, request, capacity)
    avail, memory, numa_memory = charge(node, plans)
    assert min(avail.values()) >= 0
    assert memory >= 0
    assert all(v >= 0 for v in numa_memory.values())
    for plan in plans:
        if plan.numa is not None:
            assert node.numa is not None
            assert {node.numa[c] for c in plan.cores} == {plan.numa}


@settings(max_examples=150)
@given(node_and_request())
def test_plan_shape(case: tuple[Node, Normalized]) -> None:
    # Exactly X whole cores at P pieces and at most one fragment core, at Y pieces.
    node, request = case
    p = node.share_base
    x, y = divmod(request.cpu_request, p)
    for plan in cpu_plans(node, request, node_capacity(node, request)):
        whole = [c for c, v in plan.cores.items() if v == p]
        fragments = [c for c, v in plan.cores.items() if v != p]
        assert len(whole) == x
        assert fragments == ([plan.fragment] if y else [])
        if y:
            assert plan.cores[fragments[0]] == y
        assert plan.memory == request.memory_request
        assert plan.pieces == request.cpu_request
        assert list(plan.cores) == sorted(plan.cores)


@settings(max_examples=150)
@given(node_and_request())
def test_capacity_is_the_number_of_plans(case: tuple[Node, Normalized]) -> None:
    node, request = case
    capacity = node_capacity(node, request)
    assert len(cpu_plans(node, request, capacity)) == capacity
    with pytest.raises(PlacementError) as caught:
        cpu_plans(node, request, capacity + 1)
    assert caught.value.kind == "insufficient_resource"


@settings(max_examples=150)
@given(node_and_request())
def test_fast_equals_literal_reference(case: tuple[Node, Normalized]) -> None:
    # Oversold nodes included: the general walk against the literal transcription.
    node, request = case
    capacity = node_capacity(node, request)
    assert capacity == ref.node_capacity(node, request)
    # Every d on small capacities; a spread of them on large ones (the reference is slow).
    counts = (
        range(capacity + 1) if capacity <= 12 else {0, 1, 2, capacity // 2, capacity - 1, capacity}
    )
    for d in sorted(counts):
        assert cpu_plans(node, request, d) == ref.cpu_plans(node, request, d)


@st.composite
def exhaustible(draw: st.DrawFn) -> tuple[Node, Normalized]:
    # Small share bases only: the exhaustive search is exponential in the pieces.
    node = draw(small_nodes(oversold=False).filter(lambda n: n.share_base <= 10))
    return node, draw(bound_requests(node.share_base))


@settings(max_examples=120)
@given(exhaustible())
def test_each_pool_equals_an_exhaustive_search(case: tuple[Node, Normalized]) -> None:
    # Section 5.2: compare each pool, on the availability the walk hands it, with the most
    # containers any placement could fit there (bounded by the pool's memory budget).
    node, request = case
    assert not is_oversold(node)
    p = node.share_base
    x, y = divmod(request.cpu_request, p)
    m = request.memory_request
    plans = cpu_plans(node, request, node_capacity(node, request))
    avail = dict(node.cores)
    left = node.memory
    pools: list[tuple[int | None, tuple[int, ...]]] = [*node.pools, (None, tuple(node.cores))]
    for numa, ids in pools:
        mine = [plan for plan in plans if plan.numa == numa]
        best = ref.exhaustive_pool_capacity([avail[c] for c in ids], p, x, y)
        if m:
            budget = left
            if numa is not None and node.numa_memory is not None:
                budget = min(budget, node.numa_memory[numa])
            best = min(best, budget // m)
        assert len(mine) == best, (numa, ids, avail)
        for plan in mine:
            for c, pieces in plan.cores.items():
                avail[c] -= pieces
            left -= m


@settings(max_examples=100)
@given(node_and_request(oversold=False))
def test_fewer_containers_convert_no_more_cores(case: tuple[Node, Normalized]) -> None:
    # Fewest conversions: a plan for fewer containers never uses more distinct cores for
    # fragments than one for more.
    node, request = case
    capacity = node_capacity(node, request)
    used = [
        len({plan.fragment for plan in cpu_plans(node, request, d)}) for d in range(capacity + 1)
    ]
    assert used == sorted(used)
