"""What an idle fleet costs the coordinator, and what one desired change costs on the wire.

    .venv/bin/python bench/fleet_idle.py [--agents 1000] [--per-node 10] [--seconds 60]

A real ``allot-coordinator`` (SQLite in a new temporary directory under ``--workdir``)
and ``--agents`` simulated agents (``fleet_agents``, in one process of their own). Steps
and figures:

1. idle: once every agent is welcomed and ``--settle`` seconds have passed (so the pace
   the coordinator set while the fleet connected is in force), heartbeats and status
   frames per second over ``--seconds``, as the agents counted what they sent.
2. held: ``--per-node`` containers per agent, in deployments of 1,000; the desired frames and
   their bytes until every container is acknowledged.
3. one change: ``--changes`` deployments of one container, one after another, each waited
   for: desired frames and bytes pushed per change (the node that takes the container is
   sent a frame; how large it is depends on whether it carries the node's whole desired
   state or only the change).

The simulated agents answer each desired frame with one status frame and send none
otherwise, so the idle status figure is the coordinator's side of the rule only; the
real agent's own rate is measured separately (README, "Load that follows change").
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp
from fleet import Coordinator, Fleet, deployment, deployments_url, free_port, raise_file_limit
from fleet_agents import (
    ACKNOWLEDGED,
    CONNECTED,
    DESIRED_BYTES,
    DESIRED_FRAMES,
    HEARTBEATS,
    STATUS_FRAMES,
    FleetOptions,
)

POLL_SECONDS = 0.05
MAX_COUNT = 1000  # containers in one deployment, as the API takes them


class Failed(Exception):
    """A step did not finish in time."""


async def until(what: str, done: Callable[[], bool], fleet: Fleet, within: float) -> None:
    started = time.monotonic()
    while not done():
        if time.monotonic() - started > within:
            raise Failed(f"{what}: not within {within:g} s ({fleet})")
        await asyncio.sleep(POLL_SECONDS)


def acknowledged_past(fleet: Fleet, count: int) -> Callable[[], bool]:
    return lambda: fleet.total(ACKNOWLEDGED) > count


async def post(
    http: aiohttp.ClientSession, url: str, headers: dict[str, str], body: object
) -> None:
    async with http.post(url, json=body, headers=headers) as response:
        if response.status != 201:
            raise Failed(f"deploy refused: HTTP {response.status} {await response.text()}")


async def run(args: argparse.Namespace, workdir: Path) -> None:
    join_token, api_token = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    port = free_port()
    coordinator = Coordinator(workdir, port, join_token, api_token)
    options = FleetOptions(
        url=f"ws://127.0.0.1:{port}/v1/agent",
        join_token=join_token,
        seed=1,
        connect_concurrency=256,
        backoff_initial=0.5,
        backoff_cap=2.0,
    )
    fleet = Fleet(multiprocessing.get_context("spawn"), options, args.agents, 1)
    headers = {"Authorization": f"Bearer {api_token}"}
    url = deployments_url(coordinator.url)
    try:
        coordinator.start()
        async with aiohttp.ClientSession() as http:
            while True:
                coordinator.check_alive()
                try:
                    async with http.get(coordinator.url + "/readyz") as response:
                        if response.status == 200:
                            break
                except aiohttp.ClientConnectionError:
                    pass
                await asyncio.sleep(POLL_SECONDS)
            fleet.start()
            await until(
                "every agent welcomed",
                lambda: fleet.total(CONNECTED) == args.agents,
                fleet,
                args.timeout,
            )
            await asyncio.sleep(args.settle)
            beats, statuses = fleet.total(HEARTBEATS), fleet.total(STATUS_FRAMES)
            started = time.monotonic()
            await asyncio.sleep(args.seconds)
            took = time.monotonic() - started
            print(
                f"idle, {args.agents:,} agents over {took:.0f} s (load average"
                f" {os.getloadavg()[0]:.2f}): {(fleet.total(HEARTBEATS) - beats) / took:,.1f}"
                f" heartbeats/s, {(fleet.total(STATUS_FRAMES) - statuses) / took:,.1f}"
                " status frames/s"
            )

            held = args.agents * args.per_node
            frames, sent = fleet.total(DESIRED_FRAMES), fleet.total(DESIRED_BYTES)
            for number, start in enumerate(range(0, held, MAX_COUNT)):
                count = min(MAX_COUNT, held - start)
                await post(http, url, headers, deployment(f"held-{number}", count, "0.01", "8Mi"))
            await until(
                "the held containers acknowledged",
                lambda: fleet.total(ACKNOWLEDGED) >= held,
                fleet,
                args.timeout,
            )
            frames, sent = fleet.total(DESIRED_FRAMES) - frames, fleet.total(DESIRED_BYTES) - sent
            print(
                f"held: {held:,} containers in deployments of {MAX_COUNT:,}:"
                f" {frames:,} desired frames, {sent / 1e6:,.2f} MB"
            )

            frames, sent = fleet.total(DESIRED_FRAMES), fleet.total(DESIRED_BYTES)
            for number in range(args.changes):
                past = acknowledged_past(fleet, fleet.total(ACKNOWLEDGED))
                await post(http, url, headers, deployment(f"one-{number}", 1, "0.01", "8Mi"))
                await until("the change acknowledged", past, fleet, args.timeout)
            frames, sent = fleet.total(DESIRED_FRAMES) - frames, fleet.total(DESIRED_BYTES) - sent
            print(
                f"one change, {args.per_node} containers a node: {frames / args.changes:.1f}"
                f" desired frames and {sent / args.changes:,.0f} bytes pushed per change"
            )
    finally:
        fleet.stop.set()
        coordinator.stop()
        fleet.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--per-node", type=int, default=10, help="containers each node holds")
    parser.add_argument("--seconds", type=float, default=60.0, help="the idle window")
    parser.add_argument("--settle", type=float, default=10.0, help="seconds before it")
    parser.add_argument("--changes", type=int, default=20, help="single-container deploys")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per step")
    parser.add_argument("--workdir", type=Path, default=Path.cwd(), help="where the store goes")
    args = parser.parse_args()
    raise_file_limit(args.agents)
    workdir = Path(tempfile.mkdtemp(prefix="fleet-idle-", dir=args.workdir))
    try:
        asyncio.run(run(args, workdir))
    except Failed as error:
        print(f"fleet_idle: {error}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
