"""Durable commits per second: the store's group commit against one transaction each.

    .venv/bin/python bench/store_commit.py [--commits 2000] [--clients 200]

``clients`` coroutines each commit ``commits / clients`` transactions, one after the
other, as the coordinator's request handlers would. Both sides write through SQLite in
WAL mode with synchronous=FULL (an fsync per SQLite transaction) in the same directory:

- group commit: ``SqliteStore``, which folds every transaction submitted while a batch
  is being written into the next one;
- naive: the same schema, one SQLite transaction per commit, on one thread.

It prints commits per second for each and their ratio. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from coordinator.store import Txn
from coordinator.store.sqlite import SqliteStore


async def group_commit(path: Path, clients: int, per_client: int) -> float:
    store = await SqliteStore.open(path)

    async def client(n: int) -> None:
        for i in range(per_client):
            await store.commit(Txn(puts={f"/bench/{n}/{i}": b"x" * 200}))

    started = time.perf_counter()
    await asyncio.gather(*(client(n) for n in range(clients)))
    elapsed = time.perf_counter() - started
    await store.close()
    return elapsed


async def one_transaction_each(path: Path, clients: int, per_client: int) -> float:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE kv (key TEXT PRIMARY KEY, value BLOB) WITHOUT ROWID")
    thread = ThreadPoolExecutor(max_workers=1)
    loop = asyncio.get_running_loop()

    def write(key: str) -> None:
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO kv VALUES (?, ?)", (key, b"x" * 200))
        db.execute("COMMIT")

    async def client(n: int) -> None:
        for i in range(per_client):
            await loop.run_in_executor(thread, write, f"/bench/{n}/{i}")

    started = time.perf_counter()
    await asyncio.gather(*(client(n) for n in range(clients)))
    elapsed = time.perf_counter() - started
    thread.shutdown()
    db.close()
    return elapsed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=200)
    args = parser.parse_args()
    per_client = max(1, args.commits // args.clients)
    total = per_client * args.clients
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as workdir:
        grouped = await group_commit(Path(workdir) / "grouped.db", args.clients, per_client)
        naive = await one_transaction_each(Path(workdir) / "naive.db", args.clients, per_client)
    print(f"{total} durable commits from {args.clients} concurrent clients")
    print(f"  group commit        {total / grouped:10.0f} commits/s  ({grouped:.2f} s)")
    print(f"  one txn per commit  {total / naive:10.0f} commits/s  ({naive:.2f} s)")
    print(f"  ratio               {naive / grouped:10.1f}x")


if __name__ == "__main__":
    asyncio.run(main())
