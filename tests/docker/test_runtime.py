"""The agent runtime on the real Docker engine: desired states applied, changed in place,
drift put back, strangers left alone, GPUs requested by UUID. Every value is read back
from ``docker inspect`` and from the container's cgroup files."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import docker
import pytest
import requests

from agent.discovery.gpu import probe_gpus
from shared.protocol import Limits
from tests.docker.conftest import IMAGE
from tests.docker.runtimes import (
    applied,
    assert_enforced,
    container,
    cpus,
    logged,
    managed,
    memory_limits,
    running_runtime,
    started_at,
    status_of,
    this_host,
)
from tests.fakes.nvml import two_gpus_mig_mixed
from tests.polling import eventually

pytestmark = pytest.mark.docker
HIGH, LOW = str(cpus()[-1]), str(cpus()[0])


def three_containers() -> list[Any]:
    """Two bound containers sharing the high CPU's pieces, one on the shared pool."""
    return [
        container("bound-a", limits=memory_limits(HIGH, shares=717, mib=64)),
        container("bound-b", limits=memory_limits(HIGH, shares=307, mib=32)),
        container("pooled-c", shared_pool=True, limits=memory_limits(mib=48, cpu_quota=50_000)),
    ]


def three_enforced(pool: str = LOW if HIGH != LOW else HIGH) -> dict[str, Limits]:
    """What the three containers hold; the pool is the CPUs no bound container uses."""
    return {
        "bound-a": memory_limits(HIGH, shares=717, mib=64),
        "bound-b": memory_limits(HIGH, shares=307, mib=32),
        "pooled-c": memory_limits(pool, mib=48, cpu_quota=50_000),
    }


async def test_a_desired_state_is_created_with_every_limit(
    docker_client: docker.DockerClient, node: str, tmp_path: Path, runtime_log: Any
) -> None:
    async with running_runtime(node, tmp_path) as runtime:
        runtime.set_desired(1, three_containers(), full=True)
        await applied(runtime, 1)
        assert_enforced(docker_client, node, runtime, three_enforced())
    labels = managed(docker_client, node)["bound-a"]["Config"]["Labels"]
    assert {k: v for k, v in labels.items() if k != "allot.spec"} == {
        "allot.id": "bound-a",
        "allot.node": node,
        "allot.namespace": "team-a",
        "allot.deployment": "web",
        "allot.bound": "true",  # bound to its CPUs, which it keeps until it is gone
    }
    started = logged(runtime_log, "container started")
    assert {"id": "bound-a", "cpuset": HIGH, "cpu_shares": 717, "cpu_quota": -1, "mem": "64Mi"} in [
        {k: entry[k] for k in ("id", "cpuset", "cpu_shares", "cpu_quota", "mem")}
        for entry in started
    ]


async def test_new_limits_are_applied_in_place_without_a_restart(
    docker_client: docker.DockerClient, node: str, tmp_path: Path, runtime_log: Any
) -> None:
    async with running_runtime(node, tmp_path) as runtime:
        runtime.set_desired(1, three_containers(), full=True)
        await applied(runtime, 1)
        before = started_at(docker_client, node)
        moved = memory_limits(LOW, shares=512, mib=96)
        runtime.set_desired(2, [container("bound-a", limits=moved)], full=False)
        await applied(runtime, 2)
        # both CPUs now hold bound containers, so the shared pool is every offered CPU
        everything = ",".join(str(cpu) for cpu in runtime.host.offered)
        assert_enforced(
            docker_client, node, runtime, three_enforced(everything) | {"bound-a": moved}
        )
        assert started_at(docker_client, node) == before
        # only the container revision 2 changed reports it: the others' statuses stay as
        # they were, so a partial status need not list them
        assert status_of(runtime, "bound-a").revision == 2
        assert status_of(runtime, "bound-b").revision == 1
    updates = {entry["id"]: entry for entry in logged(runtime_log, "limits updated")}
    if HIGH != LOW:
        assert updates["bound-a"]["cpuset_cpus"] == f"{HIGH} -> {LOW}"
    assert updates["bound-a"]["cpu_shares"] == "717 -> 512"
    assert updates["bound-a"]["mem_limit"] == "64Mi -> 96Mi"


async def test_a_hand_made_change_is_put_back_and_reported_as_drift(
    docker_client: docker.DockerClient, node: str, tmp_path: Path, runtime_log: Any
) -> None:
    async with running_runtime(node, tmp_path) as runtime:
        runtime.set_desired(1, three_containers(), full=True)
        await applied(runtime, 1)
        target = managed(docker_client, node)["bound-a"]
        docker_client.api.update_container(
            target["Id"], cpu_shares=2, mem_limit=128 * 1024**2, memswap_limit=128 * 1024**2
        )
        await eventually(lambda: status_of(runtime, "bound-a").drift != [], within=15)
        assert_enforced(docker_client, node, runtime, three_enforced())
        assert status_of(runtime, "bound-a").drift == [
            "cpu_shares 2 -> 717",
            "mem_limit 128Mi -> 64Mi",
            "memswap_limit 128Mi -> 64Mi",
        ]
    (corrected,) = logged(runtime_log, "drift corrected")
    assert (corrected["id"], corrected["cpu_shares"]) == ("bound-a", "2 -> 717")


@pytest.fixture
def strangers(docker_client: docker.DockerClient, node: str) -> Iterator[list[str]]:
    """Running containers that are not this node's to manage: one without allot's labels,
    one of another node, one with this node's label but no allot id."""
    labelled = (
        {"app": "not-ours"},
        {"allot.id": "x", "allot.node": "another-node"},
        {"allot.node": node},
    )
    made = [
        docker_client.containers.run(IMAGE, ["sleep", "3600"], detach=True, labels=labels)
        for labels in labelled
    ]
    yield [one.id for one in made if one.id is not None]
    for one in made:
        one.remove(force=True)


async def test_containers_without_this_nodes_labels_are_left_alone(
    docker_client: docker.DockerClient, node: str, tmp_path: Path, strangers: list[str]
) -> None:
    before = [docker_client.api.inspect_container(one) for one in strangers]
    async with running_runtime(node, tmp_path) as runtime:
        runtime.set_desired(1, [], full=True)
        await applied(runtime, 1)
        runtime.set_desired(2, three_containers(), full=True)
        await applied(runtime, 2)
        runtime.set_desired(3, [], full=True)
        await applied(runtime, 3)
        await eventually(lambda: list(managed(docker_client, node)) == [""])
    after = [docker_client.api.inspect_container(one) for one in strangers]
    assert [a["State"] for a in after] == [b["State"] for b in before]
    assert [a["HostConfig"] for a in after] == [b["HostConfig"] for b in before]


async def test_a_container_that_ran_to_completion_is_reported_with_its_exit_code_and_left(
    docker_client: docker.DockerClient, node: str, tmp_path: Path
) -> None:
    failing = container(
        "fails", command=["sh", "-c", "exit 3"], limits=memory_limits(HIGH), restart_policy="no"
    )
    async with running_runtime(node, tmp_path) as runtime:
        runtime.set_desired(1, [failing], full=True)
        await eventually(lambda: status_of(runtime, "fails").exit_code == 3, within=15)
        assert status_of(runtime, "fails").state == "exited"
        first = managed(docker_client, node)["fails"]
        runtime.set_desired(2, [failing], full=True)
        await applied(runtime, 2)
        assert managed(docker_client, node)["fails"]["State"] == first["State"]


async def test_a_changed_command_makes_a_new_container(
    docker_client: docker.DockerClient, node: str, tmp_path: Path
) -> None:
    async with running_runtime(node, tmp_path) as runtime:
        runtime.set_desired(1, [container("job", limits=memory_limits(HIGH))], full=True)
        await applied(runtime, 1)
        old = managed(docker_client, node)["job"]["Id"]
        changed = container("job", command=["sleep", "7200"], limits=memory_limits(HIGH))
        runtime.set_desired(2, [changed], full=True)
        await applied(runtime, 2)
        found = managed(docker_client, node)
        assert list(found) == ["job"]
        assert found["job"]["Id"] != old
        assert found["job"]["Config"]["Cmd"] == ["sleep", "7200"]


async def test_gpus_are_requested_by_uuid_and_unknown_ones_refused(
    docker_client: docker.DockerClient, node: str, tmp_path: Path
) -> None:
    report = probe_gpus(two_gpus_mig_mixed(), lambda _: None)
    whole, mig = report.gpus[0].uuid, report.gpus[1].mig_devices[0].uuid
    host = dataclasses.replace(this_host(), devices=frozenset({whole, mig}))
    unknown = f"GPU-{uuid.uuid4()}"
    sent: list[dict[str, Any]] = []

    def record(response: requests.Response, *args: object, **kwargs: object) -> None:
        request = response.request
        if request.method == "POST" and urlparse(request.path_url).path.endswith(
            "/containers/create"
        ):
            assert isinstance(request.body, bytes | str)
            sent.append(json.loads(request.body))

    async with running_runtime(node, tmp_path, host=host) as runtime:
        runtime.engine.client.api.hooks["response"].append(record)
        runtime.set_desired(
            1,
            [
                container("trainer", gpus=[whole, mig], limits=memory_limits(HIGH)),
                container("stray", gpus=[unknown], limits=memory_limits(HIGH)),
            ],
            full=True,
        )
        await eventually(lambda: status_of(runtime, "trainer").error != "", within=15)
        await eventually(lambda: status_of(runtime, "stray").state == "refused")
    (body,) = sent  # nothing was sent to Docker for the refused container
    assert body["Labels"]["allot.id"] == "trainer"
    assert body["HostConfig"]["DeviceRequests"] == [
        {
            "Driver": "",
            "Count": 0,
            "DeviceIDs": [whole, mig],
            "Capabilities": [["gpu"]],
            "Options": {},
        }
    ]
    # this host has no NVIDIA runtime, so the engine cannot start it, and says so
    assert "gpu" in status_of(runtime, "trainer").error.lower()
    stray = status_of(runtime, "stray")
    assert stray.error.startswith(f"refused: GPU {unknown} is not on this node")
    assert whole in stray.error
    assert mig in stray.error
