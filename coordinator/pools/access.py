"""Which pools a namespace's deployments may name.

A namespace may use the pool of its own name (configured or not: an unconfigured pool
limits nothing) and any configured pool whose path to the root passes through a pool of
its name, or through a pool that lists it in ``namespaces`` (an admin opened it):

    pools = {"team-a": {}, "batch": {"parent": "team-a"}, "shared": {"namespaces": ["team-b"]}}
    pool_access(pools, "team-a", "batch")     -> None          (its own subtree)
    pool_access(pools, "team-b", "shared")    -> None          (opened to it)
    pool_access(pools, "team-b", "batch")     -> PoolAccess("pool_forbidden", ...)
    pool_access(pools, "team-a", "nowhere")   -> PoolAccess("unknown_pool", ...)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class PoolAccess:
    """Why a namespace may not use a pool: ``code`` is ``unknown_pool`` (no such pool,
    and not the namespace's own) or ``pool_forbidden``; ``message`` says which pools it
    may use."""

    code: str
    message: str


def pool_access(
    pools: Mapping[str, Mapping[str, Any]], namespace: str, pool: str
) -> PoolAccess | None:
    """None when ``namespace`` may place containers in ``pool``, else why not.

    ``pools``: the configured pools as written (name -> fields, a valid tree). Cost
    O(depth of ``pool``)."""
    if pool == namespace:
        return None
    if pool not in pools:
        return PoolAccess(
            "unknown_pool",
            f"no pool {pool!r}: a deployment of {namespace!r} names its own pool"
            f" ({namespace!r}), a configured pool below it, or one opened to it",
        )
    name: str | None = pool
    while name is not None and name in pools:
        fields = pools[name]
        if name == namespace or namespace in (fields.get("namespaces") or ()):
            return None
        name = fields.get("parent")
    return PoolAccess(
        "pool_forbidden",
        f"namespace {namespace!r} may not use pool {pool!r}: it may use its own pool"
        f" ({namespace!r}) and the pools below it, and pools whose 'namespaces' (or an"
        " ancestor's) name it",
    )
