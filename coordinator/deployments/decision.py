"""What one decision changes: the writes a decider fills in, committed as a whole or not
at all (``sequencer``), then applied to the books (``books``).

    change = Decision()
    change.containers[record.id] = record      # new or changed
    change.remove(old_id, node)                # gone (its allocation released already)
    change.notes.append(Note("placed", ...))   # events committed with it
    change.put_pending(stand_in)               # a container counted but not placed

A decision never holds a container both changed and removed: ``remove`` drops a change of
the same container, and ``Draft.put_container`` a removal. A batch is one Decision too:
each decider writes into a ``copy`` of the batch so far, which becomes the batch when it
succeeds.

A batch decided while the one before it commits is written into a copy of that one;
``since`` gives back its own writes, which are what it changes once the one before is
applied:

    following = in_flight.copy()               # deciders write on top of it
    ...
    own = following.since(in_flight)           # committed after in_flight, on its revisions
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

from coordinator.deployments.records import PendingRecord
from coordinator.placement import NodeState
from coordinator.quotas import PreemptionRecord, Quota
from coordinator.services.events import Note
from shared.api.containers import ContainerRecord
from shared.api.deployments import DeploymentRecord
from shared.api.nodes import NodeRecord

K = TypeVar("K")
V = TypeVar("V")


@dataclass
class Decision:
    """Writes of one decision (or of a batch of them, merged in order)."""

    nodes: dict[str, NodeState] = field(default_factory=dict)
    containers: dict[str, ContainerRecord] = field(default_factory=dict)
    removed: dict[str, str] = field(default_factory=dict)  # container id -> its node
    deployments: dict[tuple[str, str], DeploymentRecord] = field(default_factory=dict)
    removed_deployments: set[tuple[str, str]] = field(default_factory=set)
    cordons: dict[str, bool] = field(default_factory=dict)  # node -> cordoned or not
    notes: list[Note] = field(default_factory=list)
    preemptions: list[PreemptionRecord] = field(default_factory=list)
    quotas: dict[str, Quota | None] = field(default_factory=dict)  # None: deleted
    pools: dict[str, dict[str, Any] | None] = field(default_factory=dict)  # None: deleted
    # Store the pool tree's state (its volumes), as it is when the batch commits.
    pool_state: bool = False
    pending: dict[str, PendingRecord] = field(default_factory=dict)
    unpending: set[str] = field(default_factory=set)  # pending ids placed or dropped
    # Set by a decision that may make room without removing anything (a node's capacity
    # grew); removals, uncordons and quota writes say so themselves (``may_make_room``).
    capacity_changed: bool = False
    # Nodes taken off the books: their records, allocations and cordons go (their
    # containers were released first, ``node_admin.delete_node``).
    deleted_nodes: set[str] = field(default_factory=set)
    # Node records put (a hello, a health change, a lost lease; ``registration``), and
    # the nodes among them whose agent said hello: no longer unusable, their lease anew.
    records: dict[str, NodeRecord] = field(default_factory=dict)
    hellos: set[str] = field(default_factory=set)

    def remove(self, container_id: str, node: str) -> None:
        self.containers.pop(container_id, None)
        self.removed[container_id] = node

    def put_deployment(self, key: tuple[str, str], record: DeploymentRecord) -> None:
        self.removed_deployments.discard(key)
        self.deployments[key] = record

    def remove_deployment(self, key: tuple[str, str]) -> None:
        self.deployments.pop(key, None)
        self.removed_deployments.add(key)

    def delete_node(self, node: str) -> None:
        self.nodes.pop(node, None)
        self.cordons.pop(node, None)
        self.records.pop(node, None)
        self.hellos.discard(node)
        self.deleted_nodes.add(node)

    def put_record(self, record: NodeRecord, *, hello: bool = False) -> None:
        """``record`` is the node's record now; ``hello``: its agent said hello."""
        self.records[record.name] = record
        if hello:
            self.hellos.add(record.name)

    def put_pending(self, record: PendingRecord) -> None:
        self.unpending.discard(record.id)
        self.pending[record.id] = record

    def drop_pending(self, container_id: str) -> None:
        self.pending.pop(container_id, None)
        self.unpending.add(container_id)

    def copy(self) -> Decision:
        """A copy a decider may write into, leaving this one as it was. O(size)."""
        return Decision(
            nodes=dict(self.nodes),
            containers=dict(self.containers),
            removed=dict(self.removed),
            deployments=dict(self.deployments),
            removed_deployments=set(self.removed_deployments),
            cordons=dict(self.cordons),
            notes=list(self.notes),
            preemptions=list(self.preemptions),
            quotas=dict(self.quotas),
            pools=dict(self.pools),
            pool_state=self.pool_state,
            pending=dict(self.pending),
            unpending=set(self.unpending),
            capacity_changed=self.capacity_changed,
            deleted_nodes=set(self.deleted_nodes),
            records=dict(self.records),
            hellos=set(self.hellos),
        )

    def since(self, base: Decision) -> Decision:
        """The writes of this decision that ``base`` does not hold, this one having been
        made by writing into ``base.copy()``: applying ``base`` and then these leaves what
        applying this one alone would. Writes are told apart by identity (a decision only
        adds, replaces or removes entries, never changes one in place); one that undoes
        a write of ``base`` is kept by its counterpart (a container removed is in
        ``removed``, a pending one placed in ``unpending``). ``capacity_changed`` is kept
        as this one has it: at worst one scheduler pass more. O(size)."""
        records = _newer(self.records, base.records)
        return Decision(
            nodes=_newer(self.nodes, base.nodes),
            containers=_newer(self.containers, base.containers),
            removed=_newer(self.removed, base.removed),
            deployments=_newer(self.deployments, base.deployments),
            removed_deployments=self.removed_deployments - base.removed_deployments,
            cordons=_newer(self.cordons, base.cordons),
            notes=self.notes[len(base.notes) :],
            preemptions=self.preemptions[len(base.preemptions) :],
            quotas=_newer(self.quotas, base.quotas),
            pending=_newer(self.pending, base.pending),
            unpending=self.unpending - base.unpending,
            capacity_changed=self.capacity_changed,
            deleted_nodes=self.deleted_nodes - base.deleted_nodes,
            records=records,
            # A hello always puts a record of its own, so this batch's hellos are among
            # its newer records (one helloed in ``base`` and written again here counts
            # as helloed again: at worst its lease is renewed once more).
            hellos={node for node in self.hellos if node in records},
            pools=_newer(self.pools, base.pools),
            # Stored by ``base`` already when it asked too; a config change stores it anyway.
            pool_state=self.pool_state and not base.pool_state,
        )

    def is_empty(self) -> bool:
        return not (
            self.nodes
            or self.containers
            or self.removed
            or self.deployments
            or self.removed_deployments
            or self.cordons
            or self.notes
            or self.preemptions
            or self.quotas
            or self.pools
            or self.pool_state
            or self.pending
            or self.unpending
            or self.deleted_nodes
            or self.records
        )

    def operations(self) -> int:
        """At most how many keys committing this writes or deletes: a container's record
        and its allocation, a note's event and the oldest one it pushes out, one key for
        each other write (a node's header, a deployment, ...). O(1)."""
        return (
            len(self.nodes)
            + 2 * (len(self.containers) + len(self.removed) + len(self.notes))
            + len(self.deployments)
            + len(self.removed_deployments)
            + len(self.cordons)
            + len(self.quotas)
            + (2 if self.pools else int(self.pool_state))  # the whole config, the state
            + len(self.pending)
            + len(self.unpending)
            + bool(self.preemptions)
            + 3 * len(self.deleted_nodes)  # its record, allocation header and cordon
            + len(self.records)
        )

    def may_make_room(self) -> bool:
        """Whether pending containers may fit once this is applied: something was removed,
        a node uncordoned or grown, a quota or a pool (its limits) written."""
        return bool(
            self.removed
            or self.removed_deployments
            or self.quotas
            or self.pools
            or self.capacity_changed
            or not all(self.cordons.values())
        )

    def touched_nodes(self) -> set[str]:
        """The nodes whose desired state this changes."""
        nodes = set(self.nodes) | set(self.removed.values())
        nodes.update(record.node for record in self.containers.values())
        return nodes


def _newer(mine: dict[K, V], base: dict[K, V]) -> dict[K, V]:
    """The entries of ``mine`` that are not ``base``'s very own."""
    missing = object()
    return {key: value for key, value in mine.items() if base.get(key, missing) is not value}
