"""The state one decision sees and writes: the books, with the decisions before it in its
batch and its own writes on top.

    draft = Draft(books, context, batch.copy())
    record = draft.live(container_id)          # NotFound, or a conflict while it is swapped out
    draft.stop(record, "deleted on request")   # stopping: its allocation stays until its
                                               # agent reports it gone (``let_go``)
    draft.release(record)                      # its allocation goes back to its node now
    draft.put_container(fresh)
    draft.change                               # what the sequencer commits

Reads cost what they cost on the books plus the size of the draft's change: a draft of
one decision is small; a batch's is as large as the decisions in it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import msgspec

from coordinator.deployments.books import Books, DeploymentKey
from coordinator.deployments.context import Context
from coordinator.deployments.decision import Decision
from coordinator.deployments.kept_views import on_top
from coordinator.deployments.outcome import DeployRefused
from coordinator.deployments.records import PendingRecord
from coordinator.errors import NotFound, UnusableNode
from coordinator.placement import Node, NodeState, release
from coordinator.pools.on_demand import tree_pools
from coordinator.quotas import PreemptionRecord, Quota
from coordinator.services.events import Note
from shared.api.containers import ContainerRecord, HistoryEntry
from shared.api.deployments import DeploymentRecord
from shared.api.nodes import NodeRecord
from shared.protocol import Limits

T = TypeVar("T")
CORDONED = "cordoned"  # why placement leaves a cordoned node out (``skipped_nodes``)


class Draft:
    def __init__(self, books: Books, context: Context, change: Decision | None = None) -> None:
        self.books = books
        self.context = context
        self.change = Decision() if change is None else change
        self.dirty: set[str] = set()  # namespaces whose quota labels may have moved
        self._first_note = len(self.change.notes)  # where this decision's events begin

    # -- reads -------------------------------------------------------------------------

    def container(self, container_id: str) -> ContainerRecord | None:
        """A live container (not one being swapped out, nor one stopping)."""
        if container_id in self.change.removed:
            return None
        record = self.change.containers.get(container_id)
        if record is not None:
            return None if record.replaced_by or record.stopping else record
        return self.books.containers.get(container_id)

    def replaced(self, container_id: str) -> ContainerRecord | None:
        """A container being swapped out (``replaced_by`` says by which)."""
        if container_id in self.change.removed:
            return None
        record = self.change.containers.get(container_id)
        if record is not None:
            return record if record.replaced_by and not record.stopping else None
        return self.books.replaced.get(container_id)

    def stopping(self, container_id: str) -> ContainerRecord | None:
        """A container no longer desired whose agent has not reported it gone."""
        if container_id in self.change.removed:
            return None
        record = self.change.containers.get(container_id)
        if record is not None:
            return record if record.stopping else None
        return self.books.stopping.get(container_id)

    def stopping_on(self, node: str) -> list[ContainerRecord]:
        """The node's stopping containers, by id. O(them) + O(change)."""
        return self.stopping_on_nodes([node]).get(node, [])

    def stopping_on_nodes(self, nodes: Iterable[str]) -> dict[str, list[ContainerRecord]]:
        """Node -> its stopping containers, by id, for those of ``nodes`` that have any.
        O(nodes + their stopping containers) + O(change), once for all the nodes."""
        wanted = set(nodes)
        ids = {record.id for node in wanted for record in self.books.stopping_on(node)}
        ids.update(
            cid for cid, r in self.change.containers.items() if r.stopping and r.node in wanted
        )
        held: dict[str, list[ContainerRecord]] = {}
        for container_id in sorted(ids):
            record = self.stopping(container_id)
            if record is not None and record.node in wanted:
                held.setdefault(record.node, []).append(record)
        return held

    def holders_on(self, node: str) -> list[ContainerRecord]:
        """Every container that holds devices or extended resources on the node: the
        live ones and the stopping ones."""
        return [*self.on_node(node), *self.stopping_on(node)]

    def live(self, container_id: str) -> ContainerRecord:
        """The live container ``container_id``, which a request may change: ``NotFound``
        when there is none, a conflict ``swap_under_way`` while a new container replaces
        it, ``container_pending`` while it is pending."""
        record = self.container(container_id)
        if record is not None:
            return record
        stopping = self.stopping(container_id)
        if stopping is not None:
            raise DeployRefused(
                "invalid",
                "container_stopping",
                f"{container_id} is stopping ({stopping.stopping}): node {stopping.node}'s"
                " agent is removing it",
                "conflict",
                {"container": container_id, "node": stopping.node},
            )
        if self.pending(container_id) is not None:
            raise DeployRefused(
                "invalid",
                "container_pending",
                f"{container_id} is pending: no node holds it yet (GET it to see why);"
                " scale its deployment to change how many containers it counts",
                "conflict",
                {"container": container_id},
            )
        old = self.replaced(container_id)
        if old is None:
            raise NotFound(f"no container {container_id}", details={"container": container_id})
        raise DeployRefused(
            "invalid",
            "swap_under_way",
            f"{container_id} is being replaced by {old.replaced_by}; wait until the swap"
            f" is done, or change {old.replaced_by}",
            "conflict",
            {"container": container_id, "replaced_by": old.replaced_by},
        )

    def deployment(self, key: DeploymentKey) -> DeploymentRecord | None:
        if key in self.change.removed_deployments:
            return None
        return self.change.deployments.get(key) or self.books.deployments.get(key)

    def existing_deployment(self, key: DeploymentKey) -> DeploymentRecord:
        """``NotFound`` when the deployment is not there (deleted by a request before)."""
        deployment = self.deployment(key)
        if deployment is None:
            raise NotFound(f"no deployment {key[0]}/{key[1]}")
        return deployment

    def node_state(self, node: str) -> NodeState:
        """The node's allocation state; one that holds nothing yet is made from its
        inventory. ``NotFound`` for a node not registered, ``UnusableNode`` for one whose
        record cannot give one."""
        if node in self.change.deleted_nodes:
            raise NotFound(f"no node {node}: it was deleted", details={"node": node})
        state = self.change.nodes.get(node) or self.books.nodes.get(node)
        return state if state is not None else self.context.fresh_state(node)

    def record(self, node: str) -> NodeRecord | None:
        """The node's record as this draft leaves it (None: not registered, or deleted)."""
        if node in self.change.deleted_nodes:
            return None
        return self.change.records.get(node) or self.context.registry.get(node)

    def holds_allocations(self, node: str) -> bool:
        return node in self.change.nodes or node in self.books.nodes

    def on_node(self, node: str) -> list[ContainerRecord]:
        """The node's live containers, by id."""
        return self._select(self.books.ids("node", node), lambda r: r.node == node)

    def of_deployment(self, key: DeploymentKey) -> list[ContainerRecord]:
        """The deployment's live containers, oldest first."""
        mine = self._select(
            self.books.ids("deployment", key), lambda r: (r.namespace, r.deployment) == key
        )
        return sorted(mine, key=lambda c: (c.created, c.id))

    def pending(self, container_id: str) -> PendingRecord | None:
        if container_id in self.change.unpending:
            return None
        return self.change.pending.get(container_id) or self.books.pending.get(container_id)

    def pending_of(self, key: DeploymentKey) -> list[PendingRecord]:
        """The deployment's pending containers, oldest first."""
        ids = {p.id for p in self.books.pending_of(key)}
        ids.update(
            cid for cid, p in self.change.pending.items() if (p.namespace, p.deployment) == key
        )
        found = (self.pending(cid) for cid in ids)
        return sorted((p for p in found if p is not None), key=lambda p: (p.since, p.id))

    def all_pending(self) -> list[PendingRecord]:
        """Every pending container. O(pending)."""
        ids = {*self.books.pending, *self.change.pending}
        found = (self.pending(cid) for cid in sorted(ids))
        return [p for p in found if p is not None]

    def of_namespaces(self, namespaces: Iterable[str]) -> list[ContainerRecord]:
        return self._of_any("namespace", set(namespaces))

    def of_pools(self, pools: Iterable[str]) -> list[ContainerRecord]:
        return self._of_any("pool", set(pools))

    def _of_any(self, index: str, wanted: set[str]) -> list[ContainerRecord]:
        """The live containers whose ``index`` field (namespace or pool) is in ``wanted``."""
        ids: set[str] = set()
        for key in wanted:
            ids |= self.books.ids(index, key)
        return self._select(ids, lambda r: getattr(r, index) in wanted)

    def pool_requested(self, pool: str) -> tuple[int, int]:
        """What the pool's live containers ask for (CPU shares, bytes) once this draft's
        change is applied. O(1) + O(change)."""
        cpu, memory = self.books.pool_requested(pool)
        for container_id in {*self.change.containers, *self.change.removed}:
            before = self.books.charged(container_id)
            if before is not None and before[0] == pool:
                cpu, memory = cpu - before[1], memory - before[2]
            record = self.container(container_id)
            if record is not None and record.pool == pool:
                allocation = self.node_state(record.node).allocations.get(container_id)
                if allocation is not None:
                    cpu += allocation.resources.cpu_request
                    memory += allocation.resources.memory_request
        return cpu, memory

    def cordoned(self, node: str) -> bool:
        return self.change.cordons.get(node, node in self.books.cordoned)

    def quotas(self) -> list[Quota]:
        """Every quota once this draft is applied, by name."""
        quotas = {quota.name: quota for quota in self.context.quotas.all()}
        for name, quota in self.change.quotas.items():
            if quota is None:
                quotas.pop(name, None)
            else:
                quotas[name] = quota
        return [quotas[name] for name in sorted(quotas)]

    def configured_pools(self) -> dict[str, dict[str, Any]]:
        """The configured pools once this draft is applied. O(pools)."""
        pools = dict(self.context.pools.configured())
        for name, config in self.change.pools.items():
            if config is None:
                pools.pop(name, None)
            else:
                pools[name] = config
        return pools

    def pools(self) -> dict[str, dict[str, Any]]:
        """The pools of the tree once this draft is applied: the configured ones, then
        those created on demand as ``{}`` (``pools.on_demand``). O(pools)."""
        return tree_pools(self.configured_pools(), self.context.pools.on_demand_names())

    def preemptions(self) -> list[PreemptionRecord]:
        return [*self.books.preemptions, *self.change.preemptions]

    def candidates(self) -> list[NodeState]:
        """The allocation states of the ready, uncordoned nodes that can be used. The
        ready nodes and their fresh states are kept while the node records stay
        (``Context.ready_states``); only the states that allocations changed and the
        cordons are looked up: three dictionary reads a node, where making each node's
        state anew cost 115 ms a decision on 10,000 nodes."""
        change, nodes = self.change, self.books.nodes
        cordoned = self.books.cordoned
        if change.cordons:
            cordoned = {n for n in {*cordoned, *change.cordons} if self.cordoned(n)}
        states = []
        for name, fresh in self.context.ready_states():
            if name in cordoned:
                continue
            state = change.nodes.get(name) or nodes.get(name) or fresh
            if state is not None:
                states.append(state)
        return states

    def candidate_views(self) -> list[Node]:
        """``[state.view() for state in self.candidates()]``, from the views the books
        keep (``Books.views``) with this draft's node states on top: a copy of the kept
        list (C speed) plus O(the states the draft changed), where viewing every
        candidate is O(ready nodes) in Python. A draft that changes cordons, or gives a
        state to a node the kept list leaves out for want of one, views every candidate
        (the list is in the ready nodes' order)."""
        change = self.change
        if change.cordons:
            return [state.view() for state in self.candidates()]
        kept = self.books.views.of(self.context.ready_states(), self.books)
        if not kept[2].isdisjoint(change.nodes):
            return [state.view() for state in self.candidates()]
        return on_top(kept, change.nodes)[0]

    def skipped_nodes(self) -> dict[str, str]:
        """The ready nodes placement leaves out, and why, by name: those cordoned, and
        those whose records break today's rules (``NodeRegistry.unusable``)."""
        ready = self.context.ready_nodes()
        skipped = {node: CORDONED for node in ready if self.cordoned(node)}
        found = map(self._usable, self._ready_uncordoned())
        skipped |= {f.node: f.reason for f in found if isinstance(f, UnusableNode)}
        return dict(sorted(skipped.items()))

    def _ready_uncordoned(self) -> list[str]:
        return [node for node in self.context.ready_nodes() if not self.cordoned(node)]

    def _usable(self, node: str) -> NodeState | UnusableNode:
        problem = self.context.registry.unusable(node)
        if problem is not None:
            return UnusableNode(node, problem)
        try:
            return self.node_state(node)
        except UnusableNode as unusable:
            return unusable

    def _select(
        self, indexed: Iterable[str], matches: Callable[[ContainerRecord], bool]
    ) -> list[ContainerRecord]:
        ids = set(indexed)
        ids.update(cid for cid, record in self.change.containers.items() if matches(record))
        found = (self.container(cid) for cid in sorted(ids))
        return [record for record in found if record is not None and matches(record)]

    # -- writes ------------------------------------------------------------------------

    def attempt(self, step: Callable[[Draft], T]) -> T:
        """``step`` on a copy of this draft: its writes are kept when it returns, and
        thrown away when it raises. O(size of the change) for the copy."""
        trial = Draft(self.books, self.context, self.change.copy())
        trial._first_note = self._first_note
        value = step(trial)
        self.change, self.context = trial.change, trial.context
        self.dirty |= trial.dirty
        return value

    def put_container(self, record: ContainerRecord) -> None:
        self.change.removed.pop(record.id, None)
        self.change.containers[record.id] = record
        self.dirty.add(record.namespace)

    def put_pending(self, record: PendingRecord) -> None:
        self.change.put_pending(record)

    def drop_pending(self, container_id: str) -> None:
        self.change.drop_pending(container_id)

    def put_record(self, record: NodeRecord, *, hello: bool = False) -> None:
        """``record`` is its node's record now (``hello``: its agent said hello); what
        this draft reads of the node records from here on (placement, lost nodes) sees
        it (``Context.over``)."""
        self.change.put_record(record, hello=hello)
        self.context = self.context.over(self.change)

    def put_node(self, state: NodeState) -> None:
        self.change.nodes[state.name] = state

    def put_deployment(self, record: DeploymentRecord) -> None:
        self.change.put_deployment((record.namespace, record.spec.name), record)

    def note(self, note: Note) -> None:
        self.change.notes.append(note)

    def note_first(self, note: Note) -> None:
        """An event that comes before every other of this decision."""
        self.change.notes.insert(self._first_note, note)

    def stop(self, record: ContainerRecord, why: str) -> None:
        """The live container is no longer desired: its agent is told to remove it, and
        its allocation stays on its node until that agent reports it gone (``let_go``),
        so nothing else is placed on what it may still run on. Mid-swap, the container
        it replaces (which holds nothing) is removed with it: the agent removes both,
        and reports both gone in the same pass."""
        entry = HistoryEntry(at=self.context.clock(), event="stopping", detail=why)
        stopped = msgspec.structs.replace(
            record, stopping=why, replaces="", history=[*record.history, entry]
        )
        self.put_container(stopped)
        if record.replaces and self.replaced(record.replaces) is not None:
            self.change.remove(record.replaces, record.node)

    def release(self, record: ContainerRecord) -> None:
        """Give the container's allocation back to its node and remove it at once (its
        node is gone, or its agent reported it gone); mid-swap, the container it
        replaces goes with it."""
        state = self.node_state(record.node)
        if record.id in state.allocations:
            moved = release(state, record.id)
            self.put_node(moved.state)
            self.record_limits(moved.updates, record.node)
        self.change.remove(record.id, record.node)
        self.dirty.add(record.namespace)
        if record.replaces and self.replaced(record.replaces) is not None:
            self.change.remove(record.replaces, record.node)

    def record_limits(self, updates: dict[str, Limits], node: str) -> None:
        """New Docker settings of containers already there (a shared pool that moved, or
        a container's own reallocation). An unbound container keeps its CPU weight: its
        pool's fair share sets it (``pool_link.follow_pool_shares``), and placement's
        flat 1024 would undo that until the pools' next update moved it back."""
        now = self.context.clock()
        for container_id, limits in updates.items():
            record = self.change.containers.get(container_id) or self.container(container_id)
            if record is not None and not record.cpu_bind:
                limits = msgspec.structs.replace(limits, cpu_shares=record.limits.cpu_shares)
            if record is None or record.stopping or record.limits == limits:
                continue
            entry = HistoryEntry(at=now, event="limits", detail=f"shared pool on {node} moved")
            self.change.containers[container_id] = msgspec.structs.replace(
                record, limits=limits, history=[*record.history, entry]
            )
