"""TLS for real: certificates made by ``allot-coordinator tls``, a coordinator process
serving https and wss with them, a real agent and the lease client verifying it, plain
HTTP refused, a wrong CA named as a certificate problem, SIGHUP swapping the certificate
under an agent session that stays, and per-node identity with real agent processes."""

from __future__ import annotations

import http.client
import json
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bench.etcd_cluster import EtcdCluster, free_ports
from client.leases import LeaseClient
from tests.coordinator.store_engines import etcd_settings
from tests.e2e.conftest import etcd_flags
from tests.e2e.processes import API_TOKEN, BIN, JOIN_TOKEN, LEASE_SECONDS, Service
from tests.e2e.test_lease_client import TEMPLATES
from tests.polling import eventually

pytestmark = pytest.mark.e2e


def tls(*args: str) -> None:
    result = subprocess.run(
        [str(BIN / "allot-coordinator"), "tls", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def make_pki(directory: Path, *nodes: str) -> Path:
    tls("ca", "--dir", str(directory))
    tls("cert", "--dir", str(directory), "--server", "127.0.0.1", "localhost")
    for node in nodes:
        tls("cert", "--dir", str(directory), "--node", node)
    return directory


def start_coordinator(
    workdir: Path, services: list[Service], pki: Path, *, client_ca: bool = False
) -> tuple[Service, str]:
    args = [f"--tls-cert-file={pki / 'server.pem'}", f"--tls-key-file={pki / 'server-key.pem'}"]
    if client_ca:
        args.append(f"--tls-client-ca-file={pki / 'ca.pem'}")
    coordinator = Service.coordinator(workdir, toml=TEMPLATES, args=tuple(args)).start()
    services.append(coordinator)
    url = coordinator.wait_for(r"coordinator listening url=(\S+)").group(1)
    return coordinator, url


def start_agent(
    workdir: Path, services: list[Service], url: str, node: str, *args: str, token: str
) -> Service:
    """An agent process as ``node`` with its own state directory; ``token``: its join
    token ("" for none)."""
    state = workdir / f"state-{node}-{len(services)}"
    state.mkdir()
    agent = Service.agent(state, url, node, args=args, token=token)
    services.append(agent.start())
    return agent


def api(url: str, path: str, ca: Path) -> Any:
    request = urllib.request.Request(url + path, headers={"Authorization": f"Bearer {API_TOKEN}"})
    context = ssl.create_default_context(cafile=str(ca))
    with urllib.request.urlopen(request, timeout=10, context=context) as response:
        return json.loads(response.read())


def served_certificate(url: str, ca: Path) -> bytes:
    """The certificate a new, verified TLS connection to ``url`` is shown (DER)."""
    host, port = url.removeprefix("https://").rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(ca))
    connection = http.client.HTTPSConnection(host, int(port), context=context, timeout=10)
    try:
        connection.connect()
        assert connection.sock is not None
        certificate = connection.sock.getpeercert(binary_form=True)
    finally:
        connection.close()
    assert isinstance(certificate, bytes)
    return certificate


def der(path: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(path.read_text())


async def test_an_agent_and_the_lease_client_over_tls_and_plain_http_refused(
    tmp_path: Path, services: list[Service]
) -> None:
    pki = make_pki(tmp_path / "pki")
    _, url = start_coordinator(tmp_path, services, pki)
    assert url.startswith("https://127.0.0.1:")

    agent = start_agent(
        tmp_path, services, url, "tls-node", f"--tls-ca-file={pki / 'ca.pem'}", token=JOIN_TOKEN
    )
    agent.wait_for("registered with coordinator")
    node = api(url, "/v1/nodes/tls-node", pki / "ca.pem")
    assert node["state"] == "ready"

    async with LeaseClient(url, token=API_TOKEN, ca_file=str(pki / "ca.pem")) as client:
        writes = await client.resource("db.write", 50)
        await eventually(lambda: writes.capacity == 50)

    plain = url.replace("https://", "http://") + "/healthz"
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientError):
            await session.get(plain)

    other = make_pki(tmp_path / "other")
    stranger = start_agent(
        tmp_path, services, url, "doubter", f"--tls-ca-file={other / 'ca.pem'}", token=JOIN_TOKEN
    )
    refused = stranger.wait_for(r"cannot register with coordinator reason=.*")
    assert "certificate" in refused.group(0)
    assert "registered with coordinator" not in stranger.text()


def test_sighup_swaps_the_certificate_under_an_agent_session_that_stays(
    tmp_path: Path, services: list[Service]
) -> None:
    pki = make_pki(tmp_path / "pki")
    coordinator, url = start_coordinator(tmp_path, services, pki)
    agent = start_agent(
        tmp_path, services, url, "steady", f"--tls-ca-file={pki / 'ca.pem'}", token=JOIN_TOKEN
    )
    agent.wait_for("registered with coordinator")
    first = served_certificate(url, pki / "ca.pem")
    assert first == der(pki / "server.pem")

    tls("cert", "--dir", str(pki), "--server", "127.0.0.1", "--force")
    assert coordinator.process is not None
    mark = len(coordinator.text())
    coordinator.process.send_signal(signal.SIGHUP)
    coordinator.wait_for("TLS files reloaded", after=mark)
    second = served_certificate(url, pki / "ca.pem")
    assert second == der(pki / "server.pem") != first

    (pki / "server-key.pem").write_text("not a key\n")
    mark = len(coordinator.text())
    coordinator.process.send_signal(signal.SIGHUP)
    coordinator.wait_for("TLS files not reloaded; the previous ones stay in use", after=mark)
    assert served_certificate(url, pki / "ca.pem") == second

    # The session outlives both reloads: several lease lengths of heartbeats later the
    # node is still ready on the one registration and the one connection it began with.
    time.sleep(3 * LEASE_SECONDS)
    node = api(url, "/v1/nodes/steady", pki / "ca.pem")
    assert node["state"] == "ready"
    assert agent.text().count("registered with coordinator") == 1
    assert coordinator.text().count("agent connected") == 1
    assert "disconnected" not in agent.text()


def test_a_node_certificate_is_the_only_node_its_agent_may_be(
    tmp_path: Path, services: list[Service]
) -> None:
    pki = make_pki(tmp_path / "pki", "a")
    _, url = start_coordinator(tmp_path, services, pki, client_ca=True)
    ca = f"--tls-ca-file={pki / 'ca.pem'}"
    as_a = (f"--tls-cert-file={pki / 'node-a.pem'}", f"--tls-key-file={pki / 'node-a-key.pem'}")

    impostor = start_agent(tmp_path, services, url, "b", ca, *as_a, token="")
    refused = impostor.wait_for(r"cannot register with coordinator reason=.*")
    assert "this agent's certificate is for a, not for node 'b'" in refused.group(0)

    honest = start_agent(tmp_path, services, url, "a", ca, *as_a, token="")  # no join token
    honest.wait_for("registered with coordinator")
    nodes = api(url, "/v1/nodes", pki / "ca.pem")["nodes"]
    assert [n["name"] for n in nodes] == ["a"]
    events = api(url, "/v1/events?kind=refused&node=b", pki / "ca.pem")["events"]
    assert [e["reason"] for e in events][:1] == [
        "node_not_certified: this agent's certificate is for a, not for node 'b'"
    ]
    assert "registered with coordinator" not in impostor.text()

    anonymous = start_agent(tmp_path, services, url, "c", ca, token=JOIN_TOKEN)
    refused = anonymous.wait_for(r"cannot register with coordinator reason=.*")
    assert "client certificate" in refused.group(0)


def test_coordinators_on_etcd_serve_tls_and_a_standby_names_the_https_leader(
    tmp_path: Path, services: list[Service], etcd_cluster: EtcdCluster
) -> None:
    pki = make_pki(tmp_path / "pki")
    settings = etcd_settings(etcd_cluster)
    urls = []
    for index, port in enumerate(free_ports(2)):
        directory = tmp_path / f"coordinator-{index}"
        directory.mkdir()
        flags = (
            *etcd_flags(settings),
            "--leader-ttl-seconds=3",
            f"--tls-cert-file={pki / 'server.pem'}",
            f"--tls-key-file={pki / 'server-key.pem'}",
        )
        coordinator = Service.coordinator(directory, port=port, args=flags).start()
        services.append(coordinator)
        urls.append(coordinator.wait_for(r"coordinator listening url=(\S+)").group(1))
        coordinator.wait_for(r"INFO standby |WARNING leading ")
    leader, standby = urls
    assert leader.startswith("https://127.0.0.1:")
    services[1].wait_for(rf"INFO standby leader={leader}")

    context = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    with pytest.raises(urllib.error.HTTPError) as answer:
        urllib.request.urlopen(standby + "/readyz", timeout=10, context=context)
    assert answer.value.code == 503
    assert json.loads(answer.value.read())["leader"] == leader

    agent = start_agent(
        tmp_path,
        services,
        f"{standby},{leader}",
        "follower",
        f"--tls-ca-file={pki / 'ca.pem'}",
        token=JOIN_TOKEN,
    )
    agent.wait_for(rf"registered with coordinator node=follower url={leader} ")
    assert api(leader, "/v1/nodes/follower", pki / "ca.pem")["state"] == "ready"
