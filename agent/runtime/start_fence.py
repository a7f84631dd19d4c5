"""The newest desired revision the agent may acknowledge: one that no create or start at the
engine goes against.

    fence = StartFence(wanted=runtime_still_wants)
    with fence.starting("c1") as gate:   # around each create or start
        await engine.start(docker_id, gate=gate)
    fence.received(revision)             # after each desired state is taken in
    revision = await fence.next(seen)    # the acknowledged revision once it is past ``seen``

Why: a create or start the agent has handed to the engine cannot be called back, and
Docker may finish it seconds later. Each create and start goes through its ``gate`` on
the engine's thread right before the call, and the gate lets it through only while the
newest desired state still wants the container (``wanted``); so once a desired state is
taken in, no new one begins for a container it leaves out. What remains is the calls
already through their gate. Revision R is acknowledged once none of those is of a
container that R leaves out. The coordinator answers a delete only after the node
acknowledged the revision that left the container out, so no container of a deleted
deployment is created or started after the answer.

A call counts from inside its gate (under a lock, so a gate and ``received`` never pass
each other: a gate that said yes before a desired state was taken in is counted when
``received`` looks) until the engine answered on the event loop. A call still queued for
one of the engine's threads counts for nothing: its gate will say no. Ids are unique for
a container's life, so acknowledging a newer revision covers the older ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import Counter
from collections.abc import Callable, Iterator


class Gate:
    """One create or start's gate, called on the engine's thread; ``passed`` once it let
    the call through."""

    def __init__(self, fence: StartFence, container_id: str) -> None:
        self._fence = fence
        self.container_id = container_id
        self.passed = False

    def __call__(self) -> bool:
        return self._fence._let_through(self)


class StartFence:
    def __init__(self, wanted: Callable[[str], bool]) -> None:
        self._wanted = wanted  # True: the newest desired state still wants the container
        self._lock = threading.Lock()  # gates run on the engine's threads
        self._at_engine: Counter[str] = Counter()  # container id -> calls through their gate
        self._received: int | None = None
        self.acknowledged: int | None = None  # None until a desired state is acknowledged
        self._version = 0  # grows each time ``acknowledged`` changes
        self._changed = asyncio.Event()

    @contextlib.contextmanager
    def starting(self, container_id: str) -> Iterator[Gate]:
        """Around a create or start of ``container_id``: its gate, counted from when it
        lets the call through until the engine has answered (or failed)."""
        gate = Gate(self, container_id)
        try:
            yield gate
        finally:
            if gate.passed:
                with self._lock:
                    self._at_engine[container_id] -= 1
                    if not self._at_engine[container_id]:
                        del self._at_engine[container_id]
                self._settle()

    def received(self, revision: int) -> None:
        """The desired state of ``revision`` is now the one held (the newest)."""
        self._received = revision
        self._settle()

    def blocking(self) -> list[str]:
        """The containers at the engine that the newest desired state leaves out, by id."""
        with self._lock:
            return sorted(cid for cid in self._at_engine if not self._wanted(cid))

    async def next(self, seen: int) -> tuple[int, int]:
        """``(version, acknowledged revision)`` once the version is past ``seen``."""
        while self._version <= seen or self.acknowledged is None:
            self._changed.clear()
            await self._changed.wait()
        return self._version, self.acknowledged

    def _let_through(self, gate: Gate) -> bool:
        with self._lock:
            if not self._wanted(gate.container_id):
                return False
            self._at_engine[gate.container_id] += 1
            gate.passed = True
            return True

    def _settle(self) -> None:
        if self._received is None or self._received == self.acknowledged or self.blocking():
            return
        self.acknowledged = self._received
        self._version += 1
        self._changed.set()
