"""The new leader's own part of a takeover against the state size: building the leader's
application on a replica, from what a standby kept warm and, for reference in the same
run, from the replica alone (every node record and container decoded again).

    .venv/bin/python bench/takeover_build.py [--containers 10000 100000] [--nodes 1000]

For each size: a real SQLite store in a temporary directory is filled in process
(``DeploymentService`` over ``--nodes`` ready nodes of 24 CPUs, deployments of 500
containers of 0.01 CPU and 8 MiB), followed by a ``Replica`` as a standby follows etcd.
Then, best of ``--runs``:

- the standby's build of its warm state (``coordinator.warm.Warm.build``): once per
  standby, before it serves, so no part of a takeover; with the longest its event loop
  was held meanwhile, as a task waking every 2 ms sees it: the CPU time the process
  spent between two of its wakings, and how late it woke (which adds whatever the
  machine's other processes took);
- the application's start on the replica with that state, as the elected leader does
  after its copy caught up with its win (the ``took_s`` a takeover logs, less the wait);
- the same start without it, reading everything from the replica, and the ratio.

``bench/takeover.py`` measures whole takeovers on etcd (kill -9 to the first deploy);
this one isolates the part that could grow with the state. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

# Run as a script, Python puts bench/ first on the path; the repository root goes there.
_BENCH = Path(__file__).resolve().parent
sys.path[:] = [str(_BENCH.parent)] + [p for p in sys.path if Path(p or ".").resolve() != _BENCH]

from aiohttp import web  # noqa: E402

from bench.deployments import service_on  # noqa: E402
from coordinator.app import make_app  # noqa: E402
from coordinator.config import CoordinatorConfig  # noqa: E402
from coordinator.store.replica import Replica  # noqa: E402
from coordinator.store.sqlite import SqliteStore  # noqa: E402
from coordinator.warm import Warm, WarmState  # noqa: E402
from shared.api.deployments import DeploymentSpec, ResourcesSpec  # noqa: E402

DEPLOY_SIZE = 500
TICK_SECONDS = 0.002


async def fill(store: SqliteStore, nodes: int, containers: int) -> float:
    """Seconds to register the nodes and deploy the containers."""
    started = time.perf_counter()
    service = await service_on(store, [f"node-{index:05}" for index in range(nodes)])
    resources = ResourcesSpec(cpu="0.01", memory="8Mi")
    for index in range(0, containers, DEPLOY_SIZE):
        count = min(DEPLOY_SIZE, containers - index)
        spec = DeploymentSpec(name=f"d{index}", image="busybox", count=count, resources=resources)
        await service.deploy("fleet", spec)
    await service.close()
    return time.perf_counter() - started


class Heartbeat:
    """A task on the loop that wakes every ``TICK_SECONDS``; the longest the loop was
    held between two wakings, in CPU seconds of this thread and in lateness."""

    def __init__(self) -> None:
        self.held = self.late = 0.0
        self._task = asyncio.create_task(self._beat())

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _beat(self) -> None:
        while True:
            due, cpu = time.perf_counter() + TICK_SECONDS, time.thread_time()
            await asyncio.sleep(TICK_SECONDS)
            self.held = max(self.held, time.thread_time() - cpu)
            self.late = max(self.late, time.perf_counter() - due)


async def start(config: CoordinatorConfig, replica: Replica, warm: WarmState | None) -> float:
    """Seconds from nothing to an application ready to serve; then stopped again."""
    started = time.perf_counter()
    runner = web.AppRunner(make_app(config, store=replica, warm=warm))
    await runner.setup()
    took = time.perf_counter() - started
    await runner.cleanup()
    return took


async def measure(containers: int, nodes: int, runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="allot-takeover-build-") as directory:
        store = await SqliteStore.open(Path(directory) / "allot.db")
        filled = await fill(store, nodes, containers)
        replica = await Replica.follow(store)
        config = CoordinatorConfig(
            data_dir=directory, join_token="j" * 20, api_tokens=["t" * 20], port=0
        )
        builds, warm_starts, cold_starts, holds = [], [], [], []
        for _ in range(runs):
            heartbeat = Heartbeat()
            await asyncio.sleep(0)  # its first sleep begun
            started = time.perf_counter()
            warm = await Warm.build(replica, share_base=config.share_base)
            builds.append(time.perf_counter() - started)
            await heartbeat.stop()
            holds.append((heartbeat.held, heartbeat.late))
            kept = warm.take()
            if kept is None:
                raise SystemExit("the standby's kept state failed to follow the store")
            warm_starts.append(await start(config, replica, kept))
            cold_starts.append(await start(config, replica, None))
        await replica.close()  # and the store
    warm_s, cold_s = min(warm_starts), min(cold_starts)
    held, late = max(hold[0] for hold in holds), max(hold[1] for hold in holds)
    print(
        f"{containers:>7,} containers on {nodes:,} nodes (filled in {filled:.1f} s):"
        f" standby's build {min(builds):.3f} s, its loop held at most {held * 1000:.0f} ms"
        f" of CPU ({late * 1000:.0f} ms late); leader's start from warm state {warm_s:.3f} s,"
        f" from the replica {cold_s:.3f} s ({cold_s / warm_s:.0f}x); load average"
        f" {os.getloadavg()[0]:.2f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--containers", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for containers in args.containers:
        asyncio.run(measure(containers, args.nodes, args.runs))


if __name__ == "__main__":
    main()
