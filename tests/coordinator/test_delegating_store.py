"""The delegating store under the wrappers: what a wrapper does not override reaches the
store underneath (on a real SQLite file), and the quorum watch a leader's fenced store
holds is seen through every wrapper above it while the engines say they have none (on
the real etcd cluster), which is how the services find it."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Histogram

from bench.etcd_cluster import EtcdCluster
from coordinator.election import LEADER_KEY
from coordinator.metrics_store import TimedStore
from coordinator.store import Store, Txn, TxnResult
from coordinator.store.delegating import DelegatingStore
from coordinator.store.etcd import EtcdStore
from coordinator.store.fenced import FencedStore
from coordinator.store.quorum import Quorum
from coordinator.store.replica import Replica
from coordinator.store.sqlite import SqliteStore
from tests.coordinator.store_engines import etcd_settings


class Counted(DelegatingStore):
    """Counts its commits; the rest is the base's."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.commits = 0

    async def commit(self, txn: Txn) -> TxnResult:
        self.commits += 1
        return await super().commit(txn)


def timed(store: Store) -> TimedStore:
    registry = CollectorRegistry()
    return TimedStore(
        store,
        Histogram("commit_seconds", "", registry=registry),
        Histogram("commit_operations", "", registry=registry),
    )


async def test_what_a_wrapper_does_not_override_reaches_the_store(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "store.db")
    counted = Counted(store)
    result = await counted.commit(Txn(puts={"/a/1": b"x", "/a/2": b"y", "/b": b"z"}))
    assert result.succeeded
    assert counted.commits == 1
    assert counted.revision == store.revision == result.revision
    assert await counted.get("/a/1") == await store.get("/a/1")
    assert [e.key for e in await counted.range("/a/")] == ["/a/1", "/a/2"]
    assert counted.quorum is None
    await counted.close()  # the store's own close: its file lock is given back
    reopened = await SqliteStore.open(tmp_path / "store.db")
    assert (await reopened.get("/b")) is not None
    await reopened.close()


async def test_the_leaders_quorum_watch_is_seen_through_every_wrapper(
    etcd_cluster: EtcdCluster,
) -> None:
    etcd = await EtcdStore.open(etcd_settings(etcd_cluster))
    quorum = Quorum(etcd)
    replica = await Replica.follow(etcd)
    try:
        won = await etcd.commit(Txn(puts={LEADER_KEY: b"http://c0:7600"}))
        fenced = FencedStore(
            replica, LEADER_KEY, won.revision, witness=etcd, on_deposed=pytest.fail, quorum=quorum
        )
        assert fenced.quorum is quorum
        assert timed(fenced).quorum is quorum
        assert Counted(timed(fenced)).quorum is quorum
        # Commits sent as they come: no watch to refuse them ahead of etcd.
        assert etcd.quorum is None
        assert replica.quorum is None
        assert timed(replica).quorum is None
        unwatched = FencedStore(
            etcd, LEADER_KEY, won.revision, witness=etcd, on_deposed=pytest.fail
        )
        assert timed(unwatched).quorum is None
    finally:
        await quorum.close()
        await replica.close()  # and the store it follows
