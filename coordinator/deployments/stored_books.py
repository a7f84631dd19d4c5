"""The deployments' books from the store: read whole at start, or kept current from its
watch by a standby coordinator, so that taking over costs no reading at all.

    books = await read_books(store)            # O(what the store holds)
    warm = WarmBooks(replica)                  # the same, then each transaction the watch brings
    books = warm.take()                        # elected: the books, no longer followed

A transaction's events become one ``Decision`` (``change_of``) applied at its revision,
exactly as the leader applied it after committing; the books a standby takes are those
the leader had, at the revision the standby caught up to. Keys the deployments do not
own (nodes, leases, quotas, events) are passed over.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from coordinator.deployments.books import Books
from coordinator.deployments.decision import Decision
from coordinator.deployments.node_records import ALLOCATION_PREFIX, StoredNode, loaded
from coordinator.deployments.records import (
    CONTAINER_PREFIX,
    DEPLOYMENT_PREFIX,
    PENDING_PREFIX,
    PendingRecord,
)
from coordinator.deployments.sequencer import CORDON_PREFIX, PREEMPTIONS_KEY
from coordinator.quotas import PreemptionRecord
from coordinator.store import Entry, Event, Store
from coordinator.store.replica import Replica
from shared.api.containers import ContainerRecord
from shared.api.deployments import DeploymentRecord
from shared.codec import json_decoder
from shared.logs import get_logger
from shared.unconstrained import StoredDecoder

log = get_logger("allot.coordinator.deployments")

PREFIXES = (ALLOCATION_PREFIX, CONTAINER_PREFIX, PENDING_PREFIX, CORDON_PREFIX, DEPLOYMENT_PREFIX)
_FOLLOWED = (*PREFIXES, PREEMPTIONS_KEY)

_decode_node: msgspec.json.Decoder[StoredNode] = json_decoder(StoredNode)
_decode_container: msgspec.json.Decoder[ContainerRecord] = json_decoder(ContainerRecord)
_decode_pending: msgspec.json.Decoder[PendingRecord] = json_decoder(PendingRecord)
_stored_deployment = StoredDecoder(DeploymentRecord)
_decode_preemptions: msgspec.json.Decoder[list[PreemptionRecord]] = json_decoder(
    list[PreemptionRecord]
)


async def read_books(store: Store) -> Books:
    """The books of everything ``store`` holds. O(what it holds)."""
    entries = [entry for prefix in PREFIXES for entry in await store.range(prefix)]
    preemptions = await store.get(PREEMPTIONS_KEY)
    if preemptions is not None:
        entries.append(preemptions)
    return _books_of(entries)


def _books_of(entries: list[Entry]) -> Books:
    books = Books()
    books.apply(change_of((_put(entry) for entry in entries), books), 0)
    # The revisions are the store's, not the 0 the apply stamped: each allocation key's,
    # and each node's desired state's (its allocation's or any of its containers').
    allocations: dict[str, int] = {}
    revisions: dict[str, int] = {}
    for entry in entries:
        if entry.key.startswith(ALLOCATION_PREFIX):
            node = entry.key.removeprefix(ALLOCATION_PREFIX)
            allocations[node] = entry.mod_revision
        elif entry.key.startswith(CONTAINER_PREFIX):
            container_id = entry.key.removeprefix(CONTAINER_PREFIX)
            held = books.containers.get(container_id) or books.replaced[container_id]
            node = held.node
        else:
            continue
        revisions[node] = max(revisions.get(node, 0), entry.mod_revision)
    books.allocation_revision, books.node_revision = allocations, revisions
    return books


def change_of(events: Iterable[Event], books: Books) -> Decision:
    """What ``events`` (of one transaction, or every key's put) change in ``books``.
    Preemption records are kept at once: they are no part of a ``Decision``."""
    change = Decision()
    for event in events:
        key = event.key
        if key.startswith(ALLOCATION_PREFIX):
            # The coordinator never deletes a node's allocation record.
            if not event.deleted:
                state = loaded(_decode_node.decode(event.value))
                change.nodes[state.name] = state
        elif key.startswith(CONTAINER_PREFIX):
            container_id = key.removeprefix(CONTAINER_PREFIX)
            if not event.deleted:
                record = _decode_container.decode(event.value)
                change.containers[record.id] = record
                continue
            held = books.containers.get(container_id) or books.replaced.get(container_id)
            if held is not None:
                change.remove(container_id, held.node)
        elif key.startswith(PENDING_PREFIX):
            if event.deleted:
                change.drop_pending(key.removeprefix(PENDING_PREFIX))
            else:
                change.put_pending(_decode_pending.decode(event.value))
        elif key.startswith(CORDON_PREFIX):
            change.cordons[key.removeprefix(CORDON_PREFIX)] = not event.deleted
        elif key.startswith(DEPLOYMENT_PREFIX):
            if event.deleted:
                namespace, _, name = key.removeprefix(DEPLOYMENT_PREFIX).partition("/")
                change.remove_deployment((namespace, name))
                continue
            deployment, broken = _stored_deployment.decode(event.value)
            if broken is not None:  # stored before a rule it breaks; kept all the same
                log.warning("stored deployment breaks today's rules", key=key, why=broken)
            change.put_deployment((deployment.namespace, deployment.spec.name), deployment)
        elif key == PREEMPTIONS_KEY:
            books.keep_preemptions([] if event.deleted else _decode_preemptions.decode(event.value))
    return change


class WarmBooks:
    """Books kept current from a replica's watch until taken. Built in one go, without
    a suspension, so no transaction falls between the replica's state and the first
    one followed."""

    def __init__(self, replica: Replica) -> None:
        self._replica = replica
        entries = [entry for prefix in PREFIXES for entry in replica.scan(prefix)]
        preemptions = replica.entry(PREEMPTIONS_KEY)
        if preemptions is not None:
            entries.append(preemptions)
        self._books = _books_of(entries)
        replica.listen(self._follow)

    def take(self) -> Books:
        """The books, as of every transaction the replica has told; no longer followed."""
        self._replica.unlisten(self._follow)
        return self._books

    def _follow(self, events: list[Event]) -> None:
        ours = [event for event in events if event.key.startswith(_FOLLOWED)]
        if ours:
            revision = max(event.mod_revision for event in events)
            self._books.apply(change_of(ours, self._books), revision)


def _put(entry: Entry) -> Event:
    return Event(entry.key, entry.value, entry.mod_revision)
