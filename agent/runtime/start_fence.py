"""The newest desired revision the agent may acknowledge: one that no create or start under
way goes against.

    fence = StartFence(wanted=runtime_still_wants)
    with fence.starting("c1"):           # around each create and start handed to the engine
        ...
    fence.received(revision)             # after each desired state is taken in
    revision = await fence.next(seen)    # the acknowledged revision once it is past ``seen``

Why: a create or start the agent has handed to the engine cannot be called back, and
Docker may finish it a second later. Each create and start is gated on the newest
desired state right before it goes to the engine (``docker_engine``), so once a desired
state is taken in, no new one begins for a container it leaves out; what remains is the
ones already under way. Revision R is acknowledged once none of those is of a container
that R leaves out (``wanted`` says no). The coordinator answers a delete only after the
node acknowledged the revision that left the container out, so no container of a deleted
deployment starts after the answer.

Counting starts at ``starting`` (before the gate runs on the engine's thread) and ending
it only once the engine call returned or failed, so a start is never both unseen here and
past its gate. Ids are unique for a container's life, so acknowledging a newer revision
covers the older ones.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Callable, Iterator


class StartFence:
    def __init__(self, wanted: Callable[[str], bool]) -> None:
        self._wanted = wanted  # True: the newest desired state still wants the container
        self._under_way: Counter[str] = Counter()  # container id -> creates/starts under way
        self._received: int | None = None
        self.acknowledged: int | None = None  # None until a desired state is acknowledged
        self._version = 0  # grows each time ``acknowledged`` changes
        self._changed = asyncio.Event()

    @contextlib.contextmanager
    def starting(self, container_id: str) -> Iterator[None]:
        """Around a create or start of ``container_id``, from before its gate until the
        engine has answered."""
        self._under_way[container_id] += 1
        try:
            yield
        finally:
            self._under_way[container_id] -= 1
            if not self._under_way[container_id]:
                del self._under_way[container_id]
            self._settle()

    def received(self, revision: int) -> None:
        """The desired state of ``revision`` is now the one held (the newest)."""
        self._received = revision
        self._settle()

    def blocking(self) -> list[str]:
        """The containers under way that the newest desired state leaves out, by id."""
        return sorted(cid for cid in self._under_way if not self._wanted(cid))

    async def next(self, seen: int) -> tuple[int, int]:
        """``(version, acknowledged revision)`` once the version is past ``seen``."""
        while self._version <= seen or self.acknowledged is None:
            self._changed.clear()
            await self._changed.wait()
        return self._version, self.acknowledged

    def _settle(self) -> None:
        if self._received is None or self._received == self.acknowledged or self.blocking():
            return
        self.acknowledged = self._received
        self._version += 1
        self._changed.set()
