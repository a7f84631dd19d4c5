"""Per-node identity: a coordinator with a client CA serves https/wss on a real port, and
an agent may register only as the node its certificate names. A hello naming another
node is refused and learns nothing of it; a certificate of another CA fails the
handshake; no certificate, no upgrade. API clients present none and are served."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import msgpack
import pytest
from aiohttp import web

from coordinator.app import make_app
from coordinator.standby import make_standby_app
from coordinator.tls_files import client_leaf, make_ca, make_leaf, node_leaf, server_leaf
from shared.protocol import SUBPROTOCOL
from shared.tls import client_context, server_context
from tests.coordinator.conftest import (
    API_TOKEN,
    NAMESPACE,
    Coordinator,
    config_for,
    frame,
    hello,
    receive_close,
    receive_frame,
)
from tests.coordinator.test_auth_refusals import failures

NODES = ("a", "b", "n0", "n1", "n2", "n3")
DEPLOYMENTS = f"/v1/namespaces/{NAMESPACE}/deployments"
POLICY_VIOLATION = aiohttp.WSCloseCode.POLICY_VIOLATION


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    """The cluster's CA with a server certificate and one per node; ``other/`` is a
    second CA with a certificate for node ``a``."""
    directory = tmp_path / "pki"
    make_ca(directory)
    make_leaf(directory, server_leaf(["127.0.0.1"]))
    make_leaf(directory, client_leaf())
    for node in NODES:
        make_leaf(directory, node_leaf(node))
    make_ca(directory / "other")
    make_leaf(directory / "other", node_leaf("a"))
    return directory


@pytest.fixture
async def secured(tmp_path: Path, pki: Path) -> AsyncIterator[Coordinator]:
    config = config_for(
        tmp_path,
        join_token="",
        tls_cert_file=str(pki / "server.pem"),
        tls_key_file=str(pki / "server-key.pem"),
        tls_client_ca_file=str(pki / "ca.pem"),
        lease_seconds=60.0,
        heartbeat_seconds=20.0,
    )
    runner = web.AppRunner(make_app(config), access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=config.server_tls_context()).start()
    port = runner.addresses[0][1]
    connector = aiohttp.TCPConnector(ssl=node_context(pki, "", ca_only=True))
    async with aiohttp.ClientSession(connector=connector) as http:
        yield Coordinator(url=f"https://127.0.0.1:{port}", app=runner.app, http=http)
    await runner.cleanup()


def node_context(pki: Path, node: str, *, ca_only: bool = False) -> ssl.SSLContext:
    """Trusting the cluster's CA, with ``node``'s certificate unless ``ca_only``."""
    cert = "" if ca_only else str(pki / f"node-{node}.pem")
    context = client_context(str(pki / "ca.pem"), cert, str(pki / f"node-{node}-key.pem"))
    assert context is not None
    return context


async def agent_socket(
    coordinator: Coordinator, context: ssl.SSLContext
) -> aiohttp.ClientWebSocketResponse:
    """An agent's socket, with no join token: the certificate is the credential."""
    return await coordinator.http.ws_connect(
        coordinator.url + "/v1/agent", protocols=(SUBPROTOCOL,), ssl=context
    )


async def register(
    coordinator: Coordinator, pki: Path, node: str
) -> aiohttp.ClientWebSocketResponse:
    ws = await agent_socket(coordinator, node_context(pki, node))
    await ws.send_bytes(hello(node, token=""))
    welcome = await receive_frame(ws)
    assert welcome["type"] == "welcome", welcome
    return ws


async def everything_heard(ws: aiohttp.ClientWebSocketResponse) -> list[dict[str, Any]]:
    """Every frame the coordinator sends on ``ws`` until it closes it."""
    heard: list[dict[str, Any]] = []
    while True:
        message = await ws.receive(timeout=5)
        if message.type != aiohttp.WSMsgType.BINARY:
            return heard
        heard.append(msgpack.unpackb(message.data, strict_map_key=False))


async def test_an_agent_registers_as_the_node_its_certificate_names(
    secured: Coordinator, pki: Path
) -> None:
    ws = await register(secured, pki, "a")
    node = await secured.get_json("/v1/nodes/a")
    assert node["state"] == "ready"
    await ws.close()


async def test_a_hello_naming_another_node_is_refused_and_learns_nothing(
    secured: Coordinator, pki: Path
) -> None:
    b = await register(secured, pki, "b")
    spec = {
        "name": "web",
        "image": "busybox",
        "count": 1,
        "resources": {"cpu": "0.5", "memory": "64Mi"},
    }
    status, body = await secured.call("POST", DEPLOYMENTS, spec)
    assert status == 201, body
    desired = await receive_frame(b)
    assert desired["type"] == "desired"
    assert len(desired["containers"]) == 1  # b's desired state holds a container
    before = await secured.get_json("/v1/nodes/b")

    rogue = await agent_socket(secured, node_context(pki, "a"))
    await rogue.send_bytes(hello("b", token=""))
    heard = await everything_heard(rogue)
    assert heard == [
        {
            "type": "error",
            "code": "node_not_certified",
            "message": "this agent's certificate is for a, not for node 'b'",
        }
    ]
    assert rogue.close_code == POLICY_VIOLATION

    events = (await secured.get_json("/v1/events?kind=refused&node=b"))["events"]
    assert [e["reason"] for e in events] == [
        "node_not_certified: this agent's certificate is for a, not for node 'b'"
    ]
    assert await secured.get_json("/v1/nodes/b") == before
    assert "a" not in {n["name"] for n in (await secured.get_json("/v1/nodes"))["nodes"]}
    await b.send_bytes(frame("heartbeat"))
    assert not b.closed  # b's own session was not replaced
    await secured.assert_nodes_match_store()
    await b.close()


async def handshake_and_hello(coordinator: Coordinator, context: ssl.SSLContext) -> None:
    ws = await agent_socket(coordinator, context)
    await ws.send_bytes(hello("a", token=""))
    await receive_frame(ws)


async def test_a_certificate_from_another_ca_fails_the_handshake(
    secured: Coordinator, pki: Path
) -> None:
    other = client_context(
        str(pki / "ca.pem"),
        str(pki / "other" / "node-a.pem"),
        str(pki / "other" / "node-a-key.pem"),
    )
    assert other is not None
    with pytest.raises(aiohttp.ClientError):
        await handshake_and_hello(secured, other)
    with pytest.raises(aiohttp.ClientError):
        await secured.http.get(secured.url + "/v1/nodes", ssl=other)
    assert (await secured.get_json("/v1/nodes"))["nodes"] == []


async def test_without_a_certificate_there_is_no_upgrade_but_the_api_serves(
    secured: Coordinator,
) -> None:
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await secured.http.ws_connect(
            secured.url + "/v1/agent",
            protocols=(SUBPROTOCOL,),
            headers={"Authorization": f"Bearer {API_TOKEN}"},
        )
    assert refused.value.status == 401
    assert (await secured.get_json("/v1/nodes"))["nodes"] == []
    assert await failures(secured) == {"client_certificate": 1.0}


async def test_a_client_certificate_is_no_node(secured: Coordinator, pki: Path) -> None:
    context = client_context(
        str(pki / "ca.pem"), str(pki / "client.pem"), str(pki / "client-key.pem")
    )
    assert context is not None
    ws = await agent_socket(secured, context)
    await ws.send_bytes(hello("a", token=""))
    assert [f["code"] for f in await everything_heard(ws)] == ["node_not_certified"]
    response = await secured.http.get(
        secured.url + "/v1/nodes", headers={"Authorization": f"Bearer {API_TOKEN}"}, ssl=context
    )
    assert response.status == 200


async def test_agents_and_impostors_at_once(secured: Coordinator, pki: Path) -> None:
    """Four agents register while four others each name a neighbour's node: every
    agent gets its welcome, every impostor its refusal, and only the four are nodes."""

    async def honest(node: str) -> str:
        ws = await register(secured, pki, node)
        await ws.close()
        return "welcome"

    async def impostor(node: str, claims: str) -> str:
        ws = await agent_socket(secured, node_context(pki, node))
        await ws.send_bytes(hello(claims, token=""))
        heard = await everything_heard(ws)
        assert await receive_close(ws) == POLICY_VIOLATION
        return str(heard[0]["code"])

    nodes = ["n0", "n1", "n2", "n3"]
    answers = await asyncio.gather(
        *(honest(node) for node in nodes),
        *(impostor(node, nodes[(i + 1) % 4]) for i, node in enumerate(nodes)),
    )
    assert answers == ["welcome"] * 4 + ["node_not_certified"] * 4
    listed = (await secured.get_json("/v1/nodes"))["nodes"]
    assert sorted(n["name"] for n in listed) == nodes
    await secured.assert_nodes_match_store()


async def test_a_standby_with_a_client_ca_names_the_leader_to_certified_agents_only(
    pki: Path,
) -> None:
    async def leader_url() -> str:
        return "https://leader.example:7600"

    app = make_standby_app("", leader_url, client_ca=True)
    served = server_context(
        str(pki / "server.pem"), str(pki / "server-key.pem"), str(pki / "ca.pem")
    )
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=served).start()
        url = f"https://127.0.0.1:{runner.addresses[0][1]}/v1/agent"
        async with aiohttp.ClientSession() as http:
            ws = await http.ws_connect(url, protocols=(SUBPROTOCOL,), ssl=node_context(pki, "a"))
            sent_on = await receive_frame(ws)
            assert (sent_on["code"], sent_on["leader"]) == ("not_leader", await leader_url())
            await ws.close()
            anonymous = node_context(pki, "", ca_only=True)
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(url, protocols=(SUBPROTOCOL,), ssl=anonymous)
            assert refused.value.status == 401
    finally:
        await runner.cleanup()
