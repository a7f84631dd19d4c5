"""Takeover time on etcd: from a leader's kill -9 to the first deploy another accepts,
with 10,000 and 100,000 containers in the store.

    .venv/bin/python bench/takeover.py [--containers 10000 100000] [--kills 10] [--ttl 5]
                                       [--agents 1000] [--json FILE]
    .venv/bin/python bench/takeover.py --smoke     # 200 containers, 2 kills, TTL 2 s

A local 3-member etcd cluster (``etcd_cluster``) in a new temporary directory (under
``--workdir``, the current directory by default) and two real ``allot-coordinator``
processes on it with ``leader_ttl_seconds = --ttl``. Steps and figures:

1. nodes: ``--agents`` simulated agents (``fleet_agents``) join the first coordinator,
   the leader, and leave again: their nodes stay ready, since the node lease and the
   lost-node grace are set to an hour, so the deploys below are placed and nothing is
   released while no agent is connected. (Agents following a new leader are tested in
   ``tests/docker/test_leader_takeover.py``; here they would only add reconnections to
   the figure.)
2. fill: deployments of ``--deploy-size`` containers POSTed to the leader until the store holds the
   next ``--containers`` count; seconds and containers/s.
3. kills: ``--kills`` times, once the standby names the leader: wait a random fraction
   of a lease renewal period (TTL/4), kill -9 the leader, and POST a one-container
   deployment to the standby every ``POLL_SECONDS`` (not following its 307) until one
   is answered 201. Prints min/median/max of those seconds, and of the new leader's
   own ``took_s`` (from winning the key to serving: the part that depends on the state
   size, the rest is the TTL running out). The killed coordinator is started again and
   becomes the standby of the next round.

The host's load average is printed with the figures. Not part of ``make test``; its smoke
run is (``tests/bench/test_etcd_smoke.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import secrets
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path

import aiohttp
from etcd_cluster import EtcdCluster, etcd_missing
from fleet import (
    CONNECTED,
    Coordinator,
    Failed,
    Fleet,
    FleetOptions,
    deployment,
    deployments_url,
    etcd_settings,
    free_port,
    percentile,
    raise_file_limit,
)

POLL_SECONDS = 0.02
SMOKE = {"containers": [200], "kills": 2, "ttl": 2, "agents": 5, "timeout": 60.0}
TOOK = re.compile(r"WARNING leading .*took_s=([0-9.]+)")


@dataclass
class Size:
    containers: int  # in the store when the kills began
    load_average: float
    fill_s: float
    takeover_s: list[float] = field(default_factory=list)
    took_s: list[float] = field(default_factory=list)  # the new leader's own, from its log

    def line(self) -> str:
        def spread(values: list[float]) -> str:
            return f"{min(values):5.2f} / {percentile(values, 0.5):5.2f} / {max(values):5.2f} s"

        return (
            f"{self.containers:>8,} containers (load average {self.load_average:.2f}):"
            f" kill -9 to first deploy accepted {spread(self.takeover_s)},"
            f" of which taking over {spread(self.took_s)} (min / median / max,"
            f" {len(self.takeover_s)} kills)"
        )


class Takeovers:
    def __init__(
        self, args: argparse.Namespace, coordinators: list[Coordinator], http: aiohttp.ClientSession
    ) -> None:
        self.args = args
        self.coordinators = coordinators
        self.http = http
        self.headers = {"Authorization": f"Bearer {args.api_token}"}
        self.random = random.Random(args.seed)
        self.posted = 0

    async def readiness(self, coordinator: Coordinator) -> tuple[int, str]:
        """/readyz: (status, the leader it names; 0 when it does not answer)."""
        try:
            async with self.http.get(coordinator.url + "/readyz") as response:
                answer = await response.json()
                return response.status, answer.get("leader", "")
        except aiohttp.ClientError:
            return 0, ""

    async def until(self, what: str, done: Callable[[], Awaitable[bool]]) -> None:
        deadline = time.monotonic() + self.args.timeout
        while not await done():
            if time.monotonic() > deadline:
                raise Failed(f"{what}: not within {self.args.timeout:g} s")
            await asyncio.sleep(0.05)

    async def leader(self) -> tuple[Coordinator, Coordinator]:
        """(the leader, the standby), once the standby names the leader."""
        found: list[tuple[Coordinator, Coordinator]] = []

        async def settled() -> bool:
            first, second = self.coordinators
            for leader, standby in ((first, second), (second, first)):
                leads, named = (await self.readiness(leader))[0], await self.readiness(standby)
                if leads == 200 and named == (503, leader.url):
                    found.append((leader, standby))
                    return True
            return False

        await self.until("one leader, named by the standby", settled)
        return found[0]

    async def post(self, url: str, count: int) -> int:
        """A POST of a new deployment to ``url``, not following a redirect; its status."""
        self.posted += 1
        body = deployment(f"t{self.posted:06d}", count, self.args.cpu, self.args.memory)
        async with self.http.post(
            deployments_url(url), json=body, headers=self.headers, allow_redirects=False
        ) as response:
            await response.read()
            return response.status

    async def fill(self, containers: int) -> float:
        """POSTs to the leader until ``containers`` more are in the store; seconds."""
        leader, _ = await self.leader()
        started = time.monotonic()
        left = containers
        while left:
            count = min(self.args.deploy_size, left)
            status = await self.post(leader.url, count)
            if status != 201:
                raise Failed(f"a deployment of {count} was answered {status} while filling")
            left -= count
        return time.monotonic() - started

    async def kill_once(self) -> tuple[float, float]:
        """Kill the leader; (seconds until the standby accepted a deploy, its took_s)."""
        leader, standby = await self.leader()
        await asyncio.sleep(self.random.uniform(0, self.args.ttl / 4))
        leader.kill()
        killed = time.monotonic()
        while True:
            standby.check_alive()
            try:
                if await self.post(standby.url, 1) == 201:
                    break
            except aiohttp.ClientError:
                pass
            if time.monotonic() - killed > self.args.timeout:
                raise Failed(f"no deploy accepted within {self.args.timeout:g} s of the kill")
            await asyncio.sleep(POLL_SECONDS)
        took = time.monotonic() - killed
        leader.start()
        return took, float(TOOK.findall(standby.log.read_text())[-1])


async def run(args: argparse.Namespace, workdir: Path) -> list[Size]:
    etcd = EtcdCluster(workdir / "etcd")
    etcd.start()
    join_token, args.api_token = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    more = etcd_settings(etcd.endpoints) + (
        f"leader_ttl_seconds = {args.ttl}\nlease_seconds = 3600\nlost_node_grace_seconds = 3600\n"
    )
    coordinators = []
    for index in range(2):
        directory = workdir / f"coordinator-{index}"
        directory.mkdir()
        coordinators.append(Coordinator(directory, free_port(), join_token, args.api_token, more))
    sizes: list[Size] = []
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http:
            takeovers = Takeovers(args, coordinators, http)
            coordinators[0].start()
            await takeovers.until("the first coordinator leads", _leads(takeovers, coordinators[0]))
            await join(args, coordinators[0], join_token)
            coordinators[1].start()
            in_store = 0
            for target in args.containers:
                added = target - in_store
                fill_s = await takeovers.fill(added)
                in_store = target
                print(
                    f"filled to {target:,} containers: {added:,} in {fill_s:.1f} s"
                    f" ({added / fill_s:,.0f} containers/s)",
                    flush=True,
                )
                size = Size(target, os.getloadavg()[0], fill_s)
                for _ in range(args.kills):
                    took, own = await takeovers.kill_once()
                    size.takeover_s.append(took)
                    size.took_s.append(own)
                    in_store += 1
                    print(f"  kill -9: deploy accepted after {took:.2f} s (took_s {own})")
                sizes.append(size)
                print(size.line(), flush=True)
    except Failed as error:
        print(f"takeover: {error}", file=sys.stderr)
        raise
    finally:
        for coordinator in coordinators:
            coordinator.stop()
        etcd.stop()
    return sizes


def _leads(takeovers: Takeovers, coordinator: Coordinator) -> Callable[[], Awaitable[bool]]:
    async def leads() -> bool:
        coordinator.check_alive()
        return (await takeovers.readiness(coordinator))[0] == 200

    return leads


async def join(args: argparse.Namespace, coordinator: Coordinator, join_token: str) -> None:
    """``--agents`` simulated agents say hello to ``coordinator``, then leave."""
    options = FleetOptions(
        url=coordinator.url.replace("http://", "ws://") + "/v1/agent",
        join_token=join_token,
        seed=args.seed,
        connect_concurrency=256,
        backoff_initial=0.5,
        backoff_cap=1.0,
    )
    fleet = Fleet(get_context("spawn"), options, args.agents, 1)
    fleet.start()
    try:
        deadline = time.monotonic() + args.timeout
        while fleet.total(CONNECTED) < args.agents:
            coordinator.check_alive()
            if time.monotonic() > deadline:
                raise Failed(f"the agents did not join within {args.timeout:g} s ({fleet})")
            await asyncio.sleep(0.05)
    finally:
        fleet.close()


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help=f"a small run: {SMOKE}")
    parser.add_argument("--containers", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--kills", type=int, default=10, help="per state size")
    parser.add_argument("--ttl", type=int, default=5, help="leader_ttl_seconds")
    parser.add_argument("--agents", type=int, default=1000, help="nodes, joined once")
    parser.add_argument("--deploy-size", type=int, default=250, help="containers per POST")
    parser.add_argument("--cpu", default="0.01", help="each container's cpu request")
    parser.add_argument("--memory", default="8Mi", help="each container's memory request")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per step")
    parser.add_argument("--workdir", type=Path, default=Path.cwd(), help="where etcd goes")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep etcd's data and the logs")
    if "--smoke" in argv:
        parser.set_defaults(**SMOKE)
    args = parser.parse_args(argv)
    if args.containers != sorted(set(args.containers)) or args.containers[0] < 1:
        parser.error("--containers: growing counts, each at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    missing = etcd_missing()
    if missing:
        print(f"takeover: {missing}; run scripts/provision", file=sys.stderr)
        return 1
    raise_file_limit(args.agents)
    load = os.getloadavg()
    print(f"host: {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    directory = Path(tempfile.mkdtemp(prefix="allot-takeover-", dir=args.workdir))
    try:
        sizes = asyncio.run(run(args, directory))
    except Failed:
        return 1
    finally:
        if args.keep:
            print(f"takeover: etcd's data and the coordinators' logs are in {directory}")
        else:
            shutil.rmtree(directory)
    if args.json is not None:
        figures = {"ttl": args.ttl, "sizes": [asdict(size) for size in sizes]}
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # clean up as for Ctrl-C
    sys.exit(main())
