"""A node's record changed by what its agent says or stops saying: the hello, the problems
a status reports, the lease that runs out. Each function is a decider (``sequencer``):
the record goes into the draft with what follows from it -- the capacity that follows a
changed inventory, a lost node's event and, with no grace, its containers' release -- so
that all of it is one commit, compared on the record's revision the registry keeps, and
applied to the registry only once committed (``NodeRegistry.apply``).

    previous, record = hello(draft, "n1", inventory=..., address=..., agent_version=..., now=t)
    report_problems(draft, "n1", ["nvml unreadable"], now=t)
    lost = mark_lost(draft, {"n1": (seen_record, 15.0)}, now=t, release=False)

The transitions themselves are ``services.nodes``'s, pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from coordinator.deployments import lifecycle, node_admin
from coordinator.deployments.draft import Draft
from coordinator.deployments.outcome import DeployRefused
from coordinator.services.events import Note
from coordinator.services.nodes import on_hello, on_lease_expired, on_problems
from shared.api.nodes import NodeHealth, NodeRecord
from shared.inventory import Inventory

Due = Mapping[str, tuple[NodeRecord, float]]  # node -> its record when due, lease length


def hello(
    draft: Draft,
    name: str,
    *,
    inventory: Inventory,
    address: str,
    agent_version: str,
    now: float,
) -> tuple[NodeRecord | None, NodeRecord]:
    """The node's record before (None: a new node) and after its agent said hello with
    ``inventory`` (which passed every check). A node holding allocations whose hardware
    changed has its capacity follow it (``node_admin.follow_inventory``), in the same
    draft: no decision between the two sees the new record with the old capacity."""
    if name in draft.change.deleted_nodes:
        raise DeployRefused(
            "conflict",
            "node_being_deleted",
            f"node {name} is being deleted; its agent is to say hello again",
            "conflict",
            {"node": name},
        )
    previous = draft.record(name)
    record = on_hello(
        previous,
        name=name,
        inventory=inventory,
        address=address,
        agent_version=agent_version,
        now=now,
    )
    draft.put_record(record, hello=True)
    if previous is not None and previous.inventory != inventory:
        node_admin.follow_inventory(draft, name, previous.inventory, inventory)
    return previous, record


def report_problems(draft: Draft, name: str, problems: Sequence[str], *, now: float) -> None:
    """The node's health as its agent's problems say (none: ready); nothing for a node
    deleted under its session (its agent says hello again) or a lost one."""
    previous = draft.record(name)
    if previous is None:
        return
    record = on_problems(previous, problems, now=now)
    if record is not previous:
        draft.put_record(record)


def mark_lost(draft: Draft, due: Due, *, now: float, release: bool) -> list[NodeRecord]:
    """Mark lost each node of ``due`` whose record is still the one it had when its lease
    ran out, each with a ``lost`` event; with ``release`` (no grace), their containers
    are released in the same draft. A node whose record a decision before this one
    changed is left (a hello renewed its lease; after another change it is due again:
    ``NodeRegistry.due_again``). The new records, by name."""
    lost: list[NodeRecord] = []
    for name, (seen, lease_seconds) in sorted(due.items()):
        record = draft.record(name)
        if record is not seen or record.state == NodeHealth.LOST:
            continue
        gone = on_lease_expired(record, lease_seconds=lease_seconds, now=now)
        draft.put_record(gone)
        draft.note(Note("lost", gone.reason, node=name))
        lost.append(gone)
    if release and lost:
        lifecycle.release_nodes(draft, [record.name for record in lost], 0.0)
    return lost
