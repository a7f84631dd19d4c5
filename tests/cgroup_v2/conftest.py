"""The cgroup v2 host: one virtual machine for the whole test run (scripts/cgroup2-host).

``make test`` runs these tests; the first run on a machine builds the VM's image (as root),
and every run boots it once (the README has the measured times). The boot starts in the
background as soon as the tests are collected, and these tests run last, so the boot
overlaps the rest of the suite. When the VM cannot be provided the tests fail, saying why;
they are skipped only when a person asks for it with ALLOT_SKIP_CGROUP_V2_TESTS=1.

The VM costs the whole run time, so a run that boots it says at its end how long it took,
the VM's part, and by how much it went over make test's budget of 15 minutes. It does not
fail for the time: a slow machine is no broken build, and CI has its own limit.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from tests.cgroup_v2.guest import SCRIPT, Booting, Guest, GuestUnavailable

OPT_OUT = "ALLOT_SKIP_CGROUP_V2_TESTS"
# A VM already running (scripts/cgroup2-host start DIR) that the tests use and leave running:
# for working on these tests without a boot per run.
RUNNING = "ALLOT_CGROUP2_RUN_DIR"
MARKER = "cgroup_v2"
BUDGET_SECONDS = 15 * 60
_boot: list[Booting] = []  # the one boot of this run, once begun
# Monotonic times: "start" of the run (this file is read as collection begins: a
# pytest_sessionstart here would never be called, since that hook fires before any
# conftest below the root is read), and "vm" when the VM's tests began.
_clock: dict[str, float] = {"start": time.monotonic()}


def _wanted(items: list[pytest.Item]) -> bool:
    if os.environ.get(OPT_OUT) == "1" or os.environ.get(RUNNING):
        return False
    return any(i.get_closest_marker(MARKER) for i in items)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The VM's tests after all others, in their own order."""
    items.sort(key=lambda item: item.get_closest_marker(MARKER) is not None)


def pytest_collection_finish(session: pytest.Session) -> None:
    if _wanted(session.items) and not _boot:
        _boot.append(Booting(Path(tempfile.mkdtemp(prefix="allot-cgroup2-"))))


def pytest_sessionfinish(session: pytest.Session) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if _boot and reporter is not None:
        _say_the_time(reporter)
    for booting in _boot:
        booting.stop()
        if reporter is not None:  # what the boot took, e.g. "ready after 52s"
            for line in booting.said().splitlines():
                reporter.write_line(line)
        shutil.rmtree(booting.run_dir, ignore_errors=True)
    _boot.clear()


def _say_the_time(reporter: pytest.TerminalReporter) -> None:
    now = time.monotonic()
    took = now - _clock["start"]
    vm_part = now - _clock.get("vm", now)
    reporter.write_line(
        f"the run took {took:.0f}s, of which {vm_part:.0f}s for the cgroup v2 tests at its end"
    )
    if took > BUDGET_SECONDS:
        over = f"{took - BUDGET_SECONDS:.0f}s over make test's budget of {BUDGET_SECONDS}s"
        reporter.write_line(over, yellow=True)


@pytest.fixture(scope="session")
def guest() -> Guest:
    """The booted VM; pytest_sessionfinish stops it."""
    _clock.setdefault("vm", time.monotonic())
    if os.environ.get(OPT_OUT) == "1":
        pytest.skip(f"{OPT_OUT}=1: cgroup v2 tests skipped on request")
    if running := os.environ.get(RUNNING):
        return Guest(Path(running))
    if not _boot:
        _boot.append(Booting(Path(tempfile.mkdtemp(prefix="allot-cgroup2-"))))
    try:
        return _boot[0].wait()
    except GuestUnavailable as error:
        pytest.fail(
            f"the cgroup v2 VM could not be provided:\n{error}\n(see {SCRIPT}; "
            f"set {OPT_OUT}=1 to skip these tests on purpose)",
            pytrace=False,
        )
