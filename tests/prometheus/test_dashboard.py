"""contrib/grafana/allot.json on its own: a dashboard Grafana can import, whose panels
cover the families of issue 27. (That every name exists, and every expression runs, is
checked against a live scrape and a real Prometheus in test_scraped.py.)"""

from __future__ import annotations

import pytest

from tests.prometheus.expressions import (
    dashboard,
    dashboard_queries,
    families_named,
    panels,
    variable_queries,
)

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
SHOWN = {
    "allot_coordinator_leader",
    "allot_nodes",
    "allot_scheduler_pending_containers",
    "allot_deployment_containers",
    "allot_deployment_desired",
    "allot_node_cpu_cores",
    "allot_node_memory_bytes",
    "allot_node_gpus",
    "allot_node_cordoned",
    "allot_node_cpu_pressure_percent",
    "allot_container_memory_usage_bytes",
    "allot_quota_min",
    "allot_quota_used",
    "allot_quota_max",
    "allot_quota_borrowed",
    "allot_pool_fair_share",
    "allot_pool_usage",
    "allot_pool_demand",
    "allot_pool_guarantee",
    "allot_pool_integral_volume",
    "allot_pool_integral_capacity",
    "allot_scheduler_pass_seconds_bucket",
    "allot_decision_seconds_bucket",
    "allot_store_commit_seconds_bucket",
    "allot_store_commit_operations_bucket",
    "allot_http_request_duration_seconds_bucket",
    "allot_lease_requests_total",
    "allot_agent_connected",
    "allot_agent_container_cpu_usage_cores",
    "allot_agent_container_cpu_limit_cores",
    "allot_agent_container_memory_usage_bytes",
    "allot_agent_container_restarts_total",
    "allot_agent_drift_corrections_total",
    "allot_agent_reconcile_seconds_bucket",
    "allot_agent_docker_request_seconds_bucket",
    "process_resident_memory_bytes",
}


def test_the_dashboard_is_one_grafana_can_import() -> None:
    board = dashboard()
    assert (board["uid"], board["title"]) == ("allot-cluster", "allot")
    assert board["templating"]["list"][0] | {"current": {}} == {
        "name": "datasource",
        "label": "Prometheus",
        "type": "datasource",
        "query": "prometheus",
        "current": {},
        "hide": 0,
    }
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in panels():
        place = panel["gridPos"]
        assert place["x"] + place["w"] <= 24, panel["title"]
        assert panel["datasource"] == DATASOURCE, panel["title"]
        refs = [target["refId"] for target in panel["targets"]]
        assert len(refs) == len(set(refs)) > 0, panel["title"]
        assert all(target["datasource"] == DATASOURCE for target in panel["targets"])


def test_the_panels_cover_the_families_of_the_issue() -> None:
    named = set().union(*(families_named(query) for query in dashboard_queries()))
    assert named >= SHOWN, sorted(SHOWN - named)
    for query in variable_queries():
        assert query.startswith("label_values(allot_"), query


@pytest.mark.parametrize(
    ("expr", "named"),
    [
        (
            "sum by (le) (rate(allot_store_commit_seconds_bucket[5m]))",
            {"allot_store_commit_seconds_bucket"},
        ),
        (
            "allot_quota_used > on (quota, resource) allot_quota_max",
            {"allot_quota_used", "allot_quota_max"},
        ),
        ("instance:allot_store_commit_seconds:p99_5m > 0.5", set()),
        ('process_resident_memory_bytes{job=~".*agent.*"}', {"process_resident_memory_bytes"}),
        ('max by (state) (allot_nodes{state="lost"})', {"allot_nodes"}),
    ],
)
def test_the_families_an_expression_names(expr: str, named: set[str]) -> None:
    assert families_named(expr) == named
