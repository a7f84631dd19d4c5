"""Replacing a container with a new image in its allocation (placement spec 10).

    fresh = await service.replace(old_id, "busybox:2", None)   # commits the swap's start
    ...                                                         # the agent swaps them
    service.observe(node, status)       # "done" or "failed" for fresh: the swap ends

Starting a swap is one commit: the allocation is re-pointed to the new container (nothing
is planned or charged twice), the new record ``replaces`` the old, and the old record is
kept, ``replaced_by`` the new, holding nothing. The node's desired state holds only the
new container; its agent stops the old one, starts the new, and removes the old once the
new one has run for a while (``done``), or removes the new and starts the old again
(``failed``). Either report ends the swap in one more commit: the old record goes, or the
allocation is pointed back to it and the new record goes. A report that arrives again
while that commit is under way, or after it, changes nothing.
"""

from __future__ import annotations

import asyncio

import msgspec

from coordinator.deployments.ledger import Decision, Ledger, log
from coordinator.deployments.outcome import DeployRefused
from coordinator.deployments.records import ContainerRecord, HistoryEntry
from coordinator.deployments.translate import new_id, note_for
from coordinator.placement import replace
from shared.protocol import Status


class Swapping(Ledger):
    """Containers replaced by new ones, and the agents' word on how it went."""

    async def replace(
        self, container_id: str, image: str, command: list[str] | None
    ) -> ContainerRecord:
        """Start swapping in a new container with a new image (and command, if given)
        in ``container_id``'s allocation; the new record. 409 while that container is
        in a swap, as the new or the old one."""
        record = self._live(container_id)
        if record.replaces:
            raise DeployRefused(
                "invalid",
                "swap_under_way",
                f"{container_id} is still replacing {record.replaces}; wait until it is done",
                409,
                {"container": container_id, "replaces": record.replaces},
            )
        fresh = new_id(record.namespace, record.deployment)
        moved = replace(self._nodes[record.node], container_id, fresh)
        now = self._clock()
        entry = HistoryEntry(at=now, event="replaced", detail=f"{container_id} ({record.image})")
        change = Decision(nodes={record.node: moved.state})
        change.containers[fresh] = msgspec.structs.replace(
            record,
            id=fresh,
            image=image,
            command=record.command if command is None else command,
            created=now,
            history=[*record.history, entry],
            replaces=container_id,
        )
        swapping = HistoryEntry(at=now, event="replacing", detail=f"by {fresh}")
        change.containers[container_id] = msgspec.structs.replace(
            record, replaced_by=fresh, history=[*record.history, swapping]
        )
        change.notes.append(note_for("replaced", f"by {fresh} with image {image}", record))
        await self._apply(change)
        return self._containers[fresh]

    def observe(self, node: str, status: Status) -> None:
        super().observe(node, status)
        for reported in status.containers:
            record = self._containers.get(reported.id)
            ended = reported.replacing in ("done", "failed")
            if record is None or not ended or record.replaces not in self._replaced:
                continue
            if record.id not in self._ending:
                self._ending.add(record.id)
                task = asyncio.create_task(
                    self._end_swap(record.id, reported.replacing, reported.error)
                )
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _end_swap(self, container_id: str, outcome: str, error: str) -> None:
        """Commit the end of a swap as the agent reported it (module docstring)."""
        try:
            record = self._containers.get(container_id)
            old = self._replaced.get(record.replaces) if record is not None else None
            if record is None or old is None:
                return  # ended already, or deleted meanwhile
            now = self._clock()
            if outcome == "done":
                entry = HistoryEntry(at=now, event="swapped", detail=f"{old.id} removed")
                change = Decision(removed=[old.id])
                change.containers[container_id] = msgspec.structs.replace(
                    record, replaces="", history=[*record.history, entry]
                )
            else:
                back = replace(self._nodes[record.node], container_id, old.id)
                change = Decision(nodes={record.node: back.state}, removed=[container_id])
                entry = HistoryEntry(at=now, event="restored", detail=f"{container_id}: {error}")
                change.containers[old.id] = msgspec.structs.replace(
                    old, replaced_by="", history=[*old.history, entry]
                )
                why = f"replace by {container_id} failed, {old.id} runs again: {error}"
                change.notes.append(note_for("refused", why, old))
            await self._apply(change)
            log.info("swap ended", container=container_id, old=old.id, outcome=outcome)
        except Exception as error:  # the agent's next report tries again
            log.warning("swap not ended", container=container_id, outcome=outcome, error=error)
        finally:
            self._ending.discard(container_id)
