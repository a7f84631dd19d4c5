"""Groups of slow tests in pytest runs of their own, beside the session's other tests.

Most of the suite's wall time goes to a few groups of slow tests that mostly wait (real
Docker containers, real coordinator and agent processes, etcd clusters, the emulated VM),
one after the other in one process while a core sat idle. So when a session holds other
tests as well, it starts a pytest of its own for each such group as collection ends
(``GROUPS``; the VM's, with its start, in tests/cgroup_v2/conftest.py), and runs the rest
meanwhile. The session's own items for a group's tests (``Reported``, after its other
tests and before its quiet ones) wait for that run and report its outcome test by test, a
failure with that run's report of it. Quiet tests (tests/quiet.py) never go to a group's
run of the host: they measure alone, at the session's end.

    beside = Beside.start(run_dir, ["tests/docker/test_x.py::test_y", ...], "Docker tests")
    outcome = beside.outcome("tests/docker/test_x.py::test_y")   # waits for the run
    beside.stop()

The session asks a run for its first outcome once its own tests but the quiet ones are
done and every run before it has ended, so that is when it gives the run its turn for the
run's own quiet tests (the VM's) and waits for the run to end, at most ``RUN_SECONDS``.

Each run writes one JSON line per test phase (``record``, which tests/conftest.py calls
from ``pytest_runtest_logreport``) to the file named by ``RESULTS``.
ALLOT_TESTS_IN_ONE_RUN=1 keeps every test in the session (e.g. for ``--pdb``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.quiet import FIGURES, SESSION, TURN, is_quiet

RESULTS = "ALLOT_BESIDE_RESULTS"  # set in a run beside a session: where it records outcomes
ONE_RUN = "ALLOT_TESTS_IN_ONE_RUN"
ROOT = Path(__file__).resolve().parents[1]
TAIL_LINES = 40
TURN_NAME = "quiet-turn"
DURATIONS = "--durations=10"  # each run's slowest, printed in the session's summary
_SLOWEST = re.compile(r"\d+\.\d+s (setup|call|teardown) ")
# After its turn: the rest of the run's tests (all of them, should the session's other
# tests have ended first), then its quiet ones, which take minutes in the emulated guest.
RUN_SECONDS = 1800.0
# The host's groups: directories whose tests mostly wait on real parts, each run beside
# the session; the session keeps the rest, which mostly compute.
GROUPS = {"tests/docker/": "Docker tests", "tests/e2e/": "end-to-end tests"}
VM_MARKER = "cgroup_v2"  # the VM's tests: after the host's groups, so its turn comes after them
BUDGET_SECONDS = 15 * 60  # make test's
_STARTED = time.monotonic()  # this module is imported as the run's conftest is read
_started: list[Beside] = []  # every run this session started, in order


@dataclass(frozen=True)
class Outcome:
    status: str  # "passed", "failed" or "skipped"
    text: str  # a failure's report, or why it was skipped


class Beside:
    """A pytest run of one group's tests, started by the session; ``name`` (plural, e.g.
    "Docker tests") says which in the session's reports; ``on_stop`` ends what the run
    leaves running when it is cut short (the VM, which QEMU runs in a session of its own)."""

    def __init__(
        self,
        run_dir: Path,
        process: subprocess.Popen[bytes],
        name: str = "tests",
        on_stop: Callable[[], None] | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.name = name
        self._process = process
        self._on_stop = on_stop
        self._outcomes: dict[str, Outcome] | None = None
        self._stopped_after: float | None = None  # seconds after its turn, if it was stopped
        self.waited: tuple[float, float] | None = None  # monotonic: turn given, run ended

    @classmethod
    def start(
        cls,
        run_dir: Path,
        nodeids: list[str],
        name: str,
        *,
        environment: dict[str, str] | None = None,
        on_stop: Callable[[], None] | None = None,
    ) -> Beside:
        results = run_dir / "results.jsonl"
        run_environment = {
            **os.environ,
            **(environment or {}),
            RESULTS: str(results),
            TURN: str(run_dir / TURN_NAME),
            SESSION: str(os.getpid()),
        }
        with (run_dir / "pytest.log").open("wb") as log:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-p",
                    "no:cacheprovider",
                    "-q",
                    DURATIONS,
                    *nodeids,
                ],
                cwd=ROOT,
                env=run_environment,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a group of its own, for ``stop``
            )
        beside = cls(run_dir, process, name, on_stop)
        _started.append(beside)
        return beside

    def outcome(self, nodeid: str, *, within: float = RUN_SECONDS) -> Outcome:
        """The test's outcome in this run, once the run has ended; the first call
        gives the run its turn for its quiet tests, and stops it if it has not ended
        ``within`` seconds later."""
        if self._outcomes is None:
            (self.run_dir / TURN_NAME).touch()
            began = time.monotonic()
            try:
                self._process.wait(timeout=within)
            except subprocess.TimeoutExpired:
                self.stop()
                self._stopped_after = within
            self.waited = (began, time.monotonic())
            self._outcomes = _read(self.run_dir / "results.jsonl")
        found = self._outcomes.get(nodeid)
        if found is not None:
            return found
        if self._stopped_after is None:
            how = f"(exit status {self._process.returncode}) did not run {nodeid}"
        else:
            how = (
                f"had not ended {self._stopped_after:.0f} s after this session's other tests"
                f" were done and was stopped before it ran {nodeid}"
            )
        return Outcome(
            "failed",
            f"the {self.name}' own pytest run {how}; the end of its output:\n{self.said()}",
        )

    def said(self) -> str:
        """The end of the run's output."""
        return "\n".join(self._lines()[-TAIL_LINES:])

    def figures(self) -> list[str]:
        """The lines of the run's summary that give its quiet tests' figures and its
        slowest tests."""
        return [
            line
            for line in self._lines()
            if line.startswith(FIGURES) or _SLOWEST.match(line) is not None
        ]

    def _lines(self) -> list[str]:
        log = self.run_dir / "pytest.log"
        return log.read_text(errors="replace").splitlines() if log.exists() else []

    def stop(self) -> None:
        """End the run if it still runs (the session was cut short): its whole process
        group (pytest, a boot script, coordinators), then what ``on_stop`` ends."""
        if self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGTERM)
            self._process.wait()
            if self._on_stop is not None:
                self._on_stop()


def record(report: pytest.TestReport) -> None:
    """In a run beside a session: append the phase's outcome to the results file."""
    path = os.environ.get(RESULTS)
    if not path:
        return
    line = {
        "nodeid": report.nodeid,
        "when": report.when,
        "outcome": report.outcome,
        "text": _text_of(report),
    }
    with open(path, "a") as results:
        results.write(json.dumps(line) + "\n")


def _text_of(report: pytest.TestReport) -> str:
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])  # (file, line, reason)
    return report.longreprtext


def _read(path: Path) -> dict[str, Outcome]:
    """Each test's outcome: failed if a phase failed (that phase's report), else skipped
    if its setup was, else passed once its call passed."""
    phases: dict[str, list[dict[str, Any]]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            phases.setdefault(entry["nodeid"], []).append(entry)
    outcomes = {}
    for nodeid, entries in phases.items():
        failed = [e for e in entries if e["outcome"] == "failed"]
        skipped = [e for e in entries if e["outcome"] == "skipped"]
        called = any(e["when"] == "call" and e["outcome"] == "passed" for e in entries)
        if failed:
            outcomes[nodeid] = Outcome("failed", failed[0]["text"])
        elif skipped:
            outcomes[nodeid] = Outcome("skipped", skipped[0]["text"])
        elif called:
            outcomes[nodeid] = Outcome("passed", "")
    return outcomes


class Reported(pytest.Item):
    """A test of a group as this session sees it: the outcome it had in its group's run."""

    def __init__(self, *, beside: Beside, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.beside = beside

    def runtest(self) -> None:
        outcome = self.beside.outcome(self.nodeid)
        if outcome.status == "skipped":
            pytest.skip(outcome.text)
        if outcome.status == "failed":
            raise FailedBeside(outcome.text)

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str:
        if isinstance(excinfo.value, FailedBeside):
            return f"in the {self.beside.name}' own pytest run:\n{excinfo.value}"
        return str(super().repr_failure(excinfo, style))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, self.name


class FailedBeside(Exception):
    """The test failed in its group's run; the message is that run's report."""


def _group(item: pytest.Item) -> str | None:
    """The host's group ``item`` runs in beside the session, if any."""
    if is_quiet(item):
        return None
    return next((prefix for prefix in GROUPS if item.nodeid.startswith(prefix)), None)


def _order(item: pytest.Item) -> tuple[bool, bool, int]:
    """The session's order: its other tests, each group's, the VM's, the quiet ones."""
    group = _group(item)
    rank = -1 if group is None else list(GROUPS).index(group)
    return is_quiet(item), item.get_closest_marker(VM_MARKER) is not None, rank


def run_groups_beside(items: list[pytest.Item], config: pytest.Config) -> None:
    """Order ``items`` (``_order``) and, unless this run is itself beside a session, only
    collects, or was asked to keep every test (``ONE_RUN``), start each group's run and
    put the group's ``Reported`` items in place of its tests. A group is run beside only
    when the session holds other tests too."""
    items.sort(key=_order)
    if config.option.collectonly or os.environ.get(RESULTS) or os.environ.get(ONE_RUN) == "1":
        return
    for prefix, name in GROUPS.items():
        places = [index for index, item in enumerate(items) if _group(item) == prefix]
        if not places or len(places) == len(items):
            continue
        run_dir = Path(tempfile.mkdtemp(prefix="allot-beside-"))
        beside = Beside.start(run_dir, [items[index].nodeid for index in places], name)
        for index in places:
            item = items[index]
            assert item.parent is not None
            items[index] = Reported.from_parent(item.parent, name=item.name, beside=beside)


def end_runs(reporter: pytest.TerminalReporter | None) -> None:
    """At the session's end: say how long it took and waited for each run, stop every run
    that still runs, and print each one's quiet figures, slowest tests and outcome."""
    if _started and reporter is not None:
        reporter.ensure_newline()  # after the progress dots
        _say_the_time(reporter)
    for beside in _started:
        beside.stop()
        if reporter is not None:
            for line in beside.figures() + beside.said().splitlines()[-1:]:
                reporter.write_line(f"{beside.name}' run: {line}")
        shutil.rmtree(beside.run_dir, ignore_errors=True)
    _started.clear()


def _say_the_time(reporter: pytest.TerminalReporter) -> None:
    now = time.monotonic()
    took = now - _STARTED
    waits = [
        f"{ended - began:.0f}s for the {beside.name}' run"
        for beside in _started
        if beside.waited is not None
        for began, ended in [beside.waited]
    ]
    last = max((beside.waited[1] for beside in _started if beside.waited), default=now)
    reporter.write_line(
        f"the run took {took:.0f}s; at its end it waited {', '.join(waits) or 'for no run'}"
        f" (each run's quiet tests in its turn), then {now - last:.0f}s for its own quiet tests"
    )
    if took > BUDGET_SECONDS:
        over = f"{took - BUDGET_SECONDS:.0f}s over make test's budget of {BUDGET_SECONDS}s"
        reporter.write_line(over, yellow=True)
