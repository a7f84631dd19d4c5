"""The available view (spec section 2): what a Node accepts, how it is normalised, and
every rejection naming the node, the field and the value."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator.placement import GiB, Node, PlacementError


def test_node_is_kept_in_id_order_with_its_pools() -> None:
    node = Node("n", {3: 100, 1: 50, 2: 0, 0: 100}, numa={3: 1, 2: 1, 1: 0, 0: 0}, memory=GiB)
    assert list(node.cores) == [0, 1, 2, 3]
    assert node.numa is not None
    assert list(node.numa) == [0, 1, 2, 3]
    assert node.pools == ((0, (0, 1)), (1, (2, 3)))
    assert node.shared_cores == (0, 1, 2, 3)
    assert node == Node(
        "n", {0: 100, 1: 50, 2: 0, 3: 100}, numa={0: 0, 1: 0, 2: 1, 3: 1}, memory=GiB
    )


def test_empty_maps_mean_none() -> None:
    node = Node("n", {0: 100}, numa={}, numa_memory={})
    assert node.numa is None
    assert node.numa_memory is None
    assert node.pools == ()


def test_shared_pool_is_given_or_every_core() -> None:
    assert Node("n", {0: 100, 1: 100, 2: 30}, shared_pool=[2, 0]).shared_cores == (0, 2)
    assert Node("n", {0: 100, 1: 100}).shared_cores == (0, 1)


GOOD: dict[str, Any] = {
    "name": "n",
    "cores": {0: 100, 1: 100},
    "numa": {0: 0, 1: 1},
    "memory": GiB,
    "numa_memory": {0: GiB // 2, 1: GiB // 2},
}

# (changes to GOOD, the field the error names)
BAD = [
    pytest.param({"cores": {-1: 100, 0: 100, 1: 100}}, "cores: core id", id="negative-core-id"),
    pytest.param({"cores": {0: -5, 1: 100}}, "cores[0]", id="negative-pieces"),
    pytest.param({"cores": {0: 1.5, 1: 100}}, "cores[0]", id="float-pieces"),
    pytest.param({"cores": {0: True, 1: 100}}, "cores[0]", id="bool-pieces"),
    pytest.param({"cores": {"0": 100, 1: 100}}, "cores: core id", id="string-core-id"),
    pytest.param({"numa": {0: 0}}, "numa", id="map-misses-a-core"),
    pytest.param({"numa": {0: 0, 1: 1, 2: 1}}, "numa", id="map-names-unknown-core"),
    pytest.param({"numa": {0: -1, 1: 1}}, "numa: NUMA id", id="negative-numa-id"),
    pytest.param({"numa": None}, "numa_memory", id="numa-memory-without-map"),
    pytest.param({"numa_memory": {0: GiB}}, "numa_memory", id="numa-memory-misses-an-id"),
    pytest.param({"numa_memory": {0: 1, 1: 1, 2: 1}}, "numa_memory", id="numa-memory-other-id"),
    pytest.param({"numa_memory": {0: -1, 1: 1}}, "numa_memory[0]", id="negative-numa-memory"),
    pytest.param({"memory": -1}, "memory", id="negative-memory"),
    pytest.param({"memory": 1.0}, "memory", id="float-memory"),
    pytest.param({"share_base": 0}, "share_base", id="share-base-zero"),
]


@pytest.mark.parametrize(("changes", "field"), BAD)
def test_node_rejects(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(PlacementError) as caught:
        Node(**{**GOOD, **changes})
    assert caught.value.kind == "invalid_request"
    assert caught.value.details["field"] == field
    if field != "share_base":
        assert caught.value.details["node"] == "n"


def test_shared_pool_must_name_cores() -> None:
    with pytest.raises(PlacementError) as caught:
        Node("n", {0: 100}, shared_pool=[1])
    assert caught.value.details["field"] == "shared_pool"
