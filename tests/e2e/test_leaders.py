"""Several coordinators on a real 3-member etcd cluster, as real processes: a paused
leader is fenced and stands by, the cluster decides on with one etcd member killed, a
leader whose etcd member hangs mid-commit settles the commit on another and stays, and
the leader compacts etcd's history."""

from __future__ import annotations

import asyncio
import json
import signal
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bench.etcd_cluster import EtcdCluster
from client.api import ApiClient, ApiClientError
from coordinator.services.quota_service import QUOTA_PREFIX
from coordinator.store import WatchCompacted
from coordinator.store.etcd import EtcdStore
from coordinator.store.etcd_link import EtcdSettings
from tests.coordinator.store_engines import etcd_settings
from tests.e2e.coordinator_group import TTL_SECONDS, CoordinatorGroup, readiness, send
from tests.e2e.processes import API_TOKEN, Service, api

pytestmark = pytest.mark.e2e


def quota(max_cpu: int) -> dict[str, object]:
    return {"namespace": "team-a", "min": {"cpu": "1"}, "max": {"cpu": max_cpu}}


def max_cpu(url: str) -> dict[str, Any]:
    (team,) = [q for q in api(url, "/v1/quotas")["quotas"] if q["name"] == "team-a"]
    found: dict[str, Any] = team
    return found


def leading(url: str) -> float:
    """``allot_coordinator_leader`` in the coordinator's own /metrics (a standby's too)."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    (family,) = [f for f in text_string_to_metric_families(text) if f.name.endswith("_leader")]
    (sample,) = family.samples
    return sample.value


def test_a_paused_leader_is_fenced_and_comes_back_as_a_standby(
    tmp_path: Path, services: list[Service], etcd_cluster: EtcdCluster
) -> None:
    group = CoordinatorGroup.start(tmp_path, services, etcd_settings(etcd_cluster), count=2)
    old = group.wait_for_leader()
    group.wait_until_known(old)
    new = 1 - old
    old_url, new_url = group.urls[old], group.urls[new]
    assert readiness(new_url) == (503, {"status": "standby", "role": "standby", "leader": old_url})
    assert (leading(old_url), leading(new_url)) == (1, 0)
    assert send(old_url, "/v1/elasticquotas/team-a", quota(2)) == 200
    paused = group.coordinators[old].process
    assert paused is not None
    paused.send_signal(signal.SIGSTOP)
    paused_at = time.monotonic()
    with ThreadPoolExecutor(1) as pool:
        # Sent while it is paused: the request waits in its socket until it resumes.
        pending = pool.submit(send, old_url, "/v1/elasticquotas/team-a", quota(5))
        assert group.wait_for_leader([new], timeout=TTL_SECONDS + 5) == new
        took = time.monotonic() - paused_at
        assert send(new_url, "/v1/elasticquotas/team-a", quota(3)) == 200
        paused.send_signal(signal.SIGCONT)
        assert pending.result(timeout=20) in (307, 503)  # refused by the fence, or sent on
    group.coordinators[old].wait_for(r"WARNING no longer the leader; standing by reason=")
    group.coordinators[old].wait_for(rf"INFO standby leader={new_url}")
    assert readiness(old_url) == (503, {"status": "standby", "role": "standby", "leader": new_url})
    assert send(old_url, "/v1/elasticquotas/team-a", quota(6)) == 307  # later writes: sent on
    assert (leading(old_url), leading(new_url)) == (0, 1)
    # Only the leader's writes are in the store: the paused one committed nothing.
    (team,) = [q for q in api(new_url, "/v1/quotas")["quotas"] if q["name"] == "team-a"]
    assert team["max"] == {"cpu": "3"}, team
    assert group.wait_for_leader() == new
    assert took < TTL_SECONDS + 2, f"the standby took over {took:.1f}s after the pause"
    assert "Traceback" not in group.coordinators[old].text()


def test_the_coordinators_decide_on_with_one_etcd_member_of_three_killed(
    tmp_path: Path, services: list[Service], etcd_cluster: EtcdCluster
) -> None:
    # The member every coordinator talks to first, and not etcd's raft leader: killing
    # that one stops etcd itself until the others elect another (a second or more, under
    # load longer than a short leader TTL; the etcd store's own tests kill it too).
    victim = next(i for i in range(3) if i != etcd_cluster.leader())
    endpoints = etcd_cluster.endpoints[victim:] + etcd_cluster.endpoints[:victim]
    settings = replace(etcd_settings(etcd_cluster), endpoints=endpoints)
    group = CoordinatorGroup.start(tmp_path, services, settings, count=2)
    group.wait_for_leader()
    client = ApiClient(group.servers, API_TOKEN)
    client.put("/v1/elasticquotas/team-a", quota(1))
    etcd_cluster.kill(victim)
    try:
        for cpus in range(2, 8):
            _put_until_answered(client, "/v1/elasticquotas/team-a", quota(cpus))
        (team,) = [q for q in api(client.server, "/v1/quotas")["quotas"] if q["name"] == "team-a"]
        assert team["max"] == {"cpu": "7"}
    finally:
        etcd_cluster.restart(victim)
    group.wait_for_leader()


def _put_until_answered(client: ApiClient, path: str, body: object) -> None:
    """An idempotent PUT, sent again when it timed out: the first after the kill may
    wait on the killed member's connection longer than the client waits (under load)."""
    for _ in range(3):
        try:
            client.put(path, body)
            return
        except ApiClientError as error:
            if "timed out" not in str(error):
                raise
    client.put(path, body)


def test_a_commit_cut_off_by_a_hung_etcd_member_is_settled_on_another_and_the_leader_stays(
    tmp_path: Path, services: list[Service], etcd_cluster: EtcdCluster
) -> None:
    """The leader talks to an etcd member that hangs (SIGSTOP) while a write is in flight:
    the write's outcome is unknown until the fence settles it through another member
    (``coordinator.store.fenced``). It is answered 200 and applied once, the leader stays,
    and what it shows is what etcd holds, also once the hung member wakes up."""
    victim = next(i for i in range(3) if i != etcd_cluster.leader())
    others = tuple(e for i, e in enumerate(etcd_cluster.endpoints) if i != victim)
    base = etcd_settings(etcd_cluster)
    settings = [
        replace(base, endpoints=(etcd_cluster.endpoints[victim], *others)),  # the leader's
        replace(base, endpoints=others),  # the standby's, which never talks to the victim
    ]
    group = CoordinatorGroup.start(tmp_path, services, settings, count=2)
    url = group.urls[0]
    assert group.wait_for_leader() == 0
    group.wait_until_known(0)
    assert send(url, "/v1/elasticquotas/team-a", quota(2)) == 200
    etcd_cluster.pause(victim)
    try:
        status = send(url, "/v1/elasticquotas/team-a", quota(3))
    finally:
        etcd_cluster.resume(victim)
    assert status == 200
    assert send(url, "/v1/elasticquotas/team-a", quota(4)) == 200
    assert group.wait_for_leader() == 0
    assert max_cpu(url)["max"] == {"cpu": "4"}
    assert asyncio.run(_stored_quota(base, "team-a"))["max"] == {"cpu": "4"}
    text = group.coordinators[0].text()
    assert "no longer the leader" not in text
    assert "Traceback" not in text


async def _stored_quota(settings: EtcdSettings, name: str) -> dict[str, Any]:
    store = await EtcdStore.open(settings)
    try:
        entry = await store.get(QUOTA_PREFIX + name)
    finally:
        await store.close()
    assert entry is not None
    stored: dict[str, Any] = json.loads(entry.value)
    return stored


def test_the_leader_compacts_etcds_history_and_a_standby_still_takes_over(
    tmp_path: Path, services: list[Service], etcd_cluster: EtcdCluster
) -> None:
    """etcd keeps every revision until compacted (and then refuses writes at its space
    quota): the leader compacts what is older than a period, and a standby, which follows
    the watch, still holds every change when it takes over."""
    settings = etcd_settings(etcd_cluster)
    group = CoordinatorGroup.start(
        tmp_path, services, settings, count=2, args=[("--etcd-compact-seconds=0.5",)] * 2
    )
    old = group.wait_for_leader()
    group.wait_until_known(old)
    started_at = asyncio.run(_revision(settings))
    for cpus in range(2, 6):
        assert send(group.urls[old], "/v1/elasticquotas/team-a", quota(cpus)) == 200
        time.sleep(0.4)
    deadline = time.monotonic() + 10
    while (oldest := asyncio.run(_oldest_kept(settings))) <= started_at:
        assert time.monotonic() < deadline, f"history kept from {oldest}, not compacted"
        time.sleep(0.2)
    group.coordinators[old].kill9()
    new = group.wait_for_leader([1 - old], timeout=TTL_SECONDS + 5)
    assert max_cpu(group.urls[new])["max"] == {"cpu": "5"}


async def _revision(settings: EtcdSettings) -> int:
    store = await EtcdStore.open(settings)
    try:
        return store.revision
    finally:
        await store.close()


async def _oldest_kept(settings: EtcdSettings) -> int:
    """The oldest revision etcd still keeps the changes of (1: nothing compacted)."""
    store = await EtcdStore.open(settings)
    try:
        async for _ in store.watch("", 1):
            return 1
    except WatchCompacted as compacted:
        return compacted.oldest
    finally:
        await store.close()
    raise AssertionError("the watch ended without a change")
