"""Commits per second on etcd, fenced as the leader commits, against SQLite on this disk.

    .venv/bin/python bench/etcd_commits.py [--seconds 5] [--clients 32] [--json FILE]
                                           [--engines sqlite,etcd,etcd-unmarked]
    .venv/bin/python bench/etcd_commits.py --smoke       # a fraction of a second each

Two engines, each fresh in a new temporary directory (under ``--workdir``, the current
directory by default, so on this disk):

- SQLite: ``SqliteStore`` as ``make run`` opens it (WAL, synchronous=FULL, group commit);
- etcd: a local 3-member cluster (``etcd_cluster``, every member fsyncing its own log on
  this disk), followed by a ``Replica`` and committed to through ``FencedStore`` after
  winning the leader key with ``Election``: every commit carries the leader's fence and
  its commit marker, as an elected coordinator's does;
- etcd-unmarked: the same, each commit carrying the fence alone (as before commit
  markers): what the markers cost is the difference.

Transaction shapes, with the value sizes of the records a fleet run stores (a container
record about 940 bytes, a node's allocations 3.7 kB, an event 180 bytes):

- decision: one node's allocations (compared on its mod revision and rewritten), one
  container and one event: a single-container deploy. Run by one client, one commit
  after another (each waits for the last, as one request does), and by ``--clients``
  clients at once (independent requests; SQLite folds them into group commits, etcd
  takes them over one HTTP/2 connection and batches its raft proposals);
- deployment: 1,000 containers and their events, 100 nodes' allocations compared and
  rewritten, and the deployment record: one 1,000-container POST, which the
  coordinator's sequencer commits one batch after another, so one client.

Each run commits for ``--seconds`` and prints commits/s and p50/p99 latency per engine,
and etcd over SQLite. The machine's load average is printed with the figures: on a
shared machine other jobs compete for the same disk and CPUs. Not part of ``make
test``; its smoke run is (``tests/bench/test_etcd_smoke.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from etcd_cluster import EtcdCluster, etcd_missing

from coordinator.election import LEADER_KEY, Election
from coordinator.store import Compare, CompareCreated, Store, Txn, TxnResult
from coordinator.store.delegating import DelegatingStore
from coordinator.store.etcd import EtcdStore
from coordinator.store.etcd_link import EtcdSettings
from coordinator.store.fenced import FencedStore
from coordinator.store.replica import Replica
from coordinator.store.sqlite import SqliteStore

CONTAINER = b"c" * 940
ALLOCATIONS = b"a" * 3700
EVENT = b"e" * 180
DEPLOYMENT = b"d" * 400
DEPLOY_CONTAINERS = 1000
DEPLOY_NODES = 100
SMOKE = {"seconds": 0.3, "clients": 4}


@dataclass(frozen=True)
class Run:
    engine: str
    shape: str
    clients: int
    commits: int
    seconds: float
    p50_ms: float
    p99_ms: float

    @property
    def per_s(self) -> float:
        return self.commits / self.seconds if self.seconds else math.nan


class Writer:
    """One client's keys, and the mod revision of each node it owns, for its compares."""

    def __init__(self, store: Store, name: str, nodes: int) -> None:
        self._store = store
        self._name = name
        self._nodes = [f"/allocations/{name}-n{n}" for n in range(nodes)]
        self._seen = dict.fromkeys(self._nodes, 0)
        self._count = 0

    async def commit(self, containers: int, nodes: int) -> None:
        """One decision: ``containers`` containers with an event each, on ``nodes`` of
        this writer's nodes, and a deployment record when there is more than one."""
        self._count += 1
        batch = f"{self._name}-{self._count}"
        touched = self._nodes[:nodes]
        puts = dict.fromkeys(touched, ALLOCATIONS)
        for i in range(containers):
            puts[f"/containers/{batch}-{i}"] = CONTAINER
            puts[f"/events/{batch}-{i}"] = EVENT
        if containers > 1:
            puts[f"/deployments/bench/{batch}"] = DEPLOYMENT
        compares = tuple(Compare(node, self._seen[node]) for node in touched)
        result = await self._store.commit(Txn(compares=compares, puts=puts))
        if not result.succeeded:
            raise RuntimeError(f"a commit of {batch} was refused: its compares did not hold")
        self._seen.update(dict.fromkeys(touched, result.revision))


async def measure(store: Store, engine: str, shape: str, clients: int, seconds: float) -> Run:
    """Commits of ``shape`` by ``clients`` clients, each one after another, for ``seconds``."""
    containers, nodes = (1, 1) if shape == "decision" else (DEPLOY_CONTAINERS, DEPLOY_NODES)
    writers = [Writer(store, f"{shape}-{clients}-{c}", nodes) for c in range(clients)]
    took: list[float] = []
    started = time.perf_counter()
    deadline = started + seconds

    async def client(writer: Writer) -> None:
        while time.perf_counter() < deadline:
            begun = time.perf_counter()
            await writer.commit(containers, nodes)
            took.append(time.perf_counter() - begun)

    await asyncio.gather(*(client(w) for w in writers))
    elapsed = time.perf_counter() - started
    return Run(
        engine,
        shape,
        clients,
        len(took),
        elapsed,
        percentile(took, 0.5) * 1e3,
        percentile(took, 0.99) * 1e3,
    )


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank q-quantile of ``values`` (NaN when empty)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


@contextlib.asynccontextmanager
async def sqlite(directory: Path) -> AsyncIterator[Store]:
    store = await SqliteStore.open(directory / "bench.db")
    try:
        yield store
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def leader_on_etcd(directory: Path) -> AsyncIterator[tuple[Replica, int]]:
    """A fresh 3-member etcd, followed by a replica, and the revision its leader key was
    won at (renewed meanwhile)."""
    cluster = EtcdCluster(directory / "etcd")
    try:
        cluster.start()
        store = await EtcdStore.open(EtcdSettings(endpoints=cluster.endpoints))
        replica = await Replica.follow(store)
        election = Election(store, replica, url="http://127.0.0.1:1", ttl=30)
        try:
            won = await election.campaign()
            holding = asyncio.create_task(election.hold(won))
            await replica.caught_up(won.won_at)
            try:
                yield replica, won.won_at
            finally:
                holding.cancel()
        finally:
            await replica.close()
    finally:
        cluster.stop()


@contextlib.asynccontextmanager
async def fenced_etcd(directory: Path) -> AsyncIterator[Store]:
    """The fenced store the leader uses."""
    async with leader_on_etcd(directory) as (replica, won_at):
        yield FencedStore(replica, LEADER_KEY, won_at, witness=replica.store, on_deposed=_deposed)


@contextlib.asynccontextmanager
async def unmarked_etcd(directory: Path) -> AsyncIterator[Store]:
    """The leader's commits with its fence alone, without a commit marker."""
    async with leader_on_etcd(directory) as (replica, won_at):
        yield FenceOnly(replica, CompareCreated(LEADER_KEY, won_at))


class FenceOnly(DelegatingStore):
    def __init__(self, replica: Replica, fence: CompareCreated) -> None:
        super().__init__(replica)
        self._fence = fence

    async def commit(self, txn: Txn) -> TxnResult:
        return await super().commit(replace(txn, compares=(*txn.compares, self._fence)))

    async def close(self) -> None:
        """The replica is ``leader_on_etcd``'s."""


def _deposed() -> None:
    raise RuntimeError("the benchmark's leader was deposed: its lease was not renewed")


async def run(args: argparse.Namespace, directory: Path) -> list[Run]:
    engines: list[tuple[str, Callable[[Path], contextlib.AbstractAsyncContextManager[Store]]]]
    every = {"sqlite": sqlite, "etcd": fenced_etcd, "etcd-unmarked": unmarked_etcd}
    engines = [(name, every[name]) for name in args.engines]
    cases = [("decision", 1), ("decision", args.clients), ("deployment", 1)]
    runs = []
    for engine, opening in engines:
        (directory / engine).mkdir()
        async with opening(directory / engine) as store:
            for shape, clients in cases:
                done = await measure(store, engine, shape, clients, args.seconds)
                print(
                    f"  {engine:6} {shape:10} {clients:3} client{'s' if clients > 1 else ' '}"
                    f" {done.per_s:8,.0f} commits/s  p50 {done.p50_ms:7.1f} ms"
                    f"  p99 {done.p99_ms:7.1f} ms  ({done.commits:,} in {done.seconds:.1f} s)",
                    flush=True,
                )
                runs.append(done)
    return runs


def print_ratios(runs: list[Run]) -> None:
    by = {(r.engine, r.shape, r.clients): r for r in runs}
    for over, named in (("sqlite", "SQLite"), ("etcd-unmarked", "etcd without markers")):
        if not any(engine == over for engine, _, _ in by):
            continue
        print(f"etcd (fenced) over {named}, commits/s:")
        for engine, shape, clients in by:
            if engine != "etcd" or (over, shape, clients) not in by:
                continue
            etcd, other = by[(engine, shape, clients)], by[(over, shape, clients)]
            ratio = etcd.per_s / other.per_s if other.per_s else math.nan
            print(f"  {shape:10} {clients:3} clients  {ratio:6.2f}x")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help=f"a short run: {SMOKE}")
    parser.add_argument("--seconds", type=float, default=5.0, help="per engine, shape, clients")
    parser.add_argument("--clients", type=int, default=32, help="concurrent small decisions")
    parser.add_argument("--workdir", type=Path, default=Path.cwd(), help="where stores go")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument(
        "--engines",
        type=lambda text: text.split(","),
        default=["sqlite", "etcd", "etcd-unmarked"],
        help="which engines, comma-separated (sqlite, etcd, etcd-unmarked)",
    )
    if "--smoke" in argv:
        parser.set_defaults(**SMOKE)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    missing = etcd_missing()
    if missing:
        print(f"etcd_commits: {missing}; run scripts/provision", file=sys.stderr)
        return 1
    load = os.getloadavg()
    print(f"host: {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    directory = Path(tempfile.mkdtemp(prefix="allot-commits-", dir=args.workdir))
    try:
        runs = asyncio.run(run(args, directory))
    finally:
        shutil.rmtree(directory)
    print_ratios(runs)
    if args.json is not None:
        figures = [asdict(r) | {"per_s": r.per_s} for r in runs]
        args.json.write_text(json.dumps({"load": load, "runs": figures}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
