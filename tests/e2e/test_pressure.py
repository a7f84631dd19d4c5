"""A real agent under CPU pressure: it reads the PSI file its setting names (here a file
in the kernel's format that the test writes, as a faithful fake of a loaded host), reports
it, and the coordinator shows the node under pressure and records the event; then the
same for the pressure going away. Where the kernel has PSI, the default setting reads the
host's real /proc/pressure/cpu."""

from __future__ import annotations

import os
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.processes import (
    Service,
    allotctl,
    api,
    free_port,
    nodes_json,
    wait_for_node_state,
)

pytestmark = pytest.mark.e2e
NODE = "e2e-node"


def psi_text(avg10: float) -> str:
    return (
        f"some avg10={avg10:.2f} avg60={avg10 / 2:.2f} avg300=1.00 total=123456789\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    )


def until(check: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"never: {what}")
        time.sleep(0.1)
    return found


def start(
    tmp_path: Path, services: list[Service], *agent_args: str
) -> tuple[Service, str, Service]:
    """A coordinator at a port it can be restarted on, and the agent: both started, the
    node ready."""
    coordinator = Service.coordinator(tmp_path, port=free_port()).start()
    services.append(coordinator)
    url = coordinator.wait_for(r"coordinator listening url=(\S+)").group(1)
    agent = Service.agent(tmp_path, url, NODE, args=("--resync-seconds=0.3", *agent_args))
    services.append(agent.start())
    wait_for_node_state(url, NODE, "ready")
    return coordinator, url, agent


def scraped(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Each sample of ``url`` (a /metrics) by name and labels."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {
        (one.name, frozenset(one.labels.items())): one.value
        for family in text_string_to_metric_families(text)
        for one in family.samples
    }


def write_psi(path: Path, text: str) -> None:
    """As the kernel's file reads: whole. A plain write truncates first, and an agent that
    read the empty file between would report no reading (once seen under load, as a
    "relieved" event for want of a reading)."""
    fresh = path.with_name(path.name + ".new")
    fresh.write_text(text)
    os.replace(fresh, path)


def pressure_events(url: str) -> list[tuple[str, str]]:
    events = api(url, f"/v1/events?node={NODE}")["events"]
    return [(e["kind"], e["reason"]) for e in events if e["kind"] in ("pressure", "relieved")]


def test_an_agent_reading_a_loaded_psi_file_puts_its_node_under_pressure(
    tmp_path: Path, services: list[Service]
) -> None:
    psi = tmp_path / "cpu-pressure"
    write_psi(psi, psi_text(5.0))
    coordinator, url, agent = start(tmp_path, services, f"--cpu-pressure-file={psi}")
    until(lambda: (nodes_json(url)[NODE]["pressure"] or {}).get("avg10") == 5.0, "a calm reading")

    write_psi(psi, psi_text(85.0))  # the default thresholds: enter at 60%, leave at 30%
    pressure = until(
        lambda: (p := nodes_json(url)[NODE]["pressure"]) and p["under"] and p, "under pressure"
    )
    assert pressure | {"at": 0, "since": 0} == {
        "under": True,
        "source": "psi",
        "avg10": 85.0,
        "avg60": 42.5,
        "at": 0,
        "since": 0,
    }
    table = allotctl(url, "nodes")
    assert table.returncode == 0, table.stderr
    header, row = (line.split() for line in table.stdout.splitlines())
    assert row[header.index("PRESSURE")] == "85%,under"
    details = allotctl(url, "node", NODE)
    assert "cpu pressure  under pressure for" in details.stdout, details.stdout
    assert "85.0% (PSI some avg10; 42.5% over 60 s)" in details.stdout
    assert until(lambda: pressure_events(url), "the pressure event") == [
        ("pressure", "cpu pressure 85% (PSI some avg10) >= 60%")
    ]
    coordinator.wait_for(r"INFO event pressure node=e2e-node reason=")
    # Both sides' /metrics: the agent's reading, the coordinator's copy and held state.
    on_agent = scraped(agent.metrics_url())
    assert on_agent[("allot_agent_cpu_pressure_percent", frozenset({("source", "psi")}))] == 85.0
    on_coordinator = scraped(f"{url}/metrics")
    node = ("node", NODE)
    held = on_coordinator[("allot_node_cpu_pressured", frozenset({node}))]
    percent = ("allot_node_cpu_pressure_percent", frozenset({node, ("source", "psi")}))
    assert (on_coordinator[percent], held) == (85.0, 1.0)

    write_psi(psi, psi_text(12.0))
    until(lambda: len(pressure_events(url)) == 2, "the relieved event")
    assert pressure_events(url)[-1] == ("relieved", "cpu pressure 12% (PSI some avg10) <= 30%")
    assert nodes_json(url)[NODE]["pressure"]["under"] is False
    events = allotctl(url, "events", "--kind", "relieved")
    assert events.returncode == 0, events.stderr
    assert "cpu pressure 12% (PSI some avg10) <= 30%" in events.stdout


def test_a_restarted_coordinator_knows_the_pressure_from_the_agents_first_report(
    tmp_path: Path, services: list[Service]
) -> None:
    """Pressure is a reading, kept in memory only: a new coordinator (a restart, or a
    takeover) has none until the agent's first status of its new session, which it
    sends at once, carrying the reading."""
    psi = tmp_path / "cpu-pressure"
    write_psi(psi, psi_text(85.0))
    coordinator, url, _ = start(tmp_path, services, f"--cpu-pressure-file={psi}")
    until(lambda: (nodes_json(url)[NODE]["pressure"] or {}).get("under"), "under pressure")
    coordinator.kill9()
    coordinator.start()
    coordinator.wait_for(r"coordinator listening url=", timeout=60)  # a loaded machine
    pressure = until(
        lambda: (p := nodes_json(url)[NODE]["pressure"]) and p["under"] and p,
        "under pressure again after the restart",
        timeout=60,
    )
    assert (pressure["source"], pressure["avg10"]) == ("psi", 85.0)
    # The new coordinator did not know the node was under pressure: it enters again.
    assert (
        until(lambda: len(pressure_events(url)) == 2 and pressure_events(url), "events")
        == [("pressure", "cpu pressure 85% (PSI some avg10) >= 60%")] * 2
    )


@pytest.mark.skipif(not Path("/proc/pressure/cpu").exists(), reason="this kernel has no PSI")
def test_by_default_an_agent_reads_the_hosts_own_psi(
    tmp_path: Path, services: list[Service]
) -> None:
    _, url, _ = start(tmp_path, services)
    pressure = until(lambda: nodes_json(url)[NODE]["pressure"], "a reading of the host's PSI")
    assert pressure["source"] == "psi"
    assert 0 <= pressure["avg10"] <= 100
    assert pressure["avg60"] is not None
