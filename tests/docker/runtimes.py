"""An in-process agent runtime on the real Docker engine, and ways to look at what it did.

async with running_runtime(node, tmp_path) as runtime:
    runtime.set_desired(1, [container(...)], full=True)
    await applied(runtime, 1)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import docker
import msgspec
import pytest

from agent.discovery.inventory import discover
from agent.metrics import AgentMetrics
from agent.runtime.docker_engine import DockerEngine
from agent.runtime.labels import node_filter
from agent.runtime.plan import Host
from agent.runtime.reconciler import Runtime, RuntimeOptions
from agent.runtime.usage import CGROUP_ROOT
from shared.cpuset import CpuSet
from shared.logs import fields_of
from shared.pool_cgroups import DOCKER_PARENT, PREFIX
from shared.protocol import ContainerStatus, DesiredContainer, Limits
from tests.docker.cgroups import as_held, cgroup_settings
from tests.docker.conftest import IMAGE
from tests.polling import eventually

MIB = 1024 * 1024
CONVERGE_SECONDS = 30.0


def this_host() -> Host:
    """This machine as discovery sees it (the CPUs this process may use are offered)."""
    inventory = discover(sysfs_root=Path("/"), reserved=CpuSet(), hostname=socket.gethostname())
    return Host.of(inventory)


def cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def container(container_id: str, **fields: Any) -> DesiredContainer:
    """A sleeping busybox container; ``fields`` override any DesiredContainer field."""
    defaults: dict[str, Any] = {
        "image": IMAGE,
        "command": ["sleep", "3600"],
        "namespace": "team-a",
        "deployment": "web",
    }
    return DesiredContainer(id=container_id, **(defaults | fields))


def memory_limits(
    cpuset: str = "", *, shares: int = 1024, mib: int = 64, cpu_quota: int = -1
) -> Limits:
    """Limits as the placement spec writes them: memswap = limit, reservation = half."""
    return Limits(
        cpuset_cpus=cpuset,
        cpu_shares=shares,
        cpu_quota=cpu_quota,
        mem_limit=mib * MIB,
        memswap_limit=mib * MIB,
        mem_reservation=max(mib * MIB // 2, 6 * MIB),
    )


@contextlib.asynccontextmanager
async def running_runtime(
    node: str,
    tmp_path: Path,
    *,
    host: Host | None = None,
    resync_seconds: float = 10.0,
    metrics: AgentMetrics | None = None,
) -> AsyncIterator[Runtime]:
    """``metrics``, if given, gets the engine's call timings and the runtime's figures."""
    metrics = metrics or AgentMetrics()
    engine = DockerEngine.connect(node=node, base_url="", timeout=30, timings=metrics.docker_call)
    options = RuntimeOptions(
        node=node,
        state_path=tmp_path / f"agent-{node}.json",
        applied_path=tmp_path / f"applied-{node}.json",
        resync_seconds=resync_seconds,
        stop_timeout_seconds=1,
    )
    runtime = Runtime(engine, host or this_host(), options, metrics=metrics)
    task = asyncio.create_task(runtime.run())
    try:
        yield runtime
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        engine.close()


async def applied(runtime: Runtime, revision: int, within: float = CONVERGE_SECONDS) -> None:
    """Wait until the runtime reports ``revision`` applied."""
    await eventually(lambda: runtime.report().applied_revision >= revision, within=within)


def status_of(runtime: Runtime, container_id: str) -> ContainerStatus:
    """The container's reported status; state "unreported" before the runtime saw it."""
    reported = (c for c in runtime.report().containers if c.id == container_id)
    return next(reported, ContainerStatus(id=container_id, state="unreported"))


def managed(client: docker.DockerClient, node: str) -> dict[str, dict[str, Any]]:
    """``docker inspect`` of each container labelled for ``node``, by allot id. One the
    agent removes between the listing and its inspect (removals run in the background,
    past the revision that asked for them) is left out: it is gone."""
    found = client.api.containers(all=True, filters=node_filter(node))
    inspected = []
    for container in found:
        with contextlib.suppress(docker.errors.NotFound):
            inspected.append(client.api.inspect_container(container["Id"]))
    return {attrs["Config"]["Labels"].get("allot.id", ""): attrs for attrs in inspected}


def started_at(client: docker.DockerClient, node: str) -> dict[str, tuple[str, str]]:
    """Each managed container's Docker id and start time: unchanged if not restarted."""
    return {cid: (a["Id"], a["State"]["StartedAt"]) for cid, a in managed(client, node).items()}


def limits_in(attrs: dict[str, Any]) -> Limits:
    host = attrs["HostConfig"]
    return msgspec.convert(
        {
            "cpuset_cpus": host["CpusetCpus"],
            "cpuset_mems": host["CpusetMems"],
            "cpu_shares": host["CpuShares"],
            "cpu_quota": host["CpuQuota"],
            "cpu_period": host["CpuPeriod"],
            "mem_limit": host["Memory"],
            "memswap_limit": host["MemorySwap"],
            "mem_reservation": host["MemoryReservation"],
        },
        Limits,
    )


def assert_enforced(
    client: docker.DockerClient, node: str, runtime: Runtime, expected: dict[str, Limits]
) -> None:
    """Docker holds and the kernel enforces exactly ``expected`` (canonical form)."""
    host = runtime.host
    found = managed(client, node)
    assert sorted(found) == sorted(expected)
    for container_id, limits in expected.items():
        attrs = found[container_id]
        assert attrs["State"]["Status"] == "running", container_id
        want = host.settings(limits)
        assert host.settings(limits_in(attrs)) == want, container_id
        assert cgroup_settings(attrs["State"]["Pid"]) == as_held(want), container_id
        assert host.settings(status_of(runtime, container_id).limits) == want, container_id


def remove_all(client: docker.DockerClient, node: str) -> None:
    for found in client.api.containers(all=True, filters=node_filter(node)):
        client.api.remove_container(found["Id"], force=True)


def remove_empty_pool_cgroups(root: Path = CGROUP_ROOT) -> None:
    """The pools' cgroups (``shared.pool_cgroups``) that agents a test killed leave behind,
    those no container holds any more; one still in use stays (the kernel refuses)."""
    pattern = f"{DOCKER_PARENT.lstrip('/')}/{PREFIX}*"
    for directory in sorted({*root.glob(f"*/{pattern}"), *root.glob(pattern)}):
        with contextlib.suppress(OSError):  # in use, or gone with another hierarchy's link
            directory.rmdir()


def logged(caplog: pytest.LogCaptureFixture, message: str) -> list[dict[str, object]]:
    """The key=value fields of each line logged with ``message`` (see ``runtime_log``)."""
    return [dict(fields_of(r)) for r in caplog.records if r.getMessage() == message]
