"""The etcd benchmarks' smallest runs, each on a local 3-member etcd of its own: fenced
commits against SQLite's, the fleet on etcd, and leader takeovers. The figures are
checked for sense, never for speed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# The session's etcd cluster is not used: each run starts its own. Asking for it makes
# these tests fail with how to install etcd, or skip when a person asks for it.
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("etcd_cluster")]

REPOSITORY = Path(__file__).resolve().parents[2]


def smoke(script: str, tmp_path: Path, *args: str) -> tuple[Any, str]:
    """Run ``bench/<script> --smoke``; its JSON figures and its output."""
    output = tmp_path / "figures.json"
    run = subprocess.run(
        [
            sys.executable,
            str(REPOSITORY / "bench" / script),
            "--smoke",
            f"--workdir={tmp_path}",
            f"--json={output}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPOSITORY,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return json.loads(output.read_text()), run.stdout


def test_fenced_etcd_and_sqlite_each_commit_every_shape(tmp_path: Path) -> None:
    figures, printed = smoke("etcd_commits.py", tmp_path)
    runs = {(r["engine"], r["shape"], r["clients"]) for r in figures["runs"]}
    cases = {("decision", 1), ("decision", 4), ("deployment", 1)}
    engines = ("sqlite", "etcd", "etcd-unmarked")
    assert runs == {(engine, *case) for engine in engines for case in cases}
    for run in figures["runs"]:
        assert run["commits"] >= 1
        assert 0 < run["p50_ms"] <= run["p99_ms"]
    assert "etcd (fenced) over SQLite" in printed
    assert "etcd (fenced) over etcd without markers" in printed
    assert len(figures["load"]) == 3


def test_the_fleet_on_etcd_acknowledges_every_container_and_survives_a_restart(
    tmp_path: Path,
) -> None:
    figures, printed = smoke("fleet.py", tmp_path, "--store=etcd")
    assert figures["failed"] == ""
    assert figures["store"] == "etcd"
    assert figures["containers_asked"] == figures["containers_committed"] == 200
    assert figures["containers_acknowledged"] == 200
    assert figures["refused_posts"] == 0
    assert figures["sessions_dropped"] == 0
    assert figures["held_before_restart"] == figures["held_after_restart"] == 205
    assert figures["restart_agents_back"] == 20
    assert "store: etcd" in printed


def test_every_kill_of_the_leader_is_followed_by_a_deploy_the_standby_accepts(
    tmp_path: Path,
) -> None:
    figures, printed = smoke("takeover.py", tmp_path)
    assert figures["ttl"] == 2
    (size,) = figures["sizes"]
    assert size["containers"] == 200
    assert len(size["takeover_s"]) == len(size["took_s"]) == 2
    # The key outlives the kill by up to its TTL, and the standby takes over after it.
    assert all(
        0 < took < takeover
        for took, takeover in zip(size["took_s"], size["takeover_s"], strict=True)
    )
    assert "min / median / max" in printed
