"""Several coordinators on a real 3-member etcd cluster, as real processes: a paused
leader is fenced and stands by, and the cluster decides on with one etcd member killed."""

from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from bench.etcd_cluster import EtcdCluster
from client.api import ApiClient, ApiClientError
from tests.coordinator.store_engines import etcd_settings
from tests.e2e.coordinator_group import TTL_SECONDS, CoordinatorGroup, readiness, send
from tests.e2e.processes import API_TOKEN, Service, api

pytestmark = pytest.mark.e2e


def quota(max_cpu: int) -> dict[str, object]:
    return {"namespace": "team-a", "min": {"cpu": "1"}, "max": {"cpu": max_cpu}}


def max_cpu(url: str) -> object:
    (team,) = [q for q in api(url, "/v1/quotas")["quotas"] if q["name"] == "team-a"]
    return team


def test_a_paused_leader_is_fenced_and_comes_back_as_a_standby(
    tmp_path: Path, services: list[Service], etcd_cluster: EtcdCluster
) -> None:
    group = CoordinatorGroup.start(tmp_path, services, etcd_settings(etcd_cluster), count=2)
    old = group.wait_for_leader()
    group.wait_until_known(old)
    new = 1 - old
    old_url, new_url = group.urls[old], group.urls[new]
    assert readiness(new_url) == (503, {"status": "standby", "role": "standby", "leader": old_url})
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
