"""The PromQL of the kit (the Grafana dashboard's panels and variables, the rules), and the
metric families each expression names.

    families_named('sum by (le) (rate(allot_store_commit_seconds_bucket[5m]))')
    # {"allot_store_commit_seconds_bucket"}
    families_named("instance:allot_store_commit_seconds:p99_5m > 0.5")    # set()
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from tests.prometheus.tools import DASHBOARD, RULES

# Metric names as the kit writes them: allot's own and the standard collectors'; not the
# parts of a recording rule's name (``level:metric:operations``).
_FAMILY = re.compile(r"(?<![:\w])(?:allot|process|python)_[a-z0-9_]+(?![:\w])")
# What Grafana puts in place of the dashboard's variables before it sends a query.
_GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$namespace": ".*", "$node": ".*"}


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def panels() -> list[dict[str, Any]]:
    """Every panel but the rows that head them."""
    return [panel for panel in dashboard()["panels"] if panel["type"] != "row"]


def dashboard_queries() -> list[str]:
    """Each panel's expressions, as Grafana sends them to Prometheus."""
    queries = []
    for panel in panels():
        for target in panel["targets"]:
            expr: str = target["expr"]
            for variable, value in _GRAFANA_VARIABLES.items():
                expr = expr.replace(variable, value)
            queries.append(expr)
    return queries


def variable_queries() -> list[str]:
    """The ``label_values(...)`` queries of the dashboard's variables."""
    found = dashboard()["templating"]["list"]
    return [variable["definition"] for variable in found if variable["type"] == "query"]


def rule_expressions() -> list[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule["expr"] for group in groups for rule in group["rules"]]


def families_named(expr: str) -> set[str]:
    return set(_FAMILY.findall(expr))
