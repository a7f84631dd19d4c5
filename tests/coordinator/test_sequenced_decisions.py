"""Decisions sent at once over real HTTP are sequenced: none refuses another without a
real conflict, memory equals the store afterwards, nothing is allocated without its
container, and a failed commit changes nothing (issue 16's reproducers)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from coordinator.deployments import sequencer
from coordinator.keys import DEPLOYMENTS, STORE
from coordinator.store import StoreError, Txn, TxnResult
from tests.coordinator.conftest import Coordinator, register, report_caught_up
from tests.coordinator.test_deployment_api import call

NAMESPACE = "mini"
TINY = {"cpu": "0.01", "memory": "8Mi"}


def tiny(name: str) -> dict[str, Any]:
    return {"name": name, "image": "allot/busybox:test", "resources": TINY}


async def deploy_all(cluster: Coordinator, names: list[str]) -> list[tuple[int, Any]]:
    path = f"/v1/namespaces/{NAMESPACE}/deployments"
    return await asyncio.gather(*(call(cluster, "POST", path, tiny(n)) for n in names))


async def assert_memory_is_the_store(cluster: Coordinator) -> None:
    """Deployments, containers and the node's allocation as the API shows them from
    memory are what the store holds, and every allocation has its container."""
    _, listed = await call(cluster, "GET", f"/v1/namespaces/{NAMESPACE}/deployments")
    stored = await cluster.stored(f"/deployments/{NAMESPACE}/")
    assert {d["deployment"]["spec"]["name"] for d in listed["deployments"]} == {
        value["spec"]["name"] for value in stored.values()
    }
    _, containers = await call(cluster, "GET", "/v1/containers")
    stored_containers = await cluster.stored("/containers/")
    assert {c["record"]["id"]: c["record"] for c in containers["containers"]} == {
        value["id"]: value for value in stored_containers.values()
    }
    _, allocation = await call(cluster, "GET", "/v1/nodes/node-a/allocation")
    assert sorted(allocation["containers"]) == sorted(
        value["id"] for value in stored_containers.values()
    )
    stored_allocations = await cluster.stored("/allocations/node-a/")
    held = [key.removeprefix("/allocations/node-a/") for key in stored_allocations]
    assert sorted(held) == sorted(allocation["containers"])


async def test_thirty_deploys_at_once_to_one_node_all_commit(cluster: Coordinator) -> None:
    """Was: one 201 and 29 false 409s, 29 deployments in memory only, allocations
    leaked."""
    ws = await register(cluster, "node-a")
    names = [f"d{i}" for i in range(30)]
    answers = await deploy_all(cluster, names)
    assert [status for status, _ in answers] == [201] * 30, answers
    await assert_memory_is_the_store(cluster)
    path = f"/v1/namespaces/{NAMESPACE}/deployments/"
    deleted = await asyncio.gather(*(call(cluster, "DELETE", path + n) for n in names))
    assert {status for status, _ in deleted} == {200}, deleted
    await assert_memory_is_the_store(cluster)
    _, allocation = await call(cluster, "GET", "/v1/nodes/node-a/allocation")
    assert len(allocation["containers"]) == 30  # stopping: held until the agent says gone
    await report_caught_up(cluster, ws)
    await assert_memory_is_the_store(cluster)
    _, allocation = await call(cluster, "GET", "/v1/nodes/node-a/allocation")
    assert (allocation["containers"], allocation["memory_used"]) == ([], 0)


async def test_a_name_taken_at_once_twice_is_refused_once(cluster: Coordinator) -> None:
    await register(cluster, "node-a")
    answers = await deploy_all(cluster, ["same", "same", "same"])
    assert sorted(status for status, _ in answers) == [201, 409, 409], answers
    codes = {answer["error"]["code"] for status, answer in answers if status == 409}
    assert codes == {"deployment_exists"}
    await assert_memory_is_the_store(cluster)


async def test_decisions_sent_at_once_share_commits(
    cluster: Coordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Group commit: decisions queued while one commits go into the next transaction."""
    await register(cluster, "node-a")
    store = cluster.app[STORE]
    commit, commits = store.commit, []

    async def counting(txn: Txn) -> TxnResult:
        if any(key.startswith("/deployments/") for key in txn.puts):
            commits.append(txn)
        return await commit(txn)

    monkeypatch.setattr(store, "commit", counting)
    answers = await deploy_all(cluster, [f"d{i}" for i in range(30)])
    assert [status for status, _ in answers] == [201] * 30
    assert sum(1 for txn in commits for key in txn.puts if key.startswith("/deployments/")) == 30
    assert len(commits) < 30, f"{len(commits)} commits for 30 decisions"


async def test_decisions_that_would_pass_the_stores_limit_together_commit_apart(
    cluster: Coordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch stops before its writes pass the bound, as a burst of 1,000-container
    deployments would pass etcd's --max-txn-ops: each is committed, in more batches,
    and memory equals the store."""
    monkeypatch.setattr(sequencer, "MOST_OPERATIONS_PER_BATCH", 60)
    await register(cluster, "node-a")
    store = cluster.app[STORE]
    commit, sizes = store.commit, []

    async def counting(txn: Txn) -> TxnResult:
        if any(key.startswith("/deployments/") for key in txn.puts):
            sizes.append(len(txn.compares) + len(txn.puts) + len(txn.deletes))
        return await commit(txn)

    monkeypatch.setattr(store, "commit", counting)
    path = f"/v1/namespaces/{NAMESPACE}/deployments"
    answers = await asyncio.gather(  # 4 containers each: about 20 writes
        *(call(cluster, "POST", path, tiny(f"d{i}") | {"count": 4}) for i in range(12))
    )
    assert [status for status, _ in answers] == [201] * 12
    assert 12 / 3 <= len(sizes) < 12, sizes  # at most 3 a batch, and still batched
    assert max(sizes) <= 60, sizes
    await assert_memory_is_the_store(cluster)


async def test_a_failed_commit_changes_nothing_in_memory(
    cluster: Coordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit of a batch fails: each of its requests gets 503, memory stays what the
    store holds, and the next decisions go through."""
    await register(cluster, "node-a")
    assert (await deploy_all(cluster, ["before"]))[0][0] == 201
    store = cluster.app[STORE]
    commit = store.commit

    async def failing(txn: Txn) -> TxnResult:
        if any(key.startswith("/deployments/") for key in txn.puts):
            raise StoreError("disk full")
        return await commit(txn)

    monkeypatch.setattr(store, "commit", failing)
    answers = await deploy_all(cluster, ["x0", "x1", "x2"])
    assert {status for status, _ in answers} == {503}, answers
    await assert_memory_is_the_store(cluster)
    monkeypatch.setattr(store, "commit", commit)
    answers = await deploy_all(cluster, ["x0", "x1", "x2"])
    assert [status for status, _ in answers] == [201] * 3, answers
    await assert_memory_is_the_store(cluster)


async def test_a_coordinator_that_cannot_decide_answers_instead_of_hanging(
    cluster: Coordinator,
) -> None:
    """Deciding itself fails (here: its thread is gone, as at shutdown): each request of
    the batch gets an error answer, and memory is the store."""
    await register(cluster, "node-a")
    await cluster.app[DEPLOYMENTS].close()
    answers = await asyncio.wait_for(deploy_all(cluster, ["a", "b"]), timeout=10)
    assert {status for status, _ in answers} == {500}, answers
    await assert_memory_is_the_store(cluster)
