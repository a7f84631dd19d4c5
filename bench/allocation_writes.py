"""What a deployment's commit writes as nodes fill up: one key per changed allocation
against the whole-node records the store held before.

    .venv/bin/python bench/allocation_writes.py [--nodes 100] [--deploys 40] [--count 250]

An in-process ``DeploymentService`` over a real SQLite store in a temporary directory and
``--nodes`` ready nodes of 24 CPUs and 128 GiB. ``--deploys`` deployments of ``--count``
small containers (0.05 CPU, 16 MiB, unbound, auto) fill the nodes one after another;
each deployment is one decision and one transaction. For each commit the bench counts the
bytes it put (keys and values) and, in the same run, the bytes the earlier layout would
have put for the same decision: every touched node's whole record, all its allocations
inline. Prints, at each quarter of the fill: the containers stored, the bytes per commit
of both and their ratio, and the deploy's time (decision and commit). Not part of
``make test``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

# Run as a script, Python puts bench/ first on the path; the repository root goes there.
_BENCH = Path(__file__).resolve().parent
sys.path[:] = [str(_BENCH.parent)] + [p for p in sys.path if Path(p or ".").resolve() != _BENCH]

import msgspec  # noqa: E402

from bench.deployments import NAMESPACE, service_on  # noqa: E402
from coordinator.deployments.node_records import (  # noqa: E402
    ALLOCATION_PREFIX,
    header,
    parse_key,
    stored_allocation,
)
from coordinator.placement import NodeState  # noqa: E402
from coordinator.store import Txn, TxnResult  # noqa: E402
from coordinator.store.sqlite import SqliteStore  # noqa: E402
from shared.api.deployments import DeploymentSpec, ResourcesSpec  # noqa: E402
from shared.codec import to_json  # noqa: E402


def spec(name: str, count: int) -> DeploymentSpec:
    return DeploymentSpec(
        name=name,
        image="busybox",
        count=count,
        resources=ResourcesSpec(cpu="0.05", memory="16Mi"),
        strategy="auto",
        restart_policy="always",
    )


def whole_record(state: NodeState) -> int:
    """The bytes of the node's record as the earlier layout stored it: its header with
    every allocation inline."""
    allocations = {cid: stored_allocation(a) for cid, a in state.allocations.items()}
    inline = msgspec.structs.replace(header(state), allocations=allocations)
    return len(ALLOCATION_PREFIX) + len(state.name) + len(to_json(inline))


async def run(nodes: int, deploys: int, count: int, directory: Path) -> None:
    store = await SqliteStore.open(directory / "allot.db")
    service = await service_on(store, [f"node-{i:04d}" for i in range(nodes)])
    commits: list[Txn] = []
    commit = store.commit

    async def counted(txn: Txn) -> TxnResult:
        commits.append(txn)
        return await commit(txn)

    store.commit = counted  # type: ignore[method-assign]
    print(
        f"{nodes} nodes, {deploys} deployments of {count} containers (0.05 CPU, 16 MiB,"
        " unbound, auto), SQLite"
    )
    print(f"{'containers':>10} {'ours B/commit':>14} {'whole nodes B':>14} {'ratio':>7} {'ms':>7}")
    rows: list[tuple[int, int, int, float]] = []
    for k in range(deploys):
        del commits[:]
        started = time.perf_counter()
        await service.deploy(NAMESPACE, spec(f"web-{k}", count))
        took = time.perf_counter() - started
        ours = sum(len(key) + len(value) for txn in commits for key, value in txn.puts.items())
        touched = {
            parse_key(key)[0]
            for txn in commits
            for key in txn.puts
            if key.startswith(ALLOCATION_PREFIX) and not parse_key(key)[1]
        }
        books = service._books
        earlier = ours - sum(
            len(key) + len(value)
            for txn in commits
            for key, value in txn.puts.items()
            if key.startswith(ALLOCATION_PREFIX)
        )
        earlier += sum(whole_record(books.nodes[node]) for node in touched)
        rows.append(((k + 1) * count, ours, earlier, took))
    await store.close()
    quarter = max(1, deploys // 4)
    for end in range(quarter, deploys + 1, quarter):
        window = rows[end - quarter : end]
        ours = statistics.mean(r[1] for r in window)
        earlier = statistics.mean(r[2] for r in window)
        took = statistics.median(r[3] for r in window)
        print(
            f"{window[-1][0]:>10,} {ours:>14,.0f} {earlier:>14,.0f}"
            f" {earlier / ours:>6.1f}x {took * 1e3:>7.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--deploys", type=int, default=40)
    parser.add_argument("--count", type=int, default=250)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="allot-bench-") as directory:
        asyncio.run(run(args.nodes, args.deploys, args.count, Path(directory)))


if __name__ == "__main__":
    main()
