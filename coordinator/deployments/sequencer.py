"""The one way a decision happens: decided in order, committed, then applied.

    outcome = await sequencer.decide(lambda draft: deploy(draft, "team-a", spec))

A decider is a plain function of a ``Draft``: it reads the state, writes its change into
the draft, and returns what its caller answers (or raises a refusal, and then none of its
writes count). The sequencer runs deciders one at a time, in the queue's order (by
urgency, first come first served within one, none starving: ``decision_queue``), each
on the books plus the changes of every decider before it that is not yet committed --
so two requests never refuse each other without a real conflict. Deciders form batches,
each committed as one store transaction (one fsync for all of them); only when it
succeeded are the books changed and the touched nodes handed to the publishers, and
only then is each caller answered. A failed commit changes nothing in memory, and each
of its callers gets the error. A batch with more writes than etcd takes in one
transaction is committed in fenced steps (``coordinator.store.steps``), and applied once
the last one committed, each revision the books keep set to its key's step.

Deciding overlaps committing. While batch N commits, batch N+1 is decided on a draft
that holds N's writes over the books (the books change only once N committed), taking
deciders from the queue until N's commit returns (the one under way is finished first,
so N's callers wait at most for one decider more). Then N is applied and answered, and
N+1's own writes (``Decision.since``) are committed, their compares read from the books
N left: the revisions N's commit gave, step by step on etcd, so the fenced store's
compares hold as for any commit. When N's commit fails, its callers get the error, and
N+1's deciders go back to the queue in their places, unanswered, to be decided again on
the books as they are (whether or not their decision read N's writes: none of them was
answered, so nothing is lost but the time). The books are applied only while no decider
runs: the deciding thread reads them without locks.

Node records are decided the same way (``registration``: a hello, a problems report, a
lost lease), each with what follows from it in the same draft and transaction, compared
on the record's revision the registry keeps, and applied to the registry only once
committed; each decider reads the records as the deciders before it in its batch left
them (``Context.over``).

The naive way, which this replaced: each request changed memory, then awaited its own
commit and put a snapshot of all of memory back when it failed; a second request read
the first one's uncommitted change, its compare then failed against a revision that lagged
the commit in flight (a false 409), and the restore wiped or revived the other's writes.

Besides deployments, the decisions on this path are quota writes, pool writes (a pool's
config, and the pool tree's state stored: ``pool_writes``) and events alone (``record``: a
refusal, drift put back, a node lost). They share it rather than each having a sequencer
of its own because deployments read them: a deployment is decided on the pools and quotas
as the decisions before it in its batch left them, and every event is numbered and its
log trimmed (``EventLog.stage``) in the order of the commits, one at a time, which keeps
the event log's memory equal to its store. So there is one order between all of them,
the queue's, and no order between sequencers to keep.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from coordinator.deployments.books import Books
from coordinator.deployments.context import Context
from coordinator.deployments.decision import Decision
from coordinator.deployments.decision_queue import DecisionQueue, Entry, Urgency
from coordinator.deployments.draft import Draft
from coordinator.deployments.node_records import (
    ALLOCATION_PREFIX,
    allocation_key,
    container_allocation_key,
    node_writes,
    parse_key,
)
from coordinator.deployments.outcome import DeployRefused
from coordinator.deployments.records import (
    CONTAINER_PREFIX,
    container_key,
    deployment_key,
    pending_key,
)
from coordinator.deployments.timings import NO_TIMINGS, Timings
from coordinator.quotas import PreemptionRecord
from coordinator.services.events import EventLog, Note, Staged
from coordinator.services.pool_service import StagedPools
from coordinator.services.quota_service import QUOTA_PREFIX
from coordinator.services.registry import NODE_PREFIX, NodeRegistry
from coordinator.store import Compare, Store, Txn, TxnResult
from coordinator.store.quorum import Quorum, QuorumLost
from shared.codec import to_json

T = TypeVar("T")
Decider = Callable[[Draft], T]
Answer = tuple["asyncio.Future[Any]", Any, Exception | None]
Publisher = Callable[[set[str]], None]

CORDON_PREFIX = "/cordoned/"
# The preemptions still within the cool-down (quotas spec 8.3), rewritten with each
# decision that preempts, so a restart does not reset the cool-down.
PREEMPTIONS_KEY = "/preemptions"
# At most this many deciders in one batch: each starts from a copy of the batch so far
# (over the batch in flight, if one is), so a batch costs O(deciders x its size); 256
# small decisions copy in well under 10 ms.
MOST_PER_BATCH = 256
# A batch stops growing before its writes pass this (``Decision.operations``), so that
# concurrent large deployments do not make one ever larger commit. A decision larger on
# its own goes alone; on etcd, one with more writes than its --max-txn-ops is committed
# in several fenced steps (``coordinator.store.steps``), on SQLite in one transaction.
MOST_OPERATIONS_PER_BATCH = 9_000


class Refused(Exception):
    """A decider's refusal that leaves events: ``error`` is raised to the caller once
    ``notes`` are committed (with the batch's other writes)."""

    def __init__(self, error: Exception, notes: list[Note]) -> None:
        super().__init__(str(error))
        self.error = error
        self.notes = notes


@dataclass
class Job:
    """A queued decision: its decider, its caller's future, whether it is a preview."""

    decider: Decider[Any]
    future: asyncio.Future[Any]
    preview: bool


Queued = Entry[Job]


@dataclass
class Decided:
    """A batch decided: its writes (on top of the batch committed before it, if any),
    each decided caller's answer (given once it is committed), and the queue entries it
    decided (queued again if the batch it was decided on fails)."""

    batch: Decision
    answers: list[Answer] = field(default_factory=list)
    taken: list[Queued] = field(default_factory=list)


@dataclass
class Written:
    """A batch committed, and what its application to memory needs."""

    result: TxnResult
    staged: Staged
    pools: StagedPools
    preemptions: list[PreemptionRecord]
    started: float


class Sequencer:
    def __init__(
        self,
        store: Store,
        books: Books,
        context: Context,
        events: EventLog,
        *,
        settle: Callable[[Draft], None],
        registry: NodeRegistry,
        quorum: Quorum | None = None,
        timings: Timings = NO_TIMINGS,
    ) -> None:
        self._store = store
        self._timings = timings
        # etcd's quorum, when known lost, refuses what is queued and what comes, at once:
        # they would wait for the commit in flight to be settled, then be refused anyway.
        self._quorum = quorum
        if quorum is not None:
            quorum.listen(self._refuse_queued)
        self._books = books
        self._registry = registry  # node records: written by deciders too (``registration``)
        self._context = context
        self._events = events
        self._settle = settle  # run on each draft after its decider (quota labels)
        self._queue = DecisionQueue[Job]()
        self._arrived = asyncio.Event()  # set when a decision is queued
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="allot-decide")
        self._runner: asyncio.Task[None] | None = None
        self._publishers: list[Publisher] = []
        self._listeners: list[Callable[[Decision], None]] = []

    def subscribe(self, publisher: Publisher) -> None:
        """``publisher(nodes)`` is called after every commit that changed those nodes'
        desired state. It must not block: it is called on the commit path."""
        self._publishers.append(publisher)

    def listen(self, listener: Callable[[Decision], None]) -> None:
        """``listener(batch)`` is called after every committed batch, once it is applied.
        It must not block."""
        self._listeners.append(listener)

    async def close(self) -> None:
        """Decide and commit what is queued and under way (each caller answered), then
        let the deciding thread go; a decision asked for later gets an error."""
        await self.idle()
        self._thread.shutdown(wait=False)

    async def decide(self, decider: Decider[T], urgency: Urgency = Urgency.INTERACTIVE) -> T:
        """What ``decider`` returned, once its change is committed and applied; it is
        decided in the order of ``urgency`` (``decision_queue``)."""
        return await self._queued(decider, urgency, preview=False)

    async def preview(self, decider: Decider[T], urgency: Urgency = Urgency.INTERACTIVE) -> T:
        """What ``decider`` would return in its turn, its writes and events thrown away
        (a dry run): it sees every decision before it, as ``decide`` would."""
        return await self._queued(decider, urgency, preview=True)

    async def _queued(self, decider: Decider[T], urgency: Urgency, *, preview: bool) -> T:
        if self._quorum is not None and not preview:
            self._quorum.check()
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue.push(Job(decider, future, preview), urgency)
        self._arrived.set()
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._run())
        return await future

    def _refuse_queued(self, error: QuorumLost) -> None:
        """Answer every queued decision with ``error`` (previews stay: they write nothing)."""
        for job in self._queue.drop(lambda job: not job.preview):
            if not job.future.done():
                job.future.set_exception(error)

    async def idle(self) -> None:
        """Wait until no decision is queued or under way."""
        while self._runner is not None and not self._runner.done():
            await asyncio.shield(self._runner)

    async def record(self, notes: list[Note]) -> None:
        """Events of something that changes nothing else (a refusal, a drift report, a
        node lost), committed with the batch they fall in."""
        if notes:
            await self.decide(lambda draft: draft.change.notes.extend(notes))

    async def _run(self) -> None:
        """Decide a batch; then, while it commits, decide the next on top of it; apply
        the first once both are done, and commit the next while deciding the one after."""
        ahead: Decided | None = None  # decided, not yet committed
        while True:
            if ahead is None:
                ahead = await self._decided(Decision())
                if ahead is None:
                    return
            if ahead.batch.is_empty():
                _answer(ahead.answers)
                ahead = None
                continue
            ahead = await self._commit_while_deciding(ahead)

    async def _commit_while_deciding(self, current: Decided) -> Decided | None:
        """Commit ``current`` and meanwhile decide the next batch on top of it (the books
        still without it), until its commit returns. Once committed, ``current`` is
        applied and answered, and the next batch's own writes are returned, to commit
        on the revisions ``current`` left. When it fails, its callers get the error,
        memory is unchanged, and the next batch's deciders go back to the queue, in
        their places, to be decided again on the books as they are."""
        committing = asyncio.ensure_future(self._write(current.batch))
        following: Decided | None = None
        try:
            following = await self._decided(current.batch, committing)
            written = await committing
        except Exception as error:
            _fail(current.answers, error)
            if following is not None:
                self._queue.put_back(following.taken)
            return None
        except BaseException as error:  # cancelled: every caller hears of it
            committing.cancel()
            _fail([*current.answers, *(following.answers if following else ())], error)
            raise
        self._apply(current.batch, written)
        _answer(current.answers)
        if following is None:
            return None
        return Decided(following.batch.since(current.batch), following.answers, following.taken)

    async def _decided(
        self, base: Decision, committing: asyncio.Future[Any] | None = None
    ) -> Decided | None:
        """The next batch, decided on the books and ``base``; None when it took nothing.
        Without ``committing``: what the queue holds now, up to the batch's bounds.
        With it (``base``'s commit): what comes for as long as that commit is in
        flight, the decider under way when it returns finished first."""
        done = threading.Event()  # the deciding thread's view of ``committing``
        if committing is not None:
            committing.add_done_callback(lambda _: done.set())
        decided = Decided(base.copy())
        context = self._context.frozen()
        loop = asyncio.get_running_loop()
        room = MOST_PER_BATCH
        while room > 0 and not done.is_set():
            if not self._queue:
                if committing is None:
                    break
                await self._arrival_or(committing)
                continue
            queued = self._queue.take(room)
            started = time.perf_counter()
            try:
                batch, answers, later = await loop.run_in_executor(
                    self._thread, self._decide, queued, context, decided.batch, base, done
                )
            except BaseException as error:  # every caller hears of it; none waits for ever
                _fail([*decided.answers, *((e.item.future, None, None) for e in queued)], error)
                if isinstance(error, asyncio.CancelledError):
                    raise
                return None
            self._timings.decided(time.perf_counter() - started)
            self._queue.put_back(later)
            decided.batch = batch
            decided.answers += answers
            decided.taken += queued[: len(queued) - len(later)]
            room -= len(queued)
            if later or committing is None:
                break
        return decided if decided.taken else None

    async def _arrival_or(self, committing: asyncio.Future[Any]) -> None:
        """Wait until a decision is queued or ``committing`` is done."""
        self._arrived.clear()
        arrival = asyncio.ensure_future(self._arrived.wait())
        await asyncio.wait((committing, arrival), return_when=asyncio.FIRST_COMPLETED)
        arrival.cancel()

    def _decide(
        self,
        queued: list[Queued],
        context: Context,
        batch: Decision,
        base: Decision,
        done: threading.Event,
    ) -> tuple[Decision, list[Answer], list[Queued]]:
        """Run each decider on the books and the batch before it; the batch, each
        caller's answer or error (answered once the batch is committed), and the entries
        left for a later batch: from the first whose writes would take the batch's own
        (beyond ``base``) past ``MOST_OPERATIONS_PER_BATCH``, decided again then (its
        draft is thrown away), or from the first not begun once ``done`` was set."""
        answers: list[Answer] = []
        below = base.operations()
        for index, entry in enumerate(queued):
            decider, future, preview = entry.item.decider, entry.item.future, entry.item.preview
            if done.is_set():
                return batch, answers, queued[index:]
            if future.done():  # its caller is gone: never accepted, so never decided
                continue
            draft = Draft(self._books, context.over(batch), batch.copy())
            try:
                value = decider(draft)
                self._settle(draft)
            except Refused as refused:
                if not preview:
                    batch.notes.extend(refused.notes)
                answers.append((future, None, refused.error))
                continue
            except Exception as error:
                answers.append((future, None, error))
                continue
            if preview:
                answers.append((future, value, None))
                continue
            own = draft.change.operations() - below
            if own > MOST_OPERATIONS_PER_BATCH and batch.operations() > below:
                return batch, answers, queued[index:]
            batch = draft.change
            answers.append((future, value, None))
        return batch, answers, []

    async def _write(self, batch: Decision) -> Written:
        """Commit ``batch`` on the revisions the books keep; memory is not touched."""
        started = time.perf_counter()
        books, registry = self._books, self._registry
        compares = tuple(
            Compare(allocation_key(node), books.allocation_revision.get(node, 0))
            for node in sorted({*batch.nodes, *batch.deleted_nodes})
        )
        # Each node record written or deleted is still the one its decider read (a
        # deletion: the lost one); 0 for a node new to the store.
        compares += tuple(
            Compare(NODE_PREFIX + node, registry.revision(node))
            for node in sorted({*batch.records, *batch.deleted_nodes})
        )
        puts = {NODE_PREFIX + name: to_json(record) for name, record in batch.records.items()}
        deletes: list[str] = []
        for node in sorted(batch.deleted_nodes):
            held = books.nodes[node].allocations if node in books.nodes else {}
            deletes += [NODE_PREFIX + node, allocation_key(node), CORDON_PREFIX + node]
            deletes += [container_allocation_key(node, cid) for cid in held]
        for node, state in batch.nodes.items():
            inline = node in books.inline_allocations
            node_puts, node_deletes = node_writes(books.nodes.get(node), state, inline=inline)
            puts |= node_puts
            deletes += node_deletes
        puts |= {container_key(cid): to_json(r) for cid, r in batch.containers.items()}
        puts |= {deployment_key(*key): to_json(d) for key, d in batch.deployments.items()}
        puts |= {pending_key(cid): to_json(p) for cid, p in batch.pending.items()}
        puts |= {CORDON_PREFIX + n: b"{}" for n, on in batch.cordons.items() if on}
        deletes += [container_key(cid) for cid in batch.removed]
        deletes += [deployment_key(*key) for key in batch.removed_deployments]
        deletes += [pending_key(cid) for cid in batch.unpending]
        deletes += [CORDON_PREFIX + n for n, on in batch.cordons.items() if not on]
        preemptions = books.preemptions
        if batch.preemptions:
            recent = self._context.clock() - self._context.quotas.cooldown_s
            preemptions = [r for r in books.preemptions if r["at"] > recent]
            preemptions.extend(batch.preemptions)
            puts[PREEMPTIONS_KEY] = to_json(preemptions)
        puts |= {QUOTA_PREFIX + n: to_json(q) for n, q in batch.quotas.items() if q is not None}
        deletes += [QUOTA_PREFIX + n for n, q in batch.quotas.items() if q is None]
        pools = self._context.pools.staged(batch.pools, state=batch.pool_state)
        puts |= pools.puts
        staged = self._events.stage(batch.notes)
        puts |= staged.puts
        txn = Txn(compares=compares, puts=puts, deletes=(*deletes, *staged.deletes))
        result = await self._store.commit(txn)
        if not result.succeeded:
            raise DeployRefused(
                "conflict",
                "conflict",
                "another writer changed these nodes' allocations or records; try again",
                "conflict",
                {"nodes": sorted({*batch.nodes, *batch.deleted_nodes, *batch.records})},
            )
        return Written(result, staged, pools, preemptions, started)

    def _apply(self, batch: Decision, written: Written) -> None:
        """Take the committed ``batch`` into memory and hand it on."""
        books, registry, result = self._books, self._registry, written.result
        self._context.quotas.apply(batch.quotas)
        self._context.pools.confirm(written.pools)
        if batch.records or batch.deleted_nodes:
            registry.apply(
                batch.records,
                hellos=batch.hellos,
                deleted=batch.deleted_nodes,
                revision=result.revision,
                revisions=result.revisions,
            )
        books.inline_allocations.difference_update(batch.nodes)
        touched = books.apply(batch, result.revision)
        if result.revisions:
            _stamped_by_step(books, batch, result.revision, result.revisions)
        books.keep_preemptions(written.preemptions)
        self._events.confirm(written.staged)
        published = time.perf_counter()
        self._timings.committed(published - written.started)
        if touched:
            for publish in self._publishers:
                publish(touched)
            self._timings.published(time.perf_counter() - published)
        for listen in self._listeners:
            listen(batch)


def _stamped_by_step(
    books: Books, batch: Decision, last: int, revisions: Mapping[str, int]
) -> None:
    """After a commit made in steps, each revision the books keep for what ``batch``
    wrote is the revision of the step that wrote its key, as a fresh load reads it back
    (``Books.apply`` stamped them all with the ``last`` step's): a node header's, which
    the next commit compares; a node's desired state's, the newest of its keys; a newly
    stopping container's. O(keys written)."""
    newest: dict[str, int] = {}
    for key, revision in revisions.items():
        if key.startswith(ALLOCATION_PREFIX):
            node = parse_key(key)[0]
        elif key.startswith(CONTAINER_PREFIX):
            node = batch.containers[key.removeprefix(CONTAINER_PREFIX)].node
        else:
            continue
        newest[node] = max(newest.get(node, 0), revision)
    for node in batch.nodes:
        books.allocation_revision[node] = revisions[allocation_key(node)]
    for node, revision in newest.items():
        if node in books.node_revision:
            books.node_revision[node] = revision
    for container_id, record in batch.containers.items():
        if record.stopping and books.stop_revision.get(container_id) == last:
            books.stop_revision[container_id] = revisions[container_key(container_id)]


def _answer(answers: list[Answer]) -> None:
    for future, value, refusal in answers:
        if future.done():
            continue
        if refusal is None:
            future.set_result(value)
        else:
            future.set_exception(refusal)


def _fail(answers: list[Answer], error: BaseException) -> None:
    for future, _, _ in answers:
        if not future.done():
            future.set_exception(_failed(error))


def _failed(error: BaseException) -> Exception:
    if isinstance(error, Exception):
        return error
    return RuntimeError(f"the commit was interrupted: {error!r}")
