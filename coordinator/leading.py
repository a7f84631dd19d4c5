"""A coordinator on etcd: a warm standby until elected, the leader until it is not.

    await serve_on_etcd(config, listener, url, stopping, tls)

The process follows the whole store in memory (``Replica``) from the start and campaigns
for the leader key (``Election``). Meanwhile it serves the standby application
(``coordinator.standby``) and keeps the node records and the deployments' books current
from the watch (``Warm``), the parts of the state that grow with the fleet. Once elected
it waits for its copy to hold every change up to its win (each one the previous leader
committed came before it: the fence saw to that), then builds the full application on
that copy behind the fence: nodes and deployments on what it kept, the other services
(leases, quotas, pools) loaded from memory, not from etcd. Node leases start
afresh as on any start, so no node is lost for the takeover; capacity leases, pools,
quotas and containers are the store's. Agents reconnect and each gets its full desired
state in its welcome.

When leadership ends (the lease is not renewed for a TTL, the key is gone or another's,
a commit refused by the fence or of unknown outcome) the leader gives its key up and its
application is stopped at once: its connections are closed, nothing more is decided, and
whatever it was deciding is refused by the fence. The process then goes back to being a
standby in the same loop.

Both applications are served on duplicates of one listening socket, so a connection that
arrives while one is replaced by the other waits in the backlog instead of being refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar

from aiohttp import web

from coordinator.app import make_app
from coordinator.bulk_load import gc_paused
from coordinator.config import CoordinatorConfig
from coordinator.doors import Doors, DoorSite, open_doors
from coordinator.election import LEADER_KEY, Election, Leadership
from coordinator.keys import METRICS
from coordinator.lease_worker import lease_process
from coordinator.metrics_standby import standby_metrics
from coordinator.standby import make_standby_app
from coordinator.store import ClusterStore, StoreError
from coordinator.store.etcd import EtcdStore
from coordinator.store.fenced import Deposed, FencedStore
from coordinator.store.quorum import Quorum
from coordinator.store.replica import Replica
from coordinator.warm import Warm
from shared.logs import get_logger
from shared.sdnotify import notify

log = get_logger("allot.coordinator")
T = TypeVar("T")


async def serve_on_etcd(
    config: CoordinatorConfig,
    listener: socket.socket,
    url: str,
    stopping: asyncio.Future[None],
    tls: ssl.SSLContext | None = None,
) -> None:
    """Serve as standby or leader, in turn, until ``stopping`` is done; ``url`` is where
    the others send agents and clients while this coordinator leads. With ``tls`` both
    applications serve https and wss."""
    doors = open_doors(config)  # one for the process: the cap counts every site's
    store = await EtcdStore.open(config.etcd)
    with gc_paused():  # as a build's (``coordinator.warm``), for the same reasons
        replica = await Replica.follow(store)
    election = Election(store, replica, url=url, ttl=config.leader_ttl_seconds)
    log.info("store opened", store=config.store_location, revision=replica.revision, advertise=url)
    try:
        # One attempt before serving anything: a coordinator alone (or the first up)
        # leads at once, and nobody is told "no leader yet" meanwhile.
        won = await election.try_to_lead()
        warm: Warm | None = None
        while not stopping.done():
            if won is None:
                warm = await _kept_warm(replica, config.share_base)
                standby = make_standby_app(
                    config.join_token,
                    election.leader_elsewhere,
                    client_ca=bool(config.tls_client_ca_file),
                    metrics=standby_metrics(warm, doors),
                )
                async with _serving(standby, listener, tls, doors, shutdown_s=0.5):
                    log.info("standby", leader=await election.leader_elsewhere() or "none yet")
                    notify("READY=1", "STATUS=standby")
                    won = await _unless_stopping(election.campaign(), stopping)
                if won is None:
                    return
            await _lead(config, listener, tls, doors, url, replica, election, won, warm, stopping)
            won = warm = None
    finally:
        await replica.close()


async def _lead(
    config: CoordinatorConfig,
    listener: socket.socket,
    tls: ssl.SSLContext | None,
    doors: Doors,
    url: str,
    replica: Replica,
    election: Election,
    won: Leadership,
    warm: Warm | None,
    stopping: asyncio.Future[None],
) -> None:
    started = time.monotonic()
    log.warning("elected leader; taking over", key_revision=won.won_at)
    deposed: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    # Renewed from the start: loading a large store must not let the lease run out.
    losing = asyncio.create_task(_lost(election, won, deposed))
    compacting = asyncio.create_task(_compact_history(replica.store, config.etcd_compact_seconds))
    quorum = Quorum(replica.store) if isinstance(replica.store, EtcdStore) else None
    try:
        await replica.caught_up(won.won_at)
        fenced = FencedStore(
            replica,
            LEADER_KEY,
            won.won_at,
            witness=replica.store,
            on_deposed=deposed.set_result,
            quorum=quorum,
            most_operations=config.etcd_max_txn_ops,
        )
        await replica.caught_up(await fenced.finish_journals())
        kept = None if warm is None else warm.take()
        # The lease process commits fenced by the same key, and stops with the leadership.
        async with lease_process(config, won_at=won.won_at) as leases:
            app = make_app(config, store=fenced, warm=kept, leases=leases)
            app[METRICS].follow_connections(doors)
            async with _serving(app, listener, tls, doors, shutdown_s=5.0):
                log.warning(
                    "leading",
                    url=url,
                    revision=replica.revision,
                    state="kept by this standby" if kept else "read from the store",
                    took_s=round(time.monotonic() - started, 3),
                )
                notify("READY=1", "STATUS=leader")
                why = await _unless_stopping(losing, stopping)
                if why is None:
                    log.info("coordinator stopping")
                    notify("STOPPING=1")
                else:
                    log.warning("no longer the leader; standing by", reason=why)
                    # At once, not once the application has stopped: a standby need not wait
                    # for the TTL, and a commit of unknown outcome that is still in flight is
                    # refused by the fence.
                    await election.resign(won)
    finally:
        losing.cancel()
        compacting.cancel()
        if quorum is not None:
            await quorum.close()
        if stopping.done():  # after the application saved what it saves on stopping
            await election.resign(won)


async def _kept_warm(replica: Replica, share_base: int) -> Warm:
    """The node records and deployments, built from the replica once (O(the store), in
    slices between which the replica goes on following the store) and then kept
    current, so that a takeover need not."""
    started = time.monotonic()
    warm = await Warm.build(replica, share_base=share_base)
    log.info("state kept current for a takeover", took_s=round(time.monotonic() - started, 3))
    return warm


async def _compact_history(store: ClusterStore, every: float) -> None:
    """Every ``every`` seconds, compact etcd's history up to the revision of the round
    before: etcd keeps every revision until compacted, and a fill to 100,000 containers
    (when each commit rewrote the touched nodes' whole allocation records) raised etcd's
    NOSPACE alarm (its 2 GB quota) within minutes, after which it refuses every write. A
    standby's watch needs seconds of history; one further behind reads a snapshot again."""
    if every <= 0:
        return
    previous = store.revision
    while True:
        await asyncio.sleep(every)
        newest = store.revision
        if previous > 1:
            try:
                await store.compact(previous)
            except StoreError as error:  # already compacted (by etcd itself?), or etcd away
                log.info("etcd history not compacted", revision=previous, reason=error)
        previous = newest


async def _lost(election: Election, won: Leadership, deposed: asyncio.Future[str]) -> str:
    """Why leadership ended: the election's reason, or the fenced store's."""
    holding = asyncio.create_task(election.hold(won))
    try:
        done, _ = await asyncio.wait({holding, deposed}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        holding.cancel()
    return holding.result() if holding in done else deposed.result()


async def _unless_stopping(work: Awaitable[T], stopping: asyncio.Future[None]) -> T | None:
    task = asyncio.ensure_future(work)
    either: set[asyncio.Future[Any]] = {task, stopping}
    await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return None


@contextlib.asynccontextmanager
async def _serving(
    app: web.Application,
    listener: socket.socket,
    tls: ssl.SSLContext | None,
    doors: Doors,
    *,
    shutdown_s: float,
) -> AsyncIterator[None]:
    runner = web.AppRunner(
        app, access_log=None, shutdown_timeout=shutdown_s, keepalive_timeout=doors.keepalive_s
    )
    await runner.setup()
    try:
        await DoorSite(runner, listener.dup(), doors, ssl_context=tls).start()
        yield
    finally:
        try:
            await runner.cleanup()
        except Deposed as refused:  # what a deposed leader saves on stopping is refused
            log.info("the fence refused a write of the stopping leader", reason=refused)
        except Exception:
            log.exception("stopping the application failed")
