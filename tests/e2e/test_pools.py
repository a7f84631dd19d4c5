"""Pools through allotctl against a real coordinator: listing, one pool, and a what-if
day of the seed's production + research example drawn into a PNG."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from tests.e2e.processes import Service, allotctl, api

pytestmark = pytest.mark.e2e

PRODUCTION = {
    "integral_guarantees": {
        "guarantee_type": "burst",
        "resource_flow": {"cpu": 1000},
        "burst_guarantee_resources": {"cpu": 2000},
    }
}
RESEARCH = {"integral_guarantees": {"guarantee_type": "relaxed", "resource_flow": {"cpu": 1000}}}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_pools_are_listed_shown_and_simulated_into_a_png(
    tmp_path: Path, services: list[Service]
) -> None:
    coordinator = Service.coordinator(tmp_path).start()
    services.append(coordinator)
    url = coordinator.wait_for(r"coordinator listening url=(\S+)").group(1)
    api(url, "/v1/pools/production", PRODUCTION, method="PUT")
    api(url, "/v1/pools/research", RESEARCH, method="PUT")

    listing = allotctl(url, "pools")
    assert listing.returncode == 0, listing.stderr
    rows = {line.split()[0]: line.split() for line in listing.stdout.splitlines()[1:] if line}
    assert rows["production"][1:3] == ["<root>", "burst"]
    assert rows["research"][1:3] == ["<root>", "relaxed"]

    one = allotctl(url, "pool", "production")
    assert one.returncode == 0, one.stderr
    assert "integral_guarantee_type" in one.stdout
    assert "estimated_burst_usage_duration_seconds" in one.stdout

    # The seed's day: production needs 2,000 cores for 12 hours, research 1,000 on
    # average (here 2,000 for the other 12 hours), on 2,000 cores.
    day = {
        "total": {"cpu": 2000},
        "timeline": [
            {"dt": 43200, "demands": {"research": {"cpu": 2000}}},
            {"dt": 43200, "demands": {"production": {"cpu": 2000}}},
        ],
        "substep": 600,
    }
    (tmp_path / "day.json").write_text(json.dumps(day))
    png = tmp_path / "day.png"
    simulated = allotctl(url, "pools", "simulate", str(tmp_path / "day.json"), "--plot", str(png))
    assert simulated.returncode == 0, simulated.stderr
    assert simulated.stdout.startswith("144 updates over 86400 s")
    assert "plotted production, research into" in simulated.stderr
    data = png.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk comes first
    assert (data[12:16], width > 0, height > 0) == (b"IHDR", True, True)


DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_guides_tree_applies_and_its_day_simulates_as_the_guide_shows(
    tmp_path: Path, services: list[Service]
) -> None:
    """docs/pools.md's files, through allotctl as the guide runs them."""
    coordinator = Service.coordinator(tmp_path).start()
    services.append(coordinator)
    url = coordinator.wait_for(r"coordinator listening url=(\S+)").group(1)
    applied = allotctl(url, "apply", "-f", str(DOCS / "pools" / "tree.yaml"))
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.splitlines() == [
        f"Pool {name} created"
        for name in ("prod", "web", "jobs", "research", "nightly", "analytics")
    ]
    again = allotctl(url, "pool", "set", "nightly", "--file", str(DOCS / "pools" / "nightly.json"))
    assert again.returncode == 0, again.stderr
    simulated = allotctl(url, "pools", "simulate", str(DOCS / "pools" / "day.json"))
    assert simulated.returncode == 0, simulated.stderr
    assert simulated.stdout.splitlines()[0] == "216 updates over 129600 s"
    rows = {line.split()[0]: line.split() for line in simulated.stdout.splitlines()[3:]}
    assert rows["production"][1:] == ["burst", "1", "0", "2.16e+04", "s"]
    assert rows["research"][1:] == ["relaxed", "1", "1", "600", "s"]
    assert (DOCS / "pools-simulate.png").read_bytes()[:8] == PNG_SIGNATURE
