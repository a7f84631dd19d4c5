"""The deployments' books from the store: read whole at start, or kept current from its
watch by a standby coordinator, so that taking over costs no reading at all.

    books = await read_books(store)            # O(what the store holds)
    warm = await WarmBooks.build(replica)      # the same, in slices that let the loop run,
                                               # then each transaction the watch brings
    books = warm.take()                        # elected: the books, no longer followed (None
                                               # if following one transaction failed)

A transaction's events become one ``Decision`` (``change_of``) applied at its revision,
exactly as the leader applied it after committing; the books a standby takes are those
the leader had, at the revision the standby caught up to. Keys the deployments do not
own (nodes, leases, quotas, events) are passed over.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from itertools import chain
from typing import Protocol

import msgspec

from coordinator.bulk_load import FollowedAfterBuild, gc_paused, in_slices
from coordinator.deployments.books import Books
from coordinator.deployments.decision import Decision
from coordinator.deployments.node_records import (
    ALLOCATION_PREFIX,
    StoredAllocation,
    StoredNode,
    header,
    loaded,
    loaded_allocation,
    parse_key,
)
from coordinator.deployments.records import (
    CONTAINER_PREFIX,
    DEPLOYMENT_PREFIX,
    PENDING_PREFIX,
    PendingRecord,
)
from coordinator.deployments.sequencer import CORDON_PREFIX, PREEMPTIONS_KEY
from coordinator.placement import Allocation, NodeState
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
# Entries taken in at a time by a build: about 2 ms of work on a quiet machine, so a
# standby's slices (``bulk_load.SLICE_SECONDS``) are made of several.
PART_ENTRIES = 256

_decode_node: msgspec.json.Decoder[StoredNode] = json_decoder(StoredNode)
_decode_allocations: msgspec.json.Decoder[list[StoredAllocation]] = json_decoder(
    list[StoredAllocation]
)
_decode_container: msgspec.json.Decoder[ContainerRecord] = json_decoder(ContainerRecord)
_decode_pending: msgspec.json.Decoder[PendingRecord] = json_decoder(PendingRecord)
_stored_deployment = StoredDecoder(DeploymentRecord)
_decode_preemptions: msgspec.json.Decoder[list[PreemptionRecord]] = json_decoder(
    list[PreemptionRecord]
)
# Each stored allocation's value and its node's share base -> the allocation it loads as.
SharedAllocations = dict[tuple[bytes, int], Allocation]


class Change(Protocol):
    """One key as ``change_of`` takes it: a watch's ``Event``, or a read ``Entry`` (a put)."""

    @property
    def key(self) -> str: ...

    @property
    def value(self) -> bytes: ...

    @property
    def mod_revision(self) -> int: ...

    @property
    def deleted(self) -> bool: ...


async def read_books(store: Store) -> Books:
    """The books of everything ``store`` holds. O(what it holds)."""
    entries = [entry for prefix in PREFIXES for entry in await store.range(prefix)]
    preemptions = await store.get(PREEMPTIONS_KEY)
    if preemptions is not None:
        entries.append(preemptions)
    books = Books()
    with gc_paused():
        for _ in building(entries, books):
            pass
    return books


def building(entries: Iterable[Entry], books: Books) -> Iterator[None]:
    """Take ``entries`` (every key's put, in ``PREFIXES`` order, each prefix's in key
    order) into the empty ``books``, a part of at most about ``PART_ENTRIES`` at a time
    (one node's allocations are never split), yielding after each part. At the end the
    books equal those one ``change_of`` of every entry gives, applied at once.
    O(entries), in one pass; equal allocations load as one object (``change_of``)."""
    allocations: dict[str, int] = {}
    revisions: dict[str, int] = {}
    shared: SharedAllocations = {}
    for part in _parts(entries):
        change = change_of(part, books, shared)
        books.apply(change, 0)
        _note_revisions(part, change, books, allocations, revisions)
        yield
    # The revisions are the store's, not the 0 the apply stamped: each node header's,
    # and each node's desired state's (its allocations' or any of its containers').
    books.allocation_revision, books.node_revision = allocations, revisions


def _parts(entries: Iterable[Entry]) -> Iterator[list[Entry]]:
    part: list[Entry] = []
    for entry in entries:
        if len(part) >= PART_ENTRIES and not _same_node(entry, part[-1]):
            yield part
            part = []
        part.append(entry)
    if part:
        yield part


def _same_node(entry: Entry, other: Entry) -> bool:
    """Both are a node's allocation keys (its header's or an allocation's), of one node."""
    if not (entry.key.startswith(ALLOCATION_PREFIX) and other.key.startswith(ALLOCATION_PREFIX)):
        return False
    return parse_key(entry.key)[0] == parse_key(other.key)[0]


def _note_revisions(
    part: list[Entry],
    change: Decision,
    books: Books,
    allocations: dict[str, int],
    revisions: dict[str, int],
) -> None:
    """Note in ``allocations`` each node header's revision in ``part`` (applied as
    ``change``), and raise each node's in ``revisions`` to its newest allocation's or
    container's in ``part``."""
    for entry in part:
        key, revision = entry.key, entry.mod_revision
        if key.startswith(ALLOCATION_PREFIX):
            node, container_id = parse_key(key)
            if not container_id:
                allocations[node] = revision
        elif key.startswith(CONTAINER_PREFIX):
            record = change.containers.get(key.removeprefix(CONTAINER_PREFIX))
            assert record is not None, f"{key} was loaded with the rest of its part"
            node = record.node
            if record.stopping:  # its agent's reports count from here
                books.stop_revision[record.id] = revision
        else:
            continue
        if revision > revisions.get(node, 0):
            revisions[node] = revision


def change_of(
    events: Iterable[Change], books: Books, shared: SharedAllocations | None = None
) -> Decision:
    """What ``events`` (of one transaction, or every key's put) change in ``books``; a
    node whose allocation header was deleted is a deleted node.
    Preemption records are kept at once: they are no part of a ``Decision``.

    Equal stored allocations on nodes of one share base load as one ``Allocation``
    (immutable), noted in ``shared`` for the next call of a build: a deployment's
    unbound containers are stored alike, and a restart of 200,000 of them decoded and
    made 200,000 equal allocations (0.7 s of its CPU) where it now makes one."""
    change = Decision()
    shared = {} if shared is None else shared
    # Each node's events with the container id of their keys ("" for the header), each
    # key parsed once (three times before: 0.5 s of a 200,000-container load, profiled).
    of_nodes: defaultdict[str, list[tuple[str, Change]]] = defaultdict(list)
    for event in events:
        key = event.key
        if key.startswith(ALLOCATION_PREFIX):
            node, container_id = parse_key(key)
            of_nodes[node].append((container_id, event))
        elif key.startswith(CONTAINER_PREFIX):
            container_id = key.removeprefix(CONTAINER_PREFIX)
            if not event.deleted:
                record = _decode_container.decode(event.value)
                change.containers[record.id] = record
                continue
            held = _held(books, container_id)
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
    for node, node_events in of_nodes.items():
        if any(event.deleted and not container_id for container_id, event in node_events):
            change.delete_node(node)  # its header goes only with the node
            continue
        state = _node_state(node, node_events, books, shared)
        if state is not None:
            change.nodes[node] = state
    return change


def _node_state(
    node: str, events: list[tuple[str, Change]], books: Books, shared: SharedAllocations
) -> NodeState | None:
    """The node's state once ``events`` (its header's and allocations', each with the
    container id of its key, "" for the header's) are applied to
    the one ``books`` hold. A header holding its allocations inline holds all of them;
    the first header after it that does not comes with every allocation's key. Notes in
    ``books`` which nodes' headers hold them inline."""
    head: StoredNode | None = None
    put: dict[str, bytes] = {}
    gone: set[str] = set()
    for container_id, event in events:
        if not container_id:
            if not event.deleted:  # a deleted header is a deleted node (``change_of``)
                head = _decode_node.decode(event.value)
        elif event.deleted:
            gone.add(container_id)
        else:
            put[container_id] = event.value
    before = books.nodes.get(node)
    kept: dict[str, Allocation]
    if head is None:  # the coordinator writes a node's header with its allocations
        if before is None:
            log.warning("allocations of a node without a header", node=node)
            return None
        head, kept = header(before), dict(before.allocations)
    elif not head.allocations_apart:
        kept = {}  # the header holds every allocation
        books.inline_allocations.add(node)
    else:  # after no header or an inline one, every allocation's key comes with it
        inline = node in books.inline_allocations
        kept = dict(before.allocations) if before is not None and not inline else {}
        books.inline_allocations.discard(node)
    for container_id in gone:
        kept.pop(container_id, None)
    kept.update(_allocations(put, head.share_base, shared))
    return loaded(head, kept)


def _allocations(
    stored: dict[str, bytes], share_base: int, shared: SharedAllocations
) -> Iterator[tuple[str, Allocation]]:
    """Each container's allocation from its stored value, taken from ``shared`` when an
    equal value was loaded before; those that were not are decoded in one call (not one
    for each) and noted there."""
    new = [value for value in dict.fromkeys(stored.values()) if (value, share_base) not in shared]
    if new:
        decoded = _decode_allocations.decode(b"[" + b",".join(new) + b"]")
        for value, allocation in zip(new, decoded, strict=True):
            shared[(value, share_base)] = loaded_allocation(allocation, share_base)
    return ((cid, shared[(value, share_base)]) for cid, value in stored.items())


class WarmBooks:
    """Books kept current from a replica's watch until taken."""

    def __init__(self, replica: Replica) -> None:
        """Empty books following ``replica`` from now on; ``build`` fills them."""
        self._books = Books()
        self._following = FollowedAfterBuild(replica, self._follow)

    @classmethod
    async def build(cls, replica: Replica) -> WarmBooks:
        """The books of what ``replica`` holds, built in slices that let the event loop
        run (``bulk_load.in_slices``), then kept current. The transactions its watch
        brings meanwhile are taken in once the build is done."""
        entries = replica.scanning(*PREFIXES)
        preemptions = replica.entry(PREEMPTIONS_KEY)
        if preemptions is not None:
            entries = chain(entries, [preemptions])
        warm = cls(replica)  # no suspension since the scan
        await in_slices(building(entries, warm._books))
        warm._following.built()
        return warm

    @property
    def books(self) -> Books:
        """The books as followed so far, to read."""
        return self._books

    def take(self) -> Books | None:
        """The books, as of every transaction the replica has told, no longer followed;
        None if following one failed."""
        return self._books if self._following.stop() else None

    def _follow(self, events: list[Event]) -> None:
        ours = [event for event in events if event.key.startswith(_FOLLOWED)]
        if ours:
            revision = max(event.mod_revision for event in events)
            # A node's allocations written without its header (a step of a commit made
            # in several, ``coordinator.store.steps``): the header keeps its revision,
            # the one a commit compares and a fresh load reads.
            headless = _headless_nodes(ours)
            kept = {n: self._books.allocation_revision.get(n) for n in headless}
            self._books.apply(change_of(ours, self._books), revision)
            for node, header_at in kept.items():
                if header_at is not None and node in self._books.allocation_revision:
                    self._books.allocation_revision[node] = header_at


def _headless_nodes(events: list[Event]) -> set[str]:
    """The nodes whose allocations ``events`` change without their header."""
    allocations = [parse_key(e.key) for e in events if e.key.startswith(ALLOCATION_PREFIX)]
    return {node for node, cid in allocations if cid} - {
        node for node, cid in allocations if not cid
    }


def _held(books: Books, container_id: str) -> ContainerRecord | None:
    """A container the books hold: live, being swapped out, or stopping."""
    return (
        books.containers.get(container_id)
        or books.replaced.get(container_id)
        or books.stopping.get(container_id)
    )
