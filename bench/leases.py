"""Capacity leases: how fast the engine decides, with figures to compare against.

    .venv/bin/python bench/leases.py [--block-sizes]

Sections, each a function that prints its own figures (no assertions):

- ``engine_benchmark``: the pure functions on 100,000 clients; the slow exact reference
  against ``fair_share`` on 2,000; a ``LeaseTable`` with 10,000 and 100,000 distinct
  clients making a first request each, then refreshing once with unchanged wants, then
  once more with changed wants (the case where every request moves the index).
- ``block_size_sweep`` (``--block-sizes``): the same table phases for several index
  block sizes, the measurement behind ``band_index.LOAD``.

- ``http_benchmark``: a real ``allot-coordinator`` on loopback (its store on this disk,
  every decision committed before the answer) driven by ``wrk`` from a separate process
  with ``--clients`` distinct client ids over ``--connections`` connections: requests/s
  and p50/p99 latency, first cold (every id is new), then in steady state.
  ``--heap-containers N`` first fills its store with N containers (memory mode, 100 a
  node, deployments of 1,000, written as the coordinator writes them), so that the
  coordinator serves leases with all of them loaded, a long-lived heap as in a big
  cluster. ``--gc default`` runs it without its start-up GC settings
  (``coordinator.main.settle_heap``), for comparison. The coordinator then also prints
  its garbage collections while serving: per generation how many, the longest and the
  total pause. ``--pool-update-seconds`` sets its pool update period: each update walks
  every container, so with a big heap it is a stall of its own to keep apart.

The engine sections run single-threaded in this process; times are wall-clock, best of
a few runs for the pure functions. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import random
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from timing import best_of

from coordinator.leases import Kind, LeaseTable, band_index, fair_share, proportional_share
from coordinator.leases.reference import proportional, water_filling

SHARING = (Kind.FAIR_SHARE, Kind.PROPORTIONAL_SHARE)


def _claims(n: int, seed: int) -> tuple[float, list[float], list[int], list[int]]:
    """n clients with random wants (0-100), subclients (1-4) and three priority bands;
    capacity half the total demand, so the middle band is cut and the lowest starves."""
    rng = random.Random(seed)
    wants = [rng.uniform(0, 100) for _ in range(n)]
    weights = [rng.randint(1, 4) for _ in range(n)]
    priorities = [rng.choice((-1, 0, 1)) for _ in range(n)]
    return 0.5 * sum(wants), wants, weights, priorities


def _table_phases(kind: Kind, n: int) -> tuple[float, float, float]:
    """Requests per second for n first requests, n unchanged refreshes, n changed ones."""
    rng = random.Random(n)
    wants = [rng.uniform(0, 40) for _ in range(n)]
    changed = [w * rng.uniform(0.9, 1.1) for w in wants]
    ids = [f"host-{i}:{i * 7919 % 65536}:{i:08x}" for i in range(n)]
    # Capacity half the demand: every decision has to find the water level.
    table = LeaseTable(kind, 10.0 * n, lease_length=30, refresh_interval=10)
    rates = []
    for now, values in ((1.0, wants), (2.0, wants), (3.0, changed)):
        gc.collect()
        started = time.perf_counter()
        for client_id, value in zip(ids, values, strict=True):
            table.request(client_id, value, now=now)
        rates.append(n / (time.perf_counter() - started))
    return rates[0], rates[1], rates[2]


def engine_benchmark() -> None:
    print("== lease engine (pure, one core) ==")
    capacity, wants, weights, priorities = _claims(100_000, seed=1)
    for name, share in (("fair_share", fair_share), ("proportional_share", proportional_share)):
        took = best_of(3, functools.partial(share, capacity, wants, weights, priorities))
        print(f"{name:<19} 100,000 clients, 3 bands: {took * 1e3:8.1f} ms per call")

    capacity, wants, weights, priorities = _claims(2_000, seed=2)
    for name, fast, slow in (
        ("fair_share", fair_share, water_filling),
        ("proportional_share", proportional_share, proportional),
    ):
        fast_time = best_of(3, functools.partial(fast, capacity, wants, weights, priorities))
        slow_time = best_of(1, functools.partial(slow, capacity, wants, weights, priorities))
        print(
            f"{name:<19} 2,000 clients: {fast_time * 1e3:7.2f} ms; exact reference"
            f" {slow_time * 1e3:8.1f} ms ({slow_time / fast_time:.0f}x slower)"
        )

    for n in (10_000, 100_000):
        for kind in SHARING:
            first, same, changed = _table_phases(kind, n)
            print(
                f"LeaseTable {kind:<18} {n:>7,} clients: first request {first:8,.0f} req/s,"
                f" refresh {same:8,.0f} req/s, refresh with new wants {changed:8,.0f} req/s"
                f" ({1e6 / changed:.1f} us each)"
            )


def block_size_sweep() -> None:
    print("== band index block size (load), FAIR_SHARE, microseconds per request ==")
    default = band_index.LOAD
    try:
        for n in (10_000, 100_000):
            for load in (16, 32, 64, 128, 256):
                band_index.BandIndex.__init__.__defaults__ = (load,)
                first, same, changed = _table_phases(Kind.FAIR_SHARE, n)
                print(
                    f"n {n:>7,} load {load:>3}: first {1e6 / first:5.1f} us,"
                    f" refresh {1e6 / same:5.1f} us, new wants {1e6 / changed:5.1f} us"
                )
    finally:
        band_index.BandIndex.__init__.__defaults__ = (default,)


# One wrk thread cycles through the client ids, so every id is first a newcomer (its
# first request changes the band index) and then a refreshing client. The requests are
# built once, in init: on two cores the load generator competes with the coordinator,
# and building each request in Lua cost it a tenth of its rate.
_WRK_SCRIPT = """
local requests = {}
local counter = 0
init = function(args)
  for id = 0, %(clients)d - 1 do
    local body = '{"client_id":"bench-' .. id .. '","resources":[{"resource_id":"bench",'
      .. '"wants":' .. (1 + id %% 50) .. '}]}'
    requests[id] = wrk.format("POST", "/v1/capacity", {
      ["Content-Type"] = "application/json",
      ["Authorization"] = "Bearer %(token)s"}, body)
  end
end
request = function()
  counter = (counter + 1) %% %(clients)d
  return requests[counter]
end
"""
_WRK_FIGURES = {
    "requests_per_s": re.compile(r"Requests/sec:\s+([\d.]+)"),
    "p50": re.compile(r"^\s+50%\s+([\d.]+)(us|ms|s)\s*$", re.MULTILINE),
    "p99": re.compile(r"^\s+99%\s+([\d.]+)(us|ms|s)\s*$", re.MULTILINE),
    "errors": re.compile(r"Non-2xx or 3xx responses: (\d+)"),
}
_TO_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _wrk(url: str, script: Path, seconds: int, connections: int) -> dict[str, float]:
    command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(script)]
    output = subprocess.run(
        [*command, url], capture_output=True, text=True, check=True, timeout=seconds + 60
    ).stdout
    figures: dict[str, float] = {"errors": 0.0}
    for name, pattern in _WRK_FIGURES.items():
        match = pattern.search(output)
        if match is None:
            continue
        value = float(match.group(1))
        figures[name] = value * _TO_MS[match.group(2)] if match.lastindex == 2 else value
    return figures


# Runs the coordinator with a garbage collector callback that times every collection
# once it is ready (READY=1, after start-up and its GC settings), and prints them per
# generation on the way out. "default": as before ``settle_heap`` existed (the collector
# on while the store loads, nothing frozen), for the comparison.
_LAUNCHER = """
import gc, sys, time, types
import coordinator.main as main

pauses = {0: [], 1: [], 2: []}
began = [0.0, False]


def timing(phase, info):
    if phase == "start":
        began[0] = time.perf_counter()
    elif began[1]:
        pauses[info["generation"]].append(time.perf_counter() - began[0])


def notify(*lines):
    began[1] = began[1] or "READY=1" in lines
    return announce(*lines)


gc.callbacks.append(timing)
announce = main.notify
main.notify = notify
if sys.argv[1] == "default":  # as before settle_heap: the collector on throughout
    main.gc = types.SimpleNamespace(disable=lambda: None)
    main.settle_heap = lambda: None
code = main.main(sys.argv[2:])
for generation, times in pauses.items():
    print(
        f"gc generation {generation}: {len(times)} collections, longest"
        f" {max(times, default=0) * 1e3:.1f} ms, total {sum(times) * 1e3:.0f} ms",
        flush=True,
    )
sys.exit(code)
"""


async def _seed(directory: Path, containers: int) -> None:
    """Fill the store in ``directory`` with ``containers`` memory-mode containers of
    0.1 CPU and 256 MiB: 100 a node on nodes of 24 CPUs and 128 GiB, registered as an
    agent's hello registers them (``on_hello``), in deployments ``web-<k>`` of 1,000 (container i of
    deployment i // 1,000 on node i % nodes). The records are the coordinator's own
    (``node_writes`` of allocation states, ``ContainerRecord``, ``DeploymentRecord``), committed
    100 nodes at a time."""
    from coordinator.deployments.node_records import node_writes
    from coordinator.deployments.records import container_key, deployment_key
    from coordinator.placement import Allocation, MiB, NodeState, Request
    from coordinator.placement.engine import memory_plan
    from coordinator.services.nodes import on_hello
    from coordinator.services.plan_nodes import node_from_inventory
    from coordinator.services.registry import NODE_PREFIX
    from coordinator.store import Txn
    from coordinator.store.sqlite import SqliteStore
    from shared.api.containers import ContainerRecord, HistoryEntry
    from shared.api.deployments import DeploymentRecord, DeploymentSpec, ResourcesSpec
    from shared.codec import to_json
    from shared.cpuset import CpuSet
    from shared.inventory import Cpu, Inventory, NumaNode

    nodes = -(-containers // 100)
    store = await SqliteStore.open(directory / "allot.db")
    resources = Request("0.1", 256 * MiB).normalized(100)
    plan = memory_plan(resources)
    now = time.time()
    puts: dict[str, bytes] = {}
    for k in range(-(-containers // 1000)):
        spec = DeploymentSpec(
            name=f"web-{k}",
            image="busybox",
            count=1000,
            resources=ResourcesSpec(cpu="0.1", memory="256Mi"),
            restart_policy="always",
        )
        record = DeploymentRecord(namespace="bench", spec=spec, created=now)
        puts[deployment_key("bench", spec.name)] = to_json(record)
    halves = [CpuSet(range(12)), CpuSet(range(12, 24))]
    for n in range(nodes):
        name = f"node-{n:05d}"
        inventory = Inventory(
            hostname=name,
            cpus=[Cpu(id=c, core=c, package=c // 12, numa=c // 12) for c in range(24)],
            online=CpuSet(range(24)),
            isolated=CpuSet(),
            reserved=CpuSet(),
            numa_nodes=[
                NumaNode(id=i, cpus=halves[i], memory=64 << 30, distances={0: 10, 1: 20})
                for i in (0, 1)
            ],
            memory=128 << 30,
        )
        record = on_hello(
            None, name=name, inventory=inventory, address="127.0.0.1", agent_version="b", now=now
        )
        puts[NODE_PREFIX + name] = to_json(record)
        view = node_from_inventory(name, inventory, share_base=100)
        ids = {f"bench-web-{i // 1000}-{i:06d}": i // 1000 for i in range(n, containers, nodes)}
        state = NodeState(
            name,
            view.cores,
            numa=view.numa,
            memory=view.memory,
            numa_memory=view.numa_memory,
            share_base=100,
            allocations={cid: Allocation(plan, resources) for cid in ids},
        )
        puts |= node_writes(None, state, inline=False)[0]
        for cid, k in ids.items():
            container = ContainerRecord(
                id=cid,
                namespace="bench",
                deployment=f"web-{k}",
                node=name,
                image="busybox",
                command=[],
                env={},
                labels={},
                restart_policy="always",
                cpu_bind=False,
                requests={"cpu": "0.1", "memory": "256Mi"},
                priority=0,
                pool="bench",
                created=now,
                capacity="",
                limits=state.limits(cid),
                history=[HistoryEntry(at=now, event="placed", detail=f"on {name}")],
            )
            puts[container_key(cid)] = to_json(container)
        if n % 100 == 99 or n == nodes - 1:
            await store.commit(Txn(puts=puts))
            puts = {}
    await store.close()


def http_benchmark(
    clients: int,
    seconds: int,
    connections: int,
    heap_containers: int = 0,
    gc_mode: str = "tuned",
    pool_period: float = 0.0,
) -> None:
    """A real coordinator on loopback, driven by wrk from another process."""
    heap = f", {heap_containers:,} containers loaded" if heap_containers else ""
    print(
        f"== HTTP: POST /v1/capacity, {clients:,} distinct clients, {connections} connections"
        f"{heap}, GC {gc_mode} =="
    )
    if shutil.which("wrk") is None:
        print("wrk is not installed (apt-get install -y wrk); skipping the HTTP benchmark")
        return
    token = secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as workdir:
        config = Path(workdir) / "coordinator.toml"
        config.write_text(
            f'join_token = "{secrets.token_urlsafe(24)}"\napi_tokens = ["{token}"]\n'
            # No agent is connected: the seeded nodes must not be lost while it runs.
            "lease_seconds = 3600\nlost_node_grace_seconds = 3600\n"
            '[[resources]]\nidentifier_glob = "bench"\ncapacity = 100000\n'
            '[resources.algorithm]\nkind = "FAIR_SHARE"\nlease_length = 300\n'
            "refresh_interval = 10\nlearning_mode_duration = 0\n"
            + (f"[pools]\nfair_share_update_period = {pool_period:g}\n" if pool_period else "")
        )
        if heap_containers:
            started = time.perf_counter()
            asyncio.run(_seed(Path(workdir), heap_containers))
            print(f"store filled in {time.perf_counter() - started:.1f} s")
        script = Path(workdir) / "capacity.lua"
        script.write_text(_WRK_SCRIPT % {"clients": clients, "token": token})
        log = (Path(workdir) / "coordinator.log").open("w+")
        coordinator = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _LAUNCHER,
                gc_mode,
                f"--config={config}",
                f"--data-dir={workdir}",
                "--port=0",
                "--log-level=info",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            started = time.perf_counter()
            url = _listening_url(coordinator, Path(workdir) / "coordinator.log")
            if heap_containers:
                print(f"coordinator ready in {time.perf_counter() - started:.1f} s")
            for phase in ("first requests + refreshes (cold)", "refreshes (steady state)"):
                figures = _wrk(url, script, seconds, connections)
                goal = figures["requests_per_s"] >= 5000 and figures["p99"] < 20
                print(
                    f"{phase:<34} {figures['requests_per_s']:8,.0f} req/s"
                    f"  p50 {figures['p50']:6.2f} ms  p99 {figures['p99']:6.2f} ms"
                    f"  non-2xx {figures['errors']:.0f}"
                    f"  {figures['requests_per_s'] / 1000:4.1f}x Doorman's 1,000/s target"
                    f"  goal (>= 5,000/s, p99 < 20 ms) {'met' if goal else 'MISSED'}"
                )
        finally:
            coordinator.terminate()
            coordinator.wait(timeout=60)
            log.seek(0)
            for line in log.read().splitlines():
                if line.startswith("gc generation"):
                    print(line)
            log.close()


def _listening_url(coordinator: subprocess.Popen[bytes], log: Path) -> str:
    for _ in range(2400):  # two minutes: a store of 100,000 containers loads in seconds
        match = re.search(r"coordinator listening url=(\S+)", log.read_text())
        if match:
            return match.group(1)
        if coordinator.poll() is not None:
            raise SystemExit(f"the coordinator exited:\n{log.read_text()}")
        time.sleep(0.05)
    raise SystemExit(f"the coordinator did not start:\n{log.read_text()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--block-sizes", action="store_true", help="also sweep block sizes")
    parser.add_argument("--http-only", action="store_true", help="only the HTTP benchmark")
    parser.add_argument("--clients", type=int, default=10_000, help="distinct HTTP clients")
    parser.add_argument("--seconds", type=int, default=10, help="length of each HTTP run")
    parser.add_argument("--connections", type=int, default=32, help="concurrent connections")
    parser.add_argument(
        "--heap-containers", type=int, default=0, help="containers loaded in the coordinator"
    )
    parser.add_argument(
        "--gc",
        choices=("tuned", "default"),
        default="tuned",
        help="the coordinator's start-up GC settings, or Python's defaults",
    )
    parser.add_argument(
        "--pool-update-seconds",
        type=float,
        default=0.0,
        help="the coordinator's fair_share_update_period (0: its default)",
    )
    args = parser.parse_args()
    if not args.http_only:
        engine_benchmark()
        if args.block_sizes:
            block_size_sweep()
    http_benchmark(
        args.clients,
        args.seconds,
        args.connections,
        args.heap_containers,
        args.gc,
        args.pool_update_seconds,
    )


if __name__ == "__main__":
    main()
