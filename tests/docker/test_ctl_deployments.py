"""allotctl's deployment commands end to end: a coordinator and one agent, real processes
on the real Docker engine, driven only through ``allotctl`` (and ``api`` for the quota).
What it prints is what the coordinator placed and what Docker then holds."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from tests.docker.clusters import Cluster, running_cluster
from tests.docker.conftest import IMAGE
from tests.docker.runtimes import cpus
from tests.e2e.processes import allotctl, api

pytestmark = pytest.mark.docker
CONVERGE_SECONDS = 45.0
# team-a may use 0.6 CPU; 0.4 of it is guaranteed (in-quota), the rest is over-quota.
QUOTA = {"namespace": "team-a", "min": {"cpu": "0.4"}, "max": {"cpu": "0.6"}}
BATCH_TOML = f"""\
name = "batch"
image = "{IMAGE}"
command = ["sleep", "3600"]
count = 2
[resources]
cpu = "0.1"
memory = "16Mi"
[env]
MODE = "batch"
"""


@pytest.fixture
def cluster(tmp_path: Path, docker_client: docker.DockerClient) -> Iterator[Cluster]:
    """One node offering two CPUs of this host: a bound container takes one from the
    shared pool, where the unbound ones run."""
    with running_cluster(tmp_path, docker_client, nodes=1, cpus_each=2) as running:
        yield running


def ctl(url: str, *args: str) -> list[str]:
    """The lines ``allotctl`` printed; it must have succeeded."""
    result = allotctl(url, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def containers_json(url: str, *filters: str) -> list[dict[str, Any]]:
    answer = json.loads("\n".join(ctl(url, "containers", "--json", *filters)))
    views: list[dict[str, Any]] = answer["containers"]
    return views


def wait_until_running(url: str, count: int) -> list[dict[str, Any]]:
    """The containers once ``allotctl containers --json`` shows ``count``, all running."""
    deadline = time.monotonic() + CONVERGE_SECONDS
    while True:
        views = containers_json(url)
        if len(views) == count and all(view["state"] == "running" for view in views):
            return views
        assert time.monotonic() < deadline, f"not all {count} containers running: {views}"
        time.sleep(0.2)


def events(details: list[str]) -> list[str]:
    """The EVENT column of the history table that ends a container's details."""
    header = next(i for i, line in enumerate(details) if line.split()[:2] == ["AT", "EVENT"])
    return [line.split()[1] for line in details[header + 1 :]]


def docker_shares(client: docker.DockerClient, container_id: str) -> int | None:
    """The CPU shares Docker holds for the container; None once it is gone."""
    found = client.api.containers(all=True, filters={"label": [f"allot.id={container_id}"]})
    if not found:
        return None
    try:
        shares: int = client.api.inspect_container(found[0]["Id"])["HostConfig"]["CpuShares"]
    except docker.errors.NotFound:  # removed between the listing and the inspection
        return None
    return shares


def eventually_shares(client: docker.DockerClient, container_id: str, shares: int | None) -> None:
    deadline = time.monotonic() + CONVERGE_SECONDS
    while (held := docker_shares(client, container_id)) != shares:
        assert time.monotonic() < deadline, f"{container_id}: shares {held}, not {shares}"
        time.sleep(0.1)


def test_allotctl_deploys_shows_reallocs_and_deletes_on_a_real_node(
    cluster: Cluster, docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    url, (node,) = cluster.url, cluster.nodes
    cpu = str(cpus()[0])
    api(url, "/v1/elasticquotas/team-a", QUOTA, method="PUT")

    # from flags: a bound 0.3 core (a fragment of the node's first CPU)
    head, _, header, row = ctl(
        url, "deploy", "team-a", "--name", "web", "--image", IMAGE, "--cpu", "0.3",
        "--memory", "32Mi", "--cpu-bind", "--label", "tier=web", "--", "sleep", "3600",
    )  # fmt: skip
    assert head == "deployed team-a/web: 1 container(s)"
    assert header.split() == ["ID", "NODE", "CAPACITY", "CPUSET", "SHARES", "QUOTA", "MEMORY"]
    web, *placed = row.split()
    assert placed == [node, "in-quota", cpu, "307", "none", "32Mi"]

    # from a TOML file, a flag winning over it: two unbound containers on the shared pool
    (tmp_path / "batch.toml").write_text(BATCH_TOML)
    lines = ctl(url, "deploy", "team-a", "--file", str(tmp_path / "batch.toml"), "--env", "N=1")
    assert sorted(line.split()[2] for line in lines[3:]) == ["in-quota", "over-quota"]
    # each weighted as the 0.1 core it asks for (coordinator.deployments.pool_link)
    assert all(line.split()[3:] == ["shared", "102", "10000/100000", "16Mi"] for line in lines[3:])

    # the quota's max refuses a third deployment, saying by how much
    refused = allotctl(
        url, "deploy", "team-a", "--name", "more", "--image", IMAGE, "--cpu", "0.2",
        "--memory", "16Mi",
    )  # fmt: skip
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr.splitlines() == [
        "allotctl: ElasticQuota 'team-a': max exceeded: cpu used 0.5 + request 0.2 > max 0.6"
        " (403 quota_max_exceeded)",
        "  reason:                   quota",
        "  quota:                    team-a",
        "  kind:                     ElasticQuota",
        "  items:                    resource=cpu used=0.5 request=0.2 max=0.6",
        "  admitted_before_refusal:  0",
    ]

    views = wait_until_running(url, 3)
    header, *rows = ctl(url, "containers")
    assert header.split()[:6] == ["ID", "NAMESPACE", "DEPLOYMENT", "NODE", "STATE", "CAPACITY"]
    assert sorted(row.split()[:5] for row in rows) == sorted(
        [v["record"]["id"], "team-a", v["record"]["deployment"], node, "running"] for v in views
    )
    (over,) = containers_json(url, "--capacity", "over-quota")
    assert over["record"]["deployment"] == "batch"
    assert [row.split()[0] for row in ctl(url, "containers", "--capacity", "over-quota")[1:]] == [
        over["record"]["id"]
    ]
    assert ctl(url, "deployments", "team-a")[1:] == [
        f"batch  {IMAGE}  2      0.1  16Mi    no        auto      2/2",
        f"web    {IMAGE}  1      0.3  32Mi    yes       auto      1/1",
    ]
    assert "env             MODE=batch, N=1" in ctl(url, "deployment", "team-a", "batch")

    details = ctl(url, "container", web)
    assert f"cpuset          {cpu} (bound)" in details
    assert "labels          tier=web" in details
    assert "state           running" in details
    assert any(line.startswith("engine state    running, started 20") for line in details)
    assert f"engine holds    cpuset {cpu}, shares 307, quota none," in "\n".join(details)
    (uses,) = [line for line in details if line.startswith("uses ")]
    assert re.fullmatch(r"uses +cpu (-|\d+\.\d\d cores), memory (-|[\d.]+(Ki|Mi)?)", uses), uses

    # a realloc changes the limits live; Docker holds them soon after
    assert ctl(url, "realloc", web, "--cpu", "0.1", "--memory", "16Mi") == [
        f"container   {web} on {node}",
        "requests    cpu=0.4, memory=48Mi",
        f"cpuset      {cpu} (bound)",
        "cpu shares  410",
        "cpu quota   none",
        "memory      limit 48Mi, with swap 48Mi, reserved 24Mi",
    ]
    eventually_shares(docker_client, web, 410)
    assert events(ctl(url, "container", web)) == ["placed", "realloc"]

    # a deleted container stops; a stand-in keeps its deployment's count
    (deleted,) = ctl(url, "delete", "container", over["record"]["id"])
    stand_in = deleted.removeprefix(f"deleted container {over['record']['id']}; its stand-in ")
    assert stand_in.endswith(f" is on {node}"), deleted
    eventually_shares(docker_client, over["record"]["id"], None)
    assert ctl(url, "delete", "deployment", "team-a", "web") == [
        f"deleted deployment team-a/web and its 1 container(s): {web}"
    ]
    eventually_shares(docker_client, web, None)
    assert [view["record"]["deployment"] for view in containers_json(url)] == ["batch", "batch"]
