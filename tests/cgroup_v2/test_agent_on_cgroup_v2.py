"""The real agent on a cgroup v2 host: a coordinator process on this machine, an agent in
the VM (Debian bookworm, Docker with the systemd cgroup driver), driven through the API.
What Docker was asked for is read back from the container's v2 files in the guest."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import pytest

from bench.pools_on_host import run_cases, set_up, wait_for_weights
from shared.pool_cgroups import SYSTEMD, parent_of, slice_directory
from shared.protocol import Limits
from tests.cgroup_v2.guest import AGENT_PID_FILE, HOST_FROM_GUEST, Guest
from tests.cgroup_v2.guest_meter import GuestMeter
from tests.cgroup_v2.v2_files import expected_files
from tests.docker.conftest import IMAGE
from tests.docker.pool_cores import assert_cases
from tests.e2e.processes import JOIN_TOKEN, Service, api, wait_for_node_state

pytestmark = pytest.mark.cgroup_v2
NODE = "cgroup2-vm"
# The guest is emulated and slow: its agent needs seconds where a host needs milliseconds.
LEASE_SECONDS = 60.0
HEARTBEAT_SECONDS = 2.0
CONVERGE_SECONDS = 240.0
BUSY = ["sh", "-c", "while :; do :; done"]
WINDOW_SECONDS = 10.0  # of CPU measured, WINDOWS times per case
WINDOWS = 2
LIMIT_FILES = (
    "cpuset.cpus",
    "cpuset.mems",
    "cpu.weight",
    "cpu.max",
    "memory.max",
    "memory.low",
    "memory.swap.max",
)
T = TypeVar("T")


@dataclass
class Cluster:
    url: str
    guest: Guest
    agent_log: Path
    agent: subprocess.Popen[bytes]

    def start_agent(self) -> None:
        server = f"http://{HOST_FROM_GUEST}:{self.url.rsplit(':', 1)[1]}"
        self.agent = self.guest.start_agent(
            server=server, node=NODE, token=JOIN_TOKEN, log=self.agent_log
        )

    def log(self) -> str:
        return self.agent_log.read_text() if self.agent_log.exists() else ""


@pytest.fixture(scope="module")
def cluster(guest: Guest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A coordinator here and the guest's agent registered with it as NODE."""
    workdir = tmp_path_factory.mktemp("cgroup2-cluster")
    coordinator = Service.coordinator(
        workdir, lease_seconds=LEASE_SECONDS, heartbeat_seconds=HEARTBEAT_SECONDS
    ).start()
    url = coordinator.wait_for(r"coordinator listening url=(\S+)").group(1)
    running = Cluster(url, guest, workdir / "agent.log", subprocess.Popen(["true"]))
    try:
        running.start_agent()
        wait_for_node_state(url, NODE, "ready", timeout=CONVERGE_SECONDS)
        yield running
    finally:
        guest.sh(f"kill -9 $(cat {AGENT_PID_FILE})", check=False)
        running.agent.wait(timeout=30)
        coordinator.stop()


def until(read: Callable[[], T], holds: Callable[[T], bool], *, what: str) -> T:
    """``read()`` once ``holds`` of it; fails after CONVERGE_SECONDS with the last value."""
    deadline = time.monotonic() + CONVERGE_SECONDS
    while True:
        value = read()
        if holds(value):
            return value
        assert time.monotonic() < deadline, f"{what} never held; last: {value}"
        time.sleep(1.0)


def deploy(url: str, name: str, **spec: Any) -> str:
    """The id of the one container of a new deployment in team-a, once it runs."""
    body = {"name": name, "image": IMAGE, "command": ["sleep", "3600"], "count": 1} | spec
    answer = api(url, "/v1/namespaces/team-a/deployments", body)
    (view,) = answer["containers"]
    container_id: str = view["record"]["id"]
    until(lambda: view_of(url, container_id)["state"], "running".__eq__, what="running")
    return container_id


Deploy = Callable[..., str]


def no_containers_left(url: str) -> None:
    """Wait until the books hold no container on NODE: the agent has removed each one from
    the guest's Docker and said so, and what they held is free. (Asked of the coordinator
    here: a ``docker ps`` in the guest costs seconds of the emulator's CPU, and Docker
    empty came before the books were, so the next deployment was refused for room.)"""
    until(
        lambda: api(url, f"/v1/containers?node={NODE}")["containers"],
        lambda found: not found,
        what="no containers on the node",
    )


@pytest.fixture
def deployed(cluster: Cluster) -> Iterator[Deploy]:
    """``deploy`` for one test; its deployments are deleted after it, and their containers
    waited for, so that each test has the guest's two CPUs to itself."""
    names: list[str] = []

    def deploy_one(name: str, **spec: Any) -> str:
        names.append(name)
        return deploy(cluster.url, name, **spec)

    yield deploy_one
    for name in names:
        api(cluster.url, f"/v1/namespaces/team-a/deployments/{name}", method="DELETE")
    no_containers_left(cluster.url)


def view_of(url: str, container_id: str) -> dict[str, Any]:
    view: dict[str, Any] = api(url, f"/v1/containers/{container_id}")
    return view


def wanted(view: dict[str, Any]) -> Limits:
    return msgspec.convert(view["record"]["limits"], Limits)


def files_for(cluster: Cluster, limits: Limits) -> dict[str, str]:
    """The v2 files a container with ``limits`` should have in the guest."""
    guest = cluster.guest
    return expected_files(
        limits,
        runc=guest.runc_version,
        online=guest.online,
        memory_nodes=guest.memory_nodes,
    )


def held(cluster: Cluster, container_id: str, names: dict[str, str]) -> dict[str, str]:
    files = cluster.guest.cgroup_files(container_id)
    return {name: files.get(name, "(missing)") for name in names}


def assert_files_match(cluster: Cluster, container_id: str) -> None:
    """The container's v2 files hold the limits the coordinator wants, soon."""
    expected = files_for(cluster, wanted(view_of(cluster.url, container_id)))
    until(lambda: held(cluster, container_id, expected), expected.__eq__, what="v2 files")


def test_discovery_offers_the_guests_cpus_and_memory(cluster: Cluster) -> None:
    guest = cluster.guest
    node = api(cluster.url, f"/v1/nodes/{NODE}")
    inventory = node.get("inventory", node)
    assert inventory["online"] == str(guest.online) == "0-1"
    assert [cpu["id"] for cpu in inventory["cpus"]] == [0, 1]
    assert [(n["id"], n["cpus"]) for n in inventory["numa_nodes"]] == [(0, "0-1")]
    kib = int(guest.sh("awk '/^MemTotal:/ { print $2 }' /proc/meminfo"))
    assert inventory["memory"] == kib * 1024
    assert inventory["problems"] == []


def test_limits_on_create_and_realloc_appear_in_the_v2_files(
    cluster: Cluster, deployed: Deploy
) -> None:
    bound = deployed("bound", resources={"cpu": "0.5", "memory": "64Mi"}, cpu_bind=True)
    shared = deployed("shared", resources={"cpu": "0.3", "memory": "32Mi"})
    soft = deployed("soft", resources={"cpu": "0.2", "memory": "32Mi"}, soft_memory=True)
    for container_id in (bound, shared, soft):
        assert_files_match(cluster, container_id)
        view = view_of(cluster.url, container_id)
        observed = msgspec.convert(view["observed"]["limits"], Limits)
        assert files_for(cluster, observed) == files_for(cluster, wanted(view))  # read back
    assert cluster.guest.cgroup_files(bound)["cpu.max"].startswith("max ")
    assert not cluster.guest.cgroup_files(shared)["cpu.max"].startswith("max ")
    assert cluster.guest.cgroup_files(soft)["memory.low"] != "0"

    docker_id = cluster.guest.docker_id(bound)
    changed = api(
        cluster.url, f"/v1/containers/{bound}", {"cpu": "0.25", "memory": "32Mi"}, method="PATCH"
    )
    assert changed["record"]["limits"] != view_of(cluster.url, shared)["record"]["limits"]
    assert_files_match(cluster, bound)
    assert cluster.guest.docker_id(bound) == docker_id  # changed live, not made anew


def stat(text: str) -> dict[str, int]:
    return {name: int(value) for name, value in (line.split() for line in text.splitlines())}


def test_usage_is_measured_from_cpu_stat_and_memory_current(
    cluster: Cluster, deployed: Deploy
) -> None:
    busy = deployed("busy", command=BUSY, resources={"cpu": "0.5", "memory": "32Mi"})
    observed = until(
        lambda: view_of(cluster.url, busy)["observed"],
        lambda seen: (seen.get("cpu_usage") or 0) > 0.1 and bool(seen.get("memory_usage")),
        what="usage reported",
    )
    # a CFS quota of half a core: what the agent measured cannot be more
    assert 0.1 < observed["cpu_usage"] <= 0.6
    files = cluster.guest.cgroup_files(busy)
    assert stat(files["cpu.stat"])["usage_usec"] > 0
    in_use = int(files["memory.current"]) - stat(files["memory.stat"])["inactive_file"]
    # a busybox shell's memory hardly moves between the agent's reading and this one
    assert abs(observed["memory_usage"] - in_use) <= max(in_use // 2, 256 * 1024)
    assert observed["memory_usage"] <= int(files["memory.max"])


# Six busy loops on the guest's two CPUs, outside any container: one task at least
# always waits for a CPU, so the guest's PSI "some" goes towards 100%. (Three held it at
# 53% once, under the 60% to enter, while other jobs loaded this machine: an emulated
# guest's CPUs stall with their host threads.) Each is stopped by
# its pid (kept in BURNERS), and by `timeout` should the test end before it.
BURNERS = "/run/allot-test-burners"
BURN = (
    f"rm -f {BURNERS}; for i in 1 2 3 4 5 6; do setsid timeout 600 sh -c 'while :; do :; done'"
    f" </dev/null >/dev/null 2>&1 & echo $! >> {BURNERS}; done"
)


def node_pressure(url: str) -> dict[str, Any] | None:
    pressure: dict[str, Any] | None = api(url, f"/v1/nodes/{NODE}")["pressure"]
    return pressure


def pressure_events(url: str) -> list[str]:
    events = api(url, f"/v1/events?node={NODE}")["events"]
    return [e["kind"] for e in events if e["kind"] in ("pressure", "relieved")]


def events_come(url: str, before: int, kinds: list[str]) -> None:
    """The node's pressure events since the first ``before`` are ``kinds``, soon: an event
    is committed after the node's view has changed, so a read between the two found the
    node relieved and no "relieved" yet (CI)."""
    until(lambda: pressure_events(url)[before:], kinds.__eq__, what=f"the events {kinds}")


def test_a_containers_own_cpu_pressure_is_reported(cluster: Cluster, deployed: Deploy) -> None:
    busy = deployed("throttled", command=BUSY, resources={"cpu": "0.5", "memory": "32Mi"})
    observed = until(
        lambda: view_of(cluster.url, busy)["observed"],
        lambda seen: seen.get("cpu_pressure") is not None,
        what="the container's own cpu.pressure reported",
    )
    assert 0 <= observed["cpu_pressure"] <= 100
    assert cluster.guest.cgroup_files(busy)["cpu.pressure"].startswith("some avg10=")


def test_cpu_burners_in_the_guest_put_its_node_under_psi_pressure_and_back(
    cluster: Cluster,
) -> None:
    # The earlier tests' containers gone: a throttled busy loop alone keeps the guest's
    # PSI near 45 % (its task waits while throttled), above the threshold to leave.
    no_containers_left(cluster.url)
    until(
        lambda: node_pressure(cluster.url),
        lambda seen: bool(seen and not seen["under"]),
        what="the node not under pressure",
    )
    before = len(pressure_events(cluster.url))
    try:
        cluster.guest.sh(BURN)
        pressure = until(
            lambda: node_pressure(cluster.url),
            lambda seen: bool(seen and seen["under"]),
            what="the node under pressure",
        )
        assert pressure is not None
        assert pressure["source"] == "psi"  # the guest's real /proc/pressure/cpu
        assert pressure["avg10"] >= 60.0  # the default threshold to enter
        events_come(cluster.url, before, ["pressure"])
    finally:
        cluster.guest.sh(f"kill $(cat {BURNERS})", check=False)
    relieved = until(
        lambda: node_pressure(cluster.url),
        lambda seen: bool(seen and not seen["under"]),
        what="the node relieved",
    )
    assert relieved is not None
    assert relieved["avg10"] <= 30.0
    events_come(cluster.url, before, ["pressure", "relieved"])


def test_drift_is_put_back_in_the_v2_files(cluster: Cluster, deployed: Deploy) -> None:
    drifting = deployed("drifting", resources={"cpu": "0.5", "memory": "32Mi"}, cpu_bind=True)
    before = cluster.guest.cgroup_files(drifting)
    docker_id = cluster.guest.docker_id(drifting)
    cluster.guest.sh(f"docker update --cpu-shares 2 --cpuset-cpus 0-1 {docker_id} >/dev/null")
    observed = until(
        lambda: view_of(cluster.url, drifting)["observed"],
        lambda seen: bool(seen.get("drift")),
        what="drift reported",
    )
    assert any(change.startswith("cpu_shares 2 -> ") for change in observed["drift"])
    assert_files_match(cluster, drifting)
    after = cluster.guest.cgroup_files(drifting)
    assert [after[name] for name in LIMIT_FILES] == [before[name] for name in LIMIT_FILES]
    assert cluster.guest.docker_id(drifting) == docker_id  # put back in place


def test_a_killed_agent_adopts_its_containers_and_restarts_none(
    cluster: Cluster, deployed: Deploy
) -> None:
    kept = {
        deployed("kept-bound", resources={"cpu": "0.5", "memory": "32Mi"}, cpu_bind=True),
        deployed("kept-shared", resources={"cpu": "0.3", "memory": "32Mi"}),
    }
    # the earlier tests' containers gone (``deployed``), so the new agent has none to remove
    before = cluster.guest.started()
    assert set(before) == kept
    files = {container_id: cluster.guest.cgroup_files(container_id) for container_id in before}
    cluster.guest.kill9_agent()
    cluster.agent.wait(timeout=30)
    offset = len(cluster.log())
    cluster.start_agent()
    until(
        lambda: cluster.log()[offset:],
        lambda text: f"adopted {len(before)} containers" in text,
        what="adopted",
    )
    assert cluster.guest.started() == before
    for container_id, held_before in files.items():
        now = cluster.guest.cgroup_files(container_id)
        assert [now[name] for name in LIMIT_FILES] == [held_before[name] for name in LIMIT_FILES]
    restarted = cluster.log()[offset:]
    assert "container started" not in restarted
    assert "container removed" not in restarted


@dataclass
class Burners:
    ids: dict[str, list[str]]  # pool -> its burners' allot ids
    meter: GuestMeter


@pytest.fixture
def held_burners(cluster: Cluster) -> Iterator[Burners]:
    """bench/pools_on_host.py's burners in the guest, running with their weights, then
    stopped (SIGSTOP) until the test resumes them: deploying them in the emulated guest
    takes a minute or more, which overlaps the session's last tests while a quiet test
    waits for its turn. Deleted afterwards."""
    # the earlier tests' containers gone: the burners fill the node's CPU requests
    no_containers_left(cluster.url)
    ids = set_up(cluster.url, NODE, request="1")
    every = [cid for members in ids.values() for cid in members]
    try:
        until(
            lambda: [view_of(cluster.url, cid)["state"] for cid in every],
            lambda states: set(states) == {"running"},
            what="burners running",
        )
        wait_for_weights(cluster.url, ids, within=CONVERGE_SECONDS)
        weights = {cid: cluster.guest.cgroup_files(cid)["cpu.weight"] for cid in every}
        assert [weights[cid] for cid in ids["pa"]] == ["13"] * 3, weights  # 341 shares
        assert weights[ids["pb"][0]] == "39", weights  # 1024 shares
        # each pool's burners in its slice, weighted with their shares added (1023, 1024)
        for pool, members in ids.items():
            where = slice_directory(parent_of(NODE, pool, SYSTEMD))
            assert {cluster.guest.cgroup_dir(cid).rsplit("/", 1)[0] for cid in members} == {where}
            assert cluster.guest.sh(f"cat /sys/fs/cgroup/{where}/cpu.weight").strip() == "39", pool
        meter = GuestMeter(cluster.guest, ids)
        meter.hold(True)
        yield Burners(ids, meter)
    finally:
        for pool in ids:
            api(cluster.url, f"/v1/namespaces/{pool}/deployments/burn", method="DELETE")


@pytest.mark.quiet
def test_pools_get_their_fair_cores_in_the_guest_and_a_busy_pool_takes_the_idle_cpu(
    cluster: Cluster, held_burners: Burners
) -> None:
    """bench/pools_on_host.py's cases on the guest's two CPUs (each burner requesting 1 CPU,
    overcommit 2; fair shares 1.0 and 1.0 core), with tests/docker/pool_cores.py's checks
    in cores, measured in the guest (``GuestMeter``). runc 1.1.5 writes each container's
    shares as a cpu.weight linearly (3 x 13 in pa, 39 in pb), and the agent has systemd
    weight each pool's slice so, with its members' shares added: 39 against 39, and with
    the strong guarantee 69 against 10 (a slice left at systemd's default, 100 each, would
    split the CPU 1 to 1 there, not 1.75 to 0.25). ``quiet``: the
    guest's CPUs are this machine's, so nothing else may run meanwhile (tests/quiet.py)."""
    ids, meter = held_burners.ids, held_burners.meter
    meter.hold(False)
    cases = run_cases(
        cluster.url,
        ids,
        meter,
        window=WINDOW_SECONDS,
        windows=WINDOWS,
        settle=lambda: wait_for_weights(cluster.url, ids, within=CONVERGE_SECONDS),
    )
    assert_cases(cases)
