"""Running is desired state, end to end: a coordinator and one agent, real processes on
the real Docker engine. A container that should run and does not (stopped by hand, its
process killed as an engine restart kills it) is started again, with an event each
time; one whose deployment runs to completion stays exited, succeeded or failed; an image
that is not on the host is a visible failure, retried until the image is there.

The Docker engine itself is not restarted here: other tests share it. An engine restart
kills each container's processes, which ``test_a_killed_container_runs_again`` does."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
import pytest
from docker.errors import ImageNotFound

from tests.docker.clusters import CONVERGE_SECONDS, deploy, running_cluster, wait_until_running
from tests.docker.conftest import IMAGE
from tests.e2e.processes import allotctl, api

pytestmark = pytest.mark.docker
# Short crash-loop backoff, so that the retries a test waits for come within seconds.
QUICK_RETRIES = ("--restart-backoff-seconds=0.5", "--restart-backoff-max-seconds=2")


def _sleeper(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "image": IMAGE,
        "command": ["sleep", "3600"],
        "resources": {"cpu": "0.1", "memory": "16Mi"},
    } | fields


def _until(what: str, found: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + CONVERGE_SECONDS
    while not (value := found()):
        assert time.monotonic() < deadline, f"not seen in time: {what}"
        time.sleep(0.2)
    return value


def _inspect(client: docker.DockerClient, container_id: str) -> dict[str, Any]:
    (found,) = client.api.containers(all=True, filters={"label": [f"allot.id={container_id}"]})
    attrs: dict[str, Any] = client.api.inspect_container(found["Id"])
    return attrs


def _view(url: str, container_id: str) -> dict[str, Any]:
    view: dict[str, Any] = api(url, f"/v1/containers/{container_id}")
    return view


def _all_events(url: str, kind: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = api(url, f"/v1/events?kind={kind}")["events"]
    return events


def _events(url: str, kind: str, container_id: str) -> list[dict[str, Any]]:
    return [event for event in _all_events(url, kind) if event["container"] == container_id]


def test_a_container_stopped_by_hand_runs_again(
    tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    with running_cluster(tmp_path, docker_client, nodes=1, agent_args=QUICK_RETRIES) as cluster:
        (record,) = deploy(cluster.url, "team-a", _sleeper("web"))
        wait_until_running(cluster.url, 1)
        before = _inspect(docker_client, record["id"])
        docker_client.api.stop(before["Id"], timeout=1)
        _until(
            "the container running again",
            lambda: (
                _inspect(docker_client, record["id"])["State"]["StartedAt"]
                > before["State"]["StartedAt"]
                and _inspect(docker_client, record["id"])["State"]["Running"]
            ),
        )
        assert _inspect(docker_client, record["id"])["Id"] == before["Id"]  # the same one
        (event,) = _until(
            "a restarted event", lambda: _events(cluster.url, "restarted", record["id"])
        )
        assert event["reason"].startswith("started again: exited with code 137"), event
        assert event["node"] == cluster.nodes[0]
        wait_until_running(cluster.url, 1)


def test_a_killed_container_runs_again(tmp_path: Path, docker_client: docker.DockerClient) -> None:
    with running_cluster(tmp_path, docker_client, nodes=1, agent_args=QUICK_RETRIES) as cluster:
        records = deploy(cluster.url, "team-a", _sleeper("web", count=2))
        wait_until_running(cluster.url, 2)
        for record in records:  # what an engine restart does to every container
            os.kill(_inspect(docker_client, record["id"])["State"]["Pid"], signal.SIGKILL)
        ids = {record["id"] for record in records}
        _until(
            "a restarted event of each",
            lambda: {e["container"] for e in _all_events(cluster.url, "restarted")} == ids,
        )
        wait_until_running(cluster.url, 2)


def test_containers_that_run_to_completion_stay_exited(
    tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    def once(name: str, policy: str, code: int) -> dict[str, Any]:
        return _sleeper(name, command=["sh", "-c", f"exit {code}"], restart_policy=policy)

    with running_cluster(tmp_path, docker_client, nodes=1, agent_args=QUICK_RETRIES) as cluster:
        (done,) = deploy(cluster.url, "team-a", once("done", "no", 0))
        (broke,) = deploy(cluster.url, "team-a", once("broke", "no", 3))
        (fine,) = deploy(cluster.url, "team-a", once("fine", "on-failure", 0))
        expected = {done["id"]: "succeeded", broke["id"]: "failed", fine["id"]: "succeeded"}
        _until(
            "each ended as its policy says",
            lambda: {cid: _view(cluster.url, cid)["state"] for cid in expected} == expected,
        )
        assert _view(cluster.url, broke["id"])["reason"] == "exited with code 3"
        time.sleep(3)  # longer than the largest backoff: nothing is started again
        for record in (done, broke, fine):
            assert _inspect(docker_client, record["id"])["RestartCount"] == 0
            assert not _events(cluster.url, "restarted", record["id"])
            assert _inspect(docker_client, record["id"])["State"]["Status"] == "exited"


def test_a_missing_image_fails_visibly_then_runs_once_imported(
    tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    image = f"allot/busybox:missing-{uuid.uuid4().hex[:8]}"
    try:
        with running_cluster(tmp_path, docker_client, nodes=1, agent_args=QUICK_RETRIES) as cluster:
            (record,) = deploy(cluster.url, "team-a", _sleeper("web", image=image))
            view = _until(
                "state failed",
                lambda: (v := _view(cluster.url, record["id"]))["state"] == "failed" and v,
            )
            assert "No such image" in view["reason"], view
            failures = _until(
                "a failed event", lambda: _events(cluster.url, "failed", record["id"])
            )
            assert "No such image" in failures[0]["reason"], failures
            for command in (("containers",), ("deployment", "team-a", "web")):
                shown = allotctl(cluster.url, *command)
                assert shown.returncode == 0, shown.stderr
                row = next(line for line in shown.stdout.splitlines() if record["id"] in line)
                assert " failed " in row, shown.stdout
                assert "No such image" in row, shown.stdout
            _import_as(docker_client, image)
            wait_until_running(cluster.url, 1)
            assert _view(cluster.url, record["id"])["reason"] == ""
    finally:
        with contextlib.suppress(ImageNotFound):  # when the test failed before importing it
            docker_client.api.remove_image(image, force=True)


def _import_as(client: docker.DockerClient, image: str) -> None:
    """``docker import`` of the test image's files under a new name."""
    source = client.api.create_container(IMAGE, command=["true"])
    try:
        data = b"".join(client.api.export(source["Id"]))
    finally:
        client.api.remove_container(source["Id"], force=True)
    repository, tag = image.rsplit(":", 1)
    client.api.import_image_from_data(data, repository=repository, tag=tag)
