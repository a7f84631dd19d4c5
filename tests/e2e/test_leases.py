"""Capacity leases end to end: a real coordinator process, killed and restarted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.processes import Service, allotctl, api, free_port

pytestmark = pytest.mark.e2e

# learning_mode_duration 60: if the restart lost the leases it would learn for a minute
# and the checks below would see grants of 0 instead.
TEMPLATES = """
[[resources]]
identifier_glob = "db.write"
capacity = 100
safe_capacity = 5
[resources.algorithm]
kind = "FAIR_SHARE"
lease_length = 300
refresh_interval = 10
learning_mode_duration = 60
"""


def grant(server: str, client: str, wants: float, has: float = 0) -> float:
    body = {
        "client_id": client,
        "resources": [{"resource_id": "db.write", "wants": wants, "has": has}],
    }
    capacity: float = api(server, "/v1/capacity", body)["resources"][0]["gets"]["capacity"]
    return capacity


def test_leases_survive_kill_9_and_restart_without_learning(
    tmp_path: Path, services: list[Service]
) -> None:
    first = Service.coordinator(tmp_path, toml=TEMPLATES).start()
    services.append(first)
    server = first.wait_for(r"coordinator listening url=(\S+)").group(1)
    first.wait_for(r"leases loaded .* learning=true")
    # A fresh store learns: each client is granted exactly what it reports holding.
    assert grant(server, "c0", 60, has=60) == 60
    assert grant(server, "c1", 100, has=40) == 40
    first.kill9()

    port = int(server.rsplit(":", 1)[1])
    second = Service.coordinator(tmp_path, port=port, toml=TEMPLATES).start()
    services.append(second)
    second.wait_for(r"coordinator listening")
    second.wait_for(r"leases loaded templates=1 resources=1 leases=2 dropped=0 learning=false")
    status = api(server, "/v1/resources/db.write/status")
    assert (status["learning"], status["clients"], status["sum_has"]) == (False, 2, 100)
    leases = api(server, "/v1/resources/db.write/leases")["leases"]
    assert {lease["client_id"]: lease["has"] for lease in leases} == {"c0": 60, "c1": 40}
    assert grant(server, "c2", 50) == 0  # nothing is free: the restored leases still count
    tables = allotctl(server, "resources")
    assert tables.returncode == 0, tables.stderr
    template_header, template_row, _, resource_header, resource_row = tables.stdout.splitlines()
    assert template_header.split()[:4] == ["TEMPLATE", "KIND", "CAPACITY", "SAFE"]
    assert template_row.split()[:4] == ["db.write", "FAIR_SHARE", "100", "5"]
    assert resource_header.split() == [
        "RESOURCE", "TEMPLATE", "KIND", "CAPACITY", "HAS", "WANTS", "CLIENTS", "LEARNING",
    ]  # fmt: skip
    assert resource_row.split() == [
        "db.write",
        "db.write",
        "FAIR_SHARE",
        "100",
        "100",
        "210",
        "3",
        "no",
    ]
    details = allotctl(server, "resource", "db.write")
    assert details.returncode == 0, details.stderr
    lines = details.stdout.splitlines()
    assert "leased (has)   100" in lines
    header = next(i for i, line in enumerate(lines) if line.startswith("NAMESPACE"))
    assert [line.split()[:4] for line in lines[header + 1 :]] == [
        ["-", "c0", "60", "60"],  # "-": the cluster's own clients, asked for by an admin
        ["-", "c1", "40", "100"],
        ["-", "c2", "0", "50"],
    ]
    missing = allotctl(server, "resource", "nothing.matches")
    assert missing.returncode == 1
    assert "no resource 'nothing.matches'" in missing.stderr


def test_a_lease_process_of_its_own_goes_with_its_coordinator_and_keeps_the_leases(
    tmp_path: Path, services: list[Service]
) -> None:
    """With ``lease_address`` the leases are served on a port of their own and, forwarded,
    on the main one; a coordinator killed with SIGKILL takes its lease process with it (a
    restart binds the same lease port again), and the leases come back."""
    lease_port = free_port()
    toml = f'lease_address = "127.0.0.1:{lease_port}"\n{TEMPLATES}'
    first = Service.coordinator(tmp_path, toml=toml).start()
    services.append(first)
    # The lease process is spawned first: a fresh interpreter importing the coordinator.
    server = first.wait_for(r"coordinator listening url=(\S+)", timeout=60).group(1)
    leases = first.wait_for(r"lease process serving url=(\S+)").group(1)
    assert leases == f"http://127.0.0.1:{lease_port}"
    assert grant(leases, "c0", 60, has=60) == 60  # learning: the store is new
    assert grant(server, "c1", 100, has=40) == 40
    first.kill9()
    first.wait_for(r'lease process stopping reason="the coordinator is gone"', from_children=True)

    port = int(server.rsplit(":", 1)[1])
    second = Service.coordinator(tmp_path, port=port, toml=toml).start()
    services.append(second)
    second.wait_for(r"coordinator listening", timeout=60)
    second.wait_for(r"leases loaded templates=1 resources=1 leases=2 dropped=0 learning=false")
    for url in (server, leases):
        held = api(url, "/v1/resources/db.write/leases")["leases"]
        assert {lease["client_id"]: lease["has"] for lease in held} == {"c0": 60, "c1": 40}
    resources = allotctl(server, "resources")
    assert resources.returncode == 0, resources.stderr
    assert resources.stdout.splitlines()[-1].split()[:7] == [
        "db.write", "db.write", "FAIR_SHARE", "100", "100", "160", "2",
    ]  # fmt: skip
