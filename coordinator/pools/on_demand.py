"""Pools created on demand (pools spec section 9): every deployment belongs to a leaf pool,
and one the configuration does not hold joins the tree while it has containers.

The spec's default is one ``default`` pool, top level, weight 1, created on demand. A
deployment in allot names its namespace's own pool unless it says otherwise, so allot
creates on demand the pool a deployment names (its namespace's), each on its own terms:
top level, weight 1, no guarantee, no limit, no integral guarantee. Namespaces without a
configured pool thereby compete with each other and with the configured top-level pools
by weight, as the ``default`` pool would, one such namespace weighing as much as one
such ``default`` pool. Every container then has a fair share to follow on the hosts.

    tree_pools({"pa": {}}, ["pa", "team-c"])  -> {"pa": {}, "team-c": {}}
    on_demand({"pa": {}}, ["pa", "team-c"])   -> ["team-c"]

Cost O(pools + names).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from coordinator.pools.config import ROOT


def on_demand(configured: Mapping[str, Mapping[str, Any]], named: Iterable[str]) -> list[str]:
    """The pools of ``named`` (the pools that hold containers) that ``configured`` does
    not hold, sorted by name (never the root)."""
    return sorted({name for name in named if name not in configured and name != ROOT})


def tree_pools(
    configured: Mapping[str, Mapping[str, Any]], named: Iterable[str]
) -> dict[str, dict[str, Any]]:
    """The pools the fair-share update runs on: ``configured`` as written, then each
    pool of ``on_demand(configured, named)`` as ``{}``, a top-level pool with every
    default (weight 1)."""
    pools = {name: dict(spec) for name, spec in configured.items()}
    pools.update((name, {}) for name in on_demand(configured, named))
    return pools
