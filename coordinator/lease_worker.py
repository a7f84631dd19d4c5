"""The lease API in a process of its own, so that a deploy storm never delays it.

    worker = await LeaseWorker.start(config, won_at=None)   # SQLite: the one coordinator
    worker = await LeaseWorker.start(config, won_at=42)     # etcd: the leader of key rev. 42
    worker.door                                             # how the main process calls it
    await worker.stop()

With ``lease_address`` set, the coordinator that leads starts this process (spawned, so it
shares no interpreter lock with the main one), and stops it when it stops leading. The
process owns the lease domain: it loads, decides (``lease_sequencer``), commits and serves
the lease API on ``lease_address``, with the coordinator's settings (tokens, TLS, header
timeouts, connection cap). Lease decisions read and write nothing but ``/leases/`` keys,
so no deployment decision waits for them, nor they for it.

Its store: on SQLite a file of its own beside the main one (``leases.db``), so its commits
never wait for the deployments' writer lock; the lease keys move there from the main
store at the first start with ``lease_address`` set, and back when it is unset
(``gather_leases``). On etcd the same prefix through a client of its own, each commit
fenced by the leader key at the leader's revision (markers tagged ``leases-``): once the
leader is deposed, the process's commits are refused and it stops.

The main process forwards its own lease routes to this process (``http.lease_forward``),
so a client may use either port; the low latency is the lease port's. The main process
reads what it shows of leases (metrics, the dashboard) from here too, with a token of
its own made at start (``door``).

Measured (bench/fleet.py, see the README): lease p99 during a deploy storm through the
lease port against the main port in the same run.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import secrets
import signal
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

import msgspec
from aiohttp import web

from coordinator.config import CoordinatorConfig
from coordinator.doors import DoorSite, open_doors
from coordinator.election import LEADER_KEY
from coordinator.services.lease_records import LEASES_PREFIX
from coordinator.store import Store, Txn
from coordinator.store.etcd import EtcdStore
from coordinator.store.fenced import FencedStore
from coordinator.store.sqlite import SqliteStore
from shared.logs import configure, get_logger

log = get_logger("allot.coordinator.leases")

START_SECONDS = 60.0  # loading a large lease table included
STOP_SECONDS = 10.0


class LeaseProcessFailed(Exception):
    """The lease process did not start (its port in use, say: its log says why)."""


@dataclass(frozen=True)
class LeaseDoor:
    """How the main process reaches the lease process: its URL and an admin token of the
    main process's own (the lease process accepts it beside the configured ones)."""

    url: str
    token: str


class LeaseWorker:
    def __init__(self, process: BaseProcess, door: LeaseDoor, link: Connection) -> None:
        self._process = process
        self.door = door
        # Held open while the process should run: it stops when this closes, so a main
        # process killed outright (SIGKILL) does not leave it holding the lease port.
        self._link = link

    @classmethod
    async def start(cls, config: CoordinatorConfig, *, won_at: int | None) -> LeaseWorker:
        """The lease process, serving once this returns. ``won_at``: on etcd, the
        revision at which this coordinator won the leader key (its fence)."""
        if config.store == "sqlite":
            await gather_leases(config)
        token = secrets.token_urlsafe(32)
        own = msgspec.structs.replace(config, api_tokens=[*config.api_tokens, token])
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        process = context.Process(
            target=run, args=(own, won_at, theirs), name="allot-leases", daemon=True
        )
        process.start()
        theirs.close()
        loop = asyncio.get_running_loop()
        url = await loop.run_in_executor(None, _ready, ours, process)
        log.info("lease process serving", url=url, pid=process.pid)
        return cls(process, LeaseDoor(url, token), ours)

    async def exited(self, within: float) -> bool:
        """Whether the process ends by itself (deposed, say) within ``within`` seconds."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._process.join, within)
        return not self._process.is_alive()

    async def stop(self) -> None:
        """SIGTERM (what is queued is committed first), SIGKILL past ``STOP_SECONDS``."""
        process = self._process
        if process.is_alive():
            process.terminate()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, process.join, STOP_SECONDS)
        if process.is_alive():
            log.warning("lease process did not stop; killed", pid=process.pid)
            process.kill()
            await loop.run_in_executor(None, process.join)
        self._link.close()


@contextlib.asynccontextmanager
async def lease_process(
    config: CoordinatorConfig, *, won_at: int | None
) -> AsyncIterator[LeaseDoor | None]:
    """While the block runs, the lease process if ``lease_address`` is set (its door;
    else None, and on SQLite the lease keys gathered back into the main store)."""
    if not config.lease_address:
        if config.store == "sqlite":
            await gather_leases(config)
        yield None
        return
    worker = await LeaseWorker.start(config, won_at=won_at)
    try:
        yield worker.door
    finally:
        await worker.stop()


def _ready(link: Connection, process: BaseProcess) -> str:
    """The URL the lease process sends once it serves; LeaseProcessFailed if it ends
    first, or does not serve within ``START_SECONDS`` (then it is killed)."""
    if link.poll(START_SECONDS):
        with contextlib.suppress(EOFError):
            url: str = link.recv()
            return url
    link.close()
    if process.is_alive():
        process.kill()
        raise LeaseProcessFailed(f"it did not serve within {START_SECONDS:g} s")
    raise LeaseProcessFailed(f"it ended with exit code {process.exitcode} before serving")


async def gather_leases(config: CoordinatorConfig) -> None:
    """SQLite: every lease key in the store that serves leases now (``leases.db`` with
    ``lease_address`` set, the main store without), moved there from the other if it
    holds any. The copy is committed before the source's keys are deleted, so a stop in
    between leaves them twice, and the next start deletes the stale copy."""
    main, own = config.store_path, config.lease_store_path
    source_path, target_path = (main, own) if config.lease_address else (own, main)
    if not source_path.exists():
        return
    source = await SqliteStore.open(source_path)
    target = await SqliteStore.open(target_path)
    try:
        moving = await source.range(LEASES_PREFIX)
        if not moving:
            return
        if not await target.range(LEASES_PREFIX):
            await target.commit(Txn(puts={entry.key: entry.value for entry in moving}))
            log.info("lease keys moved", keys=len(moving), to=str(target_path))
        await source.commit(Txn(deletes=tuple(entry.key for entry in moving)))
    finally:
        await source.close()
        await target.close()


def run(config: CoordinatorConfig, won_at: int | None, link: Connection) -> None:
    """The lease process's entry point: serve until SIGTERM, the main process gone
    (``link`` closed) or, on etcd, deposed."""
    configure(config.log_level)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the main process decides when it stops
    asyncio.run(_serve(config, won_at, link))


async def _serve(config: CoordinatorConfig, won_at: int | None, link: Connection) -> None:
    from coordinator.app import make_lease_app  # the app imports this module

    loop = asyncio.get_running_loop()
    stopping: asyncio.Future[str] = loop.create_future()
    loop.add_signal_handler(signal.SIGTERM, _stop, stopping, "stopped by the coordinator")
    store, opened = await _open_store(config, won_at, stopping)
    app = make_lease_app(config, store)
    doors = open_doors(config)
    runner = web.AppRunner(
        app, access_log=None, shutdown_timeout=2.0, keepalive_timeout=doors.keepalive_s
    )
    await runner.setup()
    try:
        host, port = config.lease_host_port
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listener = socket.create_server((host, port), family=family)
        await DoorSite(runner, listener, doors, ssl_context=config.server_tls_context()).start()
        bound_host, bound_port = listener.getsockname()[:2]
        scheme = "https" if config.tls else "http"
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        link.send(f"{scheme}://{shown}:{bound_port}")
        loop.add_reader(link.fileno(), _stop, stopping, "the coordinator is gone")
        log.info("lease process stopping", reason=await stopping)
    finally:
        await runner.cleanup()
        await opened.close()


def _stop(stopping: asyncio.Future[str], why: str) -> None:
    if not stopping.done():
        stopping.set_result(why)


async def _open_store(
    config: CoordinatorConfig, won_at: int | None, stopping: asyncio.Future[str]
) -> tuple[Store, SqliteStore | EtcdStore]:
    """The store the lease process commits to, and the one to close at the end."""
    if config.store == "sqlite":
        own = await SqliteStore.open(config.lease_store_path)
        return own, own
    assert won_at is not None, "on etcd the lease process commits for one leader"
    etcd = await EtcdStore.open(config.etcd)
    fenced = FencedStore(
        etcd,
        LEADER_KEY,
        won_at,
        witness=etcd,
        on_deposed=lambda why: _stop(stopping, f"deposed: {why}"),
        most_operations=config.etcd_max_txn_ops,
        tag="leases-",
    )
    return fenced, etcd
