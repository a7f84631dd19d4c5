"""Placing a deployment (spec section 9): the AUTO worked example through ``place``,
sharing between identical nodes, memory mode, errors, agreement with the straightforward
per-container reference planner, and views that remember their capacities between
placements without changing any result."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.placement import (
    GiB,
    MiB,
    Node,
    Normalized,
    Placement,
    PlacementError,
    Request,
    Resources,
    cpu_plans,
    engine,
    node_capacity,
    normalize,
    place,
    pool_capacities,
)
from coordinator.placement import reference as ref
from coordinator.placement.node import MEMO_REQUESTS
from tests.coordinator.placement.topologies import (
    STATE_FLAT_4,
    bench_node,
    bound,
    memory_mode,
    placed,
    small_nodes,
)

ONE_CPU = Request("1", cpu_bind=True)


def flat(name: str, cores: int) -> Node:
    """A node whose capacity for ONE_CPU is ``cores``."""
    return Node(name, dict.fromkeys(range(cores), 100), memory=64 * GiB)


# The seed's AUTO example: capacities A:10 B:13 C:7 D:2, counts A:3 B:1 C:5 D:4.
SEED_AUTO_NODES = [flat("A", 10), flat("B", 13), flat("C", 7), flat("D", 2)]
SEED_AUTO_COUNTS = {"A": 3, "B": 1, "C": 5, "D": 4}


@pytest.mark.parametrize(
    ("need", "deploy"),
    [
        pytest.param(11, {"A": 3, "B": 5, "C": 1, "D": 2}, id="need-11-all-reach-6"),
        pytest.param(14, {"A": 4, "B": 6, "C": 2, "D": 2}, id="need-14-d-exhausted"),
        pytest.param(2, {"B": 2}, id="need-2-b-rises-to-3"),
    ],
)
def test_seed_auto_example(need: int, deploy: dict[str, int]) -> None:
    placement = place(SEED_AUTO_NODES, ONE_CPU, need, "auto", existing=SEED_AUTO_COUNTS)
    assert placement.capacities == {"A": 10, "B": 13, "C": 7, "D": 2}
    assert placement.deploy == deploy
    for name, added in deploy.items():
        node = next(n for n in SEED_AUTO_NODES if n.name == name)
        assert placement.plans[name] == cpu_plans(node, ONE_CPU, added)
        # Whole cores upward from core 0 on a fresh node.
        assert [sorted(p.cores) for p in placement.plans[name]] == [[i] for i in range(added)]
    assert set(placement.plans) == set(deploy)


def test_identical_nodes_share_plans() -> None:
    nodes = [bench_node(f"node-{i:04d}") for i in range(20)]
    request = Request("1.7", 512 * MiB, cpu_bind=True)
    placement = place(nodes, request, 200, "auto")
    assert placement.deploy == {n.name: 10 for n in nodes}
    assert placement.capacities == {n.name: 12 for n in nodes}
    first = placement.plans["node-0000"]
    assert first == cpu_plans(nodes[0], request, 10)
    assert all(placement.plans[n.name] is first for n in nodes)
    limits = placement.limits("node-0001")
    assert [x.cpuset_cpus for x in limits[:2]] == ["0,6", "1,7"]
    assert {x.cpuset_mems for x in limits} == {"0", "1"}
    assert {x.cpu_shares for x in limits} == {717}
    assert {x.mem_limit for x in limits} == {512 * MiB}  # a Request: limit = request


def test_memory_mode_placement_uses_each_nodes_shared_pool() -> None:
    busy = placed(STATE_FLAT_4, bound(150), 1, "c").view()  # cores 0 and 1 bound
    nodes = [busy, Node("fresh", dict.fromkeys(range(2), 100), memory=2 * GiB)]
    request = Request("0.75", GiB)
    placement = place(nodes, request, 4, "auto")
    assert placement.capacities == {"flat": 2, "fresh": 2}  # 2 shared cores each
    assert placement.deploy == {"flat": 2, "fresh": 2}
    assert placement.plans["flat"] == [cpu_plans(busy, request, 1)[0]] * 2
    assert placement.plans["flat"][0].cores == {}
    assert placement.shared_pools == {"flat": (2, 3), "fresh": (0, 1)}
    assert [x.cpuset_cpus for x in placement.limits("flat")] == ["2,3", "2,3"]
    assert {x.cpu_quota for x in placement.limits("fresh")} == {75_000}


def test_normalized_resources_set_the_docker_limits() -> None:
    resources = normalize(
        Resources(cpu_request="1", memory_request="1Gi", memory_limit="2Gi", cpu_bind=True)
    )
    placement = place([flat("a", 4)], resources, 2, "auto")
    assert {x.mem_limit for x in placement.limits("a")} == {2 * GiB}
    assert placement.resources == resources


@pytest.mark.parametrize(
    ("nodes", "count", "strategy", "kind"),
    [
        pytest.param(SEED_AUTO_NODES, 33, "auto", "insufficient_capacity", id="capacity"),
        pytest.param(SEED_AUTO_NODES, 0, "auto", "invalid_request", id="count-zero"),
        pytest.param(SEED_AUTO_NODES, 1, "sideways", "invalid_request", id="strategy"),
        pytest.param([flat("a", 1), flat("a", 2)], 1, "auto", "invalid_request", id="dup-names"),
        pytest.param(
            [flat("a", 1), Node("b", {0: 1000}, share_base=1000)],
            1,
            "auto",
            "invalid_request",
            id="mixed-share-base",
        ),
        pytest.param(SEED_AUTO_NODES, 14, "each", "insufficient_nodes", id="each-none-qualify"),
    ],
)
def test_place_errors(nodes: Sequence[Node], count: int, strategy: str, kind: str) -> None:
    with pytest.raises(PlacementError) as caught:
        place(nodes, ONE_CPU, count, strategy)
    assert caught.value.kind == kind


def test_nodes_limit_and_load_reach_the_strategy() -> None:
    with pytest.raises(PlacementError) as caught:
        place(SEED_AUTO_NODES, ONE_CPU, 11, "auto", nodes_limit=5, existing=SEED_AUTO_COUNTS)
    assert caught.value.kind == "node_limit"
    # GLOBAL: keys usage + (j + 1) * rate: D 0.05, D 0.10, B 0.11, B 0.12, ...
    load = {"A": (0.9, 0.01), "B": (0.1, 0.01), "C": (0.5, 0.01), "D": (0.0, 0.05)}
    placement = place(SEED_AUTO_NODES, ONE_CPU, 3, "global", load=load)
    assert placement.deploy == {"B": 1, "D": 2}


# --- properties -------------------------------------------------------------------------


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Node], Normalized, dict[str, int]]:
    """2-5 small nodes of one share_base, a cpu-bind or memory-mode request, counts."""
    p = draw(st.sampled_from([100, 10]))
    nodes = []
    for i in range(draw(st.integers(2, 5))):
        node = draw(small_nodes().filter(lambda n: n.share_base == p))
        nodes.append(
            Node(f"n{i}", node.cores, node.numa, node.memory, node.numa_memory, node.share_base)
        )
    if draw(st.booleans()):
        request = bound(draw(st.integers(1, 2 * p)), draw(st.sampled_from([0, 512 * MiB])), p)
    else:
        request = memory_mode(
            draw(st.integers(1, 3 * p)), draw(st.sampled_from([256, 600])) * MiB, p
        )
    existing = {n.name: draw(st.integers(0, 3)) for n in nodes}
    return nodes, request, existing


@settings(max_examples=150)
@given(clusters(), st.integers(1, 30), st.integers(0, 4))
def test_auto_matches_the_per_container_reference(
    cluster: tuple[list[Node], Normalized, dict[str, int]], count: int, limit: int
) -> None:
    nodes, request, existing = cluster
    kind: str | None = None
    try:
        expected = ref.place_auto(nodes, request, count, limit, existing)
    except PlacementError as error:
        kind = error.kind
    if kind is not None:
        with pytest.raises(PlacementError) as caught:
            place(nodes, request, count, "auto", limit, existing)
        assert caught.value.kind == kind
        return
    placement = place(nodes, request, count, "auto", limit, existing)
    assert (placement.capacities, placement.deploy, placement.plans) == expected
    assert sum(placement.deploy.values()) == count  # exactly count containers


@settings(max_examples=100)
@given(clusters(), st.integers(1, 12), st.sampled_from(["each", "fill", "global", "drained"]))
def test_every_strategy_gets_fitting_plans(
    cluster: tuple[list[Node], Normalized, dict[str, int]], count: int, strategy: str
) -> None:
    nodes, request, existing = cluster
    kind: str | None = None
    try:
        placement = place(nodes, request, count, strategy, 0, existing)
    except PlacementError as error:
        kind = error.kind
    if kind is not None:
        assert kind in ("insufficient_capacity", "insufficient_nodes", "already_filled")
        return
    by_name = {n.name: n for n in nodes}
    assert placement.capacities == {n.name: node_capacity(n, request) for n in nodes}
    for name, added in placement.deploy.items():
        assert 1 <= added <= placement.capacities[name]
        assert placement.plans[name] == cpu_plans(by_name[name], request, added)
    if strategy in ("global", "drained"):
        assert sum(placement.deploy.values()) == count


# --- views remember what was worked out about them --------------------------------------


def fresh(node: Node) -> Node:
    """A new view equal to ``node``, with nothing remembered yet."""
    return Node(
        node.name,
        node.cores,
        node.numa,
        node.memory,
        node.numa_memory,
        node.share_base,
        shared_pool=node.shared_pool,
    )


Outcome = Placement | str


def attempt(nodes: Sequence[Node], request: Normalized, count: int, strategy: str) -> Outcome:
    """The placement, or the kind of its error."""
    try:
        return place(nodes, request, count, strategy)
    except PlacementError as error:
        return error.kind


@settings(max_examples=120, deadline=None)
@given(clusters(), st.data())
def test_kept_views_place_as_fresh_views_do(
    cluster: tuple[list[Node], Normalized, dict[str, int]], data: st.DataObject
) -> None:
    # A run of placements over the same views, as the service makes them (their memos
    # filling, hit by repeated requests, emptied past MEMO_REQUESTS), each equal to the
    # same placement on fresh views and, per node, to the reference engine.
    nodes, _, _ = cluster
    p = nodes[0].share_base
    for _ in range(data.draw(st.integers(1, MEMO_REQUESTS + 4))):
        request = bound(
            data.draw(st.integers(1, 2 * p)), data.draw(st.sampled_from([0, 600 * MiB])), p
        )
        count = data.draw(st.integers(1, 6))
        strategy = data.draw(st.sampled_from(["auto", "each", "drained"]))
        kept = attempt(nodes, request, count, strategy)
        assert kept == attempt([fresh(n) for n in nodes], request, count, strategy)
        for node in nodes:
            capacity = ref.node_capacity(node, request)
            assert node_capacity(node, request) == capacity
            assert sum(pool_capacities(node, request)) == capacity
            assert cpu_plans(node, request, capacity) == ref.cpu_plans(node, request, capacity)
            assert len(node.memo.caps) <= MEMO_REQUESTS
        if isinstance(kept, Placement):
            assert kept.capacities == {n.name: ref.node_capacity(n, request) for n in nodes}


def test_a_view_works_its_capacity_out_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # The next decision over the same views is lookups: each view's signature is taken
    # once, and each distinct signature's capacities are worked out once, whatever the
    # number of placements (10,000 heterogeneous nodes: 167 ms a container before).
    counted = {"signature": 0, "fast_caps": 0}

    def counting(name: str, real: Callable[..., object]) -> Callable[..., object]:
        def call(*args: object) -> object:
            counted[name] += 1
            return real(*args)

        return call

    monkeypatch.setattr(engine, "signature", counting("signature", engine.signature))
    # (the package's ``place`` is the function: the module is reached by its full name)
    place_module = importlib.import_module("coordinator.placement.place")
    monkeypatch.setattr(place_module, "fast_caps", counting("fast_caps", engine.fast_caps))
    nodes = [flat(f"n{i}", 2 + i % 3) for i in range(9)]  # three distinct signatures
    request = ONE_CPU
    first = place(nodes, request, 1, "auto")
    for _ in range(3):
        assert place(nodes, request, 1, "auto") == first
    assert counted == {"signature": 9, "fast_caps": 3}
    replaced = [fresh(nodes[0]), *nodes[1:]]  # one node changed: only its view is new
    assert place(replaced, request, 1, "auto") == first
    assert counted == {"signature": 10, "fast_caps": 4}
