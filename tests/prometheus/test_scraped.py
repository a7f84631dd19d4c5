"""A real Prometheus scraping a real coordinator and a real agent whose containers run on
the real Docker engine: each family is found through Prometheus' HTTP API with the values
the cluster holds, a container's memory against its cgroup, and a drain's pending
containers. The cluster and Prometheus are started once for the module (a few seconds);
the drain, which changes the cluster, is the last test."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import docker
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent.runtime.usage import cgroup_dir
from tests.docker.clusters import Cluster, deploy, running_cluster, wait_until_running
from tests.docker.conftest import IMAGE
from tests.e2e.processes import allotctl, api
from tests.prometheus.expressions import (
    dashboard_queries,
    families_named,
    rule_expressions,
    variable_queries,
)
from tests.prometheus.server import Prometheus, running_prometheus

pytestmark = [pytest.mark.docker, pytest.mark.e2e]

MIB = 1024 * 1024
QUOTA = {"namespace": "team-a", "min": {"cpu": "0.4"}, "max": {"cpu": "0.6"}}
# The namespace's own pool (named like it), which its deployments go to.
POOL = {
    "integral_guarantees": {
        "guarantee_type": "burst",
        "resource_flow": {"cpu": 1000},
        "burst_guarantee_resources": {"cpu": 2000},
    }
}
# Each holds 16 MiB in its /dev/shm (charged to its memory cgroup), then sleeps until
# SIGTERM (a shell as PID 1 would ignore it, and a drain would wait out its stop timeout).
HOLD_16_MIB = (
    "trap 'exit 0' TERM; head -c 16777216 /dev/zero > /dev/shm/fill; while :; do sleep 1; done"
)
WEB = {
    "name": "web",
    "image": IMAGE,
    "command": ["sh", "-c", HOLD_16_MIB],
    "count": 2,
    "resources": {"cpu": "0.1", "memory": "64Mi"},
}
WEB_SERIES = 'namespace="team-a", deployment="web"'
PSI_UNDER_PRESSURE = (
    "some avg10=85.00 avg60=42.50 avg300=1.00 total=123456789\n"
    "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
)
# The agent's measurement, and the coordinator's copy from the agent's reports.
MEMORY_FAMILIES = ("allot_agent_container_memory_usage_bytes", "allot_container_memory_usage_bytes")


@dataclass
class Watched:
    cluster: Cluster
    prometheus: Prometheus
    containers: list[str]  # allot ids of web's containers


@pytest.fixture(scope="module")
def watched(
    tmp_path_factory: pytest.TempPathFactory, docker_client: docker.DockerClient
) -> Iterator[Watched]:
    workdir = tmp_path_factory.mktemp("watched")
    # Passes every second, so that CPU usage (two samples) is known soon, and the whole
    # report every second: an agent sends a status only on change, its usage figures
    # (what the coordinator's usage families show) at least every full_report_seconds.
    resync = ("--resync-seconds=1", "--full-report-seconds=1")
    # The node's CPU pressure from a file in the kernel's PSI format: a node under
    # pressure whatever this machine's load, for the pressure families and their alert.
    psi = workdir / "cpu-pressure"
    psi.write_text(PSI_UNDER_PRESSURE)
    agent_args = (*resync, f"--cpu-pressure-file={psi}")
    with running_cluster(workdir, docker_client, nodes=1, agent_args=agent_args) as cluster:
        api(cluster.url, "/v1/elasticquotas/team-a", QUOTA, method="PUT")
        api(cluster.url, "/v1/pools/team-a", POOL, method="PUT")
        deploy(cluster.url, "team-a", WEB)
        views = wait_until_running(cluster.url, 2)
        targets = {
            "coordinator": f"{cluster.url}/metrics",
            "agent": cluster.agents[0].metrics_url(),
        }
        with running_prometheus(workdir / "prometheus", targets) as prometheus:
            prometheus.eventually("up", lambda up: up == [1.0, 1.0])
            yield Watched(cluster, prometheus, sorted(v["record"]["id"] for v in views))


def cgroup_memory(client: docker.DockerClient, container_id: str) -> int:
    """What the container's memory cgroup charges now: ``memory.usage_in_bytes`` under
    cgroup v1, ``memory.current`` under v2."""
    (found,) = client.api.containers(filters={"label": f"allot.id={container_id}"})
    pid = client.api.inspect_container(found["Id"])["State"]["Pid"]
    directory = cgroup_dir(pid, "memory")
    v1 = directory / "memory.usage_in_bytes"
    return int((v1 if v1.exists() else directory / "memory.current").read_text())


def test_the_agent_families_have_the_nodes_figures(watched: Watched) -> None:
    prometheus, ids = watched.prometheus, watched.containers
    assert prometheus.values('allot_agent_connected{job="agent"}') == [1.0]
    limits = prometheus.query(f"allot_agent_container_cpu_limit_cores{{{WEB_SERIES}}}")
    # Each asked for 0.1 CPU, which its CFS quota holds it to.
    assert sorted((labels["container"], value) for labels, value in limits) == [
        (ids[0], 0.1),
        (ids[1], 0.1),
    ]
    restarts = f"allot_agent_container_restarts_total{{{WEB_SERIES}}}"
    assert prometheus.values(restarts) == [0.0, 0.0]
    usage = f"allot_agent_container_cpu_usage_cores{{{WEB_SERIES}}}"
    cores = prometheus.eventually(usage, lambda found: len(found) == 2)
    assert all(0 <= one < 0.1 for one in cores), cores  # sleeping
    for call in ("containers", "inspect_container", "create_container", "start"):
        timed = f'allot_agent_docker_request_seconds_count{{job="agent", call="{call}"}}'
        (count,) = prometheus.values(timed)
        assert count >= (2 if call in ("create_container", "start") else 1), call
    assert prometheus.values("allot_agent_reconcile_seconds_count")[0] >= 1
    assert prometheus.values("allot_agent_drift_corrections_total") == [0.0]
    assert prometheus.values('process_resident_memory_bytes{job="agent"}')[0] > 10 * MIB
    assert prometheus.values('allot_agent_cpu_pressure_percent{source="psi"}') == [85.0]


def test_a_containers_memory_is_within_20_percent_of_its_cgroups(
    watched: Watched, docker_client: docker.DockerClient
) -> None:
    prometheus = watched.prometheus
    for container_id in watched.containers:
        for family in (
            "allot_agent_container_memory_usage_bytes",
            "allot_container_memory_usage_bytes",
        ):
            series = f'{family}{{container="{container_id}"}}'
            # The shm file is written within a second of the start; wait to see it all.
            (seen,) = prometheus.eventually(series, lambda found: found > [16 * MIB])
            charged = cgroup_memory(docker_client, container_id)
            assert abs(seen - charged) <= 0.2 * charged, (family, seen, charged)


def test_the_coordinator_families_have_the_books_figures(watched: Watched) -> None:
    prometheus, (node,) = watched.prometheus, watched.cluster.nodes
    assert prometheus.values('allot_coordinator_leader{job="coordinator"}') == [1.0]
    assert prometheus.values(f"allot_deployment_desired{{{WEB_SERIES}}}") == [2.0]
    running = f'allot_deployment_containers{{{WEB_SERIES}, state="running"}}'
    assert prometheus.eventually(running, lambda found: found == [2.0])
    assert prometheus.values(f'allot_deployment_containers{{{WEB_SERIES}, state="pending"}}') == [
        0.0
    ]
    assert prometheus.values('allot_quota_used{quota="team-a", resource="cpu"}') == [0.2]
    assert prometheus.values('allot_quota_max{quota="team-a", resource="cpu"}') == [0.6]
    assert prometheus.values('allot_quota_min{quota="team-a", resource="cpu"}') == [0.4]
    offered = f'allot_node_cpu_cores{{node="{node}", kind="offered"}}'
    assert prometheus.values(offered) == [1.0]
    assert prometheus.values(f'allot_node_cordoned{{node="{node}"}}') == [0.0]
    assert prometheus.values('allot_nodes{state="ready"}') == [1.0]
    pressure = f'allot_node_cpu_pressure_percent{{node="{node}", source="psi"}}'
    assert prometheus.values(pressure) == [85.0]
    assert prometheus.values(f'allot_node_cpu_pressured{{node="{node}"}}') == [1.0]
    assert prometheus.values('allot_pool_integral_capacity{pool="team-a"}')[0] > 0
    assert prometheus.query('allot_pool_fair_share{pool="team-a"}')
    usage = 'allot_pool_usage{pool="team-a", resource="memory"}'
    assert prometheus.eventually(usage, lambda found: found > [32 * MIB])  # its 2 x 16 MiB
    assert prometheus.values("allot_scheduler_pending_containers") == [0.0]
    assert prometheus.query("allot_build_info")
    commits = prometheus.values("allot_store_commit_seconds_count")
    assert commits >= [3]  # the quota, the pool, the deployment at least
    routes = prometheus.query('allot_http_request_duration_seconds_count{method="PUT"}')
    assert {labels["route"] for labels, _ in routes} >= {
        "/v1/elasticquotas/{name}",
        "/v1/pools/{name}",
    }


def test_the_rules_load_and_evaluate_without_errors(watched: Watched) -> None:
    prometheus = watched.prometheus

    def evaluated() -> list[dict[str, object]]:
        groups = prometheus.api("/api/v1/rules")["groups"]
        return [rule for group in groups for rule in group["rules"]]

    rules = evaluated()
    assert len(rules) == 10
    for rule in rules:
        assert rule["health"] in ("ok", "unknown"), rule
        assert not rule.get("lastError"), rule
    # A leader answers and no node is lost: those alerts are quiet, once the rules were
    # evaluated on scraped series (before the first scrape no coordinator says it leads,
    # and AllotNoLeader is pending for that moment).
    quiet = 'ALERTS{alertname=~"AllotNoLeader|AllotNodeLost"}'
    assert prometheus.eventually(quiet, lambda alerts: alerts == []) == []


def scraped_names(url: str) -> set[str]:
    """The name of every family ``url`` (a /metrics) serves now, also one without
    samples yet (a counter as ``x_total``), and of their samples (``x_bucket``)."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    names = set()
    for family in text_string_to_metric_families(text):
        names.add(f"{family.name}_total" if family.type == "counter" else family.name)
        names.update(one.name for one in family.samples)
    return names


def test_every_family_the_kit_names_is_scraped_and_every_query_runs(watched: Watched) -> None:
    live = scraped_names(f"{watched.cluster.url}/metrics")
    live |= scraped_names(watched.cluster.agents[0].metrics_url())
    queries = dashboard_queries() + variable_queries() + rule_expressions()
    for query in queries:
        assert families_named(query) <= live, (query, families_named(query) - live)
    for query in dashboard_queries() + rule_expressions():
        watched.prometheus.query(query)  # an expression Prometheus refuses fails here
    for query in variable_queries():
        label = query.removesuffix(")").rsplit(", ", 1)[1]
        family = query.removeprefix("label_values(").split(",", 1)[0]
        assert watched.prometheus.api(f"/api/v1/label/{label}/values", **{"match[]": family})


def test_a_drain_shows_its_pending_containers(watched: Watched) -> None:
    """Changes the cluster: the last test of the module."""
    prometheus, url, (node,) = watched.prometheus, watched.cluster.url, watched.cluster.nodes
    drained = allotctl(url, "drain", node)
    assert drained.returncode == 3, drained  # nowhere to go: pending
    pending = f'allot_deployment_containers{{{WEB_SERIES}, state="pending"}}'
    assert prometheus.eventually(pending, lambda found: found == [2.0]) == [2.0]
    assert prometheus.eventually(
        "allot_scheduler_pending_containers", lambda found: found == [2.0]
    ) == [2.0]
    assert prometheus.values(f'allot_node_cordoned{{node="{node}"}}') == [1.0]
    # The agent removes the drained containers: their series end.
    gone = f"allot_agent_container_cpu_limit_cores{{{WEB_SERIES}}}"
    assert prometheus.eventually(gone, lambda found: found == []) == []
