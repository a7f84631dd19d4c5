"""A lease load for ``bench/fleet.py``: ``POST /v1/capacity`` at a fixed rate, from a
process of its own so that the agents' work does not delay it.

Open loop: request number k is due ``k / rate`` seconds after the start, whatever the
answers before it took, so a slow coordinator meets the same demand and its latency is
not hidden by a client that waits. ``max_in_flight`` bounds the requests outstanding; a
request due while that many are is not sent and counts as *missed*. The clients are
``clients`` distinct ids, taken in turn, each asking for a few units of one resource.

Every request is a sample (when it was due, on ``time.monotonic``, how long from then its
answer took, so any lag of this process counts too, and its HTTP status: 0 for no
answer, -1 for missed), sent back to the benchmark when ``stop`` is set, for it to cut
into the windows it wants.
"""

from __future__ import annotations

import asyncio
import signal
import time
from array import array
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event as EventType

import aiohttp
import msgspec

MISSED = -1
NO_ANSWER = 0
TICK_SECONDS = 0.002


@dataclass(frozen=True)
class LeaseLoad:
    url: str  # the coordinator's base URL
    token: str
    resource: str
    rate: float  # requests per second
    clients: int
    max_in_flight: int


@dataclass
class Samples:
    due: array[float]  # time.monotonic() when each request was due
    took: array[float]  # seconds from then until its answer was read
    status: array[int]  # HTTP status, NO_ANSWER or MISSED

    @classmethod
    def empty(cls) -> Samples:
        return cls(array("d"), array("d"), array("i"))

    def add(self, due: float, took: float, status: int) -> None:
        self.due.append(due)
        self.took.append(took)
        self.status.append(status)


def worker(load: LeaseLoad, ready: EventType, stop: EventType, results: Connection) -> None:
    """A process's entry: the load from when ``ready`` is set until ``stop`` is; then
    the samples go to ``results``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the benchmark's process cleans up
    results.send(asyncio.run(_run(load, ready, stop)))


async def _run(load: LeaseLoad, ready: EventType, stop: EventType) -> Samples:
    bodies = [
        msgspec.json.encode(
            {
                "client_id": f"fleet-lease-{i}",
                "resources": [{"resource_id": load.resource, "wants": 1.0 + i % 50}],
            }
        )
        for i in range(load.clients)
    ]
    headers = {"Authorization": f"Bearer {load.token}", "Content-Type": "application/json"}
    url = load.url + "/v1/capacity"
    samples = Samples.empty()
    in_flight: set[asyncio.Task[None]] = set()

    async def one(http: aiohttp.ClientSession, body: bytes, due: float) -> None:
        try:
            async with http.post(url, data=body, headers=headers) as response:
                await response.read()
                status = response.status
        except (aiohttp.ClientError, OSError, TimeoutError):
            status = NO_ANSWER
        samples.add(due, time.monotonic() - due, status)

    connector = aiohttp.TCPConnector(limit=load.max_in_flight)
    timeout = aiohttp.ClientTimeout(total=60.0)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
        ready.set()
        begin, issued = time.monotonic(), 0
        while not stop.is_set():
            until = int((time.monotonic() - begin) * load.rate)
            while issued < until:
                due = begin + issued / load.rate
                if len(in_flight) >= load.max_in_flight:
                    samples.add(due, 0.0, MISSED)
                else:
                    body = bodies[issued % load.clients]
                    task = asyncio.create_task(one(http, body, due))
                    in_flight.add(task)
                    task.add_done_callback(in_flight.discard)
                issued += 1
            await asyncio.sleep(TICK_SECONDS)
        if in_flight:
            await asyncio.wait(in_flight, timeout=60.0)
    return samples
