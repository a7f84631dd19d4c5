"""Introspection (spec section 6): exactly the spec's attribute names per kind of pool,
their values, the subtree totals, and the root."""

from __future__ import annotations

import pytest

from coordinator.pools import PoolTree
from tests.coordinator.pools.trees import burst, pool, relaxed, tree_config, volumes

COMMON = {
    "integral_guarantee_type",
    "specified_burst_ratio",
    "specified_resource_flow_ratio",
    "total_burst_ratio",
    "total_resource_flow_ratio",
    "effective_burst_ratio",
    "strong_guarantee_share",
    "limit_share",
    "demand_share",
    "usage_share",
    "fair_share",
}
INTEGRAL = {
    "accumulated_resource_ratio_volume",
    "accumulated_resource_volume",
    "integral_pool_capacity",
}
ROOT_KEYS = {
    "integral_guarantee_type",
    "total_burst_ratio",
    "total_resource_flow_ratio",
    "limit_share",
    "demand_share",
    "usage_share",
    "fair_share",
}

CONFIG = tree_config(
    {
        "org": pool(strong=100, resource_flow={"cpu": 300}, burst_guarantee_resources={"cpu": 400}),
        "prod": burst(200, 400, "org", strong=50),
        "research": relaxed(100, "org"),
        "idle": burst(300, 300),
        "plain": pool(limit=250),
    },
    pool_capacity_saturation_period=1000,
)
TOTAL = {"cpu": 1000, "memory": 4000}


@pytest.fixture
def tree() -> PoolTree:
    tree = PoolTree.from_config(CONFIG, volumes(prod=50.0, research=20.0, idle=3.0), now=0.0)
    tree.update(
        TOTAL,
        {"prod": {"cpu": 500}, "research": {"cpu": 100, "memory": 2000}, "plain": {"cpu": 10}},
        now=0.0,
        usages={"prod": {"cpu": 400}},
    )
    return tree


@pytest.mark.parametrize(
    ("name", "keys"),
    [
        pytest.param(
            "prod", COMMON | INTEGRAL | {"estimated_burst_usage_duration_seconds"}, id="burst"
        ),
        pytest.param("research", COMMON | INTEGRAL, id="relaxed"),
        pytest.param("org", COMMON, id="none-parent"),
        pytest.param("plain", COMMON, id="none-leaf"),
        pytest.param("<root>", ROOT_KEYS, id="root"),
    ],
)
def test_attribute_names(tree: PoolTree, name: str, keys: set[str]) -> None:
    seen = tree.introspect(name)
    assert set(seen) == keys
    fair = seen["fair_share"]
    assert isinstance(fair, dict)
    assert set(fair) == {"strong", "integral", "weight_proportional", "total"}


def test_values_of_a_burst_pool(tree: PoolTree) -> None:
    seen = tree.introspect("prod")
    assert seen["integral_guarantee_type"] == "burst"
    assert seen["accumulated_resource_ratio_volume"] == 50.0
    assert seen["accumulated_resource_volume"] == {"cpu": 50_000.0, "memory": 200_000.0}
    assert seen["integral_pool_capacity"] == {"cpu": 0.2 * 1000 * 1000, "memory": 0.2 * 1000 * 4000}
    assert seen["specified_burst_ratio"] == 0.4
    assert seen["specified_resource_flow_ratio"] == 0.2
    assert seen["total_burst_ratio"] == 0.4
    assert seen["estimated_burst_usage_duration_seconds"] == pytest.approx(50.0 / 0.2)
    assert seen["effective_burst_ratio"] == 0.4
    assert seen["strong_guarantee_share"] == 0.05
    assert seen["limit_share"] == 1.0
    assert seen["demand_share"] == 0.5
    assert seen["usage_share"] == 0.4
    # strong first, then min(b, V/T_s, E - SG) = min(0.4, 50/60, 0.45) = 0.4 from volume
    assert seen["fair_share"] == pytest.approx(
        {"strong": 0.05, "integral": 0.4, "weight_proportional": 0.05, "total": 0.5}
    )


def test_parent_and_root_totals(tree: PoolTree) -> None:
    org = tree.introspect("org")
    assert org["specified_burst_ratio"] == org["specified_resource_flow_ratio"] == 0.0
    assert org["total_burst_ratio"] == pytest.approx(0.4)
    assert org["total_resource_flow_ratio"] == pytest.approx(0.3)
    root = tree.introspect("<root>")
    assert root["total_burst_ratio"] == pytest.approx(0.7)
    assert root["total_resource_flow_ratio"] == pytest.approx(0.6)
    assert root["demand_share"] == pytest.approx(0.5 + 0.5 + 0.01)
    assert root["usage_share"] == pytest.approx(0.4)
    shares = tree.shares()
    assert root["fair_share"]["total"] == pytest.approx(  # type: ignore[index]
        shares["org"].total + shares["idle"].total + shares["plain"].total
    )


def test_duration_estimate_is_null_when_burst_does_not_exceed_flow(tree: PoolTree) -> None:
    assert tree.introspect("idle")["estimated_burst_usage_duration_seconds"] is None


def test_usage_share_is_null_without_usages(tree: PoolTree) -> None:
    tree.update(TOTAL, {}, now=1.0)
    assert tree.introspect("prod")["usage_share"] is None


def test_before_any_update() -> None:
    tree = PoolTree.from_config(CONFIG, volumes(prod=50.0))
    seen = tree.introspect("prod")
    assert seen["accumulated_resource_ratio_volume"] == 50.0
    assert seen["accumulated_resource_volume"] == {}  # no total seen yet
    assert seen["fair_share"] == {
        "strong": 0.0,
        "integral": 0.0,
        "weight_proportional": 0.0,
        "total": 0.0,
    }
    assert tree.alerts == []
    assert tree.shares()["prod"].total == 0.0


def test_unknown_pool_is_a_key_error(tree: PoolTree) -> None:
    with pytest.raises(KeyError):
        tree.introspect("nope")
