"""What a pool write costs over real HTTP, against a coordinator holding ``--pools`` pools.

    .venv/bin/python bench/pool_writes.py [--pools 300] [--writes 200] [--runs 3]

The application is ``make_app`` on a SQLite store in a temporary directory, served on a
free loopback port, with one ready node registered as its agent's hello would be (no
agent attached). Prints, best of ``--runs`` (wall clock; each run on a fresh
coordinator):

- ``--writes`` new pools written one after another: ms per PUT (median and slowest);
- ``--writes`` pools rewritten at once: the whole burst, and PUTs per second;
- ``--writes`` rewrites and as many one-container deployments into those pools, at once.

It speaks only HTTP, so the same script measures another checkout of the coordinator
(``PYTHONPATH=/path/to/checkout``): compare in one run of the machine, as ratios.
Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

# Run as a script, Python puts bench/ first on the path; the repository root goes there
# (unless PYTHONPATH names a checkout to measure).
_BENCH = Path(__file__).resolve().parent
sys.path[:] = [str(_BENCH.parent)] + [p for p in sys.path if Path(p or ".").resolve() != _BENCH]
if os.environ.get("PYTHONPATH"):
    sys.path[:0] = os.environ["PYTHONPATH"].split(os.pathsep)

from bench.deployments import host  # noqa: E402
from coordinator.app import make_app  # noqa: E402
from coordinator.config import CoordinatorConfig  # noqa: E402
from coordinator.keys import REGISTRY  # noqa: E402

TOKEN = "bench-pool-writes-admin-token-0123456789"
NAMESPACE = "bench"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


def pool(weight: float) -> dict[str, Any]:
    return {"namespaces": [NAMESPACE], "weight": weight}


def deployment(name: str, pool_name: str) -> dict[str, Any]:
    return {
        "name": name,
        "image": "busybox",
        "pool": pool_name,
        "resources": {"cpu": "0.01", "memory": "8Mi"},
    }


class Run:
    """One coordinator, its HTTP client, and the figures of one run."""

    def __init__(self, url: str, http: aiohttp.ClientSession) -> None:
        self.url, self.http = url, http

    async def call(self, method: str, path: str, body: object) -> int:
        async with self.http.request(method, self.url + path, json=body, headers=HEADERS) as r:
            await r.read()
            return r.status

    async def timed(self, calls: list[Awaitable[int]]) -> tuple[float, list[int]]:
        started = time.perf_counter()
        statuses = await asyncio.gather(*calls)
        return time.perf_counter() - started, statuses


async def one_run(pools: int, writes: int, directory: Path) -> dict[str, float]:
    config = CoordinatorConfig(
        host="127.0.0.1",
        port=0,
        data_dir=str(directory),
        join_token="bench-pool-writes-join-token-0123456789",
        api_tokens=[TOKEN],
        lease_seconds=3600.0,
    )
    app = make_app(config)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = "http://{}:{}".format(*runner.addresses[0][:2])
    figures: dict[str, float] = {}
    try:
        async with aiohttp.ClientSession() as http:
            run = Run(url, http)
            await app[REGISTRY].hello(
                "node-0", inventory=host("node-0"), address="127.0.0.1", agent_version="b"
            )
            for index in range(pools):
                assert await run.call("PUT", f"/v1/pools/held-{index}", pool(1.0)) == 200
            each = []
            for index in range(writes):
                started = time.perf_counter()
                assert await run.call("PUT", f"/v1/pools/new-{index}", pool(1.0)) == 200
                each.append(time.perf_counter() - started)
            figures["one after another: median ms"] = 1000 * statistics.median(each)
            figures["one after another: slowest ms"] = 1000 * max(each)
            rewrites = [run.call("PUT", f"/v1/pools/new-{i}", pool(2.0)) for i in range(writes)]
            took, statuses = await run.timed(rewrites)
            assert set(statuses) == {200}, statuses
            figures["at once: s"] = took
            figures["at once: PUTs/s"] = writes / took
            mixed = [run.call("PUT", f"/v1/pools/new-{i}", pool(3.0)) for i in range(writes)]
            path = f"/v1/namespaces/{NAMESPACE}/deployments"
            mixed += [
                run.call("POST", path, deployment(f"d{i}", f"new-{i}")) for i in range(writes)
            ]
            took, statuses = await run.timed(mixed)
            assert set(statuses) == {200, 201}, statuses
            figures["with as many deploys at once: s"] = took
    finally:
        await runner.cleanup()
    return figures


async def main(pools: int, writes: int, runs: int) -> dict[str, float]:
    best: dict[str, float] = {}
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="allot-bench-pools-") as directory:
            figures = await one_run(pools, writes, Path(directory))
        for name, value in figures.items():
            better = max if name.endswith("/s") else min
            best[name] = better(best.get(name, value), value)
    return best


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pools", type=int, default=300)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    arguments = parser.parse_args()
    load_before = Path("/proc/loadavg").read_text().strip()
    best = asyncio.run(main(arguments.pools, arguments.writes, arguments.runs))
    print(f"coordinator from {Path(make_app.__code__.co_filename).parents[1]}")
    print(f"{arguments.pools} pools held, {arguments.writes} writes; best of {arguments.runs}")
    print(f"load before: {load_before}; after: {Path('/proc/loadavg').read_text().strip()}")
    for name, value in best.items():
        print(f"  {name:36} {value:10.1f}")
