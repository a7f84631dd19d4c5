"""Keeping the leader's etcd lease alive from a thread of its own.

A leader's event loop was seen to stall for seconds during a 1,000-container deployment
(building, encoding and applying large commits). A renewal sent from that loop waits
behind the work, and after a whole TTL of such waits the only coordinator stepped down
under load. So the lease is renewed by a thread with its own event loop and its own
connection to etcd, on which nothing else runs:

    why = await LeaseKeeper(settings, lease, ttl=5).lost()   # e.g. "etcd says the lease expired"

``lost`` returns (on the caller's loop) once no renewal sent in the last ``ttl`` succeeded
or etcd says the lease is gone; cancelling it stops the renewals. A renewal counts from
when it was sent, not answered: etcd restarted the lease's clock no earlier than that.

The lease is liveness, not safety: a process that is paused (SIGSTOP) or cut off stops
renewing, its lease expires and another coordinator takes the key; whatever the old
leader commits after that is refused by the fence (``coordinator.store.fenced``), however
late its own loop hears of the loss.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

from coordinator.store import LeaseNotFound, StoreError
from coordinator.store.etcd import EtcdStore
from coordinator.store.etcd_link import EtcdLink, EtcdSettings
from shared.logs import get_logger

log = get_logger("allot.coordinator.election")


class LeaseKeeper:
    def __init__(self, settings: EtcdSettings, lease: int, *, ttl: int) -> None:
        self._settings = settings
        self._lease = lease
        self._ttl = ttl

    async def lost(self) -> str:
        """Renew the lease every ``ttl / 4`` until it is lost; why it was lost."""
        caller = asyncio.get_running_loop()
        answer: asyncio.Future[str] = caller.create_future()

        def report(why: str) -> None:
            caller.call_soon_threadsafe(_settle, answer, why)

        renewing = asyncio.run_coroutine_threadsafe(self._renew(report), _keepers_loop())
        try:
            return await answer
        finally:
            renewing.cancel()

    async def _renew(self, report: Callable[[str], None]) -> None:
        """On the keeper's own loop: renew until the lease is lost, then ``report`` why."""
        store = EtcdStore(EtcdLink(self._settings), 0)  # connects on its first call
        renewed = time.monotonic()
        try:
            while True:
                sent = time.monotonic()
                left = renewed + self._ttl - sent
                if left <= 0:
                    unrenewed = sent - renewed
                    report(f"the lease was not renewed for {unrenewed:.1f}s (TTL {self._ttl}s)")
                    return
                try:
                    async with asyncio.timeout(left):
                        await store.keep_alive(self._lease)
                except LeaseNotFound:
                    report("etcd says the lease expired")
                    return
                except (StoreError, TimeoutError) as error:
                    why = str(error) or f"no answer within {left:.1f}s"
                    log.warning("leader lease not renewed; trying again", reason=why)
                    await asyncio.sleep(min(0.1, left))  # a refusal may come at once
                    continue
                renewed = sent
                await asyncio.sleep(self._ttl / 4)
        except Exception as error:  # a bug: the leader must not go on unrenewed, unaware
            log.exception("renewing the leader lease failed")
            report(f"renewing the lease failed: {error!r}")
        finally:
            await store.close()


def _keepers_loop() -> asyncio.AbstractEventLoop:
    """The one event loop (and thread) every renewal runs on, started with the first and
    kept for the life of the process. A loop per leadership, closed when it ended, made
    gRPC print tracebacks: it binds its poller to every loop that used it, and called
    into the closed one when an RPC cancelled with it completed."""
    global _loop
    with _starting:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="lease-keeper", daemon=True).start()
        return _loop


_loop: asyncio.AbstractEventLoop | None = None
_starting = threading.Lock()


def _settle(answer: asyncio.Future[str], why: str) -> None:
    if not answer.done():
        answer.set_result(why)
