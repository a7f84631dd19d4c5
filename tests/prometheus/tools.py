"""Debian's Prometheus and promtool, which scripts/provision installs (package
``prometheus``); a test that needs them fails, saying so, when they are missing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "contrib" / "prometheus" / "allot.rules.yml"
RULES_TESTS = ROOT / "contrib" / "prometheus" / "allot.rules.test.yml"
DASHBOARD = ROOT / "contrib" / "grafana" / "allot.json"


def tool(name: str) -> str:
    """The path of ``name`` (prometheus, promtool)."""
    found = shutil.which(name, path="/usr/bin:/usr/local/bin")
    if found is None:
        pytest.fail(
            f"{name} is missing: run scripts/provision (as root it installs Debian's"
            " prometheus package)",
            pytrace=False,
        )
    return found
