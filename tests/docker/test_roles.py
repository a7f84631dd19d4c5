"""Roles on real processes: a coordinator with a token bound to team-a, an agent of this
host and the real Docker engine. The token reads and changes its own namespace only;
everything it tries on team-b's container is refused and the container runs on untouched."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import docker
import pytest

from tests.docker.clusters import deploy, running_cluster, wait_until_running
from tests.docker.conftest import IMAGE
from tests.e2e.processes import allotctl

pytestmark = pytest.mark.docker

TEAM_A_TOKEN = "e2e-team-a-token-0123456789abcdef"
ROLES = f"""
[[namespace_tokens]]
token = "{TEAM_A_TOKEN}"
namespaces = ["team-a"]
"""


def status_of(url: str, method: str, path: str, body: object | None = None) -> int:
    """The HTTP status team-a's token gets for this request."""
    request = urllib.request.Request(
        url + path,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {TEAM_A_TOKEN}", "Content-Type": "application/json"},
        method=method,
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_a_namespace_token_cannot_read_or_touch_another_namespace(
    tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    body = {
        "name": "web",
        "image": IMAGE,
        "command": ["sleep", "3600"],
        "resources": {"cpu": "0.2", "memory": "16Mi"},
    }
    with running_cluster(tmp_path, docker_client, nodes=1, toml=ROLES) as cluster:
        url = cluster.url
        (theirs,) = deploy(url, "team-b", body)  # with the admin token
        wait_until_running(url, 1)
        (docker_id,) = [
            c["Id"]
            for c in docker_client.api.containers(filters={"label": f"allot.id={theirs['id']}"})
        ]
        before = docker_client.api.inspect_container(docker_id)
        container = f"/v1/containers/{theirs['id']}"
        refused = {
            ("GET", container): 404,
            ("PATCH", container): 404,
            ("DELETE", container): 404,
            ("POST", f"{container}/replace"): 404,
            ("GET", "/v1/namespaces/team-b/deployments/web"): 403,
            ("POST", "/v1/namespaces/team-b/deployments/web/scale"): 403,
            ("DELETE", "/v1/namespaces/team-b/deployments/web"): 403,
            ("POST", "/v1/namespaces/team-b/deployments"): 403,
            ("PUT", "/v1/elasticquotas/team-a"): 403,
        }
        payloads: dict[str, object] = {
            "PATCH": {"cpu": "0.1"},
            "POST": {"image": IMAGE, "count": 3, **body},
            "PUT": {"namespace": "team-a", "min": {"cpu": "2"}},
        }
        answers = {
            (method, path): status_of(url, method, path, payloads.get(method))
            for method, path in refused
        }
        assert answers == refused
        listed = allotctl(url, "containers", "--json", token=TEAM_A_TOKEN)
        assert listed.returncode == 0, listed.stderr
        assert json.loads(listed.stdout)["containers"] == []
        events = allotctl(url, "events", "--json", token=TEAM_A_TOKEN)
        assert json.loads(events.stdout)["events"] == []
        # Its own namespace is open to it.
        assert status_of(url, "POST", "/v1/namespaces/team-a/deployments", body) == 201
        views = wait_until_running(url, 2)
        mine = [v for v in views if v["record"]["namespace"] == "team-a"]
        assert len(mine) == 1
        # team-b's container runs on as it was: same Docker container, never restarted.
        after = docker_client.api.inspect_container(docker_id)
        assert after["State"]["StartedAt"] == before["State"]["StartedAt"]
        assert after["HostConfig"]["NanoCpus"] == before["HostConfig"]["NanoCpus"]
        assert after["HostConfig"]["CpuQuota"] == before["HostConfig"]["CpuQuota"]
