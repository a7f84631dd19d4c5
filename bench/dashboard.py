"""What the dashboard's pages cost on a large cluster: each page over real HTTP from a
coordinator application in this process, with a token, best of ``--runs``.

    .venv/bin/python bench/dashboard.py [--nodes 1000] [--containers 20000] [--runs 3]

The application is ``make_app`` on a SQLite store in a temporary directory, served on a
free loopback port. ``--nodes`` ready nodes of 24 CPUs on two NUMA nodes (as
``bench/deployments.py`` has them) are registered as their agents' hellos would be; no
agent is attached. ``--containers`` are deployed in the namespace ``bench`` as
deployments of 100 (1 CPU bound + 64 MiB each), a quota and 10 integral pools beside
them. Prints each page's time and size: the overview (every deployment's counts), one
node's page (its core map), one deployment's, the quotas, the pools and the leases;
and the overview for a namespace token of another namespace, which sees none of them.
Then the quota's usage alone, in process, best of ``--runs``: read from the books'
request tally (what the quotas page and ``GET /v1/quotas`` do) and recounted over every
container of its namespace (what they did before), with the ratio.
Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp
from aiohttp import web

# Run as a script, Python puts bench/ first on the path; the repository root goes there.
_BENCH = Path(__file__).resolve().parent
sys.path[:] = [str(_BENCH.parent)] + [p for p in sys.path if Path(p or ".").resolve() != _BENCH]

from bench.deployments import host  # noqa: E402
from coordinator.app import make_app  # noqa: E402
from coordinator.config import CoordinatorConfig, NamespaceToken  # noqa: E402
from coordinator.deployments.translate import quota_container  # noqa: E402
from coordinator.keys import DEPLOYMENTS, QUOTAS  # noqa: E402
from coordinator.quotas import Quota, used  # noqa: E402
from shared.api.deployments import DeploymentSpec, ResourcesSpec  # noqa: E402

TOKEN = "bench-dashboard-admin-token-0123456789"
OTHER_TOKEN = "bench-dashboard-other-token-0123456789"
PER_DEPLOYMENT = 100


async def run(nodes: int, containers: int, runs: int, directory: Path) -> None:
    config = CoordinatorConfig(
        host="127.0.0.1",
        port=0,
        data_dir=str(directory),
        join_token="bench-dashboard-join-token-0123456789",
        api_tokens=[TOKEN],
        namespace_tokens=[NamespaceToken(token=OTHER_TOKEN, namespaces=["elsewhere"])],
        lease_seconds=3600.0,
    )
    app = make_app(config)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = "http://{}:{}".format(*runner.addresses[0][:2])
    started = time.perf_counter()
    names = [f"node-{i:04d}" for i in range(nodes)]
    for name in names:
        await app[DEPLOYMENTS].hello(
            name, inventory=host(name), address="127.0.0.1", agent_version="b"
        )
    service = app[DEPLOYMENTS]
    await service.put_quota(Quota("bench", ["bench"], {"cpu": "100"}, {"cpu": str(containers)}))
    for index in range(10):
        flow = {"guarantee_type": "relaxed", "resource_flow": {"cpu": 10}}
        await service.put_pool(f"pool-{index}", {"integral_guarantees": flow})
    resources = ResourcesSpec(cpu="1", memory="64Mi")
    for index in range(containers // PER_DEPLOYMENT):
        spec = DeploymentSpec(
            name=f"web-{index:04d}",
            image="busybox",
            count=PER_DEPLOYMENT,
            resources=resources,
            cpu_bind=True,
            restart_policy="always",
        )
        await service.deploy("bench", spec)
    held = len(service.containers())
    print(
        f"{nodes} nodes of 24 CPUs, {held} containers in {containers // PER_DEPLOYMENT}"
        f" deployments, {len(app[QUOTAS].all())} quota, 10 integral pools"
        f" (set up in {time.perf_counter() - started:.0f} s; load average"
        f" {os.getloadavg()[0]:.2f})"
    )
    pages = [
        ("/ui/", TOKEN, "overview"),
        (f"/ui/nodes/{names[0]}", TOKEN, "a node (core map)"),
        ("/ui/deployments/bench/web-0000", TOKEN, "a deployment"),
        ("/ui/quotas", TOKEN, "quotas"),
        ("/ui/pools", TOKEN, "pools"),
        ("/ui/leases", TOKEN, "leases"),
        ("/ui/", OTHER_TOKEN, "overview, another namespace's token"),
    ]
    async with aiohttp.ClientSession() as http:
        for path, token, label in pages:
            best, size = float("inf"), 0
            for _ in range(runs):
                gc.collect()
                began = time.perf_counter()
                async with http.get(url + path, headers={"Authorization": f"Bearer {token}"}) as r:
                    body = await r.read()
                    if r.status != 200:
                        raise SystemExit(f"{path}: {r.status} {body[:200]!r}")
                best, size = min(best, time.perf_counter() - began), len(body)
            print(f"  {label:38} {best * 1e3:8.1f} ms  {size / 1024:8.0f} KiB")
    quotas, quota = app[QUOTAS], app[QUOTAS].all()[0]

    def recount() -> object:
        counted = [quota_container(c) for c in service.containers() if c.namespace == "bench"]
        return used(quota, counted, quotas.gb_per_gpu, share_base=config.share_base)

    tallied = best_of(runs, lambda: quotas.used(quota, service.quota_requests))
    recounted = best_of(runs, recount)
    if quotas.used(quota, service.quota_requests) != recount():
        raise SystemExit("the tally and the recount disagree")
    print(
        f"  a quota's usage: from the tally {tallied * 1e3:.3f} ms, recounted over its"
        f" {held:,} containers {recounted * 1e3:.1f} ms ({recounted / tallied:,.0f}x); equal"
    )
    await runner.cleanup()


def best_of(runs: int, work: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(runs):
        gc.collect()
        began = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - began)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--containers", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3, help="runs per page (best of)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="allot-bench-") as directory:
        asyncio.run(run(args.nodes, args.containers, args.runs, Path(directory)))


if __name__ == "__main__":
    main()
