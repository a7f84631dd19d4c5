"""The fleet benchmark's smallest run (``bench/fleet.py --smoke``): a real coordinator
process, 20 simulated agents over real websockets, 200 containers in two deployments, a
lease load, single deploys and a restart. The figures are checked for sense, never for
speed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPOSITORY = Path(__file__).resolve().parents[2]


def test_the_smoke_run_acknowledges_every_container_and_survives_a_restart(
    tmp_path: Path,
) -> None:
    output = tmp_path / "figures.json"
    run = subprocess.run(
        [
            sys.executable,
            str(REPOSITORY / "bench" / "fleet.py"),
            "--smoke",
            f"--workdir={tmp_path}",
            f"--json={output}",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPOSITORY,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    figures = json.loads(output.read_text())
    assert figures["failed"] == ""
    assert (figures["agents"], figures["deployments"]) == (20, 2)
    assert figures["containers_asked"] == figures["containers_committed"] == 200
    assert figures["containers_acknowledged"] == 200
    assert figures["refused_posts"] == 0
    assert figures["committed_per_s"] > 0
    assert figures["acknowledged_per_s"] > 0
    assert len(figures["posts_ms"]) == 2
    assert figures["post_last_over_first"] > 0
    assert figures["sessions_dropped"] == 0
    # The smoke run's two deploys can be over within one lease interval (30 ms for both
    # on a quiet machine), so no lease may fall in their window; any that did was
    # answered.
    during = figures["lease_deploys"]
    assert during["errors"] == during["missed"] == 0
    assert (during["p50_ms"] is None) == (during["answered_per_s"] == 0)
    assert figures["coordinator_rss_mb"] > 0
    assert figures["singles"] == 5
    assert figures["single_post_p50_ms"] > 0
    # 200 containers and 5 single ones, all in the welcomes after the restart
    assert figures["held_before_restart"] == figures["held_after_restart"] == 205
    assert figures["restart_agents_back"] == 20
    assert 0 < figures["restart_ready_s"] <= figures["restart_reconnected_s"]
    assert "containers/s" in run.stdout
