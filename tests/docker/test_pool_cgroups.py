"""A cgroup per pool on this host's kernel (issue 28, pools spec section 9), through a real
coordinator and agent: pools ``pa`` and ``pb`` of equal weight on a node of one CPU, so
each has a fair share of half a core. ``pa`` has an idle container (``sleep``) and a busy
one (a shell loop), each requesting 0.5 CPU with a limit of 1; ``pb`` one busy container
requesting 1 CPU. The coordinator weighs ``pa``'s two at 256 shares each and ``pb``'s at
512; the agent puts each pool's containers in the pool's cgroup, weighted with those added:
512 and 512.

Side by side (how they ran before) the idle container's weight went to both busy ones by
weight, and ``pa``'s busy one got a third of the CPU the two busy ones got (the kernel-split
model's 2/3 of a core against 4/3 on two cores; ``bench/pool_cgroups.py`` measured 33.3 %).
In their pools' cgroups it gets half, the spec's answer: ``pa`` wants half a core, its
share, and ``pb`` is above its own. Shares are read from the containers' cgroups
(``cpuacct.usage``, v2 ``cpu.stat``) over WINDOWS windows of WINDOW_SECONDS; as a ratio of
the two busy containers on one CPU, they do not depend on what else runs on the machine,
but the test is ``quiet`` all the same (tests/quiet.py): it burns a CPU for its windows.
"""

from __future__ import annotations

import time
from pathlib import Path

import docker
import pytest

from agent.runtime.pool_cgroups import PoolCgroupFiles
from agent.runtime.usage import cgroup_dir, sample
from bench.pools_on_host import host_pid
from shared.pool_cgroups import parent_of
from tests.docker.clusters import deploy, running_cluster, wait_for_weight, wait_until_running
from tests.docker.conftest import IMAGE
from tests.e2e.processes import api

pytestmark = [pytest.mark.docker, pytest.mark.quiet]
WINDOW_SECONDS = 5.0
WINDOWS = 2
BURN = ["sh", "-c", "while :; do :; done"]
IDLE = ["sleep", "3600"]
SPEC_PART = 0.5  # pa's part of what the two busy containers get
SIDE_BY_SIDE_PART = 1 / 3  # ... with the containers side by side
TOLERANCE = 0.05


def _deployment(name: str, command: list[str], cpu: str, limit: str) -> dict[str, object]:
    resources = {"cpu": cpu, "cpu_limit": limit, "memory": "16Mi"}
    return {"name": name, "image": IMAGE, "command": command, "count": 1, "resources": resources}


def test_a_pools_idle_container_leaves_its_weight_to_its_busy_sibling(
    tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    with running_cluster(tmp_path, docker_client, nodes=1, cpus_each=1) as cluster:
        url, node = cluster.url, cluster.nodes[0]
        parents = {pool: parent_of(node, pool) for pool in ("pa", "pb")}
        capacity = {"mode": "delta", "cpu_overcommit": "2"}
        api(url, f"/v1/nodes/{node}/capacity", capacity, "PATCH")
        for pool in parents:
            api(url, f"/v1/pools/{pool}", {}, method="PUT")
        (idle,) = deploy(url, "pa", _deployment("idle", IDLE, "0.5", "1"))
        (pa_busy,) = deploy(url, "pa", _deployment("busy", BURN, "0.5", "1"))
        (pb_busy,) = deploy(url, "pb", _deployment("busy", BURN, "1", "1"))
        wait_until_running(url, 3)
        members = ((idle, "pa", 256), (pa_busy, "pa", 256), (pb_busy, "pb", 512))
        for record, _, shares in members:
            wait_for_weight(url, record["id"], shares)  # each its own entitlement
        files = PoolCgroupFiles()
        expected = "20" if files.v2 else "512"  # v2: 512 shares as runc 1.1.5 writes them
        _wait_for_text({pool: files.weight_file(p) for pool, p in parents.items()}, expected)
        pids = {record["id"]: host_pid(docker_client, record["id"]) for record, _, _ in members}
        for record, pool, _ in members:
            where = cgroup_dir(pids[record["id"]], "cpu")
            assert where.parent.name == parents[pool].rsplit("/", 1)[1], (record["id"], where)
        busy = pids[pa_busy["id"]], pids[pb_busy["id"]]
        parts = [_pa_part(*busy) for _ in range(WINDOWS)]
    # every window: pa's busy container gets what its idle sibling leaves, not a third
    for part in parts:
        assert abs(part - SPEC_PART) <= TOLERANCE, (parts, SIDE_BY_SIDE_PART)


def _wait_for_text(files: dict[str, Path], text: str) -> None:
    deadline = time.monotonic() + 30.0
    while True:
        held = {
            pool: path.read_text().strip() if path.exists() else None
            for pool, path in files.items()
        }
        if all(value == text for value in held.values()):
            return
        assert time.monotonic() < deadline, f"the pools' cgroups hold {held}, not {text}"
        time.sleep(0.1)


def _pa_part(pa_pid: int, pb_pid: int) -> float:
    """``pa``'s busy container's part of the CPU time both busy containers used over one
    window."""
    before = {pid: sample(pid, at=time.monotonic()).cpu_ns for pid in (pa_pid, pb_pid)}
    time.sleep(WINDOW_SECONDS)
    after = {pid: sample(pid, at=time.monotonic()).cpu_ns for pid in (pa_pid, pb_pid)}
    used = {pid: (after[pid] or 0) - (before[pid] or 0) for pid in (pa_pid, pb_pid)}
    return used[pa_pid] / (used[pa_pid] + used[pb_pid])
