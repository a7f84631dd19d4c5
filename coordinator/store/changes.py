"""The embedded store's watch: committed transactions, kept for a while and fanned out.

etcd keeps every revision until it is compacted; a process holding its store alone
keeps the last ``keep`` changing transactions in memory instead (nothing from before it
opened the file), and a watch from further back is ``WatchCompacted``:

    feed = ChangeFeed(revision=store_revision, keep=10_000)
    feed.publish(revision, events)          # after each commit, in revision order
    async for events in feed.follow("/nodes/", start_revision): ...

Each follower has its own unbounded queue, so a slow one costs memory, never a commit.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator

from coordinator.store import Event, WatchCompacted, check_prefix, check_watch_start

_Change = tuple[int, list[Event]]


class ChangeFeed:
    def __init__(self, *, revision: int, keep: int) -> None:
        self._history: deque[_Change] = deque(maxlen=keep)
        self._oldest = revision + 1  # the first revision whose changes are all kept
        self._followers: set[asyncio.Queue[_Change | None]] = set()

    def publish(self, revision: int, events: list[Event]) -> None:
        """Record the changes of the transaction committed at ``revision``."""
        if len(self._history) == self._history.maxlen:
            self._oldest = self._history[0][0] + 1
        change = (revision, sorted(events, key=lambda e: e.key))
        self._history.append(change)
        for queue in self._followers:
            queue.put_nowait(change)

    def forget_before(self, revision: int) -> None:
        while self._history and self._history[0][0] < revision:
            self._history.popleft()
        self._oldest = max(self._oldest, revision)

    def close(self) -> None:
        """End every follower's iteration."""
        for queue in self._followers:
            queue.put_nowait(None)

    async def follow(self, prefix: str, start_revision: int) -> AsyncGenerator[list[Event], None]:
        check_prefix(prefix)
        check_watch_start(start_revision)
        if start_revision < self._oldest:
            raise WatchCompacted(start_revision, self._oldest)
        # Both taken in one step (no await between), so no change falls between them.
        backlog = [change for change in self._history if change[0] >= start_revision]
        queue: asyncio.Queue[_Change | None] = asyncio.Queue()
        self._followers.add(queue)
        try:
            for kept in backlog:
                queue.put_nowait(kept)
            while (change := await queue.get()) is not None:
                events = [e for e in change[1] if e.key.startswith(prefix)]
                if events:
                    yield events
        finally:
            self._followers.discard(queue)
