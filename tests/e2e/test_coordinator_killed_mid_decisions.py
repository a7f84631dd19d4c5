"""A coordinator killed with SIGKILL while deploys sent at once are being decided: after a
restart every deployment answered 201 is there, none answered with an error is, and no
allocation is left without its container (issue 16, the kill -9 variant)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import aiohttp
import msgpack

from tests.coordinator.conftest import inventory
from tests.e2e.processes import API_TOKEN, HEARTBEAT_SECONDS, JOIN_TOKEN, Service

NODE = "node-a"
DEPLOYS = 60
HEADERS = {"Authorization": f"Bearer {API_TOKEN}"}


async def attach_agent(http: aiohttp.ClientSession, url: str) -> aiohttp.ClientWebSocketResponse:
    """An agent of the protocol (no Docker behind it) that says hello; its heartbeats
    are sent by ``heartbeats``."""
    ws = await http.ws_connect(
        url + "/v1/agent",
        protocols=("allot.v1",),
        headers={"Authorization": f"Bearer {JOIN_TOKEN}"},
    )
    hello = {
        "type": "hello",
        "node": NODE,
        "token": JOIN_TOKEN,
        "protocol": 1,
        "inventory": inventory(),
        "agent_version": "test",
    }
    await ws.send_bytes(msgpack.packb(hello))
    welcome = msgpack.unpackb((await ws.receive(timeout=10)).data, strict_map_key=False)
    assert welcome["type"] == "welcome", welcome
    return ws


async def heartbeats(ws: aiohttp.ClientWebSocketResponse) -> None:
    with contextlib.suppress(ConnectionError, RuntimeError):
        while not ws.closed:
            await ws.send_bytes(msgpack.packb({"type": "heartbeat"}))
            await asyncio.sleep(HEARTBEAT_SECONDS)


async def deploy(http: aiohttp.ClientSession, url: str, name: str) -> int | None:
    """The status answered, or None when the coordinator died before answering."""
    body = {"name": name, "image": "busybox", "resources": {"cpu": "0.01", "memory": "8Mi"}}
    try:
        async with http.post(
            url + "/v1/namespaces/mini/deployments", json=body, headers=HEADERS
        ) as response:
            return response.status
    except aiohttp.ClientError:
        return None


async def get(http: aiohttp.ClientSession, url: str, path: str) -> Any:
    async with http.get(url + path, headers=HEADERS) as response:
        assert response.status == 200, await response.text()
        return await response.json()


async def deploy_and_kill(coordinator: Service, url: str) -> dict[str, int | None]:
    async with aiohttp.ClientSession() as http:
        ws = await attach_agent(http, url)
        beating = asyncio.create_task(heartbeats(ws))
        names = [f"d{i}" for i in range(DEPLOYS)]
        sent = {name: asyncio.create_task(deploy(http, url, name)) for name in names}
        pending: set[asyncio.Task[int | None]] = set(sent.values())
        while not any(task.done() and task.result() == 201 for task in sent.values()):
            _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        coordinator.kill9()
        answers = {name: await task for name, task in sent.items()}
        beating.cancel()
        return answers


async def after_restart(url: str) -> tuple[set[str], dict[str, str], list[str]]:
    """Deployments, container -> its deployment, and the node's allocated containers."""
    async with aiohttp.ClientSession() as http:
        listed = await get(http, url, "/v1/namespaces/mini/deployments")
        containers = await get(http, url, "/v1/containers")
        allocation = await get(http, url, f"/v1/nodes/{NODE}/allocation")
    names = {d["deployment"]["spec"]["name"] for d in listed["deployments"]}
    owners = {c["record"]["id"]: c["record"]["deployment"] for c in containers["containers"]}
    return names, owners, allocation["containers"]


def test_every_answered_deploy_survives_a_kill_and_nothing_leaks(
    tmp_path: Path, services: list[Service], store_flags: tuple[str, ...]
) -> None:
    coordinator = Service.coordinator(tmp_path, args=store_flags).start()
    services.append(coordinator)
    url = coordinator.wait_for(r"coordinator listening url=(\S+)").group(1)
    answers = asyncio.run(deploy_and_kill(coordinator, url))
    restarted = Service.coordinator(tmp_path, args=store_flags).start()
    services.append(restarted)
    url = restarted.wait_for(r"coordinator listening url=(\S+)").group(1)
    names, owners, allocated = asyncio.run(after_restart(url))
    answered = {name for name, status in answers.items() if status == 201}
    refused = {name for name, status in answers.items() if status not in (201, None)}
    assert answered, answers
    assert answered <= names, f"acknowledged but lost: {sorted(answered - names)}"
    assert not refused & names, f"refused but there: {sorted(refused & names)}"
    assert sorted(owners) == sorted(allocated), "allocations without containers, or the reverse"
    assert sorted(owners.values()) == sorted(names), "each deployment holds its one container"
