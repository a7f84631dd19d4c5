"""Preemption on the real engine (issue 26): a preempted container keeps its core until
its agent has removed it, and the container that preempted it waits, pending, with the
victim named. A real coordinator and agent; Docker's own events are the witness."""

from __future__ import annotations

from pathlib import Path

import docker
import pytest

from tests.docker.clusters import deploy, running_cluster, wait_until_running
from tests.docker.conftest import IMAGE
from tests.docker.engine_events import engine_events
from tests.docker.test_removals import DEAF_TO_SIGTERM, first_times, times
from tests.e2e.processes import api

pytestmark = pytest.mark.docker

STOP = 8  # seconds the victim, deaf to SIGTERM, holds out before Docker kills it


def test_a_preempted_container_holds_its_core_until_docker_destroyed_it(
    tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    with running_cluster(tmp_path, docker_client, nodes=1) as cluster:  # one CPU
        url, (node,) = cluster.url, cluster.nodes
        for team in ("team-a", "team-b"):
            quota = {"namespace": team, "min": {"cpu": "0.5"}, "max": {"cpu": "1"}}
            api(url, f"/v1/elasticquotas/{team}", quota, method="PUT")
        body = {
            "name": "borrow",
            "image": IMAGE,
            "command": DEAF_TO_SIGTERM,
            "count": 2,  # the CPU whole: half of it in team-a's min, half borrowed
            "cpu_bind": True,
            "resources": {"cpu": "0.5", "memory": "16Mi"},
            "stop_timeout_seconds": STOP,
        }
        deploy(url, "team-a", body)
        wait_until_running(url, 2)
        actions = ("create", "start", "kill", "die", "destroy")
        with engine_events(node, actions=actions) as seen:
            (claim,) = deploy(url, "team-b", body | {"name": "claim", "count": 1})
            (preempted,) = api(url, "/v1/events?kind=preempted")["events"]
            victim = preempted["container"]
            shown = api(url, f"/v1/containers/{claim['id']}")
            assert (shown["state"], shown["record"]["node"]) == ("pending", ""), shown
            assert (
                shown["reason"] == f"waiting for preempted containers to stop: {victim} on {node}"
            )
            # Seen running after the claim was seen pending: it ran all that while.
            (held,) = docker_client.api.containers(filters={"label": [f"allot.id={victim}"]})
            assert held["State"] == "running", held
            views = wait_until_running(url, 2)
            assert claim["id"] in {view["record"]["id"] for view in views}
    # The agent was told of the claim only once the victim was gone from the engine.
    died, destroyed = times(seen, "die")[victim], times(seen, "destroy")[victim]
    created, started = first_times(seen, "create")[claim["id"]], times(seen, "start")[claim["id"]]
    assert died <= destroyed <= created <= started
    # It was deaf to SIGTERM: Docker killed it once its stop timeout passed.
    assert times(seen, "kill")[victim] - first_times(seen, "kill")[victim] >= STOP - 0.5
