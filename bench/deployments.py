"""Deployment decisions in the coordinator's service: admit, place, commit to SQLite.

    .venv/bin/python bench/deployments.py [--nodes 1000] [--count 1000] [--runs 3]

An in-process ``DeploymentService`` over a real SQLite store in a temporary directory (WAL,
synchronous=FULL, as the coordinator runs it) and ``--nodes`` ready nodes of 24 CPUs on two
NUMA nodes with 128 GiB, registered as their agents' hellos would. No agent is attached,
so nothing is pushed; the time is the decision and its commit. Prints, best of ``--runs``:

- one deployment of ``--count`` containers (1.7 CPU, 512 MiB, cpu-bind, AUTO): one
  decision, one transaction;
- a naive reference in the same run: the same containers as ``--count`` deployments of
  one container each (a decision and a transaction per container), and the ratio;
- draining a node that holds 24 containers of a deployment: each is released and placed
  again elsewhere, one at a time, in one commit (the path re-placement after a lost node
  and GPU deployments take too).

Between runs every deployment is deleted. Not part of ``make test``.

    .venv/bin/python bench/deployments.py --concurrent [--deploys 20] [--count 500]
        [--against /work/main] [--rounds 3]

Deploys at once: ``--deploys`` deployments of ``--count`` containers asked for together
(containers placed a second), then a 1-container deploy asked for just after as many of
those (its latency, from a store of its own). With ``--against DIR`` each round runs
once on this checkout's code and once on DIR's (a subprocess each, alternating), and
the ratios are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

# Run as a script, Python puts bench/ first on the path; the repository root goes there
# (or the checkout given with --code, whose coordinator is measured).
_BENCH = Path(__file__).resolve().parent
_CODE = sys.argv[sys.argv.index("--code") + 1] if "--code" in sys.argv else str(_BENCH.parent)
sys.path[:] = [_CODE] + [p for p in sys.path if Path(p or ".").resolve() != _BENCH]

from coordinator.config import PoolSettings, QuotaSettings  # noqa: E402
from coordinator.deployments.service import DeploymentService  # noqa: E402
from coordinator.services.pool_service import PoolService  # noqa: E402
from coordinator.services.quota_service import QuotaService  # noqa: E402
from coordinator.services.registry import NodeRegistry  # noqa: E402
from coordinator.store.sqlite import SqliteStore  # noqa: E402
from shared.api.deployments import DeploymentSpec, ResourcesSpec  # noqa: E402
from shared.cpuset import CpuSet  # noqa: E402
from shared.inventory import Cpu, Inventory, NumaNode  # noqa: E402

GiB = 1024**3
NAMESPACE = "bench"


def host(name: str) -> Inventory:
    """24 CPUs (no SMT), 0-11 on NUMA node 0 and 12-23 on 1, 64 GiB each."""
    cpus = [Cpu(id=c, core=c, package=c // 12, numa=c // 12) for c in range(24)]
    halves = [CpuSet(range(12)), CpuSet(range(12, 24))]
    return Inventory(
        hostname=name,
        cpus=cpus,
        online=CpuSet(range(24)),
        isolated=CpuSet(),
        reserved=CpuSet(),
        numa_nodes=[
            NumaNode(id=n, cpus=halves[n], memory=64 * GiB, distances={0: 10, 1: 20})
            for n in (0, 1)
        ],
        memory=128 * GiB,
    )


def spec(name: str, count: int) -> DeploymentSpec:
    resources = ResourcesSpec(cpu="1.7", memory="512Mi")
    return DeploymentSpec(
        name=name,
        image="busybox",
        count=count,
        resources=resources,
        cpu_bind=True,
        restart_policy="always",
    )


async def timed(call: Callable[[], Awaitable[object]]) -> float:
    gc.collect()
    started = time.perf_counter()
    await call()
    return time.perf_counter() - started


async def clear(service: DeploymentService) -> None:
    for deployment in service.deployments():
        await service.delete_deployment(deployment.namespace, deployment.spec.name)


async def service_on(store: SqliteStore, names: list[str]) -> DeploymentService:
    """The deployment service over ``store``, with a ready node of ``host`` per name."""
    registry = await NodeRegistry.load(store, lease_seconds=3600.0)
    quotas = await QuotaService.load(store, share_base=100, settings=QuotaSettings())
    pools = await PoolService.load(store, PoolSettings())
    service = await DeploymentService.load(store, registry, quotas, pools, share_base=100)
    for name in names:
        await service.hello(name, inventory=host(name), address="127.0.0.1", agent_version="b")
    return service


async def run(nodes: int, count: int, runs: int, directory: Path) -> None:
    store = await SqliteStore.open(directory / "allot.db")
    names = [f"node-{i:04d}" for i in range(nodes)]
    service = await service_on(store, names)
    print(f"{nodes} nodes of 24 CPUs, {count} containers of 1.7 CPU + 512 MiB, cpu-bind, AUTO")

    async def one_deployment() -> None:
        await service.deploy(NAMESPACE, spec("web", count))

    async def one_per_container() -> None:
        for i in range(count):
            await service.deploy(NAMESPACE, spec(f"web-{i}", 1))

    async def drain() -> None:
        moved = await service.drain(names[0])
        if len(moved.placed) != 24 or moved.waiting:
            raise SystemExit(f"the drain did not move the node's 24 containers: {moved}")

    best: dict[str, float] = {}
    for _ in range(runs):
        for label, call in (("one", one_deployment), ("naive", one_per_container)):
            best[label] = min(best.get(label, float("inf")), await timed(call))
            await clear(service)
        # A node full of one deployment's containers (24 x 0.95 CPU), then drained.
        full = DeploymentSpec(
            name="full",
            image="busybox",
            count=24,
            resources=ResourcesSpec(cpu="0.95", memory="512Mi"),
            cpu_bind=True,
            strategy="fill",
            nodes_limit=1,
            restart_policy="always",
        )
        await service.deploy(NAMESPACE, full)
        best["drain"] = min(best.get("drain", float("inf")), await timed(drain))
        await service.cordon(names[0], False)
        await clear(service)
    await store.close()
    one, naive = best["one"], best["naive"]
    print(f"  one deployment of {count}: {one * 1e3:9.1f} ms  ({one / count * 1e6:.0f} us each)")
    print(
        f"  {count} deployments of 1:  {naive * 1e3:9.1f} ms  (naive reference; ours is"
        f" {naive / one:.1f}x faster)"
    )
    print(f"  drain a node of 24:       {best['drain'] * 1e3:9.1f} ms  (one at a time, one commit)")


async def concurrent(nodes: int, deploys: int, count: int, directory: Path) -> dict[str, float]:
    """Containers placed a second with ``deploys`` deployments asked for at once, and the
    latency of a small deploy asked for just behind as many (seconds)."""
    names = [f"node-{i:04d}" for i in range(nodes)]
    store = await SqliteStore.open(directory / "at-once.db")
    service = await service_on(store, names)
    started = time.perf_counter()
    await asyncio.gather(
        *(service.deploy(NAMESPACE, spec(f"web-{i}", count)) for i in range(deploys))
    )
    elapsed = time.perf_counter() - started
    await store.close()
    # A store of its own: without agents, deleted containers stay stopping.
    store = await SqliteStore.open(directory / "behind.db")
    service = await service_on(store, names)

    async def small() -> float:
        await asyncio.sleep(0.001)  # the large ones are queued first
        asked = time.perf_counter()
        await service.deploy(NAMESPACE, spec("small", 1))
        return time.perf_counter() - asked

    waiting = asyncio.create_task(small())
    await asyncio.gather(
        *(service.deploy(NAMESPACE, spec(f"big-{i}", count)) for i in range(deploys))
    )
    latency = await waiting
    await store.close()
    return {"per_second": deploys * count / elapsed, "small_latency": latency}


def against(args: argparse.Namespace) -> None:
    """Alternate runs on this code and on ``args.against``'s; figures and ratios."""
    figures: dict[str, list[dict[str, float]]] = {"ours": [], "theirs": []}
    for _ in range(args.rounds):
        for side, code in (("ours", str(_BENCH.parent)), ("theirs", args.against)):
            command = [sys.executable, __file__, "--concurrent", "--json", "--code", code]
            command += ["--nodes", str(args.nodes), "--deploys", str(args.deploys)]
            command += ["--count", str(args.count)]
            done = subprocess.run(command, check=True, capture_output=True, text=True)
            figures[side].append(json.loads(done.stdout.splitlines()[-1]))
            load = Path("/proc/loadavg").read_text().split()[0]
            one = figures[side][-1]
            print(
                f"  {side:6} {one['per_second']:7.0f} containers/s, small deploy behind them"
                f" {one['small_latency'] * 1e3:7.0f} ms  (load {load})"
            )
    ours, theirs = (
        {
            key: statistics.median(run[key] for run in figures[side])
            for key in ("per_second", "small_latency")
        }
        for side in ("ours", "theirs")
    )
    print(
        f"median: throughput ours/theirs {ours['per_second'] / theirs['per_second']:.2f}x;"
        f" small deploy latency theirs/ours {theirs['small_latency'] / ours['small_latency']:.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3, help="runs per measurement (best of)")
    parser.add_argument("--concurrent", action="store_true", help="deploys asked for at once")
    parser.add_argument("--deploys", type=int, default=20)
    parser.add_argument("--against", help="another checkout, measured in the same run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="one line of figures")
    parser.add_argument("--code", help="the checkout whose coordinator is measured")
    args = parser.parse_args()
    if args.against:
        print(f"{args.deploys} x {args.count} containers at once on {args.nodes} nodes")
        against(args)
        return
    with tempfile.TemporaryDirectory(prefix="allot-bench-") as directory:
        if args.concurrent:
            measured = asyncio.run(
                concurrent(args.nodes, args.deploys, args.count, Path(directory))
            )
            print(json.dumps(measured) if args.json else measured)
            return
        asyncio.run(run(args.nodes, args.count, args.runs, Path(directory)))


if __name__ == "__main__":
    main()
