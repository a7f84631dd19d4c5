"""The event log: numbered in order, filtered, stored with its decision, the oldest
dropped once ``KEEP`` are held, and loaded back after a restart."""

from __future__ import annotations

from pathlib import Path

from coordinator.events import KEEP, EventLog, Note, event_key
from coordinator.store import Txn
from coordinator.store.sqlite import SqliteStore
from shared.api.events import Event


def at(value: float = 100.0) -> float:
    return value


async def test_events_are_numbered_stored_filtered_and_loaded_again(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "allot.db")
    log = await EventLog.load(store, clock=at)
    staged = log.stage(
        [Note("placed", "on n1", namespace="a", container="c1"), Note("refused", "quota")]
    )
    await store.commit(Txn(puts=staged.puts, deletes=staged.deletes))
    log.confirm(staged)
    await log.record([Note("lost", "no heartbeat for 15s", node="n1")])
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
    log = EventLog(store, full, clock=at)
    staged = log.stage([Note("deleted", "a"), Note("deleted", "b")])
    assert staged.deletes == (event_key(1), event_key(2))
    log.confirm(staged)
    kept = log.events()
    assert (len(kept), kept[0].sequence, kept[-1].sequence) == (KEEP, 3, KEEP + 2)
    await store.close()


async def test_an_event_can_carry_the_time_it_happened(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "allot.db")
    log = await EventLog.load(store, clock=at)
    await log.record([Note("drift", "corrected: cpu_shares 2 -> 717", at=42.5), Note("lost", "x")])
    assert [(e.kind, e.at) for e in log.events()] == [("drift", 42.5), ("lost", 100.0)]
    again = await EventLog.load(store, clock=at)
    assert again.events() == log.events()
    await store.close()
