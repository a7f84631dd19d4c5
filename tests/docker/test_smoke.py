"""The fixture later issues build on: a container on the real engine with a cpuset and a
memory limit, both read back from ``docker inspect`` and from the cgroup files."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import docker
import pytest
from docker.models.containers import Container

from tests.docker.cgroups import read_limit
from tests.docker.conftest import IMAGE

pytestmark = pytest.mark.docker
MEMORY_LIMIT = 64 * 1024 * 1024


@pytest.fixture
def pinned(docker_client: docker.DockerClient) -> Iterator[tuple[Container, str]]:
    """A sleeping container pinned to the highest CPU this process may use."""
    cpu = str(max(os.sched_getaffinity(0)))
    container = docker_client.containers.run(
        IMAGE,
        ["sleep", "300"],
        name=f"allot-smoke-{uuid.uuid4().hex[:8]}",
        detach=True,
        cpuset_cpus=cpu,
        mem_limit=MEMORY_LIMIT,
        labels={"allot.test": "smoke"},
    )
    try:
        container.reload()
        assert container.status == "running", container.logs()
        yield container, cpu
    finally:
        container.remove(force=True)


def test_inspect_shows_the_cpuset_and_memory_limit(pinned: tuple[Container, str]) -> None:
    container, cpu = pinned
    host_config = container.attrs["HostConfig"]
    assert host_config["CpusetCpus"] == cpu
    assert host_config["Memory"] == MEMORY_LIMIT
    assert container.labels["allot.test"] == "smoke"


def test_cgroup_files_hold_the_cpuset_and_memory_limit(pinned: tuple[Container, str]) -> None:
    container, cpu = pinned
    pid = container.attrs["State"]["Pid"]
    cpus = read_limit(pid, "cpuset", v1="cpuset.cpus", v2="cpuset.cpus")
    memory = read_limit(pid, "memory", v1="memory.limit_in_bytes", v2="memory.max")
    assert (cpus, int(memory)) == (cpu, MEMORY_LIMIT)


def test_the_kernel_runs_the_container_on_its_cpuset_only(pinned: tuple[Container, str]) -> None:
    container, cpu = pinned
    result = container.exec_run(["grep", "Cpus_allowed_list", "/proc/self/status"])
    output = result.output
    assert isinstance(output, bytes)  # not streamed
    assert result.exit_code == 0, output
    assert output.decode().split() == ["Cpus_allowed_list:", cpu]
