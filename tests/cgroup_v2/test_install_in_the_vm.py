"""scripts/install as an operator runs it, in the cgroup v2 VM (Debian bookworm with
systemd, no package index, no python3-venv): a wheelhouse built here, copied into the
guest, installed with ``--coordinator --agent --wheels``; then the services are driven
with systemctl and allotctl as a person would. The tests run in order, on one install."""

from __future__ import annotations

import json
import shlex
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from shared.protocol import Limits
from tests.cgroup_v2.guest import REPO, Guest
from tests.cgroup_v2.v2_files import expected_files
from tests.cgroup_v2.wheels import pip_wheel
from tests.docker.conftest import IMAGE

pytestmark = pytest.mark.cgroup_v2
WHEELS = "/root/wheels"
INSTALL = f"/allot/scripts/install --coordinator --agent --wheels {WHEELS}"
# pip in the emulated guest: the first install took about 3 minutes here.
INSTALL_SECONDS = 900.0
CONVERGE_SECONDS = 240.0
# The test's drop-in: the unit's 30 s would make the watchdog test wait that long.
WATCHDOG_SECONDS = 10
WATCHDOG_DROP_IN = "/etc/systemd/system/allot-agent.service.d/test-watchdog.conf"
SERVICES = ("allot-coordinator", "allot-agent")
# allotctl's context in the guest, as the README tells an operator to make it.
CONTEXT = (
    "--server https://127.0.0.1:7600 --token-file /etc/allot/api-token "
    "--ca-file /etc/allot/tls/ca.pem"
)
DEPLOYMENT = "install-web"
UPGRADED = "# upgraded by the VM install test"
CONFIG_FILES = "sha256sum /etc/allot/*.toml /etc/allot/api-token /etc/allot/tls/*"
# What the install made, as bytes and links, and the services' processes: a second run
# must leave all of it as it was.
SNAPSHOT = (
    "cd / && find etc/allot etc/systemd/system -path '*allot*' -type f -print0 | sort -z | "
    "xargs -0 sha256sum && "
    "for link in usr/local/bin/allot* etc/systemd/system/*.wants/allot*; do "
    'echo "$link -> $(readlink "$link")"; done && '
    "find opt/allot/venv/lib -path '*.dist-info/RECORD' | sort | xargs cat | sha256sum && "
    f"systemctl show -p MainPID {' '.join(SERVICES)}"
)


@pytest.fixture(scope="module")
def installed(guest: Guest, wheelhouse: Path) -> Iterator[Guest]:
    """The guest after the install; uninstalled afterwards, its containers removed, so the
    VM's other tests find it as it was."""
    guest.put(wheelhouse, WHEELS)
    try:
        guest.sh(INSTALL, timeout=INSTALL_SECONDS)
        guest.sh(f"allotctl config set-context vm {CONTEXT} --use")
        yield guest
    finally:
        guest.sh("/allot/scripts/install --uninstall; rm -rf /root/.config/allot", check=False)
        guest.sh(
            f"docker ps -aq --filter label=allot.deployment={DEPLOYMENT} | xargs -r docker rm -f",
            check=False,
        )


def allotctl(guest: Guest, *args: str) -> Any:
    """What ``allotctl COMMAND --json ARGS`` answered in the guest, through the context."""
    command, *rest = args  # --json before a "--" that ends the flags
    return json.loads(guest.sh(f"allotctl {shlex.join([command, '--json', *rest])}"))


def wait_in_guest(guest: Guest, check: str) -> None:
    """Poll the shell test ``check`` in the guest until it holds; fails, naming it, when it
    has not held for CONVERGE_SECONDS."""
    script = f"for _ in $(seq {int(CONVERGE_SECONDS)}); do {check} && exit 0; sleep 1; done; exit 1"
    guest.sh(script, timeout=CONVERGE_SECONDS + 60)


def node_states(guest: Guest) -> dict[str, str]:
    return {node["name"]: node["state"] for node in allotctl(guest, "nodes")["nodes"]}


def main_pid(guest: Guest, service: str) -> int:
    return int(guest.sh(f"systemctl show -p MainPID --value {service}"))


def test_install_runs_both_services(installed: Guest) -> None:
    states = installed.sh(f"systemctl is-active {' '.join(SERVICES)}").split()
    enabled = installed.sh(f"systemctl is-enabled {' '.join(SERVICES)}").split()
    assert (states, enabled) == (["active", "active"], ["enabled", "enabled"])


def test_install_writes_private_configs_and_links_the_commands(installed: Guest) -> None:
    private = "/etc/allot/*.toml /etc/allot/api-token /etc/allot/tls/*key.pem"
    modes = installed.sh(f"stat -c '%n %a %U' {private}").splitlines()
    name = installed.sh("hostname").strip()
    assert modes == [
        f"/etc/allot/{file} 600 root"
        for file in (
            "agent.toml",
            "coordinator.toml",
            "api-token",
            "tls/ca-key.pem",
            f"tls/node-{name}-key.pem",
            "tls/server-key.pem",
        )
    ]
    links = installed.sh("readlink /usr/local/bin/allot-coordinator /usr/local/bin/allot-agent")
    assert links.split() == [
        "/opt/allot/venv/bin/allot-coordinator",
        "/opt/allot/venv/bin/allot-agent",
    ]


def test_install_configures_tls_and_the_nodes_certificate(installed: Guest) -> None:
    name = installed.sh("hostname").strip()
    agent = installed.sh("cat /etc/allot/agent.toml").splitlines()
    coordinator = installed.sh("cat /etc/allot/coordinator.toml").splitlines()
    assert [line for line in agent if not line.startswith("#")] == [
        'server = "https://127.0.0.1:7600"',
        f'node_name = "{name}"',
        'tls_ca_file = "/etc/allot/tls/ca.pem"',
        f'tls_cert_file = "/etc/allot/tls/node-{name}.pem"',
        f'tls_key_file = "/etc/allot/tls/node-{name}-key.pem"',
    ]
    assert 'host = "0.0.0.0"' in coordinator
    assert not [line for line in agent + coordinator if line.startswith("join_token")]


def test_install_serves_https_beyond_loopback_for_the_hosts_address(installed: Guest) -> None:
    address = installed.sh("hostname -I").split()[0]
    # The certificate names the address, so the context's CA verifies it there.
    assert "NAME" in installed.sh(f"allotctl --server https://{address}:7600 nodes")
    plain = installed.sh(
        "allotctl --server http://127.0.0.1:7600 nodes; echo status=$?", check=False
    )
    assert plain.endswith("status=1\n"), plain


def test_install_the_guests_node_is_ready_through_allotctl(installed: Guest) -> None:
    name = installed.sh("hostname").strip()
    deadline = time.monotonic() + CONVERGE_SECONDS
    while (states := node_states(installed)).get(name) != "ready":
        assert time.monotonic() < deadline, f"{name} never ready: {states}"
        time.sleep(1)


def test_install_a_deployments_limits_appear_in_the_v2_files(installed: Guest) -> None:
    answer = allotctl(
        installed,
        "deploy",
        "team-a",
        f"--name={DEPLOYMENT}",
        f"--image={IMAGE}",
        "--cpu=0.5",
        "--cpu-limit=1",
        "--memory=64Mi",
        "--",
        "sleep",
        "3600",
    )
    (view,) = answer["containers"]
    container_id = view["record"]["id"]
    wait_in_guest(installed, f"docker ps -q --filter label=allot.id={container_id} | grep -q .")
    # The deploy's answer holds Docker's default weight; the pool update that follows gives
    # the container its pool's (a namespace's own pool joins the tree on demand). The
    # files must come to what the record says now.
    deadline = time.monotonic() + CONVERGE_SECONDS
    while True:
        record = allotctl(installed, "container", container_id)["record"]
        expected = expected_files(
            msgspec.convert(record["limits"], Limits),
            runc=installed.runc_version,
            online=installed.online,
            memory_nodes=installed.memory_nodes,
        )
        files = installed.cgroup_files(container_id)
        found = {name: files.get(name) for name in expected}
        if found == expected or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert found == expected
    # in its pool's slice, which the agent had systemd weight with its shares (its only
    # member's), from within the unit's sandbox
    where = installed.cgroup_dir(container_id).rsplit("/", 1)[0]
    assert where.startswith("system.slice/system-allotpool_team_a_"), where
    assert installed.sh(f"cat /sys/fs/cgroup/{where}/cpu.weight").strip() == files["cpu.weight"]


def ours(guest: Guest) -> dict[str, str]:
    """The Docker id and start time of the deployment's containers, by allot id."""
    mine = f"team-a-{DEPLOYMENT}-"
    return {key: value for key, value in guest.started().items() if key.startswith(mine)}


def test_install_restarting_the_agent_restarts_no_container(installed: Guest) -> None:
    before = ours(installed)
    assert len(before) == 1, before
    pid = main_pid(installed, "allot-agent")
    # Returns once the new agent has reconciled (READY=1 follows its first reconcile).
    installed.sh("systemctl restart allot-agent")
    assert main_pid(installed, "allot-agent") not in (0, pid)
    assert ours(installed) == before


def test_install_a_stopped_agent_is_restarted_by_the_watchdog(installed: Guest) -> None:
    installed.sh(
        f"mkdir -p {Path(WATCHDOG_DROP_IN).parent} && "
        f"printf '[Service]\\nWatchdogSec={WATCHDOG_SECONDS}s\\n' > {WATCHDOG_DROP_IN} && "
        "systemctl daemon-reload && systemctl restart allot-agent"
    )
    show = "systemctl show --value allot-agent -p"
    restarts = int(installed.sh(f"{show} NRestarts"))
    # Timed in the guest, where each ssh command would add seconds: from the SIGSTOP until
    # systemd has started the agent again (the new one's own start, seconds more in the
    # emulated guest, is waited for after).
    took = installed.sh(
        f"start=$(date +%s.%N); kill -STOP $({show} MainPID); "
        f"for _ in $(seq {int(CONVERGE_SECONDS * 2)}); do "
        f'[ "$({show} NRestarts)" -gt {restarts} ] && break; sleep 0.2; done; '
        'awk "BEGIN { print $(date +%s.%N) - $start }"',
        timeout=CONVERGE_SECONDS,
    )
    wait_in_guest(installed, "systemctl is-active --quiet allot-agent")
    journal = installed.sh("journalctl -u allot-agent --no-pager -o cat")
    assert f"Watchdog timeout (limit {WATCHDOG_SECONDS}s)!" in journal
    assert int(installed.sh(f"{show} NRestarts")) == restarts + 1
    assert float(took) <= WATCHDOG_SECONDS + 10, f"restarted after {took.strip()} s"


def test_install_run_twice_changes_nothing(installed: Guest) -> None:
    before = installed.sh(SNAPSHOT)
    said = installed.sh(f"{INSTALL} 2>&1", timeout=INSTALL_SECONDS)
    assert installed.sh(SNAPSHOT) == before
    changes = ("started", "restarted", "wrote", "made", "copied")
    assert not [line for line in said.splitlines() if line.split()[1] in changes], said


def test_install_an_upgrade_restarts_the_services_and_keeps_the_config(
    installed: Guest, wheelhouse: Path, tmp_path: Path
) -> None:
    # The same version with other code, as a new checkout's wheelhouse may be.
    source = tmp_path / "allot"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".*", "build", "*.egg-info"))
    with (source / "shared" / "__init__.py").open("a") as init:
        init.write(f"{UPGRADED}\n")
    upgrade = tmp_path / "wheels"
    shutil.copytree(wheelhouse, upgrade, ignore=shutil.ignore_patterns("allot-*.whl"))
    pip_wheel("--no-deps", source, into=upgrade)
    installed.put(upgrade, f"{WHEELS}-upgrade")
    config = installed.sh(CONFIG_FILES)
    pids = {service: main_pid(installed, service) for service in SERVICES}
    containers = ours(installed)

    said = installed.sh(f"{INSTALL}-upgrade 2>&1", timeout=INSTALL_SECONDS)

    for service in SERVICES:
        assert f"install: restarted {service} (its program or unit changed)" in said
        assert main_pid(installed, service) not in (0, pids[service])
    installed_init = "/opt/allot/venv/lib/python3*/site-packages/shared/__init__.py"
    assert UPGRADED in installed.sh(f"cat {installed_init}")
    assert installed.sh(CONFIG_FILES) == config
    assert ours(installed) == containers


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ("", "say what this host runs: --coordinator, --agent or both"),
        ("--agent --node-cert /etc/allot/api-token", "--node-cert and --node-key go together"),
        ("--coordinator --wheels /nowhere", "--wheels /nowhere: no such directory"),
        ("--coordinator --wheels /etc/allot", "--wheels /etc/allot holds no allot-*.whl"),
        ("--agent --ca-file /nowhere/ca.pem", "/nowhere/ca.pem: no such file, or not readable"),
        ("--coordinator --agnet", "unknown argument --agnet"),
    ],
    ids=["no-role", "cert-without-key", "no-wheelhouse", "empty-wheelhouse", "no-ca", "typo"],
)
def test_install_refuses_bad_arguments_and_changes_nothing(
    installed: Guest, arguments: str, says: str
) -> None:
    before = installed.sh(SNAPSHOT)
    said = installed.sh(f"/allot/scripts/install {arguments} 2>&1; echo status=$?")
    assert said.startswith(f"install: {says}"), said
    assert said.endswith("\nstatus=1\n"), said
    assert installed.sh(SNAPSHOT) == before


def test_install_uninstall_leaves_no_unit_and_keeps_the_config(installed: Guest) -> None:
    config = installed.sh(CONFIG_FILES)
    installed.sh("/allot/scripts/install --uninstall")
    left = installed.sh(
        "ls /etc/systemd/system /etc/systemd/system/*.wants /usr/local/bin /opt | grep allot; "
        "systemctl list-units --all --no-legend 'allot-*'",
        check=False,
    )
    assert left == ""
    assert installed.sh(CONFIG_FILES) == config
    assert installed.sh("readlink /var/lib/allot").strip() == "private/allot"
