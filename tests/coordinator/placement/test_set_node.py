"""SetNode (spec section 11): absolute and delta changes, removals, and every rejection
naming the core / NUMA node and both amounts, with the node unchanged."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from coordinator.placement import (
    GiB,
    MiB,
    Node,
    NodeState,
    PlacementError,
    Plan,
    assign,
    cpu_plans,
    set_node,
)
from tests.coordinator.placement.topologies import (
    STATE_FLAT_4,
    STATE_SEED_NUMA,
    bound,
    memory_mode,
    placed,
    record,
    small_nodes,
)

# flat-4 with a bound container on core 0 (1 GiB) and a memory-mode one (1 GiB).
FLAT_MIXED = assign(
    placed(STATE_FLAT_4, memory_mode(100, GiB), 1, "m"),
    "c",
    Plan({0: 100}, None, GiB),
    bound(100, GiB),
).state
# seed-numa with a NUMA-local container on core 0 (NUMA 0, 600 MiB).
SEED_ONE = placed(STATE_SEED_NUMA, bound(100, 600 * MiB), 1, "c")


def _accepted(
    state: NodeState, mode: str, changes: dict[str, Any], expected: dict[str, Any], id: str
) -> object:
    return pytest.param(state, mode, changes, expected, id=id)


# (state, mode, fields, the record's fields afterwards)
ACCEPTED = [
    _accepted(
        FLAT_MIXED,
        "delta",
        {"cores": {4: 100}},
        {"cores": {0: 100, 1: 100, 2: 100, 3: 100, 4: 100}},
        "new-core",
    ),
    _accepted(
        FLAT_MIXED,
        "delta",
        {"cores": {3: -100}},
        {"cores": {0: 100, 1: 100, 2: 100}},
        "remove-core",
    ),
    _accepted(
        FLAT_MIXED,
        "absolute",
        {"cores": {0: 100, 1: 200}},
        {"cores": {0: 100, 1: 200}},
        "absolute-oversell",
    ),
    _accepted(FLAT_MIXED, "absolute", {"memory": "4Gi"}, {"memory": 4 * GiB}, "absolute-memory"),
    _accepted(
        FLAT_MIXED, "delta", {"memory": "-6Gi"}, {"memory": 2 * GiB}, "delta-memory-to-allocated"
    ),
    _accepted(
        SEED_ONE,
        "delta",
        {"cores": {3: -100}},
        {
            "cores": {0: 100, 1: 100, 2: 100},
            "numa": {0: 0, 1: 0, 2: 1},
            "numa_memory": {0: GiB, 1: GiB},
        },
        "core-goes-with-numa-entry",
    ),
    _accepted(
        SEED_ONE,
        "delta",
        {"cores": {2: -100, 3: -100}},
        {"numa": {0: 0, 1: 0}, "numa_memory": {0: GiB}},
        "numa-node-loses-memory",
    ),
    _accepted(
        SEED_ONE,
        "absolute",
        {"cores": {0: 100, 1: 100}},
        {"numa": {0: 0, 1: 0}, "numa_memory": {0: GiB}},
        "absolute-drops-entries",
    ),
    _accepted(
        SEED_ONE,
        "delta",
        {"numa_memory": {1: "512Mi"}},
        {"numa_memory": {0: GiB, 1: GiB + 512 * MiB}},
        "numa-memory-delta",
    ),
    _accepted(
        SEED_ONE,
        "delta",
        {"cores": {4: 100}, "numa": {4: 1}},
        {"numa": {0: 0, 1: 0, 2: 1, 3: 1, 4: 1}},
        "new-core-in-numa-1",
    ),
    _accepted(
        SEED_ONE,
        "delta",
        {"numa": {1: 1}},
        {"numa": {0: 0, 1: 1, 2: 1, 3: 1}},
        "free-core-moves-numa",
    ),
    _accepted(
        SEED_ONE,
        "absolute",
        {"numa_memory": {0: 600 * MiB, 1: 0}},
        {"numa_memory": {0: 600 * MiB, 1: 0}},
        "numa-memory-to-allocated",
    ),
]


@pytest.mark.parametrize(("state", "mode", "changes", "expected"), ACCEPTED)
def test_set_node(
    state: NodeState, mode: str, changes: dict[str, Any], expected: dict[str, Any]
) -> None:
    snapshot = copy.deepcopy(state)
    change = set_node(state, mode, **changes)
    for field, value in expected.items():
        assert getattr(change.state, field) == value, field
    assert change.state.allocations == state.allocations  # nothing running moves
    assert change.state.used.items() >= {c: u for c, u in state.used.items() if u}.items()
    assert change.state.version == state.version + 1
    assert state == snapshot


def test_set_node_updates_memory_mode_cpusets() -> None:
    assert FLAT_MIXED.limits("m-0").cpuset_cpus == "1,2,3"
    change = set_node(FLAT_MIXED, "delta", cores={4: 100, 3: -100})
    assert set(change.updates) == {"m-0"}
    assert change.updates["m-0"].cpuset_cpus == "1,2,4"


def test_set_node_without_change_is_the_same_state() -> None:
    change = set_node(
        FLAT_MIXED, "absolute", cores=dict(FLAT_MIXED.cores), memory=FLAT_MIXED.memory
    )
    assert change.state is FLAT_MIXED
    assert change.updates == {}


def _rejected(
    state: NodeState, mode: str, changes: dict[str, Any], kind: str, words: tuple[str, ...], id: str
) -> object:
    return pytest.param(state, mode, changes, kind, words, id=id)


BELOW = "below_allocation"
INVALID = "invalid_request"
# (state, mode, fields, kind, words the message must contain: the place and both amounts)
REJECTED = [
    _rejected(
        FLAT_MIXED,
        "absolute",
        {"cores": {0: -1, 1: 100}},
        INVALID,
        ("core 0", "-1", "100"),
        "negative-pieces",
    ),
    _rejected(
        FLAT_MIXED,
        "delta",
        {"cores": {1: -150}},
        INVALID,
        ("core 1", "-150", "100"),
        "delta-below-zero",
    ),
    _rejected(
        FLAT_MIXED,
        "delta",
        {"memory": "-9Gi"},
        INVALID,
        ("memory", str(8 * GiB), str(-9 * GiB)),
        "negative-memory",
    ),
    _rejected(
        SEED_ONE, "delta", {"cores": {4: 100}}, INVALID, ("numa", "4"), "map-misses-new-core"
    ),
    _rejected(
        SEED_ONE, "delta", {"numa": {9: 0}}, INVALID, ("numa", "9"), "map-names-unknown-core"
    ),
    _rejected(
        SEED_ONE,
        "delta",
        {"numa_memory": {2: GiB}},
        INVALID,
        ("numa_memory", "2"),
        "numa-memory-other-id",
    ),
    _rejected(
        FLAT_MIXED,
        "delta",
        {"numa_memory": {0: GiB}},
        INVALID,
        ("numa_memory", "without a NUMA map"),
        "numa-memory-without-map",
    ),
    _rejected(
        SEED_ONE,
        "delta",
        {"numa_memory": {1: "-2Gi"}},
        INVALID,
        ("NUMA node 1", str(GiB)),
        "numa-memory-negative",
    ),
    _rejected(
        FLAT_MIXED,
        "absolute",
        {"cores": {0: 50, 1: 100}},
        BELOW,
        ("core 0", "50", "100"),
        "core-below-allocated",
    ),
    _rejected(
        FLAT_MIXED,
        "delta",
        {"cores": {0: -100}},
        BELOW,
        ("core 0", "0", "100"),
        "allocated-core-removed",
    ),
    _rejected(
        FLAT_MIXED,
        "absolute",
        {"memory": GiB},
        BELOW,
        ("memory", str(GiB), str(2 * GiB)),
        "memory-below-allocated",
    ),
    _rejected(
        SEED_ONE,
        "delta",
        {"numa_memory": {0: "-512Mi"}},
        BELOW,
        ("NUMA node 0", str(512 * MiB), str(600 * MiB)),
        "numa-memory-below",
    ),
    _rejected(
        SEED_ONE,
        "delta",
        {"numa": {0: 1}},
        BELOW,
        ("core 0", "NUMA", "c-0"),
        "numa-local-core-moved",
    ),
    _rejected(
        SEED_ONE, "absolute", {"numa": {}}, BELOW, ("core 0", "c-0"), "numa-map-dropped-under-local"
    ),
    _rejected(FLAT_MIXED, "sideways", {"memory": GiB}, INVALID, ("mode",), "bad-mode"),
]


@pytest.mark.parametrize(("state", "mode", "changes", "kind", "words"), REJECTED)
def test_set_node_rejects_as_a_whole(
    state: NodeState, mode: str, changes: dict[str, Any], kind: str, words: tuple[str, ...]
) -> None:
    snapshot = copy.deepcopy(state)
    with pytest.raises(PlacementError) as caught:
        set_node(state, mode, **changes)
    assert caught.value.kind == kind
    for word in words:
        assert word in caught.value.message, word
    assert state == snapshot
    assert state.version == snapshot.version


@settings(max_examples=150)
@given(small_nodes(), st.data())
def test_set_node_changes_capacity_only(node: Node, data: st.DataObject) -> None:
    # Any SetNode either succeeds with nothing running moved, or raises and changes nothing.
    state = record(node)
    p = node.share_base
    view = state.view()
    for i in range(2):
        resources = bound(data.draw(st.integers(1, 2 * p)), 0, p)
        try:
            [plan] = cpu_plans(view, resources, 1)
        except PlacementError:
            break
        state = assign(state, f"c{i}", plan, resources).state
        view = state.view()
    mode = data.draw(st.sampled_from(["absolute", "delta"]))
    ids = st.integers(0, 7)
    cores = data.draw(st.none() | st.dictionaries(ids, st.integers(-2 * p, 2 * p), max_size=3))
    numa = data.draw(st.none() | st.dictionaries(ids, st.integers(0, 2), max_size=3))
    memory = data.draw(st.none() | st.sampled_from([0, GiB, -GiB, 4 * GiB]))
    snapshot = copy.deepcopy(state)
    kind: str | None = None
    try:
        change = set_node(state, mode, cores=cores, numa=numa, memory=memory)
    except PlacementError as error:
        kind = error.kind
    else:
        assert change.state.allocations == state.allocations
        for c, used in state.used.items():
            assert change.state.cores.get(c, 0) >= used
        assert change.state.memory >= state.memory_used
    event(f"set_node: {kind or 'accepted'}")
    assert kind in (None, "invalid_request", "below_allocation")
    assert state == snapshot
