"""Open the store the coordinator's settings choose: the embedded SQLite file in
``data_dir`` (the default) or the etcd cluster of ``etcd_endpoints``."""

from __future__ import annotations

from coordinator.config import CoordinatorConfig
from coordinator.store import ClusterStore
from coordinator.store.etcd import EtcdStore
from coordinator.store.sqlite import SqliteStore


async def open_store(config: CoordinatorConfig) -> ClusterStore:
    if config.store == "etcd":
        return await EtcdStore.open(config.etcd)
    return await SqliteStore.open(config.store_path)
