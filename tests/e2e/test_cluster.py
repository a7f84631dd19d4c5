"""End to end with real processes on loopback: allot-coordinator, allot-agent, allotctl."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from tests.e2e.processes import (
    HEARTBEAT_SECONDS,
    JOIN_TOKEN,
    LEASE_SECONDS,
    Service,
    allotctl,
    api,
    nodes_json,
    wait_for_node_state,
)

pytestmark = pytest.mark.e2e
NODE = "e2e-node"


def start_coordinator(
    tmp_path: Path, services: list[Service], port: int = 0
) -> tuple[Service, str]:
    coordinator = Service.coordinator(tmp_path, port=port).start()
    services.append(coordinator)
    url = coordinator.wait_for(r"coordinator listening url=(\S+)").group(1)
    return coordinator, url


def start_agent(
    tmp_path: Path, services: list[Service], url: str, token: str = JOIN_TOKEN
) -> Service:
    agent = Service.agent(tmp_path, url, NODE, token=token).start()
    services.append(agent)
    return agent


def test_this_host_registers_with_its_real_cpus(tmp_path: Path, services: list[Service]) -> None:
    _, url = start_coordinator(tmp_path, services)
    start_agent(tmp_path, services, url)
    record = wait_for_node_state(url, NODE, "ready")
    inventory = record["inventory"]
    assert inventory["hostname"] == socket.gethostname()
    assert len(inventory["cpus"]) == psutil.cpu_count(logical=True) == os.cpu_count()
    assert inventory["memory"] == psutil.virtual_memory().total
    table = allotctl(url, "nodes")
    assert table.returncode == 0, table.stderr
    header, row = table.stdout.splitlines()
    assert header.split()[:3] == ["NAME", "STATE", "CPUS"]
    assert row.split()[:3] == [NODE, "ready", f"{os.cpu_count()}/{os.cpu_count()}"]
    details = allotctl(url, "node", NODE)
    assert details.returncode == 0, details.stderr
    assert f"cpus online    {os.cpu_count()}" in details.stdout


def test_wrong_tokens_are_refused(tmp_path: Path, services: list[Service]) -> None:
    coordinator, url = start_coordinator(tmp_path, services)
    agent = start_agent(tmp_path, services, url, token="not-the-join-token-0123456789")
    agent.wait_for(r"ERROR cannot register with coordinator reason=\"refused: .*401")
    assert nodes_json(url) == {}
    refused = allotctl(url, "nodes", token="not-an-api-token-0123456789")
    assert refused.returncode == 1
    assert refused.stderr == (
        f"allotctl: the coordinator at {url} did not accept the API token"
        " (from --token or ALLOT_TOKEN)\n"
    )
    assert "Traceback" not in coordinator.text() + agent.text()


def test_a_killed_agent_is_lost_after_its_lease_and_ready_after_restart(
    tmp_path: Path, services: list[Service]
) -> None:
    coordinator, url = start_coordinator(tmp_path, services)
    agent = start_agent(tmp_path, services, url)
    wait_for_node_state(url, NODE, "ready")
    agent.kill9()
    killed_at = time.monotonic()
    record = wait_for_node_state(url, NODE, "lost", timeout=LEASE_SECONDS + 5)
    # The lease runs from the agent's last heartbeat, which may have been sent up to a
    # heartbeat period before the kill (CI once saw the node lost 1.29 s after it).
    assert time.monotonic() - killed_at >= LEASE_SECONDS * 0.9 - HEARTBEAT_SECONDS
    assert record["reason"] == f"no heartbeat for {LEASE_SECONDS:g}s"
    coordinator.wait_for(rf"WARNING node lost node={NODE} was=ready")
    start_agent(tmp_path, services, url)
    wait_for_node_state(url, NODE, "ready")
    coordinator.wait_for(rf"INFO node ready node={NODE} was=lost")


def test_a_killed_coordinator_restarts_knowing_the_node(
    tmp_path: Path, services: list[Service]
) -> None:
    coordinator, url = start_coordinator(tmp_path, services)
    agent = start_agent(tmp_path, services, url)
    before = wait_for_node_state(url, NODE, "ready")
    offset = len(agent.text())
    coordinator.kill9()
    port = int(url.rsplit(":", 1)[1])
    agent.wait_for("disconnected from coordinator", after=offset)
    coordinator, url = start_coordinator(tmp_path, services, port=port)
    coordinator.wait_for(r"node records loaded nodes=1 live=1")
    assert nodes_json(url)[NODE]["registered_at"] == before["registered_at"]
    agent.wait_for("registered with coordinator", after=offset)
    record = wait_for_node_state(url, NODE, "ready")
    assert record["registered_at"] == before["registered_at"]


def test_both_stop_cleanly_on_sigterm(tmp_path: Path, services: list[Service]) -> None:
    coordinator, url = start_coordinator(tmp_path, services)
    agent = start_agent(tmp_path, services, url)
    wait_for_node_state(url, NODE, "ready")
    assert agent.stop() == 0
    assert coordinator.stop() == 0
    assert "agent stopping" in agent.text()
    assert "coordinator stopping" in coordinator.text()
    assert "Traceback" not in coordinator.text() + agent.text()


class NotifyListener:
    """systemd's notify socket, read from the moment it exists by a thread of its own:
    the kernel queues only a few datagrams (net.unix.max_dgram_qlen, 10 here), and with
    two services pinging the watchdog every 0.2 s an unread socket fills in a second and
    drops READY=1 (seen on a loaded two-core machine)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.messages: list[bytes] = []
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._socket.bind(str(path))
        self._socket.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                self.messages.append(self._socket.recv(4096))
            except TimeoutError:
                continue

    def wait_until(self, done: Callable[[list[bytes]], bool], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not done(list(self.messages)):
            assert time.monotonic() < deadline, f"not seen in {timeout:g}s: {self.messages}"
            time.sleep(0.05)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._socket.close()


def test_under_systemd_both_notify_ready_ping_the_watchdog_and_log_priorities(
    tmp_path: Path, services: list[Service]
) -> None:
    listener = NotifyListener(tmp_path / "notify.sock")
    systemd = {
        "NOTIFY_SOCKET": str(listener.path),
        "WATCHDOG_USEC": "400000",  # a ping every 0.2 s
        "JOURNAL_STREAM": "8:12345",
    }
    coordinator = Service.coordinator(tmp_path)
    coordinator.env |= systemd
    services.append(coordinator.start())
    url = coordinator.wait_for(r"coordinator listening url=(\S+)").group(1)
    agent = Service.agent(tmp_path, url, NODE)
    agent.env |= systemd
    services.append(agent.start())
    wait_for_node_state(url, NODE, "ready")
    listener.wait_until(
        lambda messages: (
            sum(b"WATCHDOG=1" in m for m in messages) >= 4
            and sum(m.startswith(b"READY=1") for m in messages) >= 2
        )
    )
    listener.close()
    messages = listener.messages
    ready = [m for m in messages if m.startswith(b"READY=1\n")]
    assert any(b"STATUS=serving on http://127.0.0.1:" in m for m in ready)
    assert any(b"STATUS=reconciled revision 0" in m for m in ready)  # after the first reconcile
    assert any(f"STATUS=registered with {url} as {NODE}".encode() in m for m in messages)
    for service in (coordinator, agent):
        lines = service.text().splitlines()
        assert lines, f"{service.name} logged nothing"
        assert all(line[:3] in ("<6>", "<4>", "<3>") for line in lines), lines
    assert "<6>registered with coordinator" in agent.text()


def test_a_port_in_use_is_one_clear_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        coordinator = Service.coordinator(tmp_path, port=port).start()
        assert coordinator.process is not None
        assert coordinator.process.wait(timeout=30) == 1
    assert "ERROR cannot listen host=127.0.0.1" in coordinator.text()
    assert "Traceback" not in coordinator.text()


def test_allotctl_plans_on_this_host_and_on_inline_nodes(
    tmp_path: Path, services: list[Service]
) -> None:
    _, url = start_coordinator(tmp_path, services)
    start_agent(tmp_path, services, url)
    wait_for_node_state(url, NODE, "ready")
    cpus = os.cpu_count() or 1
    shown = allotctl(url, "plan", "--cpu", "1", "--memory", "64Mi", "--count", "1", "--cpu-bind")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert "placing   1 with strategy auto" in lines
    assert any(line.split()[:4] == [NODE, str(cpus), "0", "1"] for line in lines), lines
    nodes = tmp_path / "nodes.json"
    nodes.write_text('[{"name": "big", "cores": 24, "memory": "64Gi"}]')
    planned = allotctl(
        url, "plan", "--cpu", "1.7", "--memory", "512Mi", "--count", "3", "--cpu-bind",
        "--nodes-file", str(nodes), "--json",
    )  # fmt: skip
    assert planned.returncode == 0, planned.stderr
    plan = json.loads(planned.stdout)
    # 1.7 CPU = one whole core + a 70-piece fragment; a fragment core holds one such
    # fragment (100 // 70), so 24 cores make 12 whole + 12 fragment cores: 12 containers.
    assert [(n["name"], n["capacity"], n["deploy"]) for n in plan["nodes"]] == [("big", 12, 3)]
    too_many = allotctl(
        url, "plan", "--cpu", "1", "--count", "999", "--cpu-bind", "--nodes-file", str(nodes)
    )
    assert too_many.returncode == 1
    assert "(409 insufficient_capacity)" in too_many.stderr


def test_allotctl_shows_quotas(tmp_path: Path, services: list[Service]) -> None:
    _, url = start_coordinator(tmp_path, services)
    team = {"namespace": "team-a", "min": {"cpu": "1.5"}, "max": {"cpu": 4}}
    api(url, "/v1/elasticquotas/team-a", team, method="PUT")
    ml = {"namespaces": ["ml-1", "ml-2"], "min": {"gpu-memory": 40}}
    api(url, "/v1/compositeelasticquotas/ml", ml, method="PUT")
    listing = allotctl(url, "quotas")
    assert listing.returncode == 0, listing.stderr
    header, *rows = listing.stdout.splitlines()
    assert header.split() == ["NAME", "KIND", "NAMESPACES", "MIN", "MAX", "USED", "OVER-QUOTA"]
    assert rows[0].split() == [
        "ml",
        "composite",
        "ml-1,ml-2",
        "gpu-memory=40",
        "-",
        "gpu-memory=0",
        "gpu-memory=0",
    ]
    assert rows[1].split()[:5] == ["team-a", "elastic", "team-a", "cpu=1.5", "cpu=4"]
    one = allotctl(url, "quota", "team-a")
    assert one.returncode == 0, one.stderr
    assert "cpu       1.5  4    0     0" in one.stdout
    missing = allotctl(url, "quota", "nobody")
    assert (missing.returncode, missing.stderr) == (1, "allotctl: no quota named 'nobody'\n")
