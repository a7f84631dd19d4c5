"""The integral pools' volumes sampled into the dashboard's history at every fair-share
update period, for as long as the coordinator serves."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from aiohttp import web

from coordinator.keys import POOLS
from coordinator.services.pool_service import PoolService
from coordinator.ui.capacity_pages import HISTORY
from coordinator.ui.history import Volume, VolumeHistory
from shared.logs import get_logger

log = get_logger("allot.coordinator.ui")


def volumes(service: PoolService) -> dict[str, Volume]:
    """Each integral pool's volume now and its capacity, in share * seconds."""
    period = float(service.config()["settings"]["pool_capacity_saturation_period"])
    found = {}
    for name in service.names():
        view = service.view(name)
        facts = view.introspection if view is not None else {}
        if "accumulated_resource_ratio_volume" in facts:
            found[name] = Volume(
                volume=float(facts["accumulated_resource_ratio_volume"]),
                capacity=float(facts["specified_resource_flow_ratio"]) * period,
            )
    return found


async def sample_volumes(app: web.Application) -> AsyncIterator[None]:
    """A cleanup context of the coordinator's application, after its pool service's: the
    sampler runs while the pools do."""
    history = app[HISTORY] = VolumeHistory()
    service = app[POOLS]
    task = asyncio.create_task(_sample(service, history))
    yield
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _sample(service: PoolService, history: VolumeHistory) -> None:
    while True:
        try:
            history.record(time.time(), volumes(service))
        except Exception:  # a bug here must not end the plots for good
            log.exception("sampling the pools' volumes failed; trying again")
        await asyncio.sleep(service.update_period)
