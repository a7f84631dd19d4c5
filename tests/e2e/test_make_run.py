"""``make run`` (scripts/run-local) with real processes: a second one, while one runs
from the same state directory or on the same port, stops before it starts anything and
says why; the first one keeps its coordinator and its agent's session. The first run
sets allotctl's context ``local``, so ``allotctl nodes`` works with nothing exported.

Each run's allotctl config file is in the test's directory (``ALLOT_CONFIG``), never the
machine's ~/.config."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.processes import BIN, Service, free_port

pytestmark = pytest.mark.e2e
RUN_LOCAL = Path(__file__).resolve().parents[2] / "scripts" / "run-local"
NODE = "e2e-make-run"


def make_run(state: Path, port: int, log: Path) -> Service:
    """``make run`` keeping its state in ``state`` and serving on ``port``; its agent is
    node ``NODE``, so it touches no container of another agent of this host. allotctl's
    config file is ``allotctl.toml`` beside ``log``."""
    env = {
        "ALLOT_RUN_DIR": str(state),
        "ALLOT_RUN_PORT": str(port),
        "ALLOT_AGENT_NODE_NAME": NODE,
        "ALLOT_CONFIG": str(log.parent / "allotctl.toml"),
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
    }
    return Service("make run", [str(RUN_LOCAL)], env, log).start()


@pytest.fixture
def runs() -> Iterator[list[Service]]:
    """The runs a test starts; each is stopped as Ctrl-C would (SIGTERM to the script
    stops its coordinator and agent too)."""
    started: list[Service] = []
    yield started
    for run in started:
        try:
            run.stop()
        except subprocess.TimeoutExpired:
            assert run.process is not None
            run.process.kill()


def refused(run: Service, expected: str) -> None:
    """The second run exited 1, saying ``expected``, having started nothing."""
    assert run.process is not None
    assert run.process.wait(timeout=30) == 1
    text = run.text()
    assert expected in text, text
    for started in ("allot is running", "coordinator listening", "registered with"):
        assert started not in text, text


def test_a_second_run_stops_before_starting_anything(tmp_path: Path, runs: list[Service]) -> None:
    """One first run; then a second from the same directory, one from another directory
    on the same port, and one whose store a coordinator still holds (the first run's
    script gone, its lock file with it). All three start nothing, and the first run's
    agent keeps its session. A real run takes about 10 s to register on the shared
    2-core VM, so the three share it."""
    port = free_port()
    state = tmp_path / "state"
    first = make_run(state, port, tmp_path / "first.log")
    runs.append(first)
    first.wait_for(r"allot is running", timeout=30)
    first.wait_for(r"INFO registered with coordinator node=" + NODE, timeout=30)
    assert first.process is not None
    nothing_exported(tmp_path / "allotctl.toml", first.text())
    attempts = [
        (
            state,
            port,
            f"run-local: allot is already running from {state} (pid {first.process.pid})",
        ),
        (tmp_path / "other-checkout", port, f"run-local: 127.0.0.1:{port} is in use"),
        (
            state,
            free_port(),
            f"run-local: the store {state}/allot.db is open in another coordinator",
        ),
    ]
    for index, (directory, on_port, expected) in enumerate(attempts):
        if index == 2:
            (state / "run.lock").unlink()
        second = make_run(directory, on_port, tmp_path / f"second-{index}.log")
        runs.append(second)
        refused(second, expected)
    assert "agent session replaced" not in first.text()
    assert first.process.poll() is None
    assert first.stop() == 0
    assert "allot stopped" in first.text()


def nothing_exported(config: Path, banner: str) -> None:
    """The run made context ``local`` current in ``config`` (mode 0600), said so, and
    ``allotctl nodes`` shows its node with no variable but ``ALLOT_CONFIG``."""
    assert f"allotctl context local in {config} (current)" in banner, banner
    assert f"try      {BIN.relative_to(RUN_LOCAL.parents[1])}/allotctl nodes\n" in banner
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    env = {"ALLOT_CONFIG": str(config), "PATH": os.environ["PATH"]}
    nodes = subprocess.run(
        [str(BIN / "allotctl"), "nodes"], env=env, capture_output=True, text=True, timeout=30
    )
    assert nodes.returncode == 0, nodes.stderr
    assert NODE in nodes.stdout
