"""The dashboard's pages over real HTTP from a coordinator in the test's event loop, with
a node whose agent is a plain websocket client: who may see what, the session cookie,
the refusals, the fragments the refresh asks for, and many viewers at once."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from http.cookies import SimpleCookie
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from coordinator.app import make_app
from coordinator.standby import make_standby_app
from coordinator.tls_files import make_ca, make_leaf, server_leaf
from coordinator.ui.rendering import FRAGMENT_HEADER
from shared.tls import client_context
from tests.coordinator.conftest import (
    API_TOKEN,
    NAMESPACE,
    NAMESPACE_TOKEN,
    Coordinator,
    config_for,
    register,
    start,
)
from tests.loopback import serving

NODE = "node-a"
PAGES = [
    "/ui/",
    f"/ui/nodes/{NODE}",
    "/ui/deployments/team-a/web",
    "/ui/quotas",
    "/ui/pools",
    "/ui/leases",
]
SLEEPER = {"image": "allot/busybox:test", "command": ["sleep", "3600"]}


@pytest.fixture
async def dashboard(tmp_path: Path) -> AsyncIterator[tuple[Coordinator, dict[str, str]]]:
    """The coordinator with node-a holding team-a's bound container and team-b's unbound
    one, a quota and an integral pool; and those containers' ids by namespace."""
    runner, url = await start(config_for(tmp_path, lease_seconds=60.0, heartbeat_seconds=20.0))
    async with aiohttp.ClientSession() as http:
        coordinator = Coordinator(url=url, app=runner.app, http=http)
        agent = await register(coordinator, NODE)
        quota = {"namespace": NAMESPACE, "min": {"cpu": "0.5"}, "max": {"cpu": "2"}}
        relaxed = {"guarantee_type": "relaxed", "resource_flow": {"cpu": 0.5}}
        ids = {}
        for method, path, body in [
            ("PUT", "/v1/elasticquotas/team-a", quota),
            ("PUT", "/v1/pools/research", {"integral_guarantees": relaxed}),
            (
                "POST",
                "/v1/namespaces/team-a/deployments",
                SLEEPER
                | {"name": "web", "cpu_bind": True, "resources": {"cpu": "1", "memory": "16Mi"}},
            ),
            (
                "POST",
                "/v1/namespaces/team-b/deployments",
                SLEEPER | {"name": "db", "resources": {"cpu": "0.2", "memory": "16Mi"}},
            ),
        ]:
            status, answer = await coordinator.call(method, path, body)
            assert status in (200, 201), answer
            if "containers" in answer:
                ids[answer["deployment"]["namespace"]] = answer["containers"][0]["record"]["id"]
        yield coordinator, ids
        await agent.close()
    await runner.cleanup()


async def get(
    coordinator: Coordinator, path: str, **headers: str
) -> tuple[aiohttp.ClientResponse, str]:
    response = await coordinator.http.get(
        coordinator.url + path, headers=headers, allow_redirects=False
    )
    return response, await response.text()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def log_in(
    coordinator: Coordinator, token: str, after: str = "/ui/"
) -> aiohttp.ClientResponse:
    return await coordinator.http.post(
        coordinator.url + "/ui/login",
        data={"token": token, "next": after},
        allow_redirects=False,
    )


def session_of(response: aiohttp.ClientResponse) -> dict[str, str]:
    """The Cookie header that sends back the session the response set."""
    morsel = response.cookies["allot_session"]
    return {"Cookie": f"allot_session={morsel.value}"}


@pytest.mark.parametrize("path", PAGES)
async def test_each_page_whole_and_as_the_fragment_its_refresh_asks_for(
    dashboard: tuple[Coordinator, dict[str, str]], path: str
) -> None:
    coordinator, _ = dashboard
    response, page = await get(coordinator, path, **bearer(API_TOKEN))
    assert (response.status, response.content_type) == (200, "text/html")
    assert page.startswith("<!doctype html>")
    assert '<meta name="viewport"' in page
    assert response.headers["Cache-Control"] == "no-store"
    (nonce,) = re.findall(r'<script nonce="([^"]+)">', page)
    assert f"script-src 'nonce-{nonce}'" in response.headers["Content-Security-Policy"]
    response, fragment = await get(coordinator, path, **bearer(API_TOKEN), **{FRAGMENT_HEADER: "1"})
    assert response.status == 200
    assert "<html" not in fragment
    assert "<script" not in fragment
    assert fragment.strip() in page  # the block, as the whole page has it


async def test_the_node_page_draws_who_holds_each_core(
    dashboard: tuple[Coordinator, dict[str, str]],
) -> None:
    coordinator, ids = dashboard
    _, page = await get(coordinator, f"/ui/nodes/{NODE}", **bearer(API_TOKEN))
    titles = re.findall(r'data-cpu="(\d+)" data-kind="(\w+)">\s*<title>([^<]*)</title>', page)
    assert titles == [
        ("0", "bound", f"CPU 0: bound to team-a/web {ids['team-a']}"),
        ("1", "shared", "CPU 1: shared pool"),
    ]
    assert f"<code>{ids['team-b']}</code>" in page  # on the shared pool


async def test_a_namespace_token_sees_its_own_containers_only(
    dashboard: tuple[Coordinator, dict[str, str]],
) -> None:
    coordinator, ids = dashboard
    for path in ("/ui/", f"/ui/nodes/{NODE}"):
        response, page = await get(coordinator, path, **bearer(NAMESPACE_TOKEN))
        assert response.status == 200
        assert "team-a/web" in page
        assert "team-b" not in page
        assert ids["team-b"] not in page
    _, node = await get(coordinator, f"/ui/nodes/{NODE}", **bearer(NAMESPACE_TOKEN))
    assert "And 1 container of other namespaces." in node
    assert '<span class="who">with a token for namespaces team-a</span>' in node
    response, page = await get(coordinator, "/ui/deployments/team-b/db", **bearer(NAMESPACE_TOKEN))
    assert response.status == 404
    assert "There is no deployment team-b/db that this token may see." in page


async def test_without_a_token_every_page_sends_to_the_login_form(
    dashboard: tuple[Coordinator, dict[str, str]],
) -> None:
    coordinator, _ = dashboard
    for path in PAGES:
        response, page = await get(coordinator, path)
        assert (response.status, response.headers["Location"]) == (303, f"/ui/login?next={path}")
        assert NODE not in page
    response, _ = await get(coordinator, "/ui/nodes/nowhere?x=1")
    assert response.headers["Location"] == "/ui/login?next=/ui/nodes/nowhere?x%3D1"
    response, _ = await get(coordinator, "/ui")
    assert (response.status, response.headers["Location"]) == (308, "/ui/")


async def test_logging_in_sets_a_strict_httponly_cookie_and_logging_out_ends_it(
    dashboard: tuple[Coordinator, dict[str, str]],
) -> None:
    coordinator, _ = dashboard
    response = await log_in(coordinator, API_TOKEN, after="/ui/quotas")
    assert (response.status, response.headers["Location"]) == (303, "/ui/quotas")
    cookie = SimpleCookie(response.headers["Set-Cookie"])["allot_session"]
    assert (cookie["httponly"], cookie["samesite"], cookie["path"]) == (True, "Strict", "/ui/")
    assert not cookie["secure"]  # plain HTTP here; over TLS it is Secure
    session = session_of(response)
    page_response, page = await get(coordinator, "/ui/quotas", **session)
    assert page_response.status == 200
    assert "team-a" in page
    response, _ = await get(coordinator, "/ui/logout", **session)
    assert (response.status, response.headers["Location"]) == (303, "/ui/login")
    assert response.cookies["allot_session"].value == ""
    response, _ = await get(coordinator, "/ui/quotas", **session)  # the old cookie, kept
    assert response.status == 303


@pytest.mark.parametrize(
    "wanted", ["https://elsewhere.example/", "//elsewhere.example/ui/", "/v1/nodes", "/ui/\\x"]
)
async def test_after_logging_in_no_page_but_the_dashboards(
    dashboard: tuple[Coordinator, dict[str, str]], wanted: str
) -> None:
    coordinator, _ = dashboard
    response = await log_in(coordinator, API_TOKEN, after=wanted)
    assert (response.status, response.headers["Location"]) == (303, "/ui/")


async def test_a_wrong_token_is_refused_counted_and_given_no_session(
    dashboard: tuple[Coordinator, dict[str, str]],
) -> None:
    coordinator, _ = dashboard
    before = await refusals(coordinator)
    response = await log_in(coordinator, "not-a-token-of-this-coordinator")
    page = await response.text()
    assert response.status == 401
    assert "allot_session" not in response.cookies
    assert "That token is not one this coordinator accepts." in page
    response, page = await get(coordinator, "/ui/", **bearer("not-a-token-either"))
    assert response.status == 401
    assert NODE not in page
    response, _ = await get(coordinator, "/ui/", Cookie="allot_session=forged")
    assert response.status == 303
    assert await refusals(coordinator) == before + 2


async def test_a_login_form_posted_from_another_site_is_refused(
    dashboard: tuple[Coordinator, dict[str, str]],
) -> None:
    coordinator, _ = dashboard
    response = await coordinator.http.post(
        coordinator.url + "/ui/login",
        data={"token": API_TOKEN, "next": "/ui/"},
        headers={"Origin": "https://elsewhere.example"},
        allow_redirects=False,
    )
    assert response.status == 403
    assert "allot_session" not in response.cookies


async def test_many_viewers_at_once(dashboard: tuple[Coordinator, dict[str, str]]) -> None:
    """Logins and page loads of two kinds of token together over real HTTP: each login
    gets a session of its own, and each page what its token may see."""
    coordinator, ids = dashboard
    logins = await asyncio.gather(
        *(log_in(coordinator, [API_TOKEN, NAMESPACE_TOKEN][i % 2]) for i in range(20))
    )
    assert {response.status for response in logins} == {303}
    sessions = [session_of(response) for response in logins]
    assert len({session["Cookie"] for session in sessions}) == 20
    loads = await asyncio.gather(
        *(get(coordinator, PAGES[i % len(PAGES)], **sessions[i % 20]) for i in range(60))
    )
    for i, (response, page) in enumerate(loads):
        admin = i % 20 % 2 == 0
        path = PAGES[i % len(PAGES)]
        assert response.status == 200, (path, admin)
        assert (ids["team-b"] in page) == (admin and path == f"/ui/nodes/{NODE}")


async def refusals(coordinator: Coordinator) -> float:
    response = await coordinator.http.get(coordinator.url + "/metrics")
    text = await response.text()
    found = re.search(r'^allot_auth_failures_total\{kind="api_token"\} (\S+)$', text, re.M)
    return 0.0 if found is None else float(found.group(1))


async def test_a_standby_sends_the_dashboard_to_the_leader() -> None:
    async def leader() -> str:
        return "https://leader.example:7600"

    async with (
        serving(make_standby_app("join-token-for-tests-0123456789", leader)) as url,
        aiohttp.ClientSession() as http,
    ):
        response = await http.get(url + "/ui/nodes/node-a?x=1", allow_redirects=False)
        assert response.status == 307
        assert response.headers["Location"] == "https://leader.example:7600/ui/nodes/node-a?x=1"


async def test_over_tls_the_session_cookie_is_secure(tmp_path: Path) -> None:
    pki = tmp_path / "pki"
    make_ca(pki)
    make_leaf(pki, server_leaf(["127.0.0.1"]))
    config = config_for(
        tmp_path,
        tls_cert_file=str(pki / "server.pem"),
        tls_key_file=str(pki / "server-key.pem"),
    )
    runner = web.AppRunner(make_app(config), access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=config.server_tls_context()).start()
    trust = client_context(str(pki / "ca.pem"))
    assert trust is not None
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=trust)) as http:
            url = f"https://127.0.0.1:{runner.addresses[0][1]}/ui/login"
            response = await http.post(url, data={"token": API_TOKEN}, allow_redirects=False)
            assert response.status == 303
            cookie = SimpleCookie(response.headers["Set-Cookie"])["allot_session"]
            assert (cookie["secure"], cookie["httponly"], cookie["samesite"]) == (
                True,
                True,
                "Strict",
            )
    finally:
        await runner.cleanup()
