"""The alert rules of contrib/prometheus: valid for ``promtool check rules``, and each
alert proven by ``promtool test rules`` on input series (allot.rules.test.yml)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.prometheus.tools import RULES, RULES_TESTS, tool

ALERTS = {
    "AllotNodeLost",
    "AllotContainersPending",
    "AllotQuotaOverMax",
    "AllotPoolIntegralVolumeExhausted",
    "AllotNoLeader",
    "AllotStoreCommitSlow",
    "AllotNodeCpuPressure",
}


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("promtool"), *args],
        cwd=RULES.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )


def rules() -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_promtool_checks_the_rules() -> None:
    checked = promtool("check", "rules", RULES.name)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules())} rules found" in checked.stdout


def test_every_alert_is_there_and_fires_in_promtools_unit_tests() -> None:
    alerts = {rule["alert"] for rule in rules() if "alert" in rule}
    assert alerts == ALERTS
    tested = yaml.safe_load(RULES_TESTS.read_text())["tests"]
    firing = {
        case["alertname"]
        for test in tested
        for case in test.get("alert_rule_test", [])
        if case["exp_alerts"]
    }
    assert firing == ALERTS  # each shown firing, not only quiet
    result = promtool("test", "rules", RULES_TESTS.name)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_catches_a_broken_rule(tmp_path: Path) -> None:
    """The check above would see a mistake: an expression that does not parse fails it,
    naming the rule."""
    broken = tmp_path / "broken.rules.yml"
    text = RULES.read_text().replace("max(allot_nodes{", "max(allot_nodes{{", 1)
    broken.write_text(text)
    checked = promtool("check", "rules", str(broken))
    assert checked.returncode == 1
    assert '"AllotNodeLost": could not parse expression' in checked.stdout + checked.stderr
