"""Deciding while committing, by urgency, against a store that fails commits at random
(issue 29): waves of concurrent decisions (deploys, scales, deletes, cordons, drains,
scheduler passes) on a real SQLite store whose commits fail (an error, or a refused
compare) as hypothesis draws them. Once everything settled:

1. every caller got one answer: its decision's own (a value or a refusal), or the
   failed commit's error;
2. the answers are what a sequential run in the committed order gives: the decisions
   whose batches committed are run again one at a time, in that order, on a fresh store,
   and each answers the same, and leaves the same books;
3. memory equals a fresh load of the store (the revisions the books keep included), and
   the books' indexes equal a rebuild.

The committed order is read from the batches as committed: each decider, wrapped, adds
an event naming its call, refusals included. Container ids are made from the state the
decider sees (the lowest free number of its deployment), so that both runs name the same
containers alike; the clock stands still.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from coordinator.config import PoolSettings, QuotaSettings
from coordinator.deployments import decision_queue, pending, placing
from coordinator.deployments.books import Books
from coordinator.deployments.decision_queue import Urgency
from coordinator.deployments.draft import Draft
from coordinator.deployments.sequencer import Refused
from coordinator.deployments.service import DeploymentService
from coordinator.deployments.stored_books import read_books
from coordinator.errors import ApiError
from coordinator.services.events import EVENT_PREFIX as EVENTS
from coordinator.services.events import EventLog, Note
from coordinator.services.pool_service import PoolService
from coordinator.services.quota_service import QuotaService
from coordinator.services.registry import NodeRegistry
from coordinator.store import Store, StoreError, Txn, TxnResult
from coordinator.store.delegating import DelegatingStore
from coordinator.store.sqlite import SqliteStore
from shared.api.deployments import DeploymentSpec, ResourcesSpec
from tests.builders import make_inventory
from tests.coordinator.test_stopping_api import _plain

NODES = ("n0", "n1", "n2")
NAMES = ("a", "b", "c")
MARK = "test-call"  # the kind of the event naming a committed call
INJECTED = "injected commit failure"
CLOCK = 1_000.0


@dataclass(frozen=True)
class Op:
    kind: str
    name: str = "a"
    count: int = 1
    node: str = "n0"
    pick: int = 0
    bind: bool = False


ops = st.one_of(
    st.builds(
        Op,
        kind=st.just("deploy"),
        name=st.sampled_from(NAMES),
        count=st.integers(1, 5),
        bind=st.booleans(),
    ),
    st.builds(Op, kind=st.just("scale"), name=st.sampled_from(NAMES), count=st.integers(0, 6)),
    st.builds(Op, kind=st.just("delete_deployment"), name=st.sampled_from(NAMES)),
    st.builds(Op, kind=st.just("delete"), pick=st.integers(0, 20)),
    st.builds(
        Op, kind=st.sampled_from(("cordon", "uncordon", "drain")), node=st.sampled_from(NODES)
    ),
    st.builds(Op, kind=st.just("schedule")),
)
# A wave: calls sent at once; a plan: what each commit does in turn (then: succeed).
waves = st.lists(st.lists(ops, min_size=1, max_size=7), min_size=1, max_size=4)
plans = st.lists(st.sampled_from(("ok", "ok", "fail", "refuse", "slow")), max_size=16)


class FlakyStore(DelegatingStore):
    """The real store, whose commits fail as ``plan`` says, one word a commit: "fail"
    raises before anything is written, "refuse" answers as a failed compare does, "slow"
    commits after a pause (so that more is decided meanwhile)."""

    def __init__(self, store: SqliteStore) -> None:
        super().__init__(store)
        self.plan: list[str] = []
        self.failed: set[int] = set()  # the calls named in the commits that failed

    async def commit(self, txn: Txn) -> TxnResult:
        step = self.plan.pop(0) if self.plan else "ok"
        if step != "ok":  # a commit that takes its time: more is decided meanwhile
            await asyncio.sleep(0.02)
        if step in ("fail", "refuse"):
            self.failed |= named_calls(txn)
        if step == "fail":
            raise StoreError(INJECTED)
        if step == "refuse":
            return TxnResult(succeeded=False, revision=self.revision)
        return await super().commit(txn)


def named_calls(txn: Txn) -> set[int]:
    """The calls whose marks ``txn`` writes."""
    written = (json.loads(value) for key, value in txn.puts.items() if key.startswith(EVENTS))
    return {int(event["reason"]) for event in written if event["kind"] == MARK}


# -- calls named in the batches they commit with -------------------------------------

CALL: contextvars.ContextVar[int] = contextvars.ContextVar("call")
_deciding = threading.local()  # the draft of the decider under way, and the ids it took


def state_made_id(namespace: str, deployment: str) -> str:
    """The lowest numbered id of the deployment that the draft under way does not hold
    and this decider has not taken yet: the same in any run that decides on the same
    state."""
    draft: Draft = _deciding.draft
    taken: set[str] = _deciding.taken
    number = 0
    while True:
        candidate = f"{namespace}-{deployment}-{number}"
        held = (
            draft.container(candidate)
            or draft.replaced(candidate)
            or draft.stopping(candidate)
            or draft.pending(candidate)
        )
        if candidate not in taken and held is None:
            taken.add(candidate)
            return candidate
        number += 1


def naming_calls(service: DeploymentService) -> list[int]:
    """Wrap the service's deciders so that each adds an event naming its call, refused
    or not, and makes ids from the state; the calls, in the order their batches
    commit."""
    sequencer = service._sequencer
    decide = sequencer.decide
    committed: list[int] = []

    async def named(decider: Callable[[Draft], Any], urgency: Urgency = Urgency.INTERACTIVE) -> Any:
        mark = Note(MARK, str(CALL.get()))

        def deciding(draft: Draft) -> Any:
            _deciding.draft, _deciding.taken = draft, set()
            try:
                value = decider(draft)
            except Refused as refused:
                raise Refused(refused.error, [*refused.notes, mark]) from refused
            except ApiError as error:
                raise Refused(error, [mark]) from error
            draft.note(mark)
            return value

        return await decide(deciding, urgency)

    sequencer.decide = named  # type: ignore[method-assign]
    sequencer.listen(
        lambda batch: committed.extend(int(n.reason) for n in batch.notes if n.kind == MARK)
    )
    return committed


# -- the runs --------------------------------------------------------------------------


def spec(name: str, count: int, bind: bool) -> DeploymentSpec:
    return DeploymentSpec(
        name=name,
        image="busybox",
        count=count,
        resources=ResourcesSpec(cpu="0.5", memory="128Mi"),
        cpu_bind=bind,
        restart_policy="always",
    )


async def service_on(store: Store) -> DeploymentService:
    """The service over ``store`` with ``NODES`` registered, its clock standing still."""
    registry = await NodeRegistry.load(store, lease_seconds=3600.0)
    quotas = await QuotaService.load(store, share_base=100, settings=QuotaSettings())
    pools = await PoolService.load(store, PoolSettings())
    events = await EventLog.load(store, clock=lambda: CLOCK)
    service = DeploymentService(
        store, registry, quotas, events, pools, share_base=100, clock=lambda: CLOCK
    )
    for node in NODES:
        await service.hello(node, inventory=make_inventory(), address="x", agent_version="t")
    return service


def picked(service: DeploymentService, op: Op) -> str:
    held = sorted(service.books.containers)
    return held[op.pick % len(held)] if held else "team-a-a-gone"


async def call(service: DeploymentService, op: Op, target: str) -> object:
    match op.kind:
        case "deploy":
            return await service.deploy("team-a", spec(op.name, op.count, op.bind))
        case "scale":
            return await service.scale("team-a", op.name, op.count)
        case "delete_deployment":
            return await service.delete_deployment("team-a", op.name)
        case "delete":
            return await service.delete_container(target)
        case "cordon" | "uncordon":
            await service.cordon(op.node, op.kind == "cordon")
            return None
        case "drain":
            return await service.drain(op.node)
        case _:
            return await service.schedule()


def answer(outcome: object) -> object:
    """What a caller was told, comparable across runs."""
    if isinstance(outcome, BaseException):
        return (type(outcome).__name__, str(outcome), getattr(outcome, "details", None))
    return outcome


async def concurrent_run(
    directory: Path, waves: list[list[Op]], plan: list[str]
) -> tuple[list[Op], list[str], dict[int, object], list[int], set[int], object]:
    """Every wave's calls at once; the calls, their targets, their answers, the
    committed order, the calls whose commit failed and the books."""
    flaky = FlakyStore(await SqliteStore.open(directory / "concurrent.db"))
    try:
        service = await service_on(flaky)
        committed = naming_calls(service)
        flaky.plan = list(plan)
        calls: list[Op] = []
        targets: list[str] = []
        answers: dict[int, object] = {}

        async def one(index: int, op: Op, target: str) -> None:
            CALL.set(index)
            await asyncio.sleep(0.01 * (index % 3))  # some come while others commit
            try:
                answers[index] = answer(await call(service, op, target))
            except Exception as error:
                answers[index] = answer(error)

        for wave in waves:
            first = len(calls)
            calls += wave
            targets += [picked(service, op) for op in wave]
            sent = [one(first + i, op, targets[first + i]) for i, op in enumerate(wave)]
            await asyncio.wait_for(asyncio.gather(*sent), timeout=10)
        await service._sequencer.idle()  # no scheduler loop runs: passes are calls here
        assert sorted(answers) == list(range(len(calls))), "a caller got no answer"
        await assert_memory_is_the_store(service, flaky)
        return calls, targets, answers, committed, flaky.failed, held(service.books)
    finally:
        await flaky.close()


async def sequential_run(
    directory: Path, calls: list[Op], targets: list[str], order: list[int]
) -> tuple[dict[int, object], object]:
    """The committed calls one at a time, in ``order``: their answers and the books."""
    store = await SqliteStore.open(directory / "sequential.db")
    try:
        service = await service_on(store)
        committed = naming_calls(service)
        answers: dict[int, object] = {}
        for index in order:
            CALL.set(index)
            try:
                answers[index] = answer(await call(service, calls[index], targets[index]))
            except Exception as error:
                answers[index] = answer(error)
        assert committed == order
        await assert_memory_is_the_store(service, store)
        return answers, held(service.books)
    finally:
        await store.close()


def held(books: Books) -> object:
    """What the books hold, but the store's revisions (which depend on the batches)."""
    return (
        books.containers,
        books.stopping,
        books.pending,
        books.deployments,
        books.cordoned,
        {node: state.allocations for node, state in books.nodes.items()},
    )


async def assert_memory_is_the_store(service: DeploymentService, store: Store) -> None:
    service.check_indexes()
    fresh = await read_books(store)
    assert _plain(fresh) == _plain(service.books)
    assert fresh.allocation_revision == service.books.allocation_revision
    assert fresh.node_revision == service.books.node_revision
    assert fresh.deployments == service.books.deployments
    assert fresh.cordoned == service.books.cordoned
    stored_events = (await EventLog.load(store, clock=lambda: CLOCK)).events()
    assert stored_events == service.events.events()


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(waves=waves, plan=plans)
def test_concurrent_decisions_on_a_failing_store_answer_as_a_sequential_run(
    waves: list[list[Op]], plan: list[str]
) -> None:
    with (
        tempfile.TemporaryDirectory() as directory,
        mock.patch.object(placing, "new_id", state_made_id),
        mock.patch.object(pending, "new_id", state_made_id),
        mock.patch.object(decision_queue, "SMALL_PLACING", 2),  # some deploys are bulk
    ):
        calls, targets, answers, order, failed, books = asyncio.run(
            concurrent_run(Path(directory), waves, plan)
        )
        assert len(order) == len(set(order)), f"a call committed twice: {order}"
        # Only the callers of a batch that failed were told of the failure; those decided
        # on top of it were decided again, and committed.
        assert set(answers) - set(order) == failed
        for index in failed:
            told = answers[index]
            assert isinstance(told, tuple), told
            assert told[0] in ("StoreError", "DeployRefused"), told
            assert INJECTED in told[1] or "another writer changed" in told[1], told
        event(f"commits failed: {bool(failed)}")
        event(f"committed out of arrival order: {order != sorted(order)}")
        again, books_again = asyncio.run(sequential_run(Path(directory), calls, targets, order))
        assert {i: answers[i] for i in order} == again
        assert books == books_again
