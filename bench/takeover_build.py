"""The new leader's own part of a takeover against the state size: building the leader's
application on a replica, from what a standby kept warm and, for reference in the same
run, from the replica alone (every node record and container decoded again).

    .venv/bin/python bench/takeover_build.py [--containers 10000 100000] [--nodes 1000]
                                             [--runs 3] [--etcd]

For each size: a real SQLite store in a temporary directory is filled in process
(``DeploymentService`` over ``--nodes`` ready nodes of 24 CPUs, deployments of 500
containers of 0.01 CPU and 8 MiB); with ``--etcd`` it is then copied into a real
3-member etcd cluster (``bench/etcd_cluster.py``, ``coordinator.store.migrate``). First
a loop-lag probe (``bench/loop_lag.py``: a task sleeping 1 ms at a time) runs 2 s on the
idle loop, the machine's own part of lateness. Then, each of ``--runs`` times (times:
the best; holds: the worst):

- the standby's first read of the store (``Replica.follow``, as ``coordinator.leading``
  calls it) and its build of its warm state (``coordinator.warm.Warm.build``): once per
  standby, before it serves, so no part of a takeover; each with the probe beside it:
  how late it woke at most and at the 99th percentile (which adds whatever the machine's
  other processes took), and the most CPU this thread spent between two of its wakings
  (what the code itself held the loop for);
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
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

# Run as a script, Python puts bench/ first on the path; the repository root goes there.
_BENCH = Path(__file__).resolve().parent
sys.path[:] = [str(_BENCH.parent)] + [p for p in sys.path if Path(p or ".").resolve() != _BENCH]

from aiohttp import web  # noqa: E402

from bench.deployments import service_on  # noqa: E402
from bench.etcd_cluster import EtcdCluster  # noqa: E402
from bench.loop_lag import LoopLag  # noqa: E402
from coordinator.app import make_app  # noqa: E402
from coordinator.bulk_load import gc_paused  # noqa: E402
from coordinator.config import CoordinatorConfig  # noqa: E402
from coordinator.store import ClusterStore  # noqa: E402
from coordinator.store.etcd import EtcdStore  # noqa: E402
from coordinator.store.etcd_link import EtcdSettings  # noqa: E402
from coordinator.store.migrate import migrate  # noqa: E402
from coordinator.store.replica import Replica  # noqa: E402
from coordinator.store.sqlite import SqliteStore  # noqa: E402
from coordinator.warm import Warm, WarmState  # noqa: E402
from shared.api.deployments import DeploymentSpec, ResourcesSpec  # noqa: E402

DEPLOY_SIZE = 500
IDLE_SECONDS = 2.0
T = TypeVar("T")


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


async def start(config: CoordinatorConfig, replica: Replica, warm: WarmState | None) -> float:
    """Seconds from nothing to an application ready to serve; then stopped again."""
    started = time.perf_counter()
    runner = web.AppRunner(make_app(config, store=replica, warm=warm))
    await runner.setup()
    took = time.perf_counter() - started
    await runner.cleanup()
    return took


class Holds:
    """What the loop-lag probes saw over several runs of one step: the worst of each figure."""

    def __init__(self) -> None:
        self.worst = self.p99 = self.cpu = 0.0
        self.wakings = 0

    def add(self, probe: LoopLag) -> None:
        self.worst = max(self.worst, probe.worst)
        self.p99 = max(self.p99, probe.p99)
        self.cpu = max(self.cpu, probe.held_cpu)
        self.wakings += len(probe.late)

    def __str__(self) -> str:
        return (
            f"loop {self.worst * 1000:.0f} ms late at most (p99 {self.p99 * 1000:.1f} ms of"
            f" {self.wakings:,} wakings),"
            f" held {self.cpu * 1000:.0f} ms of CPU at most"
        )


async def probed(work: Awaitable[T], holds: Holds) -> tuple[T, float]:
    """``work``'s result and its seconds, with a loop-lag probe running beside it."""
    probe = LoopLag()
    await asyncio.sleep(0)  # its first sleep begun
    started = time.perf_counter()
    result = await work
    took = time.perf_counter() - started
    await probe.stop()
    holds.add(probe)
    return result, took


@contextlib.asynccontextmanager
async def store_to_follow(
    sqlite: Path, on_etcd: bool, directory: Path
) -> AsyncIterator[Callable[[], Awaitable[ClusterStore]]]:
    """Opens the store a standby follows: the filled SQLite file, or a real 3-member etcd
    cluster holding a copy of it (``coordinator.store.migrate``, as an operator moves)."""
    if not on_etcd:
        yield lambda: SqliteStore.open(sqlite)
        return
    cluster = EtcdCluster(directory / "etcd")
    cluster.start()
    try:
        settings = EtcdSettings(endpoints=cluster.endpoints, timeout_s=120.0)
        started = time.perf_counter()
        copied = await migrate(sqlite, settings)
        print(f"  copied {copied.keys:,} keys into etcd in {time.perf_counter() - started:.0f} s")
        yield lambda: EtcdStore.open(settings)
    finally:
        cluster.stop()


async def measure(containers: int, nodes: int, runs: int, on_etcd: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="allot-takeover-build-") as directory:
        sqlite = Path(directory) / "allot.db"
        filling = await SqliteStore.open(sqlite)
        filled = await fill(filling, nodes, containers)
        await filling.close()
        config = CoordinatorConfig(
            data_dir=directory, join_token="j" * 20, api_tokens=["t" * 20], port=0
        )
        follows, builds, warm_starts, cold_starts = [], [], [], []
        idle, following, building = Holds(), Holds(), Holds()
        await probed(asyncio.sleep(IDLE_SECONDS), idle)  # the machine's own part of lateness
        async with store_to_follow(sqlite, on_etcd, Path(directory)) as opened:
            for _ in range(runs):
                store = await opened()
                replica, took = await probed(follow(store), following)
                follows.append(took)
                warm, took = await probed(
                    Warm.build(replica, share_base=config.share_base), building
                )
                builds.append(took)
                kept = warm.take()
                if kept is None:
                    raise SystemExit("the standby's kept state failed to follow the store")
                warm_starts.append(await start(config, replica, kept))
                cold_starts.append(await start(config, replica, None))
                await replica.close()  # and the store
    warm_s, cold_s = min(warm_starts), min(cold_starts)
    print(
        f"{containers:>7,} containers on {nodes:,} nodes, {'etcd' if on_etcd else 'SQLite'}"
        f" (filled in {filled:.1f} s), load average {load_average()}:\n"
        f"  an idle loop for {IDLE_SECONDS:.0f} s: {idle}\n"
        f"  standby's replica read {min(follows):.3f} s: {following}\n"
        f"  standby's build {min(builds):.3f} s: {building}\n"
        f"  leader's start from warm state {warm_s:.3f} s, from the replica {cold_s:.3f} s"
        f" ({cold_s / warm_s:.0f}x)",
        flush=True,
    )


async def follow(store: ClusterStore) -> Replica:
    """The replica a standby starts with (``coordinator.leading``)."""
    with gc_paused():
        return await Replica.follow(store)


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--containers", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--etcd", action="store_true", help="follow a real etcd cluster")
    args = parser.parse_args()
    for containers in args.containers:
        asyncio.run(measure(containers, args.nodes, args.runs, args.etcd))


if __name__ == "__main__":
    main()
