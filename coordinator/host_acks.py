"""What the connected agents have acknowledged of their desired states, and the wait for it
that a removal's answer makes.

    acks = HostAcks(bound_seconds=2.0)
    acks.connected("n1", acknowledges=True)        # a session began (its hello says)
    acks.acknowledged("n1", 42)                    # a heartbeat's acknowledged_revision
    held = await acks.wait({"n1": 42})             # True: every node concerned acknowledged

An agent acknowledges revision R once no create or start of a container R leaves out is
under way on its host and none will begin (``agent.runtime.start_fence``). A delete,
scale-down, replace or drain is answered after the nodes concerned acknowledged the node
revision the decision wrote, so no container the answer says is gone starts afterwards.
The wait is bounded (``bound_seconds``): a stuck agent or engine delays an answer, never
holds it; past the bound the answer goes out and says the hosts had not all acknowledged.
A node whose agent is not connected, or does not acknowledge (an older agent), holds
nothing: it gets the new desired state in its next welcome, before it acts on any.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

from shared.logs import get_logger

log = get_logger("allot.coordinator.agents")


class HostAcks:
    def __init__(self, *, bound_seconds: float) -> None:
        self.bound_seconds = bound_seconds
        # Per connected node whose agent acknowledges: the newest revision it did (0: none
        # yet in this session).
        self._acknowledged: dict[str, int] = {}
        self._changed = asyncio.Event()  # replaced by a fresh one after each change

    def connected(self, node: str, *, acknowledges: bool) -> None:
        """A session of ``node`` began; its acknowledgements start again from none."""
        if acknowledges:
            self._acknowledged[node] = 0
        else:
            self._acknowledged.pop(node, None)
        self._tell()

    def disconnected(self, node: str) -> None:
        self._acknowledged.pop(node, None)
        self._tell()

    def acknowledged(self, node: str, revision: int) -> None:
        if node in self._acknowledged and revision != self._acknowledged[node]:
            self._acknowledged[node] = revision
            self._tell()

    def holding(self, wanted: Mapping[str, int]) -> list[str]:
        """The nodes of ``wanted`` (node -> revision) whose agent is connected and has not
        acknowledged that revision yet, by name."""
        acknowledged = self._acknowledged
        return sorted(
            node
            for node, revision in wanted.items()
            if node in acknowledged and acknowledged[node] < revision
        )

    async def wait(self, wanted: Mapping[str, int]) -> bool:
        """Until no node of ``wanted`` holds (True), or ``bound_seconds`` passed (False,
        logged with the nodes that still held)."""
        started = time.monotonic()
        deadline = started + self.bound_seconds
        while holding := self.holding(wanted):
            left = deadline - time.monotonic()
            if left <= 0:
                log.warning(
                    "answered before the hosts acknowledged",
                    nodes=",".join(holding),
                    waited_s=round(time.monotonic() - started, 3),
                )
                return False
            changed = self._changed
            try:
                await asyncio.wait_for(changed.wait(), left)
            except TimeoutError:
                continue
        return True

    def _tell(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()
