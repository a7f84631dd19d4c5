"""The unit files as systemd itself reads them: `systemd-analyze verify` must accept both
without a single warning, and they must keep the settings the services rely on."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

UNITS = Path(__file__).resolve().parent.parent / "systemd"
SYSTEM_UNITS = Path("/lib/systemd/system")
SERVICES = ["allot-coordinator.service", "allot-agent.service"]


def unit_settings(name: str) -> dict[str, list[str]]:
    """Each key of the unit (or drop-in) with its values in order (systemd allows repeated
    keys)."""
    settings: dict[str, list[str]] = {}
    for line in (UNITS / name).read_text().splitlines():
        if "=" in line and not line.lstrip().startswith(("#", ";", "[")):
            key, value = line.split("=", 1)
            settings.setdefault(key.strip(), []).append(value.strip())
    return settings


def test_systemd_analyze_verify_accepts_both_units_without_warnings(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing: run scripts/provision (as root)"
    # A root of our own: the units, the system's own units they refer to, and stand-ins
    # for the installed commands (verify checks that ExecStart names an executable).
    (tmp_path / "lib/systemd").mkdir(parents=True)
    shutil.copytree(SYSTEM_UNITS, tmp_path / "lib/systemd/system", symlinks=True)
    (tmp_path / "etc/systemd/system").mkdir(parents=True)
    (tmp_path / "usr/local/bin").mkdir(parents=True)
    for service in SERVICES:
        shutil.copy(UNITS / service, tmp_path / "etc/systemd/system" / service)
        if (UNITS / f"{service}.d").is_dir():  # as scripts/install places them
            shutil.copytree(UNITS / f"{service}.d", tmp_path / f"etc/systemd/system/{service}.d")
        command = tmp_path / "usr/local/bin" / service.removesuffix(".service")
        command.write_text("#!/bin/sh\n")
        command.chmod(0o755)
    result = subprocess.run(
        [analyze, "verify", f"--root={tmp_path}", *SERVICES],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


@pytest.mark.parametrize("service", SERVICES)
def test_units_notify_ping_the_watchdog_and_restart_on_failure(service: str) -> None:
    settings = unit_settings(service)
    assert settings["Type"] == ["notify"]
    assert settings["WatchdogSec"] == ["30s"]
    assert settings["Restart"] == ["on-failure"]
    assert settings["ExecStart"][0].startswith(
        f"/usr/local/bin/{service.removesuffix('.service')} "
    )
    assert settings["NoNewPrivileges"] == ["yes"]
    assert settings["ProtectSystem"] == ["strict"]


def test_the_agent_can_reach_docker_gpu_devices_and_the_pools_cgroups() -> None:
    settings = unit_settings("allot-agent.service")
    assert "-/run/docker.sock" in settings["ReadWritePaths"]
    assert "ProtectControlGroups" not in settings  # it writes the pools' cgroups
    assert "AF_UNIX" in settings["RestrictAddressFamilies"][0].split()
    for hiding_devices in ("PrivateDevices", "DevicePolicy"):
        assert hiding_devices not in settings  # NVML opens /dev/nvidia*


def test_the_coordinator_runs_unprivileged_with_its_state_directory() -> None:
    settings = unit_settings("allot-coordinator.service")
    assert settings["DynamicUser"] == ["yes"]
    assert settings["StateDirectory"] == ["allot"]
    assert "--data-dir /var/lib/allot" in settings["ExecStart"][0]
    assert settings["CapabilityBoundingSet"] == [""]


def test_the_tls_drop_in_names_each_file_it_hands_over_and_not_the_ca_key() -> None:
    settings = unit_settings("allot-coordinator.service.d/tls.conf")
    credentials = dict(value.split(":", 1) for value in settings["LoadCredential"])
    named = dict(value.split("=", 1) for value in settings["Environment"])
    assert credentials == {
        "server.pem": "/etc/allot/tls/server.pem",
        "server-key.pem": "/etc/allot/tls/server-key.pem",
        "ca.pem": "/etc/allot/tls/ca.pem",
    }
    assert named == {
        "ALLOT_COORDINATOR_TLS_CERT_FILE": "%d/server.pem",
        "ALLOT_COORDINATOR_TLS_KEY_FILE": "%d/server-key.pem",
        "ALLOT_COORDINATOR_TLS_CLIENT_CA_FILE": "%d/ca.pem",
    }


@pytest.mark.parametrize("service", SERVICES)
def test_units_allow_open_files_for_max_connections_and_headroom(service: str) -> None:
    """65,536 open files: the coordinator's max_connections (10,000 by default) and its
    own files fit, with room to raise the cap; the agent gets the same."""
    assert unit_settings(service)["LimitNOFILE"] == ["65536"]
