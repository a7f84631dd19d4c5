"""The scrape benchmark's smallest run (``bench/metrics_scrape.py``): books of 40 nodes
and 1,000 containers built in-process, the collectors' exposition against the naive
reference that walks every container (the run fails unless their samples are equal).
Checked for sense, never for speed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]


def test_the_collectors_agree_with_a_walk_of_every_container() -> None:
    run = subprocess.run(
        [
            sys.executable,
            str(REPOSITORY / "bench" / "metrics_scrape.py"),
            "--nodes=40",
            "--containers=1000",
            "--runs=2",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPOSITORY,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "same samples" in run.stdout
    assert "1,000 containers (10 pending) in 2 deployments on 40 nodes" in run.stdout
