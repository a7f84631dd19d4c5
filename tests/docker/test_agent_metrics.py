"""The agent's metrics on the real Docker engine: each call to the engine timed under the
SDK method's name, each pass, each restart and each drift correction counted, and each
container's CPU limit as its cgroup holds it."""

from __future__ import annotations

from pathlib import Path

import docker
import pytest

from agent.metrics import AgentMetrics
from tests.docker.runtimes import applied, container, memory_limits, running_runtime, status_of
from tests.polling import eventually

pytestmark = pytest.mark.docker
SEEN_SECONDS = 15.0  # a Docker event wakes the runtime at once; resync is 10 s


def value(metrics: AgentMetrics, name: str, **labels: str) -> float:
    found = metrics.registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


async def test_calls_passes_restarts_and_drift_are_counted(
    docker_client: docker.DockerClient, node: str, tmp_path: Path
) -> None:
    metrics = AgentMetrics()
    quarter_core = memory_limits(mib=32, cpu_quota=25_000)
    steady = container("steady", shared_pool=True, limits=quarter_core)
    # Exits after a second, and runs again each time (its restart policy).
    flaky = container(
        "flaky", shared_pool=True, restart_policy="always", command=["sh", "-c", "sleep 1"]
    )
    async with running_runtime(node, tmp_path, resync_seconds=0.5, metrics=metrics) as runtime:
        runtime.set_desired(1, [steady, flaky], full=True)
        await applied(runtime, 1)
        steady_labels = {"namespace": "team-a", "deployment": "web", "container": "steady"}
        flaky_labels = steady_labels | {"container": "flaky"}
        restarts = "allot_agent_container_restarts_total"
        await eventually(lambda: value(metrics, restarts, **flaky_labels) >= 1, SEEN_SECONDS)
        assert value(metrics, restarts, **steady_labels) == 0
        limit = value(metrics, "allot_agent_container_cpu_limit_cores", **steady_labels)
        assert limit == 0.25  # its CFS quota, lower than the shared pool's CPUs

        (docker_id,) = [
            c["Id"]
            for c in docker_client.api.containers(filters={"label": "allot.id=steady"})
            if c["Labels"].get("allot.node") == node
        ]
        docker_client.api.update_container(docker_id, cpu_shares=2)
        await eventually(lambda: status_of(runtime, "steady").drift != [], SEEN_SECONDS)
        assert status_of(runtime, "steady").drift == ["cpu_shares 2 -> 1024"]
        assert value(metrics, "allot_agent_drift_corrections_total") == 1

    for call in ("containers", "inspect_container", "create_container", "start"):
        timed = value(metrics, "allot_agent_docker_request_seconds_count", call=call)
        assert timed >= 1, call
    assert value(metrics, "allot_agent_docker_request_seconds_count", call="update_container")
    assert value(metrics, "allot_agent_reconcile_seconds_count") >= 2
    assert value(metrics, "allot_agent_reconcile_seconds_sum") > 0
