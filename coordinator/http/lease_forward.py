"""The main port's lease API when a process of its own serves leases (``lease_worker``):
each request is forwarded there as it came (method, path, query, body, token) and its
answer sent back as it is, so both ports give the same answers. The main process also
reads what it shows of leases from there: the ``allot_lease_*`` families of its
``/metrics`` (``LeaseFamilies``, refreshed every ``REFRESH_SECONDS``) and, for the
dashboard, the resources and their leases at each page view.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import aiohttp
import msgspec
from aiohttp import web

from coordinator.http.errors import error_response
from coordinator.lease_worker import LeaseDoor
from shared.api.leases import ClientLease, ResourceLeases, ResourceStatus
from shared.logs import get_logger

log = get_logger("allot.coordinator.leases")

REFRESH_SECONDS = 2.0
FORWARDED_HEADERS = ("Authorization", "Content-Type")
FAMILY_PREFIX = "allot_lease_"


class Resources(msgspec.Struct):
    resources: list[ResourceStatus]


class LeaseLink:
    """The main process's connection to the lease process."""

    def __init__(self, door: LeaseDoor, session: aiohttp.ClientSession) -> None:
        self.door = door
        self._session = session
        self.families = LeaseFamilies()

    async def forward(self, request: web.Request) -> web.Response:
        headers = {h: request.headers[h] for h in FORWARDED_HEADERS if h in request.headers}
        try:
            async with self._session.request(
                request.method,
                self.door.url + request.rel_url.path_qs,
                data=await request.read(),
                headers=headers,
            ) as answer:
                body = await answer.read()
                return web.Response(
                    status=answer.status, body=body, content_type=answer.content_type
                )
        except (aiohttp.ClientError, TimeoutError) as error:
            log.error("lease process unreachable", path=request.path, reason=error)
            return error_response(
                503, "lease_process_unavailable", "the lease process did not answer; try again"
            )

    async def _get(self, path: str) -> bytes:
        headers = {"Authorization": f"Bearer {self.door.token}"}
        async with self._session.get(self.door.url + path, headers=headers) as answer:
            answer.raise_for_status()
            return await answer.read()

    async def statuses(self) -> list[ResourceStatus]:
        return msgspec.json.decode(await self._get("/v1/resources"), type=Resources).resources

    async def leases(self, resource_id: str) -> list[ClientLease]:
        path = f"/v1/resources/{resource_id}/leases"
        return msgspec.json.decode(await self._get(path), type=ResourceLeases).leases

    async def follow_metrics(self) -> None:
        """Keep ``families`` current, for as long as the main process serves."""
        while True:
            try:
                self.families.text = _lease_lines(await self._get("/metrics"))
            except (aiohttp.ClientError, TimeoutError) as error:
                log.info("lease figures not read from the lease process", reason=error)
            await asyncio.sleep(REFRESH_SECONDS)


class LeaseFamilies:
    """The lease process's ``allot_lease_*`` families, appended to each scrape."""

    def __init__(self) -> None:
        self.text = ""

    def exposition(self) -> Iterator[str]:
        yield self.text


def _lease_lines(text: bytes) -> str:
    """The lines of an exposition that belong to ``allot_lease_*`` families."""
    kept = []
    for line in text.decode().splitlines():
        name = line.split(" ", 3)[2] if line.startswith("# ") else line
        if name.startswith(FAMILY_PREFIX):
            kept.append(line + "\n")
    return "".join(kept)


LEASE_LINK = web.AppKey("lease_link", LeaseLink)


async def forward(request: web.Request) -> web.Response:
    """The handler of every lease route on the main port."""
    return await request.app[LEASE_LINK].forward(request)
