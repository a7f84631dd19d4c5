"""The committed state of deployments, as the store holds it, with its indexes.

    books = Books(share_base=100)
    books.load(...)                            # at start, from the store
    books.apply(change, revision)              # only after ``change`` was committed
    books.on_node("n1"), books.of_deployment(("team-a", "web")), books.pool_requested("p")

Invariants (``check_indexes`` rebuilds every index from scratch and compares; the tests run
it after random sequences of decisions):

1. ``containers`` holds the live containers, ``replaced`` those being swapped out
   (``replaced_by`` set), ``stopping`` those no longer desired whose agent has not
   reported them gone (``stopping`` set; each keeps its allocation on its node); no id
   is in two of them, and ``stop_revision`` holds exactly the stopping ids.
2. Each index holds exactly the live containers with that key: ``by_node``,
   ``by_deployment``, ``by_namespace``, ``by_pool``.
3. ``requested[pool]`` is the sum over the pool's live containers of what their node's
   allocation asks for (CPU in shares of ``share_base``, memory in bytes).
4. ``observed`` holds only live containers.
5. ``pending`` holds the containers counted but not placed; ``pending_of`` indexes them
   by deployment. No pending id is a container's id.
6. ``stopping_on`` and ``stopping_of`` index exactly the stopping containers by node and
   by deployment, and each stopping container's allocation is on its node's state.
7. ``tally`` counts each live container once, in the state its record and ``observed``
   give (``deployments.tally``).
8. ``requests`` counts each live container once, under its namespace and what it asks
   for (``deployments.request_tally``): what the quotas' usage is read from.

Nothing here decides or does I/O; every read costs O(the answer), never O(all containers).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any, TypeVar

from coordinator.deployments.decision import Decision
from coordinator.deployments.kept_views import KeptViews
from coordinator.deployments.records import PendingRecord
from coordinator.deployments.request_tally import RequestTally
from coordinator.deployments.tally import StateTally
from coordinator.placement import NodeState
from coordinator.quotas import PreemptionRecord
from shared.api.containers import ContainerRecord
from shared.api.deployments import DeploymentRecord
from shared.protocol import ContainerStatus

DeploymentKey = tuple[str, str]
K = TypeVar("K")


class Books:
    def __init__(self) -> None:
        self.nodes: dict[str, NodeState] = {}
        self.containers: dict[str, ContainerRecord] = {}
        self.replaced: dict[str, ContainerRecord] = {}
        self.stopping: dict[str, ContainerRecord] = {}
        # The revision that made each stopping container so: its agent's report counts
        # as "gone" only once the agent says it applied a desired state that recent.
        self.stop_revision: dict[str, int] = {}
        self._stopping_by_node: defaultdict[str, set[str]] = defaultdict(set)
        self._stopping_by_deployment: defaultdict[DeploymentKey, set[str]] = defaultdict(set)
        self.deployments: dict[DeploymentKey, DeploymentRecord] = {}
        self.cordoned: set[str] = set()
        # The candidates' placement views, told of every node state, cordon and deletion
        # taken in.
        self.views = KeptViews()
        self.preemptions: list[PreemptionRecord] = []  # within the cool-down (quotas 8.3)
        self.observed: dict[str, ContainerStatus] = {}
        self.pending: dict[str, PendingRecord] = {}
        self._pending_by_deployment: defaultdict[DeploymentKey, set[str]] = defaultdict(set)
        # The store revision of each node's allocation key, which a commit compares, and
        # the revision of the node's desired state (its allocation or any of its
        # containers), which only grows and goes to its agent.
        self.allocation_revision: dict[str, int] = {}
        self.node_revision: dict[str, int] = {}
        # Nodes whose stored header still holds their allocations inline (stored before
        # each had a key of its own): their next write stores every allocation.
        self.inline_allocations: set[str] = set()
        self._by_node: defaultdict[str, set[str]] = defaultdict(set)
        self._by_deployment: defaultdict[DeploymentKey, set[str]] = defaultdict(set)
        self._by_namespace: defaultdict[str, set[str]] = defaultdict(set)
        self._by_pool: defaultdict[str, set[str]] = defaultdict(set)
        self._requested: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])
        self._charged: dict[str, tuple[str, int, int]] = {}  # id -> (pool, cpu, memory)
        # Grows whenever one of the pool's (the namespace's) containers comes, goes or
        # changes.
        self._pool_version: defaultdict[str, int] = defaultdict(int)
        self._namespace_version: defaultdict[str, int] = defaultdict(int)
        self.tally = StateTally()
        self.requests = RequestTally()
        self._indexes: dict[str, defaultdict[Any, set[str]]] = {
            "node": self._by_node,
            "deployment": self._by_deployment,
            "namespace": self._by_namespace,
            "pool": self._by_pool,
        }

    # -- reads -------------------------------------------------------------------------

    def ids(self, index: str, key: object) -> frozenset[str]:
        """The live containers' ids under ``key`` in ``index``: node, deployment (a
        (namespace, name) pair), namespace or pool. O(answer)."""
        found = self._indexes[index].get(key)
        return frozenset(found) if found else frozenset()

    def on_node(self, node: str) -> list[ContainerRecord]:
        """The node's live containers, by id."""
        return [self.containers[cid] for cid in sorted(self._by_node.get(node, ()))]

    def of_deployment(self, key: DeploymentKey) -> list[ContainerRecord]:
        return [self.containers[cid] for cid in sorted(self._by_deployment.get(key, ()))]

    def pending_of(self, key: DeploymentKey) -> list[PendingRecord]:
        """The deployment's pending containers, by id. O(answer)."""
        ids = self._pending_by_deployment.get(key, ())
        return [self.pending[cid] for cid in sorted(ids)]

    def stopping_on(self, node: str) -> list[ContainerRecord]:
        """The node's stopping containers, by id. O(answer)."""
        return [self.stopping[cid] for cid in sorted(self._stopping_by_node.get(node, ()))]

    def stopping_of(self, key: DeploymentKey) -> list[ContainerRecord]:
        """The deployment's stopping containers, by id. O(answer)."""
        ids = self._stopping_by_deployment.get(key, ())
        return [self.stopping[cid] for cid in sorted(ids)]

    def counts(self, key: DeploymentKey) -> tuple[int, int]:
        """How many live and how many pending containers the deployment has. O(1)."""
        live = self._by_deployment.get(key, ())
        return len(live), len(self._pending_by_deployment.get(key, ()))

    def namespaces(self) -> list[str]:
        return sorted(ns for ns, ids in self._by_namespace.items() if ids)

    def pools(self) -> list[str]:
        return sorted(pool for pool, ids in self._by_pool.items() if ids)

    def pool_requested(self, pool: str) -> tuple[int, int]:
        """What the pool's live containers ask for: CPU shares, memory bytes. O(1)."""
        cpu, memory = self._requested.get(pool, (0, 0))
        return cpu, memory

    def pool_version(self, pool: str) -> int:
        """A number that grows whenever one of the pool's live containers comes, goes or
        changes: two equal readings mean the same containers, as they were. O(1)."""
        return self._pool_version.get(pool, 0)

    def namespace_version(self, namespace: str) -> int:
        """As ``pool_version``, for the namespace's live containers. O(1)."""
        return self._namespace_version.get(namespace, 0)

    def charged(self, container_id: str) -> tuple[str, int, int] | None:
        """A live container's pool and what its allocation asks for (CPU shares, bytes)."""
        return self._charged.get(container_id)

    # -- writes ------------------------------------------------------------------------

    def apply(self, change: Decision, revision: int) -> set[str]:
        """Take in ``change``, committed at ``revision``; the nodes whose desired state
        moved. O(size of the change)."""
        touched = change.touched_nodes()
        self.views.moved(change.nodes, relisted=bool(change.cordons or change.deleted_nodes))
        self.nodes.update(change.nodes)
        for container_id in change.removed:
            self._unindex(container_id)
            self._unstop(container_id)
            self.containers.pop(container_id, None)
            self.replaced.pop(container_id, None)
            self.observed.pop(container_id, None)
        for container_id, record in change.containers.items():
            self._unindex(container_id)
            if record.stopping:
                self.containers.pop(container_id, None)
                self.replaced.pop(container_id, None)
                self.observed.pop(container_id, None)
                self._stop(record, revision)
            elif record.replaced_by:
                self.containers.pop(container_id, None)
                self.replaced[container_id] = record
                self.observed.pop(container_id, None)
            else:
                self.replaced.pop(container_id, None)
                self.containers[container_id] = record
        # Charged after every node moved: a container's allocation is on its node's new
        # state. Only the changed containers: what another container asks for is in its
        # allocation, which no change of a neighbour touches (recharging every container
        # of every touched node made each deployment cost O(all containers) here).
        for record in change.containers.values():
            if not (record.replaced_by or record.stopping):
                self._index(record)
                self.tally.count(record, self.observed.get(record.id))
        for container_id in change.unpending:
            gone = self.pending.pop(container_id, None)
            if gone is not None:
                _discard(self._pending_by_deployment, _key_of(gone), container_id)
        for container_id, pending in change.pending.items():
            self.pending[container_id] = pending
            self._pending_by_deployment[_key_of(pending)].add(container_id)
        for key, deployment in change.deployments.items():
            self.deployments[key] = deployment
        for key in change.removed_deployments:
            self.deployments.pop(key, None)
        for node, cordoned in change.cordons.items():
            if cordoned:
                self.cordoned.add(node)
            else:
                self.cordoned.discard(node)
        for node in change.nodes:
            self.allocation_revision[node] = revision
        for node in touched:
            self.node_revision[node] = revision
        for node in change.deleted_nodes:  # its containers were released in this change
            self.nodes.pop(node, None)
            self.cordoned.discard(node)
            self.inline_allocations.discard(node)
            self.allocation_revision.pop(node, None)
            self.node_revision.pop(node, None)
        return touched - change.deleted_nodes

    def keep_preemptions(self, records: list[PreemptionRecord]) -> None:
        self.preemptions = records

    def observe(self, node: str, statuses: Iterable[ContainerStatus]) -> None:
        """What the node's agent reports of the live containers it holds."""
        for status in statuses:
            record = self.containers.get(status.id)
            if record is not None and record.node == node:
                self.observed[status.id] = status
                self.tally.count(record, status)

    def _stop(self, record: ContainerRecord, revision: int) -> None:
        """``record`` is stopping as of ``revision`` (kept when it already was: a later
        write of its record does not make its agent's reports count later)."""
        self.stop_revision.setdefault(record.id, revision)
        self.stopping[record.id] = record
        self._stopping_by_node[record.node].add(record.id)
        self._stopping_by_deployment[(record.namespace, record.deployment)].add(record.id)

    def _unstop(self, container_id: str) -> None:
        record = self.stopping.pop(container_id, None)
        if record is None:
            return
        del self.stop_revision[container_id]
        _discard(self._stopping_by_node, record.node, container_id)
        _discard(self._stopping_by_deployment, (record.namespace, record.deployment), container_id)

    def _index(self, record: ContainerRecord) -> None:
        """Index and charge the live ``record``, which is neither yet (``_unindex``)."""
        container_id, pool, namespace = record.id, record.pool, record.namespace
        self._by_node[record.node].add(container_id)
        self._by_deployment[(namespace, record.deployment)].add(container_id)
        self._by_namespace[namespace].add(container_id)
        self._by_pool[pool].add(container_id)
        self._pool_version[pool] += 1
        self._namespace_version[namespace] += 1
        self.requests.count(record)
        self._charge(record)

    def _unindex(self, container_id: str) -> None:
        record = self.containers.get(container_id)
        if record is None:
            return
        _discard(self._by_node, record.node, container_id)
        _discard(self._by_deployment, (record.namespace, record.deployment), container_id)
        _discard(self._by_namespace, record.namespace, container_id)
        _discard(self._by_pool, record.pool, container_id)
        self._pool_version[record.pool] += 1
        self._namespace_version[record.namespace] += 1
        self._uncharge(container_id)
        self.tally.forget(container_id)
        self.requests.forget(container_id)

    def _charge(self, record: ContainerRecord) -> None:
        state = self.nodes.get(record.node)
        allocation = state.allocations.get(record.id) if state is not None else None
        if allocation is None:  # a node record from before its container: charges nothing
            return
        resources = allocation.resources
        charge = (record.pool, resources.cpu_request, resources.memory_request)
        self._charged[record.id] = charge
        total = self._requested[record.pool]
        total[0] += charge[1]
        total[1] += charge[2]

    def _uncharge(self, container_id: str) -> None:
        charge = self._charged.pop(container_id, None)
        if charge is None:
            return
        total = self._requested[charge[0]]
        total[0] -= charge[1]
        total[1] -= charge[2]

    # -- checks ------------------------------------------------------------------------

    def check_indexes(self) -> None:
        """Every index equals one rebuilt from the containers (module invariants);
        ``AssertionError`` naming the first that does not. O(n): for tests."""
        fresh = Books()
        fresh.nodes = self.nodes
        fresh.containers = self.containers
        for record in self.containers.values():
            fresh._index(record)
        assert not set(self.containers) & set(self.replaced), "live and replaced overlap"
        assert not set(self.stopping) & {*self.containers, *self.replaced}, "stopping overlaps"
        assert set(self.stop_revision) == set(self.stopping), "stop revisions drifted"
        by_node: defaultdict[str, set[str]] = defaultdict(set)
        by_deployment: defaultdict[DeploymentKey, set[str]] = defaultdict(set)
        for record in self.stopping.values():
            by_node[record.node].add(record.id)
            by_deployment[(record.namespace, record.deployment)].add(record.id)
        assert {k: v for k, v in self._stopping_by_node.items() if v} == by_node, "stopping_on"
        stopping_of = {k: v for k, v in self._stopping_by_deployment.items() if v}
        assert stopping_of == by_deployment, "index stopping_of drifted"
        for record in self.stopping.values():
            state = self.nodes.get(record.node)
            assert state is not None, f"stopping {record.id} on {record.node}, no node state"
            assert record.id in state.allocations, f"stopping {record.id} lost its allocation"
        for name in ("_by_node", "_by_deployment", "_by_namespace", "_by_pool"):
            ours = {k: v for k, v in getattr(self, name).items() if v}
            assert ours == dict(getattr(fresh, name)), f"index {name} drifted"
        assert _nonzero(self._requested) == _nonzero(fresh._requested), "pool requests drifted"
        assert self._charged == fresh._charged, "charges drifted"
        assert set(self.observed) <= set(self.containers), "observed holds gone containers"
        pending_index: defaultdict[DeploymentKey, set[str]] = defaultdict(set)
        for pending in self.pending.values():
            pending_index[_key_of(pending)].add(pending.id)
        ours = {k: v for k, v in self._pending_by_deployment.items() if v}
        assert ours == dict(pending_index), "index _pending_by_deployment drifted"
        assert not set(self.pending) & set(self.containers), "pending and placed overlap"
        self.tally.check(self.containers, self.observed)
        self.requests.check(self.containers)


def _discard(index: defaultdict[K, set[str]], key: K, container_id: str) -> None:
    ids = index.get(key)
    if ids is not None:
        ids.discard(container_id)
        if not ids:
            del index[key]


def _key_of(record: PendingRecord) -> DeploymentKey:
    return (record.namespace, record.deployment)


def _nonzero(requested: dict[str, list[int]]) -> dict[str, list[int]]:
    return {pool: total for pool, total in requested.items() if total != [0, 0]}
