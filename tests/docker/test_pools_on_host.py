"""Pools on the real engine, in cores (issue 28): bench/pools_on_host.py's cases through
a real coordinator and agent on a node of this host's 2 CPUs, CPU burners in two pools of
equal weight, 3 in ``pa`` and 1 in ``pb``, each requesting 1 CPU with the node's
``cpu_overcommit`` 2, so the tree's fair shares are 1.0 and 1.0 core; the checks are
tests/docker/pool_cores.py's, and ``pa``'s burners keep their own CPU limit as their only
CFS quota (the request, 1 core, when no ``cpu_limit`` is given): no quota holds ``pa`` at
its share. A single-threaded burner at a 1-core quota may still be throttled a period
now and then, so the quota itself is checked, not the throttle count (an earlier form
counted throttles and failed, in one quiet run, on a single throttled period).

Cores are what the host gives when nothing else runs, so the test is ``quiet``: it runs at
the end of the session, alone (tests/quiet.py). Each case is measured over WINDOWS
windows of WINDOW_SECONDS, one cluster for all three.
"""

from __future__ import annotations

from pathlib import Path

import docker
import pytest

from agent.runtime.usage import cgroup_dir
from bench.pools_on_host import HostMeter, host_pid, run_cases, set_up, wait_for_weights
from tests.docker.clusters import running_cluster, wait_until_running
from tests.docker.pool_cores import assert_cases

pytestmark = [pytest.mark.docker, pytest.mark.quiet]
WINDOW_SECONDS = 10.0
WINDOWS = 2


OWN_LIMIT_US = 100_000  # each burner's own limit: its request of 1 CPU, a whole period


def cfs_quota(client: docker.DockerClient, container_id: str) -> int:
    """The container's CFS quota in microseconds a period (-1: none)."""
    quota = cgroup_dir(host_pid(client, container_id), "cpu") / "cpu.cfs_quota_us"
    return int(quota.read_text())


def test_pools_get_their_fair_cores_and_a_busy_pool_takes_the_idle_cpu(
    tmp_path: Path, docker_client: docker.DockerClient
) -> None:
    with running_cluster(tmp_path, docker_client, nodes=1, cpus_each=2) as cluster:
        ids = set_up(cluster.url, cluster.nodes[0], request="1")
        wait_until_running(cluster.url, 4)
        cases = run_cases(
            cluster.url,
            ids,
            HostMeter(docker_client, ids),
            window=WINDOW_SECONDS,
            windows=WINDOWS,
            settle=lambda: wait_for_weights(cluster.url, ids),
        )
        quotas = [cfs_quota(docker_client, cid) for cid in ids["pa"]]

    assert_cases(cases)
    # No quota below each burner's own limit: what pa got beyond its share, the weights gave
    assert quotas == [OWN_LIMIT_US] * len(quotas), f"pa's burners' CFS quotas: {quotas}"
