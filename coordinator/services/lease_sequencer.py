"""The one way a lease decision happens: decided in order, committed, then applied.

    lease = await sequencer.decide(lambda batch: grant(batch, request))

The lease domain's rules are those of the deployments' sequencer
(``coordinator.deployments.sequencer``): deciders run one at a time, in the order they
came, each on the committed tables plus the decisions before it in its batch that are
not yet committed; the deciders queued while a commit is in flight form the next batch,
committed as one store transaction (batches grow with the load); only once it succeeded
are the tables changed and the callers answered; a failed commit changes nothing in
memory and each of its callers gets the error. A decider that raises is answered with
its error, and its changes are taken back at once (``LeaseBatch.rollback_to``).

It is a sequencer of its own, not a second user of the deployments' one, because the
two domains share nothing: lease decisions read and write only the keys under
``/leases/`` (``lease_records``), and no deployment decision reads those. So neither
waits for the other's batches, and there is no order to keep between them. A lease
decision is microseconds (bench/leases.py: 3.5-15 us a request at 10,000 clients), so
batches are decided on the event loop, not on a thread; ``MOST_PER_BATCH`` bounds how
long one batch holds the loop.

The naive way, which this replaced: each request changed the tables, awaited its own
commit and undid its change if that failed. Meanwhile another request decided on the
uncommitted grant, and a status read showed it; an undo could put back a lease over a
later decision's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from coordinator.services.lease_batch import LeaseBatch, LeaseBooks, Settled
from coordinator.store import Store, StoreError, Txn

T = TypeVar("T")
LeaseDecider = Callable[[LeaseBatch], T]
Queued = tuple[LeaseDecider[Any], "asyncio.Future[Any]"]
Answer = tuple["asyncio.Future[Any]", Any, Exception | None]

# At most this many decisions in one batch: 256 refreshes of a table of 10,000 clients
# hold the event loop about 4 ms (bench/leases.py's per-request cost).
MOST_PER_BATCH = 256


class LeaseSequencer:
    def __init__(self, store: Store, books: LeaseBooks) -> None:
        self._store = store
        self._books = books
        self._queue: list[Queued] = []
        self._runner: asyncio.Task[None] | None = None

    async def decide(self, decider: LeaseDecider[T]) -> T:
        """What ``decider`` returned, once its change is committed and applied."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue.append((decider, future))
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._run())
        return await future

    async def idle(self) -> None:
        """Wait until no decision is queued or under way."""
        while self._runner is not None and not self._runner.done():
            await asyncio.shield(self._runner)

    async def _run(self) -> None:
        while self._queue:
            queued = self._queue[:MOST_PER_BATCH]
            del self._queue[:MOST_PER_BATCH]
            await self._batch(queued)

    async def _batch(self, queued: list[Queued]) -> None:
        answers, settled = self._decide(queued)
        try:
            if not settled.is_empty():
                await self._commit(settled)
        except BaseException as error:  # every caller hears of it; none waits for ever
            failed = error if isinstance(error, Exception) else StoreError(repr(error))
            for future, _, _ in answers:
                if not future.done():
                    future.set_exception(failed)
            if isinstance(error, asyncio.CancelledError):
                raise
            return
        settled.apply(self._books)
        for future, value, refusal in answers:
            if future.done():
                continue
            if refusal is None:
                future.set_result(value)
            else:
                future.set_exception(refusal)

    def _decide(self, queued: list[Queued]) -> tuple[list[Answer], Settled]:
        """Each decider in turn on the books and the batch before it; each caller's
        answer or error, and the batch's outcome (the books are as committed again)."""
        batch = LeaseBatch(self._books)
        answers: list[Answer] = []
        for decider, future in queued:
            if future.done():  # its caller is gone: never accepted, so never decided
                continue
            point = batch.savepoint()
            try:
                answers.append((future, decider(batch), None))
            except Exception as error:
                batch.rollback_to(point)
                answers.append((future, None, error))
        return answers, batch.settle()

    async def _commit(self, settled: Settled) -> None:
        result = await self._store.commit(Txn(puts=settled.puts, deletes=settled.deletes))
        if not result.succeeded:  # a lease commit compares nothing of its own
            raise StoreError("the store refused the lease commit")
