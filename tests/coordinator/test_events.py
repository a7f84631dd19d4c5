"""The event log: numbered in order, filtered, stored with its decision, the oldest
dropped once ``KEEP`` are held (also when one decision brings more than ``KEEP``), and
loaded back after a restart; memory and store hold the same events after every decision."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import coordinator.services.events as events_module
from coordinator.services.events import EVENT_PREFIX, KEEP, EventLog, Note, event_key
from coordinator.store import Entry, Store, Txn, TxnResult
from coordinator.store.sqlite import SqliteStore
from shared.api.events import Event
from shared.codec import to_json


def at(value: float = 100.0) -> float:
    return value


async def committed(store: Store, log: EventLog, notes: list[Note]) -> None:
    """Stage, commit and confirm ``notes`` as a decision of their own."""
    staged = log.stage(notes)
    await store.commit(Txn(puts=staged.puts, deletes=staged.deletes))
    log.confirm(staged)


async def test_events_are_numbered_stored_filtered_and_loaded_again(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "allot.db")
    log = await EventLog.load(store, clock=at)
    staged = log.stage(
        [Note("placed", "on n1", namespace="a", container="c1"), Note("refused", "quota")]
    )
    await store.commit(Txn(puts=staged.puts, deletes=staged.deletes))
    log.confirm(staged)
    await committed(store, log, [Note("lost", "no heartbeat for 15s", node="n1")])
    assert [e.sequence for e in log.events()] == [1, 2, 3]
    assert [e.kind for e in log.events(since=1)] == ["refused", "lost"]
    assert [e.container for e in log.events(namespace="a")] == ["c1"]
    again = await EventLog.load(store, clock=at)
    assert again.events() == log.events()
    assert again.stage([Note("placed", "x")]).events[0].sequence == 4
    await store.close()


async def test_the_oldest_events_are_deleted_once_the_log_is_full(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "allot.db")
    full = [Event(sequence=i, at=1.0, kind="placed", reason="r") for i in range(1, KEEP + 1)]
    log = EventLog(full, clock=at)
    staged = log.stage([Note("deleted", "a"), Note("deleted", "b")])
    assert staged.deletes == (event_key(1), event_key(2))
    log.confirm(staged)
    kept = log.events()
    assert (len(kept), kept[0].sequence, kept[-1].sequence) == (KEEP, 3, KEEP + 2)
    await store.close()


async def test_an_event_can_carry_the_time_it_happened(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "allot.db")
    log = await EventLog.load(store, clock=at)
    notes = [Note("drift", "corrected: cpu_shares 2 -> 717", at=42.5), Note("lost", "x")]
    await committed(store, log, notes)
    assert [(e.kind, e.at) for e in log.events()] == [("drift", 42.5), ("lost", 100.0)]
    again = await EventLog.load(store, clock=at)
    assert again.events() == log.events()
    await store.close()


def filled(count: int) -> list[Event]:
    return [Event(sequence=i, at=1.0, kind="placed", reason="r") for i in range(1, count + 1)]


@pytest.mark.parametrize("held", [0, 3, KEEP], ids=["empty", "three", "full"])
async def test_one_decision_may_bring_more_events_than_the_log_keeps(
    tmp_path: Path, held: int
) -> None:
    # A 10,000-container deployment stages 10,000 "placed" events and more; a status frame
    # with 20,000 drifting containers, 20,000. Every one is numbered (and logged on
    # confirm); the newest KEEP are what store and memory hold afterwards.
    store = await SqliteStore.open(tmp_path / "allot.db")
    old = filled(held)
    if old:
        await store.commit(Txn(puts={event_key(e.sequence): to_json(e) for e in old}))
    log = await EventLog.load(store, clock=at)
    many = 2 * KEEP + 5
    staged = log.stage([Note("drift", f"corrected {i}") for i in range(many)])
    assert [e.sequence for e in staged.events] == list(range(held + 1, held + many + 1))
    assert sorted(staged.puts) == [event_key(e.sequence) for e in staged.events[-KEEP:]]
    assert staged.deletes == tuple(event_key(e.sequence) for e in old)
    await store.commit(Txn(puts=staged.puts, deletes=staged.deletes))
    log.confirm(staged)
    kept = log.events()
    assert [e.sequence for e in kept] == list(range(held + many - KEEP + 1, held + many + 1))
    assert (await EventLog.load(store, clock=at)).events() == kept
    assert len(await store.range(EVENT_PREFIX)) == KEEP
    assert log.stage([Note("placed", "x")]).events[0].sequence == held + many + 1
    await store.close()


class DictStore:
    """Just enough of a ``Store`` for the event log: keys and values, no revisions."""

    quorum = None

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    @property
    def revision(self) -> int:
        return 0

    async def get(self, key: str) -> Entry | None:
        value = self.data.get(key)
        return None if value is None else Entry(key, value, 0, 0)

    async def range(self, prefix: str) -> list[Entry]:
        return [Entry(k, v, 0, 0) for k, v in sorted(self.data.items()) if k.startswith(prefix)]

    async def commit(self, txn: Txn) -> TxnResult:
        for key in txn.deletes:
            self.data.pop(key, None)
        self.data.update(txn.puts)
        return TxnResult(succeeded=True, revision=0)

    async def close(self) -> None:
        pass


@settings(max_examples=150, deadline=None)
@given(
    keep=st.integers(1, 6),
    batches=st.lists(st.integers(0, 15), max_size=10),
    reload=st.lists(st.booleans(), max_size=10),
)
def test_memory_and_store_hold_the_same_newest_events(
    keep: int, batches: list[int], reload: list[bool]
) -> None:
    # After every decision, whatever the sizes of the batches (above the bound too) and
    # with restarts in between: memory == store == the newest ``keep`` events, numbered
    # without gaps from 1.
    async def run() -> None:
        store = DictStore()
        log = await EventLog.load(store, clock=at)
        total = 0
        for k, size in enumerate(batches):
            if k < len(reload) and reload[k]:
                log = await EventLog.load(store, clock=at)
            staged = log.stage([Note("drift", f"{total + i}") for i in range(size)])
            await store.commit(Txn(puts=staged.puts, deletes=staged.deletes))
            log.confirm(staged)
            total += size
            newest = list(range(max(1, total - keep + 1), total + 1))
            assert [e.sequence for e in log.events()] == newest
            assert [e.sequence for e in (await EventLog.load(store, clock=at)).events()] == newest

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(events_module, "KEEP", keep)
        asyncio.run(run())


def test_an_event_carries_every_field_of_its_note() -> None:
    note = Note("placed", "on n1", "ns", "web", "web-1", "n1", at=7.5)
    (event,) = EventLog([], clock=at).stage([note]).events
    assert {f.name: getattr(event, f.name) for f in dataclasses.fields(Note)} == (
        dataclasses.asdict(note)
    )
