"""Hand-made changes on the real Docker engine, put back by the agent runtime and reported
as drift: limits changed or added in place, a memory limit added where none is desired
(Docker cannot remove it in place, so the container is made anew), a container removed
with ``docker rm -f``. Every value is read back from ``docker inspect`` and the
container's cgroup files."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import docker
import pytest

from agent.runtime.plan import NO_IN_PLACE_REMOVAL, REMOVED_OUTSIDE
from shared.protocol import DesiredContainer, Limits
from tests.docker.runtimes import (
    MIB,
    applied,
    assert_enforced,
    container,
    cpus,
    logged,
    managed,
    running_runtime,
    started_at,
    status_of,
)
from tests.polling import eventually

pytestmark = pytest.mark.docker
HIGH, LOW = str(cpus()[-1]), str(cpus()[0])
CORRECTED_SECONDS = 15.0  # a Docker event wakes the runtime at once; resync is 10 s


def unlimited(reservation: int = 32 * MIB) -> DesiredContainer:
    """As the coordinator writes a soft-memory container: a reservation, no memory limit."""
    limits = Limits(cpuset_cpus=HIGH, cpu_shares=717, cpu_quota=-1, mem_reservation=reservation)
    return container("free", limits=limits)


UNLIMITED = unlimited().limits


@pytest.mark.parametrize(
    ("reservation", "by_hand", "drift"),
    [
        (0, {"mem_reservation": 16 * MIB}, "mem_reservation 16Mi -> 0"),
        (32 * MIB, {"mem_reservation": 48 * MIB}, "mem_reservation 48Mi -> 32Mi"),
        (32 * MIB, {"cpu_quota": 50_000}, "cpu_quota 50000 -> -1"),
        (32 * MIB, {"cpu_shares": 2}, "cpu_shares 2 -> 717"),
        (32 * MIB, {"cpuset_cpus": LOW}, f"cpuset_cpus {LOW} -> {HIGH}"),
    ],
    ids=["reservation-added", "reservation-moved", "quota-added", "shares", "cpuset"],
)
async def test_a_limit_changed_by_hand_is_put_back_in_place_as_drift(
    docker_client: docker.DockerClient,
    node: str,
    tmp_path: Path,
    runtime_log: Any,
    reservation: int,
    by_hand: dict[str, Any],
    drift: str,
) -> None:
    if by_hand.get("cpuset_cpus") == HIGH:
        pytest.skip("this host has one CPU: a cpuset cannot be moved")
    wanted = unlimited(reservation)
    async with running_runtime(node, tmp_path) as runtime:
        runtime.set_desired(1, [wanted], full=True)
        await applied(runtime, 1)
        before = started_at(docker_client, node)
        docker_client.api.update_container(before["free"][0], **by_hand)
        await eventually(lambda: status_of(runtime, "free").drift != [], within=CORRECTED_SECONDS)
        assert status_of(runtime, "free").drift == [drift]
        assert_enforced(docker_client, node, runtime, {"free": wanted.limits})
        assert started_at(docker_client, node) == before  # in place: not restarted
    (corrected,) = logged(runtime_log, "drift corrected")
    field, change = drift.split(" ", 1)
    assert (corrected["id"], corrected[field]) == ("free", change)


async def test_a_memory_limit_added_by_hand_is_taken_away_by_making_the_container_anew(
    docker_client: docker.DockerClient, node: str, tmp_path: Path, runtime_log: Any
) -> None:
    async with running_runtime(node, tmp_path) as runtime:
        runtime.set_desired(1, [unlimited()], full=True)
        await applied(runtime, 1)
        (docker_id, _) = started_at(docker_client, node)["free"]
        # as `docker update --memory 64m --memory-swap 64m` does
        docker_client.api.update_container(docker_id, mem_limit=64 * MIB, memswap_limit=64 * MIB)
        await eventually(lambda: status_of(runtime, "free").drift != [], within=CORRECTED_SECONDS)
        assert status_of(runtime, "free").drift == [
            "mem_limit 64Mi -> 0",
            "memswap_limit 64Mi -> 0",
            f"recreated ({NO_IN_PLACE_REMOVAL})",
        ]
        assert_enforced(docker_client, node, runtime, {"free": UNLIMITED})
        made_anew = managed(docker_client, node)["free"]
        assert made_anew["Id"] != docker_id
        assert (made_anew["HostConfig"]["Memory"], made_anew["HostConfig"]["MemorySwap"]) == (0, 0)
    (recreated,) = logged(runtime_log, "container recreated")
    assert (recreated["id"], recreated["reason"]) == ("free", NO_IN_PLACE_REMOVAL)


async def test_a_container_removed_by_hand_is_made_anew_as_drift(
    docker_client: docker.DockerClient, node: str, tmp_path: Path, runtime_log: Any
) -> None:
    async with running_runtime(node, tmp_path) as runtime:
        runtime.set_desired(1, [unlimited()], full=True)
        await applied(runtime, 1)
        (docker_id, _) = started_at(docker_client, node)["free"]
        docker_client.api.remove_container(docker_id, force=True)  # `docker rm -f`
        await eventually(lambda: status_of(runtime, "free").drift != [], within=CORRECTED_SECONDS)
        assert status_of(runtime, "free").drift == [f"recreated ({REMOVED_OUTSIDE})"]
        assert status_of(runtime, "free").drift_at > 0
        assert_enforced(docker_client, node, runtime, {"free": UNLIMITED})
        assert managed(docker_client, node)["free"]["Id"] != docker_id
    (recreated,) = logged(runtime_log, "container recreated")
    assert (recreated["id"], recreated["reason"]) == ("free", REMOVED_OUTSIDE)


async def test_the_same_change_put_back_twice_is_two_corrections(
    docker_client: docker.DockerClient, node: str, tmp_path: Path
) -> None:
    async with running_runtime(node, tmp_path) as runtime:
        runtime.set_desired(1, [unlimited()], full=True)
        await applied(runtime, 1)
        (docker_id, _) = started_at(docker_client, node)["free"]
        times = [0.0]
        for _ in range(2):
            docker_client.api.update_container(docker_id, cpu_shares=2)
            await eventually(
                lambda: status_of(runtime, "free").drift_at > times[-1], within=CORRECTED_SECONDS
            )
            times.append(status_of(runtime, "free").drift_at)
            assert status_of(runtime, "free").drift == ["cpu_shares 2 -> 717"]


async def test_docker_refuses_a_cpu_count_by_hand_on_a_container_the_agent_made(
    docker_client: docker.DockerClient, node: str, tmp_path: Path
) -> None:
    """Why the agent does not watch ``NanoCpus``: Docker refuses ``--cpus`` on a container
    with a CFS period, and the agent sets one on every container it makes."""
    async with running_runtime(node, tmp_path) as runtime:
        runtime.set_desired(1, [unlimited()], full=True)
        await applied(runtime, 1)
    (docker_id, _) = started_at(docker_client, node)["free"]
    refused = await asyncio.create_subprocess_exec(
        "docker", "update", "--cpus", "0.5", docker_id, stderr=asyncio.subprocess.PIPE
    )
    _, error = await refused.communicate()
    assert refused.returncode != 0
    assert b"Nano CPUs cannot be updated as CPU Period has already been set" in error
    assert managed(docker_client, node)["free"]["HostConfig"]["NanoCpus"] == 0
