"""The cgroup v2 host: one virtual machine for the whole test run (scripts/cgroup2-host).

``make test`` runs these tests; the first run on a machine builds the VM's image (as root;
its one boot ends in a saved guest), and every run starts the VM once, restoring that
guest rather than booting it (the README has the measured times). In a session that holds
other tests too, a pytest of their own starts the VM and runs them from the end of
collection on, beside the rest of the suite (tests/beside.py); this session's items for
them come after the host's groups, before the quiet tests, and report that run's
outcomes. Alone (``pytest -m cgroup_v2``) they run here, the VM's start begun in the
background as soon as they are collected. When the VM cannot be provided the tests fail,
saying why; they are skipped only when a person asks for it with
ALLOT_SKIP_CGROUP_V2_TESTS=1.

The VM costs the whole run time, so a run that starts it says at its end how long it took,
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

from tests.beside import BUDGET_SECONDS, ONE_RUN, RESULTS, Beside, Reported
from tests.cgroup_v2.guest import SCRIPT, Guest, GuestUnavailable, Starting, compile_for_the_guest
from tests.cgroup_v2.wheels import WheelBuild

OPT_OUT = "ALLOT_SKIP_CGROUP_V2_TESTS"
# A VM already running (scripts/cgroup2-host start DIR) that the tests use and leave running:
# for working on these tests without a start per run.
RUNNING = "ALLOT_CGROUP2_RUN_DIR"
MARKER = "cgroup_v2"
VM_DIR = "ALLOT_CGROUP2_VM_DIR"  # set in the VM tests' own run: where it starts its VM
VM_DIR_NAME = "vm"
_starting: list[Starting] = []  # the one start of this run, once begun
_beside: list[Beside] = []  # the VM tests' own pytest run, when they run beside the rest
_wheels: list[WheelBuild] = []  # the install tests' wheelhouse, once its build began
INSTALL_TESTS = "test_install_in_the_vm.py"
# Monotonic times: "start" of the run (this file is read as collection begins: a
# pytest_sessionstart here would never be called, since that hook fires before any
# conftest below the root is read), and "vm" when the VM's tests began.
_clock: dict[str, float] = {"start": time.monotonic()}


def _wanted(items: list[pytest.Item]) -> bool:
    if os.environ.get(OPT_OUT) == "1" or os.environ.get(RUNNING):
        return False
    return any(i.get_closest_marker(MARKER) for i in items)


@pytest.hookimpl(trylast=True)  # after ``-m`` and ``-k`` have deselected what they do
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The VM's tests after all others, in their own order; in a session that holds
    others too, run in a pytest of their own beside them (``beside``)."""
    items.sort(key=lambda item: item.get_closest_marker(MARKER) is not None)
    ours = [item for item in items if item.get_closest_marker(MARKER)]
    if not ours or len(ours) == len(items) or os.environ.get(RESULTS) or not _wanted(items):
        return
    if config.option.collectonly or os.environ.get(ONE_RUN) == "1":
        return
    run_dir = Path(tempfile.mkdtemp(prefix="allot-cgroup2-tests-"))
    (run_dir / VM_DIR_NAME).mkdir()
    beside = Beside.start(
        run_dir,
        [item.nodeid for item in ours],
        "cgroup v2 tests",
        environment={VM_DIR: str(run_dir / VM_DIR_NAME)},
        on_stop=Guest(run_dir / VM_DIR_NAME).stop,
    )
    _beside.append(beside)
    for index, item in enumerate(ours, start=len(items) - len(ours)):
        assert item.parent is not None
        reported = Reported.from_parent(item.parent, name=item.name, beside=beside)
        reported.add_marker(MARKER)
        items[index] = reported


def pytest_collection_finish(session: pytest.Session) -> None:
    if _wanted(session.items) and not _beside and not _starting:
        _starting.append(Starting(_vm_dir()))
        if any(item.path.name == INSTALL_TESTS for item in session.items):
            _wheels.append(WheelBuild())


def _vm_dir() -> Path:
    """Where this run starts the VM: the session that started it chose it, to stop the VM
    should it have to end this run (``Beside.stop``)."""
    given = os.environ.get(VM_DIR)
    return Path(given) if given else Path(tempfile.mkdtemp(prefix="allot-cgroup2-"))


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker(MARKER):
        _clock.setdefault("vm", time.monotonic())


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A run that started the VM itself (alone, or the VM tests' own run) stops it and
    says what its start and the VM's tests took; tests/beside.py ends a run beside."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for starting in _starting:
        starting.stop()
        if reporter is not None:  # what the start took, e.g. "ready after 12s"
            for line in starting.said().splitlines():
                reporter.write_line(line)
            _say_the_time(reporter)
        shutil.rmtree(starting.run_dir, ignore_errors=True)
    _starting.clear()
    _beside.clear()
    for build in _wheels:
        build.remove()
    _wheels.clear()


def _say_the_time(reporter: pytest.TerminalReporter) -> None:
    now = time.monotonic()
    took, vm_part = now - _clock["start"], now - _clock.get("vm", now)
    reporter.write_line(
        f"the run took {took:.0f}s, of which {vm_part:.0f}s for the cgroup v2 tests at its end"
    )
    if took > BUDGET_SECONDS:
        over = f"{took - BUDGET_SECONDS:.0f}s over make test's budget of {BUDGET_SECONDS}s"
        reporter.write_line(over, yellow=True)


@pytest.fixture(scope="session")
def guest() -> Guest:
    """The started VM; pytest_sessionfinish stops it."""
    if os.environ.get(OPT_OUT) == "1":
        pytest.skip(f"{OPT_OUT}=1: cgroup v2 tests skipped on request")
    if running := os.environ.get(RUNNING):
        compile_for_the_guest()
        return Guest(Path(running))
    if not _starting:
        _starting.append(Starting(_vm_dir()))
    try:
        return _starting[0].wait()
    except GuestUnavailable as error:
        pytest.fail(
            f"the cgroup v2 VM could not be provided:\n{error}\n(see {SCRIPT}; "
            f"set {OPT_OUT}=1 to skip these tests on purpose)",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def wheelhouse() -> Path:
    """The install tests' wheelhouse (tests/cgroup_v2/wheels.py), built in the background
    from the end of collection on when this run starts the VM, else now."""
    if not _wheels:
        _wheels.append(WheelBuild())
    return _wheels[0].wait()
