"""Letting go of stopping containers: a container no longer desired keeps its allocation
on its node until its agent reports it gone (DESIGN: "The books hold what a host still
runs"). A decider (``sequencer``) and the pure rule it follows.

    seen = listing.take(status)          # the ids the agent holds (status_listing)
    ids = reported_gone(books, "n1", witnessed(status), seen)
    placed = await sequencer.decide(lambda d: let_go(d, "n1", ids))

A report counts for a container only when its list of containers was taken after its
agent could no longer start that container: the report's revision (``witnessed``) is at
least the revision that made the container stopping. That is the revision the agent had
acknowledged when it began the look at Docker the report lists (``listed_after``: no
create or start of a container it leaves out was under way or could begin), or, from an
agent that does not say, its ``applied_revision`` (the desired revision its last pass
without an error carried out). The first is per container: a container that keeps
failing to start holds its own pass back, not the release of the others. An older
report -- sent before the agent saw the stop, or arriving late and out of order -- may
leave out a container the agent is about to start, so it frees nothing. A partial
status (only what changed) counts the same way, with the ids its agent holds taken from
its session's listing: the last full status's, moved by each partial one since; before
any full status in a session nothing is known, and it frees nothing. A lost node's
stopping containers are let go past its grace (``lifecycle.release_lost``).
"""

from __future__ import annotations

from collections.abc import Collection

from coordinator.deployments.books import Books
from coordinator.deployments.draft import Draft
from coordinator.deployments.pending import Pass, schedule
from coordinator.deployments.translate import note_for
from shared.protocol import Status


def witnessed(status: Status) -> int:
    """The revision a report's list of containers is good for (module docstring)."""
    return max(status.listed_after, status.applied_revision)


def reported_gone(
    books: Books, node: str, applied_revision: int, reported: Collection[str]
) -> list[str]:
    """The node's stopping containers that a report of ``reported`` ids, taken once its
    agent applied ``applied_revision``, shows gone, by id. O(the node's stopping ones)."""
    return [
        record.id
        for record in books.stopping_on(node)
        if record.id not in reported and books.stop_revision[record.id] <= applied_revision
    ]


def let_go(draft: Draft, node: str, ids: Collection[str]) -> Pass:
    """Release the allocations of the node's stopping containers ``ids`` (those still
    stopping there), then place what is pending where the room now fits it."""
    released = 0
    for container_id in sorted(ids):
        record = draft.stopping(container_id)
        if record is None or record.node != node:
            continue  # let go already, by an earlier report or the node's loss
        draft.release(record)
        draft.note(note_for("stopped", f"removed by node {node}'s agent", record))
        released += 1
    return schedule(draft) if released and draft.all_pending() else Pass()
