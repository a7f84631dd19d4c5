"""What only the etcd engine has, on the session's real 3-member cluster: prefixes that
keep clusters apart, etcd's transaction limits, several endpoints and one member's
crash, and settings that cannot work."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace

import msgspec
import pytest

from bench.deployments import host
from bench.etcd_cluster import MAX_TXN_OPS, EtcdCluster
from coordinator.services.registry import NodeRegistry
from coordinator.store import StoreError, Txn
from coordinator.store.etcd import EtcdStore
from coordinator.store.etcd_link import EtcdSettings
from coordinator.store.watch_answers import ANSWER_SECONDS, QUIET_SECONDS
from shared.api.deployments import DeploymentSpec, ResourcesSpec
from tests.coordinator.deployments.test_indexes import load
from tests.coordinator.store_engines import etcd_settings


@pytest.fixture
async def etcd(etcd_cluster: EtcdCluster) -> AsyncIterator[EtcdStore]:
    store = await EtcdStore.open(etcd_settings(etcd_cluster))
    yield store
    await store.close()


async def test_prefixes_keep_clusters_apart(etcd_cluster: EtcdCluster) -> None:
    base = etcd_settings(etcd_cluster)
    one = await EtcdStore.open(replace(base, prefix=base.prefix + "/one"))
    longer = await EtcdStore.open(replace(base, prefix=base.prefix + "/one2"))
    try:
        await one.commit(Txn(puts={"/nodes/a": b"1"}))
        await longer.commit(Txn(puts={"/nodes/b": b"2"}))

        assert [e.key for e in await one.range("")] == ["/nodes/a"]
        assert [e.key for e in await longer.range("")] == ["/nodes/b"]
        assert await one.get("/nodes/b") is None
    finally:
        await one.close()
        await longer.close()


async def test_a_deployment_sized_transaction_is_one_atomic_commit(etcd: EtcdStore) -> None:
    """1,200 containers of about 1 KiB each: more than etcd's default 128 operations and
    1.5 MiB, within the limits the README asks for."""
    puts = {f"/containers/c{i:05}": b"x" * 1000 for i in range(1200)}

    result = await etcd.commit(Txn(puts=puts))

    entries = await etcd.range("/containers/")
    assert result.succeeded
    assert len(entries) == 1200
    assert {e.mod_revision for e in entries} == {result.revision}


async def test_a_transaction_over_max_txn_ops_is_refused_clearly(etcd: EtcdStore) -> None:
    before = etcd.revision
    puts = {f"/k/{i:06}": b"" for i in range(MAX_TXN_OPS + 1)}

    with pytest.raises(StoreError, match=r"--max-txn-ops.*nothing was committed"):
        await etcd.commit(Txn(puts=puts))

    assert await etcd.range("") == []
    assert (await etcd.commit(Txn(puts={"/after": b""}))).revision == before + 1


async def test_large_deployments_sent_together_fit_etcds_transaction_limit(
    etcd: EtcdStore,
) -> None:
    """Six 1,000-container deployments at once: folded into one transaction they are
    18,112 operations, over the session cluster's --max-txn-ops, and all six were
    refused. The sequencer's bound keeps each transaction under it: all six are placed,
    and a fresh load of the store holds them."""
    service = await load(etcd)
    registry = service._context.registry
    assert isinstance(registry, NodeRegistry)
    for i in range(100):
        await service.hello(f"n{i}", inventory=host(f"n{i}"), address="x", agent_version="t")
    resources = ResourcesSpec(cpu="0.01", memory="8Mi")
    specs = [DeploymentSpec(name=f"w{i}", image="busybox", count=1000, resources=resources)]
    specs += [msgspec.structs.replace(specs[0], name=f"w{i}") for i in range(1, 6)]
    placed = await asyncio.gather(*(service.deploy("team-a", spec) for spec in specs))
    assert [len(outcome.containers) for outcome in placed] == [1000] * 6
    again = await load(etcd)
    assert again.containers() == service.containers()
    await again.close()
    await service.close()


async def test_the_cluster_keeps_deciding_with_one_member_of_three_killed(
    etcd_cluster: EtcdCluster,
) -> None:
    """Kill the member this store talks to, then the raft leader: commits go on through
    the others (two of three are a quorum), and the killed members rejoin. A commit in
    flight while raft elects a new leader may end "outcome unknown" (a StoreError: the
    coordinator answers 503 and its caller tries again), so each is tried again until it
    succeeds; these puts are idempotent."""
    store = await EtcdStore.open(etcd_settings(etcd_cluster))
    killed: list[int] = []

    async def until_committed(txn: Txn) -> int:
        """The tries it took; raft's election is over well within the deadline."""
        for tries in range(1, 30):
            try:
                assert (await store.commit(txn)).succeeded
                return tries
            except StoreError:
                await asyncio.sleep(0.5)
        raise AssertionError(f"{txn} never committed")

    try:
        await store.commit(Txn(puts={"/before": b"1"}))
        for victim in (0, etcd_cluster.leader()):
            etcd_cluster.kill(victim)
            killed.append(victim)
            await asyncio.gather(
                *(until_committed(Txn(puts={f"/during/{victim}/{i}": b"x"})) for i in range(20))
            )
            assert len(await store.range(f"/during/{victim}/")) == 20
            etcd_cluster.restart(victim)
            killed.remove(victim)
    finally:
        for victim in killed:
            etcd_cluster.restart(victim)
        await store.close()


async def test_a_watch_on_a_member_that_hangs_goes_on_through_another(
    etcd_cluster: EtcdCluster,
) -> None:
    """SIGSTOP of the member a watch streams from: its connection stays open and silent,
    its progress request goes unanswered, and the watch goes on through another member
    from the next revision, missing nothing."""
    victim = next(i for i in range(3) if i != etcd_cluster.leader())
    base = etcd_settings(etcd_cluster)
    others = tuple(e for i, e in enumerate(etcd_cluster.endpoints) if i != victim)
    watching = await EtcdStore.open(
        replace(base, endpoints=(etcd_cluster.endpoints[victim], *others))
    )
    writer = await EtcdStore.open(replace(base, endpoints=others))
    stream = watching.watch("/w/", watching.revision + 1)
    # Only so that a failure does not hang the run: quiet for QUIET_SECONDS, a progress
    # request unanswered for ANSWER_SECONDS, plus a shared host's slack.
    guard = QUIET_SECONDS + ANSWER_SECONDS + 10
    try:
        await writer.commit(Txn(puts={"/w/1": b"1"}))
        assert [e.key for e in await anext(stream)] == ["/w/1"]
        etcd_cluster.pause(victim)
        try:
            await writer.commit(Txn(puts={"/w/2": b"2"}))
            async with asyncio.timeout(guard):
                events = await anext(stream)
        finally:
            etcd_cluster.resume(victim)
        assert [e.key for e in events] == ["/w/2"]
    finally:
        await stream.aclose()
        await watching.close()
        await writer.close()


async def test_no_endpoint_answering_is_a_clear_error(etcd_cluster: EtcdCluster) -> None:
    unused = EtcdSettings(endpoints=("127.0.0.1:1",), timeout_s=0.5)

    with pytest.raises(StoreError, match=r"no etcd endpoint answers.*127\.0\.0\.1:1"):
        await EtcdStore.open(unused)


@pytest.mark.parametrize("prefix", ["allot", "/allot/", "/"])
async def test_a_prefix_that_could_overlap_another_is_refused(
    etcd_cluster: EtcdCluster, prefix: str
) -> None:
    with pytest.raises(ValueError, match="etcd_prefix"):
        await EtcdStore.open(replace(etcd_settings(etcd_cluster), prefix=prefix))
