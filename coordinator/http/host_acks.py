"""The answer to a removal waits for the hosts concerned (``coordinator.host_acks``).

    acknowledged = await hosts_acknowledged(request, {"node-a"})

A delete, scale-down, replace or drain is committed first; its answer then waits, at most
``removal_ack_seconds``, until each node concerned has acknowledged the desired revision
it holds now, which the decision wrote. The answer says whether they did
(``hosts_acknowledged``): false means it went out on the bound, and a container it names
as gone may still be started by its host for a moment.
"""

from __future__ import annotations

from collections.abc import Iterable

from aiohttp import web

from coordinator.keys import DEPLOYMENTS, HUB


async def hosts_acknowledged(request: web.Request, nodes: Iterable[str]) -> bool:
    """True once every node of ``nodes`` ("" is none) acknowledged its current desired
    revision or holds nothing (not connected); False when the bound passed first."""
    revisions = request.app[DEPLOYMENTS].node_revisions(node for node in nodes if node)
    if not revisions:
        return True
    return await request.app[HUB].acks.wait(revisions)
