"""Pools written by an administrator, and the pool tree's state stored, as decisions:
each checked against the configuration the decisions before it left, committed with
its batch, and applied to the tree only once committed (``services.pool_service``).

    pool_writes.put_pool(draft, "research", {"weight": 2.0})
    pool_writes.delete_pool(draft, "research")       # False: no such pool (any more)
    pool_writes.save_pool_state(draft)
"""

from __future__ import annotations

from typing import Any

from coordinator.deployments.draft import Draft


def put_pool(draft: Draft, name: str, config: dict[str, Any]) -> None:
    """Create or replace pool ``name``; ``PoolConfigError`` (nothing changed) when the
    configuration it leaves breaks a rule. Its volume carries over (pools spec 5.2)."""
    draft.context.pools.check({**draft.configured_pools(), name: config})
    draft.change.pools[name] = config


def delete_pool(draft: Draft, name: str) -> bool:
    """Remove pool ``name`` (its volume goes with it); ``PoolConfigError`` when the
    configuration it leaves breaks a rule (a pool still names it as parent). False when
    there is no such pool, a decision before having deleted it, say."""
    pools = draft.configured_pools()
    if pools.pop(name, None) is None:
        return False
    draft.context.pools.check(pools)
    draft.change.pools[name] = None
    return True


def save_pool_state(draft: Draft) -> None:
    """Store the tree's state as it is when the batch commits (its checkpoint)."""
    draft.change.pool_state = True
