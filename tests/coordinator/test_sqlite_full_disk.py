"""The SQLite store on a real tmpfs that fills up (``tests.small_disk``): every write is
refused with the cause, nothing half-written is left, the cause is logged once and
cleared by the first write that succeeds; opening on the full disk is a StoreError."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from coordinator.store import StoreError, Txn
from coordinator.store.sqlite import SqliteStore
from shared.logs import fields_of
from tests.small_disk import fill, small_disk

__all__ = ["small_disk"]  # the fixture, used by name
FULL = "database or disk is full"


@pytest.fixture
def store_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    logging.getLogger("allot").propagate = True
    caplog.set_level(logging.INFO, logger="allot.coordinator.store")
    return caplog


def put(key: str, size: int = 64) -> Txn:
    return Txn(puts={key: b"x" * size})


async def test_writes_on_a_full_disk_fail_with_the_cause_and_recover_once_space_is_freed(
    small_disk: Path, store_log: pytest.LogCaptureFixture
) -> None:
    store = await SqliteStore.open(small_disk / "allot.db")
    try:
        acknowledged = [(await store.commit(put(f"/before/{i}"))).revision for i in range(20)]
        filler = fill(small_disk)

        # Many at once: one group commit or several, each caller told the cause.
        outcomes = await asyncio.gather(
            *(store.commit(put(f"/full/{i}", 4096)) for i in range(50)), return_exceptions=True
        )
        assert all(isinstance(outcome, StoreError) for outcome in outcomes), outcomes
        assert all(FULL in str(outcome) for outcome in outcomes)
        assert "cannot rollback" not in str(outcomes[0])
        assert store.write_health.problem == f"{FULL} (0 bytes free in {small_disk})"
        assert store.revision == acknowledged[-1]
        assert [e.key for e in await store.range("/full/")] == []

        said = [r for r in store_log.records if r.name == "allot.coordinator.store"]
        assert [r.getMessage() for r in said] == [f"store writes fail: {FULL}"]
        assert fields_of(said[0]) == {"data_dir": small_disk, "free_bytes": 0}

        filler.unlink()
        result = await store.commit(put("/after"))
        assert result.succeeded
        assert store.write_health.problem == ""
        assert store_log.records[-1].getMessage() == "store writes succeed again"
        assert len(await store.range("/before/")) == 20
    finally:
        await store.close()


async def test_opening_on_a_full_disk_is_a_store_error_naming_the_cause(
    small_disk: Path,
) -> None:
    path = small_disk / "allot.db"
    store = await SqliteStore.open(path)
    await store.commit(put("/kept"))
    filler = fill(small_disk)
    with pytest.raises(StoreError):  # the rest of the WAL cannot be written back
        await store.commit(put("/refused", 4096))
    await store.close()

    with pytest.raises(StoreError) as refused:
        await SqliteStore.open(path)
    assert str(refused.value).startswith(f"{path}: ")
    assert str(refused.value).endswith(f"(0 bytes free in {small_disk})")

    filler.unlink()
    reopened = await SqliteStore.open(path)
    try:
        assert [e.key for e in await reopened.range("/")] == ["/kept"]
    finally:
        await reopened.close()
