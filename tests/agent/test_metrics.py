"""The agent's metrics: its address setting, the figures of its registry, and its
``/metrics`` server on a real socket."""

from __future__ import annotations

import asyncio
import socket
import threading

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from agent.config import AgentConfig
from agent.listen_address import split_host_port
from agent.metrics import AgentMetrics, ContainerFigures
from agent.metrics_server import metrics_site
from agent.runtime.settings import Settings
from shared.cpuset import CpuSet
from shared.protocol import CpuPressure, Limits

AGENT_FAMILIES = {
    "allot_agent_container_cpu_usage_cores",
    "allot_agent_container_memory_usage_bytes",
    "allot_agent_container_cpu_limit_cores",
    "allot_agent_container_restarts",
    "allot_agent_drift_corrections",
    "allot_agent_reconcile_seconds",
    "allot_agent_docker_request_seconds",
    "allot_agent_connected",
    "allot_agent_cpu_pressure_percent",
}
WEB = ContainerFigures(
    namespace="team-a",
    deployment="web",
    container="c-1",
    cpu_limit_cores=2.0,
    restarts=3,
    cpu_usage_cores=0.25,
    memory_usage_bytes=16 << 20,
)
NOT_RUNNING = ContainerFigures(
    namespace="team-a", deployment="batch", container="c-2", cpu_limit_cores=0.5, restarts=0
)


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("127.0.0.1:7601", ("127.0.0.1", 7601)),
        ("[::1]:0", ("::1", 0)),
        (":7601", ("", 7601)),
        ("node-7.example:65535", ("node-7.example", 65535)),
    ],
)
def test_an_address_splits_into_host_and_port(address: str, expected: tuple[str, int]) -> None:
    assert split_host_port(address) == expected


@given(
    host=st.one_of(
        st.ip_addresses(v=4).map(str),
        st.ip_addresses(v=6).map(lambda ip: f"[{ip}]"),
        st.from_regex(r"[a-z][a-z0-9.-]{0,30}", fullmatch=True),
        st.just(""),
    ),
    port=st.integers(0, 65535),
)
def test_any_host_and_port_written_out_split_back(host: str, port: int) -> None:
    assert split_host_port(f"{host}:{port}") == (host.strip("[]"), port)


@pytest.mark.parametrize(
    ("address", "says"),
    [
        ("127.0.0.1", "is not host:port"),
        ("127.0.0.1:", "is not host:port"),
        ("127.0.0.1:http", "is not host:port"),
        ("127.0.0.1:-1", "is not host:port"),
        ("127.0.0.1:65536", "port 65536 is above 65535"),
        ("::1:7601", "IPv6 address in brackets"),
        ("127.0.0.1:\u0667", "is not host:port"),  # a digit, but not an ASCII one
    ],
)
def test_a_bad_address_is_refused_by_the_settings(address: str, says: str) -> None:
    with pytest.raises(ValueError, match=f"metrics_address: .*{says}"):
        AgentConfig(metrics_address=address)


def test_metrics_are_on_by_default_on_loopback_and_off_when_empty() -> None:
    assert AgentConfig().metrics_endpoint == ("127.0.0.1", 7601)
    assert AgentConfig(metrics_address="").metrics_endpoint is None


@pytest.mark.parametrize(
    ("limits", "cores"),
    [
        (Limits(cpuset_cpus="2-5"), 4.0),  # bound: its CPUs
        (Limits(cpuset_cpus="0-7", cpu_quota=150_000, cpu_period=100_000), 1.5),  # quota lower
        (Limits(cpuset_cpus="3", cpu_quota=400_000, cpu_period=100_000), 1.0),  # cpuset lower
        (Limits(), 8.0),  # no cpuset: every CPU online
    ],
    ids=["bound", "quota-lower", "cpuset-lower", "unset"],
)
def test_the_cpu_limit_is_the_cpuset_or_the_quota_whichever_is_lower(
    limits: Limits, cores: float
) -> None:
    settings = Settings.of(limits, online=CpuSet(range(8)), memory_nodes=CpuSet([0]))
    assert settings.cpu_limit_cores == cores


def scraped(text: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Each sample's value by name and sorted labels."""
    samples: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for one in family.samples:
            samples.setdefault(one.name, {})[tuple(sorted(one.labels.items()))] = one.value
    return samples


def labels_of(figures: ContainerFigures) -> tuple[tuple[str, str], ...]:
    return (
        ("container", figures.container),
        ("deployment", figures.deployment),
        ("namespace", figures.namespace),
    )


def test_the_registry_has_every_family_with_each_containers_figures() -> None:
    metrics = AgentMetrics()
    metrics.follow_containers(lambda: [WEB, NOT_RUNNING])
    metrics.follow_pressure(lambda: CpuPressure(source="psi", avg10=72.5, avg60=40.0))
    metrics.docker_call("inspect_container", 0.003)
    metrics.docker_call("inspect_container", 0.2)
    metrics.reconciled(0.04)
    metrics.drift_corrected()
    metrics.set_connected(True)
    text = metrics.render().decode()
    names = {family.name for family in text_string_to_metric_families(text)}
    assert names >= AGENT_FAMILIES
    assert {"process_resident_memory_bytes", "python_gc_collections", "python_info"} <= names
    samples = scraped(text)
    web, batch = labels_of(WEB), labels_of(NOT_RUNNING)
    assert samples["allot_agent_container_cpu_usage_cores"] == {web: 0.25}
    assert samples["allot_agent_container_memory_usage_bytes"] == {web: 16 << 20}
    assert samples["allot_agent_container_cpu_limit_cores"] == {web: 2.0, batch: 0.5}
    assert samples["allot_agent_container_restarts_total"] == {web: 3.0, batch: 0.0}
    assert samples["allot_agent_drift_corrections_total"] == {(): 1.0}
    assert samples["allot_agent_connected"] == {(): 1.0}
    calls = samples["allot_agent_docker_request_seconds_bucket"]
    assert calls[(("call", "inspect_container"), ("le", "0.005"))] == 1
    assert calls[(("call", "inspect_container"), ("le", "+Inf"))] == 2
    assert samples["allot_agent_reconcile_seconds_count"] == {(): 1.0}
    assert samples["allot_agent_cpu_pressure_percent"] == {(("source", "psi"),): 72.5}


def test_a_container_gone_from_the_runtime_has_no_series_left() -> None:
    held = [WEB, NOT_RUNNING]
    metrics = AgentMetrics()
    metrics.follow_containers(lambda: list(held))
    held.remove(WEB)
    samples = scraped(metrics.render().decode())
    assert set(samples["allot_agent_container_cpu_limit_cores"]) == {labels_of(NOT_RUNNING)}
    assert "allot_agent_container_cpu_usage_cores" not in samples


def test_the_nodes_pressure_follows_each_reading_and_is_absent_without_one() -> None:
    reading: list[CpuPressure | None] = [None]
    metrics = AgentMetrics()
    metrics.follow_pressure(lambda: reading[0])
    assert "allot_agent_cpu_pressure_percent" not in scraped(metrics.render().decode())
    reading[0] = CpuPressure(source="throttling", avg10=12.25)
    samples = scraped(metrics.render().decode())
    assert samples["allot_agent_cpu_pressure_percent"] == {(("source", "throttling"),): 12.25}


async def test_scrapes_over_http_while_docker_calls_are_timed_from_threads() -> None:
    """Fifty scrapes at once over real HTTP, while worker threads time calls: every
    answer is whole and parses, and no observation is lost."""
    metrics = AgentMetrics()
    metrics.follow_containers(lambda: [WEB])
    metrics.follow_pressure(lambda: CpuPressure(source="psi", avg10=3.0, avg60=2.0))

    def calls() -> None:
        for _ in range(500):
            metrics.docker_call("start", 0.01)

    threads = [threading.Thread(target=calls) for _ in range(4)]
    async with metrics_site(("127.0.0.1", 0), metrics) as url, aiohttp.ClientSession() as http:

        async def scrape() -> tuple[int, str, str]:
            async with http.get(url) as response:
                return response.status, response.content_type, await response.text()

        for thread in threads:
            thread.start()
        answers = await asyncio.gather(*(scrape() for _ in range(50)))
        for thread in threads:
            thread.join()
        final = await scrape()
    for status, content_type, text in answers:
        assert (status, content_type) == (200, "text/plain")
        assert {f.name for f in text_string_to_metric_families(text)} >= AGENT_FAMILIES
    count = scraped(final[2])["allot_agent_docker_request_seconds_count"]
    assert count == {(("call", "start"),): 2000.0}


async def test_an_address_taken_is_an_error_and_other_paths_are_not_found() -> None:
    metrics = AgentMetrics()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match="in use"):
            async with metrics_site(("127.0.0.1", port), metrics):
                pass
    async with metrics_site(("127.0.0.1", 0), metrics) as url, aiohttp.ClientSession() as http:
        async with http.get(url.replace("/metrics", "/")) as response:
            assert response.status == 404
        async with http.post(url) as response:
            assert response.status == 405
