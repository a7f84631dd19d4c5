"""Deployments in the coordinator: every change is one decision, sequenced and committed.

    outcome = await service.deploy("team-a", spec)     # or DeployRefused with the numbers
    await service.delete_container(container_id)
    revision, containers = service.desired("node-a")     # what the node's agent must run

The service is a thin shell over ``coordinator/deployments/``:

- ``books``: the committed state with its indexes (containers by node, deployment,
  namespace and pool; each pool's requests);
- ``draft``: the state one decision sees and writes, ``decision``: what it writes;
- ``sequencer``: decisions by urgency (``decision_queue``), committed in batches (the
  next decided while one commits), applied only once committed,
  then handed to the publishers (the agent hub);
- the deciders, plain functions of a draft: ``placing`` (deploy, scale, preemption),
  ``lifecycle`` (realloc, delete, lost nodes), ``stopping`` (allocations let go once
  an agent reports a container gone), ``swaps``, ``node_admin`` (SetNode,
  cordon, drain, hardware changes), ``registration`` (node records: hellos, problems,
  lost leases), ``pool_link`` (pool limits and CPU shares), ``quota_writes`` and
  ``pool_writes`` (quotas and pools written by an administrator, the pool tree's state
  stored) and ``labels`` (quota labels, settled after every decision); events alone
  (``record``) go the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Collection, Coroutine, Iterable, Mapping, Sequence
from typing import Any, Self

from coordinator.config import PressureSettings
from coordinator.deployments import (
    lifecycle,
    node_admin,
    placing,
    pool_link,
    pool_writes,
    quota_writes,
    registration,
    stopping,
    swaps,
)
from coordinator.deployments.books import Books
from coordinator.deployments.context import Context, FreshStates
from coordinator.deployments.decision import Decision
from coordinator.deployments.decision_queue import Urgency
from coordinator.deployments.decision_queue import placing as placing_urgency
from coordinator.deployments.draft import Draft
from coordinator.deployments.labels import relabel, relabel_everything
from coordinator.deployments.outcome import DeployOutcome, DeployRefused
from coordinator.deployments.pending import Pass
from coordinator.deployments.pending import schedule as place_pending
from coordinator.deployments.records import (
    PendingRecord,
)
from coordinator.deployments.sequencer import Sequencer
from coordinator.deployments.stored_books import read_books
from coordinator.deployments.timings import NO_TIMINGS, Timings
from coordinator.deployments.translate import DesiredOfNodes, pending_container
from coordinator.deployments.units import held_extended
from coordinator.errors import NotFound
from coordinator.placement import Delta, Node, NodeState, Placement
from coordinator.placement.engine import AnyRequest
from coordinator.pools.host_weights import PoolCpu
from coordinator.pools.tree import Share
from coordinator.quotas import Quota
from coordinator.services.events import EventLog, Note
from coordinator.services.nodes import on_problems
from coordinator.services.pool_service import PoolService, PoolView
from coordinator.services.pressure import PressureBook
from coordinator.services.quota_service import QuotaService
from coordinator.services.registry import NodeRegistry
from coordinator.store import Store
from shared.api.containers import ContainerRecord
from shared.api.deployments import DeploymentRecord, DeploymentSpec
from shared.api.nodes import NodeRecord
from shared.inventory import Inventory
from shared.logs import get_logger
from shared.protocol import ContainerStatus, CpuPressure, DesiredContainer, Status

log = get_logger("allot.coordinator.deployments")


def _key(pending: PendingRecord) -> tuple[str, str]:
    return (pending.namespace, pending.deployment)


def _held(books: Books) -> set[str]:
    """The ids of the containers that hold an allocation: live and stopping."""
    return {*books.containers, *books.stopping}


class DeploymentService:
    def __init__(
        self,
        store: Store,
        registry: NodeRegistry,
        quotas: QuotaService,
        events: EventLog,
        pools: PoolService,
        *,
        share_base: int,
        books: Books | None = None,
        fresh: FreshStates | None = None,
        clock: Callable[[], float] = time.time,
        pressure: PressureSettings | None = None,
        timings: Timings = NO_TIMINGS,
    ) -> None:
        self.events = events
        self.pressure = PressureBook(pressure or PressureSettings())
        self._registry = registry
        self._books = Books() if books is None else books
        self._desired = DesiredOfNodes()
        self._context = Context(
            registry, quotas, pools, share_base, clock, fresh or {}, pressured=self.pressure.under
        )
        self._timings = timings
        self._sequencer = Sequencer(
            store,
            self._books,
            self._context,
            events,
            settle=relabel,
            registry=registry,
            quorum=store.quorum,
            timings=timings,
        )
        self._followed: dict[str, tuple[PoolCpu, int]] = {}  # pool -> target, pool_version
        self._ending: set[str] = set()  # swaps whose end is being committed
        self._letting_go: set[str] = set()  # stopping containers whose release is under way
        self._tasks: set[asyncio.Task[None]] = set()  # those commits, kept from the GC
        self._waiting: dict[str, str] = {}  # pending id -> why the last pass left it
        self._room = asyncio.Event()  # set when pending containers may fit
        self._scheduling = False  # a pass of ``schedule_pending`` under way
        self._sequencer.listen(self._after_commit)

    @classmethod
    async def load(
        cls,
        store: Store,
        registry: NodeRegistry,
        quotas: QuotaService,
        pools: PoolService,
        *,
        share_base: int,
        books: Books | None = None,
        fresh: FreshStates | None = None,
        pressure: PressureSettings | None = None,
        timings: Timings = NO_TIMINGS,
    ) -> Self:
        """The service over what ``store`` holds: O(what it holds), or O(the events kept)
        given ``books`` a standby kept current (``stored_books.WarmBooks``), and with
        it the nodes' empty states (``Context.fresh``)."""
        events = await EventLog.load(store, clock=time.time)
        if books is None:
            books = await read_books(store)
        log.info(
            "deployments loaded",
            deployments=len(books.deployments),
            containers=len(books.containers),
            pending=len(books.pending),
            nodes=len(books.nodes),
        )
        return cls(
            store,
            registry,
            quotas,
            events,
            pools,
            share_base=share_base,
            books=books,
            fresh=fresh,
            pressure=pressure,
            timings=timings,
        )

    # -- reads (the committed state) -----------------------------------------------------

    @property
    def registry(self) -> NodeRegistry:
        """The node records as committed, to read: they change through this service's
        decisions (``hello``, ``report_problems``, ``expire_leases``, ``delete_node``)."""
        return self._registry

    @property
    def books(self) -> Books:
        """The committed state and its indexes, to read (the metrics do)."""
        return self._books

    def fresh_state(self, node: str) -> NodeState:
        """The node's allocation state holding nothing (``Context.fresh_state``)."""
        return self._context.fresh_state(node)

    def subscribe(self, publisher: Callable[[set[str]], None]) -> None:
        """``publisher(nodes)`` is called (not awaited) after every commit that changed
        those nodes' desired state."""
        self._sequencer.subscribe(publisher)

    def containers(self) -> list[ContainerRecord]:
        """The live containers and the stopping ones, by id."""
        books = self._books
        return [books.containers.get(cid) or books.stopping[cid] for cid in sorted(_held(books))]

    def container(self, container_id: str) -> ContainerRecord | None:
        """A live container, one being replaced (``replaced_by`` says by which), or one
        stopping (``stopping`` says why)."""
        books = self._books
        return (
            books.containers.get(container_id)
            or books.replaced.get(container_id)
            or books.stopping.get(container_id)
        )

    def of_deployment(self, namespace: str, name: str) -> list[ContainerRecord]:
        return self._books.of_deployment((namespace, name))

    def stopping_of(self, namespace: str, name: str) -> list[ContainerRecord]:
        """The deployment's stopping containers, by id: it no longer counts them."""
        return self._books.stopping_of((namespace, name))

    def pending(self, container_id: str) -> ContainerRecord | None:
        """A pending container as the API shows it (no node, no limits), or None."""
        pending = self._books.pending.get(container_id)
        if pending is None:
            return None
        return pending_container(pending, self._books.deployments[_key(pending)].spec)

    def pending_of(self, namespace: str, name: str) -> list[ContainerRecord]:
        """The deployment's pending containers, as the API shows them, by id."""
        deployment = self._books.deployments.get((namespace, name))
        found = self._books.pending_of((namespace, name))
        return [pending_container(p, deployment.spec) for p in found] if deployment else []

    def all_pending(self) -> list[ContainerRecord]:
        found = [self.pending(cid) for cid in sorted(self._books.pending)]
        return [record for record in found if record is not None]

    def why_pending(self, container_id: str) -> str:
        """Why the container is pending: what the last scheduler pass found, or what
        made it pending when no pass has looked at it yet."""
        pending = self._books.pending.get(container_id)
        if pending is None:
            return ""
        return self._waiting.get(container_id) or pending.cause

    def observed(self, container_id: str) -> ContainerStatus | None:
        return self._books.observed.get(container_id)

    def deployments(self, namespace: str | None = None) -> list[DeploymentRecord]:
        found = self._books.deployments
        return [found[k] for k in sorted(found) if namespace is None or k[0] == namespace]

    def deployment(self, namespace: str, name: str) -> DeploymentRecord | None:
        return self._books.deployments.get((namespace, name))

    def desired(self, node: str) -> tuple[int, list[DesiredContainer]]:
        """The node's desired state and its revision (which only grows). O(its containers)."""
        containers = self._desired.of_node(node, self._books.on_node(node))
        return self._books.node_revision.get(node, 0), containers

    def node_revisions(self, nodes: Iterable[str]) -> dict[str, int]:
        """Each node's desired revision now, which its agent acknowledges. O(nodes)."""
        return {node: self._books.node_revision.get(node, 0) for node in nodes}

    def quota_requests(self, namespaces: Iterable[str]) -> list[tuple[dict[str, int | str], int]]:
        """What the live containers of ``namespaces`` ask for, as the quotas count it:
        each request shape with how many ask for it. O(the shapes), kept by the books."""
        return self._books.requests.shapes(namespaces)

    def allocation(self, node: str) -> tuple[NodeState, bool]:
        """The node's allocation state and whether it is cordoned."""
        return self._draft().node_state(node), node in self._books.cordoned

    def cordoned(self) -> frozenset[str]:
        """The cordoned nodes. O(their number)."""
        return frozenset(self._books.cordoned)

    def extended(self, node: str) -> tuple[dict[str, int], dict[str, int]]:
        """What the node offers of extended resources, and what its containers hold."""
        record = self._context.registry.get(node)
        if record is None:
            raise NotFound(f"no node {node}")
        offered = dict(sorted(record.inventory.extended.items()))
        books = self._books
        return offered, held_extended([*books.on_node(node), *books.stopping_on(node)])

    def skipped_nodes(self) -> dict[str, str]:
        return self._draft().skipped_nodes()

    def plan_views(self) -> tuple[list[Node], dict[str, str]]:
        """What a deploy would place on: the ready, uncordoned nodes as the placement
        engine sees them (what is free, the shared pool's CPU included), and the nodes
        left out with the reason."""
        draft = self._draft()
        return draft.candidate_views(), draft.skipped_nodes()

    def plan(
        self, views: list[Node], request: AnyRequest, count: int, strategy: str, nodes_limit: int
    ) -> Placement:
        """Where a deploy of ``count`` such containers would go now, on ``views`` (from
        ``plan_views``): the decisions' own placement (``placing.place_on``), CPU
        pressure included. Nothing changes; ``PlacementError`` when they do not fit."""
        return placing.place_on(self._draft(), views, request, count, strategy, nodes_limit)

    def pool_demands(self) -> dict[str, dict[str, float]]:
        return pool_link.pool_demands(self._books, self._context.share_base)

    def pool_usages(self) -> dict[str, dict[str, float]]:
        return pool_link.pool_usages(self._books, self._context.share_base)

    def _draft(self) -> Draft:
        return Draft(self._books, self._context)

    # -- decisions -----------------------------------------------------------------------

    async def deploy(self, namespace: str, spec: DeploymentSpec) -> DeployOutcome:
        return await self._sequencer.decide(
            lambda d: placing.deploy(d, namespace, spec), urgency=placing_urgency(spec.count)
        )

    async def preview_deploy(
        self, namespace: str, spec: DeploymentSpec
    ) -> tuple[DeployOutcome, list[str]]:
        """What ``deploy`` would do in its turn, nothing changed: its outcome and the ids
        of the containers it would preempt (or the refusal it would raise)."""

        def preview(draft: Draft) -> tuple[DeployOutcome, list[str]]:
            before = len(draft.change.notes)
            outcome = placing.deploy(draft, namespace, spec)
            told = draft.change.notes[before:]
            return outcome, sorted(note.container for note in told if note.kind == "preempted")

        return await self._sequencer.preview(preview, urgency=placing_urgency(spec.count))

    async def scale(self, namespace: str, name: str, count: int) -> DeployOutcome:
        return await self._sequencer.decide(
            lambda d: placing.scale(d, namespace, name, count),
            urgency=self._scaling_urgency((namespace, name), count),
        )

    async def realloc(self, container_id: str, delta: Delta) -> ContainerRecord:
        return await self._sequencer.decide(lambda d: lifecycle.reallocate(d, container_id, delta))

    async def delete_container(self, container_id: str) -> Pass:
        """Stop the container; its stand-in (pending) is placed at once where there is room."""
        return self._passed(
            await self._sequencer.decide(
                lambda d: lifecycle.delete_container(d, container_id), urgency=Urgency.FREES
            )
        )

    async def delete_deployment(self, namespace: str, name: str) -> list[str]:
        return await self._sequencer.decide(
            lambda d: lifecycle.delete_deployment(d, namespace, name), urgency=Urgency.FREES
        )

    async def release_lost(self, grace_seconds: float) -> Pass:
        """Release the containers of nodes lost for at least ``grace_seconds``; a
        decision only when some lost node holds containers."""
        lost = self._context.lost_since(self._context.clock(), grace_seconds)
        books = self._books
        if not any(books.ids("node", node) or books.stopping_on(node) for node in lost):
            return Pass()
        return self._passed(
            await self._sequencer.decide(
                lambda d: lifecycle.release_lost(d, grace_seconds), urgency=Urgency.FREES
            )
        )

    async def replace(
        self, container_id: str, image: str, command: list[str] | None
    ) -> ContainerRecord:
        return await self._sequencer.decide(
            lambda d: swaps.start_swap(d, container_id, image, command)
        )

    async def set_node(self, node: str, mode: str, *, why: str = "", **fields: Any) -> NodeState:
        return await self._sequencer.decide(
            lambda d: node_admin.set_capacity(d, node, mode, why=why, **fields),
            urgency=Urgency.FREES,
        )

    async def hello(
        self, node: str, *, inventory: Inventory, address: str, agent_version: str
    ) -> tuple[NodeRecord | None, NodeRecord]:
        """The node's record before (None for a new node) and after its agent said hello,
        committed with the capacity a changed inventory moves (``registration.hello``)."""
        now = self._registry.now()

        def said_hello(draft: Draft) -> tuple[NodeRecord | None, NodeRecord]:
            return registration.hello(
                draft,
                node,
                inventory=inventory,
                address=address,
                agent_version=agent_version,
                now=now,
            )

        try:
            try:
                return await self._sequencer.decide(said_hello, urgency=Urgency.FREES)
            except DeployRefused as refused:
                if refused.code != "node_being_deleted":
                    raise
                # Decided beside the node's deletion (in its batch, or on top of it while
                # it committed), and answered once that deletion was committed and
                # applied: said again, it registers the node anew.
                return await self._sequencer.decide(said_hello, urgency=Urgency.FREES)
        except BaseException:
            # The agent reached this leader and only the store failed it (etcd without
            # quorum, a full disk): its node stays live while it keeps trying, so the
            # store's return does not find its lease run out.
            self._registry.heartbeat(node)
            raise

    async def report_problems(self, node: str, problems: Sequence[str]) -> None:
        """The node's health as its agent's problems say; a decision only when they
        change it (a status that reports the same problems writes nothing)."""
        record, now = self._registry.get(node), self._registry.now()
        if record is None or on_problems(record, problems, now=now) is record:
            return
        await self._sequencer.decide(
            lambda d: registration.report_problems(d, node, problems, now=now),
            urgency=Urgency.FREES,
        )

    async def expire_leases(self, *, release: bool = False) -> list[NodeRecord]:
        """Mark lost every node whose lease has ended, with its event; with ``release``
        (no grace), their containers are released in the same commit. The new records.
        A failure, or a record changed meanwhile without a new lease (a problems report),
        leaves those nodes due again (``NodeRegistry.due_again``)."""
        due = self._registry.expired()
        if not due:
            return []
        now = self._registry.now()
        try:
            lost = await self._sequencer.decide(
                lambda d: registration.mark_lost(d, due, now=now, release=release),
                urgency=Urgency.FREES,
            )
        except BaseException:
            self._registry.due_again(due)
            raise
        marked = {record.name for record in lost}
        self._registry.due_again(name for name in due if name not in marked)
        return lost

    async def cordon(self, node: str, cordoned: bool) -> None:
        await self._sequencer.decide(
            lambda d: node_admin.cordon(d, node, cordoned), urgency=Urgency.FREES
        )

    async def drain(self, node: str) -> Pass:
        drained = await self._sequencer.decide(
            lambda d: node_admin.drain(d, node), urgency=Urgency.FREES
        )
        return self._passed(drained)

    async def delete_node(self, node: str) -> Pass:
        """Take a lost node off the books (``node_admin.delete_node``); its containers'
        stand-ins are placed at once where there is room."""
        deleted = await self._sequencer.decide(
            lambda d: node_admin.delete_node(d, node), urgency=Urgency.FREES
        )
        return self._passed(deleted)

    async def schedule(self) -> Pass:
        """One scheduler pass: place what pending containers fit now."""
        return self._passed(await self._sequencer.decide(place_pending, Urgency.SCHEDULES))

    async def schedule_pending(self, *, every: float, tick: float = 1.0) -> None:
        """Run for ever: a scheduler pass whenever room may have appeared -- a decision
        that removed containers, uncordoned or grew a node or wrote a quota, or a change
        of the node records (a node joined or came back) -- and every ``every`` seconds
        as long as some container is pending (a pool limit raised, say)."""
        registry = self._context.registry
        seen, last = registry.version, self._context.clock()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._room.wait(), tick)
            due = self._room.is_set() or registry.version != seen
            due = due or self._context.clock() - last >= every
            self._room.clear()
            if not due or not self._books.pending:
                continue
            seen, last = registry.version, self._context.clock()
            self._scheduling = True
            started = time.perf_counter()
            try:
                await self.schedule()
            except Exception as error:  # the next pass tries again
                log.warning("scheduler pass failed", error=error)
            finally:
                self._scheduling = False
                self._timings.scheduled(time.perf_counter() - started)

    def _scaling_urgency(self, key: tuple[str, str], count: int) -> Urgency:
        """A scale-down frees; a scale-up is as urgent as the containers it adds are few
        (read from the books now: only the queue's order depends on it)."""
        live, pending = self._books.counts(key)
        if count < live + pending:
            return Urgency.FREES
        return placing_urgency(count - live - pending)

    def _after_commit(self, batch: Decision) -> None:
        for node in batch.deleted_nodes:
            self._context.fresh.pop(node, None)
        if batch.may_make_room() and self._books.pending:
            self._room.set()

    def _passed(self, done: Pass) -> Pass:
        """Keep why the pass left containers pending; forget what is no longer pending."""
        self._waiting.update(done.waiting)
        for gone in [cid for cid in self._waiting if cid not in self._books.pending]:
            del self._waiting[gone]
        return done

    async def follow_pool_shares(self, shares: Mapping[str, Share], total_cpu: float) -> float:
        """The unbound containers' CPU weights and quotas follow their pools' fair shares
        (``pool_link``; ``shares`` from the pool update, ``total_cpu`` the cluster's
        cores), for the pools whose target moved by more than ``SHARE_CHANGE`` or whose
        containers changed since they last followed: the pool update runs every period,
        and walking every container each time held up everything else at 100,000
        containers. Returns the CPU seconds the walk took (``PoolService.pause_after``)."""
        books, followed = self._books, self._followed
        pools = self._context.pools.config()["pools"]
        targets = pool_link.pool_targets(pools, shares, total_cpu)
        moved = {
            pool: target
            for pool, target in targets.items()
            if pool not in followed
            or followed[pool][1] != books.pool_version(pool)
            or pool_link.target_moved(followed[pool][0], target)
        }
        if not moved:
            return 0.0
        spent = 0.0

        def walk(draft: Draft) -> None:
            nonlocal spent
            started = time.thread_time()  # the decider's thread: its CPU, not its waits
            pool_link.follow_pool_shares(draft, moved)
            spent = time.thread_time() - started

        await self._sequencer.decide(walk)
        followed |= {pool: (target, books.pool_version(pool)) for pool, target in moved.items()}
        return spent

    async def put_quota(self, quota: Quota) -> Quota:
        """Create or replace ``quota``; ``QuotaError`` if it breaks a rule."""
        return await self._sequencer.decide(lambda d: quota_writes.put_quota(d, quota))

    async def delete_quota(self, kind: str, name: str) -> bool:
        return await self._sequencer.decide(lambda d: quota_writes.delete_quota(d, kind, name))

    async def put_pool(self, name: str, config: dict[str, Any]) -> PoolView:
        """Create or replace pool ``name``; ``PoolConfigError`` (nothing changed) when the
        configuration it leaves breaks a rule. The pool as it is once committed (as
        written, with no share yet, when a decision after it has deleted it already)."""
        await self._sequencer.decide(lambda d: pool_writes.put_pool(d, name, config))
        pools = self._context.pools
        return pools.view(name) or PoolView(name=name, config=config, share=None, introspection={})

    async def delete_pool(self, name: str) -> bool:
        """Remove pool ``name``; False when there is none."""
        return await self._sequencer.decide(lambda d: pool_writes.delete_pool(d, name))

    async def save_pool_state(self) -> None:
        """Store the pool tree's state (its volumes): due every ``STATE_WRITE_SECONDS``
        (``PoolService.state_due``) and on shutdown."""
        await self._sequencer.decide(pool_writes.save_pool_state)

    async def relabel(self) -> None:
        """Every container's quota label, at start (labels follow the quotas committed
        with them; this catches a store written by an older version)."""
        await self._sequencer.decide(relabel_everything)

    async def record(self, notes: list[Note]) -> None:
        """Events of something that changes nothing else (drift an agent put back)."""
        await self._sequencer.record(notes)

    async def report_pressure(self, node: str, reading: CpuPressure | None) -> None:
        """The node's CPU pressure as its agent reports it (None: it can tell none, or
        the node is gone); entering or leaving pressure is an event."""
        notes = self.pressure.report(node, reading, now=self._context.clock())
        if notes:
            await self.record(notes)

    def pool_nodes(self, pools: Iterable[str] | None) -> set[str]:
        """The nodes the live containers of ``pools`` (None: of every pool) run on.
        O(those containers)."""
        books = self._books
        return {
            books.containers[cid].node
            for pool in (books.pools() if pools is None else pools)
            for cid in books.ids("pool", pool)
            if cid in books.containers
        }

    def observe(self, node: str, status: Status, listed: Collection[str] | None) -> None:
        """What the node's agent reports of the containers ``status`` lists (all of them
        in a full status, what changed in a partial one); a swap it reports ended is
        committed, and so is the release of the stopping containers it no longer holds.
        ``listed``: the ids the agent holds with this status taken in (its session's
        ``status_listing``); None when that is not known, and then nothing is let go.
        O(the status's containers and the node's stopping ones)."""
        self._books.observe(node, status.containers)
        if listed is not None:
            self._let_go_unlisted(node, stopping.witnessed(status), listed)
        for reported in status.containers:
            record = self._books.containers.get(reported.id)
            ended = reported.replacing in ("done", "failed")
            if record is None or not ended or record.replaces not in self._books.replaced:
                continue
            if record.id not in self._ending:
                self._ending.add(record.id)
                self._start(self._end_swap(record.id, reported.replacing, reported.error))

    def _let_go_unlisted(self, node: str, witnessed: int, listed: Collection[str]) -> None:
        """Release the node's stopping containers that its agent, listing ``listed`` as
        of ``witnessed`` (``stopping.witnessed``), no longer holds."""
        gone = stopping.reported_gone(self._books, node, witnessed, listed)
        gone = [cid for cid in gone if cid not in self._letting_go]
        if gone:
            self._letting_go.update(gone)
            self._start(self._let_go(node, gone))

    def _start(self, commit: Coroutine[Any, Any, None]) -> None:
        """Run ``commit`` (a decision an agent's report asked for) on its own, kept
        until done: ``settled`` waits for it."""
        task = asyncio.create_task(commit)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Stop deciding once the swap ends agents reported and every decision under
        way are committed: a stop (SIGTERM) loses none of them. Called after the agent
        sessions ended, so no report starts another."""
        await self.settled()
        await self._sequencer.close()

    async def settled(self) -> None:
        """Wait until the swap ends agents reported are committed (or failed)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def quiet(self) -> None:
        """Wait until no decision is queued or under way and no scheduler pass is due:
        then memory and the store hold the same (for tests that compare them)."""
        while True:
            await self._sequencer.idle()
            await asyncio.sleep(0)
            if not self._room.is_set() and not self._scheduling:
                await self._sequencer.idle()
                return
            await asyncio.sleep(0.01)

    def check_indexes(self) -> None:
        """``AssertionError`` unless every index equals one rebuilt from scratch."""
        self._books.check_indexes()

    async def _let_go(self, node: str, ids: list[str]) -> None:
        try:
            done = await self._sequencer.decide(
                lambda d: stopping.let_go(d, node, ids), urgency=Urgency.FREES
            )
            self._passed(done)
            log.info("stopped containers let go", node=node, containers=",".join(ids))
        except Exception as failure:  # the agent's next report tries again
            log.warning("stopped containers not let go", node=node, error=failure)
        finally:
            self._letting_go.difference_update(ids)

    async def _end_swap(self, container_id: str, outcome: str, error: str) -> None:
        try:
            ended = await self._sequencer.decide(
                lambda d: swaps.end_swap(d, container_id, outcome, error), urgency=Urgency.FREES
            )
            if ended:
                log.info("swap ended", container=container_id, outcome=outcome)
        except Exception as failure:  # the agent's next report tries again
            log.warning("swap not ended", container=container_id, outcome=outcome, error=failure)
        finally:
            self._ending.discard(container_id)
