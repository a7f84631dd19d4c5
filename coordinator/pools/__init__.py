"""Pools: hierarchical fair share with strong, burst and relaxed guarantees (docs: the
pool spec, after the YTsaurus scheduler). Pure engine: no I/O, no clock (time passed in).

- ``config``: ``parse_config`` -> ``ParsedConfig`` (``TreeSettings``, ``PoolSpec``), the
  validation rules of section 7;
- ``tree``: ``PoolTree`` -- ``from_config``, ``update`` -> {pool: ``Share``},
  ``introspect``, ``state``, ``alerts`` (sections 3 to 6);
- ``filling``: the water-filling levels the update uses;
- ``simulate``: ``simulate`` -- a timeline of demands run through a copy (section 8);
- ``errors``: ``PoolConfigError`` / ``PoolInputError`` with ``code``, ``pool``,
  ``message``, ``details``;
- ``reference``: a slow, exact, literal update for the tests.

Invariants: shares are ratios of the cluster in its dominant resource; a pool's total is
at most its limit and its demand, children's totals add up to at most their parent's;
volumes (share * seconds) stay in [0, max(previous, flow * saturation period)]; the state
a tree returns is all the next update needs.

    tree = PoolTree.from_config(config, state=stored_state)
    shares = tree.update({"cpu": 2000, "memory": 2**40}, {"prod": {"cpu": 1500}}, now=t)
    shares["prod"].total * 2000                  -> cores granted to prod
    tree.introspect("prod")["estimated_burst_usage_duration_seconds"]
    store(tree.state())
    simulate(config, {"cpu": 2000}, [{"dt": 43200, "demands": {"prod": {"cpu": 2000}}}],
             substep=60)                         -> [{"time": 60.0, "pools": {...}}, ...]
"""

from coordinator.pools.config import (
    BURST,
    GUARANTEE_TYPES,
    NONE,
    RELAXED,
    ROOT,
    ParsedConfig,
    PoolSpec,
    TreeSettings,
    parse_config,
)
from coordinator.pools.errors import PoolConfigError, PoolError, PoolInputError
from coordinator.pools.simulate import simulate
from coordinator.pools.tree import (
    EPS,
    FLOW_OVERCOMMIT,
    GUARANTEE_OVERCOMMIT,
    PoolTree,
    Share,
)

__all__ = [
    "BURST",
    "EPS",
    "FLOW_OVERCOMMIT",
    "GUARANTEE_OVERCOMMIT",
    "GUARANTEE_TYPES",
    "NONE",
    "RELAXED",
    "ROOT",
    "ParsedConfig",
    "PoolConfigError",
    "PoolError",
    "PoolInputError",
    "PoolSpec",
    "PoolTree",
    "Share",
    "TreeSettings",
    "parse_config",
    "simulate",
]
