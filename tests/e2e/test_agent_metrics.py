"""The agent process's metrics address: served where it is set (and a scrape says the
agent is connected), not served when it is empty, and an address already taken is an
error line while the agent registers all the same."""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path

import pytest

from tests.e2e.processes import Service, wait_for_node_state

pytestmark = pytest.mark.e2e
NODE = "e2e-metrics"


def cluster(tmp_path: Path, services: list[Service], *agent_args: str) -> tuple[str, Service]:
    coordinator = Service.coordinator(tmp_path).start()
    services.append(coordinator)
    url = coordinator.wait_for(r"coordinator listening url=(\S+)").group(1)
    agent = Service.agent(tmp_path, url, NODE, args=agent_args).start()
    services.append(agent)
    wait_for_node_state(url, NODE, "ready")
    return url, agent


def test_the_agent_serves_its_metrics_where_it_is_told(
    tmp_path: Path, services: list[Service]
) -> None:
    _, agent = cluster(tmp_path, services)
    with urllib.request.urlopen(agent.metrics_url(), timeout=10) as response:
        text = response.read().decode()
    assert "\nallot_agent_connected 1.0\n" in text


def test_an_empty_address_serves_none(tmp_path: Path, services: list[Service]) -> None:
    _, agent = cluster(tmp_path, services, "--metrics-address=")
    agent.wait_for(r"registered with coordinator")
    assert "metrics listening" not in agent.text()
    assert "metrics not served" not in agent.text()


def test_an_address_taken_is_logged_and_the_agent_goes_on(
    tmp_path: Path, services: list[Service]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        url, agent = cluster(tmp_path, services, f"--metrics-address=127.0.0.1:{port}")
        line = agent.wait_for(r"ERROR metrics not served address=(\S+) reason=.*in use").group(0)
    assert f"address=127.0.0.1:{port}" in line
    assert agent.process is not None
    assert agent.process.poll() is None  # still running, and its node is ready
    wait_for_node_state(url, NODE, "ready")
