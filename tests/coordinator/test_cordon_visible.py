"""A cordoned node says so: in its record as the API shows it (``cordoned``), in
``allotctl nodes`` and ``node`` (``ready,cordoned``), and in a refusal it caused: the
ready nodes placement left out name it with the reason ``cordoned``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from allotctl.main import main
from tests.coordinator.conftest import API_TOKEN, Coordinator, register

DEPLOYMENTS = "/v1/namespaces/team-a/deployments"


def spec(name: str, cpu: str = "0.5") -> dict[str, Any]:
    return {
        "name": name,
        "image": "busybox",
        "cpu_bind": True,
        "resources": {"cpu": cpu, "memory": "64Mi"},
    }


async def allotctl(
    cluster: Coordinator, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, str]:
    code = await asyncio.to_thread(main, ["--server", cluster.url, "--token", API_TOKEN, *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return code, out


async def test_the_node_record_says_it_is_cordoned(cluster: Coordinator) -> None:
    ws = await register(cluster, "node-a")
    assert (await cluster.get_json("/v1/nodes/node-a"))["cordoned"] is False
    assert (await cluster.call("POST", "/v1/nodes/node-a/cordon"))[0] == 200
    assert (await cluster.get_json("/v1/nodes/node-a"))["cordoned"] is True
    assert [n["cordoned"] for n in (await cluster.get_json("/v1/nodes"))["nodes"]] == [True]
    assert (await cluster.call("POST", "/v1/nodes/node-a/uncordon"))[0] == 200
    assert (await cluster.get_json("/v1/nodes/node-a"))["cordoned"] is False
    await ws.close()


async def test_allotctl_shows_the_cordon(
    cluster: Coordinator, capsys: pytest.CaptureFixture[str]
) -> None:
    ws_a, ws_b = await register(cluster, "node-a"), await register(cluster, "node-b")
    await cluster.call("POST", "/v1/nodes/node-b/cordon")
    _, out = await allotctl(cluster, capsys, "nodes")
    assert [line.split()[:2] for line in out.splitlines()] == [
        ["NAME", "STATE"],
        ["node-a", "ready"],
        ["node-b", "ready,cordoned"],
    ]
    _, out = await allotctl(cluster, capsys, "node", "node-b")
    assert out.splitlines()[1].split()[:3] == ["state", "ready,cordoned", "for"]
    await ws_a.close()
    await ws_b.close()


async def test_a_deploy_refused_by_the_cordon_names_it(cluster: Coordinator) -> None:
    ws = await register(cluster, "node-a")
    await cluster.call("POST", "/v1/nodes/node-a/cordon")
    status, refused = await cluster.call("POST", DEPLOYMENTS, spec("web"))
    assert status == 409, refused
    error = refused["error"]
    assert "devices" not in error["message"]
    assert "devices" not in str(error["details"])
    assert error["details"]["skipped_nodes"] == {"node-a": "cordoned"}
    assert (await cluster.get_json(DEPLOYMENTS))["deployments"] == []
    await ws.close()


async def test_a_placement_beside_a_cordoned_node_names_it(cluster: Coordinator) -> None:
    ws_a, ws_b = await register(cluster, "node-a"), await register(cluster, "node-b")
    await cluster.call("POST", "/v1/nodes/node-b/cordon")
    status, placed = await cluster.call("POST", DEPLOYMENTS, spec("web"))
    assert status == 201, placed
    assert [c["record"]["node"] for c in placed["containers"]] == ["node-a"]
    assert placed["skipped_nodes"] == {"node-b": "cordoned"}
    await ws_a.close()
    await ws_b.close()
