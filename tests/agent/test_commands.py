"""The `allot-agent` commands as an operator runs them: real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from shared.codec import json_decoder
from shared.inventory import Inventory
from tests.fixtures.sysfs import load_fixture, materialize

AGENT = str(Path(sys.executable).parent / "allot-agent")
decode_inventory: msgspec.json.Decoder[Inventory] = json_decoder(Inventory)


def discover(*args: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ALLOT_")}
    return subprocess.run(
        [AGENT, "discover", *args], env=environment, capture_output=True, text=True, timeout=60
    )


def test_json_is_this_hosts_inventory() -> None:
    result = discover("--json")
    assert result.returncode == 0, result.stderr
    inventory = decode_inventory.decode(result.stdout)
    assert len(inventory.online) == os.cpu_count()
    assert inventory.offered() == inventory.online - inventory.isolated
    assert inventory.gpus == []  # no NVIDIA library on the test machines


def test_tables_of_a_recorded_dual_socket_host_with_reserved_cpus(tmp_path: Path) -> None:
    materialize(load_fixture("dual_socket_ht"), tmp_path)
    result = discover(f"--sysfs-root={tmp_path}", "--reserved-cpus=0,16")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "cpus online    32 (0-31)" in lines
    assert "cpus offered   30 (1-15,17-31)" in lines
    assert "cpus reserved  2 (0,16)" in lines
    assert "cores          16 in 2 package(s), 2 thread(s) per core" in lines
    # Node memory is at most this machine's (the recorded host had 64Gi per node).
    assert any(line.split()[:2] == ["0", "0-7,16-23"] for line in lines), lines


def test_configured_extended_resources_are_part_of_the_inventory(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text('extended_resources = {"example.com/fpga" = 2}\n')
    shown = discover(f"--config={config}", "--extended-resources=example.com/fpga=3,x.io/nic=1")
    assert shown.returncode == 0, shown.stderr
    assert "extended       example.com/fpga=3 x.io/nic=1" in shown.stdout.splitlines()
    as_json = discover(f"--config={config}", "--json")
    assert decode_inventory.decode(as_json.stdout).extended == {"example.com/fpga": 2}


def test_a_discovered_resource_cannot_be_configured() -> None:
    result = discover("--extended-resources=nvidia.com/gpu=1")
    assert result.returncode == 2
    assert "extended_resources: 'nvidia.com/gpu' is discovered on the host" in result.stderr
    assert "Traceback" not in result.stderr


def test_reserving_cpus_that_are_not_online_is_refused(tmp_path: Path) -> None:
    materialize(load_fixture("isolcpus"), tmp_path)
    result = discover(f"--sysfs-root={tmp_path}", "--reserved-cpus=0-31")
    assert result.returncode == 1
    assert "reserved_cpus 0-31 names CPUs 16-31 that are not online (online: 0-15)" in result.stderr


def test_a_bad_setting_is_refused_before_anything_runs() -> None:
    result = discover("--reserved-cpus=zero")
    assert result.returncode == 2
    assert "reserved_cpus" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("token", "complaint"),
    [
        ("", "join_token must be set: a secret of at least 16 characters"),
        ("s3cr3t", "join_token has 6 characters; a token needs at least 16 (make one with:"),
    ],
    ids=["none", "short"],
)
def test_run_with_an_unusable_join_token_says_so_before_anything_starts(
    token: str, complaint: str
) -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ALLOT_")}
    result = subprocess.run(
        [AGENT, "run", "--server=http://127.0.0.1:9", f"--join-token={token}"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    # the one line, first: no discovery, no log line, no connection attempt before it
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("allot-agent: " + complaint), result.stderr
    assert result.stderr.count("\n") == 1
    assert "s3cr3t" not in result.stderr  # a secret, even a bad one, is never printed
