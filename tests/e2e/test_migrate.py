"""``allot-coordinator migrate``: a store populated by a real coordinator on SQLite is
copied into etcd exactly, a coordinator on etcd serves it, and a second copy into the
same prefix is refused."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import aiohttp
import pytest

from coordinator.store import Entry
from coordinator.store.etcd import EtcdStore
from coordinator.store.etcd_link import EtcdSettings
from coordinator.store.sqlite import SqliteStore
from tests.coordinator.store_engines import etcd_settings
from tests.e2e.conftest import etcd_flags
from tests.e2e.processes import BIN, Service, api
from tests.e2e.test_coordinator_killed_mid_decisions import (
    attach_agent,
    deploy,
    get,
    heartbeats,
)
from tests.e2e.test_leases import TEMPLATES, grant
from tests.etcd_cluster import EtcdCluster

pytestmark = pytest.mark.e2e


async def populate(url: str) -> None:
    async with aiohttp.ClientSession() as http:
        ws = await attach_agent(http, url)
        beating = asyncio.create_task(heartbeats(ws))
        assert [await deploy(http, url, f"d{i}") for i in range(3)] == [201] * 3
        beating.cancel()
        await ws.close()


async def deployments(url: str) -> list[str]:
    async with aiohttp.ClientSession() as http:
        listed = await get(http, url, "/v1/namespaces/mini/deployments")
    return sorted(d["deployment"]["spec"]["name"] for d in listed["deployments"])


async def contents(source: Path, target: EtcdSettings) -> tuple[list[Entry], list[Entry]]:
    """Every entry of both stores."""
    sqlite = await SqliteStore.open(source)
    etcd = await EtcdStore.open(target)
    try:
        return await sqlite.range(""), await etcd.range("")
    finally:
        await sqlite.close()
        await etcd.close()


def migrate(source: Path, target: EtcdSettings) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(BIN / "allot-coordinator"),
            "migrate",
            f"--from={source}",
            f"--to={','.join(target.endpoints)}",
            f"--etcd-prefix={target.prefix}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_populated_store_round_trips_into_etcd(
    tmp_path: Path, services: list[Service], etcd_cluster: EtcdCluster
) -> None:
    on_sqlite = Service.coordinator(tmp_path, toml=TEMPLATES).start()
    services.append(on_sqlite)
    url = on_sqlite.wait_for(r"coordinator listening url=(\S+)").group(1)
    asyncio.run(populate(url))
    assert grant(url, "c0", 60, has=60) == 60
    assert on_sqlite.stop() == 0
    target = etcd_settings(etcd_cluster)
    source = tmp_path / "data" / "allot.db"

    copied = migrate(source, target)

    assert copied.returncode == 0, copied.stderr + copied.stdout
    assert "store migrated" in copied.stdout + copied.stderr
    before, after = asyncio.run(contents(source, target))
    assert [(e.key, e.value) for e in after] == [(e.key, e.value) for e in before]
    assert len([e for e in after if e.key.startswith("/containers/")]) == 3

    again = migrate(source, target)
    assert again.returncode == 1
    assert "migrate copies only into an empty prefix" in again.stdout + again.stderr

    (tmp_path / "etcd").mkdir()  # its data_dir stays empty: the store is in etcd
    on_etcd = Service.coordinator(
        tmp_path / "etcd", toml=TEMPLATES, args=etcd_flags(target)
    ).start()
    services.append(on_etcd)
    url = on_etcd.wait_for(r"coordinator listening url=(\S+)").group(1)
    on_etcd.wait_for(r"leases loaded .* leases=1 .*learning=false")
    assert asyncio.run(deployments(url)) == ["d0", "d1", "d2"]
    leases = api(url, "/v1/resources/db.write/leases")["leases"]
    assert [(lease["client_id"], lease["has"]) for lease in leases] == [("c0", 60)]
