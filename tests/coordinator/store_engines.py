"""Both store engines behind one face, for the conformance suite: a SQLite file in the
test's directory, or a prefix of the test's own on the session's real etcd cluster."""

from __future__ import annotations

import tempfile
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

from coordinator.store import ClusterStore
from coordinator.store.etcd import EtcdStore
from coordinator.store.etcd_link import EtcdSettings
from coordinator.store.sqlite import SqliteStore
from tests.etcd_cluster import EtcdCluster

ENGINES = ("sqlite", "etcd")


@dataclass
class Engine:
    """Opens stores of one engine on the same data: a reopen sees what was committed."""

    name: str
    path: Path | None = None
    etcd: EtcdSettings | None = None

    async def open(self) -> ClusterStore:
        if self.etcd is not None:
            return await EtcdStore.open(self.etcd)
        assert self.path is not None
        return await SqliteStore.open(self.path)

    def fresh(self) -> Engine:
        """The same engine on data of its own: another prefix, or a file in a new
        directory (left to the system's temporary directory cleanup)."""
        if self.etcd is not None:
            return replace(self, etcd=replace(self.etcd, prefix=f"/test-{uuid.uuid4().hex[:12]}"))
        return sqlite_engine(Path(tempfile.mkdtemp(prefix="allot-store-")))


def sqlite_engine(directory: Path) -> Engine:
    return Engine("sqlite", path=directory / "store.db")


def etcd_settings(cluster: EtcdCluster) -> EtcdSettings:
    """Settings for a prefix of the caller's own, so no test sees another's keys."""
    return EtcdSettings(endpoints=cluster.endpoints, prefix=f"/test-{uuid.uuid4().hex[:12]}")


def etcd_engine(cluster: EtcdCluster) -> Engine:
    return Engine("etcd", etcd=etcd_settings(cluster))
