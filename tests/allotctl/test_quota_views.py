"""The quota views of allotctl: amounts as a person reads them."""

from __future__ import annotations

import json

from allotctl.views import quotas_table


def test_the_quotas_table_shows_memory_in_binary_units() -> None:
    quota = {
        "name": "team-a",
        "kind": "ElasticQuota",
        "namespaces": ["team-a"],
        "min": {"cpu": "1"},
        "max": {"cpu": "1.5", "memory": 2**31},
        "status": {"used": {"cpu": "1.5", "memory": 167_772_160}, "over_quota": {"cpu": "0.5"}},
    }
    body = json.dumps({"quotas": [quota], "total_min": {}, "capacity": {}, "warnings": []})
    header, row = quotas_table(body.encode()).splitlines()
    assert header.split() == ["NAME", "KIND", "NAMESPACES", "MIN", "MAX", "USED", "OVER-QUOTA"]
    assert row.split() == [
        "team-a",
        "elastic",
        "team-a",
        "cpu=1",
        "cpu=1.5,",
        "memory=2.0Gi",
        "cpu=1.5,",
        "memory=160.0Mi",
        "cpu=0.5",
    ]
