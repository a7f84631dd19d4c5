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
while that commit is under way, or after it, changes nothing. Both are deciders.
"""

from __future__ import annotations

import msgspec

from coordinator.deployments.draft import Draft
from coordinator.deployments.outcome import DeployRefused
from coordinator.deployments.translate import new_id, note_for
from coordinator.placement import replace
from shared.api.containers import ContainerRecord, HistoryEntry


def start_swap(
    draft: Draft, container_id: str, image: str, command: list[str] | None
) -> ContainerRecord:
    """Start swapping in a new container with a new image (and command, if given) in
    ``container_id``'s allocation; the new record. A conflict while that container is in a
    swap, as the new or the old one."""
    record = draft.live(container_id)
    if record.replaces:
        raise DeployRefused(
            "invalid",
            "swap_under_way",
            f"{container_id} is still replacing {record.replaces}; wait until it is done",
            "conflict",
            {"container": container_id, "replaces": record.replaces},
        )
    fresh = new_id(record.namespace, record.deployment)
    draft.put_node(replace(draft.node_state(record.node), container_id, fresh).state)
    now = draft.context.clock()
    entry = HistoryEntry(at=now, event="replaced", detail=f"{container_id} ({record.image})")
    new = msgspec.structs.replace(
        record,
        id=fresh,
        image=image,
        command=record.command if command is None else command,
        created=now,
        history=[*record.history, entry],
        replaces=container_id,
    )
    draft.put_container(new)
    swapping = HistoryEntry(at=now, event="replacing", detail=f"by {fresh}")
    draft.put_container(
        msgspec.structs.replace(record, replaced_by=fresh, history=[*record.history, swapping])
    )
    draft.note(note_for("replaced", f"by {fresh} with image {image}", record))
    return new


def end_swap(draft: Draft, container_id: str, outcome: str, error: str) -> bool:
    """End the swap as the agent reported it (module docstring); False when it ended
    already, or either container was deleted meanwhile."""
    record = draft.container(container_id)
    old = draft.replaced(record.replaces) if record is not None and record.replaces else None
    if record is None or old is None:
        return False
    now = draft.context.clock()
    if outcome == "done":
        entry = HistoryEntry(at=now, event="swapped", detail=f"{old.id} removed")
        draft.change.remove(old.id, old.node)
        draft.put_container(
            msgspec.structs.replace(record, replaces="", history=[*record.history, entry])
        )
        return True
    back = replace(draft.node_state(record.node), container_id, old.id)
    draft.put_node(back.state)
    draft.change.remove(container_id, record.node)
    draft.dirty.add(record.namespace)
    entry = HistoryEntry(at=now, event="restored", detail=f"{container_id}: {error}")
    draft.put_container(msgspec.structs.replace(old, replaced_by="", history=[*old.history, entry]))
    why = f"replace by {container_id} failed, {old.id} runs again: {error}"
    draft.note(note_for("refused", why, old))
    return True
