"""A real ``allot-agent`` process on the real Docker engine, linked to a coordinator of
the test's own: killed and restarted, it adopts its containers and restarts none; with
the engine stopped under it, it reports the node degraded and recovers by itself."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from shared.protocol import DesiredContainer
from tests.docker.conftest import IMAGE
from tests.docker.coordinator import ScriptedCoordinator, app_for
from tests.docker.engine import PrivateEngine
from tests.docker.runtimes import (
    container,
    cpus,
    limits_in,
    managed,
    memory_limits,
    started_at,
)
from tests.e2e.processes import BIN, Service
from tests.loopback import serving
from tests.polling import eventually

pytestmark = pytest.mark.docker
HIGH = str(cpus()[-1])
# Ends at SIGTERM at once (a plain `sleep` as PID 1 ignores it), so an engine shutdown
# does not wait out Docker's stop timeout.
SERVICE = ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]


def desired(count: int, *, shares: int = 512, policy: str = "no") -> list[DesiredContainer]:
    return [
        container(
            f"svc-{index}",
            command=SERVICE,
            restart_policy=policy,
            capacity="over-quota" if index else "in-quota",
            limits=memory_limits(HIGH, shares=shares + index, mib=32),
        )
        for index in range(count)
    ]


def running_all(coordinator: ScriptedCoordinator, revision: int, count: int) -> bool:
    status = coordinator.last_status()
    states = [c["state"] for c in status.get("containers", [])]
    return status.get("applied_revision") == revision and states == ["running"] * count


@pytest.fixture
async def coordinator() -> AsyncIterator[tuple[ScriptedCoordinator, str]]:
    scripted = ScriptedCoordinator()
    async with serving(app_for(scripted)) as url:
        yield scripted, url


@pytest.fixture
def agents() -> Iterator[list[Service]]:
    started: list[Service] = []
    yield started
    for agent in started:
        if agent.process is not None and agent.process.poll() is None:
            agent.kill9()


async def agent_status(*args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        str(BIN / "allot-agent"), "status", *args, stdout=asyncio.subprocess.PIPE
    )
    output, _ = await process.communicate()
    assert process.returncode == 0
    return output.decode()


def start_agent(
    tmp_path: Path, url: str, node: str, agents: list[Service], args: tuple[str, ...] = ()
) -> Service:
    agent = Service.agent(tmp_path, url, node, args=args)
    agents.append(agent.start())
    return agent


async def test_a_killed_agent_adopts_its_containers_and_restarts_none(
    docker_client: docker.DockerClient,
    node: str,
    tmp_path: Path,
    coordinator: tuple[ScriptedCoordinator, str],
    agents: list[Service],
) -> None:
    scripted, url = coordinator
    scripted.want(1, desired(3))
    agent = start_agent(tmp_path, url, node, agents)
    await eventually(lambda: running_all(scripted, 1, 3), within=30)
    before = started_at(docker_client, node)
    agent.kill9()
    offset = len(agent.text())
    start_agent(tmp_path, url, node, agents)
    await eventually(lambda: "adopted 3 containers" in agent.text()[offset:], within=30)
    await eventually(lambda: len(scripted.hellos) == 2 and running_all(scripted, 1, 3), within=30)
    after = started_at(docker_client, node)
    assert after == before
    restarted_log = agent.text()[offset:]
    assert "container started" not in restarted_log
    assert "container removed" not in restarted_log
    assert "limits updated" not in restarted_log


async def test_drift_made_while_the_agent_was_down_is_put_back_and_reported(
    docker_client: docker.DockerClient,
    node: str,
    tmp_path: Path,
    coordinator: tuple[ScriptedCoordinator, str],
    agents: list[Service],
) -> None:
    scripted, url = coordinator
    scripted.want(1, desired(2))
    agent = start_agent(tmp_path, url, node, agents)
    await eventually(lambda: running_all(scripted, 1, 2), within=30)
    agent.kill9()
    held = managed(docker_client, node)
    docker_client.api.update_container(held["svc-0"]["Id"], cpu_shares=2)
    docker_client.api.remove_container(held["svc-1"]["Id"], force=True)
    offset = len(agent.text())
    start_agent(tmp_path, url, node, agents)

    def drift() -> dict[str, list[str]]:
        return {c["id"]: c["drift"] for c in scripted.last_status().get("containers", [])}

    await eventually(lambda: all(drift().get(f"svc-{i}") for i in range(2)), within=30)
    assert drift() == {
        "svc-0": ["cpu_shares 2 -> 512"],
        "svc-1": ["recreated (removed outside allot)"],
    }
    found = managed(docker_client, node)
    assert limits_in(found["svc-0"]).cpu_shares == 512
    assert found["svc-0"]["Id"] == held["svc-0"]["Id"]  # put back in place
    assert limits_in(found["svc-1"]) == limits_in(held["svc-1"])
    restarted_log = agent.text()[offset:]
    assert 'drift corrected id=svc-0 cpu_shares="2 -> 512"' in restarted_log
    assert 'container recreated id=svc-1 reason="removed outside allot"' in restarted_log
    text = await agent_status(f"--state-dir={tmp_path}", f"--node-name={node}")
    assert "drift: recreated (removed outside allot)" in text


async def test_allot_agent_status_shows_what_the_agent_manages(
    node: str,
    tmp_path: Path,
    coordinator: tuple[ScriptedCoordinator, str],
    agents: list[Service],
) -> None:
    scripted, url = coordinator
    scripted.want(4, desired(2))
    start_agent(tmp_path, url, node, agents)
    await eventually(lambda: running_all(scripted, 4, 2), within=30)
    text = await agent_status(f"--state-dir={tmp_path}", f"--node-name={node}")
    assert "applied revision  4" in text
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line.startswith("svc-")}
    assert rows["svc-0"][1:6] == ["team-a", "web", "running", "in-quota", HIGH]
    assert rows["svc-1"][4] == "over-quota"
    as_json: dict[str, Any] = json.loads(
        await agent_status(f"--state-dir={tmp_path}", f"--node-name={node}", "--json")
    )
    assert as_json["docker"] == "up"
    assert [c["capacity"] for c in as_json["containers"]] == ["in-quota", "over-quota"]


async def test_a_stopped_engine_degrades_the_node_until_it_returns(
    docker_client: docker.DockerClient,
    node: str,
    tmp_path: Path,
    coordinator: tuple[ScriptedCoordinator, str],
    agents: list[Service],
) -> None:
    with PrivateEngine(tmp_path / "dockerd.log") as engine:
        engine.load(IMAGE, docker_client)
        scripted, url = coordinator
        scripted.want(1, desired(2, policy="always"))
        # A backoff far longer than the waits below: the engine's return is seen when the
        # event stream opens again, not when the backoff after the last failed pass ends.
        args = (f"--docker-host={engine.address}", "--backoff-initial-seconds=60")
        agent = start_agent(tmp_path, url, node, agents, args=(*args, "--backoff-max-seconds=60"))
        await eventually(lambda: running_all(scripted, 1, 2), within=30)
        try:
            await asyncio.to_thread(engine.stop)
            await eventually(
                lambda: any(p.startswith("docker: ") for p in scripted.last_status()["problems"]),
                within=30,
            )
            assert docker_client.ping()  # the host's engine, which other tests use, stays up
            # the coordinator changes its mind while the engine is away
            await scripted.push(2, desired(3, shares=700, policy="always"))
        finally:
            await asyncio.to_thread(engine.start)
        await eventually(lambda: scripted.last_status()["problems"] == [], within=15)
        await eventually(lambda: running_all(scripted, 2, 3), within=30)
        found = managed(engine.client, node)
        assert [limits_in(found[f"svc-{i}"]).cpu_shares for i in range(3)] == [700, 701, 702]
        assert "docker engine unavailable" in agent.text()
        assert "docker engine available again" in agent.text()
