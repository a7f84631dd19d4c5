"""Pools created on demand (``coordinator.pools.on_demand``): what the fair-share update
runs on when containers name pools the configuration lacks."""

from __future__ import annotations

from typing import Any

from coordinator.pools import ROOT, PoolTree
from coordinator.pools.on_demand import on_demand, tree_pools

CONFIGURED: dict[str, dict[str, Any]] = {"prod": {"weight": 2.0}, "web": {"parent": "prod"}}


def test_only_the_pools_the_configuration_lacks_are_created_sorted_and_never_the_root() -> None:
    named = ["web", "team-c", ROOT, "team-b", "team-c"]
    assert on_demand(CONFIGURED, named) == ["team-b", "team-c"]
    assert on_demand(CONFIGURED, []) == []


def test_the_tree_keeps_the_configuration_as_written_and_adds_top_level_defaults() -> None:
    pools = tree_pools(CONFIGURED, ["web", "team-c"])
    assert pools == {"prod": {"weight": 2.0}, "web": {"parent": "prod"}, "team-c": {}}
    pools["prod"]["weight"] = 5.0
    assert CONFIGURED["prod"] == {"weight": 2.0}  # a copy: the configuration is untouched


def test_a_pool_on_demand_competes_by_weight_1_with_the_top_level_pools() -> None:
    """prod (weight 2) and team-c (on demand, weight 1) both ask for the whole cluster:
    free capacity goes 2 : 1."""
    tree = PoolTree.from_config({"pools": tree_pools(CONFIGURED, ["team-c"])})
    shares = tree.update({"cpu": 3.0}, {"web": {"cpu": 3.0}, "team-c": {"cpu": 3.0}}, now=0.0)
    assert round(shares["web"].total * 3, 9) == 2.0
    assert round(shares["team-c"].total * 3, 9) == 1.0
