"""Watch for a coordinator that leads, so an agent that lost its session goes back at once.

    url = await leader_answering(http, servers, within=4.0)   # a leader's URL, or None

Each round asks every coordinator's ``/readyz`` at once (no token; one small GET each,
waited for at most a second): a leader answers 200, a standby 503 naming the leader it
knows, which is asked too from the next round on (it need not be in the agent's list);
a leader whose store cannot write answers 503 and is not gone back to. Rounds are
``READY_POLL_SECONDS`` apart, so a leader that answers again is found within that
time plus one answer, whatever back-off the agent was waiting out.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable

import aiohttp

READY_POLL_SECONDS = 0.25
# A coordinator that cannot answer /readyz this fast is not one to register with now.
READY_TIMEOUT = aiohttp.ClientTimeout(total=1.0)


async def leader_answering(
    http: aiohttp.ClientSession, servers: Iterable[str], *, within: float
) -> str | None:
    """The URL of a coordinator that answered ``/readyz`` as the leader within ``within``
    seconds, or None when none did (the caller's back-off is then over)."""
    asked = dict.fromkeys(servers)
    deadline = time.monotonic() + within
    while True:
        answers = await asyncio.gather(*(_readiness(http, url) for url in asked))
        for url, (ready, leader) in zip(list(asked), answers, strict=True):
            if ready:
                return url
            if leader:
                asked.setdefault(leader)
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        await asyncio.sleep(min(READY_POLL_SECONDS, left))


async def _readiness(http: aiohttp.ClientSession, url: str) -> tuple[bool, str]:
    """Whether ``url`` leads, and the leader a standby names ("" if none or no answer)."""
    with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError, ValueError):
        async with http.get(url + "/readyz", timeout=READY_TIMEOUT) as answer:
            if answer.status == 200:
                return True, ""
            body = await answer.json(content_type=None)
            leader = body.get("leader", "") if isinstance(body, dict) else ""
            return False, leader if isinstance(leader, str) else ""
    return False, ""
