"""The quiet phase (tests/quiet.py): quiet tests are ordered last, and a run beside a
session waits for its turn, failing at once when the session is gone and after its
deadline when the turn never comes."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.quiet import NoTurn, Turn

ROOT = Path(__file__).resolve().parents[1]


def collected(*paths: str) -> list[str]:
    """The node ids of a real pytest's collection of ``paths``, in the order it would run
    them (the VM's tests in this process's order, not in a run beside it)."""
    environment = {**os.environ, "ALLOT_SKIP_CGROUP_V2_TESTS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *paths],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_quiet_tests_come_after_every_other_test_each_group_in_its_order() -> None:
    pools_on_host = "tests/docker/test_pools_on_host.py"
    in_the_vm = "tests/cgroup_v2/test_agent_on_cgroup_v2.py"
    ids = collected(pools_on_host, in_the_vm, "tests/test_quiet.py")
    files = [i.split("::")[0] for i in ids]
    # this file's tests, the VM's other tests (the VM's last), then the quiet ones: the
    # host's, then the VM's
    assert files[-2:] == [pools_on_host, in_the_vm]
    assert all("test_pools" in i for i in ids[-2:])
    assert files[:-2] == sorted(files[:-2], key=lambda f: f == in_the_vm)
    assert set(files[:-2]) == {"tests/test_quiet.py", in_the_vm}


def test_the_turn_waits_for_its_file(tmp_path: Path) -> None:
    turn = Turn(tmp_path / "turn", os.getppid(), time.monotonic() + 60)
    threading.Timer(0.3, (tmp_path / "turn").touch).start()
    began = time.monotonic()
    turn.wait()
    assert 0.3 <= time.monotonic() - began < 5


def test_a_turn_whose_session_is_gone_fails_at_once(tmp_path: Path) -> None:
    turn = Turn(tmp_path / "turn", os.getpid(), time.monotonic() + 60)  # not our parent
    began = time.monotonic()
    with pytest.raises(NoTurn, match=rf"pid {os.getpid()}\) ended before its other tests"):
        turn.wait()
    assert time.monotonic() - began < 1


def test_a_turn_that_never_comes_fails_at_its_deadline(tmp_path: Path) -> None:
    turn = Turn(tmp_path / "turn", os.getppid(), time.monotonic() + 0.5)
    with pytest.raises(NoTurn, match="did not finish its other tests within"):
        turn.wait()
